//! The game-server SDK: what a dedicated game server process links to talk to Berth (the GameLift server SDK,
//! PlayFab GSDK and Agones SDK in one). It keeps the process's one stream to the health service
//! (`berth.health.v1.SdkService/Attach`) alive in a background task — registration, heartbeats, resuming after a
//! broken connection, re-sending unanswered requests — and turns Berth's level-triggered commands into
//! [`Event`]s that the game sees exactly once, so that game code only reacts to events and calls methods.
//!
//! ```no_run
//! use berth_sdk::game_server::{Event, GameServer, GameServerConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // BERTH_SDK_ENDPOINT, BERTH_SDK_TOKEN, BERTH_FLEET_ID, … as set by the provisioner.
//! let (server, mut events) = GameServer::connect(GameServerConfig::from_env()?).await?;
//! server.set_health_check(|| berth_proto::health::v1::ProcessHealth::Healthy);
//! // … load maps and assets …
//! server.ready().await?;
//! while let Some(event) = events.recv().await {
//!     match event {
//!         Event::StartGameSession { game_session, .. } => {
//!             // … set the match up from game_session.game_session_data …
//!             server.activate_game_session(&game_session.game_session_id).await?;
//!         }
//!         Event::Terminate { .. } => {
//!             server.process_ending("terminated").await?;
//!             return Ok(());
//!         }
//!         Event::Lost { status } => return Err(status.into()),
//!         // A game session changed; the server was claimed or allocated (players are on their way).
//!         Event::UpdateGameSession { .. } | Event::ServerChanged { .. } => {}
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! Each request method sends one request and waits for its reply; a reply with an error code becomes
//! [`SdkError::Refused`]. Requests made while the stream is being resumed wait and go out on the new stream.
//! Dropping every [`GameServer`] handle closes the stream without process_ending, which Berth treats as a crash.

mod config;
mod driver;
mod pacer;
mod reconcile;
#[cfg(test)]
mod stream_tests;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use berth_proto::health::v1::attach_request::Kind as RequestKind;
use berth_proto::health::v1::reply::Result as ReplyResult;
use berth_proto::health::v1::sdk_service_client::SdkServiceClient;
use berth_proto::health::v1::{
    AcceptPlayerSession, ActivateGameSession, DescribeServer, EndGameSession, GameSessionUpdateReason, GameState,
    GetTerminationTime, ProcessEnding, ProcessHealth, ProcessReady, RejectGameSession, RemovePlayerSession,
    ReplyFieldViolation, ReserveServer, ServerDescription, TerminationReason, UpdatePlayerSessionCreationPolicy,
    UpdateServer,
};
use berth_proto::session::v1::{
    DescribePlayerSessionsRequest, DescribePlayerSessionsResponse, GameSession, PlayerSession,
    PlayerSessionCreationPolicy,
};
use tokio::sync::{Notify, mpsc, oneshot};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tracing::Instrument;

pub use config::{ConfigError, GameServerConfig};
pub use driver::resume_backoff;
use driver::{Command, Driver};

use crate::{AuthedChannel, BearerToken, ClientError};

/// Something Berth asks of the game, surfaced once however often it is delivered.
#[derive(Debug)]
pub enum Event {
    /// Host this game session (GameLift onStartGameSession): prepare it, then call
    /// [`GameServer::activate_game_session`] before its activation deadline, or
    /// [`GameServer::reject_game_session`].
    StartGameSession {
        /// The session, with everything the game needs.
        game_session: GameSession,
        /// Player sessions reserved with it.
        player_sessions: Vec<PlayerSession>,
    },
    /// A hosted game session changed (GameLift onUpdateGameSession). With TERMINATION_REQUESTED, end it with
    /// [`GameServer::end_game_session`] before `termination_deadline`; with FORCE_TERMINATED, stop hosting it.
    UpdateGameSession {
        /// The session after the change.
        game_session: GameSession,
        /// What changed.
        reason: GameSessionUpdateReason,
        /// By when to end it, with TERMINATION_REQUESTED when known.
        termination_deadline: Option<SystemTime>,
    },
    /// The process must end (GameLift onProcessTerminate): wind down, call [`GameServer::process_ending`] before
    /// `deadline` and exit. Heartbeats report TERMINATING from now on.
    Terminate {
        /// Why.
        reason: TerminationReason,
        /// By when process_ending must be sent; the process is killed afterwards.
        deadline: Option<SystemTime>,
        /// No grace: save what can be saved and exit now.
        force: bool,
    },
    /// The server's record was changed from outside the process: it was claimed (ClaimGameServer) or allocated
    /// (Agones' allocation API), or an allocation wrote its metadata, counters or lists.
    ServerChanged {
        /// The record after the change.
        server: Box<ServerDescription>,
    },
    /// The last event: Berth refused the registration for good (typically declared the server lost after a
    /// long disconnection, or a newer process took it over). The process must exit.
    Lost {
        /// What the service said.
        status: tonic::Status,
    },
}

