//! A demo fleet and matchmakers for `make run`: checks that every service is SERVING and lists its services by
//! reflection, then shows Berth's two ways of handing out game servers side by side.
//!
//! FleetIQ style, on the ANYWHERE fleet `demo`, created here through FleetService: registers game servers each
//! with its own scoped token, then plays matchmaker — claims a server, starts a match on it (UTILIZED), and when the
//! match ends the server process "restarts" (deregisters and registers again). Some claims are abandoned on purpose
//! to show them lapse back to the pool, and one instance is draining so its servers are claimed last.
//!
//! GameLift session style, on the SDK fleet `demo-sdk`, created here through FleetService with the `process`
//! provisioner: the fleet service launches its example game servers, which register and become ready; one is told
//! to terminate now and then, and one killed outright (SIGKILL) now and then, and the fleet service replaces each;
//! every fleet event (launched, deployed, terminated, …) is printed as it happens. Every few
//! seconds a session matchmaker creates a game session, waits for its server to activate it, reserves 2–4 player
//! sessions, and each player connects to the server, JOINs with their player session, plays a few seconds and
//! leaves; the server ends the game session when its last player has left. Now and then a reserved player never
//! shows up, to show the reservation end TIMEDOUT. Matches overlap; when every server hosts one, the refusal (no
//! server) is counted and later matches try again. A watch of the fleet's session events counts every transition.
//!
//! GameLift queue style, on the fleets `demo-eu` (location `eu-local`) and `demo-us` (`us-local`), created here
//! through FleetService with the `process` provisioner: a matchmaker asks the queue `demo-queue` for each match,
//! with its players' latencies, and Berth picks the fleet and location; see the module [`placements`].
//!
//! A status line every second shows the FleetIQ pool and that of the SDK processes (one of which is told to
//! terminate now and then), and under it the session side; every few seconds a line shows the queue's metrics.

#[path = "demo/agones.rs"]
mod agones;
#[path = "demo/placements.rs"]
mod placements;

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use berth_proto::agones::allocation::allocation_service_client::AllocationServiceClient;
use berth_proto::common::v1::{Endpoint, KeyValue};
use berth_proto::fleet::v1 as fpb;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::health::v1::{
    self as hpb, DeregisterGameServerRequest, ListGameServersRequest, RegisterGameServerRequest,
    SetInstanceStatusRequest, TerminateGameServerRequest, TerminationReason, UpdateGameServerRequest,
};
use berth_proto::placement::v1::ClaimGameServerRequest;
use berth_proto::placement::v1::claim_service_client::ClaimServiceClient;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use berth_proto::session::v1::player_session_service_client::PlayerSessionServiceClient;
use berth_proto::session::v1::watch_session_events_response::Kind;
use berth_proto::session::v1::{
    CreateGameSessionRequest, CreatePlayerSessionsRequest, DescribeGameSessionsRequest, DesiredPlayerSession,
    GameSession, GameSessionStatus, ListGameSessionsRequest, PlayerSession, SessionEvent, SessionEventType,
    TerminateGameSessionRequest, TerminationMode, WatchSessionEventsRequest, WatchSessionEventsResponse,
};
use berth_runtime::auth::{Role, TokenKey};
use berth_sdk::{AuthedChannel, probe};
use clap::Parser;
use rand::Rng;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// Runs a demo fleet against local Berth services.
#[derive(Parser, Debug)]
struct Cli {
    /// The services to check, as name=endpoint.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "placement=http://127.0.0.1:7101,session=http://127.0.0.1:7102,fleet=http://127.0.0.1:7103,health=http://127.0.0.1:7104"
    )]
    services: Vec<String>,
    /// Signing secret of the deployment, to mint the demo's tokens.
    #[arg(long, env = "BERTH_AUTH_KEY_FILE")]
    auth_key_file: PathBuf,
    /// Fleet to fill.
    #[arg(long, default_value = "demo")]
    fleet: String,
    /// Game servers to register.
    #[arg(long, default_value_t = 24)]
    servers: usize,
    /// How often the matchmaker asks for a server, in ms.
    #[arg(long, default_value_t = 400)]
    claim_every_ms: u64,
    /// Fleet of SDK game-server processes, created through FleetService and launched by its `process`
    /// provisioner; one of them is told to terminate every `--terminate-every-seconds`, to show a process honouring
    /// it, and one is killed every `--kill-every-seconds`, to show it replaced.
    #[arg(long, default_value = "demo-sdk")]
    sdk_fleet: String,
    /// The game server the SDK fleet launches (an absolute path: the fleet service starts it).
    #[arg(long)]
    sdk_launch_path: String,
    /// Instances of the SDK fleet (one game server each).
    #[arg(long, default_value_t = 3)]
    sdk_servers: u32,
    /// How often one of the SDK fleet's game servers is killed with SIGKILL, in seconds (0: never).
    #[arg(long, default_value_t = 45)]
    kill_every_seconds: u64,
    /// How often one SDK process is told to terminate, in seconds (0: never).
    #[arg(long, default_value_t = 20)]
    terminate_every_seconds: u64,
    /// How often the session matchmaker starts a match (a game session on the SDK fleet), in ms.
    #[arg(long, default_value_t = 3000)]
    session_every_ms: u64,
    /// Game session queue the placement matchmaker places its matches through, over the fleets `demo-eu`
    /// (location `eu-local`) and `demo-us` (`us-local`), created here through FleetService with the `process`
    /// provisioner and the SDK fleet's game server.
    #[arg(long, default_value = "demo-queue")]
    queue: String,
    /// Instances of each of the queue's fleets (one game server each).
    #[arg(long, default_value_t = 2)]
    placement_instances: u32,
    /// How often the placement matchmaker starts a placement in the queue, in ms.
    #[arg(long, default_value_t = 3000)]
    placement_every_ms: u64,
    /// berth-agent, for the fleet of game servers written against Agones' SDK (an absolute path); with
    /// --agones-server-path, that fleet runs and a matchmaker allocates from it through Agones' allocation API.
    #[arg(long)]
    agent_path: Option<String>,
    /// The game server written against Agones' SDK that berth-agent runs (an absolute path).
    #[arg(long)]
    agones_server_path: Option<String>,
    /// Instances of the Agones fleet (one game server each).
    #[arg(long, default_value_t = 3)]
    agones_servers: u32,
    /// How often the Agones matchmaker allocates a server for a match, in ms.
    #[arg(long, default_value_t = 5000)]
    allocate_every_ms: u64,
    /// Stop after this many seconds (0: run until interrupted).
    #[arg(long, default_value_t = 0)]
    duration_seconds: u64,
}

