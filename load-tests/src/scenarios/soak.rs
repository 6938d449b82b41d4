//! The soak with chaos: the whole of Berth under mixed traffic for `--minutes`, while a chaos loop kills replicas
//! and restarts and pauses Redis, then a check of the invariants a studio relies on against every answer its
//! clients got and against Redis.
//!
//! Two replicas of each service run as processes of their own (`deployment`) over a single Redis that persists
//! every write before acknowledging it (`appendfsync always`). The traffic (`traffic`): matchmakers placing
//! matches through a queue onto `--servers` game servers of the real SDK (`hosts`), matchmakers claiming FleetIQ
//! servers, a lobby racing players into game sessions, and the tenants of an autoscaled fleet of example game
//! servers launched by the `process` provisioner. The faults (`chaos`): one every [`CHAOS_EVERY`] or so. At the end
//! (`checks`), once the traffic has stopped and the last placements have ended, every fleet and queue is deleted
//! and what is left of them in Redis looked at.
//!
//! Not part of `make test`: its shortest useful run, with the fleets' deletion at the end, outlasts the test
//! budget. `make soak` runs it.

mod chaos;
mod checks;
mod deployment;
mod hosts;
mod traffic;

use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::fleet::v1::{self as fleet_pb, put_scaling_policy_request::Kind as Policy};
use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::placement::v1::{self as placement_pb};
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_store::utilization::{UtilizationRead, read_utilization};
use berth_testkit::{Reaper, token};
use tokio::task::JoinSet;

use self::chaos::{Faults, RedisKeeper};
use self::checks::Check;
use self::deployment::{CLAIM_TIMEOUT_MS, Deployment, Service};
use self::hosts::Book;
use self::traffic::{Answers, Channels};
use crate::Failure;
use crate::args::Args;
use crate::fleet;
use crate::replica::beside_the_bench;
use crate::report::{Figure, Findings, Target};
use crate::stack::Stack;

/// The fleet of SDK game servers placements land on, the FleetIQ fleet claims take from, the autoscaled fleet, and
/// the queue over the first.
pub const HOSTS: &str = "soak-hosts";
pub const CLAIMS: &str = "soak-claims";
pub const SCALED: &str = "soak-scaled";
pub const QUEUE: &str = "soak-queue";
/// FleetIQ servers registered for the claims.
const CLAIM_SERVERS: u64 = 200;
/// How often a fault is injected, on average.
const CHAOS_EVERY: Duration = Duration::from_secs(20);
/// Heartbeats of the hosts: period in ms, and periods missed before a server is lost.
const HEARTBEATS: (u32, u32) = (1_000, 3);
/// How long a placement may wait in the queue.
const QUEUE_TIMEOUT_S: u32 = 20;
/// How long the matchmakers have to see their last placements end once the traffic stops.
const SETTLE: Duration = Duration::from_secs(60);
/// How long the fleets' deletion may take at the end.
const DELETION: Duration = Duration::from_secs(180);
/// How long past the retention the sweeps have to remove what deleted fleets left.
const ORPHAN_GRACE: Duration = Duration::from_secs(20);
/// How often memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Runs shorter than this are not judged on memory: records live 2 minutes, and the last half must begin after
/// several retentions have turned over for Redis' memory to have settled.
const JUDGED_FROM: Duration = Duration::from_secs(600);
/// Most a memory figure may grow over the last half of a judged run, in percent.
const GROWTH_LIMIT_PERCENT: f64 = 15.0;

/// The soak's operators' clients.
struct Operator {
    fleets: FleetServiceClient<AuthedChannel>,
    policies: ScalingServiceClient<AuthedChannel>,
    queues: QueueServiceClient<AuthedChannel>,
    registry: GameServerServiceClient<AuthedChannel>,
}

impl Operator {
    async fn connect(deployment: &Deployment) -> Result<Operator, Failure> {
        let operator = token(Role::Operator, None);
        let fleet = berth_sdk::connect(&deployment.endpoints(Service::Fleet), &operator).await?;
        Ok(Operator {
            fleets: FleetServiceClient::new(fleet.clone()),
            policies: ScalingServiceClient::new(fleet),
            queues: QueueServiceClient::new(
                berth_sdk::connect(&deployment.endpoints(Service::Placement), &operator).await?,
            ),
            registry: GameServerServiceClient::new(
                berth_sdk::connect(&deployment.endpoints(Service::Health), &operator).await?,
            ),
        })
    }

