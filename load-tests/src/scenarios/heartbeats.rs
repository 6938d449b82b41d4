//! The SDK stream under load, as one health replica carries it. `--servers` game-server processes each hold their
//! stream (spoken by hand, as the health service's stream tests do, so that the bench measures the protocol and
//! not an SDK): they register, send ready, then send a heartbeat every `--heartbeat-ms` and wait for its ack.
//!
//! The replica is the real `berth-health` binary in a process of its own (see `replica`), so that its memory is
//! read apart from the generator's. Measured:
//! - **attach**: opening each stream through to the answer to ready, `--concurrency` at a time;
//! - **heartbeat**: acks per second over a window of `--seconds` once every server is heartbeating, and the ack
//!   latency each process sees;
//! - the replica's resident memory per connected server, and the CPU the generator, the replica and Redis use;
//! - detection: `--dead` servers go silent at the end (streams dropped, no ProcessEnding), and the bench times each
//!   one from its last acked heartbeat to its SERVER_PROCESS_CRASHED event.
//!
//! The targets (at least 100,000 heartbeats/s into one replica, at most 16 KiB of service memory per
//! server, a dead server declared lost within period × threshold + 1 s) are reported met or missed, never failed
//! on. The floors are the same Redis scripts straight on the store, once the replica is gone: attach and ready per
//! server, and heartbeats in batches as the replica's writer sends them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_proto::health::v1::sdk_service_client::SdkServiceClient;
use berth_store::Store;
use berth_store::endings::{self, Beaten};
use berth_store::processes::{self as store, Attach, Attached, Heartbeat, ProcessRef, Timings};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::args::Args;
use crate::driver::{self, CALL_DEADLINE, Outcome};
use crate::fleet::LOCATION;
use crate::procfs::{CpuTimes, Used};
use crate::replica::Replica;
use crate::report::{Figure, Findings, Line, Ratio, Shards, Tally, Target};
use crate::sdk_stream::{self, Attaching};
use crate::stack::Stack;
use crate::{Failure, fleet, procfs};

/// The fleet the servers join through the replica.
const FLEET: &str = "bench";
/// The fleet the floors fill straight through the store.
const RAW_FLEET: &str = "bench-raw-sdk";
/// The replica the floors' processes are said to be held by; none holds them.
const RAW_REPLICA: &str = "bench-raw";

/// Missed heartbeats before a server is lost: the service's default, which the bound is stated with.
const THRESHOLD: u32 = 3;
/// How often the replica's monitor sweeps deadlines (the service's default).
const SWEEP_MS: u64 = 250;
/// Extra time for a first heartbeat (the service's default); each server beats within one period of ready.
const INITIAL_DELAY_MS: u64 = 5_000;
/// The service's default for what the floors' lost processes keep, so that the scripts do the replica's work.
const RETENTION_MS: u64 = 3_600_000;
/// The detection bound is the health window plus this.
const DETECTION_MARGIN: Duration = Duration::from_secs(1);

/// Heartbeats per script call in the floor: the most the replica's writer puts in one call.
const BATCH: u64 = endings::HEARTBEATS_PER_CALL as u64;
/// Script calls the floor keeps in flight: one per Redis connection of the replica (BERTH_REDIS_CONNECTIONS).
const RAW_IN_FLIGHT: u16 = 4;

/// The event a silent server is declared lost with.
const LOST: &str = "SERVER_PROCESS_CRASHED";
/// How often the fleet's events are read while waiting for the silenced servers to be declared lost. Detection is
/// timed when an event is seen, so this is the most the figures overstate it by (plus one read).
const POLL: Duration = Duration::from_millis(20);
/// Events read per poll beyond the silenced servers' own, in case others are declared lost meanwhile.
const EVENT_SLACK: u32 = 1_000;
/// How long past the bound the bench waits for a silenced server to be declared lost before giving up on it.
const DETECTION_PATIENCE: Duration = Duration::from_secs(10);

const HEARTBEATS_TARGET: f64 = 100_000.0;
const MEMORY_TARGET_KIB: f64 = 16.0;

/// What the stream tasks share with the run: their settings, the attaches and the tallies.
struct Shared {
    servers: u64,
    period: Duration,
    attaching: Attaching,
    /// Whether the window is open: heartbeats answered now are the measured line.
    measuring: AtomicBool,
    measured: Shards,
    /// Heartbeats that failed outside the window: none should, and a failure is a failure whenever it happens.
    failed_outside: Mutex<Tally>,
}

