//! `replica` durability (BERTH_REDIS_DURABILITY): a placement's start and a claim are answered only once a replica
//! of the primary holds them. With the replica frozen, each answers UNAVAILABLE saying it may or may not have landed
//! and that a retry with the same id or token is safe; once the replica is back, that retry returns what the first
//! call made, never a second.

use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_runtime::auth::Role;
use berth_store::{Durability, RedisConfig, Store};
use berth_testkit::{RedisServer, anywhere_fleet, spawn_service, token};
use tonic::Code;

const QUEUE: &str = "durable";

fn start(id: &str) -> pb::StartGameSessionPlacementRequest {
    pb::StartGameSessionPlacementRequest {
        placement_id: id.into(),
        queue_name: QUEUE.into(),
        maximum_player_session_count: 4,
        ..Default::default()
    }
}

/// A primary with a replica following it, and a store's settings that make every acknowledged write wait for it.
fn replicated() -> (RedisServer, RedisServer, RedisConfig) {
    let primary = RedisServer::start();
    let replica = RedisServer::replica_of(&primary);
    let config = RedisConfig {
        durability: Durability::Replica,
        ..primary.config()
    };
    (primary, replica, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_start_no_replica_confirms_answers_unavailable_and_its_retry_finds_it() {
    let (_primary, replica, config) = replicated();
    let store = Store::connect(&config).await.unwrap();
    anywhere_fleet(&store, QUEUE, &["local"]).await;
    let args = berth_placement::PlacementArgs::default();
    let service = spawn_service(berth_placement::service(store.clone(), &args), store.clone()).await;
    let operator = berth_sdk::connect(&service.endpoint(), &token(Role::Operator, None))
        .await
        .unwrap();
    let queue = pb::CreateQueueRequest {
        name: QUEUE.into(),
        destinations: vec![pb::QueueDestination { fleet_id: QUEUE.into() }],
        timeout_seconds: 600,
        ..Default::default()
    };
    QueueServiceClient::new(operator).create_queue(queue).await.unwrap();
    let client = berth_sdk::connect(&service.endpoint(), &token(Role::Client, None))
        .await
        .unwrap();
    let mut placements = PlacementServiceClient::new(client);
    placements.start_game_session_placement(start("first")).await.unwrap();

    replica.pause();
    let unconfirmed = placements
        .start_game_session_placement(start("second"))
        .await
        .unwrap_err();
    replica.resume();
    assert_eq!(unconfirmed.code(), Code::Unavailable, "{unconfirmed:?}");
    for says in ["may or may not have landed", "a retry naming it the same way"] {
        assert!(unconfirmed.message().contains(says), "{unconfirmed:?}");
    }

    let retried = placements
        .start_game_session_placement(start("second"))
        .await
        .unwrap()
        .into_inner()
        .placement
        .unwrap();
    assert_eq!(retried.status(), pb::PlacementStatus::Pending);
    let listed = placements
        .list_game_session_placements(pb::ListGameSessionPlacementsRequest {
            queue_name: QUEUE.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<_> = listed.placements.iter().map(|p| p.placement_id.as_str()).collect();
    assert_eq!(ids, ["first", "second"], "the retry made no second placement");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_no_replica_confirms_answers_unavailable_and_its_retry_with_the_token_gets_that_server() {
    let (_primary, replica, config) = replicated();
    let mut s = crate::stack(&config, 60_000).await;
    for i in 0..3 {
        s.registry
            .register_game_server(crate::registration("token", &format!("gs-{i}"), "i-1"))
            .await
            .unwrap();
    }
    let claim = pb::ClaimGameServerRequest {
        fleet_id: "token".into(),
        idempotency_token: "match-7".into(),
        ..Default::default()
    };
    replica.pause();
    let unconfirmed = s.claims.claim_game_server(claim.clone()).await.unwrap_err();
    replica.resume();
    assert_eq!(unconfirmed.code(), Code::Unavailable, "{unconfirmed:?}");
    assert!(
        unconfirmed.message().contains("may or may not have landed"),
        "{unconfirmed:?}"
    );
    s.claims.claim_game_server(claim).await.unwrap();
    assert_eq!(
        berth_store::pool::pool_sizes(&s.store, "token").await.unwrap(),
        (2, 1),
        "the retry answered the claim the unconfirmed call made, and claimed no second server"
    );
}
