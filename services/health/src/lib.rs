//! Berth's health service: the registry of game servers, and the stream each SDK process holds for heartbeats and
//! commands. Any number of replicas may run: all state is in Redis; a replica holds only the streams connected to
//! it, hears through pub/sub when one of them has a command waiting, and sweeps deadlines that every replica may
//! sweep at once.

mod desired;
mod game_servers;
mod heartbeats;
mod keeping_up;
mod metrics;
mod monitor;
mod push;
mod sdk;
mod streams;

use std::sync::Arc;
use std::time::Duration;

use berth_proto::health::v1::game_server_service_server::GameServerServiceServer;
use berth_proto::health::v1::sdk_service_server::SdkServiceServer;
use berth_runtime::auth::{AccessRules, Role};
use berth_runtime::{Background, ServiceDef};
use berth_store::Store;
use berth_store::processes::Timings;
use tonic::service::Routes;

pub use game_servers::GameServers;
pub use sdk::Sdk;

/// Default gRPC port.
pub const GRPC_PORT: u16 = 7104;
/// Default metrics port.
pub const METRICS_PORT: u16 = 9104;

const RULES: AccessRules = &[
    (
        "/berth.health.v1.GameServerService/SetInstanceStatus",
        &[Role::Operator],
    ),
    (
        "/berth.health.v1.GameServerService/TerminateGameServer",
        &[Role::Operator],
    ),
    (
        "/berth.health.v1.GameServerService/ListGameServers",
        &[Role::Operator, Role::Client],
    ),
    (
        "/berth.health.v1.GameServerService/DescribeGameServer",
        &[Role::Operator, Role::Client, Role::GameServer],
    ),
    (
        "/berth.health.v1.GameServerService/UpdateGameServer",
        &[Role::Operator, Role::Client, Role::GameServer],
    ),
    (
        "/berth.health.v1.GameServerService/",
        &[Role::Operator, Role::GameServer],
    ),
    ("/berth.health.v1.SdkService/", &[Role::GameServer]),
];

/// Settings of the health service: the deployment's. What differs by fleet (heartbeat period, failure threshold,
/// ready, termination and exit deadlines) is the fleet's record's, which the scripts read as they act and a process
/// is told when it registers. The initial delay follows Agones (5 s).
#[derive(clap::Args, Clone, Debug)]
pub struct HealthArgs {
    /// Extra time a process has for its first heartbeat after registering, in ms.
    #[arg(long, env = "BERTH_HEALTH_INITIAL_DELAY_MS", default_value_t = 5_000)]
    pub initial_delay_ms: u64,
    /// Longest a heartbeat waits to be written with others in one batch, in ms.
    #[arg(long, env = "BERTH_HEARTBEAT_FLUSH_MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub heartbeat_flush_ms: u64,
    /// How often the monitor sweeps deadlines, in ms.
    #[arg(long, env = "BERTH_MONITOR_SWEEP_MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(1..))]
    pub monitor_sweep_ms: u64,
    /// How long the record of a lost process stays readable, in ms.
    #[arg(long, env = "BERTH_LOST_RETENTION_MS", default_value_t = 3_600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub lost_retention_ms: u64,
    /// This replica's id, for routing commands to the streams it holds. A fresh UUID when unset.
    #[arg(long, env = "BERTH_REPLICA_ID")]
    pub replica_id: Option<String>,
}

impl Default for HealthArgs {
    fn default() -> HealthArgs {
        HealthArgs {
            initial_delay_ms: 5_000,
            heartbeat_flush_ms: 10,
            monitor_sweep_ms: 250,
            lost_retention_ms: 3_600_000,
            replica_id: None,
        }
    }
}

/// What every part of one replica shares.
pub(crate) struct Context {
    pub(crate) store: Store,
    pub(crate) args: HealthArgs,
    pub(crate) timings: Timings,
    pub(crate) replica: String,
    pub(crate) streams: streams::Streams,
    pub(crate) heartbeats: tokio::sync::mpsc::Sender<heartbeats::Beat>,
    /// Whether the heartbeat writer keeps up, for the monitor.
    pub(crate) keeping_up: keeping_up::KeepingUp,
    /// Becomes true when the replica shuts down: every stream then ends with UNAVAILABLE, and its process resumes
    /// through another replica.
    pub(crate) closing: tokio::sync::watch::Sender<bool>,
}

/// The health service over `store`, with its heartbeat writer, monitor and push listener running in the
/// background until the service is dropped.
pub fn service(store: Store, args: &HealthArgs) -> ServiceDef {
    metrics::describe();
    let replica = args
        .replica_id
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let timings = Timings {
        initial_delay_ms: args.initial_delay_ms,
        retention_ms: args.lost_retention_ms,
    };
    let (beats, beats_rx) = tokio::sync::mpsc::channel(heartbeats::QUEUE);
    let context = Arc::new(Context {
        store,
        args: args.clone(),
        timings,
        replica,
        streams: streams::Streams::default(),
        heartbeats: beats,
        keeping_up: keeping_up::KeepingUp::new(std::time::Instant::now()),
        closing: tokio::sync::watch::Sender::new(false),
    });
    let background = Background::new();
    background.spawn(heartbeats::run(context.clone(), beats_rx));
    background.spawn(monitor::run(
        context.clone(),
        Duration::from_millis(args.monitor_sweep_ms),
    ));
    background.spawn(push::listen(context.clone()));
    let routes = Routes::new(GameServerServiceServer::new(GameServers::new(context.clone())))
        .add_service(SdkServiceServer::new(Sdk::new(context.clone())));
    let room = context.clone();
    let on_shutdown = Box::new(move || {
        context.closing.send_replace(true);
    });
    ServiceDef {
        name: "berth-health",
        grpc_services: &["berth.health.v1.GameServerService", "berth.health.v1.SdkService"],
        rules: RULES,
        routes,
        on_shutdown: Some(on_shutdown),
        background,
        has_room: Some(Box::new(move || !room.keeping_up.full(std::time::Instant::now()))),
    }
}
