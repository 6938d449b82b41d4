//! The session service under load, in this process over loopback gRPC with a client's token: game sessions
//! created (CreateGameSession), player sessions reserved one at a time (CreatePlayerSession) and 25 at a time
//! (CreatePlayerSessions), then accepted, and SearchGameSessions over 100,000 ACTIVE game sessions.
//!
//! The processes that host the sessions are set up straight in the store (attach and ready, as a health replica
//! records an SDK process), said to be held by a replica that does not run. No health replica is needed: nothing
//! sweeps their heartbeat deadlines, so they stay ready however long the run takes, and what the session service
//! announces to their replica goes to a channel nobody listens on (the PUBLISH is still paid, as deployed). What a
//! process does over its stream is done here through the store as the health replica would do it: activating each
//! game session (ActivateGameSession) and accepting player sessions (AcceptPlayerSession). Those two lines are
//! the store calls alone, labelled "(store)": the stream path to them belongs to the health service.
//!
//! Measured, with `--servers` (N) sizing the run and `--concurrency` the calls in flight:
//! - **create game session**: N / 10 CreateGameSession calls (at least one), each placed by the service on a
//!   ready process of its own (one session per process, GameLift's usual shape), up to 1,000 players each, then
//!   activated through the store;
//! - **create player session**: N CreatePlayerSession calls spread over those sessions, each a new player;
//! - **accept player session (store)**: every player session of that line accepted;
//! - **create player sessions (25)**: N / 10 CreatePlayerSessions calls of 25 new players (calls per second; the
//!   players per second are a figure);
//! - Redis memory (INFO used_memory, summed over a cluster's nodes) per live game session (its record, index
//!   entries, deadlines, idempotency token and two session events: created and activated) and per player session
//!   (its record, the player's index, the game session's entries, its deadline and its RESERVED event; then again
//!   once accepted, with the ACTIVATED event). Session events are one stream entry per transition in each
//!   fleet's `sevents` stream, so they are part of every figure. Ids are as long as the service's (player ids as
//!   long as a UUID); no game session data, matchmaker data or player data is sent;
//! - **search**: 100,000 ACTIVE game sessions (5 × N when lower) on processes of 100 sessions each, built
//!   through the store with varied properties, maximums, policies and player counts, then SearchGameSessions
//!   pages of 20, 200 calls with 8 in flight, with a selective filter (1% of the sessions, through the
//!   player-count index), an unselective one (`hasAvailablePlayerSessions = true AND
//!   gameSessionProperties.mode = 'ranked'`: the free-slots index bounds almost nothing) and none; then the worst
//!   case, a filter no index bounds that matches one session, the last created (a lookup by name), which reads
//!   every session: fewer calls (50) with fewer in flight (2), each taking up to seconds;
//! - for each line, what a call costs in CPU in this process (service and load generator together) and in Redis,
//!   and Redis's time inside scripts (INFO commandstats; wall time, so it grows when Redis is descheduled), and
//!   how busy other processes kept the machine meanwhile: on a shared machine every rate here is a lower bound.
//!
//! Timeouts are long (nothing times out during a run). The targets, at least 20,000 player-session
//! creations per second with a p99 under 5 ms, are reported met or missed, never failed on. The floors are a
//! no-op gRPC call over the same connections and the same scripts straight on the store at the same concurrency:
//! CreateGameSession's on a fleet of the same shape, CreatePlayerSession(s)'s into the same game sessions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use berth_domain::game_session::check::PLAYERS_PER_BATCH_MAX;
use berth_domain::game_session::new_game_session_id;
use berth_proto::common::v1::KeyValue;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use berth_proto::session::v1::player_session_service_client::PlayerSessionServiceClient;
use berth_proto::session::v1::{
    CreateGameSessionRequest, CreatePlayerSessionRequest, CreatePlayerSessionsRequest, DesiredPlayerSession,
    SearchGameSessionsRequest,
};
use berth_runtime::auth::Role;
use berth_session::SessionArgs;
use berth_store::Store;
use berth_store::processes::{self, Attach, Attached, ProcessRef, Timings};
use berth_store::sessions::{
    self as store, Accepted, Activated, Created, NewGameSession, PlayersCreated, SessionTimings,
};
use tonic::{Code, Status};

use crate::args::Args;
use crate::connections::Rotation;
use crate::driver::{self, Outcome, outcome};
use crate::fleet::LOCATION;
use crate::redis_stats::{RedisStats, used_memory};
use crate::replica::Replica;
use crate::report::{Figure, Findings, Line, Ratio, Target};
use crate::stack::Stack;
use crate::{Failure, fleet, floors, procfs};

/// The fleet measured through gRPC.
const FLEET: &str = "bench-sessions";
/// The fleet the game-session floor fills straight through the store.
const RAW_FLEET: &str = "bench-sessions-raw";
/// The fleet of ACTIVE sessions the searches read.
const SEARCH_FLEET: &str = "bench-search";
/// The health replica the processes are said to be held by; none runs.
const REPLICA: &str = "bench-absent";

