//! The floors a measured line is read against, taken in the same run on the same machine: what a gRPC call costs
//! when the handler does nothing, and what the Redis script behind a call costs with no gRPC in front of it. A
//! line near both is as fast as this design can be here; a line far below them has overhead of its own to find.

use berth_domain::game_server::check_claim_filter;
use berth_domain::validate::Violations;
use berth_sdk::AuthedChannel;
use berth_store::Store;
use berth_store::pool::{self as store, Claim, Claimed, Registered, Registration};
use tonic::{Code, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::connections::Rotation;
use crate::driver::{self, Outcome, outcome};
use crate::fleet;
use crate::report::Line;
use crate::stack::CLAIM_TIMEOUT_MS;

/// The fleet the raw-script floor fills, apart from any fleet a scenario measures through gRPC.
const RAW_FLEET: &str = "bench-raw";

/// `grpc.health.v1.Health/Check` over `channels`: the same connections, edge and HTTP/2 path as a real call, but a
/// handler that only reads a map in memory.
pub async fn noop_grpc(channels: &[AuthedChannel], calls: u64, concurrency: u16) -> Line {
    let health = Rotation::new(channels.iter().cloned().map(HealthClient::new));
    driver::run("no-op gRPC", calls, concurrency, move |_| {
        let mut client = health.next();
        async move { outcome(client.check(HealthCheckRequest::default()).await) }
    })
    .await
}

/// The fleet of the minimal player-session function's keys.
const FLOOR_FLEET: &str = "bench-floor";

/// The least a player-session creation could cost Redis: a function of its own (`player_floor.lua`) that writes
/// the record, counts the player and schedules the deadline, `calls` times, against which the real script's Redis
/// time is read.
pub async fn minimal_player_session(store: &Store, calls: u64, concurrency: u16) -> Line {
    let mut load = redis::cmd("FUNCTION");
    load.arg("LOAD").arg("REPLACE").arg(include_str!("player_floor.lua"));
    if let Err(err) = store.query::<redis::Value>(&load).await {
        eprintln!("the minimal player-session function could not be loaded: {err}");
    }
    let store = store.clone();
    driver::run("minimal player-session function", calls, concurrency, move |index| {
        let store = store.clone();
        async move {
            let tag = format!("berth:{{f:{FLOOR_FLEET}}}");
            let session = format!("{FLOOR_FLEET}/gsess-{}", index % 1000);
            let player_session = format!("{FLOOR_FLEET}/psess-{index}");
            let mut call = redis::cmd("FCALL");
            call.arg("berth_bench_player_floor")
                .arg(3)
                .arg(format!("{tag}:psess:{player_session}"))
                .arg(format!("{tag}:gsess:{session}"))
                .arg(format!("{tag}:res_due"))
                .arg(&player_session)
                .arg(format!("player-{index}"))
                .arg(&session);
            store
                .query::<i64>(&call)
                .await
                .map(|_| ())
                .map_err(|err| Status::from(err).code())
        }
    })
    .await
}

/// Registers `servers` servers in a fleet of their own straight through the store, then claims them all the same
/// way: the register and claim scripts with nothing but the Redis client in front. Answers both lines.
pub async fn raw_scripts(store: &Store, servers: u64, concurrency: u16) -> [Line; 2] {
    fleet::create(store, RAW_FLEET, fleet::QUIET).await;
    let register = register_all(store, RAW_FLEET, "raw register", servers, concurrency).await;
    let claiming = store.clone();
    let claim = driver::run("raw claim", servers, concurrency, move |index| {
        let store = claiming.clone();
        async move { claimed(&store, index).await }
    })
    .await;
    [register, claim]
}

/// Registers `servers` servers in `fleet_id` (which must exist) straight through the store's register script,
/// measured as `name`: a floor, or the set-up of a fleet to claim from.
pub async fn register_all(store: &Store, fleet_id: &'static str, name: &str, servers: u64, concurrency: u16) -> Line {
    let store = store.clone();
    driver::run(name, servers, concurrency, move |index| {
        let store = store.clone();
        async move { registered(&store, fleet_id, index).await }
    })
    .await
}

async fn registered(store: &Store, fleet_id: &str, index: u64) -> Outcome {
    let server = fleet::server(index);
    let registration = Registration {
        fleet_id,
        game_server_id: &server.id,
        instance_id: &server.instance,
        connection_info: &server.connection_info,
        game_server_data: "",
    };
    match store::register(store, &registration).await {
        Ok(Registered::New(_)) => Ok(()),
        Ok(Registered::AlreadyExists) => Err(Code::AlreadyExists),
        Ok(Registered::NoFleet(_)) => Err(Code::NotFound),
        Ok(Registered::Deleting(_)) => Err(Code::FailedPrecondition),
        Err(err) => Err(Status::from(err).code()),
    }
}

async fn claimed(store: &Store, index: u64) -> Outcome {
    // Unique and as long as the UUID the service mints per claim, so the script stores the same bytes.
    let claim_id = format!("raw-{index:032}");
    let claim = Claim {
        fleet_id: RAW_FLEET,
        game_server_id: None,
        game_server_data: None,
        // The tiers the service derives from a request without a filter, so the script does the same work.
        tiers: check_claim_filter(&mut Violations::new(), &[]),
        timeout_ms: CLAIM_TIMEOUT_MS,
        claim_id: &claim_id,
        token: "",
    };
    // Codes as the claim service answers them, so error columns read the same in both lines.
    match store::claim(store, &claim).await {
        Ok(Claimed::Claimed { .. }) => Ok(()),
        Ok(Claimed::Exhausted) => Err(Code::ResourceExhausted),
        Ok(Claimed::NotFound) => Err(Code::NotFound),
        Ok(Claimed::Conflict(_)) => Err(Code::Aborted),
        Err(err) => Err(Status::from(err).code()),
    }
}
