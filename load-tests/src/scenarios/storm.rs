//! A re-attach storm. `--servers` game-server processes hold their streams on one health replica (the real
//! `berth-health` in a process of its own) and heartbeat every `--heartbeat-ms`; that replica is SIGKILLed, and each
//! process resumes its registration on a second replica after the SDK's own jittered backoff, as one behind a load
//! balancer would. Measured: the time from the kill until each process is attached again (all of them, and the
//! spread), the surviving replica's peak CPU and resident memory through the storm, and, after a whole health
//! window more, that no process was declared lost or counts as unhealthy because its replica died. Targets: every
//! process back within 5 s, none lost. The same then for a placement replica holding 1,000 watches (`watches`).

mod watches;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use berth_proto::health::v1::sdk_service_client::SdkServiceClient;
use berth_sdk::game_server::resume_backoff;
use berth_store::Store;
use berth_store::processes as store;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;
use tonic::Code;
use tonic::transport::Channel;

use crate::args::Args;
use crate::driver::CALL_DEADLINE;
use crate::fleet::LOCATION;
use crate::replica::Replica;
use crate::report::{Figure, Findings, Line, Shards, Target};
use crate::sdk_stream::{self, Attaching, Conversation};
use crate::stack::Stack;
use crate::{Failure, fleet, procfs};

/// The fleet the servers join.
const FLEET: &str = "storm";
/// Missed heartbeats before a server is lost: the service's default.
const THRESHOLD: u32 = 3;
/// How often the surviving replica's CPU and memory are read through the storm.
const SAMPLE: Duration = Duration::from_millis(100);
/// How long the bench waits for every server to be back before it reports the stragglers.
const PATIENCE: Duration = Duration::from_secs(60);
const BACK_TARGET_S: f64 = 5.0;

/// What the servers share with the run.
struct Storm {
    period: Duration,
    attaching: Attaching,
    /// When the first replica was killed: a stream that breaks before has nothing to resume from.
    killed_at: OnceLock<Instant>,
    /// Each resume, timed from the kill.
    back: Shards,
    resumed: AtomicU64,
    progress: Notify,
    /// What went wrong, by server: a stream that broke before the kill, a resume refused for good or made anew.
    failures: Mutex<Vec<String>>,
}

impl Storm {
    fn fail(&self, index: u64, what: String) {
        self.failures
            .lock()
            .expect("failures lock")
            .push(format!("server {index}: {what}"));
    }

    fn resumed(&self, index: u64, killed_at: Instant) {
        self.back.record(index, killed_at.elapsed(), Ok(()));
        self.resumed.fetch_add(1, Ordering::AcqRel);
        self.progress.notify_waiters();
    }
}

/// Waits until `count()` reaches `wanted`, woken by `progress` as it grows, or until the patience runs out; whether
/// it did.
async fn until(progress: &Notify, wanted: u64, count: impl Fn() -> u64) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        // Created before the count is read, so that a wake between the two is not missed.
        let woken = progress.notified();
        if count() >= wanted {
            return true;
        }
        if tokio::time::timeout_at(deadline, woken).await.is_err() {
            return count() >= wanted;
        }
    }
}

/// Heartbeats every period, the first after `first_in`, until the stream breaks (true) or the run stops (false). A
/// break is noticed as it happens, between heartbeats too, as the SDK notices it.
async fn heartbeat(
    conversation: &mut Conversation,
    first_in: Duration,
    period: Duration,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + first_in, period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return false,
            heard = conversation.hear() => {
                if heard.is_err() {
                    return true;
                }
                continue;
            }
        }
        // A refused or unanswered heartbeat is followed by the next, as the SDK goes on; a broken stream is not.
        let _ = tokio::time::timeout(CALL_DEADLINE, conversation.heartbeat()).await;
        if conversation.broken() {
            return true;
        }
    }
}

