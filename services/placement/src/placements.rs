//! PlacementService: starting, stopping and describing game session placements, their events and their queues'
//! metrics. A start holds the placement id across queues (so a placement is found from its id alone), then starts
//! the placement in its queue's slot, where the workers (`workers`, `placing`) take it; both steps are idempotent,
//! so a retry of a start that timed out on the client returns the same placement. Neither is made once the
//! caller's deadline has passed.

use std::time::Instant;

use berth_domain::page_token::{digest, issue, redeem};
use berth_domain::placement::{self as check, metrics};
use berth_domain::stored::{PlacementEventType, PlacementStatus, PlacementStatusReason};
use berth_domain::validate::invalid;
use berth_proto::placement::v1::placement_service_server::PlacementService;
use berth_proto::placement::v1::{self as pb, watch_game_session_placements_response::Kind};
use berth_runtime::deadline::caller_deadline;
use berth_runtime::watch::{self, EventStreams, Placed, Start, Tails};
use berth_store::queues::placements::{self as store, Finish, Finished, IdHold, PlacementEventEntry, Started};
use berth_store::{EventsRead, Store, StoreError};
use prost::Message;
use tokio::sync::watch as signal;
use tonic::{Request, Response, Status};
use tracing::Instrument;

/// The handlers, over the shared store.
pub struct Placements {
    store: Store,
    /// How long ended placements stay readable.
    retention_ms: u64,
    /// Turns true when the replica shuts down, ending its watches.
    closing: signal::Receiver<bool>,
    /// Follows the queues' event streams its watches cover; the replica's workers, and its stops, tell it where a
    /// placement's end went.
    tails: Tails<PlacementEventEntry>,
}

impl Placements {
    /// Handlers over `store`, keeping ended placements for `retention_ms`, their watches following the queues
    /// through `tails`.
    pub(crate) fn new(
        store: Store,
        retention_ms: u64,
        closing: signal::Receiver<bool>,
        tails: Tails<PlacementEventEntry>,
    ) -> Placements {
        Placements {
            store,
            retention_ms,
            closing,
            tails,
        }
    }

    /// How long a placement id is held: the longest a placement may be PENDING, then its retention.
    fn id_held_ms(&self) -> u64 {
        u64::from(berth_domain::queue::TIMEOUT_S.1) * 1000 + self.retention_ms
    }
}

fn not_found(placement_id: &str) -> Status {
    Status::not_found(format!("no placement {placement_id:?}"))
}

fn late() -> Status {
    Status::deadline_exceeded("the call's deadline passed before the placement could be started; nothing was started")
}

fn id_in_use(placement_id: &str, queue: &str) -> Status {
    Status::already_exists(format!(
        "placement id {placement_id:?} is in use in queue {queue:?} with a different request; choose a new id"
    ))
}

/// Holds the placement's id, then starts it in its queue, unless the caller's `deadline` passes before either step
/// (DEADLINE_EXCEEDED: nothing started, and a hold this call made let go of). A placement started is kept even when
/// its answer comes too late: the caller's retry with the same id returns it.
async fn start_in_time(
    store: Store,
    req: pb::StartGameSessionPlacementRequest,
    id_held_ms: u64,
    deadline: Option<Instant>,
) -> Result<pb::GameSessionPlacement, Status> {
    let passed = || deadline.is_some_and(|at| Instant::now() >= at);
    let digest = digest(&[&req.encode_to_vec()]);
    let (id, queue) = (&req.placement_id, &req.queue_name);
    if passed() {
        return Err(late());
    }
    let claimed = match store::claim_placement_id(&store, id, queue, &digest, id_held_ms).await? {
        IdHold::Claimed => true,
        IdHold::Held => false,
        IdHold::TakenBy(other) => return Err(id_in_use(id, &other)),
    };
    // A hold this call made is let go of when the placement does not start, so that the id stays free.
    let refused = |status: Status| async {
        if claimed {
            store::release_placement_id(&store, id, queue, &digest).await?;
        }
        Err(status)
    };
    if passed() {
        return refused(late()).await;
    }
    match store::start_placement(
        &store,
        &req,
        &digest,
        berth_runtime::telemetry::traceparent().as_deref(),
    )
    .await?
    {
        Started::Created(record) => {
            crate::metrics::placement_started(queue);
            Ok(record.placement)
        }
        Started::Existing(record) => Ok(record.placement),
        Started::TokenReused => Err(id_in_use(id, queue)),
        Started::NoQueue => refused(Status::not_found(format!("no queue {queue:?}"))).await,
        Started::Full(limit) => {
            refused(Status::resource_exhausted(format!(
                "queue {queue:?} holds its maximum_pending_placements ({limit}); retry once some have ended"
            )))
            .await
        }
    }
}