/// Most players of each game session created through gRPC, and of every process: far more than the player lines
/// put in any session, so that none fills.
const MAX_PLAYERS: u32 = 1_000;
/// Player-session calls of each line per game session created.
const CALLS_PER_GAME_SESSION: u64 = 10;
/// Players per CreatePlayerSessions call: the most the contract allows.
const BATCH: usize = PLAYERS_PER_BATCH_MAX;
/// Game session ids read per script when checking the player counts.
const READ_CHUNK: usize = 100;

/// ACTIVE game sessions searched: the 100,000 from the default `--servers` (20,000) up, five per server
/// below it, so that a quick run builds fewer. And how many each process hosts.
const SEARCH_SESSIONS: u64 = 100_000;
const SEARCH_SESSIONS_PER_SERVER: u64 = 5;
const SESSIONS_PER_PROCESS: u64 = 100;
/// Every this many search sessions, one holds 20 to 25 players: the selective filter's matches.
const CROWDED_EVERY: u64 = 100;
/// The selective filter: at or above this many players only the crowded sessions.
const CROWDED_PLAYERS: u32 = 20;
/// Calls per search line and calls in flight: fewer for the one that reads every session, so that its calls do not
/// queue past the driver's deadline. And the page size asked for.
const SEARCH_CALLS: u64 = 200;
const SEARCH_IN_FLIGHT: u16 = 8;
const FULL_SCAN_CALLS: u64 = 50;
const FULL_SCAN_IN_FLIGHT: u16 = 2;
const SEARCH_PAGE: u32 = 20;
/// Values of the `mode` and `map` properties, taken in turn.
const MODES: [&str; 3] = ["ranked", "casual", "custom"];
const MAPS: [&str; 5] = ["harbor", "dunes", "citadel", "glacier", "canyon"];

/// The targets for player-session creations.
const CREATIONS_TARGET: f64 = 20_000.0;
const CREATION_P99_TARGET_MS: f64 = 5.0;
/// The target for Redis's time in one player-session creation, read on the raw line; and the placement
/// core's, the same time as a multiple of the minimal player-session function's in the same run.
const CREATION_REDIS_TARGET_US: f64 = 30.0;
const CREATION_REDIS_FLOOR_MULTIPLE: f64 = 2.5;

/// The service's settings for the run: an hour to activate (longer than its flag allows: the floor's game sessions
/// are never activated) and to accept, so that nothing times out while it is measured; the rest are its defaults.
fn session_args() -> SessionArgs {
    SessionArgs::default()
}

/// The timings the service derives from [`session_args`], for the sessions built through the store.
fn session_timings(args: &SessionArgs) -> SessionTimings {
    SessionTimings {
        retention_ms: args.retention_ms,
    }
}

/// What the processes store as deadlines beside their fleet's; nothing sweeps them in this scenario.
const PROCESS_TIMINGS: Timings = Timings {
    initial_delay_ms: 3_600_000,
    retention_ms: 3_600_000,
};

/// A player id as long as a UUID, distinct for every `(line, index)`.
fn player_id(line: u32, index: u64) -> String {
    format!("{line:08x}-0000-4000-8000-{index:012x}")
}

/// Player ids of each line.
const SINGLE_PLAYERS: u32 = 1;
const BATCH_PLAYERS: u32 = 2;
const RAW_SINGLE_PLAYERS: u32 = 3;
const RAW_BATCH_PLAYERS: u32 = 4;
const SEARCH_PLAYERS: u32 = 5;
const REPLICA_PLAYERS: u32 = 6;

/// Registers process `index` of `fleet_id` and marks it ready, as a health replica records an SDK process that
/// can host `max_sessions` game sessions of up to [`MAX_PLAYERS`] players.
async fn host(store: &Store, fleet_id: &str, index: u64, max_sessions: u64) -> Outcome {
    let server = fleet::server(index);
    let registration_id = format!("reg-{index:032}");
    let registration = fleet::registration(&server, LOCATION, max_sessions, MAX_PLAYERS);
    let introduction = processes::Introduction {
        registration: &registration,
        data: "",
        labels: &[],
        ports: &[],
    };
    let attach = Attach {
        fleet_id,
        game_server_id: &server.id,
        instance_id: &server.instance,
        registration_id: &registration_id,
        resume: None,
        replica: REPLICA,
        attempt: 0,
        introduction,
    };
    match processes::attach(store, &attach, &PROCESS_TIMINGS).await {
        Ok(Attached::Registered(..)) => {}
        Ok(Attached::Exists) => return Err(Code::AlreadyExists),
        Ok(_) => return Err(Code::FailedPrecondition),
        Err(err) => return Err(Status::from(err).code()),
    }
    let process = ProcessRef {
        fleet_id,
        game_server_id: &server.id,
        registration_id: &registration_id,
    };
    match processes::ready(store, &process, None).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Code::FailedPrecondition),
        Err(err) => Err(Status::from(err).code()),
    }
}

/// Sets up `count` processes of `fleet_id` straight through the store; any failure stops the run.
pub(super) async fn host_all(
    store: &Store,
    fleet_id: &'static str,
    count: u64,
    max_sessions: u64,
    concurrency: u16,
) -> Result<(), Failure> {
    let hosting = store.clone();
    let setup = driver::run(
        &format!("set-up: processes of {fleet_id}"),
        count,
        concurrency,
        move |index| {
            let store = hosting.clone();
            async move { host(&store, fleet_id, index, max_sessions).await }
        },
    )
    .await;
    setup_done(&setup)
}

