//! Keeps a process's requests under the SDK stream's message-rate limit (100 messages in any second; one more ends
//! the stream with RESOURCE_EXHAUSTED): past [`REQUESTS_PER_SECOND`] in a second, a request waits its turn rather
//! than break the stream. The rest of the budget stays for heartbeats, periodic and those a state change sends at
//! once, which a request such as ready or activate_game_session causes one of.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// Most requests sent in any second.
pub(super) const REQUESTS_PER_SECOND: usize = 45;

const SECOND: Duration = Duration::from_secs(1);

/// When the last [`REQUESTS_PER_SECOND`] requests were sent.
#[derive(Default)]
pub(super) struct Pacer {
    sent: Mutex<VecDeque<Instant>>,
}

impl Pacer {
    /// Waits until one more request keeps within the limit, and counts it.
    pub(super) async fn wait_turn(&self) {
        let mut sent = self.sent.lock().await;
        let now = Instant::now();
        while sent.front().is_some_and(|at| now.duration_since(*at) >= SECOND) {
            sent.pop_front();
        }
        if sent.len() >= REQUESTS_PER_SECOND
            && let Some(oldest) = sent.front().copied()
        {
            // Counted out only once the wait is over, so that a caller giving up while it waits leaves the count
            // as it was.
            tokio::time::sleep_until(oldest + SECOND).await;
            sent.pop_front();
        }
        sent.push_back(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_past_the_limit_waits_for_the_next_second() {
        let pacer = Pacer::default();
        pacer.wait_turn().await;
        let first = Instant::now();
        for _ in 1..REQUESTS_PER_SECOND {
            pacer.wait_turn().await;
        }
        pacer.wait_turn().await;
        assert!(
            first.elapsed() >= SECOND - Duration::from_millis(5),
            "one past the limit waits for a second after the first, waited {:?}",
            first.elapsed()
        );
    }
}
