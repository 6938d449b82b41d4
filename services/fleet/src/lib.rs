//! Berth's fleet service: fleets and their locations as records, with their capacity, standby, viability,
//! autoscaling suspension and events, and the reconciler that launches and stops their instances through a
//! provisioner. Any number of replicas may run: every change is one script over the fleet's Redis slot, a change
//! computed from a record is written only if what it was computed from (the revision, a location's version) has not
//! moved, and one replica at a time reconciles a location, under its lease. A deleted fleet's (or location's)
//! processes are told to terminate, and a background sweep turns it TERMINATED (removes it) once the last is gone.
//! Fleet events are also streamed to watchers (`watch.rs`), live counts shown on the records (`utilization.rs`;
//! their figures are `berth_domain::fleet::utilization`'s), and ScalingService is the autoscaler's.

mod autoscaler;
mod fleets;
mod metrics;
pub mod provisioner;
mod reconciler;
mod scaling;
mod utilization;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use berth_proto::fleet::v1::fleet_service_server::FleetServiceServer;
use berth_proto::fleet::v1::scaling_service_server::ScalingServiceServer;
use std::collections::HashMap;
use std::path::PathBuf;

use berth_runtime::auth::{AccessRules, Role, TokenKey};
use berth_runtime::{Background, ServiceDef, for_each_fleet};
use berth_store::{Store, endings};
use tonic::service::Routes;

pub use fleets::Fleets;
use provisioner::Provisioner;
use provisioner::docker::DockerProvisioner;
use provisioner::http::{ClientError, HttpProvisioner};
use provisioner::process::ProcessProvisioner;
use reconciler::Reconciler;
use scaling::Scaling;

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
    /// instances as local processes of this replica's host; `docker`, as containers of a Docker engine; `http` has
    /// the operator's hosting API at `--http-provisioner-url` launch and stop them.
    #[arg(long, env = "BERTH_PROVISIONERS", value_delimiter = ',', default_value = "process",
        value_parser = clap::builder::PossibleValuesParser::new(["process", "docker", "http"]))]
    pub provisioners: Vec<String>,
    /// The Docker engine the `docker` provisioner runs containers on (`unix:///var/run/docker.sock`,
    /// `tcp://host:2375`); Docker's own default (`DOCKER_HOST`, else the local socket) when unset.
    #[arg(long, env = "BERTH_DOCKER_HOST")]
    pub docker_host: Option<String>,
    /// The operator's hosting API that the `http` provisioner drives (`proto/berth/fleet/v1/hosting.proto`): an
    /// http:// or https:// URL, to which `/launch`, `/describe` and `/stop` are appended. Required with `http`.
    #[arg(long, env = "BERTH_HTTP_PROVISIONER_URL", value_parser = hosting_url,
        required_if_eq("provisioners", "http"))]
    pub http_provisioner_url: Option<reqwest::Url>,
    /// Bearer token the `http` provisioner sends to the hosting API with every request; none when unset.
    #[arg(long, env = "BERTH_HTTP_PROVISIONER_TOKEN", hide_env_values = true)]
    pub http_provisioner_token: Option<String>,
    /// How long the hosting API has to answer each request of the `http` provisioner, in ms (1 to 600000).
    #[arg(long, env = "BERTH_HTTP_PROVISIONER_TIMEOUT_MS", default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub http_provisioner_timeout_ms: u64,
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
    /// How often DELETING fleets and locations are checked for their last process gone, and fleets past their
    /// retention taken off the list of fleets, in ms.
    #[arg(long, env = "BERTH_FLEET_SWEEP_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub sweep_ms: u64,
}

