//! The gRPC server around a service's routes: `grpc.health.v1` (NOT_SERVING while Redis is unreachable),
//! reflection v1 and v1alpha, the auth and metrics edge, optional TLS, and a graceful shutdown that stops
//! accepting, lets in-flight calls finish within a grace period, then returns.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use berth_store::Store;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::auth::{AccessRules, AuthMode, TokenKey};
use crate::background::Background;
use crate::config::{CommonArgs, ListenArgs};
use crate::edge::EdgeLayer;

/// The health-check name that reports only whether the process is up, whatever Redis does: for liveness probes,
/// so that an orchestrator does not restart every replica during a Redis outage. The empty name and the services'
/// own names track Redis, for readiness.
pub const LIVENESS: &str = "liveness";

/// The health-check name that reports whether Redis takes writes: NOT_SERVING while it is unreachable or at its
/// `maxmemory`, when every change is refused RESOURCE_EXHAUSTED and reads still work. Not for readiness (a replica
/// still serves reads); for an operator's alert, and for a client that would rather not try.
pub const WRITES: &str = "writes";

/// The health-check name that reports whether the replica takes new work: NOT_SERVING while it turns new work away
/// because it is behind on what it already holds (a health replica more than a second behind writing heartbeats
/// refuses new SDK streams with RESOURCE_EXHAUSTED), SERVING otherwise. Not for readiness, which would take the
/// replica's held streams' address away from a load balancer too; for an operator's alert and dashboards, and for
/// a router that places new streams by load. SERVING always for a service that never turns work away.
pub const CAPACITY: &str = "capacity";

/// Whether a replica takes new work now; see [`CAPACITY`].
pub type HasRoom = Box<dyn Fn() -> bool + Send + Sync>;

/// One service, as the server needs to know it.
pub struct ServiceDef {
    /// The process's name, e.g. `berth-placement`.
    pub name: &'static str,
    /// Full names of the gRPC services it serves, e.g. `berth.placement.v1.ClaimService`, each reported in
    /// `grpc.health.v1`.
    pub grpc_services: &'static [&'static str],
    /// Which roles may call which of its RPCs.
    pub rules: AccessRules,
    /// Its routes.
    pub routes: Routes,
    /// Called when shutdown begins, before calls in flight are waited for: a service holding long-lived streams
    /// ends them here so that their clients move to another replica at once instead of at the grace period's end.
    pub on_shutdown: Option<Box<dyn FnOnce() + Send>>,
    /// Its background work, stopped once the calls in flight are done (or the service is dropped).
    pub background: Background,
    /// Whether it takes new work now, reported under [`CAPACITY`]; `None` for a service that never turns work
    /// away.
    pub has_room: Option<HasRoom>,
}

/// How to serve, from the common flags.
#[derive(Clone)]
pub struct ServeOptions {
    /// How callers are authenticated.
    pub auth: AuthMode,
    /// TLS, when configured.
    pub tls: Option<ServerTlsConfig>,
    /// How often Redis is probed for the health status.
    pub health_probe: Duration,
    /// How long in-flight calls may run on after shutdown begins.
    pub shutdown_grace: Duration,
}

/// Why a service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is not usable.
    #[error("configuration: {0}")]
    Config(String),
    /// A file named by the configuration cannot be read.
    #[error("cannot read {path}: {source}")]
    File {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Reflection could not be built from the descriptors.
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The transport failed.
    #[error("transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// Binding a listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path).map_err(|source| ServeError::File {
        path: path.display().to_string(),
        source,
    })
}

impl ServeOptions {
    /// Options from the common flags: the token key (or the insecure mode, which must be asked for by name)
    /// and the TLS files.
    pub fn from_args(args: &CommonArgs) -> Result<ServeOptions, ServeError> {
        let secret = match (&args.auth_key_file, &args.auth_key) {
            (Some(path), _) => Some(read(path)?.trim_ascii().to_vec()),
            (None, Some(key)) => Some(key.as_bytes().to_vec()),
            (None, None) => None,
        };
        let auth = match (secret, args.insecure_no_auth) {
            (Some(_), true) => {
                return Err(ServeError::Config(
                    "BERTH_INSECURE_NO_AUTH is set together with a token key; choose one".into(),
                ));
            }
            (Some(secret), false) => {
                AuthMode::Tokens(TokenKey::new(secret).map_err(|err| ServeError::Config(err.to_string()))?)
            }
            (None, true) => AuthMode::Insecure,
            (None, false) => {
                return Err(ServeError::Config(
                    "no token key: set BERTH_AUTH_KEY_FILE (or BERTH_AUTH_KEY), or for local development only \
                     BERTH_INSECURE_NO_AUTH=true"
                        .into(),
                ));
            }
        };
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => {
                let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(read(cert)?, read(key)?));
                if let Some(ca) = &args.tls_client_ca {
                    tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
                }
                Some(tls)
            }
            _ => None,
        };
        Ok(ServeOptions {
            auth,
            tls,
            health_probe: Duration::from_millis(args.health_probe_ms),
            shutdown_grace: Duration::from_secs(args.shutdown_grace_seconds),
        })
    }
}