impl Shared {
    fn record_heartbeat(&self, server: u64, latency: Duration, outcome: Outcome) {
        if self.measuring.load(Ordering::Relaxed) {
            self.measured.record(server, latency, outcome);
        } else if outcome.is_err() {
            self.failed_outside.lock().expect("tally lock").record(latency, outcome);
        }
    }
}

/// One game-server process: attaches, then heartbeats until its task is aborted, its stream breaks, or, when it
/// has a `silence`, that says so (after the answer to any heartbeat in flight). Answers its index and, when it
/// was silenced, when its last heartbeat was acked; a server that failed before has nothing to time.
async fn game_server(
    index: u64,
    client: SdkServiceClient<Channel>,
    shared: Arc<Shared>,
    mut silence: Option<watch::Receiver<bool>>,
) -> (u64, Option<Instant>) {
    let opened = shared.attaching.open(client, FLEET, LOCATION, index).await;
    let Ok(mut conversation) = opened else {
        return (index, None);
    };
    let start = tokio::time::Instant::now() + sdk_stream::phase(index, shared.period);
    let mut tick = tokio::time::interval_at(start, shared.period);
    // A late heartbeat is followed by the next one a period later, not by a burst to catch up, as an SDK does.
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_ack = None;
    loop {
        match silence.as_mut() {
            Some(silence) => tokio::select! {
                _ = tick.tick() => {}
                _ = silence.changed() => return (index, last_ack),
            },
            None => {
                tick.tick().await;
            }
        }
        let sent = Instant::now();
        let outcome = tokio::time::timeout(CALL_DEADLINE, conversation.heartbeat())
            .await
            .unwrap_or(Err(Code::DeadlineExceeded));
        shared.record_heartbeat(index, sent.elapsed(), outcome);
        // A refused heartbeat is counted and followed by the next, as the SDK goes on; a broken stream ends it.
        if conversation.broken() {
            return (index, None);
        }
        if outcome.is_ok() {
            last_ack = Some(Instant::now());
        }
    }
}

/// The replica's settings (`BERTH_*`), as a deployment would give them.
pub(super) fn settings() -> Vec<(&'static str, String)> {
    vec![
        ("BERTH_HEALTH_INITIAL_DELAY_MS", INITIAL_DELAY_MS.to_string()),
        ("BERTH_MONITOR_SWEEP_MS", SWEEP_MS.to_string()),
    ]
}

/// The monitor's timings as the replica derives them from its settings, for the floors.
const TIMINGS: Timings = Timings {
    initial_delay_ms: INITIAL_DELAY_MS,
    retention_ms: RETENTION_MS,
};

/// The simulated servers' tasks: those that heartbeat to the end, and those to silence (with their switch).
struct Fleet {
    live: JoinSet<(u64, Option<Instant>)>,
    doomed: JoinSet<(u64, Option<Instant>)>,
    switch: watch::Sender<bool>,
}

impl Fleet {
    /// Spawns `shared.servers` servers over `clients` in turn; `dead` of them, every `servers / dead`th so that
    /// they are spread over the connections and the period, will be silenced.
    fn spawn(clients: &[SdkServiceClient<Channel>], shared: &Arc<Shared>, dead: u64) -> Fleet {
        let servers = shared.servers;
        // With `dead` at 0 the stride is never used: no server may be doomed.
        let stride = servers.checked_div(dead).unwrap_or(u64::MAX);
        let (switch, silenced) = watch::channel(false);
        let mut fleet = Fleet {
            live: JoinSet::new(),
            doomed: JoinSet::new(),
            switch,
        };
        for index in 0..servers {
            let client = clients[(index % clients.len() as u64) as usize].clone();
            if index % stride == 0 && (fleet.doomed.len() as u64) < dead {
                let server = game_server(index, client, shared.clone(), Some(silenced.clone()));
                fleet.doomed.spawn(server);
            } else {
                fleet.live.spawn(game_server(index, client, shared.clone(), None));
            }
        }
        fleet
    }

    /// Silences the doomed servers; answers, by id, when the last heartbeat of each one still heartbeating was
    /// acked.
    async fn silence(&mut self) -> Result<HashMap<String, Instant>, Failure> {
        // The doomed tasks hold receivers until they have answered, so nobody can miss this.
        let _ = self.switch.send(true);
        let mut last_acks = HashMap::new();
        while let Some(joined) = self.doomed.join_next().await {
            if let (index, Some(last_ack)) = joined? {
                last_acks.insert(fleet::server(index).id, last_ack);
            }
        }
        Ok(last_acks)
    }
}

