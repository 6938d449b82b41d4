//! A service's background work — sweeps, listeners, writers — under one owner, the service itself: started with
//! it, stopped when it has shut down or is dropped, so that no task outlives the replica it works for. Work that
//! visits every fleet goes through [`for_each_fleet`], so that one fleet failing (its cluster node unreachable, a
//! record that does not decode) is logged and counted while the others are still served.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::Duration;

use berth_store::{Store, StoreError};
use futures::FutureExt;
use tokio::task::JoinHandle;

use crate::sync::lock;

/// The background tasks of one service. Dropping it stops them.
#[derive(Default)]
pub struct Background {
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Background {
    /// No tasks yet.
    pub fn new() -> Background {
        Background::default()
    }

    /// Runs `work` until the service stops: a listener, a writer, a loop of its own.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let task = tokio::spawn(work);
        lock(&self.tasks).push(task);
    }

    /// Runs `sweep` every `every` until the service stops; a sweep that fails or panics is logged and tried again
    /// at the next tick. A sweep that overruns delays the next tick rather than bunching them.
    pub fn every<F, Fut>(&self, task: &'static str, every: Duration, mut sweep: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), StoreError>> + Send,
    {
        self.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match AssertUnwindSafe(sweep()).catch_unwind().await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => log_failure(task, None, &err),
                    Err(panic) => log_panic(task, None, &panic),
                }
            }
        });
    }

    /// Stops every task.
    pub fn stop(&self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `per_fleet` for every fleet in turn. A fleet whose work fails or panics is logged and counted
/// (`berth_background_fleet_failures_total{task}`) and the others go on; one that failed is among those returned,
/// with its error. Fails as a whole only when the fleets cannot be listed.
pub async fn for_each_fleet<F, Fut>(
    store: &Store,
    task: &'static str,
    mut per_fleet: F,
) -> Result<Vec<(String, StoreError)>, StoreError>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(), StoreError>>,
{
    let mut failed = Vec::new();
    for fleet in berth_store::fleets::fleets(store).await? {
        match AssertUnwindSafe(per_fleet(fleet.clone())).catch_unwind().await {
            Ok(Ok(())) => continue,
            Ok(Err(err)) => {
                log_failure(task, Some(&fleet), &err);
                failed.push((fleet, err));
            }
            Err(panic) => log_panic(task, Some(&fleet), &panic),
        }
        crate::metrics::background_fleet_failure(task);
    }
    Ok(failed)
}

/// An outage is logged quietly: every tick would repeat it, and the health status already says Redis is
/// unreachable. Anything else is worth a warning.
fn log_failure(task: &'static str, fleet: Option<&str>, err: &StoreError) {
    if matches!(err, StoreError::Unavailable(_)) {
        tracing::debug!(task, fleet, error = %err, "background work failed; trying again at the next tick");
    } else {
        tracing::warn!(task, fleet, error = %err, "background work failed; trying again at the next tick");
    }
}

/// A panic is a bug, never an outage: it is an error whichever fleet it came from.
fn log_panic(task: &'static str, fleet: Option<&str>, panic: &Box<dyn Any + Send>) {
    let message = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    tracing::error!(
        task,
        fleet,
        panic = message,
        "background work panicked; trying again at the next tick"
    );
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use berth_testkit::TestRedis;

    use super::*;

    #[tokio::test]
    async fn a_fleet_whose_work_panics_does_not_keep_the_others_from_theirs() {
        let redis = TestRedis::single();
        let store = Store::connect(&redis.config()).await.unwrap();
        let fleets = redis::cmd("SADD")
            .arg(berth_store::keys::FLEETS)
            .arg(&["a", "b", "c"])
            .clone();
        let _: () = store.query(&fleets).await.unwrap();
        let mut served = Vec::new();
        for_each_fleet(&store, "test", |fleet| {
            served.push(fleet.clone());
            async move {
                assert_ne!(fleet, "b", "a bug in one fleet's work");
                Ok(())
            }
        })
        .await
        .unwrap();
        served.sort();
        assert_eq!(served, ["a", "b", "c"]);
    }

    #[tokio::test]
    async fn a_sweep_that_panics_runs_again_at_the_next_tick() {
        let background = Background::new();
        let runs = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        background.every("test", Duration::from_millis(10), move || {
            let run = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(run > 0, "a bug on the first run");
                Ok(())
            }
        });
        for _ in 0..200 {
            if runs.load(Ordering::SeqCst) >= 3 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the sweep stopped after it panicked");
    }
}