impl Default for FleetArgs {
    fn default() -> FleetArgs {
        FleetArgs {
            provisioners: vec!["process".into()],
            docker_host: None,
            http_provisioner_url: None,
            http_provisioner_token: None,
            http_provisioner_timeout_ms: 10_000,
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
    /// Follows the event streams this replica's watches cover.
    pub(crate) tails: berth_runtime::watch::Tails<berth_store::fleets::FleetEventEntry>,
}

/// The fleet service over `store`; `tokens` signs the tokens of the game servers it launches (none in an insecure
/// deployment).
pub fn service(store: Store, args: &FleetArgs, tokens: Option<TokenKey>) -> ServiceDef {
    metrics::describe();
    let context = Arc::new(Context {
        store,
        args: args.clone(),
        closing: tokio::sync::watch::Sender::new(false),
        tails: berth_runtime::watch::Tails::default(),
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
                let finished = endings::finish_fleet_deletion(store, &fleet, retention_ms).await?;
                for location in &finished.removed {
                    tracing::info!(fleet = %fleet, location = %location, "location removed: its last process is gone");
                }
                if finished.terminated {
                    tracing::info!(fleet = %fleet, "fleet terminated: its last process is gone");
                }
                if finished.gone {
                    berth_store::fleets::forget(store, &fleet).await?;
                    tracing::info!(fleet = %fleet, "fleet forgotten: nothing of it is left");
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
        has_room: None,
        routes: Routes::new(FleetServiceServer::new(Fleets::new(context.clone())))
            .add_service(ScalingServiceServer::new(Scaling::new(context))),
    }
}

/// A hosting API's URL: an absolute http:// or https:// one.
fn hosting_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text).map_err(|err| format!("not a URL: {err}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!("must be an http:// or https:// URL, not {other}://")),
    }
}

/// Why the `http` provisioner cannot run.
#[derive(Debug, thiserror::Error)]
enum HttpSetupError {
    #[error("no hosting API: set --http-provisioner-url (BERTH_HTTP_PROVISIONER_URL)")]
    NoUrl,
    #[error(transparent)]
    Client(#[from] ClientError),
}

fn http_provisioner(args: &FleetArgs) -> Result<HttpProvisioner, HttpSetupError> {
    let url = args.http_provisioner_url.clone().ok_or(HttpSetupError::NoUrl)?;
    let timeout = Duration::from_millis(args.http_provisioner_timeout_ms);
    Ok(HttpProvisioner::new(url, args.http_provisioner_token.clone(), timeout)?)
}

fn reconciler(store: &Store, args: &FleetArgs, tokens: Option<TokenKey>) -> Reconciler {
    let mut provisioners: HashMap<String, Arc<dyn Provisioner>> = HashMap::new();
    for name in &args.provisioners {
        let provisioner: Arc<dyn Provisioner> = match name.as_str() {
            "process" => Arc::new(ProcessProvisioner::new(args.process_log_dir.clone())),
            "docker" => Arc::new(DockerProvisioner::new(args.docker_host.clone())),
            "http" => match http_provisioner(args) {
                Ok(provisioner) => Arc::new(provisioner),
                Err(err) => {
                    tracing::error!(error = %err, "the http provisioner is not run by this replica");
                    continue;
                }
            },
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        fleets: FleetArgs,
    }

    fn parse(args: &[&str]) -> Result<FleetArgs, String> {
        Cli::try_parse_from(std::iter::once("berth-fleet").chain(args.iter().copied()))
            .map(|cli| cli.fleets)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn the_http_provisioner_needs_an_http_url() {
        let http = |url: &str, more: &[&str]| {
            parse(&[&["--provisioners", "http", "--http-provisioner-url", url][..], more].concat())
        };
        let err = parse(&["--provisioners", "process,http"]).unwrap_err();
        assert!(err.contains("--http-provisioner-url"), "{err}");
        let err = http("ftp://host/", &[]).unwrap_err();
        assert!(err.contains("must be an http:// or https:// URL, not ftp://"), "{err}");
        let err = parse(&["--http-provisioner-url", "hosting"]).unwrap_err();
        assert!(err.contains("not a URL"), "{err}");
        let err = http("http://h/", &["--http-provisioner-timeout-ms", "0"]).unwrap_err();
        assert!(err.contains("--http-provisioner-timeout-ms"), "{err}");

        let args = http("https://hosting.example/berth/", &[]).unwrap();
        assert_eq!(args.provisioners, ["http"]);
        assert_eq!(args.http_provisioner_timeout_ms, 10_000);
        assert!(http_provisioner(&args).is_ok());
        assert!(matches!(
            http_provisioner(&FleetArgs::default()),
            Err(HttpSetupError::NoUrl)
        ));
    }
}