    /// The three fleets, the queue, and the FleetIQ servers.
    async fn set_up(&mut self, stack: &Stack) -> Result<(), Failure> {
        fleet::create(&stack.store, HOSTS, HEARTBEATS).await;
        fleet::create(&stack.store, CLAIMS, fleet::QUIET).await;
        for index in 0..CLAIM_SERVERS {
            self.registry
                .register_game_server(super::claim::registration(CLAIMS, index))
                .await?;
        }
        self.fleets.create_fleet(scaled()?).await?;
        self.policies
            .put_scaling_policy(fleet_pb::PutScalingPolicyRequest {
                fleet_id: SCALED.into(),
                name: "buffer".into(),
                location: fleet::LOCATION.into(),
                evaluation_interval_seconds: 10,
                scale_in_stabilization_seconds: Some(30),
                kind: Some(Policy::Buffer(fleet_pb::BufferPolicy {
                    idle_threshold_percent: 50,
                    minimum_idle_servers: 1,
                    persistent_idle: true,
                    maximum_running_servers: 6,
                })),
                ..Default::default()
            })
            .await?;
        self.queues
            .create_queue(placement_pb::CreateQueueRequest {
                name: QUEUE.into(),
                destinations: vec![placement_pb::QueueDestination { fleet_id: HOSTS.into() }],
                timeout_seconds: QUEUE_TIMEOUT_S,
                ..Default::default()
            })
            .await?;
        Ok(())
    }

    /// Deletes the queue and every fleet, and waits until each fleet is TERMINATED; answers the fleets that were
    /// not within [`DELETION`].
    async fn tear_down(&mut self) -> Result<Vec<String>, Failure> {
        self.queues
            .delete_queue(placement_pb::DeleteQueueRequest {
                name: QUEUE.into(),
                force: true,
                ..Default::default()
            })
            .await?;
        for fleet_id in [HOSTS, CLAIMS, SCALED] {
            self.fleets
                .delete_fleet(fleet_pb::DeleteFleetRequest {
                    fleet_id: fleet_id.into(),
                    force: true,
                    ..Default::default()
                })
                .await?;
        }
        let started = Instant::now();
        let mut left: Vec<String> = [HOSTS, CLAIMS, SCALED].map(String::from).to_vec();
        while !left.is_empty() && started.elapsed() < DELETION {
            let mut still = Vec::new();
            for fleet_id in left {
                let status = self
                    .fleets
                    .describe_fleet(fleet_pb::DescribeFleetRequest {
                        fleet_id: fleet_id.clone(),
                    })
                    .await
                    .ok()
                    .and_then(|answer| answer.into_inner().fleet)
                    .map(|fleet| fleet.status());
                if status != Some(fleet_pb::FleetStatus::Terminated) {
                    still.push(fleet_id);
                }
            }
            left = still;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(left)
    }
}

/// The autoscaled fleet: the example game server on the `process` provisioner, one server per instance, from one
/// instance to six.
fn scaled() -> Result<fleet_pb::CreateFleetRequest, Failure> {
    let launch_path = beside_the_bench("berth-example-game-server")?.display().to_string();
    let capacity = fleet_pb::FleetCapacity {
        minimum_instances: 1,
        maximum_instances: 6,
        desired_instances: 1,
    };
    Ok(super::fleets::process_fleet(SCALED, launch_path, capacity))
}

/// One look at the run: seconds since its start, Redis' used memory and each service's watched replica in MiB, the
/// autoscaled fleet's active instances, and how many of the SDK servers' streams the watched health replica holds
/// (its memory follows them, and they gather on it as the chaos loop kills the other).
struct Sample {
    taken: Instant,
    at: f64,
    redis_mib: f64,
    services: Vec<(Service, f64)>,
    scaled_instances: Option<u64>,
    watched_streams: Option<u64>,
}

#[derive(Default)]
struct Samples(Vec<Sample>);

impl Samples {
    async fn take(&mut self, started: Instant, stack: &Stack, deployment: &Deployment, servers: u64) {
        let used = crate::redis_stats::used_memory(&stack.store).await.unwrap_or(0) as f64 / 1_048_576.0;
        let scaled = match read_utilization(&stack.store, SCALED, "").await {
            Ok(UtilizationRead::Read(read)) => read.locations.first().map(|(_, tally)| tally.active_instances),
            _ => None,
        };
        let keys = berth_store::keys::FleetKeys::new(HOSTS);
        let mut holders = redis::pipe();
        for index in 0..servers {
            holders.hget(keys.game_server(&crate::fleet::server(index).id), "replica");
        }
        let watched = deployment::health_replica(0);
        let watched_streams = (stack.store.query_pipeline::<Vec<Option<String>>>(&holders).await)
            .ok()
            .map(|holders| {
                holders
                    .iter()
                    .filter(|holder| holder.as_deref() == Some(&watched))
                    .count() as u64
            });
        self.0.push(Sample {
            taken: Instant::now(),
            at: started.elapsed().as_secs_f64(),
            redis_mib: used,
            services: deployment.resident_mib(),
            scaled_instances: scaled,
            watched_streams,
        });
    }

