//! The session sweeper: ends ACTIVATING sessions past their activation deadline (freeing their servers for
//! another placement), TERMINATING ones past the grace period, RESERVED player sessions never accepted, and deletes
//! ended sessions past their retention. Safe on every replica at once: each step is idempotent in its script.

use std::sync::Arc;

use berth_runtime::for_each_fleet;
use berth_store::sessions;

use crate::Context;

/// Most items of each kind one sweep of one fleet handles; the rest wait for the next sweep.
const SWEEP_LIMIT: u32 = 1000;

/// One sweep of every fleet.
pub(crate) async fn sweep(context: Arc<Context>) -> Result<(), berth_store::StoreError> {
    let store = &context.store;
    let events = sessions::EventRetention {
        retention_ms: context.args.retention_ms,
        max_events: context.args.events_max,
    };
    for_each_fleet(store, "session_sweep", move |fleet| async move {
        let swept = sessions::sweep(store, &fleet, SWEEP_LIMIT, events).await?;
        crate::metrics::swept(&swept);
        for (game_server_id, routing) in &swept.moved {
            berth_runtime::telemetry::announce(store, routing, &fleet, game_server_id).await;
        }
        Ok(())
    })
    .await?;
    Ok(())
}
