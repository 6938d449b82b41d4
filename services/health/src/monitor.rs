//! The health monitor: every sweep, each fleet's processes whose heartbeat, ready or ProcessEnding deadline has
//! passed are declared lost (one script per fleet), and the replicas holding their streams are told so that the
//! processes hear they must end. Every replica sweeps; a process is found late once, whoever finds it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_runtime::for_each_fleet;
use berth_store::StoreError;
use berth_store::endings as store;
use berth_store::processes::Routing;

use crate::keeping_up::FAILURE_MEMORY;
use crate::push::announce;
use crate::{Context, metrics};

/// Most processes per deadline one sweep of one fleet acts on; the rest wait for the next sweep.
const SWEEP_LIMIT: u32 = 500;

/// Sweeps every `every` until the service stops. A fleet's heartbeat deadlines are swept only once Redis has
/// answered the sweep for it, and the heartbeat writer has kept up for it (`keeping_up`), for a whole heartbeat
/// window of the fleet's (the sweep script compares): while its node was unreachable, or while the writer was behind,
/// heartbeats were not recorded, and a process silent through an outage is not dead. A fleet whose node or writes
/// failed is held back alone; a writer running late holds back every fleet.
pub(crate) async fn run(context: Arc<Context>, every: Duration) {
    // Since when Redis as a whole has answered, and when each fleet last failed to.
    let mut reachable_since = Instant::now();
    let mut failed_at: HashMap<String, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        metrics::write_lag(context.keeping_up.behind(Instant::now()));
        let answered_ms = |fleet: &str| {
            let since = failed_at
                .get(fleet)
                .map_or(reachable_since, |failed| reachable_since.max(*failed));
            let answered = since.elapsed().min(context.keeping_up.for_fleet(fleet, Instant::now()));
            u64::try_from(answered.as_millis()).unwrap_or(u64::MAX)
        };
        match sweep(&context, answered_ms).await {
            Ok(failed) => {
                failed_at.retain(|_, at| at.elapsed() < FAILURE_MEMORY);
                for (fleet, err) in failed {
                    if matches!(err, StoreError::Unavailable(_)) {
                        failed_at.insert(fleet, Instant::now());
                    }
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, "health sweep failed; retrying at the next tick");
                if matches!(err, StoreError::Unavailable(_)) {
                    reachable_since = Instant::now();
                }
            }
        }
    }
}

/// Sweeps every fleet, each told how long Redis has answered for it (`answered_ms`); the fleets that failed, with
/// why.
async fn sweep(context: &Context, answered_ms: impl Fn(&str) -> u64) -> Result<Vec<(String, StoreError)>, StoreError> {
    let answered_ms = &answered_ms;
    for_each_fleet(&context.store, "health_monitor", move |fleet_id| async move {
        let swept = store::sweep(
            &context.store,
            &fleet_id,
            SWEEP_LIMIT,
            &context.timings,
            answered_ms(&fleet_id),
        )
        .await?;
        for lost in swept.lost {
            tracing::info!(fleet = %fleet_id, game_server = %lost.game_server_id, code = %lost.code, "process lost");
            metrics::process_lost(&lost.code);
            let routing = Routing {
                replica: lost.replica,
                version: u64::MAX,
                desired: None,
            };
            announce(context, &routing, &fleet_id, &lost.game_server_id).await;
        }
        metrics::fleet_health(&fleet_id, swept.alive, swept.unhealthy);
        Ok(())
    })
    .await
}
