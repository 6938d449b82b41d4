//! The soak's faults, one at a time at random moments: a random replica of a random service SIGKILLed and started
//! again a moment later (in the run's last half, never a service's watched replica, see `Deployment::watched`);
//! Redis SIGKILLed and started again from its append-only file; every Redis client held by `CLIENT PAUSE` for
//! longer than the services' command timeout. Each is timed: a replica from its restart until it reports SERVING,
//! Redis from the fault until it answers again.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use berth_store::Store;
use berth_testkit::TestRedis;
use rand::Rng as _;
use tokio::sync::oneshot;

use super::deployment::Deployment;

/// How long a killed replica stays down before it is started again, at random between these, in ms.
const DOWN_MS: (u64, u64) = (500, 3_000);
/// How long Redis is paused: longer than the services' BERTH_REDIS_TIMEOUT_MS (1 s by default).
const PAUSE: Duration = Duration::from_millis(2_500);

/// A fault on Redis, carried out by the thread that owns it.
enum RedisFault {
    /// SIGKILL, then start again on the same port and data.
    Restart,
    Pause,
}

/// The thread that owns the soak's redis-server. The testkit ties a redis-server's life to the thread that started
/// it (PR_SET_PDEATHSIG), so a Redis restarted from a runtime thread would die when that thread retires; this one
/// lives until the keeper is dropped.
pub struct RedisKeeper {
    faults: Option<mpsc::Sender<(RedisFault, oneshot::Sender<()>)>>,
    thread: Option<JoinHandle<()>>,
}

impl RedisKeeper {
    /// Takes `redis` over.
    pub fn new(mut redis: TestRedis) -> RedisKeeper {
        let (faults, received) = mpsc::channel::<(RedisFault, oneshot::Sender<()>)>();
        let thread = std::thread::spawn(move || {
            for (fault, done) in received {
                match fault {
                    RedisFault::Restart => redis.restart(),
                    RedisFault::Pause => redis.client_pause(PAUSE),
                }
                let _ = done.send(());
            }
        });
        RedisKeeper {
            faults: Some(faults),
            thread: Some(thread),
        }
    }

    async fn inject(&self, fault: RedisFault) {
        let (done, finished) = oneshot::channel();
        if let Some(faults) = &self.faults
            && faults.send((fault, done)).is_ok()
        {
            let _ = finished.await;
        }
    }
}

impl Drop for RedisKeeper {
    fn drop(&mut self) {
        // Closing the channel ends the thread, which drops (and kills) the redis-server.
        self.faults.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the chaos loop did: each kind of fault, with how long Berth took to serve again after each.
#[derive(Default)]
pub struct Faults {
    pub by_kind: BTreeMap<String, Vec<Duration>>,
    /// Every fault, in order: when it began and what it was.
    pub log: Vec<(Instant, String)>,
    /// Faults whose recovery failed, with why.
    pub failures: Vec<String>,
}

impl Faults {
    fn injected(&mut self, kind: String, began: Instant, recovered_from: Instant) {
        self.by_kind
            .entry(kind.clone())
            .or_default()
            .push(recovered_from.elapsed());
        self.log.push((began, kind));
    }

    /// The last fault that began before `at`, and how long before.
    pub fn before(&self, at: Instant) -> Option<(Duration, &str)> {
        self.log
            .iter()
            .rev()
            .find(|(began, _)| *began <= at)
            .map(|(began, kind)| (at - *began, kind.as_str()))
    }
}

/// Injects a fault every `every` or so (half to one and a half times it, at random) until `until`, sparing the
/// watched replicas from `spare_from`.
pub async fn run(
    deployment: &Deployment,
    redis: &RedisKeeper,
    store: &Store,
    every: Duration,
    (spare_from, until): (Instant, Instant),
) -> Faults {
    let mut faults = Faults::default();
    loop {
        let wait = every.mul_f64(rand::rng().random_range(0.5..1.5));
        if Instant::now() + wait >= until {
            return faults;
        }
        tokio::time::sleep(wait).await;
        let pick = rand::rng().random_range(0..10);
        let started = Instant::now();
        match pick {
            0..6 => {
                let candidates: Vec<usize> = (0..deployment.len())
                    .filter(|index| Instant::now() < spare_from || !deployment.watched(*index))
                    .collect();
                let index = candidates[rand::rng().random_range(0..candidates.len())];
                let (service, replica) = deployment.replica(index);
                let mut replica = replica.lock().await;
                replica.kill();
                let down = rand::rng().random_range(DOWN_MS.0..=DOWN_MS.1);
                tokio::time::sleep(Duration::from_millis(down)).await;
                let restarted = Instant::now();
                match replica.restart().await {
                    Ok(()) => faults.injected(
                        format!("{service} replica SIGKILLed, down 0.5-3 s, then SERVING after its restart"),
                        started,
                        restarted,
                    ),
                    Err(err) => faults.failures.push(format!("restarting a {service} replica: {err}")),
                }
            }
            6..8 => {
                redis.inject(RedisFault::Restart).await;
                match until_answering(store).await {
                    Some(_) => faults.injected(
                        "redis SIGKILLed and restarted, answering again after".into(),
                        started,
                        started,
                    ),
                    None => faults
                        .failures
                        .push("redis did not answer within a minute of its restart".into()),
                }
            }
            _ => {
                redis.inject(RedisFault::Pause).await;
                match until_answering(store).await {
                    Some(_) => faults.injected(
                        format!("redis paused {PAUSE:?}, answering again after"),
                        started,
                        started,
                    ),
                    None => faults
                        .failures
                        .push("redis did not answer within a minute of its pause".into()),
                }
            }
        }
    }
}

/// How long until `store` answers a PING again, within a minute.
async fn until_answering(store: &Store) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if store.ping().await.is_ok() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}
