//! The health service's game-server registry through real gRPC against a real Redis: registration rules, scoped
//! game-server tokens, paging, instance status, and what every Berth process serves (health, reflection). The SDK
//! stream's tests are in `health/stream.rs`, and what its contract promises beyond the flow in `health/contract.rs`.

#[path = "health/contract.rs"]
mod contract;
#[path = "health/stream.rs"]
mod stream;

use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::health::v1::{
    self as pb, DeregisterGameServerRequest, DescribeGameServerRequest, ListGameServersRequest,
    RegisterGameServerRequest, SetInstanceStatusRequest, UpdateGameServerRequest,
};
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_store::Store;
use berth_testkit::{RunningService, TestRedis, anywhere_fleet, assert_serves, spawn_service, token};
use tonic::Code;
use tonic_types::StatusExt;

/// A health replica over `redis`, with these fleets created (ANYWHERE, located in "local").
async fn health(redis: &TestRedis, fleets: &[&str]) -> RunningService {
    let store = Store::connect(&redis.config()).await.expect("redis reachable");
    for fleet_id in fleets {
        anywhere_fleet(&store, fleet_id, &["local"]).await;
    }
    spawn_service(
        berth_health::service(store.clone(), &berth_health::HealthArgs::default()),
        store,
    )
    .await
}

async fn client(
    service: &RunningService,
    role: Role,
    scope: Option<(&str, &str)>,
) -> GameServerServiceClient<AuthedChannel> {
    GameServerServiceClient::new(
        berth_sdk::connect(&service.endpoint(), &token(role, scope))
            .await
            .unwrap(),
    )
}

fn registration(fleet: &str, id: &str) -> RegisterGameServerRequest {
    RegisterGameServerRequest {
        fleet_id: fleet.into(),
        game_server_id: id.into(),
        instance_id: "i-1".into(),
        connection_info: "10.0.0.9:7777".into(),
        game_server_data: "{\"map\":\"dust\"}".into(),
    }
}

fn violated_fields(status: &tonic::Status) -> Vec<String> {
    status
        .get_details_bad_request()
        .expect("field violations attached")
        .field_violations
        .into_iter()
        .map(|violation| violation.field)
        .collect()
}