    /// Every sample, one line each, with the fault that came last before it, for a reader to tell a leak from
    /// memory that follows the load or a fault.
    fn print(&self, faults: &Faults) {
        for sample in &self.0 {
            let services: Vec<String> = sample
                .services
                .iter()
                .map(|(service, mib)| format!("{service} {mib:.1} MiB"))
                .collect();
            let streams = sample.watched_streams.map_or("?".to_owned(), |count| count.to_string());
            let fault = faults.before(sample.taken).map_or(String::new(), |(ago, kind)| {
                format!("; {:.1} s after the last fault began ({kind})", ago.as_secs_f64())
            });
            eprintln!(
                "soak sample at {:.0} s: Redis {:.1} MiB, {}; the watched health replica holds {streams} streams{fault}",
                sample.at,
                sample.redis_mib,
                services.join(", ")
            );
        }
    }

    /// How much `value` of the samples grew over the run's last half: the median of its last quarter over the
    /// median of its third, in percent. A leak lifts every sample; a fault lifts a few for seconds (a Redis pause
    /// queues heartbeats and writes, a killed replica's streams move over), and the median passes those over where
    /// the largest sample would judge whichever quarter the chaos loop happened to hit harder.
    fn growth(&self, length: f64, value: impl Fn(&Sample) -> f64) -> Option<f64> {
        let median = |from: f64, to: f64| {
            let mut values: Vec<f64> = self
                .0
                .iter()
                .filter(|sample| sample.at >= from && sample.at < to)
                .map(&value)
                .collect();
            values.sort_by(f64::total_cmp);
            values.get(values.len() / 2).copied()
        };
        let third = median(length * 0.5, length * 0.75)?;
        let last = median(length * 0.75, f64::INFINITY)?;
        Some((last - third) / third.max(1.0) * 100.0)
    }

