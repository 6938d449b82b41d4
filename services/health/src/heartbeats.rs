//! The heartbeat writer. Heartbeats from every stream of this replica are queued here and written to Redis in
//! batches — one script call per fleet per batch, each pushing many deadlines out at once — instead of one round
//! trip each. A batch takes whatever is queued; when that is less than a chunk it waits for more up to the flush
//! interval, so batches grow with load while a heartbeat waits at most one interval when load is light.
//!
//! The writer answers a heartbeat itself, straight into its stream's outbound queue: only a process that is behind
//! its desired state, or lost, needs its stream's task (which knows what was pushed). That keeps one task hop off
//! the path that every heartbeat takes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_store::StoreError;
use berth_store::endings::{self as store, Beaten};
use berth_store::processes::{Heartbeat, HeartbeatSettings};
use futures::future::join_all;
use tokio::sync::mpsc;

use crate::Context;
use crate::sdk::{Outbound, heartbeat_ack, refusal};
use crate::streams::Command;

/// Heartbeats that may wait for the writer; past that, streams wait to queue theirs (backpressure).
pub(crate) const QUEUE: usize = 65_536;

/// Most heartbeats of one fleet in one script call, so that one call does not hold Redis for long.
const CHUNK: usize = store::HEARTBEATS_PER_CALL;

/// One heartbeat waiting to be written, and where its result goes.
pub(crate) struct Beat {
    pub(crate) fleet_id: Arc<str>,
    pub(crate) heartbeat: Heartbeat,
    pub(crate) request_id: String,
    pub(crate) sequence: u64,
    pub(crate) applied: u64,
    /// The heartbeat settings its process was last told.
    pub(crate) told: HeartbeatSettings,
    /// The stream's outbound queue, for the ack.
    pub(crate) answers: Outbound,
    /// The stream's task, for a process that is behind or lost.
    pub(crate) commands: mpsc::Sender<Command>,
    /// When it arrived, so that the monitor can tell the writer's lateness (see `keeping_up`).
    pub(crate) received: Instant,
}

/// Writes batches until every sender is gone.
pub(crate) async fn run(context: Arc<Context>, mut queue: mpsc::Receiver<Beat>) {
    let flush = Duration::from_millis(context.args.heartbeat_flush_ms);
    while let Some(first) = queue.recv().await {
        // Waiting from now on: while the round gathers, its first heartbeat is not written either.
        context.keeping_up.round_starts(first.received);
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + flush;
        loop {
            match queue.try_recv() {
                Ok(beat) => batch.push(beat),
                Err(_) if batch.len() >= CHUNK => break,
                Err(_) => match tokio::time::timeout_at(deadline, queue.recv()).await {
                    Ok(Some(beat)) => batch.push(beat),
                    Ok(None) | Err(_) => break,
                },
            }
        }
        // The queue was empty when the gathering stopped: whatever queues from here on arrived after.
        let gathered = Instant::now();
        let oldest = batch
            .iter()
            .map(|beat| beat.received)
            .min()
            .unwrap_or_else(Instant::now);
        let mut fleets: HashMap<Arc<str>, Vec<Beat>> = HashMap::new();
        for beat in batch {
            fleets.entry(beat.fleet_id.clone()).or_default().push(beat);
        }
        let writes = fleets.into_iter().flat_map(|(fleet_id, beats)| {
            let mut chunks = Vec::new();
            let mut beats = beats.into_iter().peekable();
            while beats.peek().is_some() {
                chunks.push((fleet_id.clone(), beats.by_ref().take(CHUNK).collect::<Vec<_>>()));
            }
            chunks
        });
        context.keeping_up.round_starts(oldest);
        let failed = join_all(writes.map(|(fleet_id, beats)| write(&context, fleet_id, beats))).await;
        let queued_since = (!queue.is_empty()).then_some(gathered);
        context
            .keeping_up
            .round_ends(failed.into_iter().flatten(), Instant::now(), queued_since);
    }
}

/// Writes one fleet's chunk and answers its heartbeats; the fleet when the write failed.
async fn write(context: &Context, fleet_id: Arc<str>, beats: Vec<Beat>) -> Option<Arc<str>> {
    let heartbeats: Vec<Heartbeat> = beats.iter().map(|beat| beat.heartbeat.clone()).collect();
    let writer = store::Writer {
        replica: &context.replica,
        kept_up: context.keeping_up.for_fleet(&fleet_id, Instant::now()),
    };
    let results = store::record_heartbeats(&context.store, &fleet_id, &heartbeats, &context.timings, writer).await;
    crate::metrics::heartbeats(beats.len());
    match results {
        Ok((versions, settings)) => {
            for (beat, version) in beats.into_iter().zip(versions) {
                if let Some(settings) = settings.filter(|settings| *settings != beat.told) {
                    let _ = beat.commands.try_send(Command::HeartbeatSettings(settings));
                }
                acknowledge(beat, version);
            }
            None
        }
        Err(err) => {
            // An outage or a full Redis would repeat this for every batch of every fleet, many a second, and the
            // health status says so already (as the background work's failures are logged).
            if matches!(err, StoreError::Unavailable(_) | StoreError::OutOfMemory(_)) {
                tracing::debug!(error = %err, fleet = %fleet_id, "writing heartbeats failed");
            } else {
                tracing::warn!(error = %err, fleet = %fleet_id, "writing heartbeats failed");
            }
            let status = tonic::Status::from(err);
            for beat in beats {
                let answer = refusal(&beat.request_id, &status);
                let _ = beat.answers.try_send(Box::new(Ok(answer)));
            }
            Some(fleet_id)
        }
    }
}

// A stream whose queue is full or gone misses this ack; its process sends the next heartbeat regardless.
fn acknowledge(beat: Beat, beaten: Beaten) {
    match beaten {
        Beaten::Lost => {
            let _ = beat.commands.try_send(Command::Lost);
        }
        Beaten::Superseded => {
            let _ = beat.commands.try_send(Command::Superseded(u64::MAX));
        }
        Beaten::Version(version) if beat.applied < version => {
            let _ = beat.commands.try_send(Command::Behind {
                request_id: beat.request_id,
                sequence: beat.sequence,
                version,
            });
        }
        Beaten::Version(version) => {
            let answer = heartbeat_ack(beat.request_id, beat.sequence, version, None);
            let _ = beat.answers.try_send(Box::new(Ok(answer)));
        }
    }
}
