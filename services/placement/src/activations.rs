//! Word of activations: a placement waiting for its game session to become ACTIVE hears it here the moment the game
//! server activates it, rather than at its next look at the session. The activating script's caller tells this
//! replica on its own channel (`berth_store::sessions::placements::activated`); a word lost on a reconnect costs
//! the placement a delay until its next look, never an outcome.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_runtime::sync::lock;
use berth_store::keys::placed_channel;
use berth_store::sessions::placements::parse_activated;
use berth_store::{RedisConfig, Subscription};
use tokio::sync::Notify;

/// The game sessions this replica's placements wait on.
#[derive(Clone, Default)]
pub(crate) struct Activations {
    waiting: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

impl Activations {
    /// Starts waiting for `game_session_id`; the wait lasts until the returned guard is dropped.
    pub(crate) fn wait_for(&self, game_session_id: &str) -> Waiting {
        let notify = Arc::new(Notify::new());
        self.lock().insert(game_session_id.to_owned(), notify.clone());
        Waiting {
            activations: self.clone(),
            game_session_id: game_session_id.to_owned(),
            notify,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        lock(&self.waiting)
    }

    fn activated(&self, game_session_id: &str) {
        if let Some(notify) = self.lock().get(game_session_id) {
            notify.notify_one();
        }
    }

    /// Hears this replica's channel until the service stops, subscribing again after a failure.
    pub(crate) async fn listen(self, config: RedisConfig, replica: String) {
        let channel = placed_channel(&replica);
        loop {
            match Subscription::open(&config, &channel).await {
                Ok(mut subscription) => {
                    while let Some(payload) = subscription.next().await {
                        if let Some((_, game_session_id)) = parse_activated(&String::from_utf8_lossy(&payload)) {
                            self.activated(game_session_id);
                        }
                    }
                }
                Err(err) => {
                    tracing::debug!(error = %err, "cannot hear activations yet; placements look for themselves")
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// A placement's wait for one game session's activation.
pub(crate) struct Waiting {
    activations: Activations,
    game_session_id: String,
    notify: Arc<Notify>,
}

impl Waiting {
    /// Until word of the activation comes (at once if it came since the wait began).
    pub(crate) async fn activated(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.activations.lock().remove(&self.game_session_id);
    }
}