fn mint(key: &TokenKey, role: Role, scope: Option<(&str, &str)>) -> String {
    key.mint("berth-demo", role, scope, 86_400)
}

fn endpoint_of<'a>(services: &'a [(String, String)], name: &str) -> &'a str {
    services
        .iter()
        .find(|(service, _)| service == name)
        .map(|(_, endpoint)| endpoint.as_str())
        .unwrap_or_else(|| panic!("--services names no {name}"))
}

async fn check_services(services: &[(String, String)]) -> Result<(), Box<dyn std::error::Error>> {
    for (name, endpoint) in services {
        let channel = tonic::transport::Endpoint::from_shared(endpoint.clone())?
            .connect()
            .await?;
        let status = probe::serving_status(channel.clone(), "").await?;
        let listed = probe::list_services(channel).await?;
        let berth: Vec<_> = listed.iter().filter(|name| name.starts_with("berth.")).collect();
        println!("  berth-{name:<10} {endpoint:<24} {status:?}  {berth:?}");
    }
    Ok(())
}

/// One game-server process of the demo, with its own scoped token.
struct Server {
    id: String,
    instance: String,
    client: GameServerServiceClient<AuthedChannel>,
}

impl Server {
    async fn register(&mut self, fleet: &str) -> Result<(), tonic::Status> {
        let request = RegisterGameServerRequest {
            fleet_id: fleet.into(),
            game_server_id: self.id.clone(),
            instance_id: self.instance.clone(),
            connection_info: format!(
                "127.0.0.1:{}",
                7000 + self.id.len() * 10 + self.id.as_bytes()[self.id.len() - 1] as usize
            ),
            game_server_data: String::new(),
        };
        self.client.register_game_server(request).await.map(drop)
    }
}