/// A set-up line is not reported, but it must not have failed.
fn setup_done(line: &Line) -> Result<(), Failure> {
    if line.errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{} failed: {:?}", line.name, line.errors).into())
    }
}

fn property(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: value.into(),
    }
}

/// The `index`th game session created through gRPC: what a matchmaker's back end sends, with an idempotency token.
fn create_request(index: u64) -> CreateGameSessionRequest {
    CreateGameSessionRequest {
        fleet_id: FLEET.into(),
        maximum_player_session_count: MAX_PLAYERS,
        name: session_name(index),
        game_properties: vec![
            property("mode", MODES[(index % 3) as usize]),
            property("map", MAPS[(index % 5) as usize]),
        ],
        idempotency_token: format!("bench-{index:012}"),
        ..Default::default()
    }
}

/// A game session to host players: its id and the process hosting it.
#[derive(Clone, Debug)]
struct Hosted {
    game_session_id: String,
    game_server_id: String,
}

/// What each call of a line made (a game session, a player session's id), by the call's index.
type Slots<T> = Arc<Vec<OnceLock<T>>>;

fn slots<T>(count: u64) -> Slots<T> {
    Arc::new((0..count).map(|_| OnceLock::new()).collect())
}

/// Player session `index` of a single-player line (`line` names its players): its player and session.
fn player_request(hosted: &[Hosted], line: u32, index: u64) -> CreatePlayerSessionRequest {
    CreatePlayerSessionRequest {
        game_session_id: hosted[(index % hosted.len() as u64) as usize].game_session_id.clone(),
        player_id: player_id(line, index),
        player_data: String::new(),
    }
}

/// Batch `index` of the batched line: 25 new players into one session.
fn players_request(hosted: &[Hosted], index: u64) -> CreatePlayerSessionsRequest {
    let first = index * BATCH as u64;
    CreatePlayerSessionsRequest {
        game_session_id: hosted[(index % hosted.len() as u64) as usize].game_session_id.clone(),
        players: (first..first + BATCH as u64)
            .map(|player| DesiredPlayerSession {
                player_id: player_id(BATCH_PLAYERS, player),
                player_data: String::new(),
            })
            .collect(),
    }
}

/// What a run over the stack measures, beside its lines.
#[derive(Default)]
struct Extras {
    ratios: Vec<Ratio>,
    figures: Vec<Figure>,
    targets: Vec<Target>,
    failed_checks: Vec<String>,
}