async fn set_all(reporter: &HealthReporter, names: &[&str], status: ServingStatus) {
    for name in names {
        reporter.set_service_status(*name, status).await;
    }
}

/// Reports SERVING while Redis answers and NOT_SERVING while it does not, so that load balancers and
/// orchestrators route around a replica that cannot do its work; and under [`WRITES`], whether Redis takes writes.
async fn probe_redis(store: Store, reporter: HealthReporter, names: Vec<&'static str>, every: Duration) {
    let mut last = None;
    let mut last_writes = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let reached = store.ping().await;
        let status = match &reached {
            Ok(()) => ServingStatus::Serving,
            Err(err) => {
                if last != Some(ServingStatus::NotServing) {
                    tracing::warn!(error = %err, "redis unreachable; reporting NOT_SERVING");
                }
                ServingStatus::NotServing
            }
        };
        if last != Some(status) {
            if status == ServingStatus::Serving && last.is_some() {
                tracing::info!("redis reachable again; reporting SERVING");
            }
            set_all(&reporter, &names, status).await;
            last = Some(status);
        }
        // A Redis that does not answer takes no writes either: its memory is asked only when it answers.
        let memory = if reached.is_ok() {
            Some(store.memory_full().await)
        } else {
            None
        };
        let writes = match memory {
            Some(Ok(false)) => ServingStatus::Serving,
            Some(Ok(true)) => {
                if last_writes != Some(ServingStatus::NotServing) {
                    tracing::warn!("redis is at its maxmemory and refuses writes; reporting {WRITES} NOT_SERVING");
                }
                ServingStatus::NotServing
            }
            Some(Err(_)) | None => ServingStatus::NotServing,
        };
        crate::metrics::redis_probed(reached.is_ok(), writes == ServingStatus::Serving);
        if last_writes != Some(writes) {
            reporter.set_service_status(WRITES, writes).await;
            last_writes = Some(writes);
        }
    }
}

/// Reports under [`CAPACITY`] whether the replica takes new work, asked every `every`; apart from the Redis probe,
/// whose PING may wait out a whole command timeout while the replica falls behind.
async fn report_capacity(has_room: HasRoom, reporter: HealthReporter, every: Duration) {
    let mut last = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let status = if has_room() {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        if last != Some(status) {
            if status == ServingStatus::NotServing {
                tracing::warn!("turning new work away; reporting {CAPACITY} NOT_SERVING");
            } else if last.is_some() {
                tracing::info!("taking new work again; reporting {CAPACITY} SERVING");
            }
            reporter.set_service_status(CAPACITY, status).await;
            last = Some(status);
        }
    }
}

/// Reflection over every Berth contract and the health service, listing only the services this process serves.
fn reflection(grpc_services: &[&str]) -> tonic_reflection::server::Builder<'static> {
    let builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(berth_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .with_service_name("grpc.health.v1.Health");
    grpc_services
        .iter()
        .fold(builder, |builder, name| builder.with_service_name(*name))
}

/// Serves a service on `listener` until `shutdown` completes, then drains in-flight calls for at most the
/// grace period.
pub async fn serve(
    def: ServiceDef,
    store: Store,
    options: ServeOptions,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let mut names = vec![""];
    names.extend_from_slice(def.grpc_services);
    // Until the first probe answers, the process is not known to reach Redis.
    set_all(&reporter, &names, ServingStatus::NotServing).await;
    reporter.set_service_status(WRITES, ServingStatus::NotServing).await;
    reporter.set_service_status(LIVENESS, ServingStatus::Serving).await;
    reporter.set_service_status(CAPACITY, ServingStatus::Serving).await;
    let probe = tokio::spawn(probe_redis(
        store,
        reporter.clone(),
        names.clone(),
        options.health_probe,
    ));
    let capacity = def
        .has_room
        .map(|has_room| tokio::spawn(report_capacity(has_room, reporter.clone(), options.health_probe)));

    let reflection_v1 = reflection(def.grpc_services).build_v1()?;
    let reflection_v1alpha = reflection(def.grpc_services).build_v1alpha()?;
    let routes = def
        .routes
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);

    // HTTP/1.1 too, for the JSON faces some services serve beside gRPC (Agones' allocation API).
    let mut builder = Server::builder().accept_http1(true);
    if let Some(tls) = options.tls {
        builder = builder.tls_config(tls)?;
    }
    let edge = EdgeLayer {
        service: def.name,
        auth: Arc::new(options.auth),
        rules: def.rules,
    };
    let (stopping_tx, mut stopping_rx) = watch::channel(false);
    let on_shutdown = def.on_shutdown;
    let background = def.background;
    let signal = {
        let reporter = reporter.clone();
        async move {
            shutdown.await;
            if let Some(on_shutdown) = on_shutdown {
                on_shutdown();
            }
            probe.abort();
            if let Some(capacity) = capacity {
                capacity.abort();
            }
            set_all(&reporter, &names, ServingStatus::NotServing).await;
            reporter.set_service_status(WRITES, ServingStatus::NotServing).await;
            reporter.set_service_status(LIVENESS, ServingStatus::NotServing).await;
            reporter.set_service_status(CAPACITY, ServingStatus::NotServing).await;
            tracing::info!("shutting down: no new connections, finishing calls in flight");
            let _ = stopping_tx.send(true);
        }
    };
    let server = builder
        .layer(edge)
        .add_routes(routes)
        .serve_with_incoming_shutdown(TcpIncoming::from(listener).with_nodelay(Some(true)), signal);
    let grace = options.shutdown_grace;
    let deadline = async move {
        let _ = stopping_rx.wait_for(|stopping| *stopping).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = server => result?,
        () = deadline => tracing::warn!(grace_seconds = grace.as_secs(), "calls still in flight after the grace period; exiting"),
    }
    background.stop();
    Ok(())
}