/// The events of one game server, in the order they were surfaced. Ends after [`Event::Lost`], or once
/// process_ending has been answered.
pub struct Events {
    receiver: mpsc::UnboundedReceiver<Event>,
}

impl Events {
    /// The next event; `None` once the stream is over.
    pub async fn recv(&mut self) -> Option<Event> {
        self.receiver.recv().await
    }
}

/// Why the SDK could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    /// The channel to the health service could not be set up.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The service refused register_process, or could not be reached for it.
    #[error("registration failed ({code:?}): {message}", code = .0.code(), message = .0.message())]
    Registration(Box<tonic::Status>),
    /// The service answered the request with an error.
    #[error("refused ({code:?}): {message}")]
    Refused {
        /// The gRPC status code of the reply.
        code: tonic::Code,
        /// What went wrong and what would be right.
        message: String,
        /// Fields that were wrong, with INVALID_ARGUMENT.
        field_violations: Vec<ReplyFieldViolation>,
    },
    /// The stream is over (process_ending answered, or the server lost): no request can be made any more.
    #[error("the game server's stream to Berth is over")]
    Disconnected,
    /// The service answered OK without what the request returns.
    #[error("the service answered OK without its {0}")]
    MissingResult(&'static str),
}

/// The health a process reports, asked at every heartbeat. Called from the SDK's task: keep it quick and
/// non-blocking (read a flag the game maintains).
type HealthCheck = Arc<dyn Fn() -> ProcessHealth + Send + Sync>;

/// What the handles and the background task share.
struct Shared {
    identity: Mutex<Identity>,
    heartbeats: Mutex<HeartbeatSettings>,
    status: Mutex<ProcessStatus>,
    /// Wakes the task to heartbeat at once when the reported state changed.
    changed: Notify,
    /// Keeps the requests under the stream's message-rate limit.
    pacer: pacer::Pacer,
}

/// How often the process heartbeats and how many missed or UNHEALTHY heartbeats end it: its fleet's
/// process_timeouts, as the service last told them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeartbeatSettings {
    /// Heartbeat period.
    pub interval: Duration,
    /// Consecutive UNHEALTHY or missed heartbeats before the process is terminated.
    pub unhealthy_after: u32,
}

#[derive(Default)]
struct Identity {
    game_server_id: String,
    registration_id: String,
}

struct ProcessStatus {
    game_state: GameState,
    connected_player_ids: Vec<String>,
    health_check: Option<HealthCheck>,
}

/// The locks guard plain values that every writer leaves consistent, so a panic elsewhere while one was held
/// does not make them unusable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn new() -> Shared {
        Shared {
            identity: Mutex::new(Identity::default()),
            heartbeats: Mutex::new(HeartbeatSettings::default()),
            status: Mutex::new(ProcessStatus {
                game_state: GameState::Initializing,
                connected_player_ids: Vec::new(),
                health_check: None,
            }),
            changed: Notify::new(),
            pacer: pacer::Pacer::default(),
        }
    }

    fn set_heartbeats(&self, interval_ms: u32, unhealthy_after: u32) {
        *lock(&self.heartbeats) = HeartbeatSettings {
            interval: Duration::from_millis(interval_ms.into()),
            unhealthy_after,
        };
    }

    fn set_identity(&self, game_server_id: String, registration_id: String) {
        *lock(&self.identity) = Identity {
            game_server_id,
            registration_id,
        };
    }

    /// Moves the game state forward (INITIALIZING → STANDING_BY → ACTIVE → TERMINATING), never back.
    fn advance(&self, game_state: GameState) {
        let mut status = lock(&self.status);
        if game_state > status.game_state {
            status.game_state = game_state;
            drop(status);
            self.changed.notify_one();
        }
    }

    fn heartbeat_status(&self) -> (ProcessHealth, GameState, Vec<String>) {
        let (health_check, game_state, players) = {
            let status = lock(&self.status);
            (
                status.health_check.clone(),
                status.game_state,
                status.connected_player_ids.clone(),
            )
        };
        // Outside the lock: the hook is the game's code.
        let health = health_check.map_or(ProcessHealth::Healthy, |check| check());
        (health, game_state, players)
    }
}

/// Converts a protobuf time; `None` when unset or not representable.
fn system_time(timestamp: Option<prost_types::Timestamp>) -> Option<SystemTime> {
    timestamp.and_then(|timestamp| SystemTime::try_from(timestamp).ok())
}

/// A handle on one registered game server process. Cheap to clone; every clone talks through the same stream.
#[derive(Clone)]
pub struct GameServer {
    commands: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
}

