//! The soak's clients, each a loop that runs until the soak ends: matchmakers placing matches through a queue (and
//! cancelling a few), FleetIQ-style matchmakers claiming servers, a lobby creating game sessions and racing more
//! players into each than it holds, and tenants of the autoscaled fleet whose sessions come and go. Every client
//! reaches a service through a channel balanced over both of its replicas and repeats a call the service could not
//! answer, with the same id or token, as the contracts say is safe. What each call was finally answered is kept, for
//! the invariants to be checked against.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_proto::placement::v1::claim_service_client::ClaimServiceClient;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::watch_game_session_placements_response::Kind as Watched;
use berth_proto::placement::v1::{self as placement, PlacementEventType, PlacementStatus};
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use berth_proto::session::v1::player_session_service_client::PlayerSessionServiceClient;
use berth_proto::session::v1::{self as session, GameSessionStatus, TerminationMode};
use berth_sdk::AuthedChannel;
use rand::Rng as _;
use tokio::task::JoinSet;
use tonic::{Code, Response, Status};

use crate::report::{Line, Tally};

use super::hosts::MAX_PLAYERS;
use super::{CLAIMS, HOSTS, QUEUE, SCALED};

/// How long a client repeats a call the service could not answer before giving up on it: longer than any fault.
const PATIENCE: Duration = Duration::from_secs(60);
/// How long one try may take, and the pause between tries.
const TRY_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY_EVERY: Duration = Duration::from_millis(200);
/// Players the lobby races into each of its game sessions: more than it holds.
const RACED_PLAYERS: u32 = MAX_PLAYERS + 4;
/// How often a matchmaker looks whether its placement has ended.
const OUTCOME_POLL: Duration = Duration::from_millis(250);

/// Whether the service may answer a repeat differently: it, or its Redis, could not answer this time.
fn transient(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Cancelled | Code::Aborted
    )
}

/// A claim as its caller was finally answered.
pub struct Claim {
    pub token: String,
    pub server: String,
    /// When the first try of the token was sent: the claim was made no earlier.
    pub first_sent: Instant,
    /// When the answer arrived: the claim was made no later.
    pub answered: Instant,
}

/// Everything the clients were answered.
#[derive(Default)]
pub struct Answers {
    running: AtomicBool,
    /// Calls by name: how long each took with its retries, and how it ended.
    calls: Mutex<BTreeMap<String, Tally>>,
    pub claims: Mutex<Vec<Claim>>,
    /// Placements whose start was acknowledged, with the status they were last seen in and their game session.
    pub placements: Mutex<HashMap<String, (PlacementStatus, String)>>,
    /// Placements the watch saw end, and how many times each.
    pub placement_ends: Mutex<HashMap<String, u32>>,
    /// Player sessions acknowledged in each of the lobby's game sessions.
    pub players: Mutex<HashMap<String, HashSet<String>>>,
    pub watch_resumes: AtomicU64,
}

impl Answers {
    /// Answers for clients that run until [`Answers::stop`].
    pub fn new() -> Arc<Answers> {
        let answers = Answers::default();
        answers.running.store(true, Ordering::Relaxed);
        Arc::new(answers)
    }

    pub fn running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    /// Ends every client's loop after its current step.
    pub fn stop(&self) {
        self.running.store(false, Ordering::Relaxed);
    }

    fn record(&self, name: String, took: Duration, outcome: Result<(), Code>) {
        self.calls
            .lock()
            .expect("answers lock")
            .entry(name)
            .or_default()
            .record(took, outcome);
    }

