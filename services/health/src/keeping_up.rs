//! Whether this replica's heartbeat writer keeps up. The monitor judges a process silent by its heartbeat deadline
//! in Redis, which only the heartbeats this replica wrote push out; a heartbeat the replica received but could not
//! write yet (its write failed, hung on a failing-over node, or waited behind a round that ran long) is not a missed
//! one. Nor is silence through an outage: while Redis did not answer the monitor's sweep of a fleet, no heartbeat of
//! it could be recorded either.
//!
//! So the monitor sweeps a fleet's heartbeat deadlines only once Redis has answered for it for a whole heartbeat
//! window (`answered`: none of the fleet's writes or sweeps failing), and judges this replica's own processes by
//! how long its oldest heartbeat not yet written has waited (`lag`): a process due longer ago than that sent nothing
//! this replica holds. A writer running late all the time, as one past its capacity does, thus still finds its dead
//! processes, later by its lateness, and never a live one.
//!
//! Another replica's monitor judges the processes whose streams this one holds by what this one records in Redis
//! with its writes (`for_fleet`): since when it has kept up, every heartbeat written soon after it arrived.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_runtime::sync::lock;

/// A heartbeat written later than this after it arrived counts as the writer falling behind. Small beside a
/// heartbeat period (1 s by default, 100 ms in the tests' fast settings), so that a process's window loses little
/// to the writer before losses are held back.
const LATE: Duration = Duration::from_millis(100);

/// A writer this far behind turns new streams away (`sdk.rs`): its processes' heartbeats already wait longer than is
/// safe, and each new stream adds to them. A stream resuming a registration is still taken, so that processes whose
/// replica died are not left without one.
const FULL: Duration = Duration::from_secs(1);

/// How long a fleet's failed write or sweep is remembered: longer than any heartbeat window.
const FAILURE_MEMORY: Duration = Duration::from_secs(600);

/// The writer's and the monitor's record, read by the monitor.
pub(crate) struct KeepingUp {
    state: Mutex<State>,
}

struct State {
    /// Since when Redis has answered every sweep: the last one that failed as a whole.
    answered_since: Instant,
    /// When the last round that was late ended.
    late_round_ended: Instant,
    /// When the oldest heartbeat not yet written arrived: the round being gathered or written, or the heartbeats
    /// queued behind the last one.
    oldest_waiting: Option<Instant>,
    /// How long the last round's oldest heartbeat had waited when it was written, and when that was.
    last_round: Option<(Duration, Instant)>,
    /// When each fleet's write or sweep last failed.
    failed: HashMap<Arc<str>, Instant>,
}

impl State {
    fn fail(&mut self, fleet: Arc<str>, now: Instant) {
        self.failed.retain(|_, at| now - *at < FAILURE_MEMORY);
        self.failed.insert(fleet, now);
    }

    /// How long the oldest heartbeat not yet written has waited as of `now`.
    fn lag(&self, now: Instant) -> Duration {
        self.oldest_waiting
            .map_or(Duration::ZERO, |oldest| now.saturating_duration_since(oldest))
    }

    /// How long, as of `now`, nothing held `fleet` back since `since`: none of its writes or sweeps failing.
    fn for_fleet_since(&self, fleet: &str, since: Instant, now: Instant) -> Duration {
        let since = self.failed.get(fleet).map_or(since, |failed| since.max(*failed));
        now.saturating_duration_since(since)
    }
}

impl KeepingUp {
    /// A writer that has kept up since `now`.
    pub(crate) fn new(now: Instant) -> KeepingUp {
        KeepingUp {
            state: Mutex::new(State {
                answered_since: now,
                late_round_ended: now,
                oldest_waiting: None,
                last_round: None,
                failed: HashMap::new(),
            }),
        }
    }

    /// A round of writes is gathered, or starts; the oldest of its heartbeats arrived at `oldest`.
    pub(crate) fn round_starts(&self, oldest: Instant) {
        lock(&self.state).oldest_waiting = Some(oldest);
    }

    /// The round ended at `now`; `failed` are the fleets whose write failed in it, and `queued_since`, when
    /// heartbeats wait for the next round, a moment before the first of them arrived. A late round restarts the
    /// count from its end: everything it held is written by then, and an idle writer after it stays counted as
    /// keeping up.
    pub(crate) fn round_ends(
        &self,
        failed: impl IntoIterator<Item = Arc<str>>,
        now: Instant,
        queued_since: Option<Instant>,
    ) {
        let mut state = lock(&self.state);
        if let Some(oldest) = std::mem::replace(&mut state.oldest_waiting, queued_since) {
            let waited = now.saturating_duration_since(oldest);
            if waited > LATE {
                state.late_round_ended = now;
            }
            state.last_round = Some((waited, now));
        }
        for fleet in failed {
            state.fail(fleet, now);
        }
    }

    /// The monitor's sweep of `fleet` (of every fleet, for `None`) found Redis unreachable at `now`.
    pub(crate) fn sweep_failed(&self, fleet: Option<Arc<str>>, now: Instant) {
        let mut state = lock(&self.state);
        match fleet {
            Some(fleet) => state.fail(fleet, now),
            None => state.answered_since = state.answered_since.max(now),
        }
    }

