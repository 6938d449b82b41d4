//! Berth's placement service: direct claims (FleetIQ's ClaimGameServer) and game session queues as records today,
//! queue placements as later work adds them. Any number of replicas may run; all state is in Redis and every claim
//! and every change of a queue is one atomic script.

mod claims;
mod expiry;
mod metrics;
mod queues;

use std::time::Duration;

use berth_proto::placement::v1::claim_service_server::ClaimServiceServer;
use berth_proto::placement::v1::queue_service_server::QueueServiceServer;
use berth_runtime::auth::{AccessRules, Role};
use berth_runtime::{Background, ServiceDef};
use berth_store::Store;
use tonic::service::Routes;

pub use claims::Claims;
pub use queues::Queues;

/// Default gRPC port.
pub const GRPC_PORT: u16 = 7101;
/// Default metrics port.
pub const METRICS_PORT: u16 = 9101;

const RULES: AccessRules = &[
    ("/berth.placement.v1.ClaimService/", &[Role::Operator, Role::Client]),
    ("/berth.placement.v1.PlacementService/", &[Role::Operator, Role::Client]),
    ("/berth.placement.v1.QueueService/", &[Role::Operator]),
];

/// Settings of the placement service.
#[derive(clap::Args, Clone, Debug)]
pub struct PlacementArgs {
    /// How long a claim holds a game server before it lapses back to the pool unless reported UTILIZED, in ms.
    #[arg(long, env = "BERTH_CLAIM_TIMEOUT_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub claim_timeout_ms: u64,
    /// How often lapsed claims are swept back to the pool, in ms. Claims also lapse on their own at the next
    /// claim in the same fleet, so this bounds only how stale the pool looks to readers and metrics.
    #[arg(long, env = "BERTH_CLAIM_SWEEP_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub claim_sweep_ms: u64,
}

/// The placement service over `store`, with its claim sweeper running in the background.
pub fn service(store: Store, args: &PlacementArgs) -> ServiceDef {
    metrics::describe();
    let background = Background::new();
    let sweeping = store.clone();
    background.every("claim_expiry", Duration::from_millis(args.claim_sweep_ms), move || {
        expiry::sweep(sweeping.clone())
    });
    ServiceDef {
        name: "berth-placement",
        grpc_services: &[
            "berth.placement.v1.ClaimService",
            "berth.placement.v1.PlacementService",
            "berth.placement.v1.QueueService",
        ],
        rules: RULES,
        on_shutdown: None,
        background,
        routes: Routes::new(ClaimServiceServer::new(Claims::new(
            store.clone(),
            args.claim_timeout_ms,
        )))
        .add_service(QueueServiceServer::new(Queues::new(store))),
    }
}
