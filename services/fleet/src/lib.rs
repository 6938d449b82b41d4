//! Berth's fleet service: fleets and their locations as records, with their capacity, standby, viability,
//! autoscaling suspension and events, and the reconciler that launches and stops their instances through a
//! provisioner. Any number of replicas may run: every change is one script over the fleet's Redis slot, a change
//! computed from a record is written only if what it was computed from (the revision, a location's version) has not
//! moved, and one replica at a time reconciles a location, under its lease. A deleted fleet's (or location's)
//! processes are told to terminate, and a background sweep turns it TERMINATED (removes it) once the last is gone.
//! Fleet events are also streamed to watchers (`watch.rs`), live counts read (`utilization.rs`), and
//! ScalingService is the autoscaler's.

mod fleets;
pub mod provisioner;
mod reconciler;
mod utilization;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use berth_proto::fleet::v1::fleet_service_server::FleetServiceServer;
use std::collections::HashMap;
use std::path::PathBuf;

use berth_runtime::auth::{AccessRules, Role, TokenKey};
use berth_runtime::{Background, ServiceDef, for_each_fleet};
use berth_store::{Store, sessions};
use tonic::service::Routes;

pub use fleets::Fleets;
use provisioner::Provisioner;
use provisioner::docker::DockerProvisioner;
use provisioner::process::ProcessProvisioner;
use reconciler::Reconciler;

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
    /// The provisioners this deployment configures, by name: a MANAGED fleet names one of them. `process` runs
    /// instances as local processes of this replica's host; `docker`, as containers of a Docker engine.
    #[arg(long, env = "BERTH_PROVISIONERS", value_delimiter = ',', default_value = "process",
        value_parser = clap::builder::PossibleValuesParser::new(["process", "docker"]))]
    pub provisioners: Vec<String>,
    /// The Docker engine the `docker` provisioner runs containers on (`unix:///var/run/docker.sock`,
    /// `tcp://host:2375`); Docker's own default (`DOCKER_HOST`, else the local socket) when unset.
    #[arg(long, env = "BERTH_DOCKER_HOST")]
    pub docker_host: Option<String>,
    /// Where the game servers it launches reach the health service's SDK endpoint.
    #[arg(long, env = "BERTH_SDK_ENDPOINT", default_value = "http://127.0.0.1:7104")]
    pub sdk_endpoint: String,
    /// How often each location's instances are reconciled with its desired count, in ms.
    #[arg(long, env = "BERTH_RECONCILE_MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    pub reconcile_ms: u64,
    /// How long a replica's lease on a location lasts unless renewed, in ms: another replica takes the location
    /// over this long after its holder stops.
    #[arg(long, env = "BERTH_LEASE_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..))]
    pub lease_ms: u64,
    /// This replica's id among fleet replicas. A fresh UUID when unset.
    #[arg(long, env = "BERTH_REPLICA_ID")]
    pub replica_id: Option<String>,
    /// How long the token a launched game server gets is valid, in seconds.
    #[arg(long, env = "BERTH_GAME_SERVER_TOKEN_TTL_SECONDS", default_value_t = 7 * 86_400, value_parser = clap::value_parser!(u64).range(60..))]
    pub game_server_token_ttl_seconds: u64,
    /// How long the record of a process declared lost (its instance gone) stays readable, in ms.
    #[arg(long, env = "BERTH_LOST_RETENTION_MS", default_value_t = 3_600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub lost_retention_ms: u64,
    /// Directory for the output of processes the `process` provisioner launches (`<game-server id>.log`);
    /// discarded when unset.
    #[arg(long, env = "BERTH_PROCESS_LOG_DIR")]
    pub process_log_dir: Option<PathBuf>,
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
            docker_host: None,
            sdk_endpoint: "http://127.0.0.1:7104".into(),
            reconcile_ms: 500,
            lease_ms: 5000,
            replica_id: None,
            game_server_token_ttl_seconds: 7 * 86_400,
            lost_retention_ms: 3_600_000,
            process_log_dir: None,
            retention_ms: 7 * 86_400_000,
            sweep_ms: 1000,
        }
    }
}

/// What the handlers share.
pub(crate) struct Context {
    pub(crate) store: Store,
    pub(crate) args: FleetArgs,
    /// Becomes true when the replica shuts down: watches then end with UNAVAILABLE and their clients resume
    /// through another replica.
    pub(crate) closing: tokio::sync::watch::Sender<bool>,
}

/// The fleet service over `store`; `tokens` signs the tokens of the game servers it launches (none in an insecure
/// deployment).
pub fn service(store: Store, args: &FleetArgs, tokens: Option<TokenKey>) -> ServiceDef {
    let context = Arc::new(Context {
        store,
        args: args.clone(),
        closing: tokio::sync::watch::Sender::new(false),
    });
    let background = Background::new();
    let reconciler = Arc::new(reconciler(&context.store, args, tokens));
    let reconciling = reconciler.clone();
    background.every("reconcile", Duration::from_millis(args.reconcile_ms), move || {
        let reconciler = reconciling.clone();
        async move { reconciler.pass().await }
    });
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
    let closing = context.clone();
    ServiceDef {
        name: "berth-fleet",
        grpc_services: &["berth.fleet.v1.FleetService", "berth.fleet.v1.ScalingService"],
        rules: RULES,
        on_shutdown: Some(Box::new(move || {
            closing.closing.send_replace(true);
            tokio::spawn(async move { reconciler.release().await });
        })),
        background,
        routes: Routes::new(FleetServiceServer::new(Fleets::new(context))),
    }
}

fn reconciler(store: &Store, args: &FleetArgs, tokens: Option<TokenKey>) -> Reconciler {
    let mut provisioners: HashMap<String, Arc<dyn Provisioner>> = HashMap::new();
    for name in &args.provisioners {
        let provisioner: Arc<dyn Provisioner> = match name.as_str() {
            "process" => Arc::new(ProcessProvisioner {
                log_dir: args.process_log_dir.clone(),
            }),
            "docker" => Arc::new(DockerProvisioner::new(args.docker_host.clone())),
            // Fleets naming it are recorded, and left to a replica that runs it.
            other => {
                tracing::warn!(provisioner = other, "provisioner not run by this replica");
                continue;
            }
        };
        provisioners.insert(name.clone(), provisioner);
    }
    let settings = reconciler::Settings {
        holder: args
            .replica_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string()),
        lease_ms: args.lease_ms,
        sdk_endpoint: args.sdk_endpoint.clone(),
        token_ttl_s: args.game_server_token_ttl_seconds,
        lost_retention_ms: args.lost_retention_ms,
    };
    Reconciler::new(store.clone(), settings, provisioners, tokens)
}
