//! One agent: the Agones SDK served on a loopback port, the stream to Berth behind it, and the events that follow.

use std::net::SocketAddr;
use std::sync::Arc;

use berth_proto::agones::sdk::sdk_server::SdkServer;
use berth_sdk::game_server::GameServerConfig;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::TcpListenerStream;
use tracing::warn;

use crate::events;
use crate::link::Link;
use crate::sdk::AgonesSdk;
use crate::view::View;

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

/// A running agent.
pub struct Agent {
    address: SocketAddr,
    link: Link,
    view: Arc<View>,
    end_child: mpsc::Receiver<()>,
}

impl Agent {
    /// Serves the Agones SDK on `grpc` (port 0: any free one) and registers with Berth as `config` says, in the
    /// background.
    pub async fn start(config: GameServerConfig, grpc: SocketAddr) -> Result<Agent, AgentError> {
        let listener = TcpListener::bind(grpc)
            .await
            .map_err(|source| AgentError::Bind { address: grpc, source })?;
        let address = listener
            .local_addr()
            .map_err(|source| AgentError::Bind { address: grpc, source })?;
        let (link, mut registered) = Link::open(config);
        let view = Arc::new(View::new());
        let (end_sender, end_child) = mpsc::channel(1);
        let service = SdkServer::new(AgonesSdk::new(link.clone(), view.clone()));
        tokio::spawn(async move {
            let serving = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener));
            if let Err(error) = serving.await {
                warn!(%error, "the Agones SDK server stopped");
            }
        });
        let (events_link, events_view) = (link.clone(), view.clone());
        tokio::spawn(async move {
            let Some(events) = registered.recv().await else { return };
            let Ok(server) = events_link.server().await else { return };
            events::watch_health(&server, events_view.clone());
            events::follow(server, events, events_view, end_sender).await;
        });
        Ok(Agent {
            address,
            link,
            view,
            end_child,
        })
    }

    /// Where the Agones SDK is served.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Waits until Berth wants the child to end (told to terminate, its game session ended, or the server lost).
    pub async fn child_must_end(&mut self) {
        if self.end_child.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }

    /// The child exited by itself (`how`: its exit status): Berth is told at once with a ProcessEnding, unless the
    /// game server already said Shutdown.
    pub async fn child_exited(&self, how: &str) {
        if self.view.snapshot().0.shutdown {
            return;
        }
        self.view.change(|state| state.shutdown = true);
        if let Ok(server) = self.link.server().await
            && let Err(error) = server.process_ending(format!("the game server exited: {how}")).await
        {
            warn!(%error, "telling Berth that the process ended failed");
        }
    }
}
