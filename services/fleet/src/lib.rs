//! Berth's fleet service: fleets, capacity and scaling. Its RPCs are declared in `proto/berth/fleet/v1` and answer UNIMPLEMENTED
//! until the issues that build them land; the process already serves health, reflection and metrics, so that
//! deployments and `make run` have their final shape.

use berth_runtime::auth::{AccessRules, Role};
use berth_runtime::{Background, ServiceDef};
use berth_store::Store;
use tonic::service::Routes;

/// Default gRPC port.
pub const GRPC_PORT: u16 = 7103;
/// Default metrics port.
pub const METRICS_PORT: u16 = 9103;

const RULES: AccessRules = &[
    ("/berth.fleet.v1.FleetService/", &[Role::Operator]),
    ("/berth.fleet.v1.ScalingService/", &[Role::Operator]),
];

/// The fleet service over `store`.
pub fn service(_store: Store) -> ServiceDef {
    ServiceDef {
        name: "berth-fleet",
        grpc_services: &["berth.fleet.v1.FleetService", "berth.fleet.v1.ScalingService"],
        rules: RULES,
        on_shutdown: None,
        background: Background::new(),
        routes: Routes::default(),
    }
}
