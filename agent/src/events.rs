//! What Berth tells the process, turned into what an Agones game server sees: a game session placed on it is
//! activated on its behalf (an Agones server has no activation step: it learns of its match by watching itself go
//! Allocated, with the session in its annotations), and an order to end reaches the child as SIGTERM, as a
//! Kubernetes pod's deletion does.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use berth_proto::health::v1::{ClaimStatus, ProcessHealth, UpdateServer, UtilizationStatus};
use berth_proto::session::v1::GameSessionStatus;
use berth_sdk::Event;
use berth_sdk::game_server::{Events, GameServer};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::record::session_annotations;
use crate::view::View;

/// Reports the server healthy while health pings keep coming: UNHEALTHY once the last is older than the fleet's
/// failure window (its heartbeat period times its threshold). Healthy before the first ping, which Agones gives an
/// initial delay.
pub fn watch_health(server: &GameServer, view: Arc<View>) {
    let settings = server.clone();
    server.set_health_check(move || {
        let window = settings.heartbeat_settings();
        let window = window.interval * window.unhealthy_after.max(1);
        match view.read(|state| state.last_ping) {
            Some(ping) if Instant::now().duration_since(ping) > window => ProcessHealth::Unhealthy,
            _ => ProcessHealth::Healthy,
        }
    });
}

/// Follows the server's events until they end; `end_child` is told when the child must end.
pub async fn follow(server: GameServer, mut events: Events, view: Arc<View>, end_child: mpsc::Sender<()>) {
    while let Some(event) = events.recv().await {
        match event {
            Event::StartGameSession { game_session, .. } => {
                let id = game_session.game_session_id.clone();
                // A server on its way out hosts nothing new: its placement tries elsewhere.
                if view.read(|state| state.shutdown) {
                    if let Err(error) = server
                        .reject_game_session(id.clone(), "the game server is ending")
                        .await
                    {
                        warn!(game_session_id = %id, %error, "rejecting the game session failed");
                    }
                    continue;
                }
                view.change(|state| state.session = session_annotations(&game_session));
                if let Err(error) = server.activate_game_session(id.clone()).await {
                    warn!(game_session_id = %id, %error, "activating the game session failed");
                }
                view.touch();
            }
            Event::UpdateGameSession { game_session, .. } => {
                let ended = matches!(
                    game_session.status(),
                    GameSessionStatus::Terminating | GameSessionStatus::Terminated | GameSessionStatus::Error
                );
                view.change(|state| state.session = session_annotations(&game_session));
                if ended && !view.read(|state| state.shutdown) {
                    // An Agones server hosts one match and then ends, as its pod is deleted: it leaves the pool before
                    // the child is told, so that no new session is placed on a server on its way out.
                    info!(game_session_id = %game_session.game_session_id, "the game session is ending; ending the child");
                    if let Err(error) = server.process_ending("its game session ended").await {
                        warn!(%error, "telling Berth that the process is ending failed");
                    }
                    view.change(|state| state.shutdown = true);
                    let _ = end_child.try_send(());
                }
            }
            Event::Terminate { reason, .. } => {
                info!(?reason, "Berth asks the process to end");
                let since = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                view.change(|state| state.ending_since = since);
                let _ = end_child.try_send(());
            }
            Event::ServerChanged { server: description } => {
                // An Agones server stays Allocated until it says Ready or ends; a claim on a Berth server lapses
                // unless made UTILIZED, so the agent makes it so as soon as it hears of it.
                let record = description.game_server.clone().unwrap_or_default();
                if record.claim_status() == ClaimStatus::Claimed
                    && record.utilization_status() != UtilizationStatus::Utilized
                    && !view.read(|state| state.shutdown)
                {
                    let update = UpdateServer {
                        mark_utilized: true,
                        ..Default::default()
                    };
                    if let Err(error) = server.update_server(update).await {
                        warn!(%error, "keeping the allocation failed; its claim lapses");
                    }
                }
                view.touch();
            }
            Event::Lost { status } => {
                warn!(%status, "Berth refused the registration for good");
                view.change(|state| state.shutdown = true);
                let _ = end_child.try_send(());
            }
        }
    }
}
