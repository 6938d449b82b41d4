//! Placements that wait for capacity make their fleet scale: a fleet of real example game servers (launched by the
//! fleet service's `process` provisioner, registering with a real health replica) under a buffer policy evaluated
//! hourly, on a single node and on the cluster. A burst of placements scales it up at once, and a location that
//! rests at zero instances is woken by a placement, which is then fulfilled.

use std::time::Duration;

use berth_proto::fleet::v1 as fpb;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_testkit::{Reaper, RunningService, TestRedis, binary, token};

/// Redis, with a health, a session, a fleet and a placement replica.
struct Stack {
    services: berth_teststack::Stack,
}

impl Stack {
    async fn start(redis: &TestRedis) -> Stack {
        Stack {
            services: berth_teststack::Stack::start(redis).await,
        }
    }

    async fn channel(service: &RunningService, role: Role) -> AuthedChannel {
        berth_sdk::connect(&service.endpoint(), &token(role, None))
            .await
            .unwrap()
    }

    /// A fleet of example game servers in location "local" with `desired` instances and a queue over it; once the
    /// location is deployed (when `desired` is more than 0), a buffer policy that keeps `minimum_idle` idle servers
    /// (resting at zero when that is 0 and nothing is busy).
    async fn fleet_and_queue(&self, fleet_id: &str, desired: u32, minimum_idle: u32) {
        let launch = fpb::ServerLaunchConfiguration {
            launch_path: binary("berth-example-game-server").display().to_string(),
            ..Default::default()
        };
        self.services
            .fleet_and_queue(berth_teststack::process_fleet(fleet_id, launch, desired))
            .await;
        let channel = Stack::channel(&self.services.fleet, Role::Operator).await;
        let mut fleets = FleetServiceClient::new(channel.clone());
        // Only a DEPLOYED location takes placements: it is deployed before any policy may scale it.
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let request = fpb::DescribeFleetRequest {
                fleet_id: fleet_id.into(),
            };
            let fleet = fleets
                .describe_fleet(request)
                .await
                .unwrap()
                .into_inner()
                .fleet
                .unwrap();
            if desired == 0 || fleet.locations[0].status() == fpb::LocationStatus::Deployed {
                break;
            }
            assert!(tokio::time::Instant::now() < until, "never deployed: {fleet:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let policy = fpb::PutScalingPolicyRequest {
            fleet_id: fleet_id.into(),
            name: "buffer".into(),
            evaluation_interval_seconds: 3600,
            scale_in_stabilization_seconds: Some(0),
            kind: Some(fpb::put_scaling_policy_request::Kind::Buffer(fpb::BufferPolicy {
                minimum_idle_servers: minimum_idle,
                persistent_idle: minimum_idle > 0,
                ..Default::default()
            })),
            ..Default::default()
        };
        ScalingServiceClient::new(channel)
            .put_scaling_policy(policy)
            .await
            .unwrap();
    }

    async fn fleet_client(&self) -> FleetServiceClient<AuthedChannel> {
        FleetServiceClient::new(Stack::channel(&self.services.fleet, Role::Operator).await)
    }

    async fn desired(&self, fleet_id: &str) -> u32 {
        let request = fpb::DescribeFleetRequest {
            fleet_id: fleet_id.into(),
        };
        let fleet = self
            .fleet_client()
            .await
            .describe_fleet(request)
            .await
            .unwrap()
            .into_inner();
        fleet.fleet.unwrap().locations[0].capacity.unwrap().desired_instances
    }