/// What the replica and Redis used while the window was open.
struct Usage {
    rss_before_kib: u64,
    rss_after_kib: u64,
    cpu_before: CpuTimes,
    cpu_after: CpuTimes,
}

impl Usage {
    fn per_server_kib(&self, servers: u64) -> f64 {
        self.rss_after_kib.saturating_sub(self.rss_before_kib) as f64 / servers as f64
    }

    fn figures(&self, servers: u64, window: Duration, heartbeats: u64) -> Vec<Figure> {
        let mut figures = vec![
            Figure::new("replica memory before attaching", self.rss_before_kib as f64, "KiB"),
            Figure::new(
                "replica memory, every server heartbeating",
                self.rss_after_kib as f64,
                "KiB",
            ),
            Figure::new(
                "replica memory per connected server",
                self.per_server_kib(servers),
                "KiB",
            ),
        ];
        let used = Used {
            before: &self.cpu_before,
            after: &self.cpu_after,
            window,
            ops: heartbeats,
            op: "heartbeat",
        };
        figures.extend(used.figures("the window", "load generator"));
        figures
    }
}

/// Connects the servers, measures them, silences some and times their detection, then measures the floors.
pub async fn run(stack: &Stack, args: &Args) -> Result<Findings, Failure> {
    let servers = args.servers;
    let period = Duration::from_millis(args.heartbeat_ms);
    let offered = servers as f64 / period.as_secs_f64();
    for fleet_id in [FLEET, RAW_FLEET] {
        fleet::create(&stack.store, fleet_id, (args.heartbeat_ms as u32, THRESHOLD)).await;
    }
    let replica = Replica::start("berth-health", stack.store.config(), &settings()).await?;
    let rss_before_kib = procfs::rss_kib(replica.pid())?;
    let clients = sdk_stream::connect(&replica.endpoint(), args.connections).await?;
    let shared = Arc::new(Shared {
        servers,
        period,
        attaching: Attaching::new(servers, args.concurrency),
        measuring: AtomicBool::new(false),
        measured: Shards::default(),
        failed_outside: Mutex::new(Tally::default()),
    });

    eprintln!(
        "attaching {servers} servers over {} connections, {} at a time",
        args.connections, args.concurrency
    );
    let dead = args.dead.min(servers);
    let mut fleet = Fleet::spawn(&clients, &shared, dead);
    let attach = shared.attaching.done("attach").await;

    // One period more, so that every server, whatever its phase, is in its rhythm when the window opens.
    tokio::time::sleep(period).await;
    let redis = procfs::children("redis-server");
    let cpu_before = CpuTimes::read(Some(replica.pid()), &redis)?;
    eprintln!("measuring heartbeat: {} s", args.seconds);
    let window_start = Instant::now();
    shared.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    shared.measuring.store(false, Ordering::Relaxed);
    let window = window_start.elapsed();
    let usage = Usage {
        rss_before_kib,
        rss_after_kib: procfs::rss_kib(replica.pid())?,
        cpu_before,
        cpu_after: CpuTimes::read(Some(replica.pid()), &redis)?,
    };
    let heartbeat = Line::new("heartbeat", &shared.measured.merged(), window);

    eprintln!("silencing {dead} servers");
    let last_acks = fleet.silence().await?;
    let silent = last_acks.len();
    let bound = period * THRESHOLD + DETECTION_MARGIN;
    let delays = detections(&stack.store, last_acks, bound + DETECTION_PATIENCE).await?;
    let mut failed_checks = Vec::new();
    if delays.len() < silent {
        failed_checks.push(format!(
            "{} of {silent} silenced servers were not declared lost within {:?}",
            silent - delays.len(),
            bound + DETECTION_PATIENCE
        ));
    }
    // A server whose attach was refused never joined: the rest must all be alive.
    let attached = attach.calls - attach.errors.values().sum::<u64>();
    failed_checks.extend(survivors(&stack.store, attached - delays.len() as u64).await?);
    // Every stream breaks when its task is aborted; the replica goes only after, so no heartbeat fails for it.
    fleet.live.shutdown().await;
    drop(clients);
    drop(replica);
    let outside = shared.failed_outside.lock().expect("tally lock").errors();
    if !outside.is_empty() {
        failed_checks.push(format!("heartbeats outside the measured window failed: {outside:?}"));
    }

    let mut figures = vec![
        Figure::new("heartbeat period", period.as_millis() as f64, "ms"),
        Figure::new("heartbeats offered", offered, "per second"),
    ];
    figures.extend(usage.figures(servers, window, heartbeat.calls));
    let (raw_attach, raw_heartbeats, raw_cpu) = floors(&stack.store, args, heartbeat.calls, &redis).await?;
    figures.extend(raw_cpu);
    let mut targets = vec![
        heartbeats_target(&heartbeat, offered),
        Target::at_most(
            "service memory per connected server",
            usage.per_server_kib(servers),
            MEMORY_TARGET_KIB,
            "KiB",
        ),
    ];
    if dead > 0 {
        let ms = |delay: Option<&Duration>| delay.map_or(f64::INFINITY, |delay| delay.as_secs_f64() * 1000.0);
        figures.push(Figure::new(
            "silenced servers declared lost",
            delays.len() as f64,
            "servers",
        ));
        figures.push(Figure::new("detection p50", ms(delays.get(delays.len() / 2)), "ms"));
        figures.push(Figure::new("detection max", ms(delays.last()), "ms"));
        let mut target = Target::at_most(
            "dead server declared lost, period × threshold + 1 s",
            ms(delays.last()),
            bound.as_secs_f64() * 1000.0,
            "ms",
        );
        if delays.len() < silent {
            target.note = Some("not every silenced server was declared lost; the max is of those that were".into());
        }
        targets.push(target);
    }
    Ok(Findings {
        ratios: vec![Ratio::of(&heartbeat, &raw_heartbeats), Ratio::of(&attach, &raw_attach)],
        lines: vec![attach, heartbeat, raw_attach, raw_heartbeats],
        figures,
        targets,
        failed_checks,
    })
}

