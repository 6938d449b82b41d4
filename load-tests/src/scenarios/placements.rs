//! Game session placements end to end, as a matchmaker sees them: StartGameSessionPlacement, then the placement's
//! FULFILLED event on a watch. Five queues, each over the same ten ANYWHERE fleets in four locations, place onto
//! `--servers` SDK processes that speak the stream by hand to a health replica of its own process (see `hosts`);
//! each process activates the sessions it is given, plays a short match and ends it, so that the processes are
//! used again and a rate can be sustained. The session service (its sweep) and the placement service (its workers
//! at their default settings) run in this process; the matchmakers are its clients over `--connections`
//! connections, with one watch per queue that takes each placement's outcome off the ledger (see `ledger`).
//!
//! Measured:
//! - **closed loop**: `--concurrency` placements in flight, each replaced when its outcome arrives; after a
//!   warm-up, FULFILLED events per second over `--seconds`, with start → FULFILLED latency;
//! - **open loop**: starts sent on a fixed schedule at `--rate` a second for `--seconds`, whether or not earlier
//!   ones have been answered, so that queueing shows in the latency, which runs from the moment each start was due
//!   (a generator that falls behind counts against the system, not in its favour); where the time goes, from the
//!   same moment: the start answered, the session pushed to its server, the server's activation answered;
//! - **claim**: the direct-claim path (ClaimGameServer) on the same placement service, over servers registered in
//!   a fleet of their own;
//! - floors: a no-op gRPC call over the same connections; the scripts of a whole placement straight on the store
//!   (see `floor`) and the claim script, once the services are stopped; and the least a placement's life could
//!   cost Redis (see `minimal`), beside which the cost's figures are printed as multiples;
//! - CPU per placement in the closed loop's window (this process: services, matchmakers and SDK processes; the
//!   health replica; Redis), and Redis memory per placement kept for the retention;
//! - **cost**: one placement's whole life, each player accepted and removed by its own SDK call, as Redis and the
//!   health replica pay for it, with nothing else going on (see `cost`): commands, function calls, stream entries,
//!   time in functions, memory kept, CPU.
//!
//! The targets (at least 5,000 placements/s sustained; a p99 of at most 20 ms at 2,500/s offered and of 30 ms at
//! 500/s; per placement at most 80 Redis commands, 4 stream entries, 200 µs in functions, 3 KiB kept and 100 µs of
//! health replica CPU) are reported met or missed, never failed on, beside what others offer: GameLift accepts 75
//! placements/s per account, Agones batches allocations for 500 ms and its users report about 500 ms per allocation.

mod cost;
mod floor;
mod hosts;
mod ledger;
mod minimal;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use berth_domain::game_session::GameSessionStatus;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::placement::v1::{
    self as pb, PlacementEventType, watch_game_session_placements_response::Kind as Watched,
};
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_session::SessionArgs;
use berth_store::sessions;
use tokio::task::JoinSet;
use tonic::{Code, Streaming};

use self::hosts::Hosts;
use self::ledger::{Ledger, Load};
use super::claim;
use crate::args::Args;
use crate::connections::Rotation;
use crate::driver::{CALL_DEADLINE, Outcome};
use crate::procfs::{self, CpuTimes, Used};
use crate::redis_stats::{RedisStats, used_memory};
use crate::replica::Replica;
use crate::report::{Figure, Findings, Line, Ratio, Target};
use crate::stack::Stack;
use crate::{Failure, fleet, floors, sdk_stream};

/// Destination fleets, each in every location of [`fleet::LOCATIONS`], and queues over all of them.
const FLEETS: u64 = 10;
const QUEUES: u64 = 5;
/// The fleet the claim line claims from, filled through the store.
const CLAIM_FLEET: &str = "bench-placements-claim";

/// The most players a placement's session takes: `--players` may be at most this.
const MAX_PLAYERS: u32 = 10;
/// Players whose latencies to every location each placement carries, as measured by the matchmaker, whatever the
/// number it reserves slots for: they make a different location the nearest from one placement to the next.
const MEASURED_PLAYERS: u64 = 4;

/// How long the closed loop runs before its window opens, so that the window sees a steady state.
const WARM_UP: Duration = Duration::from_secs(2);
/// How long each load waits at its end for the placements still in flight.
const DRAIN: Duration = Duration::from_secs(15);

