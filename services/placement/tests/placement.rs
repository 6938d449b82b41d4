//! The placement service through real gRPC against a real Redis (single node and a 3-master cluster): direct
//! claims end to end, their races, lapses, draining order, bad input, auth and Redis outages; Agones' allocation API
//! in `placement/allocations.rs`; queues as records in
//! `placement/queues.rs`; placements through them in `placement/placements.rs`, the fleets they scale in
//! `placement/autoscaling.rs`, `replica` durability in `placement/durability.rs`, and a Redis Cluster failover mid-burst in
//! `placement/failover.rs`.

#[path = "placement/allocations.rs"]
mod allocations;
#[path = "placement/autoscaling.rs"]
mod autoscaling;
#[path = "placement/durability.rs"]
mod durability;
#[path = "placement/failover.rs"]
mod failover;
#[path = "placement/placements.rs"]
mod placements;
#[path = "placement/queues.rs"]
mod queues;

use std::collections::HashSet;
use std::time::Duration;

use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::health::v1::{
    self as hpb, DeregisterGameServerRequest, DescribeGameServerRequest, RegisterGameServerRequest,
    SetInstanceStatusRequest, UpdateGameServerRequest,
};
use berth_proto::placement::v1::claim_service_client::ClaimServiceClient;
use berth_proto::placement::v1::{ClaimFilter, ClaimGameServerRequest};
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_store::Store;
use berth_testkit::{
    RunningService, TestRedis, anywhere_fleet, assert_serves, spawn_service, token, unary_without_timer,
    wait_for_health,
};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_types::StatusExt;

const CLAIMS: &str = "berth.placement.v1.ClaimService";

/// Health (the registry) and placement (claims) over one Redis, with clients for an operator and a matchmaker.
struct Stack {
    _health: RunningService,
    placement: RunningService,
    health_endpoint: String,
    registry: GameServerServiceClient<AuthedChannel>,
    matchmaker_registry: GameServerServiceClient<AuthedChannel>,
    claims: ClaimServiceClient<AuthedChannel>,
    store: Store,
}

/// The fleets these tests register servers in, one or two per test, created first as an operator would.
const FLEETS: [&str; 16] = [
    "again", "arena", "bad", "drain", "f", "lapse", "late", "lost", "mine", "named", "outage", "race", "slow", "spot",
    "token", "util",
];

async fn stack(config: &berth_store::RedisConfig, claim_timeout_ms: u64) -> Stack {
    let store = Store::connect(config).await.expect("redis reachable");
    for fleet_id in FLEETS {
        anywhere_fleet(&store, fleet_id, &["local"]).await;
    }
    let health = spawn_service(
        berth_health::service(store.clone(), &berth_health::HealthArgs::default()),
        store.clone(),
    )
    .await;
    let args = berth_placement::PlacementArgs {
        claim_timeout_ms,
        claim_sweep_ms: 100,
        ..Default::default()
    };
    let placement = spawn_service(berth_placement::service(store.clone(), &args), store.clone()).await;
    let client =
        |endpoint: String, role: Role| async move { berth_sdk::connect(&endpoint, &token(role, None)).await.unwrap() };
    let registry = GameServerServiceClient::new(client(health.endpoint(), Role::Operator).await);
    let matchmaker_registry = GameServerServiceClient::new(client(health.endpoint(), Role::Client).await);
    let claims = ClaimServiceClient::new(client(placement.endpoint(), Role::Client).await);
    Stack {
        health_endpoint: health.endpoint(),
        _health: health,
        placement,
        registry,
        matchmaker_registry,
        claims,
        store,
    }
}

fn registration(fleet: &str, id: &str, instance: &str) -> RegisterGameServerRequest {
    RegisterGameServerRequest {
        fleet_id: fleet.into(),
        game_server_id: id.into(),
        instance_id: instance.into(),
        connection_info: format!("10.0.0.1:{}", 7000 + id.len()),
        game_server_data: String::new(),
    }
}

fn claim_any(fleet: &str) -> ClaimGameServerRequest {
    ClaimGameServerRequest {
        fleet_id: fleet.into(),
        ..Default::default()
    }
}

