//! One page of a SCAN over the keys matching a pattern, for the checks and benches that walk a node's keys (what
//! never expires, what the keys of a kind hold). A SCAN of one connection: on a cluster it sees one node's keys.

use berth_store::{Store, StoreError};

/// The next cursor (0 once the walk is done) and up to about `count` keys matching `pattern` from `cursor` on.
pub async fn scan_page(
    store: &Store,
    cursor: u64,
    pattern: &str,
    count: usize,
) -> Result<(u64, Vec<String>), StoreError> {
    store
        .query(
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(count),
        )
        .await
}
