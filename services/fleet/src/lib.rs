//! Berth's fleet service: fleets and their locations as records, with their capacity, standby, viability,
//! autoscaling suspension and events. Any number of replicas may run: every change is one script over the fleet's
//! Redis slot, and a change computed from a record is written only if what it was computed from (the revision, a
//! location's version) has not moved. A deleted fleet's (or location's) processes are told to terminate, and a
//! background sweep turns it TERMINATED (removes it) once the last is gone. Instances are not provisioned yet: the
//! reconciler and provisioners are still to come, WatchFleetEvents and GetFleetUtilization answer UNIMPLEMENTED
//! until they land, and ScalingService is the autoscaler's.

mod fleets;

use std::sync::Arc;
use std::time::Duration;

use berth_proto::fleet::v1::fleet_service_server::FleetServiceServer;
use berth_runtime::auth::{AccessRules, Role};
use berth_runtime::{Background, ServiceDef, for_each_fleet};
use berth_store::{Store, sessions};
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
    /// How long fleet events are kept, and a TERMINATED fleet stays readable, in ms.
    #[arg(long, env = "BERTH_FLEET_RETENTION_MS", default_value_t = 7 * 86_400_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub retention_ms: u64,
    /// How often DELETING fleets and locations are checked for their last process gone, in ms.
    #[arg(long, env = "BERTH_FLEET_SWEEP_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub sweep_ms: u64,
}

impl Default for FleetArgs {
    fn default() -> FleetArgs {
        FleetArgs {
            provisioners: vec!["process".into()],
            retention_ms: 7 * 86_400_000,
            sweep_ms: 1000,
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
    let background = Background::new();
    let sweeping = context.clone();
    background.every("fleet_deletion", Duration::from_millis(args.sweep_ms), move || {
        let context = sweeping.clone();
        async move {
            let (store, retention_ms) = (&context.store, context.args.retention_ms);
            for_each_fleet(store, "fleet_deletion", |fleet| async move {
                let finished = sessions::finish_fleet_deletion(store, &fleet, retention_ms).await?;
                for location in &finished.removed {
                    tracing::info!(fleet = %fleet, location = %location, "location removed: its last process is gone");
                }
                if finished.terminated {
                    tracing::info!(fleet = %fleet, "fleet terminated: its last process is gone");
                }
                Ok(())
            })
            .await
            .map(drop)
        }
    });
    ServiceDef {
        name: "berth-fleet",
        grpc_services: &["berth.fleet.v1.FleetService", "berth.fleet.v1.ScalingService"],
        rules: RULES,
        on_shutdown: None,
        background,
        routes: Routes::new(FleetServiceServer::new(Fleets::new(context))),
    }
}