/// Creates and activates game sessions, creates and accepts player sessions, measures their floors, then builds
/// the search fleet and searches it.
pub async fn run(stack: &Stack, args: &Args) -> Result<Findings, Failure> {
    let (servers, concurrency) = (args.servers, args.concurrency);
    let store = &stack.store;
    let settings = session_args();
    let timings = session_timings(&settings);
    let service = stack.session(&settings).await;
    let channels = stack.channels(&service, Role::Client).await?;
    let mut meter = Meter::new(store, procfs::children("redis-server"));
    let mut extras = Extras::default();

    let game_sessions = (servers / CALLS_PER_GAME_SESSION).max(1);
    let batches = servers.div_ceil(CALLS_PER_GAME_SESSION);
    eprintln!("setting up {game_sessions} processes of {FLEET} and {RAW_FLEET} through the store");
    for fleet_id in [FLEET, RAW_FLEET, SEARCH_FLEET] {
        fleet::create(store, fleet_id, fleet::QUIET).await;
    }
    host_all(store, FLEET, game_sessions, 1, concurrency).await?;
    host_all(store, RAW_FLEET, game_sessions, 1, concurrency).await?;

    // Game sessions: created through gRPC, activated as their processes would.
    let memory_before = used_memory(store).await?;
    let created: Slots<Hosted> = slots(game_sessions);
    let create_game = {
        let clients = Rotation::new(channels.iter().cloned().map(GameSessionServiceClient::new));
        let created = created.clone();
        meter
            .measure(driver::run(
                "create game session",
                game_sessions,
                concurrency,
                move |index| {
                    let (mut client, created) = (clients.next(), created.clone());
                    async move {
                        let reply = client.create_game_session(create_request(index)).await;
                        let session = reply.map_err(|status| status.code())?.into_inner().game_session;
                        let session = session.ok_or(Code::Internal)?;
                        let _ = created[index as usize].set(Hosted {
                            game_session_id: session.game_session_id,
                            game_server_id: session.game_server_id,
                        });
                        Ok(())
                    }
                },
            ))
            .await?
    };
    let hosted: Arc<Vec<Hosted>> = Arc::new(created.iter().filter_map(|slot| slot.get().cloned()).collect());
    if hosted.is_empty() {
        return Err("no game session was created: nothing to put players in".into());
    }
    let activate = {
        let (store, hosted) = (store.clone(), hosted.clone());
        let activations = hosted.len() as u64;
        meter
            .measure(driver::run(
                "activate game session (store)",
                activations,
                concurrency,
                move |index| {
                    let (store, hosted) = (store.clone(), hosted.clone());
                    async move {
                        let session = &hosted[index as usize];
                        activated(&store, FLEET, &session.game_server_id, &session.game_session_id).await
                    }
                },
            ))
            .await?
    };
    let memory_sessions = used_memory(store).await?;
    extras.figures.push(Figure::new(
        "Redis memory per live game session",
        per(memory_sessions, memory_before, hosted.len() as u64),
        "bytes",
    ));

    // Player sessions, one per call.
    let player_clients = Rotation::new(channels.iter().cloned().map(PlayerSessionServiceClient::new));
    let player_clients = Arc::new(player_clients);
    let reserved: Slots<String> = slots(servers);
    let create_player = {
        let (clients, hosted, reserved) = (player_clients.clone(), hosted.clone(), reserved.clone());
        meter
            .measure(driver::run(
                "create player session",
                servers,
                concurrency,
                move |index| {
                    let (mut client, hosted, reserved) = (clients.next(), hosted.clone(), reserved.clone());
                    async move {
                        let reply = client
                            .create_player_session(player_request(&hosted, SINGLE_PLAYERS, index))
                            .await;
                        let session = reply.map_err(|status| status.code())?.into_inner().player_session;
                        let _ = reserved[index as usize].set(session.ok_or(Code::Internal)?.player_session_id);
                        Ok(())
                    }
                },
            ))
            .await?
    };
    let memory_reserved = used_memory(store).await?;
    extras.figures.push(Figure::new(
        "Redis memory per player session, RESERVED",
        per(memory_reserved, memory_sessions, servers),
        "bytes",
    ));

    // Every one of them accepted, as the health replica does for its process.
    let accept = {
        let (store, hosted, reserved) = (store.clone(), hosted.clone(), reserved.clone());
        meter
            .measure(driver::run(
                "accept player session (store)",
                servers,
                concurrency,
                move |index| {
                    let (store, hosted, reserved) = (store.clone(), hosted.clone(), reserved.clone());
                    async move {
                        let session = &hosted[(index % hosted.len() as u64) as usize];
                        // A player session that was never created cannot be accepted; its creation counted the failure.
                        let player_session_id = reserved[index as usize].get().ok_or(Code::NotFound)?;
                        accepted(&store, session, player_session_id).await
                    }
                },
            ))
            .await?
    };
    let memory_accepted = used_memory(store).await?;
    extras.figures.push(Figure::new(
        "Redis memory per player session, ACTIVE",
        per(memory_accepted, memory_sessions, servers),
        "bytes",
    ));

    // Player sessions, 25 per call.
    let create_players = {
        let (clients, hosted) = (player_clients.clone(), hosted.clone());
        meter
            .measure(driver::run(
                "create player sessions (25)",
                batches,
                concurrency,
                move |index| {
                    let (mut client, hosted) = (clients.next(), hosted.clone());
                    async move {
                        let reply = client.create_player_sessions(players_request(&hosted, index)).await;
                        let sessions = reply.map_err(|status| status.code())?.into_inner().player_sessions;
                        if sessions.len() == BATCH {
                            Ok(())
                        } else {
                            Err(Code::Internal)
                        }
                    }
                },
            ))
            .await?
    };
    extras.figures.push(Figure::new(
        "create player sessions (25): players",
        create_players.ops_per_sec * BATCH as f64,
        "per second",
    ));

    let (replica_player, replica_figures) = through_replica(stack, &hosted, servers, concurrency).await?;
    extras.figures.extend(replica_figures);

    // The floors.
    let noop = floors::noop_grpc(&channels, servers, concurrency).await;
    let raw_create_game = meter
        .measure(raw_create_game_sessions(store, game_sessions, concurrency, &timings))
        .await?;
    let raw_create_player = {
        let (store, hosted) = (store.clone(), hosted.clone());
        meter
            .measure(driver::run(
                "raw create player session",
                servers,
                concurrency,
                move |index| {
                    let (store, hosted) = (store.clone(), hosted.clone());
                    async move { raw_players(&store, &hosted, index, RAW_SINGLE_PLAYERS, 1).await }
                },
            ))
            .await?
    };
    let raw_create_players = {
        let (store, hosted) = (store.clone(), hosted.clone());
        meter
            .measure(driver::run(
                "raw create player sessions (25)",
                batches,
                concurrency,
                move |index| {
                    let (store, hosted) = (store.clone(), hosted.clone());
                    async move { raw_players(&store, &hosted, index, RAW_BATCH_PLAYERS, BATCH).await }
                },
            ))
            .await?
    };
    let minimal_player = meter
        .measure(floors::minimal_player_session(store, servers, concurrency))
        .await?;
    // Every player line counted in its sessions, no more and no fewer.
    let expected = [&create_player, &replica_player, &raw_create_player]
        .iter()
        .map(|line| succeeded(line))
        .chain(
            [&create_players, &raw_create_players]
                .iter()
                .map(|line| succeeded(line) * BATCH as u64),
        )
        .sum();
    extras
        .failed_checks
        .extend(player_count(store, &hosted, expected).await?);

    extras.ratios = vec![
        Ratio::of(&create_game, &noop),
        Ratio::of(&create_game, &raw_create_game),
        Ratio::of(&create_player, &noop),
        Ratio::of(&create_player, &raw_create_player),
        Ratio::of(&raw_create_player, &minimal_player),
        Ratio::of(&create_players, &raw_create_players),
    ];
    extras.targets = vec![
        Target::at_least(
            "player sessions created per second",
            create_player.ops_per_sec,
            CREATIONS_TARGET,
            "per second",
        ),
        Target::at_most(
            "create player session p99",
            create_player.latency_us.p99 as f64 / 1000.0,
            CREATION_P99_TARGET_MS,
            "ms",
        ),
        Target::at_most(
            "redis time per player-session creation (raw line)",
            meter.script_us_per_call(&raw_create_player),
            CREATION_REDIS_TARGET_US,
            "µs",
        ),
        Target::at_most(
            "redis time per player-session creation (raw line), × the minimal function's",
            meter.script_us_per_call(&raw_create_player) / meter.script_us_per_call(&minimal_player),
            CREATION_REDIS_FLOOR_MULTIPLE,
            "×",
        ),
    ];

    let searches = search(stack, &channels, args, &timings, &mut meter, &mut extras).await?;
    drop(channels);
    service.shutdown().await;

    let mut lines = vec![
        create_game,
        activate,
        create_player,
        create_players,
        accept,
        replica_player,
        noop,
        raw_create_game,
        raw_create_player,
        raw_create_players,
        minimal_player,
    ];
    lines.extend(searches);
    extras.figures.extend(meter.figures());
    Ok(Findings {
        lines,
        ratios: extras.ratios,
        figures: extras.figures,
        targets: extras.targets,
        failed_checks: extras.failed_checks,
    })
}

