//! The four services served in-process over one Redis, wired as a deployment wires them (the fleet service's
//! launched servers speak to the health service; the fleet reconciles every 100 ms and the placement worker retries
//! every 100 ms, so a test sees in seconds what takes minutes at the defaults). Apart from the testkit because it
//! depends on the services, whose own tests use the testkit.

use berth_proto::fleet::v1 as fpb;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_runtime::auth::{Role, TokenKey};
use berth_sdk::AuthedChannel;
use berth_store::Store;
use berth_testkit::{RunningService, TEST_KEY, TestRedis, spawn_service, spawn_service_at, token};

/// A running stack.
pub struct Stack {
    pub store: Store,
    pub health: RunningService,
    pub session: RunningService,
    pub fleet: RunningService,
    pub placement: RunningService,
}

impl Stack {
    /// The four services over `redis`.
    pub async fn start(redis: &TestRedis) -> Stack {
        let store = Store::connect(&redis.config()).await.expect("redis reachable");
        let health = spawn_service(
            berth_health::service(store.clone(), &berth_health::HealthArgs::default()),
            store.clone(),
        )
        .await;
        let session = spawn_service(
            berth_session::service(store.clone(), &berth_session::SessionArgs::default()),
            store.clone(),
        )
        .await;
        let fleet_args = berth_fleet::FleetArgs {
            sdk_endpoint: health.endpoint(),
            reconcile_ms: 100,
            ..Default::default()
        };
        let key = TokenKey::new(TEST_KEY.to_vec()).expect("the test key is long enough");
        let fleet = spawn_service(
            berth_fleet::service(store.clone(), &fleet_args, Some(key)),
            store.clone(),
        )
        .await;
        let placement = spawn_service(placement(&store), store.clone()).await;
        Stack {
            store,
            health,
            session,
            fleet,
            placement,
        }
    }
}

/// A placement replica retrying every 100 ms.
fn placement(store: &Store) -> berth_runtime::server::ServiceDef {
    let args = berth_placement::PlacementArgs {
        placement_retry_ms: 100,
        ..Default::default()
    };
    berth_placement::service(store.clone(), &args)
}

impl Stack {
    /// Stops the placement replica (its calls drained, its watches ended UNAVAILABLE) and starts another at its
    /// address, as a rolling restart does.
    pub async fn restart_placement(&mut self) {
        let addr = self.placement.addr;
        self.placement.stop().await;
        self.placement = spawn_service_at(placement(&self.store), self.store.clone(), addr).await;
    }

    /// A channel to `service` with an operator's token.
    pub async fn operator(service: &RunningService) -> AuthedChannel {
        berth_sdk::connect(&service.endpoint(), &token(Role::Operator, None))
            .await
            .expect("the service answers")
    }

    /// Placement `id` once it has ended (within 60 s).
    pub async fn placement_ended(&self, id: &str) -> pb::GameSessionPlacement {
        let channel = berth_sdk::connect(&self.placement.endpoint(), &token(Role::Client, None))
            .await
            .expect("the service answers");
        let mut placements = PlacementServiceClient::new(channel);
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let request = pb::DescribeGameSessionPlacementRequest {
                placement_id: id.into(),
            };
            let placement = placements
                .describe_game_session_placement(request)
                .await
                .expect("the placement is described")
                .into_inner()
                .placement
                .expect("the answer holds the placement");
            if placement.status() != pb::PlacementStatus::Pending {
                return placement;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "placement {id} still PENDING after 60 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Creates `fleet`, and a queue of the same name over it (placements time out after 120 s).
    pub async fn fleet_and_queue(&self, fleet: fpb::CreateFleetRequest) {
        let queue = pb::CreateQueueRequest {
            name: fleet.fleet_id.clone(),
            destinations: vec![pb::QueueDestination {
                fleet_id: fleet.fleet_id.clone(),
            }],
            timeout_seconds: 120,
            ..Default::default()
        };
        FleetServiceClient::new(Stack::operator(&self.fleet).await)
            .create_fleet(fleet)
            .await
            .expect("the fleet is created");
        QueueServiceClient::new(Stack::operator(&self.placement).await)
            .create_queue(queue)
            .await
            .expect("the queue is created");
    }
}

/// A fleet on the `process` provisioner launching `launch`, one server per instance of type "small", in location
/// "local" with `desired` instances (at most 20).
pub fn process_fleet(fleet_id: &str, launch: fpb::ServerLaunchConfiguration, desired: u32) -> fpb::CreateFleetRequest {
    fpb::CreateFleetRequest {
        fleet_id: fleet_id.into(),
        provisioner: "process".into(),
        launch_configuration: Some(launch),
        instance_definitions: vec![fpb::InstanceDefinition {
            instance_type: "small".into(),
            ..Default::default()
        }],
        locations: vec![fpb::LocationConfiguration {
            location: "local".into(),
            capacity: Some(fpb::FleetCapacity {
                minimum_instances: 0,
                maximum_instances: 20,
                desired_instances: desired,
            }),
            standby: None,
        }],
        ..Default::default()
    }
}
