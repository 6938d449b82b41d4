//! ClaimService: hands one free game server of a fleet to one caller, atomically, for the claim timeout.

use berth_domain::game_server as domain;
use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::claim_service_server::ClaimService;
use berth_store::Store;
use berth_store::pool::{self as store, Claim, Claimed};
use tonic::{Request, Response, Status};

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

#[tonic::async_trait]
impl ClaimService for Claims {
    async fn claim_game_server(
        &self,
        request: Request<pb::ClaimGameServerRequest>,
    ) -> Result<Response<pb::ClaimGameServerResponse>, Status> {
        let req = request.into_inner();
        let tiers = domain::check_claim(&req)?;
        let claim_id = uuid::Uuid::now_v7().to_string();
        let claim = Claim {
            fleet_id: &req.fleet_id,
            game_server_id: Some(req.game_server_id.as_str()).filter(|id| !id.is_empty()),
            game_server_data: req.game_server_data.as_deref(),
            tiers,
            timeout_ms: self.timeout_ms,
            claim_id: &claim_id,
        };
        match store::claim(&self.store, &claim).await? {
            Claimed::Claimed(server) => {
                count("claimed");
                Ok(Response::new(pb::ClaimGameServerResponse {
                    game_server: Some(server.into()),
                    claim_id,
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