/// CreatePlayerSession through a `berth-session` replica process of its own, `servers` new players into the
/// `hosted` sessions: the line "create player session (session replica process)", and what the replica costs apart
/// from the load generator: CPU per call, and resident memory before and after (what a deployment's requests are
/// set from).
async fn through_replica(
    stack: &Stack,
    hosted: &Arc<Vec<Hosted>>,
    servers: u64,
    concurrency: u16,
) -> Result<(Line, Vec<Figure>), Failure> {
    let replica = Replica::start("berth-session", stack.store.config(), &[]).await?;
    let channels = stack.channels_at(&replica.endpoint(), Role::Client).await?;
    let clients = Arc::new(Rotation::new(channels.into_iter().map(PlayerSessionServiceClient::new)));
    let before = replica.usage()?;
    let hosted = hosted.clone();
    let line = driver::run(
        "create player session (session replica process)",
        servers,
        concurrency,
        move |index| {
            let (mut client, hosted) = (clients.next(), hosted.clone());
            async move {
                let reply = client
                    .create_player_session(player_request(&hosted, REPLICA_PLAYERS, index))
                    .await;
                reply.map(|_| ()).map_err(|status| status.code())
            }
        },
    )
    .await;
    let figures = replica.cost_since(&before, servers, "session", "CreatePlayerSession")?;
    Ok((line, figures))
}

/// Calls of `line` that succeeded.
fn succeeded(line: &Line) -> u64 {
    line.calls - line.errors.values().sum::<u64>()
}

/// Bytes per item of a growth from `before` to `after` over `count` items.
fn per(after: u64, before: u64, count: u64) -> f64 {
    (after as f64 - before as f64) / count.max(1) as f64
}

/// The process hosting a game session activates it (ActivateGameSession, as its health replica runs it).
async fn activated(store: &Store, fleet_id: &str, game_server_id: &str, game_session_id: &str) -> Outcome {
    match store::activate_game_session(store, fleet_id, game_server_id, game_session_id).await {
        Ok(Activated::Active(_)) => Ok(()),
        Ok(Activated::NotFound) => Err(Code::NotFound),
        Ok(Activated::NotYours) => Err(Code::PermissionDenied),
        Ok(Activated::Ended(_)) => Err(Code::FailedPrecondition),
        Err(err) => Err(Status::from(err).code()),
    }
}

/// The process hosting a game session lets a player in (AcceptPlayerSession, as its health replica runs it).
async fn accepted(store: &Store, session: &Hosted, player_session_id: &str) -> Outcome {
    let reply = store::accept_player_session(
        store,
        FLEET,
        &session.game_server_id,
        &session.game_session_id,
        player_session_id,
    )
    .await;
    match reply {
        Ok(Accepted::Accepted(_)) => Ok(()),
        Ok(Accepted::NotFound) => Err(Code::NotFound),
        Ok(Accepted::NotYours) => Err(Code::PermissionDenied),
        Ok(Accepted::NotActive(_) | Accepted::Ended(_)) => Err(Code::FailedPrecondition),
        Err(err) => Err(Status::from(err).code()),
    }
}

/// Codes as the session service answers a creation, so that error columns read the same in every line.
fn created_code(created: &Created) -> Code {
    match created {
        Created::Created(..) | Created::Existing(_) => Code::Ok,
        Created::TokenReused | Created::Abandoned => Code::AlreadyExists,
        Created::NoServer | Created::TooSmall | Created::CreatorLimit(_) => Code::ResourceExhausted,
        Created::NotFound(_) => Code::NotFound,
        Created::FleetNotActive(_) => Code::FailedPrecondition,
    }
}