impl GameServer {
    /// Connects to `config.sdk_endpoint`, registers, and starts the background task. Returns once registered.
    pub async fn connect(config: GameServerConfig) -> Result<(GameServer, Events), SdkError> {
        let channel = crate::connect(&config.sdk_endpoint, &config.token).await?;
        GameServer::start(channel, config).await
    }

    /// As [`GameServer::connect`], over an existing channel (`config.sdk_endpoint` is not used): a load generator
    /// simulating many servers runs their streams over a few HTTP/2 connections instead of one each.
    pub async fn connect_with(channel: Channel, config: GameServerConfig) -> Result<(GameServer, Events), SdkError> {
        let channel = InterceptedService::new(channel, BearerToken::new(&config.token)?);
        GameServer::start(channel, config).await
    }

    async fn start(channel: AuthedChannel, config: GameServerConfig) -> Result<(GameServer, Events), SdkError> {
        let (commands, command_receiver) = mpsc::unbounded_channel();
        let (events, event_receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::new());
        let mut driver = Driver::new(
            SdkServiceClient::new(channel),
            config.register_process(),
            shared.clone(),
            command_receiver,
            events,
        );
        let link = driver
            .register()
            .await
            .map_err(|status| SdkError::Registration(Box::new(status)))?;
        let server = GameServer { commands, shared };
        let span = tracing::info_span!("game_server", game_server_id = %server.game_server_id());
        tokio::spawn(driver.run(link).instrument(span));
        Ok((
            server,
            Events {
                receiver: event_receiver,
            },
        ))
    }

    /// Id of the server, as registered.
    pub fn game_server_id(&self) -> String {
        lock(&self.shared.identity).game_server_id.clone()
    }

    /// The fleet's heartbeat settings, as the service last told them.
    pub fn heartbeat_settings(&self) -> HeartbeatSettings {
        *lock(&self.shared.heartbeats)
    }

    /// Id of the current registration.
    pub fn registration_id(&self) -> String {
        lock(&self.shared.identity).registration_id.clone()
    }

    /// Sets the hook asked for the process's health at every heartbeat (HEALTHY without one). It runs on the
    /// SDK's task: it must return at once. A heartbeat goes out now with its answer.
    pub fn set_health_check(&self, check: impl Fn() -> ProcessHealth + Send + Sync + 'static) {
        lock(&self.shared.status).health_check = Some(Arc::new(check));
        self.shared.changed.notify_one();
    }

    /// Sets the players connected right now, reported from the next heartbeat on (the first 1000).
    pub fn set_connected_players(&self, player_ids: impl IntoIterator<Item = impl Into<String>>) {
        lock(&self.shared.status).connected_player_ids = player_ids.into_iter().map(Into::into).collect();
    }

    /// The process is loaded and may be given game sessions (ProcessReady). Heartbeats report STANDING_BY.
    pub async fn ready(&self) -> Result<(), SdkError> {
        self.request(RequestKind::Ready(ProcessReady::default())).await?;
        self.shared.advance(GameState::StandingBy);
        Ok(())
    }

    /// The game session given by [`Event::StartGameSession`] is started and takes players. Heartbeats report
    /// ACTIVE.
    pub async fn activate_game_session(&self, game_session_id: impl Into<String>) -> Result<GameSession, SdkError> {
        let game_session_id = game_session_id.into();
        let request = RequestKind::ActivateGameSession(ActivateGameSession { game_session_id });
        let game_session = self.game_session_request(request).await?;
        self.shared.advance(GameState::Active);
        Ok(game_session)
    }

    /// The game could not start a game session it was given; its placement, if any, tries elsewhere.
    pub async fn reject_game_session(
        &self,
        game_session_id: impl Into<String>,
        reason: impl Into<String>,
    ) -> Result<GameSession, SdkError> {
        self.game_session_request(RequestKind::RejectGameSession(RejectGameSession {
            game_session_id: game_session_id.into(),
            reason: reason.into(),
        }))
        .await
    }

    /// A player connected presenting `player_session_id`: let them in only on `Ok`.
    pub async fn accept_player_session(
        &self,
        game_session_id: impl Into<String>,
        player_session_id: impl Into<String>,
    ) -> Result<PlayerSession, SdkError> {
        self.player_session_request(RequestKind::AcceptPlayerSession(AcceptPlayerSession {
            game_session_id: game_session_id.into(),
            player_session_id: player_session_id.into(),
        }))
        .await
    }

    /// A player left: their slot frees up.
    pub async fn remove_player_session(
        &self,
        game_session_id: impl Into<String>,
        player_session_id: impl Into<String>,
    ) -> Result<PlayerSession, SdkError> {
        self.player_session_request(RequestKind::RemovePlayerSession(RemovePlayerSession {
            game_session_id: game_session_id.into(),
            player_session_id: player_session_id.into(),
        }))
        .await
    }

