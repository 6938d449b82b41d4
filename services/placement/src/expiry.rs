//! The claim sweeper: hands lapsed claims back to their fleet's pool and publishes the pool's size. Safe with
//! any number of replicas: handing back a claim is idempotent, and a claim already handed back is not found
//! again.

use berth_runtime::for_each_fleet;

use crate::metrics;
use berth_store::Store;
use berth_store::pool;

/// Most claims one sweep of one fleet hands back; the rest wait for the next sweep.
const SWEEP_LIMIT: u32 = 1000;

/// One sweep of every fleet.
pub(crate) async fn sweep(store: Store) -> Result<(), berth_store::StoreError> {
    let store = &store;
    for_each_fleet(store, "claim_expiry", move |fleet| async move {
        let expired = pool::expire_claims(store, &fleet, SWEEP_LIMIT).await?;
        metrics::claims_lapsed(expired.lapsed);
        metrics::pool(&fleet, expired.available, expired.claimed);
        Ok(())
    })
    .await?;
    Ok(())
}