/// The throughput target, and the open loop's p99 targets (ms), each stated at an offered rate (per second): the
/// placement service's at launch load, and the placement core's at a mid-sized game's.
const THROUGHPUT_TARGET: f64 = 5_000.0;
const LATENCY_TARGETS: [(u64, f64); 2] = [(2_500, 20.0), (500, 30.0)];

/// Placements the cost phase runs (at most `--servers`).
const COST_PLACEMENTS: u64 = 2_000;
/// The budget of one placement's whole life: Redis commands (those inside functions included), stream entries,
/// µs in functions, bytes kept for the retention, and health replica CPU µs.
const COMMANDS_TARGET: f64 = 80.0;
const STREAM_ENTRIES_TARGET: f64 = 4.0;
const FUNCTION_TIME_TARGET_US: f64 = 200.0;
const MEMORY_KEPT_TARGET: f64 = 3072.0;
const REPLICA_CPU_TARGET_US: f64 = 100.0;
/// Commands listed one by one in the cost's breakdown.
const COMMANDS_LISTED: usize = 12;

/// What others offer, printed beside the figures: GameLift's StartGameSessionPlacement quota per account, Agones'
/// allocation batching window and the allocation latency its users report.
const GAMELIFT_PLACEMENTS_PER_SECOND: f64 = 75.0;
const AGONES_BATCH_MS: f64 = 500.0;
const AGONES_ALLOCATION_MS: f64 = 500.0;

/// Destination fleet `n`.
fn fleet_id(n: u64) -> String {
    format!("bench-placement-{n:02}")
}

