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
use crate::report::{Findings, Line, Ratio};
use crate::stack::Stack;
use crate::{fleet, floors};

const FLEET: &str = "bench-claim";

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
    let clients = Rotation::new(placement.iter().cloned().map(ClaimServiceClient::new));
    driver::run("claim", calls, concurrency, move |_| {
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
    let registry = Rotation::new(
        stack
            .channels(&services.health, Role::Operator)
            .await?
            .into_iter()
            .map(GameServerServiceClient::new),
    );
    let placement = stack.channels(&services.placement, Role::Client).await?;
    let mut one_more = ClaimServiceClient::new(placement[0].clone());

    let register = driver::run("register", servers, concurrency, move |index| {
        let mut client = registry.next();
        async move { outcome(client.register_game_server(registration(FLEET, index)).await) }
    })
    .await;
    let claim = claims(&placement, FLEET, servers, concurrency).await;

    let mut failed_checks = Vec::new();
    failed_checks.extend(all_claimed(&stack.store, servers).await?);
    let after_last = one_more.claim_game_server(claim_any(FLEET)).await;
    if !matches!(&after_last, Err(status) if status.code() == Code::ResourceExhausted) {
        failed_checks.push(format!(
            "the claim after the last server answered {after_last:?}, not RESOURCE_EXHAUSTED"
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
        lines: vec![register, claim, noop, raw_register, raw_claim],
        failed_checks,
        ..Findings::default()
    })
}

/// Every server registered and then claimed once: none left in the pool, all of them in the claims.
async fn all_claimed(store: &Store, servers: u64) -> Result<Option<String>, Failure> {
    let (free, claimed) = pool_sizes(store, FLEET).await?;
    Ok((free != 0 || claimed != servers)
        .then(|| format!("after {servers} claims the pool holds {free} free and {claimed} claimed servers")))
}