fn players_code(created: &PlayersCreated) -> Code {
    match created {
        PlayersCreated::Created(_) => Code::Ok,
        PlayersCreated::NotFound => Code::NotFound,
        PlayersCreated::NotActive(_) | PlayersCreated::DenyAll => Code::FailedPrecondition,
        PlayersCreated::Full(_) => Code::ResourceExhausted,
        PlayersCreated::PlayerConflict(_) => Code::AlreadyExists,
    }
}

/// CreateGameSession's script on a fleet of the same shape as the measured one, with the same request: what the
/// service stores (name, properties, token, a digest as long as its own), placed by the script.
async fn raw_create_game_sessions(store: &Store, count: u64, concurrency: u16, timings: &SessionTimings) -> Line {
    let (store, timings) = (store.clone(), *timings);
    driver::run("raw create game session", count, concurrency, move |index| {
        let store = store.clone();
        async move {
            let request = create_request(index);
            let game_session_id = new_game_session_id(RAW_FLEET);
            let properties: Vec<(String, String)> = request
                .game_properties
                .iter()
                .map(|pair| (pair.key.clone(), pair.value.clone()))
                .collect();
            let digest = format!("{index:016x}");
            let new = NewGameSession {
                name: &request.name,
                properties: &properties,
                idempotency_token: &request.idempotency_token,
                digest: &digest,
                ..NewGameSession::new(&game_session_id, RAW_FLEET, request.maximum_player_session_count)
            };
            match store::create_game_session(&store, &new, &timings).await {
                Ok(created) => match created_code(&created) {
                    Code::Ok => Ok(()),
                    code => Err(code),
                },
                Err(err) => Err(Status::from(err).code()),
            }
        }
    })
    .await
}

/// CreatePlayerSession(s)'s script: `count` new players of `line` into the session the `index`th call of the
/// measured line would pick.
async fn raw_players(store: &Store, hosted: &[Hosted], index: u64, line: u32, count: usize) -> Outcome {
    let session = &hosted[(index % hosted.len() as u64) as usize];
    let first = index * count as u64;
    let ids: Vec<String> = (first..first + count as u64)
        .map(|player| player_id(line, player))
        .collect();
    let players: Vec<store::NewPlayer<'_>> = ids.iter().map(|id| (id.as_str(), "")).collect();
    match store::create_player_sessions(store, FLEET, &session.game_session_id, &players).await {
        Ok(created) => match players_code(&created) {
            Code::Ok => Ok(()),
            code => Err(code),
        },
        Err(err) => Err(Status::from(err).code()),
    }
}

/// Checks that the sessions' player counts add up to `expected`, the player sessions that were created.
async fn player_count(store: &Store, hosted: &[Hosted], expected: u64) -> Result<Option<String>, Failure> {
    let mut counted = 0;
    for chunk in hosted.chunks(READ_CHUNK) {
        let ids: Vec<&str> = chunk.iter().map(|session| session.game_session_id.as_str()).collect();
        for record in store::read_game_sessions(store, FLEET, &ids)
            .await?
            .into_iter()
            .flatten()
        {
            counted += u64::from(record.current_players);
        }
    }
    Ok((counted != expected)
        .then(|| format!("{expected} player sessions were created, but the game sessions count {counted} players")))
}

/// One game session of the search fleet.
struct Shape {
    max: u32,
    players: u32,
    accepts: bool,
    mode: &'static str,
    map: &'static str,
}

impl Shape {
    /// The `index`th session: every [`CROWDED_EVERY`]th holds 20 to 25 players, one in ten others 1 to 5, the rest
    /// none; maximums of 16 to 200; one in fifty (none with players) takes no new players.
    fn of(index: u64) -> Shape {
        let crowded = index.is_multiple_of(CROWDED_EVERY);
        let players = if crowded {
            CROWDED_PLAYERS + ((index / CROWDED_EVERY) % 6) as u32
        } else if index % 10 == 5 {
            1 + ((index / 10) % 5) as u32
        } else {
            0
        };
        Shape {
            max: if crowded {
                100
            } else {
                [16, 50, 100, 200][((index / 7) % 4) as usize]
            },
            players,
            accepts: index % 50 != 7,
            mode: MODES[(index % 3) as usize],
            map: MAPS[(index % 5) as usize],
        }
    }

    fn available(&self) -> bool {
        self.accepts && self.players < self.max
    }
}

/// Whether the search fleet's session of some index (and shape) matches a filter.
type Matches = Box<dyn Fn(u64, &Shape) -> bool>;

/// A search line: its filter, and which sessions it matches.
struct Search {
    name: &'static str,
    filter: String,
    matches: Matches,
    /// Calls made, and in flight: fewer when every call reads every session.
    calls: u64,
    in_flight: u16,
}