/// Ends, as their servers would, the sessions the workers placed from the open loop's backlog until they stopped:
/// on processes that stopped too, they would hold their servers until their activation deadline, minutes on, and
/// the floors after them would find no server free in any queue the further behind the loop fell.
async fn end_the_backlogs_sessions(store: &berth_store::Store) -> Result<(), Failure> {
    let live = [
        GameSessionStatus::Activating,
        GameSessionStatus::Active,
        GameSessionStatus::Terminating,
    ]
    .map(GameSessionStatus::as_str);
    let mut ended = 0;
    for n in 0..FLEETS {
        let fleet = fleet_id(n);
        let mut after = None;
        loop {
            let page = sessions::list_game_sessions(store, &fleet, "", &live, after.as_deref(), 200).await?;
            for session in &page.items {
                sessions::end_game_session(store, &fleet, &session.game_server_id, &session.game_session_id, false)
                    .await?;
                ended += 1;
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    eprintln!("ended {ended} sessions the open loop's backlog left, before the floors");
    Ok(())
}

/// Queue `n`.
fn queue_name(n: u64) -> String {
    format!("bench-queue-{n}")
}

/// Queue `n` lists every fleet, starting two further along than the queue before, so that each queue prefers
/// other fleets and the load spreads over all of them.
fn create_queue(n: u64) -> pb::CreateQueueRequest {
    pb::CreateQueueRequest {
        name: queue_name(n),
        destinations: (0..FLEETS)
            .map(|k| pb::QueueDestination {
                fleet_id: fleet_id((k + 2 * n) % FLEETS),
            })
            .collect(),
        ..Default::default()
    }
}

/// Placement `index` of a run, named `placement_id`: into queue `index % QUEUES`, with the latencies of
/// [`MEASURED_PLAYERS`] players, whose nearest location changes from one placement to the next so that sessions
/// spread over the locations, and slots reserved for `players` players.
fn placement_request(placement_id: &str, index: u64, players: u64) -> pb::StartGameSessionPlacementRequest {
    let locations = fleet::LOCATIONS.len() as u64;
    let player_id = |player: u64| format!("{placement_id}-player-{player}");
    let player_latencies = (0..MEASURED_PLAYERS)
        .flat_map(|player| {
            fleet::LOCATIONS
                .iter()
                .zip(0..)
                .map(move |(location, l)| pb::PlayerLatency {
                    player_id: player_id(player),
                    location: (*location).into(),
                    latency_ms: (20 + 15 * ((index + l) % locations) + 3 * player) as u32,
                })
        })
        .collect();
    pb::StartGameSessionPlacementRequest {
        placement_id: placement_id.into(),
        queue_name: queue_name(index % QUEUES),
        maximum_player_session_count: MAX_PLAYERS,
        game_session_name: format!("bench match {index}"),
        player_latencies,
        desired_player_sessions: (0..players)
            .map(|player| pb::DesiredPlayerSession {
                player_id: player_id(player),
                player_data: String::new(),
            })
            .collect(),
        ..Default::default()
    }
}

/// The matchmakers: clients of the placement service, taken in turn, and the players each placement carries.
struct Matchmakers {
    clients: Rotation<PlacementServiceClient<AuthedChannel>>,
    players: u64,
}

/// Starts placement `index` of `load`, due at `due` and entered in it already. A start that fails ends the
/// placement; one that answers is timed as a stage of a load that keeps them.
async fn start(matchmakers: Arc<Matchmakers>, load: Arc<Load>, index: u64, due: Instant) {
    let request = placement_request(&load.placement_id(index), index, matchmakers.players);
    let mut client = matchmakers.clients.next();
    let answer = tokio::time::timeout(CALL_DEADLINE, client.start_game_session_placement(request)).await;
    match answer {
        Ok(Ok(_)) => {
            if let Some(stages) = &load.stages {
                stages.answered.record(index, due.elapsed(), Ok(()));
            }
        }
        Ok(Err(status)) => {
            load.end(index, Err(status.code()), Instant::now());
        }
        Err(_) => {
            load.end(index, Err(Code::DeadlineExceeded), Instant::now());
        }
    }
}

/// How a placement ended, as a line counts it: FULFILLED is the only success.
fn outcome(event_type: PlacementEventType) -> Option<Outcome> {
    match event_type {
        PlacementEventType::Fulfilled => Some(Ok(())),
        PlacementEventType::TimedOut => Some(Err(Code::DeadlineExceeded)),
        PlacementEventType::Cancelled => Some(Err(Code::Cancelled)),
        PlacementEventType::Failed => Some(Err(Code::Internal)),
        PlacementEventType::Unspecified => None,
    }
}

/// How long a broken watch keeps trying to resume before the run counts it lost, and how often it tries.
const RESUME_PATIENCE: Duration = Duration::from_secs(10);
const RESUME_EVERY: Duration = Duration::from_millis(100);

/// A watch of one queue's placement ends, resumed from its last cursor when it breaks, as the contract asks of a
/// client (a replica short of Redis ends watches with UNAVAILABLE).
struct Watch {
    matchmakers: Arc<Matchmakers>,
    queue: u64,
    /// Where the stream got to: the cursor of its last event or keepalive.
    cursor: String,
    ledger: Arc<Ledger>,
}

impl Watch {
    async fn open(&self) -> Result<Streaming<pb::WatchGameSessionPlacementsResponse>, tonic::Status> {
        let ends = [
            PlacementEventType::Fulfilled,
            PlacementEventType::TimedOut,
            PlacementEventType::Cancelled,
            PlacementEventType::Failed,
        ];
        let request = pb::WatchGameSessionPlacementsRequest {
            queue_names: vec![queue_name(self.queue)],
            event_types: ends.iter().map(|end| *end as i32).collect(),
            after_cursor: self.cursor.clone(),
            ..Default::default()
        };
        let mut client = self.matchmakers.clients.next();
        Ok(client.watch_game_session_placements(request).await?.into_inner())
    }

    /// Reads `events` and whatever resumes it, taking each placement's outcome off the ledger when it arrives,
    /// until it can no longer be resumed. Answers why, and counts each resume in `resumed`.
    async fn run(
        mut self,
        mut events: Streaming<pb::WatchGameSessionPlacementsResponse>,
        resumed: Arc<AtomicU64>,
    ) -> String {
        loop {
            let broke = match events.message().await {
                Ok(Some(message)) => {
                    self.heard(message);
                    continue;
                }
                Ok(None) => "ended".to_owned(),
                Err(status) => status.to_string(),
            };
            let giving_up = Instant::now() + RESUME_PATIENCE;
            events = loop {
                match self.open().await {
                    Ok(events) => break events,
                    Err(_) if Instant::now() < giving_up => tokio::time::sleep(RESUME_EVERY).await,
                    Err(status) => return format!("a placement watch broke ({broke}) and did not resume: {status}"),
                }
            };
            resumed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn heard(&mut self, message: pb::WatchGameSessionPlacementsResponse) {
        let arrived = Instant::now();
        match message.kind {
            Some(Watched::Event(event)) => {
                self.cursor = event.cursor;
                let ended = PlacementEventType::try_from(event.event_type).ok().and_then(outcome);
                if let (Some(outcome), Some(placement)) = (ended, event.placement) {
                    self.ledger
                        .ended(&placement.placement_id, outcome, placement.attempt_count, arrived);
                }
            }
            Some(Watched::Keepalive(keepalive)) => self.cursor = keepalive.cursor,
            None => {}
        }
    }
}

/// One watch per queue, of the placements' ends, spread over the connections and open before this returns, so
/// that no outcome is missed. Each counts its resumes in `resumed`.
async fn watches(
    matchmakers: &Arc<Matchmakers>,
    ledger: &Arc<Ledger>,
    resumed: &Arc<AtomicU64>,
) -> Result<JoinSet<String>, Failure> {
    let mut watches = JoinSet::new();
    for queue in 0..QUEUES {
        let watch = Watch {
            matchmakers: matchmakers.clone(),
            queue,
            cursor: String::new(),
            ledger: ledger.clone(),
        };
        let events = watch.open().await?;
        watches.spawn(watch.run(events, resumed.clone()));
    }
    Ok(watches)
}

/// The closed loop's window: its line, how long it was, and what the machine's parts had used at its start and end.
struct Window {
    line: Line,
    length: Duration,
    cpu_before: CpuTimes,
    cpu_after: CpuTimes,
}

/// The closed loop: `--concurrency` placements in flight, each replaced as soon as its outcome arrives, for the
/// warm-up and then the window, which `cpu` reads the CPU times around. The placements still in flight at its end
/// are left to the drain.
async fn closed_loop(
    matchmakers: &Arc<Matchmakers>,
    load: &Arc<Load>,
    args: &Args,
    cpu: impl Fn() -> Result<CpuTimes, Failure>,
) -> Result<Window, Failure> {
    let dispatcher = {
        let (matchmakers, load) = (matchmakers.clone(), load.clone());
        tokio::spawn(async move {
            let slots = load.slots.as_ref().expect("a closed loop has slots");
            for index in 0.. {
                slots.acquire().await.expect("the slots are never closed").forget();
                let due = Instant::now();
                load.begin(index, due);
                tokio::spawn(start(matchmakers.clone(), load.clone(), index, due));
            }
        })
    };
    tokio::time::sleep(WARM_UP).await;
    let window = Duration::from_secs(args.seconds);
    eprintln!(
        "measuring placements, closed loop: {} in flight, {} s",
        args.concurrency, args.seconds
    );
    let cpu_before = cpu()?;
    let opened = Instant::now();
    load.measure(true);
    tokio::time::sleep(window).await;
    load.measure(false);
    let length = opened.elapsed();
    let cpu_after = cpu()?;
    dispatcher.abort();
    let name = format!("placement, {} in flight", args.concurrency);
    Ok(Window {
        line: load.line(&name, length),
        length,
        cpu_before,
        cpu_after,
    })
}

/// The open loop: `--rate` starts a second for `--seconds`, each sent when due whatever became of the others.
/// Answers its line, measured from each start's due moment to its outcome (those with none by the end of the
/// drain count as DEADLINE_EXCEEDED), and the most a start was sent behind its schedule.
async fn open_loop(matchmakers: &Arc<Matchmakers>, load: &Arc<Load>, args: &Args) -> (Line, Duration) {
    let starts = args.rate * args.seconds;
    let spacing = Duration::from_secs(1).div_f64(args.rate as f64);
    eprintln!(
        "measuring placements, open loop: {} a second for {} s",
        args.rate, args.seconds
    );
    load.measure(true);
    let first = Instant::now();
    let mut behind = Duration::ZERO;
    for index in 0..starts {
        let due = first + spacing.mul_f64(index as f64);
        tokio::time::sleep_until(due.into()).await;
        behind = behind.max(due.elapsed());
        load.begin(index, due);
        tokio::spawn(start(matchmakers.clone(), load.clone(), index, due));
    }
    let schedule = spacing.mul_f64(starts as f64);
    load.drain(DRAIN, Err(Code::DeadlineExceeded)).await;
    load.measure(false);
    let name = format!("placement, {}/s offered", args.rate);
    (load.line(&name, schedule), behind)
}

/// The open loop's breakdown as lines, each over the same schedule as the loop's own `line`.
fn stage_lines(load: &Load, line: &Line) -> Vec<Line> {
    let schedule = Duration::from_secs_f64(line.seconds);
    let Some(stages) = &load.stages else {
        return Vec::new();
    };
    [
        ("  of which: start answered", &stages.answered),
        ("  of which: session at its server", &stages.pushed),
        ("  of which: activation answered", &stages.activated),
    ]
    .into_iter()
    .map(|(name, stage)| Line::new(name, &stage.merged(), schedule))
    .collect()
}

/// The targets, each with what keeps its measurement from saying what the target asks, when something does.
fn targets(closed: &Line, open: &Line, rate: u64) -> Vec<Target> {
    let throughput = Target::at_least(
        "placements fulfilled per second, sustained",
        closed.ops_per_sec,
        THROUGHPUT_TARGET,
        "per second",
    );
    let latency = LATENCY_TARGETS.iter().map(|&(target_rate, p99_ms)| {
        let mut latency = Target::at_most(
            &format!("start → FULFILLED p99 at {target_rate}/s offered"),
            open.latency_us.p99 as f64 / 1000.0,
            p99_ms,
            "ms",
        );
        if rate != target_rate {
            latency.note = Some(format!("measured at {rate}/s offered: set --rate {target_rate}"));
        }
        latency
    });
    std::iter::once(throughput).chain(latency).collect()
}

/// The cost phase's figures: how many placements it costed, and where one's commands go.
fn cost_figures(cost: &cost::Cost) -> Vec<Figure> {
    let mut figures = vec![
        Figure::new(
            "cost: placements costed, start to match end",
            cost.placements as f64,
            "placements",
        ),
        Figure::new(
            "cost: function calls per placement",
            cost.redis.function_calls(),
            "calls",
        ),
        Figure::new("cost: redis-server CPU per placement", cost.redis_cpu_us, "µs"),
    ];
    figures.extend(
        cost.memory_kept
            .iter()
            .map(|(kind, bytes)| Figure::new(&format!("cost:   memory kept in {kind} per placement"), *bytes, "bytes")),
    );
    figures.extend(
        cost.redis
            .busiest(COMMANDS_LISTED)
            .into_iter()
            .map(|(name, calls)| Figure::new(&format!("cost:   {name} per placement"), calls, "calls")),
    );
    figures
}

/// The budget of one placement's whole life, each part beside what the cost phase measured.
fn cost_targets(cost: &cost::Cost) -> Vec<Target> {
    let redis = &cost.redis;
    vec![
        Target::at_most(
            "Redis commands per placement, those in functions included",
            redis.commands_run(),
            COMMANDS_TARGET,
            "commands",
        ),
        Target::at_most(
            "stream entries per placement",
            redis.calls("xadd"),
            STREAM_ENTRIES_TARGET,
            "entries",
        ),
        Target::at_most(
            "Redis time in functions per placement",
            redis.function_micros(),
            FUNCTION_TIME_TARGET_US,
            "µs",
        ),
        Target::at_most(
            "Redis memory kept per ended placement",
            redis.used_memory,
            MEMORY_KEPT_TARGET,
            "bytes",
        ),
        Target::at_most(
            "health replica CPU per placement",
            cost.replica_cpu_us,
            REPLICA_CPU_TARGET_US,
            "µs",
        ),
    ]
}

/// The minimal lifecycle's cost per placement (`minimal`), and the cost phase's as a multiple of it.
fn floor_figures(cost: &cost::Cost, least: &RedisStats) -> Vec<Figure> {
    let redis = &cost.redis;
    // Counted as the floor's is where it can be, its keys' MEMORY USAGE (a single node), else `used_memory`.
    let kept = if cost.memory_kept.is_empty() {
        redis.used_memory
    } else {
        cost.memory_kept.iter().map(|(_, bytes)| bytes).sum()
    };
    let parts: [(&str, f64, f64, &'static str); 5] = [
        (
            "Redis commands per placement, those in functions included",
            redis.commands_run(),
            least.commands_run(),
            "commands",
        ),
        (
            "function calls per placement",
            redis.function_calls(),
            least.function_calls(),
            "calls",
        ),
        (
            "stream entries per placement",
            redis.calls("xadd"),
            least.calls("xadd"),
            "entries",
        ),
        (
            "Redis time in functions per placement",
            redis.function_micros(),
            least.function_micros(),
            "µs",
        ),
        (
            "Redis memory kept per ended placement",
            kept,
            least.used_memory,
            "bytes",
        ),
    ];
    let mut figures = Vec::new();
    for (name, measured, floor, unit) in parts {
        figures.push(Figure::new(&format!("floor (minimal lifecycle): {name}"), floor, unit));
        figures.push(Figure::new(
            &format!("{name}, × the floor"),
            measured / floor.max(f64::MIN_POSITIVE),
            "×",
        ));
    }
    figures
}

/// Sets the fleets, queues, services and processes up, measures both loads, the claim and the floors.
pub async fn run(stack: &Stack, args: &Args) -> Result<Findings, Failure> {
    let (servers, concurrency) = (args.servers, args.concurrency);
    let store = &stack.store;
    for n in 0..FLEETS {
        fleet::create_in(store, &fleet_id(n), &fleet::LOCATIONS, fleet::QUIET).await;
    }
    let replica = Replica::start("berth-health", store.config(), &[]).await?;
    let session_service = stack.session(&SessionArgs::default()).await;
    let placement = stack.placement().await;
    let mut queues = QueueServiceClient::new(stack.channels(&placement, Role::Operator).await?.remove(0));
    for n in 0..QUEUES {
        queues.create_queue(create_queue(n)).await?;
    }
    let channels = stack.channels(&placement, Role::Client).await?;
    let matchmakers = Arc::new(Matchmakers {
        clients: Rotation::new(channels.iter().cloned().map(PlacementServiceClient::new)),
        players: args.players,
    });
    let ledger = Arc::new(Ledger::new(concurrency));

    let sdk_connections = sdk_stream::connections(servers, 1);
    let clients = sdk_stream::connect(&replica.endpoint(), sdk_connections).await?;
    let hosts = Arc::new(Hosts::new(servers, concurrency, ledger.clone()));
    eprintln!("attaching {servers} SDK processes over {sdk_connections} connections, {concurrency} at a time");
    let mut processes = JoinSet::new();
    for index in 0..servers {
        let (fleet_id, location) = hosts::fleet_and_location(index);
        let client = clients[(index % clients.len() as u64) as usize].clone();
        processes.spawn(hosts::game_server(index, fleet_id, location, client, hosts.clone()));
    }
    let attach = hosts.attaching.done("attach (SDK stream)").await;
    let resumed = Arc::new(AtomicU64::new(0));
    let mut watches = watches(&matchmakers, &ledger, &resumed).await?;
    let redis = procfs::children("redis-server");
    let replica_pid = replica.pid();
    let cpu = || CpuTimes::read(Some(replica_pid), &redis);
    let cost = cost::lifecycle(&matchmakers, &ledger, &hosts, store, servers.min(COST_PLACEMENTS), cpu).await?;

    let mut failed_checks = Vec::new();
    // Before the placements, whose open loop may leave a backlog the workers are still placing when it ends.
    fleet::create(store, CLAIM_FLEET, fleet::QUIET).await;
    let filled = floors::register_all(store, CLAIM_FLEET, "set-up: register", servers, concurrency).await;
    if !filled.errors.is_empty() {
        failed_checks.push(format!("registering the claim fleet failed: {:?}", filled.errors));
    }
    let claim = claim::claims(&channels, CLAIM_FLEET, servers, concurrency).await;
    let noop = floors::noop_grpc(&channels, servers, concurrency).await;
    let memory_before = used_memory(store).await?;
    let window = closed_loop(&matchmakers, &ledger.closed, args, cpu).await?;
    let stranded = ledger.closed.drain(DRAIN, Err(Code::DeadlineExceeded)).await;
    if stranded > 0 {
        failed_checks.push(format!(
            "{stranded} placements of the closed loop had no outcome {DRAIN:?} after it stopped"
        ));
    }
    let (open, behind) = open_loop(&matchmakers, &ledger.open, args).await;
    let memory_after = used_memory(store).await?;
    let (fulfilled, retried) = ledger.fulfilled();

    // Everything stops before the floors, so that they have Redis to themselves: watches first, so that none
    // breaks for the placement service going; processes before their replica, so that no stream breaks under one.
    watches.abort_all();
    while let Some(ended) = watches.join_next().await {
        if let Ok(why) = ended {
            failed_checks.push(why);
        }
    }
    processes.shutdown().await;
    failed_checks.extend(hosts.failures());
    let activated = hosts.activated();
    drop((clients, channels, matchmakers));
    placement.shutdown().await;
    session_service.shutdown().await;
    drop(replica);
    end_the_backlogs_sessions(store).await?;

    let raw_cpu_before = CpuTimes::read(None, &redis)?;
    let raw = floor::raw_placements(store, servers, concurrency, args.players).await?;
    let raw_cpu_after = CpuTimes::read(None, &redis)?;
    let steps = floor::by_step(store, args.players).await?;
    let least = minimal::lifecycles(store, minimal::CHAINS, args.players).await?;
    let least_steps = minimal::by_step(store, args.players).await?;
    let [_, raw_claim] = floors::raw_scripts(store, servers, concurrency).await;

    let mut figures = vec![
        Figure::new("SDK processes", servers as f64, "processes"),
        Figure::new("SDK stream connections", f64::from(sdk_connections), "connections"),
        Figure::new("match length", hosts::MATCH_LENGTH.as_secs_f64() * 1000.0, "ms"),
        Figure::new("players per placement", args.players as f64, "players"),
        Figure::new("placements fulfilled, both loops", fulfilled as f64, "placements"),
        Figure::new("  of which after more than one attempt", retried as f64, "placements"),
        Figure::new("game sessions activated by the processes", activated as f64, "sessions"),
        Figure::new(
            "placement watches resumed after breaking",
            resumed.load(Ordering::Relaxed) as f64,
            "resumes",
        ),
        Figure::new(
            "open loop: latest start behind its schedule",
            behind.as_secs_f64() * 1000.0,
            "ms",
        ),
        Figure::new(
            "Redis memory per placement, kept for the retention",
            (memory_after as f64 - memory_before as f64) / fulfilled.max(1) as f64,
            "bytes",
        ),
        Figure::new(
            "raw placement scripts, CPU per placement: redis",
            (raw_cpu_after.redis - raw_cpu_before.redis) * 1e6 / raw.calls.max(1) as f64,
            "µs",
        ),
    ];
    let closed = window.line;
    let used = Used {
        before: &window.cpu_before,
        after: &window.cpu_after,
        window: window.length,
        ops: closed.calls,
        op: "placement",
    };
    figures.extend(used.figures("the closed loop", "this process (services, matchmakers, SDK processes)"));
    figures.extend([
        Figure::new(
            "for comparison: GameLift placements per account",
            GAMELIFT_PLACEMENTS_PER_SECOND,
            "per second",
        ),
        Figure::new("for comparison: Agones allocation batching", AGONES_BATCH_MS, "ms"),
        Figure::new(
            "for comparison: Agones allocation, as users report it",
            AGONES_ALLOCATION_MS,
            "ms",
        ),
    ]);
    figures.extend(cost_figures(&cost));
    for (chain, steps) in [("raw chain", &steps), ("floor chain", &least_steps)] {
        for (step, cost) in steps {
            let name = format!("{chain}: {step} ({:.0} function calls)", cost.function_calls);
            figures.push(Figure::new(&name, cost.commands, "commands"));
            figures.push(Figure::new(
                &format!("{name}, time in functions"),
                cost.function_micros,
                "µs",
            ));
        }
    }
    figures.extend(floor_figures(&cost, &least));
    let mut targets = targets(&closed, &open, args.rate);
    targets.extend(cost_targets(&cost));
    let ratios = vec![
        Ratio::of(&closed, &noop),
        Ratio::of(&closed, &raw),
        Ratio::of(&claim, &noop),
        Ratio::of(&claim, &raw_claim),
    ];
    let stages = stage_lines(&ledger.open, &open);
    let mut lines = vec![attach, closed, open];
    lines.extend(stages);
    lines.extend([claim, noop, raw, raw_claim]);
    Ok(Findings {
        lines,
        ratios,
        figures,
        targets,
        failed_checks,
    })
}
