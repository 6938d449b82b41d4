//! The placement workers of one replica. Every replica works every queue: it takes new requests from the queue's
//! stream as they arrive (through the stream's consumer group, so each goes to one worker), runs each placement
//! (`placing`) on a task of its own, tells the queue every second which requests it still works on, and takes
//! over those another replica has not touched for the reclaim idle time (it died, or stalled). A worker that learns,
//! as it touches its requests, that another took one over stops working on it; until then the placement is worked
//! twice, which is safe: every step is decided in Redis.
//!
//! Replicas list the queues every `discovery` interval, and hear a new queue announced on `QUEUES_CHANNEL` at once,
//! so that a queue's first placement is worked as soon as it starts.
//!
//! Tasks nest — the queues under this loop, each queue's placements under its worker — so that stopping the
//! service stops them all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_runtime::sync::lock;
use berth_store::keys::QUEUES_CHANNEL;
use berth_store::queues::placements::{self as store, Request};
use berth_store::{RedisConfig, Store, Subscription};
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};

use crate::placing::{self, Placer};
use crate::views;

/// How often a queue's worker touches what it holds, takes over what others left and sweeps the queue.
const MAINTENANCE: Duration = Duration::from_secs(1);
/// How long a take waits for a new request before it looks again.
const TAKE_WAIT_MS: u64 = 1000;
/// Most requests taken at once.
const TAKE_MAX: usize = 100;

/// How a replica's workers behave.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorkerSettings {
    /// Most placements one queue's worker runs at once; more wait in the stream for another replica or for room.
    pub(crate) concurrency: usize,
    /// How long a request must go untouched before another worker takes it over, ms.
    pub(crate) reclaim_idle_ms: u64,
    /// How long placement events are kept, and at most how many per queue.
    pub(crate) events_retention_ms: u64,
    pub(crate) events_max: u64,
    /// How often the queues to work are listed again.
    pub(crate) discovery: Duration,
}

/// Works every queue until the service stops.
pub(crate) async fn run(placer: Arc<Placer>, settings: WorkerSettings) {
    let mut workers: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    let mut tasks = JoinSet::new();
    let announced = Arc::new(Notify::new());
    let mut hearing = JoinSet::new();
    hearing.spawn(hear_new_queues(placer.store.config().clone(), announced.clone()));
    loop {
        match store::queues_to_work(&placer.store).await {
            Ok(names) => {
                workers.retain(|name, handle| {
                    let keep = names.contains(name) && !handle.is_finished();
                    if !keep {
                        handle.abort();
                    }
                    keep
                });
                for name in names {
                    if let std::collections::hash_map::Entry::Vacant(entry) = workers.entry(name) {
                        let name = entry.key().clone();
                        entry.insert(tasks.spawn(work_queue(placer.clone(), name, settings)));
                    }
                }
            }
            Err(err) => tracing::debug!(error = %err, "queues not listed; trying again"),
        }
        while tasks.try_join_next().is_some() {}
        tokio::select! {
            _ = tokio::time::sleep(settings.discovery) => {}
            _ = announced.notified() => {}
        }
    }
}

/// Wakes the queue discovery whenever a queue is announced (a word heard while the queues are being listed is kept
/// for the next wait), subscribing again after a failure.
async fn hear_new_queues(config: RedisConfig, announced: Arc<Notify>) {
    loop {
        match Subscription::open(&config, QUEUES_CHANNEL).await {
            Ok(mut subscription) => {
                while subscription.next().await.is_some() {
                    announced.notify_one();
                }
            }
            Err(err) => tracing::debug!(error = %err, "cannot hear of new queues yet; they are listed as often as set"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Works one queue until it is gone.
async fn work_queue(placer: Arc<Placer>, queue_name: String, settings: WorkerSettings) {
    let first = views::read(&placer.store, &queue_name).await.unwrap_or_default();
    let (views_tx, views) = watch::channel(Arc::new(first));
    let mut tasks = JoinSet::new();
    tasks.spawn(views::refresh(placer.store.clone(), queue_name.clone(), views_tx));
    let room = Arc::new(Semaphore::new(settings.concurrency));
    let (taken_tx, mut taken) = mpsc::channel(TAKE_MAX);
    tasks.spawn(take(placer.clone(), queue_name.clone(), room.clone(), taken_tx));
    // The requests this worker holds, and the tasks working on them.
    let held: Arc<Mutex<HashMap<String, AbortHandle>>> = Arc::default();
    let mut maintenance = tokio::time::interval(MAINTENANCE);
    maintenance.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut requests = Vec::new();
        tokio::select! {
            Some(batch) = taken.recv() => requests = batch,
            _ = maintenance.tick() => {
                let entries: Vec<String> = lock(&held).keys().cloned().collect();
                match store::touch_requests(&placer.store, &queue_name, &placer.replica, &entries).await {
                    Ok(gone) => {
                        let mut held = lock(&held);
                        for entry in gone {
                            if let Some(task) = held.remove(&entry) {
                                task.abort();
                            }
                        }
                    }
                    Err(err) => tracing::debug!(queue = %queue_name, error = %err, "requests not touched"),
                }
                match store::reclaim_requests(
                    &placer.store,
                    &queue_name,
                    &placer.replica,
                    settings.reclaim_idle_ms,
                    TAKE_MAX,
                )
                .await
                {
                    Ok(reclaimed) => requests = reclaimed,
                    Err(err) => tracing::debug!(queue = %queue_name, error = %err, "requests not reclaimed"),
                }
                match store::sweep_queue(&placer.store, &queue_name, settings.events_retention_ms, settings.events_max).await {
                    Ok((pending, average_wait_ms)) => crate::metrics::queue_depth(&queue_name, pending, average_wait_ms),
                    Err(err) => tracing::debug!(queue = %queue_name, error = %err, "queue not swept"),
                }
            }
            Some(_) = tasks.join_next() => {}
        }
        for request in requests {
            let mut holding = lock(&held);
            if holding.contains_key(&request.entry) {
                continue;
            }
            let entry = request.entry.clone();
            let (placer, queue_name, views, held, room) = (
                placer.clone(),
                queue_name.clone(),
                views.clone(),
                held.clone(),
                room.clone(),
            );
            let task = tasks.spawn(async move {
                let _room = room.acquire_owned().await;
                let entry = request.entry.clone();
                placing::run(placer, queue_name, views, request).await;
                lock(&held).remove(&entry);
            });
            holding.insert(entry, task);
        }
    }
}

/// Takes new requests of a queue as they arrive, as many at a time as there is room for, over a connection of its
/// own (the wait for a request holds it).
async fn take(placer: Arc<Placer>, queue_name: String, room: Arc<Semaphore>, taken: mpsc::Sender<Vec<Request>>) {
    let config = placer.store.config();
    let waiting = Store::new(RedisConfig {
        connections: 1,
        response_timeout: config.response_timeout + Duration::from_millis(TAKE_WAIT_MS),
        ..config.clone()
    });
    loop {
        // Room is seen, not held: each placement holds its own while it runs.
        let free = room.available_permits().min(TAKE_MAX);
        if free == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        match store::take_requests(&waiting, &queue_name, &placer.replica, free, TAKE_WAIT_MS).await {
            Ok(requests) if requests.is_empty() => {}
            Ok(requests) => {
                if taken.send(requests).await.is_err() {
                    return;
                }
            }
            Err(err) => {
                tracing::debug!(queue = %queue_name, error = %err, "requests not taken; trying again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}
