//! The agent's stream to Berth's health service, opened in the background so that the local SDK answers from the
//! start: a call that needs Berth waits for the stream (bounded, as Agones' SDK server waits for its connection)
//! and answers UNAVAILABLE when it does not come up in time. Once registered, the Berth SDK itself keeps the stream
//! up, re-attaching after a health-replica restart.

use std::time::Duration;

use berth_sdk::game_server::{Events, GameServer, GameServerConfig};
use tokio::sync::{mpsc, watch};
use tonic::Status;
use tracing::warn;

/// How long a call waits for the stream to Berth before answering UNAVAILABLE.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// Pause between two failed registrations.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// A handle on the stream to Berth, cheap to clone.
#[derive(Clone)]
pub struct Link {
    server: watch::Receiver<Option<GameServer>>,
}

impl Link {
    /// Starts registering with `config` in the background, retrying until it succeeds; the server's events come
    /// out of the receiver once it has.
    pub fn open(config: GameServerConfig) -> (Link, mpsc::Receiver<Events>) {
        let (publish, server) = watch::channel(None);
        let (events_out, events_in) = mpsc::channel(1);
        tokio::spawn(async move {
            loop {
                match GameServer::connect(config.clone()).await {
                    Ok((server, events)) => {
                        publish.send_replace(Some(server));
                        let _ = events_out.send(events).await;
                        return;
                    }
                    Err(error) => {
                        warn!(%error, "registering with Berth failed; retrying");
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                }
            }
        });
        (Link { server }, events_in)
    }

    /// The registered server, once it is; UNAVAILABLE when it is not within CONNECT_WAIT.
    pub async fn server(&self) -> Result<GameServer, Status> {
        let mut server = self.server.clone();
        let ready = tokio::time::timeout(CONNECT_WAIT, server.wait_for(Option::is_some)).await;
        let unavailable = || Status::unavailable("the agent is not connected to Berth's health service yet");
        match ready {
            Ok(Ok(registered)) => registered.clone().ok_or_else(unavailable),
            _ => Err(unavailable()),
        }
    }
}