fn utilized(fleet: &str, id: &str) -> UpdateGameServerRequest {
    UpdateGameServerRequest {
        fleet_id: fleet.into(),
        game_server_id: id.into(),
        utilization_status: hpb::UtilizationStatus::Utilized as i32,
        ..Default::default()
    }
}

fn instance_status(fleet: &str, instance: &str, status: hpb::InstanceStatus) -> SetInstanceStatusRequest {
    SetInstanceStatusRequest {
        fleet_id: fleet.into(),
        instance_id: instance.into(),
        instance_status: status as i32,
    }
}

/// (claimable, claimed) servers of a fleet, read straight from Redis.
async fn pool_sizes(store: &Store, fleet: &str) -> (u64, u64) {
    berth_store::pool::pool_sizes(store, fleet).await.unwrap()
}

fn describe(fleet: &str, id: &str) -> DescribeGameServerRequest {
    DescribeGameServerRequest {
        fleet_id: fleet.into(),
        game_server_id: id.into(),
    }
}

async fn full_flow(redis: TestRedis) {
    let mut s = stack(&redis.config(), 60_000).await;
    // The game server registers itself with its own scoped token.
    let mut own = GameServerServiceClient::new(
        berth_sdk::connect(&s.health_endpoint, &token(Role::GameServer, Some(("arena", "gs-1"))))
            .await
            .unwrap(),
    );
    let registered = own
        .register_game_server(RegisterGameServerRequest {
            connection_info: "203.0.113.7:7777".into(),
            ..registration("arena", "gs-1", "i-1")
        })
        .await
        .unwrap()
        .into_inner()
        .game_server
        .unwrap();
    assert_eq!(registered.utilization_status(), hpb::UtilizationStatus::Available);
    assert_eq!(registered.claim_status(), hpb::ClaimStatus::Unspecified);

    let response = s
        .claims
        .claim_game_server(ClaimGameServerRequest {
            game_server_data: Some("match-42".into()),
            ..claim_any("arena")
        })
        .await
        .unwrap()
        .into_inner();
    let claimed = response.game_server.unwrap();
    assert_eq!(claimed.game_server_id, "gs-1");
    assert_eq!(claimed.connection_info, "203.0.113.7:7777");
    assert_eq!(claimed.game_server_data, "match-42");
    assert_eq!(claimed.claim_status(), hpb::ClaimStatus::Claimed);
    let claim_seconds = claimed.claim_expire_time.unwrap().seconds - claimed.last_claim_time.unwrap().seconds;
    assert!(
        (59..=61).contains(&claim_seconds),
        "claim lasts 60 s, got {claim_seconds}"
    );

    // Claimed: nobody else gets it.
    let err = s.claims.claim_game_server(claim_any("arena")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);

    // The matchmaker starts the match on it with its claim.
    let start = UpdateGameServerRequest {
        claim_id: response.claim_id,
        ..utilized("arena", "gs-1")
    };
    let server = s
        .matchmaker_registry
        .update_game_server(start)
        .await
        .unwrap()
        .into_inner()
        .game_server
        .unwrap();
    assert_eq!(server.utilization_status(), hpb::UtilizationStatus::Utilized);
    assert_eq!(server.claim_status(), hpb::ClaimStatus::Unspecified);

    own.deregister_game_server(DeregisterGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
    })
    .await
    .unwrap();
    let err = s
        .registry
        .describe_game_server(describe("arena", "gs-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_claim_utilize_deregister_on_a_single_node() {
    full_flow(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_claim_utilize_deregister_on_a_cluster() {
    full_flow(TestRedis::cluster()).await;
}

/// Claims whose callers give up while Redis stalls are not kept. The callers hear DEADLINE_EXCEEDED from the server
/// (never tonic's CANCELLED "Timeout expired"); once Redis answers, the claims it made for them are handed straight
/// back, not left to lapse a minute later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_past_their_callers_deadline_are_not_kept() {
    let redis = berth_testkit::RedisServer::start();
    let mut s = stack(&redis.config(), 60_000).await;
    for i in 0..10 {
        s.registry
            .register_game_server(registration("late", &format!("gs-{i:03}"), "i-1"))
            .await
            .unwrap();
    }
    redis.pause();
    // Made without a client-side timer, so that what is seen is what the server answered at the deadline.
    let claims: Vec<_> = (0..5)
        .map(|_| {
            let endpoint = s.placement.endpoint();
            tokio::spawn(async move {
                let path = "/berth.placement.v1.ClaimService/ClaimGameServer";
                let token = token(Role::Client, None);
                unary_without_timer(&endpoint, path, &token, &claim_any("late"), Duration::from_millis(300)).await
            })
        })
        .collect();
    for claim in claims {
        let status = claim.await.unwrap();
        assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    redis.resume();
    let mut sizes = (0, 0);
    for _ in 0..100 {
        sizes = pool_sizes(&s.store, "late").await;
        if sizes == (10, 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sizes, (10, 0), "every claim made for a caller gone is handed back");
    s.claims.claim_game_server(claim_any("late")).await.unwrap();
}

async fn claim_race(redis: TestRedis) {
    let mut s = stack(&redis.config(), 60_000).await;
    for i in 0..50 {
        s.registry
            .register_game_server(registration("race", &format!("gs-{i:03}"), &format!("i-{}", i % 5)))
            .await
            .unwrap();
    }
    let claims: Vec<_> = (0..200)
        .map(|_| {
            let mut client = s.claims.clone();
            tokio::spawn(async move { client.claim_game_server(claim_any("race")).await })
        })
        .collect();
    let mut won = HashSet::new();
    let mut exhausted = 0;
    for claim in claims {
        match claim.await.unwrap() {
            Ok(response) => {
                let id = response.into_inner().game_server.unwrap().game_server_id;
                assert!(won.insert(id.clone()), "{id} was handed to two claimers");
            }
            Err(status) if status.code() == Code::ResourceExhausted => exhausted += 1,
            Err(status) => panic!("unexpected {status:?}"),
        }
    }
    assert_eq!(won.len(), 50);
    assert_eq!(exhausted, 150);
}

/// A claim retried with its idempotency token answers the server and claim the first call made, however many
/// retries race; another token claims another server; a malformed token is refused naming the field.
async fn a_claim_retried_with_its_token_answers_that_claim(redis: TestRedis) {
    let mut s = stack(&redis.config(), 60_000).await;
    for i in 0..3 {
        s.registry
            .register_game_server(registration("token", &format!("gs-{i}"), "i-1"))
            .await
            .unwrap();
    }
    let with_token = |token: &str| ClaimGameServerRequest {
        idempotency_token: token.into(),
        ..claim_any("token")
    };
    let retries: Vec<_> = (0..20)
        .map(|_| {
            let (mut client, claim) = (s.claims.clone(), with_token("match-7"));
            tokio::spawn(async move { client.claim_game_server(claim).await.unwrap().into_inner() })
        })
        .collect();
    let mut answered = HashSet::new();
    for retry in retries {
        let claimed = retry.await.unwrap();
        answered.insert((claimed.game_server.unwrap().game_server_id, claimed.claim_id));
    }
    assert_eq!(answered.len(), 1, "every retry answers the one claim: {answered:?}");
    let (first, _) = answered.into_iter().next().unwrap();
    let other = s
        .claims
        .claim_game_server(with_token("match-8"))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(other.game_server.unwrap().game_server_id, first);
    assert_eq!(berth_store::pool::pool_sizes(&s.store, "token").await.unwrap(), (1, 2));
    let bad = s.claims.claim_game_server(with_token("match.9")).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("idempotency_token"), "{bad:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_retried_with_its_token_answers_that_claim_on_a_single_node() {
    a_claim_retried_with_its_token_answers_that_claim(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_retried_with_its_token_answers_that_claim_on_a_cluster() {
    a_claim_retried_with_its_token_answers_that_claim(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_racing_claims_for_fifty_servers_on_a_single_node() {
    claim_race(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_racing_claims_for_fifty_servers_on_a_cluster() {
    claim_race(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_claim_returns_the_server_to_the_pool() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 300).await;
    s.registry
        .register_game_server(registration("lapse", "gs-1", "i-1"))
        .await
        .unwrap();
    let first = s
        .claims
        .claim_game_server(claim_any("lapse"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.game_server.unwrap().game_server_id, "gs-1");
    assert_eq!(pool_sizes(&s.store, "lapse").await, (0, 1));
    tokio::time::sleep(Duration::from_millis(600)).await;

    // The sweeper handed it back with no claim in between.
    assert_eq!(pool_sizes(&s.store, "lapse").await, (1, 0));
    let described = s
        .registry
        .describe_game_server(describe("lapse", "gs-1"))
        .await
        .unwrap()
        .into_inner();
    let server = described.game_server.unwrap();
    assert_eq!(server.claim_status(), hpb::ClaimStatus::Unspecified);
    assert_eq!(server.utilization_status(), hpb::UtilizationStatus::Available);

    // A new claimer gets it, and the first claimer, too late, cannot start a match on it.
    let second = s
        .claims
        .claim_game_server(claim_any("lapse"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.game_server.unwrap().game_server_id, "gs-1");
    let late = UpdateGameServerRequest {
        claim_id: first.claim_id,
        ..utilized("lapse", "gs-1")
    };
    let err = s.matchmaker_registry.update_game_server(late).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let on_time = UpdateGameServerRequest {
        claim_id: second.claim_id,
        ..utilized("lapse", "gs-1")
    };
    s.matchmaker_registry.update_game_server(on_time).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_game_server_cannot_be_utilized_on_a_lapsed_claim() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 200).await;
    s.registry
        .register_game_server(registration("late", "gs-1", "i-1"))
        .await
        .unwrap();
    s.claims.claim_game_server(claim_any("late")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let err = s
        .registry
        .update_game_server(utilized("late", "gs-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("lapsed"), "{}", err.message());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matchmaker_acts_only_on_servers_it_holds_the_claim_on() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 60_000).await;
    for id in ["gs-1", "gs-2"] {
        s.registry
            .register_game_server(registration("mine", id, "i-1"))
            .await
            .unwrap();
    }
    let held = s
        .claims
        .claim_game_server(claim_any("mine"))
        .await
        .unwrap()
        .into_inner();
    let held_id = held.game_server.unwrap().game_server_id;
    let other = if held_id == "gs-1" { "gs-2" } else { "gs-1" };

    let without_claim = utilized("mine", other);
    let err = s
        .matchmaker_registry
        .update_game_server(without_claim)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let with_wrong_claim = UpdateGameServerRequest {
        claim_id: held.claim_id.clone(),
        game_server_data: Some("hijack".into()),
        ..utilized("mine", other)
    };
    let err = s
        .matchmaker_registry
        .update_game_server(with_wrong_claim)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let untouched = s
        .registry
        .describe_game_server(describe("mine", other))
        .await
        .unwrap()
        .into_inner();
    let untouched = untouched.game_server.unwrap();
    assert_eq!(untouched.utilization_status(), hpb::UtilizationStatus::Available);
    assert_eq!(untouched.game_server_data, "");
    assert_eq!(pool_sizes(&s.store, "mine").await, (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utilized_never_goes_back_to_available_nor_is_claimed_again() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 60_000).await;
    s.registry
        .register_game_server(registration("util", "gs-1", "i-1"))
        .await
        .unwrap();
    s.claims.claim_game_server(claim_any("util")).await.unwrap();
    s.registry.update_game_server(utilized("util", "gs-1")).await.unwrap();

    let back = UpdateGameServerRequest {
        utilization_status: hpb::UtilizationStatus::Available as i32,
        ..utilized("util", "gs-1")
    };
    let err = s.registry.update_game_server(back).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("never goes back"), "{}", err.message());

    let named = ClaimGameServerRequest {
        game_server_id: "gs-1".into(),
        ..claim_any("util")
    };
    let err = s.claims.claim_game_server(named).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let err = s.claims.claim_game_server(claim_any("util")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    let server = s
        .registry
        .describe_game_server(describe("util", "gs-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        server.game_server.unwrap().utilization_status(),
        hpb::UtilizationStatus::Utilized
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_claim_takes_that_server_or_says_why_not() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 60_000).await;
    for id in ["gs-a", "gs-b"] {
        s.registry
            .register_game_server(registration("named", id, "i-1"))
            .await
            .unwrap();
    }
    let named = |id: &str| ClaimGameServerRequest {
        game_server_id: id.into(),
        ..claim_any("named")
    };
    let got = s.claims.claim_game_server(named("gs-b")).await.unwrap().into_inner();
    assert_eq!(got.game_server.unwrap().game_server_id, "gs-b");
    assert_eq!(
        s.claims.claim_game_server(named("gs-b")).await.unwrap_err().code(),
        Code::Aborted
    );
    assert_eq!(
        s.claims.claim_game_server(named("gs-zzz")).await.unwrap_err().code(),
        Code::NotFound
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_on_draining_instances_are_claimed_last() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 60_000).await;
    // The draining server registered first, so it has been idle longest: only its instance puts it last.
    s.registry
        .register_game_server(registration("drain", "gs-old", "i-spot"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    s.registry
        .register_game_server(registration("drain", "gs-new", "i-ok"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    s.registry
        .register_game_server(registration("drain", "gs-newest", "i-ok"))
        .await
        .unwrap();
    let drained = s
        .registry
        .set_instance_status(instance_status("drain", "i-spot", hpb::InstanceStatus::Draining));
    assert_eq!(drained.await.unwrap().into_inner().game_server_count, 1);

    let first = s
        .claims
        .claim_game_server(claim_any("drain"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        first.game_server.unwrap().game_server_id,
        "gs-new",
        "active instances first, longest idle first"
    );
    let active_only = ClaimGameServerRequest {
        filter: Some(ClaimFilter {
            instance_statuses: vec![hpb::InstanceStatus::Active as i32],
        }),
        ..claim_any("drain")
    };
    let second = s
        .claims
        .claim_game_server(active_only.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.game_server.unwrap().game_server_id, "gs-newest");
    let err = s.claims.claim_game_server(active_only).await.unwrap_err();
    assert_eq!(
        err.code(),
        Code::ResourceExhausted,
        "the filter keeps draining servers out"
    );
    let last = s
        .claims
        .claim_game_server(claim_any("drain"))
        .await
        .unwrap()
        .into_inner();
    let last = last.game_server.unwrap();
    assert_eq!(last.game_server_id, "gs-old");
    assert_eq!(last.instance_status(), hpb::InstanceStatus::Draining);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_about_to_be_interrupted_are_never_claimed_until_their_instance_recovers() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 60_000).await;
    s.registry
        .register_game_server(registration("spot", "gs-1", "i-spot"))
        .await
        .unwrap();
    let notice = instance_status("spot", "i-spot", hpb::InstanceStatus::SpotTerminating);
    s.registry.set_instance_status(notice).await.unwrap();
    let err = s.claims.claim_game_server(claim_any("spot")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    // A server registering on the instance now joins it in its state.
    s.registry
        .register_game_server(registration("spot", "gs-2", "i-spot"))
        .await
        .unwrap();
    assert_eq!(pool_sizes(&s.store, "spot").await, (0, 0));

    let recovered = instance_status("spot", "i-spot", hpb::InstanceStatus::Active);
    s.registry.set_instance_status(recovered).await.unwrap();
    assert_eq!(pool_sizes(&s.store, "spot").await, (2, 0));
    s.claims.claim_game_server(claim_any("spot")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_deregistered_while_claimed_can_register_afresh() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 60_000).await;
    s.registry
        .register_game_server(registration("again", "gs-1", "i-1"))
        .await
        .unwrap();
    s.claims.claim_game_server(claim_any("again")).await.unwrap();
    let leave = DeregisterGameServerRequest {
        fleet_id: "again".into(),
        game_server_id: "gs-1".into(),
    };
    s.registry.deregister_game_server(leave).await.unwrap();
    assert_eq!(pool_sizes(&s.store, "again").await, (0, 0));
    let back = s
        .registry
        .register_game_server(registration("again", "gs-1", "i-1"))
        .await
        .unwrap();
    assert_eq!(
        back.into_inner().game_server.unwrap().claim_status(),
        hpb::ClaimStatus::Unspecified
    );
    let claimed = s
        .claims
        .claim_game_server(claim_any("again"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(claimed.game_server.unwrap().game_server_id, "gs-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_claims_name_the_field_and_change_nothing() {
    let redis = TestRedis::single();
    let mut s = stack(&redis.config(), 60_000).await;
    s.registry
        .register_game_server(registration("bad", "gs-1", "i-1"))
        .await
        .unwrap();
    let bad = ClaimGameServerRequest {
        fleet_id: "bad".into(),
        game_server_id: "gs-1".into(),
        game_server_data: Some("d".repeat(1025)),
        filter: Some(ClaimFilter {
            instance_statuses: vec![hpb::InstanceStatus::SpotTerminating as i32],
        }),
        idempotency_token: "not.a.token".into(),
    };
    let err = s.claims.claim_game_server(bad).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let fields: Vec<String> = err
        .get_details_bad_request()
        .unwrap()
        .field_violations
        .into_iter()
        .map(|violation| violation.field)
        .collect();
    assert_eq!(
        fields,
        ["game_server_data", "idempotency_token", "filter.instance_statuses"]
    );
    let server = s
        .registry
        .describe_game_server(describe("bad", "gs-1"))
        .await
        .unwrap()
        .into_inner();
    let server = server.game_server.unwrap();
    assert_eq!(server.claim_status(), hpb::ClaimStatus::Unspecified);
    assert_eq!(server.game_server_data, "");
    assert_eq!(pool_sizes(&s.store, "bad").await, (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_need_a_client_or_operator_token() {
    let redis = TestRedis::single();
    let s = stack(&redis.config(), 60_000).await;
    let endpoint = s.placement.endpoint();
    let channel = tonic::transport::Endpoint::from_shared(endpoint.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let err = ClaimServiceClient::new(channel)
        .claim_game_server(claim_any("f"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let as_server = berth_sdk::connect(&endpoint, &token(Role::GameServer, Some(("f", "gs-1"))))
        .await
        .unwrap();
    let err = ClaimServiceClient::new(as_server)
        .claim_game_server(claim_any("f"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let forged = berth_sdk::connect(&endpoint, "eyJhbGciOiJIUzI1NiJ9.e30.AAAA")
        .await
        .unwrap();
    let err = ClaimServiceClient::new(forged)
        .claim_game_server(claim_any("f"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
}

/// Redis goes down, then comes back empty (its library gone too): meanwhile calls fail UNAVAILABLE and nothing
/// else, and afterwards they succeed, the library loaded again by the store itself.
async fn a_redis_outage_is_unavailable_and_not_serving_until_redis_returns(mut redis: TestRedis) {
    let mut s = stack(&redis.config(), 60_000).await;
    let endpoint = s.placement.endpoint();
    wait_for_health(&endpoint, CLAIMS, ServingStatus::Serving).await;

    redis.stop();
    let started = std::time::Instant::now();
    let err = s.claims.claim_game_server(claim_any("outage")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the error came within the client's patience"
    );
    wait_for_health(&endpoint, CLAIMS, ServingStatus::NotServing).await;

    redis.restart();
    wait_for_health(&endpoint, CLAIMS, ServingStatus::Serving).await;
    // Its data went with it, the fleet's record too.
    anywhere_fleet(&s.store, "outage", &["local"]).await;
    s.registry
        .register_game_server(registration("outage", "gs-1", "i-1"))
        .await
        .unwrap();
    let claimed = s
        .claims
        .claim_game_server(claim_any("outage"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(claimed.game_server.unwrap().game_server_id, "gs-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_is_unavailable_and_not_serving_until_redis_returns_on_a_single_node() {
    a_redis_outage_is_unavailable_and_not_serving_until_redis_returns(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_is_unavailable_and_not_serving_until_redis_returns_on_a_cluster() {
    a_redis_outage_is_unavailable_and_not_serving_until_redis_returns(TestRedis::cluster()).await;
}

/// Redis answering slower than the store's response timeout (every client held by CLIENT PAUSE for longer than the
/// tests' 1.5 s): a claim answers UNAVAILABLE within its caller's deadline, the service reports NOT_SERVING while it
/// lasts and SERVING after, and the claim the caller gave up on, which Redis runs once the pause lapses, lands whole:
/// its token's retry answers that one claim, and no second server is taken.
async fn a_slow_redis_is_unavailable_within_the_deadline_and_not_serving_while_it_lasts(redis: TestRedis) {
    let mut s = stack(&redis.config(), 60_000).await;
    let endpoint = s.placement.endpoint();
    for i in 0..3 {
        s.registry
            .register_game_server(registration("slow", &format!("gs-{i}"), "i-1"))
            .await
            .unwrap();
    }
    wait_for_health(&endpoint, CLAIMS, ServingStatus::Serving).await;
    let claim = ClaimGameServerRequest {
        idempotency_token: "slow-1".into(),
        ..claim_any("slow")
    };
    let deadline = Duration::from_secs(4);
    let mut within_deadline = tonic::Request::new(claim.clone());
    within_deadline.set_timeout(deadline);

    redis.client_pause(Duration::from_secs(6));
    let started = std::time::Instant::now();
    let err = s.claims.claim_game_server(within_deadline).await.unwrap_err();
    let answered_in = started.elapsed();
    assert!(
        matches!(err.code(), Code::Unavailable | Code::DeadlineExceeded),
        "{err:?}"
    );
    assert!(
        answered_in < deadline,
        "answered in {answered_in:?}, past the caller's deadline"
    );
    wait_for_health(&endpoint, CLAIMS, ServingStatus::NotServing).await;

    wait_for_health(&endpoint, CLAIMS, ServingStatus::Serving).await;
    let retried = s.claims.claim_game_server(claim).await.unwrap().into_inner();
    let again = s.claims.claim_game_server(ClaimGameServerRequest {
        idempotency_token: "slow-1".into(),
        ..claim_any("slow")
    });
    assert_eq!(again.await.unwrap().into_inner().claim_id, retried.claim_id);
    assert_eq!(
        pool_sizes(&s.store, "slow").await,
        (2, 1),
        "one claim: the one the paused call made, or the retry's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_redis_is_unavailable_within_the_deadline_and_not_serving_while_it_lasts_on_a_single_node() {
    a_slow_redis_is_unavailable_within_the_deadline_and_not_serving_while_it_lasts(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_redis_is_unavailable_within_the_deadline_and_not_serving_while_it_lasts_on_a_cluster() {
    a_slow_redis_is_unavailable_within_the_deadline_and_not_serving_while_it_lasts(TestRedis::cluster()).await;
}

/// Redis loses the library (as a restarted node without persistence, a promoted replica or a new node does): the
/// next calls load it again by themselves and succeed.
async fn the_library_comes_back_by_itself(redis: TestRedis) {
    let mut s = stack(&redis.config(), 60_000).await;
    s.registry
        .register_game_server(registration("lost", "gs-1", "i-1"))
        .await
        .unwrap();
    let store = Store::connect(&redis.config()).await.unwrap();
    let _: () = store.query(redis::cmd("FUNCTION").arg("FLUSH")).await.unwrap();
    s.registry
        .register_game_server(registration("lost", "gs-2", "i-1"))
        .await
        .unwrap();
    let claimed = s
        .claims
        .claim_game_server(claim_any("lost"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(claimed.game_server.unwrap().game_server_id, "gs-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_comes_back_by_itself_on_a_single_node() {
    the_library_comes_back_by_itself(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_comes_back_by_itself_on_a_cluster() {
    the_library_comes_back_by_itself(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_health_reflection_and_shuts_down_gracefully() {
    let redis = TestRedis::single();
    let s = stack(&redis.config(), 60_000).await;
    let endpoint = s.placement.endpoint();
    assert_serves(
        &endpoint,
        &[
            "allocation.AllocationService",
            CLAIMS,
            "berth.placement.v1.PlacementService",
            "berth.placement.v1.QueueService",
        ],
    )
    .await;
    tokio::time::timeout(Duration::from_secs(5), s.placement.shutdown())
        .await
        .expect("an idle service shuts down at once");
    let refused = tonic::transport::Endpoint::from_shared(endpoint)
        .unwrap()
        .connect()
        .await;
    assert!(refused.is_err(), "no new connections after shutdown");
}
