//! Commands reaching the right stream. A command is written as state first (the process's desired state gets a
//! new version); then the replica holding the process's stream is told — directly when that is this replica, else
//! through its pub/sub channel — and pushes what is new. A lost announcement costs at most one heartbeat: every
//! heartbeat's ack carries the desired state when the process is behind.

use std::sync::Arc;
use std::time::Duration;

use berth_store::Subscription;
use berth_store::keys::push_channel;
use berth_store::processes::{self, Announcement, Routing};

use crate::Context;
use crate::streams::Command;

/// Tells the replica holding a process's stream that its desired state moved to `routing.version`.
pub(crate) async fn announce(context: &Context, routing: &Routing, fleet_id: &str, game_server_id: &str) {
    if routing.replica == context.replica {
        let span = push_span(game_server_id);
        let command = match routing.desired_state() {
            Some(desired) => Command::State(Box::new(desired), span),
            None => Command::Announce(routing.version, span),
        };
        context.streams.tell(fleet_id, game_server_id, command);
        return;
    }
    berth_runtime::telemetry::announce(&context.store, routing, fleet_id, game_server_id).await;
}

/// The span of a push to a process of the state something moved: a child of the span that moved it, here or, with
/// the trace context an announcement carried, on another replica.
fn push_span(game_server_id: &str) -> tracing::Span {
    tracing::info_span!("push", otel.name = "health.push", game_server = game_server_id)
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
            let Some(announced) = processes::parse_announcement(&payload) else {
                continue;
            };
            let pushed = || {
                let span = push_span(announced.game_server_id);
                if let Some(traceparent) = announced.traceparent {
                    berth_runtime::telemetry::continue_trace(&span, traceparent);
                }
                span
            };
            let command = match announced.what {
                Announcement::Version(version) => Command::Announce(version, pushed()),
                Announcement::State(desired) => Command::State(desired, pushed()),
                Announcement::Superseded(attach) => Command::Superseded(attach),
                Announcement::Changed => Command::Changed,
            };
            context
                .streams
                .tell(announced.fleet_id, announced.game_server_id, command);
        }
    }
}
