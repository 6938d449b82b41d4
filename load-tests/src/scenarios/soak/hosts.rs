//! The soak's game servers: real `berth_sdk` game servers, thousands of them in this process, each on a channel
//! balanced over both health replicas, as a deployment's processes reach the health service through one address
//! in front of its replicas. When a replica dies the SDK resumes its registration on the other; the soak only
//! watches whether the health service ever declares one of them lost, which none of them deserves: they never stop
//! heartbeating.
//!
//! Each hosts one game session at a time: it activates what it is given, lets the players reserved with it in, plays
//! a short match, lets them go and ends the session, as a real server does. What each server was told to host is
//! written in the [`Book`], where the soak checks that no placement was given two game sessions.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_proto::common::v1::Endpoint;
use berth_proto::session::v1::GameSession;
use berth_runtime::auth::Role;
use berth_sdk::game_server::{Event, Events, GameServer, GameServerConfig, SdkError};
use berth_testkit::token;
use rand::Rng as _;
use tokio::task::JoinSet;
use tonic::Code;
use tonic::transport::Channel;

use crate::Failure;
use crate::fleet;

/// Servers on one balanced channel: few enough that a connection's HTTP/2 budget is never reached (see
/// `sdk_stream::STREAMS_PER_CONNECTION`).
const SERVERS_PER_CHANNEL: u64 = 500;
/// How long a match lasts, at random between these, in ms.
const MATCH_MS: (u64, u64) = (300, 2_000);
/// How many times a server repeats a request the service could not answer (its replica was dying, Redis paused),
/// a quarter of a second apart: long enough to outlast any fault the soak injects.
const RETRIES: u32 = 120;
const RETRY_EVERY: Duration = Duration::from_millis(250);
/// Most players a session of these servers takes.
pub const MAX_PLAYERS: u32 = 8;

/// What the servers did, and what they were told.
#[derive(Default)]
pub struct Book {
    /// The game sessions servers were told to host, by the placement that made them.
    placed: Mutex<HashMap<String, HashSet<String>>>,
    /// Servers the health service declared lost, with what it said and when the server heard it.
    lost: Mutex<Vec<(Instant, String, String)>>,
    /// Requests given up on after every retry, by what the service last said.
    given_up: Mutex<HashMap<String, u64>>,
    pub activated: AtomicU64,
    pub accepted: AtomicU64,
    pub removed: AtomicU64,
    pub ended: AtomicU64,
}

impl Book {
    /// The game sessions each placement's servers were told to host.
    pub fn placed(&self) -> HashMap<String, HashSet<String>> {
        self.placed.lock().expect("book lock").clone()
    }

    /// The servers declared lost: when each heard so, its id and the service's words.
    pub fn lost(&self) -> Vec<(Instant, String, String)> {
        self.lost.lock().expect("book lock").clone()
    }

    /// Requests given up on, by the last error.
    pub fn given_up(&self) -> HashMap<String, u64> {
        self.given_up.lock().expect("book lock").clone()
    }

    fn gave_up(&self, what: &str, err: &SdkError) {
        let key = format!(
            "{what}: {}",
            code_of(err).map_or_else(|| err.to_string(), |code| format!("{code:?}"))
        );
        *self.given_up.lock().expect("book lock").entry(key).or_default() += 1;
    }
}

fn code_of(err: &SdkError) -> Option<Code> {
    match err {
        SdkError::Refused { code, .. } => Some(*code),
        _ => None,
    }
}

/// Whether the service may answer a repeat of the request differently: it was unavailable or overloaded rather than
/// refusing the request itself.
fn transient(err: &SdkError) -> bool {
    matches!(
        code_of(err),
        Some(Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted | Code::Aborted | Code::Internal)
    )
}