/// Once the silenced servers are declared lost, the others that attached must all still be alive and healthy:
/// `expected` of them. Answers what is wrong, if anything.
async fn survivors(store: &Store, expected: u64) -> Result<Vec<String>, Failure> {
    let (alive, unhealthy) = store::health_counts(store, FLEET).await?;
    let mut wrong = Vec::new();
    if alive < expected {
        let lost = expected - alive;
        let events =
            berth_store::fleets::recent_fleet_events(store, FLEET, lost as usize + EVENT_SLACK as usize).await?;
        let mut by_code: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
        for event in &events {
            *by_code.entry(event.code_name()).or_default() += 1;
        }
        wrong.push(format!(
            "{lost} servers that kept heartbeating were declared lost ({alive} alive of {expected}; the fleet's \
             latest events by code: {by_code:?})"
        ));
    }
    if unhealthy > 0 {
        wrong.push(format!(
            "{unhealthy} servers that only reported HEALTHY count as unhealthy"
        ));
    }
    Ok(wrong)
}

/// The rate target; a run that offers less than it cannot reach it, and says so.
fn heartbeats_target(heartbeat: &Line, offered: f64) -> Target {
    let mut target = Target::at_least(
        "heartbeats per second into one replica",
        heartbeat.ops_per_sec,
        HEARTBEATS_TARGET,
        "per second",
    );
    if offered < HEARTBEATS_TARGET {
        target.note = Some(format!(
            "only {offered:.0}/s offered: raise --servers or lower --heartbeat-ms"
        ));
    }
    target
}

/// Reads the fleet's events until every server in `pending` (by id, with its last ack) has been declared lost or
/// `wait` has passed. Answers, sorted, the time from each declared server's last ack to when its event was seen.
async fn detections(
    store: &Store,
    mut pending: HashMap<String, Instant>,
    wait: Duration,
) -> Result<Vec<Duration>, Failure> {
    let count = u32::try_from(pending.len())
        .unwrap_or(u32::MAX)
        .saturating_add(EVENT_SLACK);
    let deadline = Instant::now() + wait;
    let mut delays = Vec::with_capacity(pending.len());
    while !pending.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
        let events = berth_store::fleets::recent_fleet_events(store, FLEET, count as usize).await?;
        let seen = Instant::now();
        for event in events.iter().filter(|event| event.code_name() == LOST) {
            if let Some(last_ack) = pending.remove(&event.game_server_id) {
                delays.push(seen - last_ack);
            }
        }
    }
    delays.sort();
    Ok(delays)
}

