//! Agones' faces of Berth under load, each beside the native path it maps onto, in one run:
//! - **allocate** through Agones' allocation API (a selector naming the fleet) and **claim** through
//!   ClaimGameServer, each emptying a fleet of `--servers` registered servers with `--concurrency` callers: the
//!   allocation's rate as a fraction of the claim's (target at least 0.8), and what each call costs Redis (round
//!   trips, commands, time in scripts);
//! - `AGENTS` real `berth-agent` processes, each wrapping an idle child (`sleep`), registered with an in-process
//!   health service: their resident memory each (target at most 8 MiB), and the agent's CPU per Agones health ping
//!   and per SetLabel, beside its CPU per native heartbeat (what it spends holding the Berth SDK stream alone);
//! - **placed → Allocated**: `--rate` game sessions a second placed open loop on servers run by in-process agents
//!   (at most `WATCHERS`), each timed from its placement to its server's WatchGameServer showing it Allocated
//!   (target p99 at most 50 ms at 500/s).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_agent::Agent;
use berth_agent::record::SESSION_ID;
use berth_proto::agones::allocation::allocation_service_client::AllocationServiceClient;
use berth_proto::agones::allocation::{AllocationRequest, GameServerSelector};
use berth_proto::agones::sdk::sdk_client::SdkClient;
use berth_proto::agones::sdk::{Empty, KeyValue};
use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_runtime::auth::Role;
use berth_store::processes;
use berth_store::sessions::{Created, NewGameSession, create_game_session};
use berth_testkit::{game_server_config, token};
use tokio::task::JoinSet;
use tonic::Code;
use tonic::transport::Channel;

use crate::args::Args;
use crate::connections::Rotation;
use crate::driver::{self, outcome};
use crate::procfs;
use crate::redis_stats::RedisStats;
use crate::replica::beside_the_bench;
use crate::report::{Figure, Findings, Line, Ratio, Tally, Target};
use crate::stack::Stack;
use crate::{Failure, fleet};

const CLAIM_FLEET: &str = "bench-agones-claim";
const ALLOCATE_FLEET: &str = "bench-agones-allocate";
const AGENT_FLEET: &str = "bench-agones-agents";
const WATCH_FLEET: &str = "bench-agones-watch";
/// berth-agent processes whose memory and CPU are read.
const AGENTS: u64 = 20;
/// Most in-process agents the placed → Allocated loop places on (each takes one session).
const WATCHERS: u64 = 2_000;
/// Pings and SetLabel calls sent to one agent.
const PINGS: u64 = 200_000;
const LABELS: u64 = 200;
/// How long the agents are left idle, heartbeating, to cost a native heartbeat.
const IDLE: Duration = Duration::from_secs(10);
/// The fleets' heartbeat period and threshold: the briskest a fleet takes, so that the idle window holds the most
/// heartbeats.
const HEARTBEAT: (u32, u32) = (1000, 3);
/// The targets, and the rate its latency target is stated at.
const ALLOCATE_SHARE: f64 = 0.8;
const RSS_TARGET_KIB: f64 = 8.0 * 1024.0;
const P99_TARGET_MS: f64 = 50.0;
const TARGET_RATE: u64 = 500;

