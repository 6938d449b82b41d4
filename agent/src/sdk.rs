//! The Agones SDK service on loopback: each call mapped onto the Berth SDK stream the agent holds (see
//! `proto/agones/dev/sdk/sdk.proto` for what each does on Berth).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use berth_proto::agones::sdk::sdk_server::Sdk;
use berth_proto::agones::sdk::{self as agones, Empty, KeyValue};
use berth_proto::common::v1;
use berth_proto::health::v1::{ServerDescription, UpdateServer};
use berth_sdk::SdkError;
use berth_sdk::game_server::GameServer;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::link::Link;
use crate::record::{self, SDK_PREFIX};
use crate::view::{View, lock};

/// The service, over the agent's link to Berth and its view of the server. Clones share everything (a watch
/// runs on one).
#[derive(Clone)]
pub struct AgonesSdk {
    link: Link,
    view: Arc<View>,
    /// Told when the child must end (after Shutdown, as Agones deletes the pod).
    end_child: mpsc::Sender<()>,
    /// The record as last read, shown once the stream to Berth is over (after Shutdown).
    last: Arc<std::sync::Mutex<Option<ServerDescription>>>,
}

/// Agones' Reserve with 0 holds the server until Ready, Allocate or Shutdown; Berth's longest reservation is a day.
const RESERVE_UNTIL_TOLD: Duration = Duration::from_secs(86_400);

/// How long after a reservation's end its lapse is looked for: the placement service's claim sweep runs every
/// second by default.
const LAPSE_SEEN_AFTER: Duration = Duration::from_millis(1_500);

/// A Berth SDK error as the gRPC status an Agones client gets.
pub(crate) fn status(error: SdkError) -> Status {
    match error {
        SdkError::Refused { code, message, .. } => Status::new(code, message),
        SdkError::Disconnected => Status::unavailable("the process's stream to Berth is over"),
        other => Status::unavailable(other.to_string()),
    }
}

impl AgonesSdk {
    pub fn new(link: Link, view: Arc<View>, end_child: mpsc::Sender<()>) -> AgonesSdk {
        AgonesSdk {
            link,
            view,
            end_child,
            last: Arc::new(std::sync::Mutex::new(None)),
        }
    }

    /// A health ping.
    pub fn ping(&self) {
        self.view.ping();
    }

    /// The server as Agones shows it now.
    async fn current(&self, server: &GameServer) -> Result<agones::GameServer, Status> {
        let (agent, version) = self.view.snapshot();
        let description = match server.describe_server().await {
            Ok(description) => {
                *lock(&self.last) = Some(description.clone());
                description
            }
            Err(SdkError::Disconnected) if agent.shutdown => lock(&self.last)
                .clone()
                .ok_or_else(|| Status::unavailable("the process's stream to Berth is over"))?,
            Err(error) => return Err(status(error)),
        };
        Ok(record::game_server(
            &description,
            &agent,
            version,
            server.heartbeat_settings(),
        ))
    }

    /// Sets labels or annotations by key, in Redis where they are stored: one round trip, and a change racing it
    /// (an allocation's metadata) is kept.
    async fn set_metadata(&self, update: UpdateServer) -> Result<Response<Empty>, Status> {
        let server = self.link.server().await?;
        server.update_server(update).await.map_err(status)?;
        self.view.touch();
        Ok(Response::new(Empty {}))
    }
}

/// A label or annotation the server sets, under Agones' prefix for those the SDK sets.
fn sdk_pair(set: KeyValue) -> v1::KeyValue {
    v1::KeyValue {
        key: format!("{SDK_PREFIX}{}", set.key),
        value: set.value,
    }
}

type GameServerStream = Pin<Box<dyn Stream<Item = Result<agones::GameServer, Status>> + Send>>;

#[tonic::async_trait]
impl Sdk for AgonesSdk {
    async fn ready(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        let server = self.link.server().await?;
        server.ready().await.map_err(status)?;
        // Ready again after Reserve ends the reservation, as on Agones.
        if self.view.read(|state| state.reserved) {
            server.reserve(Duration::ZERO).await.map_err(status)?;
        }
        self.view.change(|state| {
            state.ready = true;
            state.reserved = false;
        });
        Ok(Response::new(Empty {}))
    }

    async fn allocate(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        let server = self.link.server().await?;
        let update = UpdateServer {
            mark_utilized: true,
            ..Default::default()
        };
        server.update_server(update).await.map_err(status)?;
        self.view.change(|state| state.reserved = false);
        Ok(Response::new(Empty {}))
    }

    async fn shutdown(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        let server = self.link.server().await?;
        // Kept for the reads that follow, once the stream to Berth is over.
        let _ = self.current(&server).await;
        match server.process_ending("Shutdown through the Agones SDK").await {
            Ok(()) | Err(SdkError::Disconnected) => {
                self.view.change(|state| state.shutdown = true);
                let _ = self.end_child.try_send(());
                Ok(Response::new(Empty {}))
            }
            Err(error) => Err(status(error)),
        }
    }

    async fn health(&self, request: Request<Streaming<Empty>>) -> Result<Response<Empty>, Status> {
        let mut pings = request.into_inner();
        while let Some(ping) = pings.next().await {
            ping?;
            self.ping();
        }
        Ok(Response::new(Empty {}))
    }

    async fn get_game_server(&self, _: Request<Empty>) -> Result<Response<agones::GameServer>, Status> {
        let server = self.link.server().await?;
        Ok(Response::new(self.current(&server).await?))
    }

    type WatchGameServerStream = GameServerStream;

    async fn watch_game_server(&self, _: Request<Empty>) -> Result<Response<GameServerStream>, Status> {
        let server = self.link.server().await?;
        let mut changes = self.view.watch();
        let first = self.current(&server).await?;
        let (send, receive) = mpsc::channel(16);
        let sdk = self.clone();
        tokio::spawn(async move {
            let mut next = Ok(first);
            loop {
                let ended = next.is_err();
                if send.send(next).await.is_err() || ended {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
                next = sdk.current(&server).await;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receive))))
    }

    async fn set_label(&self, request: Request<KeyValue>) -> Result<Response<Empty>, Status> {
        let update = UpdateServer {
            set_labels: vec![sdk_pair(request.into_inner())],
            ..Default::default()
        };
        self.set_metadata(update).await
    }

    async fn set_annotation(&self, request: Request<KeyValue>) -> Result<Response<Empty>, Status> {
        let update = UpdateServer {
            set_annotations: vec![sdk_pair(request.into_inner())],
            ..Default::default()
        };
        self.set_metadata(update).await
    }

    async fn reserve(&self, request: Request<agones::Duration>) -> Result<Response<Empty>, Status> {
        let seconds = request.into_inner().seconds;
        if !(0..=86_400).contains(&seconds) {
            return Err(Status::invalid_argument(format!(
                "seconds must be 0 to 86400, got {seconds}"
            )));
        }
        let server = self.link.server().await?;
        let duration = match seconds {
            0 => RESERVE_UNTIL_TOLD,
            seconds => Duration::from_secs(seconds as u64),
        };
        server.reserve(duration).await.map_err(status)?;
        self.view.change(|state| state.reserved = true);
        // Berth returns the server to the pool when the time is up; the watchers are told once that is done.
        let view = self.view.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration + LAPSE_SEEN_AFTER).await;
            view.touch();
        });
        Ok(Response::new(Empty {}))
    }
}
