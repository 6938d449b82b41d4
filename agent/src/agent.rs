//! One agent: the Agones SDK served on a loopback port, the stream to Berth behind it, and the events that follow.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use berth_proto::agones::sdk::alpha::sdk_server::SdkServer as AlphaServer;
use berth_proto::agones::sdk::beta::sdk_server::SdkServer as BetaServer;
use berth_proto::agones::sdk::sdk_server::SdkServer;
use berth_proto::health::v1::UpdateServer;
use berth_sdk::game_server::GameServerConfig;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::TcpListenerStream;
use tracing::warn;

use crate::counters::AgonesCounters;
use crate::link::Link;
use crate::players::AgonesPlayers;
use crate::sdk::AgonesSdk;
use crate::view::View;
use crate::{events, http};

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The SDK port could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// How long an agent whose server exited tries to tell Berth before exiting all the same.
const ENDING_TOLD_WITHIN: Duration = Duration::from_secs(10);

/// A running agent.
pub struct Agent {
    grpc: SocketAddr,
    http: SocketAddr,
    link: Link,
    view: Arc<View>,
    end_child: mpsc::Receiver<()>,
}

impl Agent {
    /// Serves the Agones SDK over gRPC on `grpc` and over HTTP on `http` (port 0: any free one), and registers with
    /// Berth as `config` says, in the background, with the counters and lists `declared`.
    pub async fn start(
        config: GameServerConfig,
        declared: UpdateServer,
        grpc: SocketAddr,
        http: SocketAddr,
    ) -> Result<Agent, AgentError> {
        let (grpc_listener, grpc) = bind(grpc).await?;
        let (http_listener, http) = bind(http).await?;
        // As Berth reads max_players: 0 means 1000.
        let capacity = if config.max_players == 0 {
            1000
        } else {
            config.max_players
        };
        let (link, mut registered) = Link::open(config, declared);
        let view = Arc::new(View::new(i64::from(capacity)));
        let (end_sender, end_child) = mpsc::channel(1);
        let sdk = Arc::new(AgonesSdk::new(link.clone(), view.clone(), end_sender.clone()));
        let players = Arc::new(AgonesPlayers::new(link.clone(), view.clone()));
        let counters = Arc::new(AgonesCounters::new(link.clone(), view.clone()));
        let service = SdkServer::from_arc(sdk.clone());
        let alpha = AlphaServer::from_arc(players.clone());
        let beta = BetaServer::from_arc(counters.clone());
        tokio::spawn(async move {
            let serving = tonic::transport::Server::builder()
                .add_service(service)
                .add_service(alpha)
                .add_service(beta)
                .serve_with_incoming(TcpListenerStream::new(grpc_listener));
            if let Err(error) = serving.await {
                warn!(%error, "the Agones SDK's gRPC server stopped");
            }
        });
        tokio::spawn(async move {
            if let Err(error) = axum::serve(http_listener, http::router(sdk, players, counters)).await {
                warn!(%error, "the Agones SDK's HTTP server stopped");
            }
        });
        let (events_link, events_view) = (link.clone(), view.clone());
        tokio::spawn(async move {
            // Refused for good: the server can never join, so it ends.
            let Some(events) = registered.recv().await else {
                let _ = end_sender.try_send(());
                return;
            };
            let Ok(server) = events_link.server().await else { return };
            events::watch_health(&server, events_view.clone());
            events::follow(server, events, events_view, end_sender).await;
        });
        Ok(Agent {
            grpc,
            http,
            link,
            view,
            end_child,
        })
    }

    /// Where the Agones SDK is served over gRPC.
    pub fn grpc_address(&self) -> SocketAddr {
        self.grpc
    }

    /// Where the Agones SDK is served over HTTP.
    pub fn http_address(&self) -> SocketAddr {
        self.http
    }

    /// Waits until Berth wants the child to end (told to terminate, its game session ended, or the server lost).
    pub async fn child_must_end(&mut self) {
        if self.end_child.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }

    /// The child exited by itself (`how`: its exit status): Berth is told at once with a ProcessEnding, unless it
    /// was told already (Shutdown, or the end of its game session).
    pub async fn child_exited(&self, how: &str) {
        if self.view.read(|state| state.shutdown) {
            return;
        }
        self.view.change(|state| state.shutdown = true);
        let told = async {
            let server = self.link.server().await.map_err(|status| status.message().to_owned())?;
            server
                .process_ending(format!("the game server exited: {how}"))
                .await
                .map_err(|error| error.to_string())
        };
        // The agent exits with its server even when Berth cannot be told: its heartbeats stop, which Berth notices.
        match tokio::time::timeout(ENDING_TOLD_WITHIN, told).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => warn!(%error, "telling Berth that the process ended failed"),
            Err(_) => warn!(within = ?ENDING_TOLD_WITHIN, "Berth could not be told that the process ended"),
        }
    }
}

/// Listens on `address`, answering the address bound (the port chosen when it was 0).
async fn bind(address: SocketAddr) -> Result<(TcpListener, SocketAddr), AgentError> {
    let bind_error = |source| AgentError::Bind { address, source };
    let listener = TcpListener::bind(address).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    Ok((listener, bound))
}
