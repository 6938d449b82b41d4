//! The session sweeper: ends ACTIVATING sessions past their activation deadline (freeing their servers for
//! another placement), TERMINATING ones past the grace period, RESERVED player sessions never accepted, and deletes
//! ended sessions past their retention. Safe on every replica at once: each step is idempotent in its script.

use std::sync::Arc;
use std::time::Duration;

use berth_store::game_servers::fleets;
use berth_store::processes::announce;
use berth_store::sessions;

use crate::Context;

/// Most items of each kind one sweep of one fleet handles; the rest wait for the next sweep.
const SWEEP_LIMIT: u32 = 1000;

/// Sweeps every `every` until the task is aborted.
pub(crate) async fn run(context: Arc<Context>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(err) = sweep(&context).await {
            tracing::debug!(error = %err, "session sweep failed; retrying at the next tick");
        }
    }
}

async fn sweep(context: &Context) -> Result<(), berth_store::StoreError> {
    let store = &context.store;
    for fleet in fleets(store).await? {
        // One fleet failing (its cluster node unreachable) must not stop the sweep of the others.
        let events = sessions::EventRetention {
            retention_ms: context.args.retention_ms,
            max_events: context.args.events_max,
        };
        let swept = match sessions::sweep(store, &fleet, SWEEP_LIMIT, events).await {
            Ok(swept) => swept,
            Err(err) => {
                tracing::debug!(error = %err, fleet = %fleet, "session sweep of one fleet failed");
                continue;
            }
        };
        for (name, count) in [
            (
                "berth_game_sessions_activation_timed_out_total",
                swept.activation_timeouts,
            ),
            ("berth_game_sessions_force_terminated_total", swept.forced),
            ("berth_player_sessions_timed_out_total", swept.player_timeouts),
            ("berth_game_sessions_expired_total", swept.deleted),
        ] {
            if count > 0 {
                metrics::counter!(name).increment(count);
            }
        }
        for (game_server_id, routing) in &swept.moved {
            announce(store, routing, &fleet, game_server_id).await;
        }
    }
    Ok(())
}
