//! Whether this replica's heartbeat writer keeps up. The monitor judges a process silent by its heartbeat deadline
//! in Redis, which only the heartbeats this replica wrote push out; a heartbeat the replica received but could not
//! write yet (its write failed, hung on a failing-over node, or waits behind a round that ran long) is not a missed
//! one. So the monitor sweeps a fleet's heartbeat deadlines only once the writer has kept up for it for a whole
//! heartbeat window: every round written in good time, none of the fleet's writes failed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_runtime::sync::lock;

/// A round of writes that takes longer than this holds heartbeats back long enough to count as the writer falling
/// behind: well under the margin a heartbeat window leaves past one heartbeat period (200 ms at the least settings).
const LATE_ROUND: Duration = Duration::from_millis(100);

/// How long a fleet's failed write is remembered: longer than any heartbeat window.
const FAILURE_MEMORY: Duration = Duration::from_secs(600);

/// The writer's record, read by the monitor.
pub(crate) struct KeepingUp {
    state: Mutex<State>,
}

struct State {
    /// Since when every round has been written in good time; `None` right after one was not.
    on_time_since: Option<Instant>,
    /// When the round being written started.
    round_started: Option<Instant>,
    /// When each fleet's write last failed.
    failed: HashMap<Arc<str>, Instant>,
}

impl Default for KeepingUp {
    fn default() -> KeepingUp {
        KeepingUp {
            state: Mutex::new(State {
                on_time_since: Some(Instant::now()),
                round_started: None,
                failed: HashMap::new(),
            }),
        }
    }
}

impl KeepingUp {
    /// A round of writes starts.
    pub(crate) fn round_starts(&self) {
        lock(&self.state).round_started = Some(Instant::now());
    }

    /// The round ended; `failed` are the fleets whose write failed in it.
    pub(crate) fn round_ends(&self, failed: impl IntoIterator<Item = Arc<str>>) {
        let now = Instant::now();
        let mut state = lock(&self.state);
        let late = state
            .round_started
            .take()
            .is_some_and(|started| now - started > LATE_ROUND);
        if late {
            state.on_time_since = None;
        } else if state.on_time_since.is_none() {
            state.on_time_since = Some(now);
        }
        state.failed.retain(|_, at| now - *at < FAILURE_MEMORY);
        for fleet in failed {
            state.failed.insert(fleet, now);
        }
    }

    /// How long the writer has kept up for `fleet`: 0 while a round has run late or the last one did.
    pub(crate) fn for_fleet(&self, fleet: &str) -> Duration {
        let state = lock(&self.state);
        let now = Instant::now();
        if state.round_started.is_some_and(|started| now - started > LATE_ROUND) {
            return Duration::ZERO;
        }
        let Some(on_time_since) = state.on_time_since else {
            return Duration::ZERO;
        };
        let since = state
            .failed
            .get(fleet)
            .map_or(on_time_since, |failed| on_time_since.max(*failed));
        now - since
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_restarts_its_fleets_count_only() {
        let keeping_up = KeepingUp::default();
        std::thread::sleep(Duration::from_millis(30));
        keeping_up.round_starts();
        keeping_up.round_ends([Arc::from("eu")]);
        assert!(keeping_up.for_fleet("eu") < Duration::from_millis(30));
        assert!(keeping_up.for_fleet("us") >= Duration::from_millis(30));
    }

    #[test]
    fn a_round_running_late_stops_every_fleets_count_until_one_is_on_time() {
        let keeping_up = KeepingUp::default();
        keeping_up.round_starts();
        lock(&keeping_up.state).round_started = Some(Instant::now() - LATE_ROUND * 2);
        assert_eq!(keeping_up.for_fleet("us"), Duration::ZERO, "while it runs late");
        keeping_up.round_ends([]);
        assert_eq!(keeping_up.for_fleet("us"), Duration::ZERO, "after it ran late");
        keeping_up.round_starts();
        keeping_up.round_ends([]);
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            keeping_up.for_fleet("us") >= Duration::from_millis(20),
            "counting again"
        );
    }
}