async fn count(operator: &mut GameServerServiceClient<AuthedChannel>, fleet: &str) -> usize {
    let request = ListGameServersRequest {
        fleet_id: fleet.into(),
        page_size: 1000,
        page_token: String::new(),
    };
    operator
        .list_game_servers(request)
        .await
        .unwrap()
        .into_inner()
        .game_servers
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_health_and_lists_its_services_by_reflection() {
    let redis = TestRedis::single();
    let service = health(&redis, &[]).await;
    assert_serves(
        &service.endpoint(),
        &["berth.health.v1.GameServerService", "berth.health.v1.SdkService"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_is_checked_whole_and_changes_nothing_when_bad() {
    let redis = TestRedis::single();
    let service = health(&redis, &["arena"]).await;
    let mut operator = client(&service, Role::Operator, None).await;
    let bad = RegisterGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs".into(),
        instance_id: String::new(),
        connection_info: "c".repeat(513),
        game_server_data: "d".repeat(1025),
    };
    let err = operator.register_game_server(bad).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let fields = ["game_server_id", "instance_id", "connection_info", "game_server_data"];
    assert_eq!(violated_fields(&err), fields);
    assert!(err.message().contains("at most 512"), "{}", err.message());
    assert_eq!(count(&mut operator, "arena").await, 0);
    let bad_fleet = RegisterGameServerRequest {
        fleet_id: "arena eu".into(),
        ..registration("arena", "gs-1")
    };
    let err = operator.register_game_server(bad_fleet).await.unwrap_err();
    assert_eq!(violated_fields(&err), ["fleet_id"]);
    // A fleet nobody created takes no server.
    let err = operator
        .register_game_server(registration("nowhere", "gs-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert_eq!(count(&mut operator, "nowhere").await, 0);

    operator
        .register_game_server(registration("arena", "gs-1"))
        .await
        .unwrap();
    // A retry of the same registration (its reply was lost, say) succeeds; a different one does not.
    operator
        .register_game_server(registration("arena", "gs-1"))
        .await
        .unwrap();
    let elsewhere = RegisterGameServerRequest {
        connection_info: "10.0.0.10:7777".into(),
        ..registration("arena", "gs-1")
    };
    let again = operator.register_game_server(elsewhere).await.unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists);
    assert_eq!(count(&mut operator, "arena").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_game_server_token_acts_only_for_its_own_server() {
    let redis = TestRedis::single();
    let service = health(&redis, &["arena"]).await;
    let mut operator = client(&service, Role::Operator, None).await;
    let mut gs1 = client(&service, Role::GameServer, Some(("arena", "gs-1"))).await;

    let err = gs1
        .register_game_server(registration("arena", "gs-2"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let err = gs1
        .register_game_server(registration("other", "gs-1"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_eq!(count(&mut operator, "arena").await, 0);
    assert_eq!(count(&mut operator, "other").await, 0);

    gs1.register_game_server(registration("arena", "gs-1")).await.unwrap();
    operator
        .register_game_server(registration("arena", "gs-2"))
        .await
        .unwrap();
    let steal = DeregisterGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-2".into(),
    };
    assert_eq!(
        gs1.deregister_game_server(steal).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let meddle = UpdateGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-2".into(),
        game_server_data: Some("not yours".into()),
        ..Default::default()
    };
    assert_eq!(
        gs1.update_game_server(meddle).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let peek = DescribeGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-2".into(),
    };
    assert_eq!(
        gs1.describe_game_server(peek.clone()).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let gs2 = operator
        .describe_game_server(peek)
        .await
        .unwrap()
        .into_inner()
        .game_server
        .unwrap();
    assert_eq!(gs2.game_server_data, "{\"map\":\"dust\"}");
    let drain = SetInstanceStatusRequest {
        fleet_id: "arena".into(),
        instance_id: "i-1".into(),
        instance_status: pb::InstanceStatus::Draining as i32,
    };
    assert_eq!(
        gs1.set_instance_status(drain).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    assert_eq!(count(&mut operator, "arena").await, 2);

    let mut matchmaker = client(&service, Role::Client, None).await;
    let err = matchmaker
        .register_game_server(registration("arena", "gs-3"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_and_data_are_recorded() {
    let redis = TestRedis::single();
    let service = health(&redis, &["arena"]).await;
    let mut gs = client(&service, Role::GameServer, Some(("arena", "gs-1"))).await;
    gs.register_game_server(registration("arena", "gs-1")).await.unwrap();
    let update = UpdateGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
        game_server_data: Some("{\"map\":\"inferno\"}".into()),
        health_check: pb::HealthCheck::Healthy as i32,
        ..Default::default()
    };
    gs.update_game_server(update).await.unwrap();
    let describe = DescribeGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
    };
    let server = gs
        .describe_game_server(describe)
        .await
        .unwrap()
        .into_inner()
        .game_server
        .unwrap();
    assert_eq!(server.game_server_data, "{\"map\":\"inferno\"}");
    assert_eq!(server.health_check(), pb::HealthCheck::Healthy);
    assert!(server.last_health_check_time.is_some());
    assert_eq!(server.utilization_status(), pb::UtilizationStatus::Available);
}

async fn pages_cover_every_server_once(redis: TestRedis) {
    let service = health(&redis, &["paged"]).await;
    let mut operator = client(&service, Role::Operator, None).await;
    for i in 0..25 {
        operator
            .register_game_server(registration("paged", &format!("gs-{i:02}")))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut page_token = String::new();
    loop {
        let request = ListGameServersRequest {
            fleet_id: "paged".into(),
            page_size: 10,
            page_token: page_token.clone(),
        };
        let page = operator.list_game_servers(request).await.unwrap().into_inner();
        assert!(page.game_servers.len() <= 10);
        seen.extend(page.game_servers.into_iter().map(|server| server.game_server_id));
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    let expected: Vec<String> = (0..25).map(|i| format!("gs-{i:02}")).collect();
    assert_eq!(seen, expected);
    let too_big = ListGameServersRequest {
        fleet_id: "paged".into(),
        page_size: 1001,
        page_token: String::new(),
    };
    let err = operator.list_game_servers(too_big).await.unwrap_err();
    assert_eq!(violated_fields(&err), ["page_size"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_cover_every_server_once_on_a_single_node() {
    pages_cover_every_server_once(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_cover_every_server_once_on_a_cluster() {
    pages_cover_every_server_once(TestRedis::cluster()).await;
}
