//! Berth's placement service: direct claims (FleetIQ's ClaimGameServer), game session queues, and placements
//! through them with the FleetIQ algorithm. Any number of replicas may run: all state is in Redis, every claim,
//! change of a queue and transition of a placement is one atomic script, and every replica's workers take
//! placements from the queues' streams, each placement by one worker at a time.

mod activations;
mod allocations;
mod apart;
mod capacity;
mod claims;
mod expiry;
mod metrics;
mod placements;
mod placing;
mod queues;
mod views;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use berth_proto::agones::allocation::allocation_service_server::AllocationServiceServer;
use berth_proto::placement::v1::claim_service_server::ClaimServiceServer;
use berth_proto::placement::v1::placement_service_server::PlacementServiceServer;
use berth_proto::placement::v1::queue_service_server::QueueServiceServer;
use berth_runtime::auth::{AccessRules, Role};
use berth_runtime::watch::Tails;
use berth_runtime::{Background, ServiceDef};
use berth_store::Store;
use berth_store::queues::placements::PlacementEventEntry;
use tonic::service::Routes;

pub use allocations::Allocations;
pub use claims::Claims;
pub use placements::Placements;
pub use queues::Queues;

/// Default gRPC port.
pub const GRPC_PORT: u16 = 7101;
/// Default metrics port.
pub const METRICS_PORT: u16 = 9101;

const RULES: AccessRules = &[
    ("/berth.placement.v1.ClaimService/", &[Role::Operator, Role::Client]),
    ("/allocation.AllocationService/", &[Role::Operator, Role::Client]),
    ("/gameserverallocation", &[Role::Operator, Role::Client]),
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
    /// How long ended placements stay readable (DescribeGameSessionPlacement), and their events, in ms.
    #[arg(long, env = "BERTH_PLACEMENT_RETENTION_MS", default_value_t = 86_400_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub placement_retention_ms: u64,
    /// Most placement events each queue keeps besides the retention; the oldest are trimmed first.
    #[arg(long, env = "BERTH_PLACEMENT_EVENTS_MAX", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub placement_events_max: u64,
    /// Most placements one replica works on at once per queue; the others wait in the queue's stream for a
    /// replica with room. 0 runs no placement workers here: the replica only answers calls, and replicas with
    /// workers place what it starts.
    #[arg(long, env = "BERTH_PLACEMENT_CONCURRENCY", default_value_t = 10_000)]
    pub placement_concurrency: u64,
    /// How often a placement with no server tries its candidates again, and looks at the game session it waits
    /// on, in ms. Placements also try again at once when word of capacity comes.
    #[arg(long, env = "BERTH_PLACEMENT_RETRY_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(10..=1000))]
    pub placement_retry_ms: u64,
    /// How long a placement's worker may go silent before another replica takes the placement over, in ms.
    #[arg(long, env = "BERTH_PLACEMENT_RECLAIM_IDLE_MS", default_value_t = 3_000, value_parser = clap::value_parser!(u64).range(1500..))]
    pub placement_reclaim_idle_ms: u64,
    /// How often the queues to work are listed again, in ms. A queue created is announced and worked at once,
    /// whatever this is; the listing is how a replica that missed the word (it was reconnecting) catches up.
    #[arg(long, env = "BERTH_PLACEMENT_QUEUE_DISCOVERY_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(10..))]
    pub placement_queue_discovery_ms: u64,
    /// This replica's id: its workers' name in the queues' consumer groups, and where it hears of activations. A
    /// fresh UUID when unset.
    #[arg(long, env = "BERTH_REPLICA_ID")]
    pub replica_id: Option<String>,
}

impl Default for PlacementArgs {
    fn default() -> PlacementArgs {
        PlacementArgs {
            claim_timeout_ms: 60_000,
            claim_sweep_ms: 1_000,
            placement_retention_ms: 86_400_000,
            placement_events_max: 1_000_000,
            placement_concurrency: 10_000,
            placement_retry_ms: 1_000,
            placement_reclaim_idle_ms: 3_000,
            placement_queue_discovery_ms: 1_000,
            replica_id: None,
        }
    }
}

/// The placement service over `store`, with its claim sweeper running in the background.
pub fn service(store: Store, args: &PlacementArgs) -> ServiceDef {
    metrics::describe();
    let background = Background::new();
    let sweeping = store.clone();
    background.every("claim_expiry", Duration::from_millis(args.claim_sweep_ms), move || {
        expiry::sweep(sweeping.clone())
    });
    let events = Tails::default();
    let placer = Arc::new(placing::Placer {
        store: store.clone(),
        replica: args
            .replica_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string()),
        activations: activations::Activations::default(),
        capacity: capacity::channel(),
        retention_ms: args.placement_retention_ms,
        retry: Duration::from_millis(args.placement_retry_ms),
        events: events.clone(),
    });
    if args.placement_concurrency > 0 {
        background.spawn(
            placer
                .activations
                .clone()
                .listen(store.config().clone(), placer.replica.clone()),
        );
        background.spawn(capacity::listen(store.config().clone(), placer.capacity.clone()));
        let settings = workers::WorkerSettings {
            concurrency: usize::try_from(args.placement_concurrency).unwrap_or(usize::MAX),
            reclaim_idle_ms: args.placement_reclaim_idle_ms,
            events_retention_ms: args.placement_retention_ms,
            events_max: args.placement_events_max,
            discovery: Duration::from_millis(args.placement_queue_discovery_ms),
        };
        background.spawn(workers::run(placer, settings));
    }
    let closing = tokio::sync::watch::Sender::new(false);
    let watches_end = closing.subscribe();
    ServiceDef {
        name: "berth-placement",
        grpc_services: &[
            "berth.placement.v1.ClaimService",
            "berth.placement.v1.PlacementService",
            "berth.placement.v1.QueueService",
            "allocation.AllocationService",
        ],
        rules: RULES,
        on_shutdown: Some(Box::new(move || {
            closing.send_replace(true);
        })),
        background,
        has_room: None,
        routes: routes(store, args, watches_end, events),
    }
}

/// The gRPC services, and Agones' allocation API over HTTP beside them on the same port.
fn routes(
    store: Store,
    args: &PlacementArgs,
    watches_end: tokio::sync::watch::Receiver<bool>,
    events: Tails<PlacementEventEntry>,
) -> Routes {
    let allocations = Arc::new(Allocations::new(store.clone(), args.claim_timeout_ms));
    let grpc = Routes::new(ClaimServiceServer::new(Claims::new(
        store.clone(),
        args.claim_timeout_ms,
    )))
    .add_service(PlacementServiceServer::new(Placements::new(
        store.clone(),
        args.placement_retention_ms,
        watches_end,
        events,
    )))
    .add_service(QueueServiceServer::new(Queues::new(store, args.placement_retention_ms)))
    .add_service(AllocationServiceServer::from_arc(allocations.clone()));
    let http = axum::Router::new()
        .route("/gameserverallocation", axum::routing::post(allocations::allocate_json))
        .with_state(allocations);
    Routes::from(grpc.into_axum_router().merge(http))
}