/// The search lines over a fleet of `sessions` sessions.
fn searches(sessions: u64) -> Vec<Search> {
    let last = sessions - 1;
    vec![
        Search {
            name: "search playerSessionCount >= 20",
            filter: format!("playerSessionCount >= {CROWDED_PLAYERS}"),
            matches: Box::new(|_, shape| shape.players >= CROWDED_PLAYERS),
            calls: SEARCH_CALLS,
            in_flight: SEARCH_IN_FLIGHT,
        },
        Search {
            name: "search available, mode = ranked",
            filter: "hasAvailablePlayerSessions = true AND gameSessionProperties.mode = 'ranked'".into(),
            matches: Box::new(|_, shape| shape.available() && shape.mode == "ranked"),
            calls: SEARCH_CALLS,
            in_flight: SEARCH_IN_FLIGHT,
        },
        Search {
            name: "search, no filter",
            filter: String::new(),
            matches: Box::new(|_, _| true),
            calls: SEARCH_CALLS,
            in_flight: SEARCH_IN_FLIGHT,
        },
        Search {
            name: "search by name, full scan",
            filter: format!("gameSessionName = '{}'", session_name(last)),
            matches: Box::new(move |index, _| index == last),
            calls: FULL_SCAN_CALLS,
            in_flight: FULL_SCAN_IN_FLIGHT,
        },
    ]
}

/// The name of the `index`th session, through gRPC or in the search fleet.
fn session_name(index: u64) -> String {
    format!("bench match {index}")
}

fn search_request(filter: &str, page_size: u32, page_token: String) -> SearchGameSessionsRequest {
    SearchGameSessionsRequest {
        fleet_id: SEARCH_FLEET.into(),
        filter_expression: filter.into(),
        page_size,
        page_token,
        ..Default::default()
    }
}

/// Builds one ACTIVE session of the search fleet through the store: created on its process, activated, and given
/// its players in one call.
async fn build_search_session(store: &Store, index: u64, timings: &SessionTimings) -> Outcome {
    let shape = Shape::of(index);
    let server = fleet::server(index / SESSIONS_PER_PROCESS).id;
    let game_session_id = new_game_session_id(SEARCH_FLEET);
    let name = session_name(index);
    let properties = [
        ("mode".to_owned(), shape.mode.to_owned()),
        ("map".to_owned(), shape.map.to_owned()),
    ];
    let new = NewGameSession {
        game_server_id: Some(&server),
        accepts_players: shape.accepts,
        name: &name,
        properties: &properties,
        ..NewGameSession::new(&game_session_id, SEARCH_FLEET, shape.max)
    };
    match store::create_game_session(store, &new, timings).await {
        Ok(created) if created_code(&created) == Code::Ok => {}
        Ok(created) => return Err(created_code(&created)),
        Err(err) => return Err(Status::from(err).code()),
    }
    activated(store, SEARCH_FLEET, &server, &game_session_id).await?;
    if shape.players > 0 {
        let ids: Vec<String> = (0..u64::from(shape.players))
            .map(|player| player_id(SEARCH_PLAYERS, index * 32 + player))
            .collect();
        let players: Vec<store::NewPlayer<'_>> = ids.iter().map(|id| (id.as_str(), "")).collect();
        match store::create_player_sessions(store, SEARCH_FLEET, &game_session_id, &players).await {
            Ok(created) if players_code(&created) == Code::Ok => {}
            Ok(created) => return Err(players_code(&created)),
            Err(err) => return Err(Status::from(err).code()),
        }
    }
    Ok(())
}

/// Builds the search fleet, then measures each search: pages of 20, fewer calls and fewer in flight than the
/// other lines, since a search with no usable bound reads every session.
async fn search(
    stack: &Stack,
    channels: &[berth_sdk::AuthedChannel],
    args: &Args,
    timings: &SessionTimings,
    meter: &mut Meter,
    extras: &mut Extras,
) -> Result<Vec<Line>, Failure> {
    let store = &stack.store;
    let sessions = SEARCH_SESSIONS.min(args.servers.saturating_mul(SEARCH_SESSIONS_PER_SERVER));
    let processes = sessions.div_ceil(SESSIONS_PER_PROCESS);
    eprintln!("building {sessions} ACTIVE game sessions of {SEARCH_FLEET} on {processes} processes through the store");
    host_all(store, SEARCH_FLEET, processes, SESSIONS_PER_PROCESS, args.concurrency).await?;
    let memory_before = used_memory(store).await?;
    let build = {
        let (store, timings) = (store.clone(), *timings);
        driver::run("set-up: search sessions", sessions, args.concurrency, move |index| {
            let store = store.clone();
            async move { build_search_session(&store, index, &timings).await }
        })
        .await
    };
    setup_done(&build)?;
    let memory_after = used_memory(store).await?;
    extras.figures.push(Figure::new(
        "search sessions built (store)",
        build.ops_per_sec,
        "per second",
    ));
    extras.figures.push(Figure::new(
        "Redis memory per search session, with players",
        per(memory_after, memory_before, sessions),
        "bytes",
    ));

    let clients = Arc::new(Rotation::new(
        channels.iter().cloned().map(GameSessionServiceClient::new),
    ));
    let shapes: Vec<Shape> = (0..sessions).map(Shape::of).collect();
    let count = |search: &Search| {
        (0..sessions)
            .zip(&shapes)
            .filter(|(index, shape)| (search.matches)(*index, shape))
            .count()
    };
    let searches = searches(sessions);
    let mut lines = Vec::new();
    for search in &searches {
        let matching = count(search) as u64;
        let page = u64::from(SEARCH_PAGE).min(matching);
        let short = Arc::new(AtomicU64::new(0));
        let line = {
            let (clients, short, filter) = (clients.clone(), short.clone(), Arc::new(search.filter.clone()));
            meter
                .measure(driver::run(search.name, search.calls, search.in_flight, move |_| {
                    let (mut client, short, filter) = (clients.next(), short.clone(), filter.clone());
                    async move {
                        let reply = client
                            .search_game_sessions(search_request(&filter, SEARCH_PAGE, String::new()))
                            .await;
                        if reply
                            .as_ref()
                            .is_ok_and(|reply| reply.get_ref().game_sessions.len() as u64 != page)
                        {
                            short.fetch_add(1, Ordering::Relaxed);
                        }
                        outcome(reply)
                    }
                }))
                .await?
        };
        extras.figures.push(Figure::new(
            &format!("{}: sessions matching", search.name),
            matching as f64,
            "sessions",
        ));
        let short = short.load(Ordering::Relaxed);
        if short > 0 {
            extras
                .failed_checks
                .push(format!("{}: {short} pages did not hold {page} sessions", search.name));
        }
        lines.push(line);
    }
    // The selective search, paged through to the end, finds every crowded session and no other.
    let selective = &searches[0];
    let expected = count(selective);
    let found = page_through(&mut clients.next(), &selective.filter).await?;
    if found != expected {
        extras.failed_checks.push(format!(
            "{}: paged through, it found {found} sessions, not {expected}",
            selective.name
        ));
    }
    Ok(lines)
}

