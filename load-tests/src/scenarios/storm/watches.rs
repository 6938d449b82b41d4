//! The storm's second half: [`WATCHES`] placement watches held by one placement replica (the real `berth-placement`
//! in a process of its own) when it is SIGKILLed. Each watcher resumes on a second replica from the cursor of the
//! last event it saw, after the SDK's backoff, while the second replica cancels placements of the watched queue one
//! after another. Measured: the time from the kill until each watch is open again, and whether every watcher saw each
//! cancellation exactly once (none missed across its resume, none twice).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::placement::v1::watch_game_session_placements_response::Kind as Watched;
use berth_proto::placement::v1::{self as pb, PlacementEventType};
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_sdk::game_server::resume_backoff;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tonic::Streaming;

use super::{BACK_TARGET_S, until};
use crate::connections::Rotation;
use crate::redis_stats::RedisStats;
use crate::replica::Replica;
use crate::report::{Figure, Line, Shards, Target};
use crate::stack::Stack;
use crate::{Failure, fleet};

/// Watches the killed replica holds.
pub const WATCHES: u64 = 1_000;
/// Placements cancelled while the watchers come back, a few milliseconds apart.
const CANCELLED: u64 = 50;
const CANCEL_EVERY: Duration = Duration::from_millis(20);
/// The watched queue, and the fleet it places onto: one without servers, so that its placements wait until cancelled.
const QUEUE: &str = "storm-watched";
const EMPTY_FLEET: &str = "storm-empty";
/// How long the bench waits for every watcher to be back and to have seen every cancellation.
const PATIENCE: Duration = Duration::from_secs(60);
/// How long Redis' work is sampled while the watches are open and quiet.
const QUIET_SPAN: Duration = Duration::from_secs(2);

fn placement_id(n: u64) -> String {
    format!("storm-{n}")
}

/// What the watchers share with the run.
struct Watchers {
    killed_at: Mutex<Option<Instant>>,
    /// Each reopened watch, timed from the kill.
    back: Shards,
    reopened: AtomicU64,
    /// How many times each watcher saw each cancelled placement, by watcher.
    seen: Vec<Mutex<HashMap<String, u32>>>,
    /// Watchers that have seen the first cancellation (their cursor is past the start), and that have seen them all.
    primed: AtomicU64,
    done: AtomicU64,
    progress: Notify,
    failures: Mutex<Vec<String>>,
}

async fn open(
    clients: &Rotation<PlacementServiceClient<AuthedChannel>>,
    cursor: &str,
) -> Result<Streaming<pb::WatchGameSessionPlacementsResponse>, tonic::Status> {
    let request = pb::WatchGameSessionPlacementsRequest {
        queue_names: vec![QUEUE.into()],
        event_types: vec![PlacementEventType::Cancelled as i32],
        after_cursor: cursor.into(),
        ..Default::default()
    };
    Ok(clients
        .next()
        .watch_game_session_placements(request)
        .await?
        .into_inner())
}

