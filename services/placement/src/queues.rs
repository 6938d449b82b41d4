//! QueueService: game session queues as records. Every request is checked whole (`berth_domain::queue`), so a
//! refusal names each field it breaks and changes nothing. A queue's destination fleets must exist when it is
//! created or its destinations replaced. A change is computed from the queue as read and written only at that
//! revision; when another change landed first it is computed again, so that two changes never undo each other.

use berth_domain::fleet::FleetRecord;
use berth_domain::page_token::{issue, redeem};
use berth_domain::queue as check;
use berth_domain::stored::FleetStatus;
use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::queue_service_server::QueueService;
use berth_store::queues::{self as store, QueueCreated, QueueDeleted, QueueWritten};
use berth_store::{Store, fleets};
use tonic::{Request, Response, Status};

/// Times an update is computed again after losing a race with another before it gives up with ABORTED.
const CHANGE_ATTEMPTS: usize = 16;

/// The handlers, over the shared store.
pub struct Queues {
    store: Store,
    /// How long ended placements stay readable (those a forced deletion cancels among them).
    retention_ms: u64,
}

impl Queues {
    /// Handlers over `store`, keeping ended placements for `retention_ms`.
    pub fn new(store: Store, retention_ms: u64) -> Queues {
        Queues { store, retention_ms }
    }

    async fn queue(&self, name: &str) -> Result<pb::Queue, Status> {
        store::read_queue(&self.store, name)
            .await?
            .ok_or_else(|| not_found(name))
    }

    /// NOT_FOUND naming the first destination fleet that does not exist (or is TERMINATED).
    async fn destinations_exist(&self, destinations: &[pb::QueueDestination]) -> Result<(), Status> {
        let reads = destinations
            .iter()
            .map(|destination| fleets::read_fleet(&self.store, &destination.fleet_id));
        let found = futures::future::try_join_all(reads).await?;
        let live = |fleet: &Option<FleetRecord>| fleet.as_ref().is_some_and(|f| f.status != FleetStatus::Terminated);
        match destinations.iter().zip(&found).find(|(_, fleet)| !live(fleet)) {
            Some((destination, _)) => Err(Status::not_found(format!(
                "destination fleet {:?} does not exist; create it first",
                destination.fleet_id
            ))),
            None => Ok(()),
        }
    }
}

fn not_found(name: &str) -> Status {
    Status::not_found(format!("no queue {name:?}"))
}

fn not_at_revision(name: &str, revision: u64, expected: u64) -> Status {
    Status::aborted(format!(
        "queue {name:?} is at revision {revision}, not the expected {expected}; read it again and retry"
    ))
}

#[tonic::async_trait]
impl QueueService for Queues {
    async fn create_queue(
        &self,
        request: Request<pb::CreateQueueRequest>,
    ) -> Result<Response<pb::CreateQueueResponse>, Status> {
        let req = request.into_inner();
        let queue = check::check_create(&req)?;
        self.destinations_exist(&queue.destinations).await?;
        match store::create_queue(&self.store, &queue).await? {
            QueueCreated::Created(queue) => Ok(Response::new(pb::CreateQueueResponse { queue: Some(*queue) })),
            QueueCreated::Exists => Err(Status::already_exists(format!(
                "a queue {:?} exists; nothing was changed",
                req.name
            ))),
        }
    }

    async fn update_queue(
        &self,
        request: Request<pb::UpdateQueueRequest>,
    ) -> Result<Response<pb::UpdateQueueResponse>, Status> {
        let req = request.into_inner();
        check::check_update(&req)?;
        if let Some(destinations) = &req.destinations {
            self.destinations_exist(&destinations.destinations).await?;
        }
        for _ in 0..CHANGE_ATTEMPTS {
            let read = self.queue(&req.name).await?;
            if req.expected_revision != 0 && read.revision != req.expected_revision {
                return Err(not_at_revision(&req.name, read.revision, req.expected_revision));
            }
            let mut changed = read.clone();
            if check::apply_update(&mut changed, &req).is_empty() {
                return Ok(Response::new(pb::UpdateQueueResponse { queue: Some(read) }));
            }
            match store::write_queue(&self.store, &changed, read.revision).await? {
                QueueWritten::Written(queue) => {
                    return Ok(Response::new(pb::UpdateQueueResponse { queue: Some(*queue) }));
                }
                QueueWritten::NotFound => return Err(not_found(&req.name)),
                // Computed again; a pinned revision that moved is refused at the top.
                QueueWritten::Conflict(_) => continue,
            }
        }
        Err(Status::aborted(format!(
            "queue {:?} kept changing while this change was made; try again",
            req.name
        )))
    }

    async fn delete_queue(
        &self,
        request: Request<pb::DeleteQueueRequest>,
    ) -> Result<Response<pb::DeleteQueueResponse>, Status> {
        let req = request.into_inner();
        check::check_delete(&req)?;
        let deleted = store::delete_queue(
            &self.store,
            &req.name,
            req.expected_revision,
            req.force,
            self.retention_ms,
        )
        .await?;
        match deleted {
            QueueDeleted::Deleted(cancelled) => {
                crate::metrics::placements_ended(&req.name, "CANCELLED", u64::from(cancelled));
                Ok(Response::new(pb::DeleteQueueResponse {
                    cancelled_placement_count: cancelled,
                }))
            }
            QueueDeleted::NotFound => Err(not_found(&req.name)),
            QueueDeleted::Conflict(revision) => Err(not_at_revision(&req.name, revision, req.expected_revision)),
            QueueDeleted::Pending(pending) => Err(Status::failed_precondition(format!(
                "queue {:?} has {pending} PENDING placements; stop them, wait for them to end, or delete with force to \
                 cancel them",
                req.name
            ))),
        }
    }

    async fn describe_queue(
        &self,
        request: Request<pb::DescribeQueueRequest>,
    ) -> Result<Response<pb::DescribeQueueResponse>, Status> {
        let req = request.into_inner();
        check::check_describe(&req)?;
        let queue = self.queue(&req.name).await?;
        Ok(Response::new(pb::DescribeQueueResponse { queue: Some(queue) }))
    }

    async fn list_queues(
        &self,
        request: Request<pb::ListQueuesRequest>,
    ) -> Result<Response<pb::ListQueuesResponse>, Status> {
        let req = request.into_inner();
        let size = check::check_list(&req)?;
        // Every listing selects all queues: the token's selection only tells it from another call's.
        let selection = "queues";
        let after = redeem(selection, &req.page_token)?;
        let (queues, next) = store::list_queues(&self.store, after, size).await?;
        Ok(Response::new(pb::ListQueuesResponse {
            queues,
            next_page_token: issue(selection, next),
        }))
    }
}
