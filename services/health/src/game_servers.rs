//! GameServerService: the FleetIQ-style calls with which game servers join a fleet's pool, report utilization
//! and health, and leave. Each call is checked, scoped to the caller, and done in one script.

use berth_domain::game_server::{self as domain, UtilizationChange, timestamp};
use berth_proto::health::v1 as pb;
use berth_proto::health::v1::game_server_service_server::GameServerService;
use berth_runtime::auth::{Caller, Role};
use berth_store::Store;
use berth_store::endings::{self, Terminating};
use berth_store::pool::{self as store, Deregistered, Registered, Registration, Update, Updated};
use berth_store::processes;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::Context;
use crate::push::announce;

/// The handlers.
pub struct GameServers {
    store: Store,
    context: Arc<Context>,
}

impl GameServers {
    pub(crate) fn new(context: Arc<Context>) -> GameServers {
        // Kept beside the context only to keep the handlers short: it is the same store.
        GameServers {
            store: context.store.clone(),
            context,
        }
    }
}

fn not_found(fleet_id: &str, game_server_id: &str) -> Status {
    Status::not_found(format!(
        "game server {game_server_id:?} is not registered in fleet {fleet_id:?}"
    ))
}

#[tonic::async_trait]
impl GameServerService for GameServers {
    async fn register_game_server(
        &self,
        request: Request<pb::RegisterGameServerRequest>,
    ) -> Result<Response<pb::RegisterGameServerResponse>, Status> {
        let caller = Caller::of(&request)?.clone();
        let req = request.into_inner();
        domain::check_register(&req)?;
        caller.check_game_server(&req.fleet_id, &req.game_server_id)?;
        let registration = Registration {
            fleet_id: &req.fleet_id,
            game_server_id: &req.game_server_id,
            instance_id: &req.instance_id,
            connection_info: &req.connection_info,
            game_server_data: &req.game_server_data,
        };
        match store::register(&self.store, &registration).await? {
            Registered::New(server) => {
                crate::metrics::registered();
                Ok(Response::new(pb::RegisterGameServerResponse {
                    game_server: Some((*server).into()),
                }))
            }
            Registered::AlreadyExists => Err(Status::already_exists(format!(
                "game server {:?} is already registered in fleet {:?}, otherwise or in use; deregister it first or pick \
                 another id",
                req.game_server_id, req.fleet_id
            ))),
            Registered::NoFleet(why) => Err(Status::not_found(format!("fleet {:?}: {why}", req.fleet_id))),
            Registered::Deleting(why) => Err(Status::failed_precondition(format!(
                "fleet {:?} takes no new game server: {why}",
                req.fleet_id
            ))),
        }
    }

    async fn update_game_server(
        &self,
        request: Request<pb::UpdateGameServerRequest>,
    ) -> Result<Response<pb::UpdateGameServerResponse>, Status> {
        let caller = Caller::of(&request)?.clone();
        let req = request.into_inner();
        let utilization = domain::check_update(&req)?;
        caller.check_game_server(&req.fleet_id, &req.game_server_id)?;
        let update = Update {
            fleet_id: &req.fleet_id,
            game_server_id: &req.game_server_id,
            game_server_data: req.game_server_data.as_deref(),
            utilization,
            healthy: req.health_check() == pb::HealthCheck::Healthy,
            claim_id: Some(req.claim_id.as_str()).filter(|id| !id.is_empty()),
            claimant_only: caller.claims.role == Role::Client,
        };
        match store::update(&self.store, &update).await? {
            Updated::Done(server) => {
                if utilization == UtilizationChange::Utilized {
                    crate::metrics::utilized();
                }
                Ok(Response::new(pb::UpdateGameServerResponse {
                    game_server: Some((*server).into()),
                }))
            }
            Updated::NotFound => Err(not_found(&req.fleet_id, &req.game_server_id)),
            Updated::NotClaimant => Err(Status::failed_precondition(format!(
                "claim_id {:?} is not the live claim on game server {:?} (it lapsed, or was never this one); a \
                 client may update only a server it holds the claim on",
                req.claim_id, req.game_server_id
            ))),
            Updated::ClaimLapsed => Err(Status::failed_precondition(format!(
                "the claim on game server {:?} lapsed and it went back to the pool; claim it again before \
                 marking it UTILIZED",
                req.game_server_id
            ))),
            Updated::AlreadyUtilized => Err(Status::failed_precondition(format!(
                "game server {:?} is UTILIZED and never goes back to AVAILABLE; deregister it when its game ends",
                req.game_server_id
            ))),
        }
    }

