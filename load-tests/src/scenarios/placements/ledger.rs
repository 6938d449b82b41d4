//! The matchmakers' book of the placements they wait on. A placement is entered, with the moment its start was
//! due, before the start is sent, and leaves when its outcome arrives on a watch (or its start fails): the time
//! between is its latency. Events come at least once, so only the first outcome of a placement counts. The
//! SDK processes read the book too, to time when each session reached its server.
//!
//! Placement ids say which load they belong to (`cost-…`, `closed-…`, `open-…`), so that every watch, process and
//! start task finds the placement's entry from its id alone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::driver::Outcome;
use crate::report::{Line, Shards};

/// Locks the entries are split over, so that watches, start tasks and processes rarely wait on one another.
const SHARDS: u64 = 16;
/// How often a drain looks whether every placement has ended.
const DRAIN_POLL: Duration = Duration::from_millis(10);

/// Where an open-loop placement's time goes, each measured from the moment its start was due: the start answered,
/// the game session pushed to its server, the server's activation answered.
#[derive(Default)]
pub struct Stages {
    pub answered: Shards,
    pub pushed: Shards,
    pub activated: Shards,
}

/// One load's placements.
pub struct Load {
    prefix: &'static str,
    /// Started and not ended, by index: when each start was due.
    pending: Vec<Mutex<HashMap<u64, Instant>>>,
    /// Whether outcomes arriving now are measured.
    measuring: AtomicBool,
    outcomes: Shards,
    /// A closed loop's slots: one taken per placement in flight, given back when it ends.
    pub slots: Option<Semaphore>,
    /// An open loop's breakdown.
    pub stages: Option<Stages>,
}

impl Load {
    fn new(prefix: &'static str, slots: Option<Semaphore>, stages: Option<Stages>) -> Load {
        Load {
            prefix,
            pending: (0..SHARDS).map(|_| Mutex::default()).collect(),
            measuring: AtomicBool::new(false),
            outcomes: Shards::default(),
            slots,
            stages,
        }
    }

    fn shard(&self, index: u64) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        self.pending[(index % SHARDS) as usize].lock().expect("ledger lock")
    }

    /// The id of its `index`th placement.
    pub fn placement_id(&self, index: u64) -> String {
        format!("{}-{index:010}", self.prefix)
    }

    /// Opens or closes the window: outcomes are measured while it is open.
    pub fn measure(&self, open: bool) {
        self.measuring.store(open, Ordering::Relaxed);
    }

    /// Enters placement `index`, whose start is due at `due`.
    pub fn begin(&self, index: u64, due: Instant) {
        self.shard(index).insert(index, due);
    }

    /// When placement `index`'s start was due, while it has not ended.
    pub fn due(&self, index: u64) -> Option<Instant> {
        self.shard(index).get(&index).copied()
    }

    /// Placement `index` ended with `outcome`, known at `at`: measured if the window is open, its slot given
    /// back. Answers whether this was its first outcome.
    pub fn end(&self, index: u64, outcome: Outcome, at: Instant) -> bool {
        let Some(due) = self.shard(index).remove(&index) else {
            return false;
        };
        if self.measuring.load(Ordering::Relaxed) {
            self.outcomes.record(index, at.saturating_duration_since(due), outcome);
        }
        if let Some(slots) = &self.slots {
            slots.add_permits(1);
        }
        true
    }

    /// Placements started and not ended.
    pub fn left(&self) -> usize {
        self.pending
            .iter()
            .map(|shard| shard.lock().expect("ledger lock").len())
            .sum()
    }

    /// Waits up to `patience` for every placement to end; then ends those left with `outcome`, now, and answers
    /// how many they were.
    pub async fn drain(&self, patience: Duration, outcome: Outcome) -> usize {
        let deadline = Instant::now() + patience;
        while self.left() > 0 && Instant::now() < deadline {
            tokio::time::sleep(DRAIN_POLL).await;
        }
        let now = Instant::now();
        let mut stranded = 0;
        for shard in &self.pending {
            let left: Vec<u64> = shard.lock().expect("ledger lock").keys().copied().collect();
            for index in left {
                stranded += usize::from(self.end(index, outcome, now));
            }
        }
        stranded
    }

    /// The measured outcomes as line `name`, over `elapsed`.
    pub fn line(&self, name: &str, elapsed: Duration) -> Line {
        Line::new(name, &self.outcomes.merged(), elapsed)
    }
}

/// The loads of a run, and how many placements have been fulfilled in all, and after more than one attempt.
pub struct Ledger {
    /// The placements whose whole life is costed, a closed loop of its own.
    pub cost: Arc<Load>,
    pub closed: Arc<Load>,
    pub open: Arc<Load>,
    fulfilled: AtomicU64,
    retried: AtomicU64,
}

impl Ledger {
    /// The book of two closed loops of `concurrency` placements in flight and of an open loop.
    pub fn new(concurrency: u16) -> Ledger {
        let slots = || Some(Semaphore::new(usize::from(concurrency)));
        Ledger {
            cost: Arc::new(Load::new("cost", slots(), None)),
            closed: Arc::new(Load::new("closed", slots(), None)),
            open: Arc::new(Load::new("open", None, Some(Stages::default()))),
            fulfilled: AtomicU64::new(0),
            retried: AtomicU64::new(0),
        }
    }

    /// The load and index of a placement of this run, from its id.
    pub fn placement(&self, placement_id: &str) -> Option<(&Arc<Load>, u64)> {
        let (prefix, index) = placement_id.split_once('-')?;
        let load = [&self.cost, &self.closed, &self.open]
            .into_iter()
            .find(|load| load.prefix == prefix)?;
        Some((load, index.parse().ok()?))
    }

    /// Placement `placement_id` ended with `outcome` after `attempts` attempts, seen at `at`.
    pub fn ended(&self, placement_id: &str, outcome: Outcome, attempts: u32, at: Instant) {
        if let Some((load, index)) = self.placement(placement_id)
            && load.end(index, outcome, at)
            && outcome.is_ok()
        {
            self.fulfilled.fetch_add(1, Ordering::Relaxed);
            if attempts > 1 {
                self.retried.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Placements fulfilled so far, in either load: in all, and after more than one attempt.
    pub fn fulfilled(&self) -> (u64, u64) {
        (
            self.fulfilled.load(Ordering::Relaxed),
            self.retried.load(Ordering::Relaxed),
        )
    }
}