    /// The fewest and most active instances the autoscaled fleet had.
    fn scaled_range(&self) -> Option<(u64, u64)> {
        let counts = self.0.iter().filter_map(|sample| sample.scaled_instances);
        Some((counts.clone().min()?, counts.max()?))
    }
}

/// Runs the soak.
pub async fn run(stack: &Stack, args: &Args) -> Result<Findings, Failure> {
    if args.cluster {
        return Err("the soak runs on a single persistent Redis: drop --cluster".into());
    }
    let redis = RedisKeeper::new(stack.take_redis().ok_or("the soak needs the bench's Redis to itself")?);
    let deployment = Deployment::start(stack.store.config()).await?;
    let _reaper = Reaper(vec![SCALED.into()]);
    let mut operator = Operator::connect(&deployment).await?;
    operator.set_up(stack).await?;

    let book = Arc::new(Book::default());
    let mut servers = JoinSet::new();
    let health = deployment.endpoints(Service::Health);
    let endpoints: Vec<String> = health.split(',').map(str::to_owned).collect();
    hosts::start(
        HOSTS,
        args.servers,
        &hosts::channels(&endpoints, args.servers)?,
        &book,
        &mut servers,
    )
    .await?;
    eprintln!(
        "soak: {} game servers ready; traffic and chaos for {} minutes",
        args.servers, args.minutes
    );

    let client = token(Role::Client, None);
    let channels = Channels {
        placement: berth_sdk::connect(&deployment.endpoints(Service::Placement), &client).await?,
        session: berth_sdk::connect(&deployment.endpoints(Service::Session), &client).await?,
    };
    let answers = Answers::new();
    let mut traffic = JoinSet::new();
    let watch = traffic::start(&channels, &answers, u64::from(args.concurrency), &mut traffic);

    let started = Instant::now();
    let length = Duration::from_secs(args.minutes * 60);
    let mut samples = Samples::default();
    // Side by side, so that a sample waiting out a Redis pause never holds the chaos loop back.
    let chaos = chaos::run(
        &deployment,
        &redis,
        &stack.store,
        CHAOS_EVERY,
        (started + length / 2, started + length),
    );
    let sampling = async {
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        while started.elapsed() < length {
            tick.tick().await;
            samples.take(started, stack, &deployment, args.servers).await;
        }
    };
    let (faults, ()) = tokio::join!(chaos, sampling);
    let elapsed = started.elapsed();

    answers.stop();
    let settled = tokio::time::timeout(SETTLE, async { while traffic.join_next().await.is_some() {} }).await;
    // A matchmaker may see its last placement end before the watch does.
    let seen_by_watch = tokio::time::timeout(SETTLE, answers.watched_every_end()).await;
    watch.abort();
    let mut failed_checks = Vec::new();
    if seen_by_watch.is_err() {
        failed_checks.push(format!(
            "the watch had not seen every placement end {SETTLE:?} after the traffic stopped"
        ));
    }
    if settled.is_err() {
        failed_checks.push(format!(
            "the clients had not finished {SETTLE:?} after the traffic stopped"
        ));
    }
    let mut checks = vec![
        checks::claims_exclusive(&answers, Duration::from_millis(CLAIM_TIMEOUT_MS)),
        checks::players_within_max(&answers),
        checks::no_false_losses(&stack.store, &book, args.servers, &faults).await,
    ];
    checks.extend(checks::placements(&answers, &book));
    checks.push(checks::counts_match_recount(&stack.store, &[HOSTS, CLAIMS, SCALED]).await);
    let not_deleted = operator.tear_down().await?;
    if !not_deleted.is_empty() {
        failed_checks.push(format!(
            "fleets not TERMINATED {DELETION:?} after their deletion: {not_deleted:?}"
        ));
    }
    servers.abort_all();
    // What a deleted fleet leaves is kept for the retention, then swept or expired.
    tokio::time::sleep(Duration::from_millis(deployment::RETENTION_MS) + ORPHAN_GRACE).await;
    checks.push(checks::no_orphans(&stack.store).await);

    let mut targets: Vec<Target> = checks.iter().map(target).collect();
    for check in &checks {
        failed_checks.extend(
            check
                .examples
                .iter()
                .map(|example| format!("{}: {example}", check.name)),
        );
    }
    failed_checks.extend(faults.failures.iter().cloned());
    samples.print(&faults);
    let memory = memory_targets(&samples, elapsed);
    if elapsed >= JUDGED_FROM {
        failed_checks.extend(memory.iter().filter(|target| !target.met).map(|target| {
            format!(
                "{}: {:.1} %, over {GROWTH_LIMIT_PERCENT} %",
                target.name, target.measured
            )
        }));
    }
    targets.extend(memory);
    let mut figures = fault_figures(&faults);
    figures.extend(activity_figures(&book, &answers));
    if let Some((fewest, most)) = samples.scaled_range() {
        figures.push(Figure::new(
            "autoscaled fleet, fewest active instances",
            fewest as f64,
            "instances",
        ));
        figures.push(Figure::new(
            "autoscaled fleet, most active instances",
            most as f64,
            "instances",
        ));
    }
    if let Some(last) = samples.0.last() {
        figures.push(Figure::new("Redis used memory at the end", last.redis_mib, "MiB"));
        for (service, mib) in &last.services {
            figures.push(Figure::new(
                &format!("{service} watched replica's resident memory at the end"),
                *mib,
                "MiB",
            ));
        }
    }
    Ok(Findings {
        lines: answers.lines(elapsed),
        figures,
        targets,
        failed_checks,
        ..Findings::default()
    })
}

/// An invariant as a target: no violation, with how many cases were looked at.
fn target(check: &Check) -> Target {
    let mut target = Target::at_most(check.name, check.violations as f64, 0.0, "violations");
    target.note = Some(format!("of {} checked", check.of));
    target
}

/// Redis' memory and each service's resident memory over the last half of the run, judged only on a run long
/// enough for records to expire.
fn memory_targets(samples: &Samples, elapsed: Duration) -> Vec<Target> {
    let length = elapsed.as_secs_f64();
    let judged = elapsed >= JUDGED_FROM;
    let mut targets = Vec::new();
    let mut add = |name: String, growth: Option<f64>| {
        if let Some(growth) = growth {
            let mut target = Target::at_most(&name, growth, GROWTH_LIMIT_PERCENT, "%");
            if !judged {
                target.note = Some("not judged: too short a run for memory to settle".into());
            }
            targets.push(target);
        }
    };
    add(
        "Redis used memory, growth over the last half".into(),
        samples.growth(length, |s| s.redis_mib),
    );
    for service in Service::ALL {
        let resident = |s: &Sample| {
            s.services
                .iter()
                .find(|(of, _)| *of == service)
                .map_or(0.0, |(_, mib)| *mib)
        };
        add(
            format!("{service} resident memory, growth over the last half"),
            samples.growth(length, resident),
        );
    }
    targets
}

/// Each kind of fault: how many were injected, and how long Berth took to serve again, at worst.
fn fault_figures(faults: &Faults) -> Vec<Figure> {
    let mut figures = Vec::new();
    for (kind, recoveries) in &faults.by_kind {
        figures.push(Figure::new(
            &format!("fault: {kind} (count)"),
            recoveries.len() as f64,
            "faults",
        ));
        let worst = recoveries.iter().max().copied().unwrap_or_default();
        figures.push(Figure::new(
            &format!("fault: {kind} (longest)"),
            worst.as_secs_f64(),
            "s",
        ));
    }
    figures
}

/// What the game servers did and what the clients' calls amounted to.
fn activity_figures(book: &Book, answers: &Answers) -> Vec<Figure> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut figures = vec![
        Figure::new(
            "game sessions activated by the game servers",
            book.activated.load(Relaxed) as f64,
            "sessions",
        ),
        Figure::new(
            "player sessions accepted by the game servers",
            book.accepted.load(Relaxed) as f64,
            "players",
        ),
        Figure::new(
            "player sessions removed by the game servers",
            book.removed.load(Relaxed) as f64,
            "players",
        ),
        Figure::new(
            "game sessions ended by the game servers",
            book.ended.load(Relaxed) as f64,
            "sessions",
        ),
        Figure::new(
            "lobby game sessions filled to their maximum by racing players",
            answers
                .players
                .lock()
                .expect("answers lock")
                .values()
                .filter(|admitted| admitted.len() == hosts::MAX_PLAYERS as usize)
                .count() as f64,
            "sessions",
        ),
        Figure::new(
            "claims answered",
            answers.claims.lock().expect("answers lock").len() as f64,
            "claims",
        ),
        Figure::new(
            "placement watch resumed",
            answers.watch_resumes.load(Relaxed) as f64,
            "times",
        ),
    ];
    let mut statuses = std::collections::BTreeMap::new();
    for (status, _) in answers.placements.lock().expect("answers lock").values() {
        *statuses.entry(status.as_str_name()).or_insert(0_u64) += 1;
    }
    for (status, count) in statuses {
        figures.push(Figure::new(
            &format!("placements acknowledged, ended {status}"),
            count as f64,
            "placements",
        ));
    }
    for (given_up, count) in book.given_up() {
        figures.push(Figure::new(
            &format!("game server requests given up on ({given_up})"),
            count as f64,
            "requests",
        ));
    }
    figures
}