/// Every session `filter` matches, counted page by page.
async fn page_through(
    client: &mut GameSessionServiceClient<berth_sdk::AuthedChannel>,
    filter: &str,
) -> Result<usize, Failure> {
    let (mut found, mut token) = (0, String::new());
    loop {
        let page = client
            .search_game_sessions(search_request(filter, 100, token))
            .await?
            .into_inner();
        found += page.game_sessions.len();
        if page.next_page_token.is_empty() {
            return Ok(found);
        }
        token = page.next_page_token;
    }
}

/// What has been used so far: CPU seconds of this process (the service and the load generator share it), of
/// Redis and of the whole machine, and Redis's time in scripts (µs).
#[derive(Clone, Copy)]
struct Usage {
    bench: f64,
    redis: f64,
    machine: f64,
    scripts_us: f64,
}

impl Usage {
    async fn read(store: &Store, redis: &[u32]) -> Result<Usage, Failure> {
        let mut redis_seconds = 0.0;
        for pid in redis {
            redis_seconds += procfs::cpu_seconds(*pid)?;
        }
        Ok(Usage {
            bench: procfs::cpu_seconds(std::process::id())?,
            redis: redis_seconds,
            machine: procfs::machine_busy_seconds()?,
            scripts_us: RedisStats::read(store).await?.function_micros(),
        })
    }
}

/// Reads what each measured line costs per call, and what else kept the machine busy meanwhile: the bench shares
/// its cores with whatever else runs there.
struct Meter {
    store: Store,
    redis: Vec<u32>,
    figures: Vec<Figure>,
    /// CPU seconds of other processes, and wall seconds, over every measured line.
    others: f64,
    wall: f64,
}

impl Meter {
    fn new(store: &Store, redis: Vec<u32>) -> Meter {
        Meter {
            store: store.clone(),
            redis,
            figures: Vec::new(),
            others: 0.0,
            wall: 0.0,
        }
    }

    /// Runs `line` and notes what its calls cost.
    async fn measure(&mut self, line: impl Future<Output = Line>) -> Result<Line, Failure> {
        let before = Usage::read(&self.store, &self.redis).await?;
        let line = line.await;
        let after = Usage::read(&self.store, &self.redis).await?;
        let calls = line.calls.max(1) as f64;
        let used = |usage: fn(&Usage) -> f64| usage(&after) - usage(&before);
        self.figures.extend([
            Figure::new(
                &format!("{}: CPU per call, service + load", line.name),
                used(|usage| usage.bench) * 1e6 / calls,
                "µs",
            ),
            Figure::new(
                &format!("{}: CPU per call, redis", line.name),
                used(|usage| usage.redis) * 1e6 / calls,
                "µs",
            ),
            Figure::new(
                &format!("{}: redis time in scripts per call", line.name),
                used(|usage| usage.scripts_us) / calls,
                "µs",
            ),
        ]);
        // Never below zero, which the clocks' different ticks could otherwise show on an idle machine.
        self.others += (used(|usage| usage.machine) - used(|usage| usage.bench) - used(|usage| usage.redis)).max(0.0);
        self.wall += line.seconds;
        Ok(line)
    }

    /// Redis's time in scripts per call of a line measured here.
    fn script_us_per_call(&self, line: &Line) -> f64 {
        let name = format!("{}: redis time in scripts per call", line.name);
        self.figures
            .iter()
            .find(|figure| figure.name == name)
            .map_or(f64::NAN, |figure| figure.value)
    }

    /// The figures noted, and how busy other processes kept the machine while the lines ran.
    fn figures(self) -> Vec<Figure> {
        let mut figures = self.figures;
        figures.push(Figure::new(
            "CPU of other processes while lines ran",
            self.others / self.wall.max(f64::EPSILON),
            "cores",
        ));
        figures
    }
}