#[tonic::async_trait]
impl PlacementService for Placements {
    async fn start_game_session_placement(
        &self,
        request: Request<pb::StartGameSessionPlacementRequest>,
    ) -> Result<Response<pb::StartGameSessionPlacementResponse>, Status> {
        let deadline = caller_deadline(&request);
        let req = request.into_inner();
        check::check_start(&req)?;
        // Made apart from this call, which the server drops when the caller gives up (its deadline, a reset): a
        // hold on the id made in that moment is then let go of rather than kept for a placement never started.
        let starting =
            tokio::spawn(start_in_time(self.store.clone(), req, self.id_held_ms(), deadline).in_current_span());
        let placement = starting
            .await
            .map_err(|_| Status::internal("the placement was not started: its task ended"))??;
        Ok(Response::new(pb::StartGameSessionPlacementResponse {
            placement: Some(placement),
        }))
    }

    async fn stop_game_session_placement(
        &self,
        request: Request<pb::StopGameSessionPlacementRequest>,
    ) -> Result<Response<pb::StopGameSessionPlacementResponse>, Status> {
        let req = request.into_inner();
        check::check_stop(&req)?;
        let id = &req.placement_id;
        let record = store::find_placement(&self.store, id)
            .await?
            .ok_or_else(|| not_found(id))?;
        let finish = Finish::new(
            PlacementStatus::Cancelled,
            Some(PlacementStatusReason::Stopped),
            "stopped by StopGameSessionPlacement",
            self.retention_ms,
        );
        let stopped = match store::finish_placement(&self.store, &record.request.queue_name, id, &finish).await? {
            Finished::Finished(stopped, position) => {
                crate::metrics::placements_ended(&record.request.queue_name, finish.status.as_str(), 1);
                self.tails.appended(&record.request.queue_name, &position);
                stopped
            }
            Finished::Moved(ended) if ended.status == PlacementStatus::Cancelled => ended,
            Finished::Moved(ended) => {
                return Err(Status::failed_precondition(format!(
                    "placement {id:?} has ended {}; only a PENDING placement can be stopped",
                    ended.status.as_str()
                )));
            }
            Finished::Waiting(_) | Finished::NotFound => return Err(not_found(id)),
        };
        Ok(Response::new(pb::StopGameSessionPlacementResponse {
            placement: Some(stopped.placement),
        }))
    }

    async fn describe_game_session_placement(
        &self,
        request: Request<pb::DescribeGameSessionPlacementRequest>,
    ) -> Result<Response<pb::DescribeGameSessionPlacementResponse>, Status> {
        let req = request.into_inner();
        check::check_describe(&req)?;
        let record = store::find_placement(&self.store, &req.placement_id)
            .await?
            .ok_or_else(|| not_found(&req.placement_id))?;
        Ok(Response::new(pb::DescribeGameSessionPlacementResponse {
            placement: Some(record.placement),
        }))
    }

