//! Agones' allocation API (`allocation.AllocationService/Allocate`, and `POST /gameserverallocation` as JSON on the
//! same port): a second face of claims, for matchmakers built on Agones' allocator. Each selector is tried in order
//! against the fleets it names, each try one atomic script; like a claim, the allocation is made apart from the
//! call (`apart`), and one whose caller gave up before hearing of it is handed straight back to the pool. The metadata
//! and actions it wrote stay, as any write to a server does.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use berth_domain::agones::{Allocation, FLEET_LABEL, check_allocation};
use berth_proto::agones::allocation::allocation_response::{
    CounterStatus, GameServerMetadata, GameServerStatusAddress, GameServerStatusPort, ListStatus,
};
use berth_proto::agones::allocation::allocation_service_server::AllocationService;
use berth_proto::agones::allocation::{self as pb};
use berth_proto::json;
use berth_runtime::deadline::caller_deadline;
use berth_store::allocations::{self as store, Allocate, Allocated};
use berth_store::processes::Described;
use berth_store::{Store, fleets, pool};
use tonic::{Request, Response as GrpcResponse, Status};

use crate::apart::{Taken, made_apart};

/// The handlers, over the shared store.
#[derive(Clone)]
pub struct Allocations {
    store: Store,
    timeout_ms: u64,
}

fn count(outcome: &'static str) {
    crate::metrics::allocation(outcome);
}

impl Allocations {
    /// Handlers over `store`, whose allocations from READY hold their claim `timeout_ms`.
    pub fn new(store: Store, timeout_ms: u64) -> Allocations {
        Allocations { store, timeout_ms }
    }

