//! The heartbeat writer. Heartbeats from every stream of this replica are queued here and written to Redis in
//! batches — one script call per fleet per batch, each pushing many deadlines out at once — instead of one round
//! trip each. A batch takes whatever is queued; when that is less than a chunk it waits for more up to the flush
//! interval, so batches grow with load while a heartbeat waits at most one interval when load is light.
//!
//! The writer answers a heartbeat itself, straight into its stream's outbound queue: only a process that is behind
//! its desired state, or lost, needs its stream's task (which knows what was pushed). That keeps one task hop off
//! the path that every heartbeat takes.
//!
//! Every heartbeat is answered within [`ANSWER_WITHIN`] of arriving, written or not. A process that hears nothing
//! for about a period takes its stream for dead and resumes elsewhere; when Redis stalls, every replica waits on
//! the same Redis, so that would only move every stream at once (and hold the old and the new one for a moment).
//! A replica past its capacity answers late too; its heartbeats are answered the same way, and still written.
//! A write still running at the deadline has its heartbeats answered UNAVAILABLE; the heartbeats queued behind it
//! the writer takes off the queue meanwhile, answering each that comes due before the write ends. Each is still
//! written, in its turn, and judged as written then.

use std::collections::HashMap;
use std::hash::Hash;
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

/// How long after arriving a heartbeat is answered at the latest: half the default period, so that a process
/// heartbeating every second hears from a live stream well before it would resume. A process with a period
/// shorter than this may still resume through a stall; it loses nothing by it.
pub(crate) const ANSWER_WITHIN: Duration = Duration::from_millis(500);

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
    /// Whether it was answered UNAVAILABLE already, as one not written in time: its write answers nothing more.
    pub(crate) answered: bool,
}

impl Beat {
    /// Answers it UNAVAILABLE, unless it was answered already; the write goes on.
    fn answer_unwritten(&mut self) {
        if std::mem::replace(&mut self.answered, true) {
            return;
        }
        let status = tonic::Status::unavailable(format!(
            "the heartbeat is not written yet: this replica's heartbeat writes are running over {} ms late (Redis \
             slow, or the replica behind). It is written when Redis takes the write, and the stream is alive: keep \
             heartbeating on it",
            ANSWER_WITHIN.as_millis()
        ));
        let _ = self.answers.try_send(Box::new(Ok(refusal(&self.request_id, &status))));
        crate::metrics::answered_unwritten();
    }
}

/// Writes batches until every sender is gone.
pub(crate) async fn run(context: Arc<Context>, mut queue: mpsc::Receiver<Beat>) {
    let flush = Duration::from_millis(context.args.heartbeat_flush_ms);
    // Heartbeats taken off the queue while a late write ran, in the order they came (some answered already), to be
    // written in the next round.
    let mut carried: Vec<Beat> = Vec::new();
    loop {
        let mut batch = std::mem::take(&mut carried);
        if batch.is_empty() {
            match queue.recv().await {
                Some(beat) => batch.push(beat),
                None => return,
            }
        }
        // Waiting from now on: while the round gathers, its first heartbeat is not written either.
        context.keeping_up.round_starts(batch[0].received);
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
        let due = answer_due(&batch);
        let mut fleets: HashMap<Arc<str>, Vec<Beat>> = HashMap::new();
        for beat in batch {
            fleets.entry(beat.fleet_id.clone()).or_default().push(beat);
        }
        let writes = fleets.into_iter().flat_map(|(fleet_id, beats)| {
            chunks(beats, |beat| beat.heartbeat.game_server_id.clone(), CHUNK)
                .into_iter()
                .map(move |chunk| (fleet_id.clone(), chunk))
        });
        context.keeping_up.round_starts(oldest);
        let writes = join_all(writes.map(|(fleet_id, beats)| write(&context, fleet_id, beats)));
        tokio::pin!(writes);
        let failed = tokio::select! {
            biased;
            failed = &mut writes => failed,
            // Each write answers its own heartbeats at this deadline; from then on, the writer takes those queued
            // behind it off the queue (up to a queue's worth; past that, streams wait to queue theirs again) and
            // answers each when it is due, unless the write ends first and the next round acks it.
            () = tokio::time::sleep_until(due.into()) => {
                let mut answered = 0;
                loop {
                    let next = carried.get(answered).map_or_else(Instant::now, |beat| beat.received + ANSWER_WITHIN);
                    tokio::select! {
                        biased;
                        failed = &mut writes => break failed,
                        () = tokio::time::sleep_until(next.into()), if answered < carried.len() => {
                            let now = Instant::now();
                            while let Some(beat) = carried
                                .get_mut(answered)
                                .filter(|beat| beat.received + ANSWER_WITHIN <= now)
                            {
                                beat.answer_unwritten();
                                answered += 1;
                            }
                        }
                        Some(beat) = queue.recv(), if carried.len() < QUEUE => carried.push(beat),
                    }
                }
            }
        };
        let queued_since = (!queue.is_empty() || !carried.is_empty()).then_some(gathered);
        context
            .keeping_up
            .round_ends(failed.into_iter().flatten(), Instant::now(), queued_since);
    }
}