    /// How long, as of `now`, the oldest heartbeat not yet written has waited; 0 when none waits.
    pub(crate) fn lag(&self, now: Instant) -> Duration {
        lock(&self.state).lag(now)
    }

    /// How long, as of `now`, Redis has answered for `fleet`: every sweep answered, none of its writes failing.
    pub(crate) fn answered(&self, fleet: &str, now: Instant) -> Duration {
        let state = lock(&self.state);
        state.for_fleet_since(fleet, state.answered_since, now)
    }

    /// How far behind the writer is as of `now`: its lag, or, for a moment after a round, how long that round's
    /// oldest heartbeat had waited when it was written, whichever is longer; 0 when it has nothing to write.
    pub(crate) fn behind(&self, now: Instant) -> Duration {
        let state = lock(&self.state);
        let last = state
            .last_round
            .filter(|(_, ended)| now.saturating_duration_since(*ended) < FULL)
            .map_or(Duration::ZERO, |(waited, _)| waited);
        state.lag(now).max(last)
    }

    /// Whether the writer is too far behind, as of `now`, to take a new stream.
    pub(crate) fn full(&self, now: Instant) -> bool {
        self.behind(now) > FULL
    }

    /// How long, as of `now`, the writer has kept up for `fleet`: every heartbeat written in good time since the
    /// end of the last round that was late, and Redis answering as [`KeepingUp::answered`] counts; 0 while a heartbeat
    /// waits past lateness.
    pub(crate) fn for_fleet(&self, fleet: &str, now: Instant) -> Duration {
        let state = lock(&self.state);
        if state.lag(now) > LATE {
            return Duration::ZERO;
        }
        state.for_fleet_since(fleet, state.answered_since.max(state.late_round_ended), now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_failed_write_restarts_its_fleets_count_only() {
        let start = Instant::now();
        let keeping_up = KeepingUp::new(start);
        keeping_up.round_starts(start + 500 * MS);
        keeping_up.round_ends([Arc::from("eu")], start + 510 * MS, None);
        assert_eq!(keeping_up.for_fleet("eu", start + 800 * MS), 290 * MS);
        assert_eq!(keeping_up.for_fleet("us", start + 800 * MS), 800 * MS);
    }

    #[test]
    fn a_late_heartbeat_holds_every_fleet_back_until_a_window_after_its_round() {
        let start = Instant::now();
        let keeping_up = KeepingUp::new(start);
        keeping_up.round_starts(start + 1000 * MS);
        assert_eq!(keeping_up.for_fleet("us", start + 1050 * MS), 1050 * MS, "not late yet");
        assert_eq!(
            keeping_up.for_fleet("us", start + 1200 * MS),
            Duration::ZERO,
            "while it is late"
        );
        keeping_up.round_ends([], start + 1300 * MS, None);
        assert_eq!(
            keeping_up.for_fleet("us", start + 1300 * MS),
            Duration::ZERO,
            "as it ends"
        );
        assert_eq!(
            keeping_up.for_fleet("us", start + 5000 * MS),
            3700 * MS,
            "counting from its end, with nothing more to write"
        );
    }

    #[test]
    fn lateness_holds_back_only_what_other_replicas_are_told_and_the_lag_is_the_oldest_unwritten_heartbeats_wait() {
        let start = Instant::now();
        let keeping_up = KeepingUp::new(start);
        keeping_up.round_starts(start + 1000 * MS);
        assert_eq!(keeping_up.lag(start + 1200 * MS), 200 * MS);
        keeping_up.round_ends([], start + 1300 * MS, Some(start + 1250 * MS));
        assert_eq!(keeping_up.for_fleet("us", start + 1300 * MS), Duration::ZERO, "late");
        assert_eq!(
            keeping_up.answered("us", start + 1300 * MS),
            1300 * MS,
            "yet answered all along"
        );
        assert_eq!(
            keeping_up.lag(start + 1400 * MS),
            150 * MS,
            "the heartbeats queued behind the round"
        );
        keeping_up.round_starts(start + 1260 * MS);
        keeping_up.round_ends([Arc::from("eu")], start + 1350 * MS, None);
        assert_eq!(keeping_up.lag(start + 1400 * MS), Duration::ZERO, "nothing waits");
        assert_eq!(
            keeping_up.answered("eu", start + 1400 * MS),
            50 * MS,
            "a failed write holds its fleet back"
        );
        keeping_up.sweep_failed(None, start + 1380 * MS);
        assert_eq!(
            keeping_up.answered("us", start + 1400 * MS),
            20 * MS,
            "a failed sweep holds every fleet back"
        );
    }

    #[test]
    fn a_writer_a_second_behind_is_full_until_a_second_after_it_caught_up() {
        let start = Instant::now();
        let keeping_up = KeepingUp::new(start);
        keeping_up.round_starts(start);
        assert!(!keeping_up.full(start + 900 * MS));
        assert!(keeping_up.full(start + 1100 * MS), "while its round waits");
        keeping_up.round_ends([], start + 1500 * MS, None);
        assert_eq!(keeping_up.behind(start + 1600 * MS), 1500 * MS);
        assert!(keeping_up.full(start + 2400 * MS), "just after");
        assert!(
            !keeping_up.full(start + 2600 * MS),
            "a second after, with nothing waiting"
        );
    }
}