    /// Tries each selector in order against each fleet it names; the first server found is the answer, with the
    /// health replica holding its stream ('' for none).
    async fn find(&self, allocation: &Allocation, claim_id: &str) -> Result<Option<(Box<Described>, String)>, Status> {
        let mut every_fleet: Option<Vec<String>> = None;
        for selector in &allocation.selectors {
            let fleets = match &selector.fleet {
                Some(fleet) => vec![fleet.clone()],
                None => {
                    if every_fleet.is_none() {
                        let mut all = fleets::fleets(&self.store).await?;
                        all.sort();
                        every_fleet = Some(all);
                    }
                    every_fleet.clone().unwrap_or_default()
                }
            };
            let lua = allocation.to_lua(selector);
            for fleet_id in &fleets {
                let attempt = Allocate {
                    fleet_id,
                    selector: &lua,
                    timeout_ms: self.timeout_ms,
                    claim_id,
                    seed: rand::random(),
                };
                match store::allocate(&self.store, &attempt).await? {
                    Allocated::Allocated { server, replica } => return Ok(Some((server, replica))),
                    Allocated::Exhausted => {}
                    Allocated::TooManyLabels(id) => {
                        return Err(Status::failed_precondition(format!(
                            "game server {id:?} of fleet {fleet_id:?} matches, but the metadata's labels would leave \
                             it with more than 64; nothing was allocated"
                        )));
                    }
                    Allocated::TooManyAnnotations(id) => {
                        return Err(Status::failed_precondition(format!(
                            "game server {id:?} of fleet {fleet_id:?} matches, but the metadata's annotations would \
                             leave it with more than 64; nothing was allocated"
                        )));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Allocates as the request asks, unless `deadline` passes first: an allocation made too late for the caller
    /// to hear of is handed back (its claim released) and answered DEADLINE_EXCEEDED.
    pub async fn allocate(
        &self,
        req: pb::AllocationRequest,
        deadline: Option<Instant>,
    ) -> Result<pb::AllocationResponse, Status> {
        let allocation = check_allocation(&req)?;
        let claim_id = uuid::Uuid::now_v7().to_string();
        let late = move || deadline.is_some_and(|at| Instant::now() >= at);
        let this = self.clone();
        let making = async move {
            if late() {
                return Ok(None);
            }
            let Some((server, replica)) = this.find(&allocation, &claim_id).await? else {
                return Ok(None);
            };
            let record = &server.record;
            // A server allocated from ALLOCATED holds no claim of this one: there is none to hand back.
            let claim_id = Some(claim_id).filter(|id| record.claim_id.as_ref() == Some(id));
            if late() {
                if let Some(claim_id) = &claim_id {
                    pool::release_claim(&this.store, &record.fleet_id, &record.game_server_id, claim_id).await?;
                }
                return Ok(None);
            }
            let taken = Taken {
                fleet_id: record.fleet_id.clone(),
                game_server_id: record.game_server_id.clone(),
                claim_id,
                replica,
            };
            Ok::<_, Status>(Some((server, Some(taken))))
        };
        let found = made_apart(self.store.clone(), making).await??;
        match found {
            Some(server) => {
                count("allocated");
                Ok(response(*server))
            }
            None if late() => {
                count("too_late");
                Err(Status::deadline_exceeded(
                    "the caller's deadline passed before an allocation could be answered; nothing was allocated",
                ))
            }
            None => {
                count("exhausted");
                Err(Status::resource_exhausted(
                    "no game server matches any of the selectors; nothing was allocated. Register more servers, wait \
                     for some to be ready, or widen the selectors",
                ))
            }
        }
    }
}

/// The answer: where the server is, its metadata, counters and lists after the allocation.
fn response(server: Described) -> pb::AllocationResponse {
    let Described { record, details } = server;
    let registration = &details.registration;
    let mut addresses = Vec::new();
    if !registration.ip_address.is_empty() {
        addresses.push(GameServerStatusAddress {
            r#type: "ExternalIP".into(),
            address: registration.ip_address.clone(),
        });
    }
    if !registration.dns_name.is_empty() {
        addresses.push(GameServerStatusAddress {
            r#type: "ExternalDNS".into(),
            address: registration.dns_name.clone(),
        });
    }
    let address = addresses
        .first()
        .map_or_else(|| record.connection_info.clone(), |first| first.address.clone());
    let mut ports = Vec::new();
    if registration.port != 0 {
        ports.push(GameServerStatusPort {
            name: "default".into(),
            port: registration.port as i32,
        });
    }
    ports.extend(details.ports.iter().map(|(name, port, _)| GameServerStatusPort {
        name: name.clone(),
        port: *port as i32,
    }));
    let mut labels: std::collections::HashMap<String, String> = details.labels.into_iter().collect();
    labels.insert(FLEET_LABEL.to_owned(), record.fleet_id.clone());
    pb::AllocationResponse {
        game_server_name: record.game_server_id,
        ports,
        address,
        addresses,
        node_name: record.instance_id,
        source: "local".into(),
        metadata: Some(GameServerMetadata {
            labels,
            annotations: details.annotations.into_iter().collect(),
        }),
        counters: details
            .counters
            .into_iter()
            .map(|(name, count, capacity)| {
                let status = CounterStatus {
                    count: Some(count),
                    capacity: Some(capacity),
                };
                (name, status)
            })
            .collect(),
        lists: details
            .lists
            .into_iter()
            .map(|(name, capacity, values)| {
                let status = ListStatus {
                    values,
                    capacity: Some(capacity),
                };
                (name, status)
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl AllocationService for Allocations {
    async fn allocate(
        &self,
        request: Request<pb::AllocationRequest>,
    ) -> Result<GrpcResponse<pb::AllocationResponse>, Status> {
        let deadline = caller_deadline(&request);
        Allocations::allocate(self, request.into_inner(), deadline)
            .await
            .map(GrpcResponse::new)
    }
}

/// `POST /gameserverallocation`: the request as proto3 JSON, the answer likewise; errors as grpc-gateway writes
/// them (`{"code", "message", "details"}` with the HTTP status of the gRPC code). Malformed JSON is 400 and
/// allocates nothing.
pub async fn allocate_json(State(allocations): State<Arc<Allocations>>, body: Bytes) -> Response {
    let request = if body.iter().all(u8::is_ascii_whitespace) {
        pb::AllocationRequest::default()
    } else {
        match json::from_json(&body) {
            Ok(request) => request,
            Err(err) => return error(&Status::invalid_argument(err.to_string())),
        }
    };
    match allocations.allocate(request, None).await {
        Ok(answer) => match json::to_gateway_json(&answer) {
            Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
            Err(err) => error(&Status::internal(err.to_string())),
        },
        Err(status) => error(&status),
    }
}

fn error(status: &Status) -> Response {
    json::gateway_error_response(status).into_response()
}
