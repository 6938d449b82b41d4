//! ClaimService: hands one free game server of a fleet to one caller, atomically, for the claim timeout. A claim
//! is answered within the caller's deadline or not made: one that would start after it is refused, and one whose
//! answer comes too late is handed straight back to the pool (`apart`), so that no server waits a whole claim timeout
//! for a caller that gave up.

use std::time::Instant;

use berth_domain::game_server::{self as domain, ClaimTiers};
use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::claim_service_server::ClaimService;
use berth_runtime::deadline::caller_deadline;
use berth_store::pool::{self as store, Claim, Claimed};
use berth_store::{Store, StoreError};
use tonic::{Request, Response, Status};

use crate::apart::{Taken, made_apart};

/// The handlers, over the shared store.
pub struct Claims {
    store: Store,
    timeout_ms: u64,
}

impl Claims {
    /// Handlers over `store`, whose claims last `timeout_ms`.
    pub fn new(store: Store, timeout_ms: u64) -> Claims {
        Claims { store, timeout_ms }
    }
}

fn count(outcome: &'static str) {
    crate::metrics::claim(outcome);
}

/// Makes a claim (`claim`: its timeout in ms and its id) unless `deadline` passed already, and hands it back when it
/// was made too late for the caller to hear of it; `None` then. A server taken comes with what to announce.
async fn claim_in_time(
    store: Store,
    req: pb::ClaimGameServerRequest,
    tiers: ClaimTiers,
    (timeout_ms, claim_id): (u64, String),
    deadline: Option<Instant>,
) -> Result<Option<(Claimed, Option<Taken>)>, StoreError> {
    let late = || deadline.is_some_and(|at| Instant::now() >= at);
    if late() {
        return Ok(None);
    }
    let claim = Claim {
        fleet_id: &req.fleet_id,
        game_server_id: Some(req.game_server_id.as_str()).filter(|id| !id.is_empty()),
        game_server_data: req.game_server_data.as_deref(),
        tiers,
        timeout_ms,
        claim_id: &claim_id,
        token: &req.idempotency_token,
    };
    let claimed = store::claim(&store, &claim).await?;
    let Claimed::Claimed { server, replica } = &claimed else {
        return Ok(Some((claimed, None)));
    };
    // A claim made under a token may be answered to another call with the same token (a retry racing this one),
    // so no call hands it back: unheard, it lapses with its timeout, or a retry with the token gets it.
    let unheard = Some(claim_id).filter(|_| req.idempotency_token.is_empty());
    if late() {
        if let Some(claim_id) = &unheard {
            store::release_claim(&store, &req.fleet_id, &server.game_server_id, claim_id).await?;
        }
        return Ok(None);
    }
    let taken = Taken {
        fleet_id: req.fleet_id.clone(),
        game_server_id: server.game_server_id.clone(),
        claim_id: unheard,
        replica: replica.clone(),
    };
    Ok(Some((claimed, Some(taken))))
}

#[tonic::async_trait]
impl ClaimService for Claims {
    async fn claim_game_server(
        &self,
        request: Request<pb::ClaimGameServerRequest>,
    ) -> Result<Response<pb::ClaimGameServerResponse>, Status> {
        let deadline = caller_deadline(&request);
        let req = request.into_inner();
        let tiers = domain::check_claim(&req)?;
        let claim_id = uuid::Uuid::now_v7().to_string();
        let making = claim_in_time(
            self.store.clone(),
            req.clone(),
            tiers,
            (self.timeout_ms, claim_id.clone()),
            deadline,
        );
        let claimed = made_apart(self.store.clone(), making).await??;
        let Some(claimed) = claimed else {
            count("too_late");
            return Err(Status::deadline_exceeded(
                "the caller's deadline passed before a claim could be answered; no server was claimed, or, with an \
                 idempotency token, the claim made holds until it lapses: a retry with the token gets it",
            ));
        };
        match claimed {
            Claimed::Claimed { server, .. } => {
                count("claimed");
                Ok(Response::new(pb::ClaimGameServerResponse {
                    claim_id: server.claim_id.clone().unwrap_or(claim_id),
                    game_server: Some(server.into()),
                }))
            }
            Claimed::Exhausted => {
                count("exhausted");
                Err(Status::resource_exhausted(format!(
                    "fleet {:?} has no AVAILABLE, unclaimed game server that the filter allows; register more \
                     servers or retry later",
                    req.fleet_id
                )))
            }
            Claimed::NotFound => {
                count("not_found");
                Err(Status::not_found(format!(
                    "game server {:?} is not registered in fleet {:?}",
                    req.game_server_id, req.fleet_id
                )))
            }
            Claimed::Conflict(server) => {
                count("conflict");
                Err(if server.utilized {
                    Status::failed_precondition(format!(
                        "game server {:?} is UTILIZED and is never claimed again",
                        server.game_server_id
                    ))
                } else if let Some(until_ms) = server.reserved_until_ms {
                    Status::failed_precondition(format!(
                        "game server {:?} has reserved itself until {until_ms} ms since the epoch (Agones Reserve); \
                         claim another",
                        server.game_server_id
                    ))
                } else if server.is_claimed() {
                    Status::aborted(format!(
                        "game server {:?} is claimed by another caller until its claim lapses; claim another or \
                         retry later",
                        server.game_server_id
                    ))
                } else {
                    Status::failed_precondition(format!(
                        "game server {:?} is on a {} instance, which the filter excludes or which allows no claims",
                        server.game_server_id,
                        server.instance_status.as_str()
                    ))
                })
            }
        }
    }
}
