//! The fleet service process: it serves health and reflection, and its RPCs are open to operators only and
//! answer UNIMPLEMENTED until the fleet-service issue builds them.

use berth_proto::fleet::v1::ListFleetsRequest;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_runtime::auth::Role;
use berth_store::Store;
use berth_testkit::{TestRedis, assert_serves, spawn_service, token};
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_health_reflection_and_guards_its_rpcs() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    let service = spawn_service(berth_fleet::service(store.clone()), store).await;
    assert_serves(
        &service.endpoint(),
        &["berth.fleet.v1.FleetService", "berth.fleet.v1.ScalingService"],
    )
    .await;

    let as_client = berth_sdk::connect(&service.endpoint(), &token(Role::Client, None)).await;
    let err = FleetServiceClient::new(as_client.unwrap())
        .list_fleets(ListFleetsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    let as_operator = berth_sdk::connect(&service.endpoint(), &token(Role::Operator, None)).await;
    let err = FleetServiceClient::new(as_operator.unwrap())
        .list_fleets(ListFleetsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}