/// One process: attaches to the first replica and heartbeats; when its stream breaks, resumes its registration on
/// the second, retrying on transient refusals with the SDK's backoff, and heartbeats there until the run stops.
async fn game_server(
    index: u64,
    first: SdkServiceClient<Channel>,
    second: SdkServiceClient<Channel>,
    storm: Arc<Storm>,
    mut stop: watch::Receiver<bool>,
) {
    let Ok(mut conversation) = storm.attaching.open(first, FLEET, LOCATION, index).await else {
        return;
    };
    let registration = conversation.registration_id().to_owned();
    let phase = sdk_stream::phase(index, storm.period);
    if !heartbeat(&mut conversation, phase, storm.period, &mut stop).await {
        return;
    }
    let Some(killed_at) = storm.killed_at.get().copied() else {
        return storm.fail(index, "its stream broke before the replica was killed".into());
    };
    drop(conversation);
    let mut attempt = 0;
    loop {
        tokio::time::sleep(resume_backoff(attempt, storm.period)).await;
        attempt += 1;
        // Its first stream was try 1.
        let resumed = tokio::time::timeout(
            CALL_DEADLINE,
            Conversation::resume(second.clone(), FLEET, LOCATION, index, &registration, attempt + 1),
        )
        .await
        .unwrap_or(Err(Code::DeadlineExceeded));
        match resumed {
            Ok(resumed) => {
                storm.resumed(index, killed_at);
                conversation = resumed;
                break;
            }
            // What the SDK retries on.
            Err(
                Code::Unavailable
                | Code::Unknown
                | Code::Cancelled
                | Code::Internal
                | Code::DeadlineExceeded
                | Code::ResourceExhausted,
            ) => {}
            Err(code) => return storm.fail(index, format!("its resume was refused with {code:?}")),
        }
    }
    if heartbeat(&mut conversation, Duration::ZERO, storm.period, &mut stop).await {
        storm.fail(index, "its resumed stream broke".into());
    }
}

/// The most CPU (cores) and resident memory (KiB) replica `pid` reached, read every [`SAMPLE`] until `done`.
async fn peaks(pid: u32, done: Arc<Notify>) -> Result<(f64, u64), Failure> {
    let (mut cores, mut rss) = (0.0_f64, procfs::rss_kib(pid)?);
    let mut last = (Instant::now(), procfs::cpu_seconds(pid)?);
    let mut tick = tokio::time::interval(SAMPLE);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = done.notified() => return Ok((cores, rss)),
        }
        let now = (Instant::now(), procfs::cpu_seconds(pid)?);
        cores = cores.max((now.1 - last.1) / (now.0 - last.0).as_secs_f64());
        rss = rss.max(procfs::rss_kib(pid)?);
        last = now;
    }
}

/// Processes declared lost since the fleet was made, and those counted alive and unhealthy now.
async fn losses(store: &Store) -> Result<(u64, u64, u64), Failure> {
    let events = berth_store::fleets::recent_fleet_events(store, FLEET, 1_000).await?;
    let lost = events
        .iter()
        .filter(|event| {
            berth_domain::stored::ProcessLoss::ALL
                .iter()
                .any(|loss| event.code_name() == loss.as_str())
        })
        .count() as u64;
    let (alive, unhealthy) = store::health_counts(store, FLEET).await?;
    Ok((lost, alive, unhealthy))
}

