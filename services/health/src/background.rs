//! The replica's background tasks, alive exactly as long as its handlers: when the server drops its routes (a
//! shutdown, or a test dropping a replica), the tasks stop too instead of sweeping and listening for a replica
//! that is gone.

use std::future::Future;
use std::pin::Pin;

use tokio::task::JoinHandle;

/// Aborts its tasks when dropped.
pub(crate) struct Background {
    tasks: Vec<JoinHandle<()>>,
}

impl Background {
    /// Spawns the tasks.
    pub(crate) fn spawn(futures: Vec<Pin<Box<dyn Future<Output = ()> + Send>>>) -> Background {
        Background {
            tasks: futures.into_iter().map(tokio::spawn).collect(),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
