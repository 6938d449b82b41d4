//! Berth's fleet service: fleets and their locations as records, with their capacity, standby, viability,
//! autoscaling suspension and events. Any number of replicas may run: every change is one script over the fleet's
//! Redis slot, and a change computed from a record is written only if the fleet is still at that record's revision.
//! Instances are not provisioned yet: the reconciler and provisioners, WatchFleetEvents, GetFleetUtilization,
//! deletion of fleets and locations answer UNIMPLEMENTED until they land; ScalingService is the
//! autoscaler's.

mod fleets;

use std::sync::Arc;

use berth_proto::fleet::v1::fleet_service_server::FleetServiceServer;
use berth_runtime::auth::{AccessRules, Role};
use berth_runtime::{Background, ServiceDef};
use berth_store::Store;
use tonic::service::Routes;

pub use fleets::Fleets;

/// Default gRPC port.
pub const GRPC_PORT: u16 = 7103;
/// Default metrics port.
pub const METRICS_PORT: u16 = 9103;

const RULES: AccessRules = &[
    ("/berth.fleet.v1.FleetService/", &[Role::Operator]),
    ("/berth.fleet.v1.ScalingService/", &[Role::Operator]),
];

/// Settings of the fleet service.
#[derive(clap::Args, Clone, Debug)]
pub struct FleetArgs {
    /// The provisioners this deployment configures, by name: a MANAGED fleet names one of them.
    #[arg(long, env = "BERTH_PROVISIONERS", value_delimiter = ',', default_value = "process")]
    pub provisioners: Vec<String>,
}

impl Default for FleetArgs {
    fn default() -> FleetArgs {
        FleetArgs {
            provisioners: vec!["process".into()],
        }
    }
}

/// What the handlers share.
pub(crate) struct Context {
    pub(crate) store: Store,
    pub(crate) args: FleetArgs,
}

/// The fleet service over `store`.
pub fn service(store: Store, args: &FleetArgs) -> ServiceDef {
    let context = Arc::new(Context {
        store,
        args: args.clone(),
    });
    ServiceDef {
        name: "berth-fleet",
        grpc_services: &["berth.fleet.v1.FleetService", "berth.fleet.v1.ScalingService"],
        rules: RULES,
        on_shutdown: None,
        background: Background::new(),
        routes: Routes::new(FleetServiceServer::new(Fleets::new(context))),
    }
}