async fn play_match(mut server: Server, fleet: String, seconds: u64) {
    let request = UpdateGameServerRequest {
        fleet_id: fleet.clone(),
        game_server_id: server.id.clone(),
        utilization_status: hpb::UtilizationStatus::Utilized as i32,
        ..Default::default()
    };
    if let Err(status) = server.client.update_game_server(request).await {
        println!("  {} could not start its match: {}", server.id, status.message());
        return;
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let leave = DeregisterGameServerRequest {
        fleet_id: fleet.clone(),
        game_server_id: server.id.clone(),
    };
    if let Err(status) = server.client.deregister_game_server(leave).await {
        println!("  {} could not deregister: {}", server.id, status.message());
    }
    if let Err(status) = server.register(&fleet).await {
        println!("  {} could not register again: {}", server.id, status.message());
    }
}

async fn pool_line(operator: &mut GameServerServiceClient<AuthedChannel>, fleet: &str) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut page_token = String::new();
    loop {
        let request = ListGameServersRequest {
            fleet_id: fleet.into(),
            page_size: 1000,
            page_token: page_token.clone(),
        };
        let page = match operator.list_game_servers(request).await {
            Ok(page) => page.into_inner(),
            Err(status) => return format!("pool unreadable: {}", status.message()),
        };
        for server in &page.game_servers {
            let state = match (
                server.utilization_status(),
                server.claim_status(),
                server.instance_status(),
            ) {
                (hpb::UtilizationStatus::Utilized, _, _) => "utilized",
                (_, hpb::ClaimStatus::Claimed, _) => "claimed",
                (_, _, hpb::InstanceStatus::Draining) => "available (draining)",
                _ => "available",
            };
            *counts.entry(state).or_default() += 1;
        }
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    counts
        .iter()
        .map(|(state, n)| format!("{state} {n}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Tells the first SDK process of the fleet to terminate; the example game server ends and the fleet service
/// launches a fresh instance.
async fn terminate_one(operator: &mut GameServerServiceClient<AuthedChannel>, fleet: &str) {
    let request = ListGameServersRequest {
        fleet_id: fleet.into(),
        page_size: 1,
        page_token: String::new(),
    };
    let Ok(page) = operator.list_game_servers(request).await else {
        return;
    };
    let Some(server) = page.into_inner().game_servers.into_iter().next() else {
        return;
    };
    let request = TerminateGameServerRequest {
        fleet_id: fleet.into(),
        game_server_id: server.game_server_id.clone(),
        reason: TerminationReason::ScaleIn as i32,
    };
    match operator.terminate_game_server(request).await {
        Ok(_) => println!(
            "  told {} to terminate (scale-in): it sends ProcessEnding and exits",
            server.game_server_id
        ),
        Err(status) => println!("  could not terminate {}: {}", server.game_server_id, status.message()),
    }
}

/// Creates the FleetIQ fleet through FleetService: ANYWHERE, its servers registering on their own (here, by the demo).
/// One an earlier run left is used as it is.
async fn create_fleetiq_fleet(fleets: &mut FleetServiceClient<AuthedChannel>, cli: &Cli) -> Result<(), tonic::Status> {
    let request = fpb::CreateFleetRequest {
        fleet_id: cli.fleet.clone(),
        name: "make run: FleetIQ-style game servers".into(),
        compute_type: fpb::ComputeType::Anywhere as i32,
        locations: vec![fpb::LocationConfiguration {
            location: "local".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    match fleets.create_fleet(request).await {
        Err(status) if status.code() != tonic::Code::AlreadyExists => Err(status),
        _ => Ok(()),
    }
}

/// A fleet of `instances` example game servers in one location, launched by the `process` provisioner from
/// `launch_path`, on instances of type `local` that cost nothing.
fn process_fleet(
    fleet_id: &str,
    name: &str,
    launch_path: &str,
    location: &str,
    instances: u32,
) -> fpb::CreateFleetRequest {
    fpb::CreateFleetRequest {
        fleet_id: fleet_id.into(),
        name: name.into(),
        provisioner: "process".into(),
        launch_configuration: Some(fpb::ServerLaunchConfiguration {
            launch_path: launch_path.into(),
            ..Default::default()
        }),
        instance_definitions: vec![fpb::InstanceDefinition {
            instance_type: "local".into(),
            ..Default::default()
        }],
        locations: vec![fpb::LocationConfiguration {
            location: location.into(),
            capacity: Some(fpb::FleetCapacity {
                minimum_instances: 0,
                maximum_instances: instances.max(10),
                desired_instances: instances,
            }),
            standby: None,
        }],
        ..Default::default()
    }
}

/// Creates a fleet through FleetService, or gives the one an earlier run left this checkout's game server and the
/// request's capacity in each of its locations.
async fn create_or_resize_fleet(
    fleets: &mut FleetServiceClient<AuthedChannel>,
    request: fpb::CreateFleetRequest,
) -> Result<(), tonic::Status> {
    let (fleet_id, locations) = (request.fleet_id.clone(), request.locations.clone());
    let launch_configuration = request.launch_configuration.clone();
    match fleets.create_fleet(request).await {
        Ok(_) => Ok(()),
        Err(status) if status.code() == tonic::Code::AlreadyExists => {
            // An earlier run's fleet launches the game server of wherever that checkout was: this one's from now on.
            let relaunch = fpb::UpdateFleetRequest {
                fleet_id: fleet_id.clone(),
                launch_configuration,
                ..Default::default()
            };
            fleets.update_fleet(relaunch).await?;
            for location in locations {
                let capacity = location.capacity.unwrap_or_default();
                let request = fpb::UpdateFleetCapacityRequest {
                    fleet_id: fleet_id.clone(),
                    location: location.location,
                    minimum_instances: Some(capacity.minimum_instances),
                    maximum_instances: Some(capacity.maximum_instances),
                    desired_instances: Some(capacity.desired_instances),
                };
                fleets.update_fleet_capacity(request).await?;
            }
            Ok(())
        }
        Err(status) => Err(status),
    }
}

/// Creates the SDK fleet through FleetService, or gives the one an earlier run left its desired count.
async fn create_sdk_fleet(fleets: &mut FleetServiceClient<AuthedChannel>, cli: &Cli) -> Result<(), tonic::Status> {
    let request = process_fleet(
        &cli.sdk_fleet,
        "make run: example game servers",
        &cli.sdk_launch_path,
        "local",
        cli.sdk_servers,
    );
    create_or_resize_fleet(fleets, request).await
}

/// Prints the fleet's events not printed yet (`seen`: the ids printed, unique across fleets), oldest first.
async fn print_fleet_events(fleets: &mut FleetServiceClient<AuthedChannel>, fleet: &str, seen: &mut HashSet<String>) {
    let since = SystemTime::now() - Duration::from_secs(10);
    let request = fpb::ListFleetEventsRequest {
        fleet_id: fleet.into(),
        start_time: Some(since.into()),
        page_size: 1000,
        ..Default::default()
    };
    let Ok(page) = fleets.list_fleet_events(request).await else {
        return;
    };
    for event in page.into_inner().events {
        if seen.insert(event.event_id.clone()) {
            let subject = [&event.location, &event.instance_id, &event.game_server_id]
                .into_iter()
                .filter(|s| !s.is_empty())
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" ");
            println!(
                "  fleet event {fleet} {}: {subject} {}",
                event.code().as_str_name().trim_start_matches("FLEET_EVENT_CODE_"),
                event.message
            );
        }
    }
}

/// Kills a game server of the fleet with SIGKILL, as a crash would; the fleet service replaces its instance. The
/// fleet's processes are told from other fleets' by the `BERTH_FLEET_ID` the provisioner put in their environment;
/// the lowest pid goes, most often the oldest.
fn kill_one(fleet: &str) {
    let variable = format!("BERTH_FLEET_ID={fleet}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let lowest = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|&byte| byte == 0)
                    .any(|entry| entry == variable.as_bytes())
            })
        })
        .min();
    let Some(pid) = lowest else {
        return;
    };
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    if killed.is_ok_and(|status| status.success()) {
        println!("  killed a game server of {fleet} with SIGKILL: the fleet service replaces its instance");
    }
}

/// Players per game session at most.
const MAX_PLAYERS: u32 = 4;
/// How long a match waits for its game session to become ACTIVE before giving up on it.
const ACTIVATION_WAIT: Duration = Duration::from_secs(10);
/// How often a match looks whether its game session is ACTIVE yet.
const ACTIVATION_POLL: Duration = Duration::from_millis(200);
/// How long a player waits for the game server to answer JOIN.
const JOIN_WAIT: Duration = Duration::from_secs(5);
/// How long the players of a match with a no-show stay past the end of its reservation: the session service ends
/// lapsed reservations on a sweep, a moment after they lapse.
const LAPSE_MARGIN: Duration = Duration::from_secs(2);
/// Event ids a watch remembers: a resumed watch repeats about a second of events, far fewer than this.
const RECENT_EVENTS: usize = 4096;
/// How often the queue's metrics are shown, s.
const QUEUE_STATUS_EVERY_SECONDS: u64 = 5;

/// What the session side has seen, for the status line.
#[derive(Default)]
struct SessionStats {
    /// Matches refused for want of a free server.
    no_server: AtomicU64,
    /// Session events seen on the watch, by type.
    events: Mutex<BTreeMap<SessionEventType, u64>>,
    /// Player sessions that ended with their game session, as its end's event carried them.
    players_ended: AtomicU64,
}

impl SessionStats {
    fn events(&self) -> std::sync::MutexGuard<'_, BTreeMap<SessionEventType, u64>> {
        // Each change is a single increment, so the map is whole even if a holder panicked.
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A matchmaker in GameLift's way: a game session per match, on whichever server of the fleet Berth picks, and a
/// player session per player, which the player presents to that server.
#[derive(Clone)]
struct SessionMatchmaker {
    fleet: String,
    game_sessions: GameSessionServiceClient<AuthedChannel>,
    player_sessions: PlayerSessionServiceClient<AuthedChannel>,
    stats: Arc<SessionStats>,
    /// Whether a match is waiting out a no-show's reservation. One at a time: such a match holds its server for
    /// the whole reservation timeout, and the fleet has few servers.
    no_show_waiting: Arc<AtomicBool>,
}

impl SessionMatchmaker {
    /// One match, from its game session to the last player leaving.
    async fn play(mut self, number: u64) {
        let name = format!("match-{number}");
        let (mode, players, wants_no_show) = {
            let mut rng = rand::rng();
            let mode = if rng.random_bool(0.5) { "ranked" } else { "casual" };
            (mode, rng.random_range(2..=MAX_PLAYERS), rng.random_ratio(1, 6))
        };
        let request = CreateGameSessionRequest {
            fleet_id: self.fleet.clone(),
            maximum_player_session_count: MAX_PLAYERS,
            name: name.clone(),
            game_properties: vec![KeyValue {
                key: "mode".into(),
                value: mode.into(),
            }],
            ..Default::default()
        };
        let id = match self.game_sessions.create_game_session(request).await {
            Ok(created) => created.into_inner().game_session.unwrap_or_default().game_session_id,
            // Every server hosts a match already: normal when busy, a later match tries again.
            Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                self.stats.no_server.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(status) => return println!("  {name}: could not create a game session: {}", status.message()),
        };
        let Some(session) = self.wait_active(&id).await else {
            println!("  {name}: its game session did not become ACTIVE; ending it");
            return end_abandoned_session(&mut self.game_sessions, &id).await;
        };
        let Some((host, port)) = address(session.endpoint) else {
            println!("  {name}: its game session has no usable endpoint; ending it");
            return end_abandoned_session(&mut self.game_sessions, &id).await;
        };

        let request = CreatePlayerSessionsRequest {
            game_session_id: id.clone(),
            players: (1..=players)
                .map(|i| DesiredPlayerSession {
                    player_id: format!("{name}-p{i}"),
                    player_data: String::new(),
                })
                .collect(),
        };
        let reserved = match self.player_sessions.create_player_sessions(request).await {
            Ok(created) => created.into_inner().player_sessions,
            Err(status) => {
                println!("  {name}: could not reserve players: {}", status.message());
                return end_abandoned_session(&mut self.game_sessions, &id).await;
            }
        };
        let no_show = wants_no_show && !self.no_show_waiting.swap(true, Ordering::Relaxed);
        let (coming, wait_for_missing) = match reserved.split_last() {
            Some((missing, others)) if no_show => {
                // The others stay until the missing player's reservation has lapsed, so that the game session
                // still runs then and the reservation ends TIMEDOUT: had the session ended first, it would have
                // ended COMPLETED with it.
                let lapses_in = missing
                    .reserved_until_time
                    .and_then(|until| SystemTime::try_from(until).ok())
                    .and_then(|until| until.duration_since(SystemTime::now()).ok())
                    .unwrap_or_default();
                println!(
                    "  {name}: {} will not connect; the others wait {} s for its reservation to end TIMEDOUT",
                    missing.player_id,
                    lapses_in.as_secs()
                );
                (others, lapses_in + LAPSE_MARGIN)
            }
            _ => (&reserved[..], Duration::ZERO),
        };
        let joined = seat_players(&name, &host, port, coming, wait_for_missing).await;
        if no_show {
            self.no_show_waiting.store(false, Ordering::Relaxed);
        }
        if joined == 0 {
            end_abandoned_session(&mut self.game_sessions, &id).await;
        }
    }

    /// The game session once ACTIVE; None when it ended instead, or is still not ACTIVE after [`ACTIVATION_WAIT`].
    async fn wait_active(&mut self, id: &str) -> Option<GameSession> {
        let deadline = Instant::now() + ACTIVATION_WAIT;
        while Instant::now() < deadline {
            tokio::time::sleep(ACTIVATION_POLL).await;
            let request = DescribeGameSessionsRequest {
                game_session_ids: vec![id.to_owned()],
            };
            let session = self
                .game_sessions
                .describe_game_sessions(request)
                .await
                .ok()?
                .into_inner()
                .game_sessions
                .pop()?;
            match session.status() {
                GameSessionStatus::Active => return Some(session),
                GameSessionStatus::Activating => {}
                _ => return None,
            }
        }
        None
    }
}

/// Ends a game session no player will leave: its server ends a session when its last player leaves, so without
/// players it would host this one until the activation timeout, or for ever once ACTIVE. Forced, which also stops
/// the server process when it hosts nothing else; the fleet service then launches a fresh one.
async fn end_abandoned_session(game_sessions: &mut GameSessionServiceClient<AuthedChannel>, id: &str) {
    let request = TerminateGameSessionRequest {
        game_session_id: id.to_owned(),
        termination_mode: TerminationMode::ForceTerminate as i32,
    };
    match game_sessions.terminate_game_session(request).await {
        Ok(_) => {}
        // It has ended already.
        Err(status) if status.code() == tonic::Code::FailedPrecondition => {}
        Err(status) => println!("  could not end game session {id}: {}", status.message()),
    }
}

/// Where players reach a game session's server: its address (IP, else DNS name) and game port; None when it has
/// no usable port.
fn address(endpoint: Option<Endpoint>) -> Option<(String, u16)> {
    let endpoint = endpoint?;
    let port = u16::try_from(endpoint.port).ok().filter(|&port| port != 0)?;
    let host = if endpoint.ip_address.is_empty() {
        endpoint.dns_name
    } else {
        endpoint.ip_address
    };
    Some((host, port))
}

/// Connects each player to the game server with their player session; each plays 3–10 s, and at least `min_stay`,
/// then leaves. How many the server let in.
async fn seat_players(name: &str, host: &str, port: u16, players: &[PlayerSession], min_stay: Duration) -> usize {
    let mut joins = JoinSet::new();
    for player in players {
        let stay = Duration::from_secs(rand::rng().random_range(3..=10)).max(min_stay);
        joins.spawn(join(name.to_owned(), host.to_owned(), port, player.clone(), stay));
    }
    joins.join_all().await.into_iter().filter(|&joined| joined).count()
}

/// A player taking their reserved slot: connects to the game server, presents their player session, stays for
/// `stay` and leaves by closing the connection. Whether the server let them in.
async fn join(name: String, host: String, port: u16, player: PlayerSession, stay: Duration) -> bool {
    let handshake = async {
        let mut connection = BufReader::new(TcpStream::connect((host.as_str(), port)).await?);
        let line = format!("JOIN {} {}\n", player.game_session_id, player.player_session_id);
        connection.get_mut().write_all(line.as_bytes()).await?;
        let mut answer = String::new();
        connection.read_line(&mut answer).await?;
        Ok::<_, std::io::Error>((connection, answer))
    };
    match tokio::time::timeout(JOIN_WAIT, handshake).await {
        Ok(Ok((connection, answer))) if answer.trim_end() == "WELCOME" => {
            // The open connection is the player's presence in the game.
            tokio::time::sleep(stay).await;
            drop(connection);
            true
        }
        Ok(Ok((_, answer))) => {
            println!(
                "  {name}: {} was turned away: {:?}",
                player.player_id,
                answer.trim_end()
            );
            false
        }
        Ok(Err(err)) => {
            println!("  {name}: {} could not reach {host}:{port}: {err}", player.player_id);
            false
        }
        Err(_) => {
            println!("  {name}: {} had no answer from {host}:{port}", player.player_id);
            false
        }
    }
}

/// What one message of a resumable watch stream carries.
enum Watched<E> {
    /// An event, with its id and the cursor just after it.
    Event { id: String, cursor: String, event: E },
    /// The latest cursor, on a quiet stream.
    Keepalive(String),
    /// Something this client does not know.
    Unknown,
}

/// A closure that takes a message of a watch stream apart for [`follow`]. Every service's watch response
/// (`$message`) carries, in its oneof `kind` (enum `$kind`), an event with its id and cursor, or a keepalive; only
/// the generated types differ.
macro_rules! watched {
    ($message:ty, $kind:ident) => {
        |message: $message| match message.kind {
            Some($kind::Event(event)) => $crate::Watched::Event {
                id: event.event_id.clone(),
                cursor: event.cursor.clone(),
                event,
            },
            Some($kind::Keepalive(keepalive)) => $crate::Watched::Keepalive(keepalive.cursor),
            None => $crate::Watched::Unknown,
        }
    };
}
use watched;

/// Follows a resumable watch until the task is dropped: `open` starts the stream after a cursor (empty: from now),
/// `read` takes each message apart, and `on_event` gets each event once. A broken stream is opened again after the
/// last cursor received; a resumed watch starts a little before its cursor and so repeats some events, which their
/// ids tell apart.
async fn follow<M, E, Opened>(
    what: &str,
    mut open: impl FnMut(String) -> Opened,
    read: impl Fn(M) -> Watched<E>,
    mut on_event: impl FnMut(E),
) where
    Opened: Future<Output = Result<tonic::Response<tonic::Streaming<M>>, tonic::Status>>,
{
    let mut cursor = String::new();
    let mut recent = VecDeque::new();
    let mut seen = HashSet::new();
    loop {
        let broken = match open(cursor.clone()).await {
            Ok(response) => {
                let mut stream = response.into_inner();
                loop {
                    match stream.message().await {
                        Ok(Some(message)) => match read(message) {
                            Watched::Event {
                                id,
                                cursor: after,
                                event,
                            } => {
                                cursor = after;
                                if seen.insert(id.clone()) {
                                    recent.push_back(id);
                                    if recent.len() > RECENT_EVENTS
                                        && let Some(old) = recent.pop_front()
                                    {
                                        seen.remove(&old);
                                    }
                                    on_event(event);
                                }
                            }
                            Watched::Keepalive(after) => cursor = after,
                            Watched::Unknown => {}
                        },
                        Ok(None) => break tonic::Status::unavailable("the stream ended"),
                        Err(status) => break status,
                    }
                }
            }
            Err(status) => status,
        };
        if broken.code() == tonic::Code::OutOfRange {
            // Events were missed: the watch goes on from now.
            cursor.clear();
        }
        println!("  {what} watch broke ({}); resuming", broken.message());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Counts the fleet's session events for the status line.
async fn watch_events(client: GameSessionServiceClient<AuthedChannel>, fleet: String, stats: Arc<SessionStats>) {
    let open = |cursor| {
        let mut client = client.clone();
        let request = WatchSessionEventsRequest {
            fleet_ids: vec![fleet.clone()],
            after_cursor: cursor,
            ..Default::default()
        };
        async move { client.watch_session_events(request).await }
    };
    let count = |event: SessionEvent| {
        let ended = u64::try_from(event.player_sessions.len()).unwrap_or(u64::MAX);
        stats.players_ended.fetch_add(ended, Ordering::Relaxed);
        *stats.events().entry(event.event_type()).or_default() += 1;
    };
    follow(
        "session events",
        open,
        watched!(WatchSessionEventsResponse, Kind),
        count,
    )
    .await;
}

/// The session side of the status line: the fleet's game sessions now, and the transitions seen since the start.
async fn sessions_line(
    client: &mut GameSessionServiceClient<AuthedChannel>,
    fleet: &str,
    stats: &SessionStats,
) -> String {
    // Each server hosts one game session at a time, so the live ones fit in a page.
    let request = ListGameSessionsRequest {
        fleet_id: fleet.into(),
        statuses: vec![GameSessionStatus::Activating as i32, GameSessionStatus::Active as i32],
        page_size: 1000,
        ..Default::default()
    };
    let live = match client.list_game_sessions(request).await {
        Ok(page) => {
            let sessions = page.into_inner().game_sessions;
            let activating = sessions
                .iter()
                .filter(|session| session.status() == GameSessionStatus::Activating)
                .count();
            format!("activating {activating} · active {}", sessions.len() - activating)
        }
        Err(status) => format!("unreadable ({})", status.message()),
    };
    let events = stats.events();
    let seen = |kind| events.get(&kind).copied().unwrap_or(0);
    let errors = match seen(SessionEventType::GameSessionError) {
        0 => String::new(),
        n => format!(" · error {n}"),
    };
    format!(
        "game sessions {live} · terminated {}{errors}  | player sessions ended with them {} · timed out {}  | \
         no server {}  | events {}",
        seen(SessionEventType::GameSessionTerminated),
        stats.players_ended.load(Ordering::Relaxed),
        seen(SessionEventType::PlayerSessionTimedOut),
        stats.no_server.load(Ordering::Relaxed),
        events.values().sum::<u64>(),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let services: Vec<(String, String)> = cli
        .services
        .iter()
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, endpoint)| (name.to_owned(), endpoint.to_owned()))
        .collect();
    println!("Services (grpc.health.v1 status, services listed by reflection):");
    check_services(&services).await?;

    let key = TokenKey::new(std::fs::read(&cli.auth_key_file)?.trim_ascii().to_vec())?;
    let health = endpoint_of(&services, "health");
    let mut operator =
        GameServerServiceClient::new(berth_sdk::connect(health, &mint(&key, Role::Operator, None)).await?);
    let fleet_endpoint = endpoint_of(&services, "fleet");
    let fleet_channel = berth_sdk::connect(fleet_endpoint, &mint(&key, Role::Operator, None)).await?;
    let mut fleets = FleetServiceClient::new(fleet_channel.clone());
    let mut scaling = ScalingServiceClient::new(fleet_channel);
    create_fleetiq_fleet(&mut fleets, &cli).await?;
    create_sdk_fleet(&mut fleets, &cli).await?;
    let mut fleet_events = HashSet::new();
    let placement = endpoint_of(&services, "placement");
    let mut queues = QueueServiceClient::new(berth_sdk::connect(placement, &mint(&key, Role::Operator, None)).await?);
    placements::create_queue_and_fleets(
        &mut fleets,
        &mut scaling,
        &mut queues,
        &cli.queue,
        &cli.sdk_launch_path,
        cli.placement_instances,
    )
    .await?;
    let placement_channel = berth_sdk::connect(placement, &mint(&key, Role::Client, None)).await?;
    let mut matchmaker = ClaimServiceClient::new(placement_channel.clone());
    let allocating = match (&cli.agent_path, &cli.agones_server_path) {
        (Some(agent), Some(server)) => {
            agones::create_fleet(&mut fleets, agent, server, cli.agones_servers).await?;
            Some(agones::AllocatingMatchmaker {
                allocator: AllocationServiceClient::new(placement_channel.clone()),
            })
        }
        _ => None,
    };
    let session = endpoint_of(&services, "session");
    let session_channel = berth_sdk::connect(session, &mint(&key, Role::Client, None)).await?;
    let mut game_sessions = GameSessionServiceClient::new(session_channel.clone());
    let mut queue_matchmaker = placements::QueueMatchmaker::new(
        cli.queue.clone(),
        PlacementServiceClient::new(placement_channel),
        game_sessions.clone(),
    );
    let session_stats = Arc::new(SessionStats::default());
    let session_matchmaker = SessionMatchmaker {
        fleet: cli.sdk_fleet.clone(),
        game_sessions: game_sessions.clone(),
        player_sessions: PlayerSessionServiceClient::new(session_channel),
        stats: session_stats.clone(),
        no_show_waiting: Arc::default(),
    };

    let fleet = cli.fleet.clone();
    let mut servers: BTreeMap<String, Server> = BTreeMap::new();
    for i in 0..cli.servers {
        let id = format!("{fleet}-gs-{i:03}");
        let token = mint(&key, Role::GameServer, Some((&fleet, &id)));
        let mut server = Server {
            id: id.clone(),
            instance: format!("{fleet}-instance-{}", i % 4),
            client: GameServerServiceClient::new(berth_sdk::connect(health, &token).await?),
        };
        if let Err(status) = server.register(&fleet).await {
            if status.code() != tonic::Code::AlreadyExists {
                return Err(status.into());
            }
            // Left over from an earlier run, perhaps mid-match: start it afresh.
            let leave = DeregisterGameServerRequest {
                fleet_id: fleet.clone(),
                game_server_id: id.clone(),
            };
            server.client.deregister_game_server(leave).await?;
            server.register(&fleet).await?;
        }
        servers.insert(id, server);
    }
    operator
        .set_instance_status(SetInstanceStatusRequest {
            fleet_id: fleet.clone(),
            instance_id: format!("{fleet}-instance-3"),
            instance_status: hpb::InstanceStatus::Draining as i32,
        })
        .await?;
    println!(
        "Registered {} game servers in fleet {fleet:?} over 4 instances; {fleet}-instance-3 is DRAINING. \
         Matchmaking, a game session on fleet {:?} every {} ms, and a placement through queue {:?} (fleets {}) \
         every {} ms (Ctrl-C to stop):",
        cli.servers,
        cli.sdk_fleet,
        cli.session_every_ms,
        cli.queue,
        placements::fleet_ids().collect::<Vec<_>>().join(", "),
        cli.placement_every_ms
    );
    tokio::spawn(watch_events(
        game_sessions.clone(),
        cli.sdk_fleet.clone(),
        session_stats.clone(),
    ));
    tokio::spawn(queue_matchmaker.clone().watch());

    let started = Instant::now();
    let mut claim_tick = tokio::time::interval(Duration::from_millis(cli.claim_every_ms));
    let mut status_tick = tokio::time::interval(Duration::from_secs(1));
    let mut session_tick = tokio::time::interval(Duration::from_millis(cli.session_every_ms));
    let mut placement_tick = tokio::time::interval(Duration::from_millis(cli.placement_every_ms));
    let mut allocate_tick = tokio::time::interval(Duration::from_millis(cli.allocate_every_ms));
    let mut allocations = 0u64;
    let (mut matches, mut abandoned, mut refused, mut session_matches) = (0u64, 0u64, 0u64, 0u64);
    let mut placements_started = 0u64;
    loop {
        if cli.duration_seconds > 0 && started.elapsed().as_secs() >= cli.duration_seconds {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = status_tick.tick() => {
                let pool = pool_line(&mut operator, &fleet).await;
                let sdk_pool = pool_line(&mut operator, &cli.sdk_fleet).await;
                let sessions = sessions_line(&mut game_sessions, &cli.sdk_fleet, &session_stats).await;
                let elapsed = started.elapsed().as_secs();
                println!(
                    "  t={elapsed:>4}s  {pool}  | matches started {matches}, claims abandoned {abandoned}, no server \
                     free {refused}  || {sdk_fleet}: {sdk_pool}\n           {sdk_fleet}: {sessions}",
                    sdk_fleet = cli.sdk_fleet
                );
                if cli.terminate_every_seconds > 0 && elapsed > 0 && elapsed.is_multiple_of(cli.terminate_every_seconds) {
                    terminate_one(&mut operator, &cli.sdk_fleet).await;
                }
                if cli.kill_every_seconds > 0 && elapsed > 0 && elapsed.is_multiple_of(cli.kill_every_seconds) {
                    kill_one(&cli.sdk_fleet);
                }
                if elapsed > 0 && elapsed.is_multiple_of(QUEUE_STATUS_EVERY_SECONDS) {
                    println!("{}", queue_matchmaker.metrics_line().await);
                }
                let agones_fleet = allocating.as_ref().map(|_| agones::FLEET);
                for fleet_id in std::iter::once(cli.sdk_fleet.as_str()).chain(placements::fleet_ids()).chain(agones_fleet) {
                    print_fleet_events(&mut fleets, fleet_id, &mut fleet_events).await;
                }
            }
            _ = session_tick.tick() => {
                session_matches += 1;
                tokio::spawn(session_matchmaker.clone().play(session_matches));
            }
            _ = allocate_tick.tick(), if allocating.is_some() => {
                allocations += 1;
                if let Some(matchmaker) = allocating.clone() {
                    tokio::spawn(matchmaker.allocate(allocations));
                }
            }
            _ = placement_tick.tick() => {
                placements_started += 1;
                tokio::spawn(queue_matchmaker.clone().start(placements_started));
            }
            _ = claim_tick.tick() => {
                let request = ClaimGameServerRequest { fleet_id: fleet.clone(), ..Default::default() };
                match matchmaker.claim_game_server(request).await {
                    Ok(claimed) => {
                        let id = claimed.into_inner().game_server.map(|server| server.game_server_id).unwrap_or_default();
                        let (abandon, seconds) = {
                            let mut rng = rand::rng();
                            (rng.random_bool(0.15), rng.random_range(4..15))
                        };
                        if abandon {
                            abandoned += 1;
                        } else if let Some(server) = servers.remove(&id) {
                            matches += 1;
                            let token = mint(&key, Role::GameServer, Some((&fleet, &id)));
                            let replacement = Server {
                                id: id.clone(),
                                instance: server.instance.clone(),
                                client: GameServerServiceClient::new(berth_sdk::connect(health, &token).await?),
                            };
                            servers.insert(id, replacement);
                            tokio::spawn(play_match(server, fleet.clone(), seconds));
                        }
                    }
                    Err(status) if status.code() == tonic::Code::ResourceExhausted => refused += 1,
                    Err(status) => println!("  claim failed: {status}"),
                }
            }
        }
    }
}
