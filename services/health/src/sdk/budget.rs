//! The SDK stream's message-rate limit: more than [`MESSAGES_PER_SECOND`] messages within any second end a stream
//! with RESOURCE_EXHAUSTED, so that one process cannot take a replica's time from the others.

use std::time::Instant;

/// Most messages a process may send within a second.
pub(super) const MESSAGES_PER_SECOND: usize = 100;

/// When a stream's last [`MESSAGES_PER_SECOND`] messages came, so that the one more that would make more than
/// that within a second is caught exactly. Times are ms since the stream began, wrapping (a u32 spans 49 days;
/// only differences under a second matter).
pub(super) struct Budget {
    began: Instant,
    times: Box<[u32; MESSAGES_PER_SECOND]>,
    /// Where the next time goes: the oldest of the last [`MESSAGES_PER_SECOND`] once that many came.
    next: usize,
    full: bool,
}

impl Budget {
    pub(super) fn new() -> Budget {
        Budget {
            began: Instant::now(),
            times: Box::new([0; MESSAGES_PER_SECOND]),
            next: 0,
            full: false,
        }
    }

    /// Counts one message; `false` when it makes more than [`MESSAGES_PER_SECOND`] within a second.
    pub(super) fn spend(&mut self) -> bool {
        let now = self.began.elapsed().as_millis() as u32;
        if self.full && now.wrapping_sub(self.times[self.next]) < 1000 {
            return false;
        }
        self.times[self.next] = now;
        self.next = (self.next + 1) % MESSAGES_PER_SECOND;
        self.full |= self.next == 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_after_a_hundred_within_a_second_is_refused() {
        let mut budget = Budget::new();
        assert!((0..MESSAGES_PER_SECOND).all(|_| budget.spend()));
        assert!(!budget.spend());
    }
}