/// Completes on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

/// Binds `addr`.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// Loads the store's function library once Redis answers, so that the first requests do not pay for it. Until
/// then, and whenever Redis has lost it, a call that finds its function missing loads it anyway.
async fn preload_library(store: Store) {
    loop {
        match berth_store::scripts::preload(&store).await {
            Ok(()) => return,
            Err(err @ berth_store::StoreError::Unavailable(_)) => {
                tracing::debug!(error = %err, "function library not loaded yet; retrying")
            }
            // Redis older than 7, or a user without FUNCTION LOAD: nothing will work until someone acts.
            Err(err) => tracing::warn!(error = %err, "cannot load the function library; retrying"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The default ports of a service.
#[derive(Clone, Copy, Debug)]
pub struct DefaultPorts {
    /// gRPC.
    pub grpc: u16,
    /// Prometheus `/metrics`.
    pub metrics: u16,
}

/// The runtime a service runs on: tokio's multi-threaded one, without the "LIFO slot" where a woken task would run
/// next on the waking thread. With it, each stream's answer woke its HTTP/2 connection's task straight away, which
/// wrote that one frame alone: a health replica made 0.84 `writev` per heartbeat. Without it the connection's task
/// runs after the other answers woken in the same pass, and writes them together: 0.17 per heartbeat, and about 15 %
/// less CPU per heartbeat and 5–22 % less per placement on the health replica (load-tests, heartbeats and placements).
/// `worker_threads` replaces tokio's default of one thread per usable core (`BERTH_WORKER_THREADS`).
pub fn runtime(worker_threads: Option<u16>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(threads) = worker_threads {
        builder.worker_threads(usize::from(threads));
    }
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    builder.build()
}

/// The whole life of a service binary, on its `runtime`: telemetry, metrics, Redis, then serving until
/// SIGTERM/SIGINT. `start` builds the service over the connected store and spawns its background tasks.
pub fn run_binary(
    name: &'static str,
    common: &CommonArgs,
    listen: &ListenArgs,
    ports: DefaultPorts,
    start: impl FnOnce(Store) -> ServiceDef,
) -> std::process::ExitCode {
    let runtime = match runtime(common.worker_threads) {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("{name}: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let telemetry = match crate::telemetry::init(name, common) {
            Ok(telemetry) => telemetry,
            Err(err) => {
                eprintln!("{name}: {err}");
                return std::process::ExitCode::FAILURE;
            }
        };
        let result = run_service(name, common, listen, ports, start).await;
        if let Err(err) = &result {
            tracing::error!(error = %err, "{name} stopped");
        }
        telemetry.shutdown();
        match result {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(_) => std::process::ExitCode::FAILURE,
        }
    })
}

async fn run_service(
    name: &'static str,
    common: &CommonArgs,
    listen: &ListenArgs,
    ports: DefaultPorts,
    start: impl FnOnce(Store) -> ServiceDef,
) -> Result<(), ServeError> {
    let options = ServeOptions::from_args(common)?;
    let metrics_addr = listen.metrics(ports.metrics).map_err(ServeError::Config)?;
    crate::metrics::install(metrics_addr).map_err(|err| ServeError::Config(format!("metrics: {err}")))?;
    let insecure = matches!(options.auth, AuthMode::Insecure);
    let addr = listen.grpc(ports.grpc, insecure);
    if insecure {
        tracing::warn!(
            %addr,
            "BERTH_INSECURE_NO_AUTH: every caller reaching {addr} is an operator; for local development only"
        );
    }
    let listener = bind(addr).await?;
    let store = Store::new(common.redis());
    tokio::spawn(preload_library(store.clone()));
    let def = start(store.clone());
    tracing::info!(%addr, metrics = ?metrics_addr, "{name} serving");
    serve(def, store, options, listener, shutdown_signal()).await
}