fn allocation(fleet_id: &str) -> AllocationRequest {
    AllocationRequest {
        game_server_selectors: vec![GameServerSelector {
            match_labels: HashMap::from([("agones.dev/fleet".to_owned(), fleet_id.to_owned())]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Runs the three parts.
pub async fn run(stack: &Stack, args: &Args) -> Result<Findings, Failure> {
    let services = stack.in_process().await;
    for fleet_id in [CLAIM_FLEET, ALLOCATE_FLEET, AGENT_FLEET, WATCH_FLEET] {
        fleet::create(&stack.store, fleet_id, HEARTBEAT).await;
    }
    let mut findings = Findings::default();

    // Allocate beside claim.
    let operator = stack.channels(&services.health, Role::Operator).await?;
    let (servers, concurrency) = (args.servers, args.concurrency);
    for fleet_id in [CLAIM_FLEET, ALLOCATE_FLEET] {
        let registry = Rotation::new(operator.iter().cloned().map(GameServerServiceClient::new));
        driver::run(&format!("register in {fleet_id}"), servers, concurrency, move |index| {
            let mut client = registry.next();
            async move {
                outcome(
                    client
                        .register_game_server(super::claim::registration(fleet_id, index))
                        .await,
                )
            }
        })
        .await;
    }
    let placement = stack.channels(&services.placement, Role::Client).await?;
    let before_claims = RedisStats::read(&stack.store).await?;
    let claim = super::claim::claims(&placement, CLAIM_FLEET, servers, concurrency).await;
    let before_allocations = RedisStats::read(&stack.store).await?;
    let allocators = Rotation::new(placement.iter().cloned().map(AllocationServiceClient::new));
    let allocate = driver::run("allocate (Agones)", servers, concurrency, move |_| {
        let mut client = allocators.next();
        async move { outcome(client.allocate(allocation(ALLOCATE_FLEET)).await) }
    })
    .await;
    let after = RedisStats::read(&stack.store).await?;
    let nothing_else = RedisStats::default();
    for (name, cost) in [
        ("claim", before_allocations.per(&before_claims, &nothing_else, servers)),
        ("allocate", after.per(&before_allocations, &nothing_else, servers)),
    ] {
        findings.figures.extend([
            Figure::new(
                &format!("{name}: Redis round trips per call"),
                cost.function_calls(),
                "calls",
            ),
            Figure::new(
                &format!("{name}: Redis commands per call"),
                cost.commands_run(),
                "commands",
            ),
            Figure::new(
                &format!("{name}: Redis µs in scripts per call"),
                cost.function_micros(),
                "µs",
            ),
        ]);
    }
    let mut after_last = AllocationServiceClient::new(placement[0].clone());
    if !matches!(after_last.allocate(allocation(ALLOCATE_FLEET)).await, Err(status) if status.code() == Code::ResourceExhausted)
    {
        findings
            .failed_checks
            .push("the allocation after the last server was not RESOURCE_EXHAUSTED".into());
    }
    findings.targets.push(Target::at_least(
        "allocate rate / claim rate",
        allocate.ops_per_sec / claim.ops_per_sec,
        ALLOCATE_SHARE,
        "ratio",
    ));
    findings.ratios.push(Ratio::of(&allocate, &claim));
    findings.lines.extend([claim, allocate]);

    // berth-agent processes.
    let agents = agent_processes(&services.health.endpoint()).await?;
    agent_costs(&agents, &mut findings).await?;
    drop(agents);

    // Placed → Allocated.
    let line = placed_to_allocated(stack, &services.health.endpoint(), args).await?;
    let mut latency = Target::at_most(
        "placed → WatchGameServer Allocated p99 at 500/s",
        line.latency_us.p99 as f64 / 1000.0,
        P99_TARGET_MS,
        "ms",
    );
    if args.rate != TARGET_RATE {
        latency.note = Some(format!("measured at {}/s offered: set --rate {TARGET_RATE}", args.rate));
    }
    findings.targets.push(latency);
    findings.lines.push(line);
    Ok(findings)
}

/// One berth-agent process and the port of its Agones SDK.
struct AgentProcess {
    child: tokio::process::Child,
    port: u16,
}

/// Starts AGENTS berth-agent processes wrapping `sleep`, and waits until each answers GetGameServer.
async fn agent_processes(health: &str) -> Result<Vec<AgentProcess>, Failure> {
    let binary = beside_the_bench("berth-agent")?;
    let mut agents = Vec::new();
    for index in 0..AGENTS {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let http = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let id = format!("agent-{index}");
        let child = tokio::process::Command::new(&binary)
            .args(["--", "sleep", "3600"])
            .env("BERTH_SDK_ENDPOINT", health)
            .env("BERTH_SDK_TOKEN", token(Role::GameServer, Some((AGENT_FLEET, &id))))
            .env("BERTH_FLEET_ID", AGENT_FLEET)
            .env("BERTH_GAME_SERVER_ID", &id)
            .env("BERTH_INSTANCE_ID", format!("i-{id}"))
            .env("BERTH_LOCATION", fleet::LOCATION)
            .env("BERTH_SDK_IP_ADDRESS", "10.0.0.7")
            .env("BERTH_SDK_PORT", "7777")
            .env("AGONES_SDK_GRPC_PORT", port.to_string())
            .env("AGONES_SDK_HTTP_PORT", http.to_string())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        agents.push(AgentProcess { child, port });
    }
    for agent in &agents {
        let mut sdk = sdk_client(agent.port).await?;
        sdk.ready(Empty {}).await?;
    }
    Ok(agents)
}

async fn sdk_client(port: u16) -> Result<SdkClient<Channel>, Failure> {
    let started = Instant::now();
    loop {
        if let Ok(channel) = Channel::from_shared(format!("http://127.0.0.1:{port}"))?
            .connect()
            .await
        {
            let mut client = SdkClient::new(channel);
            if client.get_game_server(Empty {}).await.is_ok() {
                return Ok(client);
            }
        }
        if started.elapsed() > Duration::from_secs(15) {
            return Err(format!("berth-agent on port {port} did not answer within 15 s").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Memory of each agent, and one agent's CPU per ping, per SetLabel and per native heartbeat.
async fn agent_costs(agents: &[AgentProcess], findings: &mut Findings) -> Result<(), Failure> {
    let pids: Vec<u32> = agents.iter().filter_map(|agent| agent.child.id()).collect();
    let cpu = |pids: &[u32]| -> Result<f64, Failure> {
        pids.iter()
            .map(|pid| procfs::cpu_seconds(*pid))
            .sum::<Result<f64, Failure>>()
    };
    let idle_before = cpu(&pids)?;
    tokio::time::sleep(IDLE).await;
    let heartbeats = pids.len() as f64 * IDLE.as_secs_f64() * 1000.0 / f64::from(HEARTBEAT.0);
    let per_heartbeat = (cpu(&pids)? - idle_before) / heartbeats * 1e6;

    let rss: Vec<u64> = pids.iter().map(|pid| procfs::rss_kib(*pid)).collect::<Result<_, _>>()?;
    let most = rss.iter().copied().max().unwrap_or_default() as f64;
    let mean = rss.iter().sum::<u64>() as f64 / rss.len().max(1) as f64;

    let (pid, mut sdk) = (pids[0], sdk_client(agents[0].port).await?);
    // SetLabel first: once pings begin they must go on, or the agent reports the server UNHEALTHY, as on Agones.
    let before = procfs::cpu_seconds(pid)?;
    for index in 0..LABELS {
        let label = KeyValue {
            key: "round".into(),
            value: index.to_string(),
        };
        sdk.set_label(label).await?;
    }
    let per_label = (procfs::cpu_seconds(pid)? - before) / LABELS as f64 * 1e6;

    let before = procfs::cpu_seconds(pid)?;
    let (pings, sent) = tokio::sync::mpsc::channel(1024);
    let stream = tokio_stream::wrappers::ReceiverStream::new(sent);
    let health = tokio::spawn({
        let mut sdk = sdk.clone();
        async move { sdk.health(stream).await }
    });
    for _ in 0..PINGS {
        pings.send(Empty {}).await?;
    }
    drop(pings);
    health.await??;
    let per_ping = (procfs::cpu_seconds(pid)? - before) / PINGS as f64 * 1e6;
    findings.figures.extend([
        Figure::new("berth-agent resident memory, mean", mean, "KiB"),
        Figure::new("berth-agent CPU per Agones health ping", per_ping, "µs"),
        Figure::new("berth-agent CPU per SetLabel", per_label, "µs"),
        Figure::new("berth-agent CPU per native heartbeat (idle)", per_heartbeat, "µs"),
    ]);
    findings.targets.push(Target::at_most(
        "berth-agent resident memory, most",
        most,
        RSS_TARGET_KIB,
        "KiB",
    ));
    Ok(())
}

/// Places game sessions open loop on servers run by in-process agents, each timed to its server's watch showing it
/// Allocated.
async fn placed_to_allocated(stack: &Stack, health: &str, args: &Args) -> Result<Line, Failure> {
    let count = args.servers.min(WATCHERS);
    let any = "127.0.0.1:0".parse()?;
    // When each game session was placed, by its id, and the tally of how long its server's watch took to see it.
    let placed: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let tally: Arc<Mutex<Tally>> = Arc::default();
    let (seen, mut all_seen) = tokio::sync::mpsc::channel(count as usize);
    let mut agents = Vec::new();
    eprintln!("starting {count} in-process agents");
    for index in 0..count {
        let id = format!("watched-{index}");
        let config = game_server_config(health, WATCH_FLEET, &id, fleet::LOCATION, 1, 0);
        let agent = Agent::start(config, Default::default(), any, any).await?;
        let mut sdk = sdk_client(agent.grpc_address().port()).await?;
        sdk.ready(Empty {}).await?;
        let mut watch = sdk.watch_game_server(Empty {}).await?.into_inner();
        let (placed, tally, seen) = (placed.clone(), tally.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok(Some(server)) = watch.message().await {
                let allocated = server.status.as_ref().is_some_and(|status| status.state == "Allocated");
                let session = server
                    .object_meta
                    .as_ref()
                    .and_then(|meta| meta.annotations.get(SESSION_ID).cloned());
                if let (true, Some(session)) = (allocated, session) {
                    let at = placed.lock().ok().and_then(|placed| placed.get(&session).copied());
                    if let (Some(at), Ok(mut tally)) = (at, tally.lock()) {
                        tally.record(at.elapsed(), Ok(()));
                    }
                    let _ = seen.send(()).await;
                    return;
                }
            }
        });
        agents.push(agent);
    }
    eprintln!(
        "measuring placed → Allocated, open loop: {}/s for {count} sessions",
        args.rate
    );
    let spacing = Duration::from_secs(1).div_f64(args.rate as f64);
    let first = Instant::now();
    let mut placing = JoinSet::new();
    for index in 0..count {
        let due = first + spacing.mul_f64(index as f64);
        tokio::time::sleep_until(due.into()).await;
        let (store, placed) = (stack.store.clone(), placed.clone());
        placing.spawn(async move {
            let id = berth_domain::game_session::new_game_session_id(WATCH_FLEET);
            let new = NewGameSession {
                location: fleet::LOCATION,
                ..NewGameSession::new(&id, WATCH_FLEET, 4)
            };
            // Recorded before the placement, which its server may hear of before the placer does.
            if let Ok(mut placed) = placed.lock() {
                placed.insert(id.clone(), Instant::now());
            }
            // Announced to the server's health replica as CreateGameSession does, which pushes it to the process.
            match create_game_session(&store, &new, &berth_testkit::SESSION_TIMINGS).await {
                Ok(Created::Created(record, routing)) => {
                    processes::announce(&store, &routing, WATCH_FLEET, &record.game_server_id, None).await;
                    false
                }
                _ => true,
            }
        });
    }
    let mut unplaced = 0;
    while let Some(failed) = placing.join_next().await {
        unplaced += u64::from(failed.unwrap_or(true));
    }
    let mut heard = 0;
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while heard < count - unplaced && all_seen.recv().await.is_some() {
            heard += 1;
        }
    })
    .await;
    let mut tally = tally
        .lock()
        .map(|mut tally| std::mem::take(&mut *tally))
        .unwrap_or_default();
    // A session placed that its server's watch never showed within the wait, or one not placed at all.
    let unheard = count - heard - unplaced;
    if unheard > 0 {
        tally.record_n(Duration::from_secs(10), unheard, Err(Code::DeadlineExceeded));
    }
    if unplaced > 0 {
        tally.record_n(Duration::ZERO, unplaced, Err(Code::ResourceExhausted));
    }
    Ok(Line::new(
        &format!("placed → Allocated, {}/s offered", args.rate),
        &tally,
        first.elapsed(),
    ))
}
