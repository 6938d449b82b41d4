//! A service's background work — sweeps, listeners, writers — under one owner, the service itself: started with
//! it, stopped when it has shut down or is dropped, so that no task outlives the replica it works for. Work that
//! visits every fleet goes through [`for_each_fleet`], so that one fleet failing (its cluster node unreachable, a
//! record that does not decode) is logged and counted while the others are still served.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use berth_store::{Store, StoreError};
use tokio::task::JoinHandle;

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
        self.tasks.lock().expect("background lock").push(task);
    }

    /// Runs `sweep` every `every` until the service stops; a sweep that fails is logged and tried again at the
    /// next tick. A sweep that overruns delays the next tick rather than bunching them.
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
                if let Err(err) = sweep().await {
                    log_failure(task, None, &err);
                }
            }
        });
    }

    /// Stops every task.
    pub fn stop(&self) {
        for task in self.tasks.lock().expect("background lock").drain(..) {
            task.abort();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `per_fleet` for every fleet in turn. A fleet whose work fails is logged and counted
/// (`berth_background_fleet_failures_total{task}`) and the others go on; it is among those returned, with its
/// error. Fails as a whole only when the fleets cannot be listed.
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
        if let Err(err) = per_fleet(fleet.clone()).await {
            log_failure(task, Some(&fleet), &err);
            crate::metrics::background_fleet_failure(task);
            failed.push((fleet, err));
        }
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
