//! The closed-loop load: `concurrency` workers, each sending its next call as soon as its last one answers, until
//! the planned number of calls is done. Closed-loop keeps exactly that many calls in flight, as a fixed pool of
//! matchmakers would, so that throughput reads as capacity at that concurrency and latency includes queueing.
//! Workers are tasks of their own so that the client side spreads over every runtime thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tonic::{Code, Status};

use crate::report::{Line, Tally};

/// A call that never answers would hang the whole run; past this it counts as DEADLINE_EXCEEDED instead.
pub const CALL_DEADLINE: Duration = Duration::from_secs(10);

/// How one call ended: fine, or the gRPC status code it failed with.
pub type Outcome = Result<(), Code>;

/// The outcome of a gRPC call, whatever it answered.
pub fn outcome<T>(reply: Result<T, Status>) -> Outcome {
    reply.map(drop).map_err(|status| status.code())
}

/// Makes `calls` calls, `call(0)` to `call(calls - 1)`, with `concurrency` in flight, and measures them as `name`.
pub async fn run<F, Fut>(name: &str, calls: u64, concurrency: u16, call: F) -> Line
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    run_batches(name, calls, 1, concurrency, call).await
}

/// As [`run`], for calls that each carry a batch of `batch` operations: the line counts operations, each with
/// the latency and outcome of its call, so that its rate compares with a line of single operations.
pub async fn run_batches<F, Fut>(name: &str, calls: u64, batch: u64, concurrency: u16, call: F) -> Line
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    if batch == 1 {
        eprintln!("measuring {name}: {calls} calls, {concurrency} in flight");
    } else {
        eprintln!("measuring {name}: {calls} calls of {batch}, {concurrency} in flight");
    }
    let call = Arc::new(call);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        workers.spawn(worker(call.clone(), next.clone(), calls, batch));
    }
    let mut tally = Tally::default();
    while let Some(finished) = workers.join_next().await {
        tally.merge(&finished.expect("a load worker panicked"));
    }
    Line::new(name, &tally, started.elapsed())
}

async fn worker<F, Fut>(call: Arc<F>, next: Arc<AtomicU64>, calls: u64, batch: u64) -> Tally
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let mut tally = Tally::default();
    loop {
        let index = next.fetch_add(1, Ordering::Relaxed);
        if index >= calls {
            return tally;
        }
        let sent = Instant::now();
        let outcome = tokio::time::timeout(CALL_DEADLINE, call(index))
            .await
            .unwrap_or(Err(Code::DeadlineExceeded));
        tally.record_n(sent.elapsed(), batch, outcome);
    }
}
