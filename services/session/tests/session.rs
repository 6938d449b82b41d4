//! The session service process: it serves health and reflection, and its RPCs are closed to callers without a
//! fitting token and answer UNIMPLEMENTED until the session-service issue builds them.

use berth_proto::session::v1::DescribeGameSessionsRequest;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use berth_runtime::auth::Role;
use berth_store::Store;
use berth_testkit::{TestRedis, assert_serves, spawn_service, token};
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_health_reflection_and_guards_its_rpcs() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    let service = spawn_service(berth_session::service(store.clone()), store).await;
    assert_serves(
        &service.endpoint(),
        &[
            "berth.session.v1.GameSessionService",
            "berth.session.v1.PlayerSessionService",
        ],
    )
    .await;

    let as_server = berth_sdk::connect(&service.endpoint(), &token(Role::GameServer, Some(("f", "gs-1")))).await;
    let err = GameSessionServiceClient::new(as_server.unwrap())
        .describe_game_sessions(DescribeGameSessionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let as_client = berth_sdk::connect(&service.endpoint(), &token(Role::Client, None)).await;
    let err = GameSessionServiceClient::new(as_client.unwrap())
        .describe_game_sessions(DescribeGameSessionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}
