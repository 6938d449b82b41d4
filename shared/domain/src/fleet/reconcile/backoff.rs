//! The launch backoff of a fleet location: each failed launch (the provisioner's error, or an instance that ended
//! before any of its processes registered) makes the next one wait 2, 4, 8… s, at most a minute, so that a build
//! that cannot start is not launched again in a tight loop. A ready server shows the build runs, and a location
//! whose status changed since the last failure (an UNHEALTHY one given new launch settings or capacity) starts
//! afresh. Kept by the replica that reconciles the location; times are Redis' clock.

/// Longest wait between failed launches, ms.
const MAX_WAIT_MS: i64 = 60_000;

/// A location's failed launches since its last fresh start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchBackoff {
    failures: u32,
    /// When the last failure was counted, ms.
    at_ms: i64,
}

impl LaunchBackoff {
    /// The backoff once one more launch failed at `now_ms`.
    pub fn failed(self, now_ms: i64) -> LaunchBackoff {
        LaunchBackoff {
            failures: self.failures + 1,
            at_ms: now_ms,
        }
    }

    /// No launch before this time, ms; 0 without failures.
    pub fn launch_after_ms(self) -> i64 {
        match self.failures {
            0 => 0,
            failures => self.at_ms + (1000_i64 << failures.min(16)).min(MAX_WAIT_MS),
        }
    }

    /// The backoff that still applies to a location whose status last changed at `status_change_ms`, with or without
    /// a `ready_server`: none once the build has shown it runs or the location was deployed again.
    pub fn standing(self, status_change_ms: i64, ready_server: bool) -> LaunchBackoff {
        if ready_server || status_change_ms > self.at_ms {
            LaunchBackoff::default()
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_doubles_the_wait_up_to_a_minute() {
        let mut backoff = LaunchBackoff::default();
        assert_eq!(backoff.launch_after_ms(), 0);
        let mut waits = Vec::new();
        for _ in 0..8 {
            backoff = backoff.failed(10_000);
            waits.push(backoff.launch_after_ms() - 10_000);
        }
        assert_eq!(waits, [2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    }

    #[test]
    fn a_ready_server_or_a_new_status_starts_afresh() {
        let backoff = LaunchBackoff::default().failed(5_000).failed(6_000);
        assert_eq!(
            backoff.standing(6_000, false),
            backoff,
            "the status changed before the failures"
        );
        assert_eq!(backoff.standing(6_001, false), LaunchBackoff::default());
        assert_eq!(backoff.standing(1_000, true), LaunchBackoff::default());
    }
}