/// Runs `call` until it answers, is refused for good, or [`RETRIES`] run out; `what` names it in the book.
async fn persist<T, F, Fut>(book: &Book, what: &str, mut call: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError>>,
{
    for _ in 0..RETRIES {
        match call().await {
            Ok(answer) => return Some(answer),
            Err(err) if transient(&err) => tokio::time::sleep(RETRY_EVERY).await,
            Err(err) => {
                book.gave_up(what, &err);
                return None;
            }
        }
    }
    book.gave_up(what, &SdkError::Disconnected);
    None
}

/// One balanced channel per [`SERVERS_PER_CHANNEL`] servers over the health replicas at `endpoints`.
pub fn channels(endpoints: &[String], servers: u64) -> Result<Vec<Channel>, Failure> {
    (0..servers.div_ceil(SERVERS_PER_CHANNEL).max(1))
        .map(|_| {
            let endpoints = endpoints
                .iter()
                .map(|endpoint| {
                    tonic::transport::Endpoint::from_shared(endpoint.clone()).map(|one| one.tcp_nodelay(true))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Channel::balance_list(endpoints.into_iter()))
        })
        .collect()
}

/// The registration of server `index` of `fleet_id`.
fn config(fleet_id: &str, index: u64) -> GameServerConfig {
    let server = fleet::server(index);
    GameServerConfig {
        token: token(Role::GameServer, Some((fleet_id, &server.id))),
        fleet_id: fleet_id.into(),
        game_server_id: server.id,
        instance_id: server.instance,
        location: fleet::LOCATION.into(),
        endpoint: Endpoint {
            ip_address: server.ip,
            dns_name: String::new(),
            port: server.port,
        },
        max_concurrent_game_sessions: 1,
        max_players: MAX_PLAYERS,
        ..Default::default()
    }
}

/// Starts `servers` game servers of `fleet_id` on `channels`, a few registering at a time; answers once all are
/// ready, their tasks in `tasks`.
pub async fn start(
    fleet_id: &'static str,
    servers: u64,
    channels: &[Channel],
    book: &Arc<Book>,
    tasks: &mut JoinSet<()>,
) -> Result<(), Failure> {
    for index in 0..servers {
        let channel = channels[(index % channels.len() as u64) as usize].clone();
        let (server, events) = GameServer::connect_with(channel, config(fleet_id, index)).await?;
        server.ready().await?;
        tasks.spawn(serve(server, events, book.clone()));
    }
    Ok(())
}

/// One server's life: it hosts what it is given until it is told to end, or is declared lost.
async fn serve(server: GameServer, mut events: Events, book: Arc<Book>) {
    let mut matches = JoinSet::new();
    while let Some(event) = events.recv().await {
        match event {
            Event::StartGameSession {
                game_session,
                player_sessions,
            } => {
                if !game_session.placement_id.is_empty() {
                    book.placed
                        .lock()
                        .expect("book lock")
                        .entry(game_session.placement_id.clone())
                        .or_default()
                        .insert(game_session.game_session_id.clone());
                }
                let players = player_sessions.into_iter().map(|p| p.player_session_id).collect();
                matches.spawn(play(server.clone(), game_session, players, book.clone()));
            }
            Event::Terminate { .. } => {
                matches.abort_all();
                let _ = server.process_ending("the soak is over").await;
                return;
            }
            Event::Lost { status } => {
                let id = server.game_server_id();
                book.lost.lock().expect("book lock").push((
                    Instant::now(),
                    id,
                    format!("{:?} {}", status.code(), status.message()),
                ));
                return;
            }
            Event::UpdateGameSession { .. } | Event::ServerChanged { .. } => {}
        }
    }
}

/// One match: activate, let the players in, play, let them go, end.
async fn play(server: GameServer, session: GameSession, players: Vec<String>, book: Arc<Book>) {
    let id = session.game_session_id;
    if persist(&book, "activate", || server.activate_game_session(id.as_str()))
        .await
        .is_none()
    {
        return;
    }
    book.activated.fetch_add(1, Ordering::Relaxed);
    for player in &players {
        if persist(&book, "accept", || {
            server.accept_player_session(id.as_str(), player.as_str())
        })
        .await
        .is_some()
        {
            book.accepted.fetch_add(1, Ordering::Relaxed);
        }
    }
    let length = rand::rng().random_range(MATCH_MS.0..=MATCH_MS.1);
    tokio::time::sleep(Duration::from_millis(length)).await;
    for player in &players {
        if persist(&book, "remove", || {
            server.remove_player_session(id.as_str(), player.as_str())
        })
        .await
        .is_some()
        {
            book.removed.fetch_add(1, Ordering::Relaxed);
        }
    }
    if persist(&book, "end", || server.end_game_session(id.as_str()))
        .await
        .is_some()
    {
        book.ended.fetch_add(1, Ordering::Relaxed);
    }
}