/// Attaches the servers to one replica, kills it, and times their return to another.
pub async fn run(stack: &Stack, args: &Args) -> Result<Findings, Failure> {
    let servers = args.servers;
    let period = Duration::from_millis(args.heartbeat_ms);
    fleet::create(&stack.store, FLEET, (args.heartbeat_ms as u32, THRESHOLD)).await;
    let settings = super::heartbeats::settings();
    let doomed = Replica::start("berth-health", stack.store.config(), &settings).await?;
    let survivor = Replica::start("berth-health", stack.store.config(), &settings).await?;
    let connections = sdk_stream::connections(servers, args.connections);
    let firsts = sdk_stream::connect(&doomed.endpoint(), connections).await?;
    let seconds = sdk_stream::connect(&survivor.endpoint(), connections).await?;
    let storm = Arc::new(Storm {
        period,
        attaching: Attaching::new(servers, args.concurrency),
        killed_at: OnceLock::new(),
        back: Shards::default(),
        resumed: AtomicU64::new(0),
        progress: Notify::new(),
        failures: Mutex::default(),
    });
    eprintln!("attaching {servers} servers to the first replica over {connections} connections");
    let (stop, stopping) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for index in 0..servers {
        let at = (index % u64::from(connections)) as usize;
        let server = game_server(
            index,
            firsts[at].clone(),
            seconds[at].clone(),
            storm.clone(),
            stopping.clone(),
        );
        tasks.spawn(server);
    }
    let attach = storm.attaching.done("attach to the first replica").await;
    // A server whose attach was refused never joined: the others must all come back.
    let attached = attach.calls - attach.errors.values().sum::<u64>();
    // Two periods, so that every server is in its rhythm and the survivor's monitor has swept a while.
    tokio::time::sleep(period * 2).await;

    let sampled = Arc::new(Notify::new());
    let sampler = tokio::spawn(peaks(survivor.pid(), sampled.clone()));
    let rss_before_kib = procfs::rss_kib(survivor.pid())?;
    eprintln!("killing the first replica");
    storm.killed_at.set(Instant::now()).expect("killed once");
    drop(doomed);
    let all_back = until(&storm.progress, attached, || storm.resumed.load(Ordering::Acquire)).await;
    let killed_at = *storm.killed_at.get().expect("set above");
    let storm_took = killed_at.elapsed();
    sampled.notify_one();
    let (peak_cores, peak_rss_kib) = sampler.await??;
    let back = Line::new("re-attach after the kill", &storm.back.merged(), storm_took);

    // A whole health window and a sweep more: a server its replica's death cost would be declared lost by now.
    tokio::time::sleep(period * THRESHOLD + Duration::from_secs(1)).await;
    let (lost, alive, unhealthy) = losses(&stack.store).await?;
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
    drop(firsts);
    drop(seconds);
    drop(survivor);

    let watched = watches::run(stack).await?;

    let mut failed_checks = storm.failures.lock().expect("failures lock").clone();
    failed_checks.truncate(20);
    if !all_back {
        failed_checks.push(format!(
            "{} of {attached} servers were not attached again within {PATIENCE:?}",
            attached.saturating_sub(storm.resumed.load(Ordering::Acquire))
        ));
    }
    if alive < servers || unhealthy > 0 {
        failed_checks.push(format!(
            "{alive} of {servers} servers alive, {unhealthy} unhealthy after the storm"
        ));
    }
    let back_s = back.latency_us.max as f64 / 1e6;
    let mut figures = vec![
        Figure::new("heartbeat period", period.as_millis() as f64, "ms"),
        Figure::new(
            "servers attached again",
            storm.resumed.load(Ordering::Acquire) as f64,
            "servers",
        ),
        Figure::new(
            "surviving replica: memory before the storm",
            rss_before_kib as f64,
            "KiB",
        ),
        Figure::new(
            "surviving replica: peak memory in the storm",
            peak_rss_kib as f64,
            "KiB",
        ),
        Figure::new("surviving replica: peak CPU in the storm", peak_cores, "cores"),
        Figure::new("servers declared lost", lost as f64, "servers"),
    ];
    let mut targets = vec![
        Target::at_most(
            "every server attached again after its replica's kill",
            back_s,
            BACK_TARGET_S,
            "s",
        ),
        Target::at_most(
            "servers declared lost because their replica died",
            lost as f64,
            0.0,
            "servers",
        ),
    ];
    figures.extend(watched.figures);
    targets.extend(watched.targets);
    failed_checks.extend(watched.failed_checks);
    Ok(Findings {
        lines: vec![attach, back, watched.line],
        ratios: Vec::new(),
        figures,
        targets,
        failed_checks,
    })
}