    async fn deregister_game_server(
        &self,
        request: Request<pb::DeregisterGameServerRequest>,
    ) -> Result<Response<pb::DeregisterGameServerResponse>, Status> {
        let caller = Caller::of(&request)?.clone();
        let req = request.into_inner();
        domain::check_server_request(&req.fleet_id, &req.game_server_id)?;
        caller.check_game_server(&req.fleet_id, &req.game_server_id)?;
        match store::deregister(&self.store, &req.fleet_id, &req.game_server_id).await? {
            Deregistered::Done => Ok(Response::new(pb::DeregisterGameServerResponse {})),
            Deregistered::NotFound => Err(not_found(&req.fleet_id, &req.game_server_id)),
            Deregistered::SdkProcess => Err(Status::failed_precondition(format!(
                "game server {:?} holds an SDK stream: it leaves by ProcessEnding (or TerminateGameServer), which also \
                 ends its sessions",
                req.game_server_id
            ))),
        }
    }

    async fn describe_game_server(
        &self,
        request: Request<pb::DescribeGameServerRequest>,
    ) -> Result<Response<pb::DescribeGameServerResponse>, Status> {
        let caller = Caller::of(&request)?.clone();
        let req = request.into_inner();
        domain::check_server_request(&req.fleet_id, &req.game_server_id)?;
        caller.check_game_server(&req.fleet_id, &req.game_server_id)?;
        match store::describe(&self.store, &req.fleet_id, &req.game_server_id).await? {
            Some(server) => Ok(Response::new(pb::DescribeGameServerResponse {
                game_server: Some(server.into()),
            })),
            None => Err(not_found(&req.fleet_id, &req.game_server_id)),
        }
    }

    async fn list_game_servers(
        &self,
        request: Request<pb::ListGameServersRequest>,
    ) -> Result<Response<pb::ListGameServersResponse>, Status> {
        let req = request.into_inner();
        let size = domain::check_list(&req)?;
        let page = store::list(&self.store, &req.fleet_id, &req.page_token, size as u32).await?;
        Ok(Response::new(pb::ListGameServersResponse {
            game_servers: page.game_servers.into_iter().map(Into::into).collect(),
            next_page_token: page.next_after.unwrap_or_default(),
        }))
    }

    async fn terminate_game_server(
        &self,
        request: Request<pb::TerminateGameServerRequest>,
    ) -> Result<Response<pb::TerminateGameServerResponse>, Status> {
        let req = request.into_inner();
        let reason = domain::check_terminate(&req)?;
        let outcome = endings::terminate(&self.store, &req.fleet_id, &req.game_server_id, reason).await?;
        match outcome {
            Terminating::Terminating(routing) => {
                announce(&self.context, &routing, &req.fleet_id, &req.game_server_id).await;
                let desired = processes::desired_state(&self.store, &req.fleet_id, &req.game_server_id).await?;
                let deadline = desired
                    .and_then(|desired| desired.termination)
                    .map(|t| timestamp(t.deadline_ms));
                Ok(Response::new(pb::TerminateGameServerResponse {
                    termination_deadline: deadline,
                }))
            }
            Terminating::NotFound => Err(not_found(&req.fleet_id, &req.game_server_id)),
            Terminating::Lost => Err(Status::failed_precondition(format!(
                "game server {:?} was already declared lost",
                req.game_server_id
            ))),
        }
    }

    async fn set_instance_status(
        &self,
        request: Request<pb::SetInstanceStatusRequest>,
    ) -> Result<Response<pb::SetInstanceStatusResponse>, Status> {
        let req = request.into_inner();
        let status = domain::check_set_instance_status(&req)?;
        let count = store::set_instance_status(&self.store, &req.fleet_id, &req.instance_id, status).await?;
        Ok(Response::new(pb::SetInstanceStatusResponse {
            game_server_count: count,
        }))
    }
}
