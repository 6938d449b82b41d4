//! The claim sweeper: hands lapsed claims back to their fleet's pool and publishes the pool's size. Safe with
//! any number of replicas: handing back a claim is idempotent, and a claim already handed back is not found
//! again.

use std::time::Duration;

use berth_store::Store;
use berth_store::game_servers as store;

/// Most claims one sweep of one fleet hands back; the rest wait for the next sweep.
const SWEEP_LIMIT: u32 = 1000;

/// Sweeps every `every` until the task is dropped.
pub async fn expire_claims(store: Store, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(err) = sweep(&store).await {
            tracing::warn!(error = %err, "claim sweep failed; retrying at the next tick");
        }
    }
}

async fn sweep(store: &Store) -> Result<(), berth_store::StoreError> {
    for fleet in store::fleets(store).await? {
        let expired = store::expire_claims(store, &fleet, SWEEP_LIMIT).await?;
        if expired.lapsed > 0 {
            metrics::counter!("berth_claims_lapsed_total").increment(u64::from(expired.lapsed));
        }
        metrics::gauge!("berth_available_game_servers", "fleet" => fleet.clone()).set(expired.available as f64);
        metrics::gauge!("berth_claimed_game_servers", "fleet" => fleet).set(expired.claimed as f64);
    }
    Ok(())
}