/// One watcher: reads its watch, and when it breaks reopens it on the second replica from its last cursor.
async fn watcher(
    index: usize,
    mut events: Streaming<pb::WatchGameSessionPlacementsResponse>,
    second: Arc<Rotation<PlacementServiceClient<AuthedChannel>>>,
    watchers: Arc<Watchers>,
) {
    let mut cursor = String::new();
    loop {
        match events.message().await {
            Ok(Some(message)) => {
                let Some(Watched::Event(event)) = message.kind else {
                    if let Some(Watched::Keepalive(keepalive)) = message.kind {
                        cursor = keepalive.cursor;
                    }
                    continue;
                };
                cursor = event.cursor;
                let id = event
                    .placement
                    .map(|placement| placement.placement_id)
                    .unwrap_or_default();
                let mut seen = watchers.seen[index].lock().expect("seen lock");
                *seen.entry(id.clone()).or_default() += 1;
                if id == placement_id(0) && seen[&id] == 1 {
                    watchers.primed.fetch_add(1, Ordering::AcqRel);
                }
                if seen.len() as u64 == CANCELLED + 1 && seen[&id] == 1 {
                    watchers.done.fetch_add(1, Ordering::AcqRel);
                }
                watchers.progress.notify_waiters();
            }
            broken => {
                let Some(killed_at) = *watchers.killed_at.lock().expect("kill lock") else {
                    let why = format!("watch {index} ended before the kill: {broken:?}");
                    return watchers.failures.lock().expect("failures lock").push(why);
                };
                let mut attempt = 0;
                events = loop {
                    // A watch has no heartbeat window to stay inside: only the backoff's own cap applies.
                    tokio::time::sleep(resume_backoff(attempt, Duration::MAX)).await;
                    attempt += 1;
                    match open(&second, &cursor).await {
                        Ok(events) => break events,
                        Err(_) if killed_at.elapsed() < PATIENCE => {}
                        Err(status) => {
                            let why = format!("watch {index} did not reopen: {status}");
                            return watchers.failures.lock().expect("failures lock").push(why);
                        }
                    }
                };
                watchers.back.record(index as u64, killed_at.elapsed(), Ok(()));
                watchers.reopened.fetch_add(1, Ordering::AcqRel);
                watchers.progress.notify_waiters();
            }
        }
    }
}

/// What the half measured: its line, figures, targets and failed checks.
pub struct Measured {
    pub line: Line,
    pub figures: Vec<Figure>,
    pub targets: Vec<Target>,
    pub failed_checks: Vec<String>,
}

