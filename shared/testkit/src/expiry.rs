//! The keys that never expire, for checks that what deleted records leave behind goes by itself: the fleet test after
//! a deletion, and the soak after deleting everything. A SCAN of one node: on a cluster it sees that node's keys only.

use berth_store::{Store, StoreError};

use crate::scan_page;

/// Of the keys matching `pattern`, how many were looked at and those without an expiry.
pub async fn keys_without_expiry(store: &Store, pattern: &str) -> Result<(u64, Vec<String>), StoreError> {
    let (mut looked_at, mut lasting) = (0, Vec::new());
    let mut cursor = 0_u64;
    loop {
        let (next, keys) = scan_page(store, cursor, pattern, 1000).await?;
        for key in keys {
            looked_at += 1;
            let ttl: i64 = store.query(redis::cmd("PTTL").arg(&key)).await?;
            if ttl == -1 {
                lasting.push(key);
            }
        }
        if next == 0 {
            return Ok((looked_at, lasting));
        }
        cursor = next;
    }
}