/// The floors, on a Redis nothing else uses any more: attach and ready for every server, then as many heartbeats
/// as the measured line answered (at least one per server) in batches. Besides their lines, what the heartbeats
/// cost in CPU here: in Redis, and in its client (this process), which is the replica's share of the Redis work.
async fn floors(
    store: &Store,
    args: &Args,
    heartbeats: u64,
    redis: &[u32],
) -> Result<(Line, Line, Vec<Figure>), Failure> {
    let servers = args.servers;
    let timings = TIMINGS;
    let attaching = store.clone();
    let attach = driver::run("raw attach", servers, args.concurrency, move |index| {
        let store = attaching.clone();
        async move { raw_attach(&store, index, &timings).await }
    })
    .await;
    let rows: Arc<Vec<Heartbeat>> = Arc::new((0..servers).map(raw_heartbeat).collect());
    let batch = BATCH.min(servers);
    let calls = heartbeats.max(servers).div_ceil(batch);
    let beating = store.clone();
    let cpu_before = CpuTimes::read(None, redis)?;
    let heartbeat = driver::run_batches("raw heartbeats", calls, batch, RAW_IN_FLIGHT, move |call| {
        let (store, rows) = (beating.clone(), rows.clone());
        async move {
            let first = call * batch;
            let beats: Vec<Heartbeat> = (first..first + batch)
                .map(|row| rows[(row % servers) as usize].clone())
                .collect();
            // A writer that has always kept up, as the replica's is while it carries its load.
            let writer = endings::Writer {
                replica: "bench",
                kept_up: Duration::from_secs(3600),
            };
            match endings::record_heartbeats(&store, RAW_FLEET, &beats, &timings, writer).await {
                Ok((found, _)) if found.iter().all(|beaten| matches!(beaten, Beaten::Version(_))) => Ok(()),
                // A lost process takes the script's short path: the floor would no longer do the replica's work.
                Ok(_) => Err(Code::FailedPrecondition),
                Err(err) => Err(Status::from(err).code()),
            }
        }
    })
    .await;
    let cpu_after = CpuTimes::read(None, redis)?;
    let per_heartbeat = |cpu: fn(&CpuTimes) -> f64| (cpu(&cpu_after) - cpu(&cpu_before)) * 1e6 / heartbeat.calls as f64;
    let figures = vec![
        Figure::new(
            "raw heartbeats CPU per heartbeat: client",
            per_heartbeat(|cpu| cpu.generator),
            "µs",
        ),
        Figure::new(
            "raw heartbeats CPU per heartbeat: redis",
            per_heartbeat(|cpu| cpu.redis),
            "µs",
        ),
    ];
    Ok((attach, heartbeat, figures))
}

/// As long as the UUID the replica mints per registration, so that the scripts store the same bytes.
fn raw_registration(index: u64) -> String {
    format!("raw-{index:032}")
}

async fn raw_attach(store: &Store, index: u64, timings: &Timings) -> Outcome {
    let server = fleet::server(index);
    let registration_id = raw_registration(index);
    // What the replica stores of a RegisterProcess like the bench's.
    let registration = fleet::registration(&server, LOCATION, 1, 1000);
    let introduction = store::Introduction {
        registration: &registration,
        data: "",
        labels: &[],
        ports: &[],
    };
    let attach = Attach {
        fleet_id: RAW_FLEET,
        game_server_id: &server.id,
        instance_id: &server.instance,
        registration_id: &registration_id,
        resume: None,
        replica: RAW_REPLICA,
        attempt: 0,
        introduction,
    };
    match store::attach(store, &attach, timings).await {
        Ok(Attached::Registered(..)) => {}
        Ok(Attached::Exists) => return Err(Code::AlreadyExists),
        Ok(_) => return Err(Code::FailedPrecondition),
        Err(err) => return Err(Status::from(err).code()),
    }
    let process = ProcessRef {
        fleet_id: RAW_FLEET,
        game_server_id: &server.id,
        registration_id: &registration_id,
    };
    match store::ready(store, &process, None).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Code::FailedPrecondition),
        Err(err) => Err(Status::from(err).code()),
    }
}

/// The heartbeat the replica writes for each of the bench's servers: healthy, standing by, no players.
fn raw_heartbeat(index: u64) -> Heartbeat {
    Heartbeat {
        game_server_id: fleet::server(index).id.into(),
        registration_id: raw_registration(index).into(),
        attach: 1,
        healthy: true,
        game_state: "STANDING_BY",
        players: 0,
    }
}
