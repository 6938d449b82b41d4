//! Commands reaching the right stream. A command is written as state first (the process's desired state gets a
//! new version); then the replica holding the process's stream is told — directly when that is this replica, else
//! through its pub/sub channel — and pushes what is new. A lost announcement costs at most one heartbeat: every
//! heartbeat's ack carries the desired state when the process is behind.

use std::sync::Arc;
use std::time::Duration;

use berth_store::keys::push_channel;
use berth_store::processes::Routing;
use berth_store::{Store, Subscription};

use crate::Context;
use crate::streams::Command;

/// Tells the replica holding a process's stream that its desired state moved to `routing.version`.
pub(crate) async fn announce(context: &Context, routing: &Routing, fleet_id: &str, game_server_id: &str) {
    if routing.replica == context.replica {
        context
            .streams
            .tell(fleet_id, game_server_id, Command::Announce(routing.version));
        return;
    }
    publish(&context.store, routing, fleet_id, game_server_id).await;
}

/// Tells the replica holding a process's stream, through its channel, that its desired state moved.
pub(crate) async fn publish(store: &Store, routing: &Routing, fleet_id: &str, game_server_id: &str) {
    if routing.replica.is_empty() {
        return;
    }
    let payload = format!("{fleet_id}\n{game_server_id}\n{}", routing.version);
    if let Err(err) = store.publish(&push_channel(&routing.replica), &payload).await {
        tracing::debug!(error = %err, "announcement lost; the next heartbeat carries it");
    }
}

/// Listens on this replica's channel and hands each announcement to the stream it names.
pub(crate) async fn listen(context: Arc<Context>) {
    let channel = push_channel(&context.replica);
    loop {
        let mut subscription = match Subscription::open(context.store.config(), &channel).await {
            Ok(subscription) => subscription,
            Err(err) => {
                tracing::debug!(error = %err, "cannot subscribe to announcements yet; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(payload) = subscription.next().await {
            let payload = String::from_utf8_lossy(&payload);
            let mut parts = payload.splitn(3, '\n');
            let (Some(fleet_id), Some(game_server_id), Some(version)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if let Ok(version) = version.parse() {
                context
                    .streams
                    .tell(fleet_id, game_server_id, Command::Announce(version));
            }
        }
    }
}
