//! The direct-claim path, FleetIQ's ClaimGameServer: fill one fleet through RegisterGameServer, claim every server
//! with many callers at once, and check that each was handed out exactly once and that the next claim finds the
//! fleet exhausted. Both floors are measured in the same run, so the claim rate is read as a fraction of them.

use berth_proto::health::v1::RegisterGameServerRequest;
use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::placement::v1::ClaimGameServerRequest;
use berth_proto::placement::v1::claim_service_client::ClaimServiceClient;
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_store::Store;
use berth_store::pool::pool_sizes;
use tonic::Code;

use crate::Failure;
use crate::args::Args;
use crate::connections::Rotation;
use crate::driver::{self, outcome};
use crate::replica::Replica;
use crate::report::{Figure, Findings, Line, Ratio};
use crate::stack::Stack;
use crate::{fleet, floors};

const FLEET: &str = "bench-claim";
/// The fleet claimed through a placement replica of its own process.
const REPLICA_FLEET: &str = "bench-claim-replica";

/// The registration of the `index`th bench server in `fleet_id`.
pub(super) fn registration(fleet_id: &str, index: u64) -> RegisterGameServerRequest {
    let server = fleet::server(index);
    RegisterGameServerRequest {
        fleet_id: fleet_id.into(),
        game_server_id: server.id,
        instance_id: server.instance,
        connection_info: server.connection_info,
        game_server_data: String::new(),
    }
}

fn claim_any(fleet_id: &str) -> ClaimGameServerRequest {
    ClaimGameServerRequest {
        fleet_id: fleet_id.into(),
        ..Default::default()
    }
}

/// Claims a server of `fleet_id`, any, `calls` times through ClaimGameServer over `placement` (channels to the
/// placement service with a client's token), `concurrency` at once: the line "claim".
pub async fn claims(placement: &[AuthedChannel], fleet_id: &'static str, calls: u64, concurrency: u16) -> Line {
    claims_named("claim", placement, fleet_id, calls, concurrency).await
}

async fn claims_named(
    name: &str,
    placement: &[AuthedChannel],
    fleet_id: &'static str,
    calls: u64,
    concurrency: u16,
) -> Line {
    let clients = Rotation::new(placement.iter().cloned().map(ClaimServiceClient::new));
    driver::run(name, calls, concurrency, move |_| {
        let mut client = clients.next();
        async move { outcome(client.claim_game_server(claim_any(fleet_id)).await) }
    })
    .await
}

/// Registers and claims `args.servers` servers, then measures the floors.
pub async fn run(stack: &Stack, args: &Args) -> Result<Findings, Failure> {
    let (servers, concurrency) = (args.servers, args.concurrency);
    let services = stack.in_process().await;
    fleet::create(&stack.store, FLEET, fleet::QUIET).await;
    // An operator registers here, as a provisioner would; a game server's own token would do the same work.
    let registry = stack.channels(&services.health, Role::Operator).await?;
    let placement = stack.channels(&services.placement, Role::Client).await?;
    let mut one_more = ClaimServiceClient::new(placement[0].clone());

    let register = register_all(&registry, FLEET, servers, concurrency).await;
    let claim = claims(&placement, FLEET, servers, concurrency).await;

    let mut failed_checks = Vec::new();
    failed_checks.extend(all_claimed(&stack.store, servers).await?);
    let after_last = one_more.claim_game_server(claim_any(FLEET)).await;
    if !matches!(&after_last, Err(status) if status.code() == Code::ResourceExhausted) {
        failed_checks.push(format!(
            "the claim after the last server answered {after_last:?}, not RESOURCE_EXHAUSTED"
        ));
    }

    let (replica_claim, replica_figures) = through_replica(stack, &registry, servers, concurrency).await?;
    if !replica_claim.errors.is_empty() {
        failed_checks.push(format!(
            "claims through the replica process failed: {:?}",
            replica_claim.errors
        ));
    }

    let noop = floors::noop_grpc(&placement, servers, concurrency).await;
    let [raw_register, raw_claim] = floors::raw_scripts(&stack.store, servers, concurrency).await;
    Ok(Findings {
        ratios: vec![
            Ratio::of(&claim, &noop),
            Ratio::of(&claim, &raw_claim),
            Ratio::of(&register, &noop),
            Ratio::of(&register, &raw_register),
        ],
        lines: vec![register, claim, replica_claim, noop, raw_register, raw_claim],
        figures: replica_figures,
        failed_checks,
        ..Findings::default()
    })
}

/// Registers `servers` servers of `fleet_id` through `registry`: the line "register".
async fn register_all(registry: &[AuthedChannel], fleet_id: &'static str, servers: u64, concurrency: u16) -> Line {
    let registry = Rotation::new(registry.iter().cloned().map(GameServerServiceClient::new));
    driver::run("register", servers, concurrency, move |index| {
        let mut client = registry.next();
        async move { outcome(client.register_game_server(registration(fleet_id, index)).await) }
    })
    .await
}

/// ClaimGameServer through a `berth-placement` replica process of its own, on a fleet of `servers` more servers:
/// the line "claim (placement replica process)", and what the replica costs apart from the load generator: CPU per
/// claim, and resident memory before and after (what a deployment's requests are set from).
async fn through_replica(
    stack: &Stack,
    registry: &[AuthedChannel],
    servers: u64,
    concurrency: u16,
) -> Result<(Line, Vec<Figure>), Failure> {
    fleet::create(&stack.store, REPLICA_FLEET, fleet::QUIET).await;
    register_all(registry, REPLICA_FLEET, servers, concurrency).await;
    let replica = Replica::start("berth-placement", stack.store.config(), &[]).await?;
    let channels = stack.channels_at(&replica.endpoint(), Role::Client).await?;
    let before = replica.usage()?;
    let line = claims_named(
        "claim (placement replica process)",
        &channels,
        REPLICA_FLEET,
        servers,
        concurrency,
    )
    .await;
    let figures = replica.cost_since(&before, servers, "placement", "claim")?;
    Ok((line, figures))
}

/// Every server registered and then claimed once: none left in the pool, all of them in the claims.
async fn all_claimed(store: &Store, servers: u64) -> Result<Option<String>, Failure> {
    let (free, claimed) = pool_sizes(store, FLEET).await?;
    Ok((free != 0 || claimed != servers)
        .then(|| format!("after {servers} claims the pool holds {free} free and {claimed} claimed servers")))
}
