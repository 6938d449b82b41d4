//! The health monitor: every sweep, each fleet's processes whose heartbeat, ready or ProcessEnding deadline has
//! passed are declared lost (one script per fleet), and the replicas holding their streams are told so that the
//! processes hear they must end. Every replica sweeps; a process is found late once, whoever finds it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_runtime::for_each_fleet;
use berth_store::StoreError;
use berth_store::processes::{self as store, Routing};

use crate::push::announce;
use crate::{Context, metrics};

/// Most processes per deadline one sweep of one fleet acts on; the rest wait for the next sweep.
const SWEEP_LIMIT: u32 = 500;

/// Sweeps every `every` until the service stops. Heartbeat deadlines are swept only once Redis has answered for a
/// whole heartbeat window: while it was unreachable no heartbeat could be recorded, and a process silent through
/// an outage is not dead.
pub(crate) async fn run(context: Arc<Context>, every: Duration) {
    let window = Duration::from_millis(context.timings.heartbeat_window_ms);
    let mut reachable_since: Option<Instant> = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let since = *reachable_since.get_or_insert_with(Instant::now);
        let failed = match sweep(&context, since.elapsed() >= window).await {
            Ok(failed) => failed,
            Err(err) => {
                tracing::warn!(error = %err, "health sweep failed; retrying at the next tick");
                vec![err]
            }
        };
        // Any fleet unreachable: its heartbeats may not have been recorded, so the window starts again.
        if failed.iter().any(|err| matches!(err, StoreError::Unavailable(_))) {
            reachable_since = None;
        }
    }
}

/// Sweeps every fleet; the errors of the fleets that failed.
async fn sweep(context: &Context, heartbeats: bool) -> Result<Vec<StoreError>, StoreError> {
    for_each_fleet(&context.store, "health_monitor", move |fleet_id| async move {
        let swept = store::sweep(&context.store, &fleet_id, SWEEP_LIMIT, &context.timings, heartbeats).await?;
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
