//! The health monitor: every sweep, each fleet's processes whose heartbeat, ready or ProcessEnding deadline has
//! passed are declared lost (one script per fleet), and the replicas holding their streams are told so that the
//! processes hear they must end. Every replica sweeps; a process is found late once, whoever finds it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_runtime::for_each_fleet;
use berth_store::StoreError;
use berth_store::processes::{self as store, Routing};

use crate::push::announce;
use crate::{Context, metrics};

/// Most processes per deadline one sweep of one fleet acts on; the rest wait for the next sweep.
const SWEEP_LIMIT: u32 = 500;

/// Sweeps every `every` until the service stops. A fleet's heartbeat deadlines are swept only once Redis has
/// answered for it for a whole heartbeat window: while its node was unreachable no heartbeat could be recorded, and
/// a process silent through an outage is not dead. Fleets on nodes that answered are swept meanwhile.
pub(crate) async fn run(context: Arc<Context>, every: Duration) {
    let window = Duration::from_millis(context.timings.heartbeat_window_ms);
    // Since when Redis as a whole has answered, and when each fleet last failed to.
    let mut reachable_since = Instant::now();
    let mut failed_at: HashMap<String, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let swept_before = |fleet: &str| {
            let since = failed_at
                .get(fleet)
                .map_or(reachable_since, |failed| reachable_since.max(*failed));
            since.elapsed() >= window
        };
        match sweep(&context, swept_before).await {
            Ok(failed) => {
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

/// Sweeps every fleet, heartbeat deadlines only of those `heartbeats` allows; the fleets that failed, with why.
async fn sweep(context: &Context, heartbeats: impl Fn(&str) -> bool) -> Result<Vec<(String, StoreError)>, StoreError> {
    let heartbeats = &heartbeats;
    for_each_fleet(&context.store, "health_monitor", move |fleet_id| async move {
        let swept = store::sweep(
            &context.store,
            &fleet_id,
            SWEEP_LIMIT,
            &context.timings,
            heartbeats(&fleet_id),
        )
        .await?;
        for lost in swept.lost {
            tracing::info!(fleet = %fleet_id, game_server = %lost.game_server_id, code = %lost.code, "process lost");
            metrics::process_lost(&lost.code);
            let routing = Routing {
                replica: lost.replica,
                version: u64::MAX,
            };
            announce(context, &routing, &fleet_id, &lost.game_server_id).await;
        }
        metrics::fleet_health(&fleet_id, swept.alive, swept.unhealthy);
        Ok(())
    })
    .await
}