/// Opens the watches on one replica, kills it, and times their return to another while placements are cancelled.
pub async fn run(stack: &Stack) -> Result<Measured, Failure> {
    fleet::create(&stack.store, EMPTY_FLEET, (1000, 3)).await;
    let doomed = Replica::start("berth-placement", stack.store.config(), &[]).await?;
    let survivor = Replica::start("berth-placement", stack.store.config(), &[]).await?;
    let mut queues = QueueServiceClient::new(stack.channels_at(&survivor.endpoint(), Role::Operator).await?.remove(0));
    queues
        .create_queue(pb::CreateQueueRequest {
            name: QUEUE.into(),
            destinations: vec![pb::QueueDestination {
                fleet_id: EMPTY_FLEET.into(),
            }],
            timeout_seconds: 600,
            ..Default::default()
        })
        .await?;
    let client = |endpoint: String| async move {
        let channels = stack.channels_at(&endpoint, Role::Client).await?;
        Ok::<_, Failure>(Rotation::new(channels.into_iter().map(PlacementServiceClient::new)))
    };
    let first = client(doomed.endpoint()).await?;
    let second = Arc::new(client(survivor.endpoint()).await?);
    let mut matchmaker = second.next();
    for n in 0..=CANCELLED {
        let start = pb::StartGameSessionPlacementRequest {
            placement_id: placement_id(n),
            queue_name: QUEUE.into(),
            maximum_player_session_count: 2,
            ..Default::default()
        };
        matchmaker.start_game_session_placement(start).await?;
    }

    let watchers = Arc::new(Watchers {
        killed_at: Mutex::new(None),
        back: Shards::default(),
        reopened: AtomicU64::new(0),
        seen: (0..WATCHES).map(|_| Mutex::default()).collect(),
        primed: AtomicU64::new(0),
        done: AtomicU64::new(0),
        progress: Notify::new(),
        failures: Mutex::default(),
    });
    eprintln!("opening {WATCHES} placement watches on the first placement replica");
    let mut tasks = JoinSet::new();
    for index in 0..WATCHES as usize {
        let events = open(&first, "").await?;
        tasks.spawn(watcher(index, events, second.clone(), watchers.clone()));
    }
    // The first cancellation gives every watcher a cursor to resume from.
    let stop = |n: u64| pb::StopGameSessionPlacementRequest {
        placement_id: placement_id(n),
    };
    // Every command Redis ran: the function calls and the commands inside them.
    let calls = |stats: RedisStats| stats.commands_run() + stats.function_calls();
    // What bringing one event to every watch costs Redis, and what the open, quiet watches cost it (with whatever
    // else of the stack runs meanwhile).
    let priming_from = RedisStats::read(&stack.store).await?;
    matchmaker.stop_game_session_placement(stop(0)).await?;
    let primed = until(&watchers.progress, WATCHES, || watchers.primed.load(Ordering::Acquire)).await;
    let quiet_from = RedisStats::read(&stack.store).await?;
    let priming_calls = calls(quiet_from.per(&priming_from, &RedisStats::default(), 1));
    tokio::time::sleep(QUIET_SPAN).await;
    let quiet = RedisStats::read(&stack.store)
        .await?
        .per(&quiet_from, &RedisStats::default(), 1);
    let quiet_calls = calls(quiet) / QUIET_SPAN.as_secs_f64();

    eprintln!("killing the first placement replica");
    *watchers.killed_at.lock().expect("kill lock") = Some(Instant::now());
    let started = Instant::now();
    drop(doomed);
    for n in 1..=CANCELLED {
        matchmaker.stop_game_session_placement(stop(n)).await?;
        tokio::time::sleep(CANCEL_EVERY).await;
    }
    let all_back = until(&watchers.progress, WATCHES, || {
        watchers.reopened.load(Ordering::Acquire)
    })
    .await;
    let line = Line::new(
        "placement watch reopened after the kill",
        &watchers.back.merged(),
        started.elapsed(),
    );
    until(&watchers.progress, WATCHES, || watchers.done.load(Ordering::Acquire)).await;
    tasks.shutdown().await;
    drop(survivor);

    let (mut missed, mut doubled) = (0_u64, 0_u64);
    for seen in &watchers.seen {
        let seen = seen.lock().expect("seen lock");
        for n in 0..=CANCELLED {
            match seen.get(&placement_id(n)).copied().unwrap_or(0) {
                0 => missed += 1,
                1 => {}
                _ => doubled += 1,
            }
        }
    }
    let mut failed_checks = watchers.failures.lock().expect("failures lock").clone();
    failed_checks.truncate(20);
    if !primed {
        failed_checks.push("not every watcher saw the first cancellation before the kill".into());
    }
    if !all_back {
        let reopened = watchers.reopened.load(Ordering::Acquire);
        failed_checks.push(format!(
            "{} of {WATCHES} placement watches were not reopened",
            WATCHES - reopened
        ));
    }
    let seconds = line.latency_us.max as f64 / 1e6;
    Ok(Measured {
        figures: vec![
            Figure::new(
                "placement watches reopened",
                watchers.reopened.load(Ordering::Acquire) as f64,
                "watches",
            ),
            Figure::new(
                "cancellations each watcher should see",
                (CANCELLED + 1) as f64,
                "events",
            ),
            Figure::new(
                &format!("Redis commands from one cancellation until all {WATCHES} watches had it"),
                priming_calls,
                "commands",
            ),
            Figure::new(
                &format!("Redis commands a second while the {WATCHES} watches are open and quiet"),
                quiet_calls,
                "commands",
            ),
            Figure::new("cancellations a watcher missed", missed as f64, "events"),
            Figure::new("cancellations a watcher saw twice", doubled as f64, "events"),
        ],
        targets: vec![
            Target::at_most(
                "every placement watch reopened after its replica's kill",
                seconds,
                BACK_TARGET_S,
                "s",
            ),
            Target::at_most(
                "placement events missed or doubled across the resume",
                (missed + doubled) as f64,
                0.0,
                "events",
            ),
        ],
        line,
        failed_checks,
    })
}