    async fn list_game_session_placements(
        &self,
        request: Request<pb::ListGameSessionPlacementsRequest>,
    ) -> Result<Response<pb::ListGameSessionPlacementsResponse>, Status> {
        let req = request.into_inner();
        let size = check::check_list(&req)?;
        // A token names the last placement of its page, by start ms and id, and serves this queue's listing only.
        let selection = digest(&[b"pending", req.queue_name.as_bytes()]);
        let bad_token = || {
            invalid(
                "page_token",
                "was not issued by this call for this queue; start again without it",
            )
        };
        let after = match redeem(&selection, &req.page_token)? {
            None => None,
            Some(position) => {
                let (started, id) = position.split_once(':').ok_or_else(bad_token)?;
                Some((started.parse::<i64>().map_err(|_| bad_token())?, id))
            }
        };
        let placements = store::pending_placements(&self.store, &req.queue_name, after, size)
            .await?
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue_name)))?;
        let next = (placements.len() == size)
            .then(|| {
                placements
                    .last()
                    .map(|last| format!("{}:{}", last.start_ms, last.placement.placement_id))
            })
            .flatten();
        Ok(Response::new(pb::ListGameSessionPlacementsResponse {
            placements: placements.into_iter().map(|record| record.placement).collect(),
            next_page_token: issue(&selection, next),
        }))
    }

    type WatchGameSessionPlacementsStream = watch::Events<pb::WatchGameSessionPlacementsResponse>;

    async fn watch_game_session_placements(
        &self,
        request: Request<pb::WatchGameSessionPlacementsRequest>,
    ) -> Result<Response<Self::WatchGameSessionPlacementsStream>, Status> {
        let req = request.into_inner();
        check::check_watch(&req)?;
        let events = PlacementEvents {
            store: self.store.clone(),
            placement_ids: req.placement_ids.clone(),
            types: req.event_types().collect(),
            tails: self.tails.clone(),
        };
        let start = Start {
            fleet_ids: req.queue_names,
            after_cursor: req.after_cursor,
            from_oldest: req.from_oldest,
        };
        let events = watch::open(self.store.clone(), events, start, self.closing.clone()).await?;
        Ok(Response::new(events))
    }

    async fn get_queue_metrics(
        &self,
        request: Request<pb::GetQueueMetricsRequest>,
    ) -> Result<Response<pb::GetQueueMetricsResponse>, Status> {
        let req = request.into_inner();
        let minutes = check::check_metrics(&req)?;
        // The window's start from this replica's clock is only where to start reading: its minutes are Redis'.
        let from_minute = now_ms() / 60_000 - i64::from(minutes) + 1;
        let counts = store::queue_counts(&self.store, &req.queue_name, from_minute)
            .await?
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue_name)))?;
        let metrics = metrics::queue_metrics(&metrics::Counts {
            queue_name: &req.queue_name,
            window_start_ms: from_minute * 60_000,
            now_ms: counts.now_ms,
            pending: counts.pending,
            pending_start_sum_ms: counts.pending_start_sum_ms,
            oldest_start_ms: counts.oldest_start_ms,
            counters: &counts.counters,
        });
        Ok(Response::new(pb::GetQueueMetricsResponse { metrics: Some(metrics) }))
    }
}

/// The queues' placement event streams, through a watch's filters.
struct PlacementEvents {
    store: Store,
    placement_ids: Vec<String>,
    types: Vec<pb::PlacementEventType>,
    tails: Tails<PlacementEventEntry>,
}

impl EventStreams for PlacementEvents {
    type Entry = PlacementEventEntry;
    type Message = pb::WatchGameSessionPlacementsResponse;
    const SERVICE: &'static str = "placement";
    const STREAM: &'static str = "queue";
    // Matchmakers wait on these: a placement's outcome should reach them within milliseconds.
    const POLL: std::time::Duration = std::time::Duration::from_millis(5);

    fn tails(&self) -> &Tails<PlacementEventEntry> {
        &self.tails
    }

    fn every(&self, store: &Store) -> impl Future<Output = Result<(u64, Vec<String>), StoreError>> + Send {
        store::queues_now(store)
    }

    async fn read(
        &self,
        queue_name: &str,
        start: &str,
        count: usize,
    ) -> Result<EventsRead<PlacementEventEntry>, StoreError> {
        store::read_placement_events(&self.store, queue_name, start, count).await
    }

    fn position(entry: &PlacementEventEntry) -> &str {
        &entry.position
    }

    async fn event(
        &self,
        _queue_name: &str,
        placed: Placed,
        entry: PlacementEventEntry,
    ) -> Result<Option<pb::WatchGameSessionPlacementsResponse>, Status> {
        // A type a newer release writes is passed over here rather than stopping the watch.
        let Some(event_type) = entry.event_type.map(PlacementEventType::to_proto) else {
            return Ok(None);
        };
        if !self.types.is_empty() && !self.types.contains(&event_type) {
            return Ok(None);
        }
        if !self.placement_ids.is_empty() && !self.placement_ids.contains(&entry.placement.placement_id) {
            return Ok(None);
        }
        let event = pb::GameSessionPlacementEvent {
            event_id: placed.event_id,
            cursor: placed.cursor,
            event_type: event_type as i32,
            event_time: Some(berth_domain::game_server::timestamp(entry.time_ms)),
            placement: Some(*entry.placement),
            custom_event_data: entry.custom_event_data,
        };
        Ok(Some(pb::WatchGameSessionPlacementsResponse {
            kind: Some(Kind::Event(event)),
        }))
    }

    fn keepalive(&self, cursor: String, server_time: prost_types::Timestamp) -> pb::WatchGameSessionPlacementsResponse {
        pb::WatchGameSessionPlacementsResponse {
            kind: Some(Kind::Keepalive(pb::WatchKeepalive {
                cursor,
                server_time: Some(server_time),
            })),
        }
    }
}

/// This replica's clock, ms since the epoch: only for which minutes a metrics window spans.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