    /// Once the watch has seen the end of every placement the matchmakers saw end.
    pub async fn watched_every_end(&self) {
        loop {
            let missing = {
                let ends = self.placement_ends.lock().expect("answers lock");
                self.placements
                    .lock()
                    .expect("answers lock")
                    .iter()
                    .any(|(id, (status, _))| *status != PlacementStatus::Pending && !ends.contains_key(id))
            };
            if !missing {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A line for each kind of call, over `elapsed`.
    pub fn lines(&self, elapsed: Duration) -> Vec<Line> {
        self.calls
            .lock()
            .expect("answers lock")
            .iter()
            .map(|(name, tally)| Line::new(name, tally, elapsed))
            .collect()
    }

    /// Calls `call` until it is answered or refused for good, or [`PATIENCE`] runs out, and records the outcome
    /// under `name`. A refusal with one of the `expected` codes is an answer the contract gives in the situation
    /// the soak creates (no server free, a session full or over): it is recorded apart, as a line of its own, and
    /// every other error counts as the call's failure.
    async fn persist<T, F, Fut>(&self, name: &str, expected: &[Code], mut call: F) -> Result<T, Code>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let sent = Instant::now();
        loop {
            let answer = tokio::time::timeout(TRY_TIMEOUT, call())
                .await
                .unwrap_or_else(|_| Err(Status::deadline_exceeded("no answer within the try's timeout")));
            match answer {
                Ok(response) => {
                    self.record(name.to_owned(), sent.elapsed(), Ok(()));
                    return Ok(response.into_inner());
                }
                Err(status) if transient(status.code()) && sent.elapsed() < PATIENCE => {
                    tokio::time::sleep(RETRY_EVERY).await;
                }
                Err(status) if expected.contains(&status.code()) => {
                    self.record(format!("{name}, refused {:?}", status.code()), sent.elapsed(), Ok(()));
                    return Err(status.code());
                }
                Err(status) => {
                    self.record(name.to_owned(), sent.elapsed(), Err(status.code()));
                    return Err(status.code());
                }
            }
        }
    }
}

/// The balanced channels the clients use, one per service.
#[derive(Clone)]
pub struct Channels {
    pub placement: AuthedChannel,
    pub session: AuthedChannel,
}

/// Starts every client in `tasks`: `matchmakers` placing, as many claiming, half as many in the lobby and two
/// tenants of the autoscaled fleet. Answers the watch of the queue's placement ends, which runs until aborted.
pub fn start(
    channels: &Channels,
    answers: &Arc<Answers>,
    matchmakers: u64,
    tasks: &mut JoinSet<()>,
) -> tokio::task::JoinHandle<()> {
    for index in 0..matchmakers {
        tasks.spawn(matchmaker(channels.clone(), answers.clone(), index));
        tasks.spawn(claimer(channels.clone(), answers.clone(), index));
    }
    for index in 0..matchmakers.div_ceil(2) {
        tasks.spawn(lobby(channels.clone(), answers.clone(), index));
    }
    for index in 0..2 {
        tasks.spawn(tenant(channels.clone(), answers.clone(), index));
    }
    tokio::spawn(watch(channels.clone(), answers.clone()))
}

fn placement_request(placement_id: &str, players: u32) -> placement::StartGameSessionPlacementRequest {
    placement::StartGameSessionPlacementRequest {
        placement_id: placement_id.into(),
        queue_name: QUEUE.into(),
        maximum_player_session_count: MAX_PLAYERS,
        game_session_name: placement_id.into(),
        desired_player_sessions: (0..players)
            .map(|player| placement::DesiredPlayerSession {
                player_id: format!("{placement_id}-p{player}"),
                player_data: String::new(),
            })
            .collect(),
        ..Default::default()
    }
}

/// Places match after match, each once its last has ended; every twentieth it cancels straight after starting.
async fn matchmaker(channels: Channels, answers: Arc<Answers>, index: u64) {
    let client = PlacementServiceClient::new(channels.placement);
    let mut n = 0_u32;
    while answers.running() {
        n += 1;
        let id = format!("soak-{index}-{n}");
        let request = placement_request(&id, 1 + n % 4);
        let started = answers
            .persist("StartGameSessionPlacement", &[], || {
                let (mut client, request) = (client.clone(), request.clone());
                async move { client.start_game_session_placement(request).await }
            })
            .await;
        if started.is_err() {
            continue;
        }
        answers
            .placements
            .lock()
            .expect("answers lock")
            .insert(id.clone(), (PlacementStatus::Pending, String::new()));
        if n.is_multiple_of(20) {
            let stop = placement::StopGameSessionPlacementRequest {
                placement_id: id.clone(),
            };
            let _ = answers
                .persist("StopGameSessionPlacement", &[Code::FailedPrecondition], || {
                    let (mut client, request) = (client.clone(), stop.clone());
                    async move { client.stop_game_session_placement(request).await }
                })
                .await;
        }
        outcome(&client, &answers, &id).await;
    }
}

/// Waits for placement `id` to end, as a matchmaker that polls does, and notes its status.
pub async fn outcome(client: &PlacementServiceClient<AuthedChannel>, answers: &Answers, id: &str) {
    let describe = placement::DescribeGameSessionPlacementRequest {
        placement_id: id.into(),
    };
    loop {
        let placement = answers
            .persist("DescribeGameSessionPlacement", &[], || {
                let (mut client, request) = (client.clone(), describe.clone());
                async move { client.describe_game_session_placement(request).await }
            })
            .await
            .ok()
            .and_then(|answer| answer.placement);
        if let Some(placement) = placement {
            let status = placement.status();
            answers
                .placements
                .lock()
                .expect("answers lock")
                .insert(id.to_owned(), (status, placement.game_session_id));
            if status != PlacementStatus::Pending {
                return;
            }
        }
        tokio::time::sleep(OUTCOME_POLL).await;
    }
}

/// Watches the queue's placement ends for the whole soak, resuming from its last cursor whenever the stream breaks.
async fn watch(channels: Channels, answers: Arc<Answers>) {
    let client = PlacementServiceClient::new(channels.placement);
    let mut cursor = String::new();
    let ends = [
        PlacementEventType::Fulfilled,
        PlacementEventType::TimedOut,
        PlacementEventType::Cancelled,
        PlacementEventType::Failed,
    ];
    loop {
        let request = placement::WatchGameSessionPlacementsRequest {
            queue_names: vec![QUEUE.into()],
            event_types: ends.iter().map(|end| *end as i32).collect(),
            after_cursor: cursor.clone(),
            ..Default::default()
        };
        let Ok(events) = client.clone().watch_game_session_placements(request).await else {
            tokio::time::sleep(RETRY_EVERY).await;
            continue;
        };
        let mut events = events.into_inner();
        while let Ok(Some(message)) = events.message().await {
            match message.kind {
                Some(Watched::Event(event)) => {
                    cursor = event.cursor;
                    if let Some(placement) = event.placement {
                        *answers
                            .placement_ends
                            .lock()
                            .expect("answers lock")
                            .entry(placement.placement_id)
                            .or_default() += 1;
                    }
                }
                Some(Watched::Keepalive(keepalive)) => cursor = keepalive.cursor,
                None => {}
            }
        }
        answers.watch_resumes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Claims a server of the FleetIQ fleet under a token of its own, again and again; the claims lapse by themselves.
async fn claimer(channels: Channels, answers: Arc<Answers>, index: u64) {
    let client = ClaimServiceClient::new(channels.placement);
    let mut n = 0_u32;
    while answers.running() {
        n += 1;
        let token = format!("c{index}-{n}");
        let request = placement::ClaimGameServerRequest {
            fleet_id: CLAIMS.into(),
            idempotency_token: token.clone(),
            ..Default::default()
        };
        let first_sent = Instant::now();
        match answers
            .persist("ClaimGameServer", &[Code::ResourceExhausted], || {
                let (mut client, request) = (client.clone(), request.clone());
                async move { client.claim_game_server(request).await }
            })
            .await
        {
            Ok(answer) => {
                let server = answer
                    .game_server
                    .map(|server| server.game_server_id)
                    .unwrap_or_default();
                answers.claims.lock().expect("answers lock").push(Claim {
                    token,
                    server,
                    first_sent,
                    answered: Instant::now(),
                });
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Creates a game session of [`MAX_PLAYERS`] on `fleet_id` under `token` (its name too); its id, once acknowledged.
async fn create_game_session(
    answers: &Answers,
    sessions: &GameSessionServiceClient<AuthedChannel>,
    fleet_id: &str,
    token: &str,
) -> Option<String> {
    let create = session::CreateGameSessionRequest {
        fleet_id: fleet_id.into(),
        maximum_player_session_count: MAX_PLAYERS,
        name: token.into(),
        idempotency_token: token.into(),
        ..Default::default()
    };
    let line = format!("CreateGameSession ({fleet_id})");
    answers
        .persist(&line, &[Code::ResourceExhausted], || {
            let (mut client, request) = (sessions.clone(), create.clone());
            async move { client.create_game_session(request).await }
        })
        .await
        .ok()?
        .game_session
        .map(|session| session.game_session_id)
}

/// Whether game session `id` became ACTIVE within a few seconds (its server activates it at once, but a fault may
/// hold it up, or its match be over by the time it is looked at).
async fn activated(answers: &Answers, sessions: &GameSessionServiceClient<AuthedChannel>, id: &str) -> bool {
    let describe = session::DescribeGameSessionsRequest {
        game_session_ids: vec![id.to_owned()],
    };
    for _ in 0..50 {
        let described = answers
            .persist("DescribeGameSessions", &[], || {
                let (mut client, request) = (sessions.clone(), describe.clone());
                async move { client.describe_game_sessions(request).await }
            })
            .await;
        let status = described
            .ok()
            .and_then(|answer| answer.game_sessions.into_iter().next())
            .map(|session| session.status());
        match status {
            Some(GameSessionStatus::Active) => return true,
            Some(GameSessionStatus::Activating) => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => return false,
        }
    }
    false
}

/// Creates a game session on the hosts' fleet, then races [`RACED_PLAYERS`] players into it at once.
async fn lobby(channels: Channels, answers: Arc<Answers>, index: u64) {
    let sessions = GameSessionServiceClient::new(channels.session.clone());
    let players = PlayerSessionServiceClient::new(channels.session);
    let mut n = 0_u32;
    while answers.running() {
        n += 1;
        let created = create_game_session(&answers, &sessions, HOSTS, &format!("l{index}-{n}")).await;
        let Some(game_session_id) = created else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        // Players are let in once its server has activated it.
        if !activated(&answers, &sessions, &game_session_id).await {
            continue;
        }
        let mut racers = JoinSet::new();
        for player in 0..RACED_PLAYERS {
            let request = session::CreatePlayerSessionRequest {
                game_session_id: game_session_id.clone(),
                player_id: format!("l{index}-{n}-p{player}"),
                player_data: String::new(),
            };
            let (players, answers) = (players.clone(), answers.clone());
            racers.spawn(async move {
                answers
                    .persist(
                        "CreatePlayerSession",
                        &[Code::ResourceExhausted, Code::FailedPrecondition],
                        || {
                            let (mut client, request) = (players.clone(), request.clone());
                            async move { client.create_player_session(request).await }
                        },
                    )
                    .await
                    .ok()
                    .and_then(|answer| answer.player_session)
                    .map(|player| player.player_session_id)
            });
        }
        let admitted: HashSet<String> = racers.join_all().await.into_iter().flatten().collect();
        answers
            .players
            .lock()
            .expect("answers lock")
            .insert(game_session_id, admitted);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A tenant of the autoscaled fleet: its game sessions run a few seconds and are then terminated, so that the
/// fleet's busy servers, and with them its size, rise and fall.
async fn tenant(channels: Channels, answers: Arc<Answers>, index: u64) {
    let sessions = GameSessionServiceClient::new(channels.session);
    let mut n = 0_u32;
    while answers.running() {
        n += 1;
        let created = create_game_session(&answers, &sessions, SCALED, &format!("t{index}-{n}")).await;
        let Some(game_session_id) = created else {
            // Full: the autoscaler adds servers.
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let hold = rand::rng().random_range(2_000..8_000);
        tokio::time::sleep(Duration::from_millis(hold)).await;
        let terminate = session::TerminateGameSessionRequest {
            game_session_id,
            termination_mode: TerminationMode::TriggerOnProcessTerminate as i32,
        };
        let _ = answers
            .persist("TerminateGameSession", &[Code::FailedPrecondition], || {
                let (mut client, request) = (sessions.clone(), terminate.clone());
                async move { client.terminate_game_session(request).await }
            })
            .await;
    }
}