/// One fleet's heartbeats of a round in chunks of at most `size`, which are written side by side, over different
/// connections and so in any order: the heartbeats of one process go in one chunk, in the order they came, so that
/// the last one it sent is the one its record keeps. A round holds several of one process only when it is late
/// (heartbeats carried behind a slow write), so grouping is done only past one chunk; a process with more than
/// `size` in one round, which no period allows, is split.
fn chunks<T, K: Hash + Eq>(items: Vec<T>, process: impl Fn(&T) -> K, size: usize) -> Vec<Vec<T>> {
    if items.len() <= size {
        return vec![items];
    }
    let mut groups: Vec<Vec<T>> = Vec::new();
    let mut group_of: HashMap<K, usize> = HashMap::new();
    for item in items {
        let at = *group_of.entry(process(&item)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[at].push(item);
    }
    let mut chunks = Vec::new();
    let mut chunk = Vec::with_capacity(size);
    for group in groups {
        if !chunk.is_empty() && chunk.len() + group.len() > size {
            chunks.push(std::mem::take(&mut chunk));
        }
        for item in group {
            if chunk.len() == size {
                chunks.push(std::mem::take(&mut chunk));
            }
            chunk.push(item);
        }
    }
    chunks.push(chunk);
    chunks
}

/// When the first of `beats` not answered yet is due its answer; [`ANSWER_WITHIN`] from now when all were, for the
/// heartbeats queued behind them.
fn answer_due(beats: &[Beat]) -> Instant {
    let first = beats
        .iter()
        .filter(|beat| !beat.answered)
        .map(|beat| beat.received)
        .min();
    first.unwrap_or_else(Instant::now) + ANSWER_WITHIN
}

/// Writes one fleet's chunk and answers its heartbeats; the fleet when the write failed.
async fn write(context: &Context, fleet_id: Arc<str>, mut beats: Vec<Beat>) -> Option<Arc<str>> {
    let heartbeats: Vec<Heartbeat> = beats.iter().map(|beat| beat.heartbeat.clone()).collect();
    let writer = store::Writer {
        replica: &context.replica,
        kept_up: context.keeping_up.for_fleet(&fleet_id, Instant::now()),
    };
    let due = answer_due(&beats);
    let results = {
        let record = store::record_heartbeats(&context.store, &fleet_id, &heartbeats, &context.timings, writer);
        tokio::pin!(record);
        tokio::select! {
            biased;
            results = &mut record => results,
            () = tokio::time::sleep_until(due.into()) => {
                beats.iter_mut().for_each(Beat::answer_unwritten);
                record.await
            }
        }
    };
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
            for beat in beats.iter().filter(|beat| !beat.answered) {
                let answer = refusal(&beat.request_id, &status);
                let _ = beat.answers.try_send(Box::new(Ok(answer)));
            }
            Some(fleet_id)
        }
    }
}

// A stream whose queue is full or gone misses this ack; its process sends the next heartbeat regardless. A heartbeat
// answered already as unwritten gets no second answer: being behind waits for the next heartbeat's ack.
fn acknowledge(beat: Beat, beaten: Beaten) {
    match beaten {
        Beaten::Lost => {
            let _ = beat.commands.try_send(Command::Lost);
        }
        Beaten::Superseded => {
            let _ = beat.commands.try_send(Command::Superseded(u64::MAX));
        }
        Beaten::Version(_) if beat.answered => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    /// (process, sequence) pairs as chunks keep them.
    fn chunked(items: &[(&'static str, u32)], size: usize) -> Vec<Vec<(&'static str, u32)>> {
        chunks(items.to_vec(), |item| item.0, size)
    }

    #[test]
    fn a_round_within_one_chunk_stays_as_it_came() {
        let items = [("a", 1), ("b", 1), ("a", 2)];
        assert_eq!(chunked(&items, 3), vec![items.to_vec()]);
    }

    #[test]
    fn a_process_heartbeats_go_in_one_chunk_in_the_order_they_came() {
        let items = [
            ("a", 1),
            ("b", 1),
            ("c", 1),
            ("a", 2),
            ("d", 1),
            ("b", 2),
            ("a", 3),
            ("e", 1),
        ];
        let found = chunked(&items, 3);
        assert!(found.iter().all(|chunk| chunk.len() <= 3), "{found:?}");
        assert_eq!(found.iter().map(Vec::len).sum::<usize>(), items.len());
        for process in ["a", "b", "c", "d", "e"] {
            let holding: Vec<&Vec<(&str, u32)>> = found
                .iter()
                .filter(|chunk| chunk.iter().any(|item| item.0 == process))
                .collect();
            assert_eq!(holding.len(), 1, "{process} in {found:?}");
            let sequence: Vec<u32> = holding[0]
                .iter()
                .filter(|item| item.0 == process)
                .map(|item| item.1)
                .collect();
            assert!(sequence.is_sorted(), "{process}: {sequence:?}");
        }
    }

    #[test]
    fn a_process_with_more_than_a_chunk_is_split_in_order() {
        let items = [("a", 1), ("a", 2), ("a", 3), ("b", 1)];
        assert_eq!(
            chunked(&items, 2),
            vec![vec![("a", 1), ("a", 2)], vec![("a", 3), ("b", 1)]]
        );
    }
}