    /// Waits (within 60 s) until the location's desired count is `wanted`.
    async fn desired_reaches(&self, fleet_id: &str, wanted: u32) {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        while self.desired(fleet_id).await != wanted {
            assert!(tokio::time::Instant::now() < until, "desired never reached {wanted}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn place(&self, queue: &str, placement_id: &str) {
        let request = pb::StartGameSessionPlacementRequest {
            placement_id: placement_id.into(),
            queue_name: queue.into(),
            maximum_player_session_count: 4,
            ..Default::default()
        };
        let channel = Stack::channel(&self.services.placement, Role::Client).await;
        PlacementServiceClient::new(channel)
            .start_game_session_placement(request)
            .await
            .unwrap();
    }

    async fn scaling_actions(&self, fleet_id: &str) -> Vec<(u32, u32)> {
        let request = fpb::ListFleetEventsRequest {
            fleet_id: fleet_id.into(),
            codes: vec![fpb::FleetEventCode::ScalingAction.into()],
            ..Default::default()
        };
        let events = self
            .fleet_client()
            .await
            .list_fleet_events(request)
            .await
            .unwrap()
            .into_inner()
            .events;
        events
            .into_iter()
            .map(|e| {
                let change = e.capacity_change.unwrap_or_default();
                (change.previous_desired_instances, change.new_desired_instances)
            })
            .collect()
    }
}

fn unique(name: &str) -> String {
    format!("{name}-{:x}", uuid::Uuid::now_v7().simple())
}

async fn a_burst_of_placements_scales_its_fleet_up_at_once(redis: TestRedis) {
    let stack = Stack::start(&redis).await;
    let fleet = &unique("burst");
    let _reaper = Reaper(vec![fleet.clone()]);
    // One idle server kept, plus one: two instances, and a policy that would not look again for an hour.
    stack.fleet_and_queue(fleet, 0, 1).await;
    stack.desired_reaches(fleet, 2).await;
    let burst: Vec<String> = (0..6).map(|n| format!("{fleet}-{n}")).collect();
    for id in &burst {
        stack.place(fleet, id).await;
    }
    for id in &burst {
        let placement = stack.services.placement_ended(id).await;
        assert_eq!(placement.status(), pb::PlacementStatus::Fulfilled, "{placement:?}");
    }
    let actions = stack.scaling_actions(fleet).await;
    assert_eq!(actions[0], (0, 2));
    assert!(
        actions.iter().any(|(before, after)| *before >= 2 && *after >= 6),
        "the waiting placements scaled it up: {actions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_placements_scales_its_fleet_up_at_once_on_a_single_node() {
    a_burst_of_placements_scales_its_fleet_up_at_once(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_placements_scales_its_fleet_up_at_once_on_a_cluster() {
    a_burst_of_placements_scales_its_fleet_up_at_once(TestRedis::cluster()).await;
}

async fn a_location_at_zero_is_woken_by_a_placement_that_is_then_fulfilled(redis: TestRedis) {
    let stack = Stack::start(&redis).await;
    let fleet = &unique("resting");
    let _reaper = Reaper(vec![fleet.clone()]);
    // Deployed with one instance, then left by a buffer with no persistent idle servers: it rests at zero.
    stack.fleet_and_queue(fleet, 1, 0).await;
    stack.desired_reaches(fleet, 0).await;
    let placement_id = format!("{fleet}-wake");
    stack.place(fleet, &placement_id).await;
    let placement = stack.services.placement_ended(&placement_id).await;
    assert_eq!(placement.status(), pb::PlacementStatus::Fulfilled, "{placement:?}");
    assert_eq!(placement.fleet_id, *fleet);
    let actions = stack.scaling_actions(fleet).await;
    assert_eq!(actions[0], (1, 0), "it rested at zero first");
    assert!(
        actions[1..].iter().any(|(before, after)| *before == 0 && *after > 0),
        "{actions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_location_at_zero_is_woken_by_a_placement_that_is_then_fulfilled_on_a_single_node() {
    a_location_at_zero_is_woken_by_a_placement_that_is_then_fulfilled(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_location_at_zero_is_woken_by_a_placement_that_is_then_fulfilled_on_a_cluster() {
    a_location_at_zero_is_woken_by_a_placement_that_is_then_fulfilled(TestRedis::cluster()).await;
}
