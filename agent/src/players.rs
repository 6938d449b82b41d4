//! Agones' player tracking (the alpha SDK) on Berth: the agent keeps who is connected and reports it with every
//! heartbeat; a player holding a RESERVED player session of the game session the server hosts is accepted into it
//! on connecting and removed from it on leaving, so that Berth's slots follow what the game reports.

use std::sync::Arc;

use berth_proto::agones::sdk::alpha::sdk_server::Sdk;
use berth_proto::agones::sdk::alpha::{Bool, Count, Empty, PlayerId, PlayerIdList};
use berth_proto::session::v1::describe_player_sessions_request::Selector;
use berth_proto::session::v1::{DescribePlayerSessionsRequest, PlayerSessionStatus};
use berth_sdk::game_server::GameServer;
use tokio::sync::Mutex;
use tonic::{Request, Response, Status};
use tracing::warn;

use crate::link::Link;
use crate::record::SESSION_ID;
use crate::sdk::status;
use crate::view::{AgentState, Player, View};

/// The player-tracking service, over the agent's link to Berth and its view of the server.
pub struct AgonesPlayers {
    link: Link,
    view: Arc<View>,
    /// Serializes connects and disconnects, each a read of the list, maybe a call to Berth, and a write.
    serial: Mutex<()>,
}

impl AgonesPlayers {
    pub fn new(link: Link, view: Arc<View>) -> AgonesPlayers {
        AgonesPlayers {
            link,
            view,
            serial: Mutex::new(()),
        }
    }

    /// The RESERVED player session `player` holds in the game session the server hosts, if any.
    async fn reservation(&self, server: &GameServer, player: &str) -> Result<Option<(String, String)>, Status> {
        let Some(game_session_id) = self.view.read(|state| state.session.get(SESSION_ID).cloned()) else {
            return Ok(None);
        };
        let request = DescribePlayerSessionsRequest {
            selector: Some(Selector::PlayerId(player.to_owned())),
            status_filter: PlayerSessionStatus::Reserved as i32,
            page_size: 1000,
            page_token: String::new(),
        };
        let page = server.describe_player_sessions(request).await.map_err(status)?;
        Ok(page
            .player_sessions
            .into_iter()
            .find(|session| session.game_session_id == game_session_id)
            .map(|session| (session.game_session_id, session.player_session_id)))
    }

    /// Reports the connected players with the next heartbeat (the change that moved them told the watchers).
    fn publish(&self, server: &GameServer) {
        server.set_connected_players(self.view.read(player_ids));
    }
}

#[tonic::async_trait]
impl Sdk for AgonesPlayers {
    async fn player_connect(&self, request: Request<PlayerId>) -> Result<Response<Bool>, Status> {
        let id = request.into_inner().player_id;
        let server = self.link.server().await?;
        let _serial = self.serial.lock().await;
        let (connected, full) = self.view.read(|state| {
            let connected = state.players.iter().any(|player| player.id == id);
            (connected, state.players.len() as i64 >= state.capacity)
        });
        if connected {
            return Ok(Response::new(Bool { bool: false }));
        }
        if full {
            return Err(Status::unknown("players are already at capacity"));
        }
        let session = self.reservation(&server, &id).await?;
        if let Some((game_session_id, player_session_id)) = &session {
            server
                .accept_player_session(game_session_id.clone(), player_session_id.clone())
                .await
                .map_err(status)?;
        }
        self.view.change(|state| state.players.push(Player { id, session }));
        self.publish(&server);
        Ok(Response::new(Bool { bool: true }))
    }

    async fn player_disconnect(&self, request: Request<PlayerId>) -> Result<Response<Bool>, Status> {
        let id = request.into_inner().player_id;
        let server = self.link.server().await?;
        let _serial = self.serial.lock().await;
        let Some(player) = self
            .view
            .read(|state| state.players.iter().find(|player| player.id == id).cloned())
        else {
            return Ok(Response::new(Bool { bool: false }));
        };
        // The player is gone whatever Berth answers: a session that ended meanwhile completed its players itself.
        if let Some((game_session_id, player_session_id)) = player.session
            && let Err(error) = server.remove_player_session(&game_session_id, &player_session_id).await
        {
            warn!(%game_session_id, %player_session_id, %error, "completing the player's session failed");
        }
        self.view.change(|state| state.players.retain(|player| player.id != id));
        self.publish(&server);
        Ok(Response::new(Bool { bool: true }))
    }

    async fn set_player_capacity(&self, request: Request<Count>) -> Result<Response<Empty>, Status> {
        let capacity = request.into_inner().count;
        if capacity < 0 {
            return Err(Status::invalid_argument(format!(
                "count must be 0 or more, got {capacity}"
            )));
        }
        self.view.change(|state| state.capacity = capacity);
        Ok(Response::new(Empty {}))
    }

    async fn get_player_capacity(&self, _: Request<Empty>) -> Result<Response<Count>, Status> {
        let count = self.view.read(|state| state.capacity);
        Ok(Response::new(Count { count }))
    }

    async fn get_player_count(&self, _: Request<Empty>) -> Result<Response<Count>, Status> {
        let count = self.view.read(|state| state.players.len() as i64);
        Ok(Response::new(Count { count }))
    }

    async fn is_player_connected(&self, request: Request<PlayerId>) -> Result<Response<Bool>, Status> {
        let id = request.into_inner().player_id;
        let connected = self
            .view
            .read(|state| state.players.iter().any(|player| player.id == id));
        Ok(Response::new(Bool { bool: connected }))
    }

    async fn get_connected_players(&self, _: Request<Empty>) -> Result<Response<PlayerIdList>, Status> {
        let list = self.view.read(player_ids);
        Ok(Response::new(PlayerIdList { list }))
    }
}

/// The ids of the players connected, in the order they connected.
fn player_ids(state: &AgentState) -> Vec<String> {
    state.players.iter().map(|player| player.id.clone()).collect()
}
