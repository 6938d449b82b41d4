//! The health monitor: every sweep, each fleet's processes whose heartbeat, ready or ProcessEnding deadline has
//! passed are declared lost (one script per fleet), and the replicas holding their streams are told so that the
//! processes hear they must end. Every replica sweeps; a process is found late once, whoever finds it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_runtime::for_each_fleet;
use berth_store::StoreError;
use berth_store::endings as store;
use berth_store::processes::Routing;

use crate::push::announce;
use crate::{Context, metrics};

/// Most processes per deadline one sweep of one fleet acts on; the rest wait for the next sweep.
const SWEEP_LIMIT: u32 = 500;

/// Sweeps every `every` until the service stops. A fleet's heartbeat deadlines are swept only once Redis has
/// answered the sweep and the heartbeat writes for it for a whole heartbeat window of the fleet's (`keeping_up`
/// keeps it; the sweep script compares): while its node was unreachable, heartbeats were not recorded, and a process
/// silent through an outage is not dead. A fleet whose node or writes failed is held back alone; Redis failing every
/// sweep holds back every fleet. A writer running late holds back none: the sweep gives this replica's processes its
/// lag (see `keeping_up`).
pub(crate) async fn run(context: Arc<Context>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        metrics::write_lag(context.keeping_up.behind(Instant::now()));
        let judge = |fleet: &str| {
            let now = Instant::now();
            store::Judge {
                replica: &context.replica,
                answered: context.keeping_up.answered(fleet, now),
                lag: context.keeping_up.lag(now),
            }
        };
        match sweep(&context, judge).await {
            Ok(failed) => {
                for (fleet, err) in failed {
                    if matches!(err, StoreError::Unavailable(_)) {
                        context.keeping_up.sweep_failed(Some(fleet.into()), Instant::now());
                    }
                }
            }
            Err(err) => {
                tracing::debug!(error = %err, "health sweep failed; retrying at the next tick");
                if matches!(err, StoreError::Unavailable(_)) {
                    context.keeping_up.sweep_failed(None, Instant::now());
                }
            }
        }
    }
}

/// Sweeps every fleet, each with what `judge` allows for it; the fleets that failed, with why.
async fn sweep<'a>(
    context: &'a Context,
    judge: impl Fn(&str) -> store::Judge<'a>,
) -> Result<Vec<(String, StoreError)>, StoreError> {
    let judge = &judge;
    for_each_fleet(&context.store, "health_monitor", move |fleet_id| async move {
        let swept = store::sweep(
            &context.store,
            &fleet_id,
            SWEEP_LIMIT,
            &context.timings,
            judge(&fleet_id),
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
