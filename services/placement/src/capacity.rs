//! Word of capacity: a placement that found no server waits, and tries again at once when a location where one was
//! missing gets a server (the scripts announce it, see `place` in `pool/lib.lua`) rather than at its next retry.
//! A word lost on a reconnect costs a placement a delay until its retry, never an outcome.

use std::time::Duration;

use berth_store::keys::CAPACITY_CHANNEL;
use berth_store::{RedisConfig, Subscription};
use tokio::sync::broadcast;

/// Words kept for a placement that has not read them yet; one that falls further behind just tries again.
const BACKLOG: usize = 1024;

/// The fleets that just got a server where a placement found none, to every waiting placement of this replica.
pub(crate) type Capacity = broadcast::Sender<String>;

/// A new, unheard channel of words.
pub(crate) fn channel() -> Capacity {
    broadcast::channel(BACKLOG).0
}

/// Hears the scripts' announcements until the service stops, subscribing again after a failure.
pub(crate) async fn listen(config: RedisConfig, capacity: Capacity) {
    loop {
        match Subscription::open_broadcast(&config, CAPACITY_CHANNEL).await {
            Ok(mut subscription) => {
                while let Some(payload) = subscription.next().await {
                    let payload = String::from_utf8_lossy(&payload);
                    if let Some((fleet_id, _)) = payload.split_once('\n') {
                        // Nobody waiting is no error: the word was for no one.
                        let _ = capacity.send(fleet_id.to_owned());
                    }
                }
            }
            Err(err) => tracing::debug!(error = %err, "cannot hear of capacity yet; placements retry on their own"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
