//! The agent's stream to Berth's health service, opened in the background so that the local SDK answers from the
//! start: a call that needs Berth waits for the stream (bounded, as Agones' SDK server waits for its connection)
//! and answers UNAVAILABLE when it does not come up in time. Once registered, the Berth SDK itself keeps the stream
//! up, re-attaching after a health-replica restart. A refusal that retrying cannot change (no such fleet, a token
//! for another server, the fleet being deleted) is final: every call answers it, and the child is told to end.

use std::time::Duration;

use berth_proto::health::v1::UpdateServer;
use berth_sdk::ClientError;
use berth_sdk::SdkError;
use berth_sdk::game_server::{Events, GameServer, GameServerConfig};
use tokio::sync::{mpsc, watch};
use tonic::{Code, Status};
use tracing::{error, warn};

/// How long a call waits for the stream to Berth before answering UNAVAILABLE.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// Pause between two failed registrations.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// Where the registration stands.
#[derive(Clone)]
enum Linked {
    Connecting,
    Up(GameServer),
    Refused(Status),
}

/// A handle on the stream to Berth, cheap to clone.
#[derive(Clone)]
pub struct Link {
    linked: watch::Receiver<Linked>,
}

/// The refusal of a registration that no retry can change, if `error` is one.
fn final_refusal(error: &SdkError) -> Option<Status> {
    match error {
        SdkError::Registration(status)
            if matches!(
                status.code(),
                Code::InvalidArgument
                    | Code::NotFound
                    | Code::AlreadyExists
                    | Code::PermissionDenied
                    | Code::Unauthenticated
                    | Code::FailedPrecondition
                    | Code::OutOfRange
            ) =>
        {
            Some(Status::new(
                status.code(),
                format!("Berth refused this game server: {}", status.message()),
            ))
        }
        SdkError::Client(ClientError::BadToken) => Some(Status::unauthenticated(error.to_string())),
        _ => None,
    }
}

impl Link {
    /// Starts registering with `config` in the background, retrying until it succeeds or is refused for good, and
    /// then sets the counters and lists `declared` (as an Agones GameServer's spec declares them); the server's
    /// events come out of the receiver once it has registered, which closes without them on a final refusal.
    pub fn open(config: GameServerConfig, declared: UpdateServer) -> (Link, mpsc::Receiver<Events>) {
        let (publish, linked) = watch::channel(Linked::Connecting);
        let (events_out, events_in) = mpsc::channel(1);
        tokio::spawn(async move {
            loop {
                match GameServer::connect(config.clone()).await {
                    Ok((server, events)) => {
                        // Before any call sees the server, so that none finds a declared counter missing.
                        if (!declared.counters.is_empty() || !declared.lists.is_empty())
                            && let Err(refused) = server.update_server(declared.clone()).await
                        {
                            error!(%refused, "Berth refused the declared counters and lists");
                        }
                        publish.send_replace(Linked::Up(server));
                        let _ = events_out.send(events).await;
                        return;
                    }
                    Err(refused) => {
                        if let Some(status) = final_refusal(&refused) {
                            error!(%refused, "Berth refused this game server for good");
                            publish.send_replace(Linked::Refused(status));
                            return;
                        }
                        warn!(error = %refused, "registering with Berth failed; retrying");
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                }
            }
        });
        (Link { linked }, events_in)
    }

    /// The registered server, once it is; the refusal when it was refused for good; UNAVAILABLE when neither
    /// within CONNECT_WAIT.
    pub async fn server(&self) -> Result<GameServer, Status> {
        let mut linked = self.linked.clone();
        let settled = tokio::time::timeout(
            CONNECT_WAIT,
            linked.wait_for(|linked| !matches!(linked, Linked::Connecting)),
        )
        .await;
        let unavailable = || Status::unavailable("the agent is not connected to Berth's health service yet");
        let Ok(Ok(linked)) = settled else {
            return Err(unavailable());
        };
        match &*linked {
            Linked::Up(server) => Ok(server.clone()),
            Linked::Refused(status) => Err(status.clone()),
            Linked::Connecting => Err(unavailable()),
        }
    }
}