    /// Opens or closes a game session to new players.
    pub async fn update_player_session_creation_policy(
        &self,
        game_session_id: impl Into<String>,
        policy: PlayerSessionCreationPolicy,
    ) -> Result<GameSession, SdkError> {
        let request = UpdatePlayerSessionCreationPolicy {
            game_session_id: game_session_id.into(),
            player_session_creation_policy: policy as i32,
        };
        self.game_session_request(RequestKind::UpdatePlayerSessionCreationPolicy(request))
            .await
    }

    /// Looks up player sessions of this process's game sessions.
    pub async fn describe_player_sessions(
        &self,
        request: DescribePlayerSessionsRequest,
    ) -> Result<DescribePlayerSessionsResponse, SdkError> {
        match self.request(RequestKind::DescribePlayerSessions(request)).await? {
            Some(ReplyResult::PlayerSessions(page)) => Ok(page),
            _ => Err(SdkError::MissingResult("player_sessions")),
        }
    }

    /// The match is over: the game session ends and its slot is free for another.
    pub async fn end_game_session(&self, game_session_id: impl Into<String>) -> Result<GameSession, SdkError> {
        let game_session_id = game_session_id.into();
        self.game_session_request(RequestKind::EndGameSession(EndGameSession { game_session_id }))
            .await
    }

    /// When the process will be terminated, if that is scheduled.
    pub async fn termination_time(&self) -> Result<Option<SystemTime>, SdkError> {
        match self
            .request(RequestKind::GetTerminationTime(GetTerminationTime {}))
            .await?
        {
            Some(ReplyResult::TerminationTime(time)) => Ok(system_time(time.termination_time)),
            _ => Err(SdkError::MissingResult("termination_time")),
        }
    }

    /// Keeps the server out of placements, claims and scale-in for `duration` (whole seconds); zero ends a
    /// reservation.
    pub async fn reserve(&self, duration: Duration) -> Result<ServerDescription, SdkError> {
        // Beyond the contract's 86400 s either way: the service answers INVALID_ARGUMENT.
        let duration_seconds = u32::try_from(duration.as_secs()).unwrap_or(u32::MAX);
        self.server_request(RequestKind::Reserve(ReserveServer { duration_seconds }))
            .await
    }

    /// Changes the server's own record (game data, labels, counters, UTILIZED).
    pub async fn update_server(&self, update: UpdateServer) -> Result<ServerDescription, SdkError> {
        self.server_request(RequestKind::UpdateServer(update)).await
    }

    /// The server's record as Berth sees it.
    pub async fn describe_server(&self) -> Result<ServerDescription, SdkError> {
        self.server_request(RequestKind::DescribeServer(DescribeServer {}))
            .await
    }

    /// The process is ending: its game sessions end, it leaves the registry, and it must exit within the
    /// registration's exit timeout. The stream closes afterwards; no request can follow.
    pub async fn process_ending(&self, reason: impl Into<String>) -> Result<(), SdkError> {
        self.shared.advance(GameState::Terminating);
        let reason = reason.into();
        self.request(RequestKind::ProcessEnding(ProcessEnding { reason }))
            .await?;
        Ok(())
    }

    async fn request(&self, kind: RequestKind) -> Result<Option<ReplyResult>, SdkError> {
        self.shared.pacer.wait_turn().await;
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command { kind, reply })
            .map_err(|_| SdkError::Disconnected)?;
        let reply = answer.await.map_err(|_| SdkError::Disconnected)?;
        if reply.code != tonic::Code::Ok as i32 {
            return Err(SdkError::Refused {
                code: tonic::Code::from(reply.code),
                message: reply.message,
                field_violations: reply.field_violations,
            });
        }
        Ok(reply.result)
    }

    async fn game_session_request(&self, kind: RequestKind) -> Result<GameSession, SdkError> {
        match self.request(kind).await? {
            Some(ReplyResult::GameSession(game_session)) => Ok(game_session),
            _ => Err(SdkError::MissingResult("game_session")),
        }
    }

    async fn player_session_request(&self, kind: RequestKind) -> Result<PlayerSession, SdkError> {
        match self.request(kind).await? {
            Some(ReplyResult::PlayerSession(player_session)) => Ok(player_session),
            _ => Err(SdkError::MissingResult("player_session")),
        }
    }

    async fn server_request(&self, kind: RequestKind) -> Result<ServerDescription, SdkError> {
        match self.request(kind).await? {
            Some(ReplyResult::Server(server)) => Ok(server),
            _ => Err(SdkError::MissingResult("server")),
        }
    }
}
