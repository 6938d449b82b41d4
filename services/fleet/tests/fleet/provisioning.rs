//! Fleets whose instances the fleet service launches with the `process` provisioner: real example game servers,
//! started as OS processes, registering with a real health replica, on a single node and on the cluster. Each test
//! uses fleet ids of its own, and kills what its fleets launched when it ends.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::records::describe;
use berth_domain::stored::ProcessState;
use berth_proto::fleet::v1 as pb;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_runtime::auth::{Role, TokenKey};
use berth_store::instances::{self, Acted, InstanceRecord, Lease, Leased};
use berth_store::keys::FleetKeys;
use berth_store::sessions::{self, Created, NewGameSession};
use berth_store::{RedisMode, Store};
use berth_testkit::{
    BinaryProcess, Reaper, RunningService, SESSION_TIMINGS, TEST_KEY, TestRedis, binary, spawn_service, token,
    wait_for_health,
};
use tonic_health::pb::health_check_response::ServingStatus;

pub(super) type Client = FleetServiceClient<berth_sdk::AuthedChannel>;

/// The health replica the launched game servers speak to, and fleet replicas launching them.
pub(super) struct Stack {
    pub(super) store: Store,
    pub(super) health: RunningService,
    pub(super) fleet: Vec<RunningService>,
}

async fn stack(redis: &TestRedis, fleet_replicas: usize) -> Stack {
    stack_over(redis, fleet_replicas, berth_fleet::FleetArgs::default()).await
}

/// A stack whose fleet replicas run with `settings` (their provisioners, above all), reconciling quickly.
pub(super) async fn stack_over(redis: &TestRedis, fleet_replicas: usize, settings: berth_fleet::FleetArgs) -> Stack {
    let store = Store::connect(&redis.config()).await.unwrap();
    let health_args = berth_health::HealthArgs {
        initial_delay_ms: 2000,
        heartbeat_flush_ms: 5,
        monitor_sweep_ms: 50,
        ..Default::default()
    };
    let health = spawn_service(berth_health::service(store.clone(), &health_args), store.clone()).await;
    let mut fleet = Vec::new();
    for replica in 0..fleet_replicas {
        let args = berth_fleet::FleetArgs {
            sdk_endpoint: health.endpoint(),
            reconcile_ms: 100,
            lease_ms: 1000,
            replica_id: Some(format!("replica-{replica}")),
            sweep_ms: 100,
            ..settings.clone()
        };
        let key = TokenKey::new(TEST_KEY.to_vec()).unwrap();
        fleet.push(spawn_service(berth_fleet::service(store.clone(), &args, Some(key)), store.clone()).await);
    }
    Stack { store, health, fleet }
}

pub(super) async fn client(service: &RunningService) -> Client {
    FleetServiceClient::new(
        berth_sdk::connect(&service.endpoint(), &token(Role::Operator, None))
            .await
            .unwrap(),
    )
}

/// A MANAGED fleet of `launch_path` on the process provisioner, one server per instance, in location "local",
/// with the shortest deadlines the contract allows.
pub(super) fn managed(fleet_id: &str, launch_path: &str, desired: u32) -> pb::CreateFleetRequest {
    pb::CreateFleetRequest {
        fleet_id: fleet_id.into(),
        provisioner: "process".into(),
        launch_configuration: Some(pb::ServerLaunchConfiguration {
            launch_path: launch_path.into(),
            ..Default::default()
        }),
        instance_definitions: ["small", "large"]
            .map(|t| pb::InstanceDefinition {
                instance_type: t.into(),
                ..Default::default()
            })
            .to_vec(),
        server_processes_per_instance: 1,
        process_timeouts: Some(pb::ProcessTimeouts {
            register_timeout_seconds: 10,
            ready_timeout_seconds: 10,
            heartbeat_interval_ms: 1000,
            termination_grace_seconds: 10,
            exit_timeout_seconds: 1,
            location_first_heartbeat_timeout_seconds: 60,
            location_ready_timeout_seconds: 60,
            ..Default::default()
        }),
        locations: vec![pb::LocationConfiguration {
            location: "local".into(),
            capacity: Some(pb::FleetCapacity {
                minimum_instances: 0,
                maximum_instances: 10,
                desired_instances: desired,
            }),
            standby: None,
        }],
        ..Default::default()
    }
}

/// A fleet id of this run's own: the single-node and cluster runs of a test go on at once, on one host.
pub(super) fn fleet_id(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{name}-{nanos:x}")
}

pub(super) fn example() -> String {
    binary("berth-example-game-server").display().to_string()
}

/// The location's instances, once `done` holds of them (within 30 s).
pub(super) async fn instances_when(
    store: &Store,
    fleet_id: &str,
    what: &str,
    done: impl Fn(&[InstanceRecord]) -> bool,
) -> Vec<InstanceRecord> {
    let read = || async {
        instances::read_instances(store, fleet_id, "local")
            .await
            .unwrap()
            .instances
    };
    when(what, read, done).await
}

/// What `read` answers once `done` holds of it (within 30 s), read every 100 ms.
pub(super) async fn when<T: std::fmt::Debug, F: Future<Output = Vec<T>>>(
    what: &str,
    read: impl Fn() -> F,
    done: impl Fn(&[T]) -> bool,
) -> Vec<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = read().await;
        if done(&found) {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: never happened; found {found:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn ready(instance: &InstanceRecord) -> bool {
    instance
        .servers
        .iter()
        .all(|s| matches!(s.process, Some(ProcessState::StandingBy | ProcessState::Active)))
}

pub(super) fn all_ready(count: usize) -> impl Fn(&[InstanceRecord]) -> bool {
    move |found| found.len() == count && found.iter().all(ready)
}

pub(super) fn ids(found: &[InstanceRecord]) -> BTreeSet<String> {
    found.iter().map(|i| i.id.clone()).collect()
}

pub(super) async fn events(client: &mut Client, fleet_id: &str) -> Vec<pb::FleetEvent> {
    let request = pb::ListFleetEventsRequest {
        fleet_id: fleet_id.into(),
        page_size: 1000,
        ..Default::default()
    };
    client.list_fleet_events(request).await.unwrap().into_inner().events
}

pub(super) fn count(events: &[pb::FleetEvent], code: pb::FleetEventCode) -> usize {
    events.iter().filter(|e| e.code() == code).count()
}

pub(super) async fn location(client: &mut Client, fleet_id: &str) -> pb::FleetLocation {
    describe(client, fleet_id)
        .await
        .unwrap()
        .locations
        .into_iter()
        .next()
        .unwrap()
}

/// The utilization of the fleet's (only) location, checked against the fleet total it sums into.
async fn utilization(client: &mut Client, fleet_id: &str) -> pb::LocationUtilization {
    let request = pb::GetFleetUtilizationRequest {
        fleet_id: fleet_id.into(),
        location: String::new(),
    };
    let read = client
        .get_fleet_utilization(request)
        .await
        .unwrap()
        .into_inner()
        .utilization
        .unwrap();
    let [local] = &read.locations[..] else {
        panic!("one location: {read:?}");
    };
    let total = read.total.clone().unwrap();
    assert_eq!(total.location, "");
    assert_eq!(
        pb::LocationUtilization {
            location: local.location.clone(),
            ..total
        },
        *local,
        "the total of one location is that location"
    );
    local.clone()
}

/// Instance counts (desired, pending, active, idle) and server counts (launching, available, utilized).
fn counts(u: &pb::LocationUtilization) -> ([u32; 4], [u32; 3]) {
    counts_of(u.instance_counts, u.game_server_counts)
}

fn counts_of(i: Option<pb::InstanceCounts>, g: Option<pb::GameServerCounts>) -> ([u32; 4], [u32; 3]) {
    let (i, g) = (i.unwrap(), g.unwrap());
    (
        [i.desired, i.pending, i.active, i.idle],
        [g.launching, g.available, g.utilized],
    )
}

pub(super) async fn set_desired(client: &mut Client, fleet_id: &str, desired: u32) {
    let request = pb::UpdateFleetCapacityRequest {
        fleet_id: fleet_id.into(),
        location: "local".into(),
        desired_instances: Some(desired),
        ..Default::default()
    };
    client.update_fleet_capacity(request).await.unwrap();
}

/// The pid of an instance's (only) process, from the process provisioner's handle `pid:start`.
pub(super) fn pid(instance: &InstanceRecord) -> i32 {
    instance.handle.split(':').next().unwrap().parse().unwrap()
}

async fn a_fleet_launches_replaces_and_scales_in_its_instances(redis: TestRedis) {
    let stack = stack(&redis, 1).await;
    let launch = &fleet_id("arena-launch");
    let _reaper = Reaper(vec![launch.into()]);
    let mut fleets = client(&stack.fleet[0]).await;
    fleets.create_fleet(managed(launch, &example(), 3)).await.unwrap();

    // Three instances launch; their servers register and become ready; the location is DEPLOYED.
    let first = instances_when(&stack.store, launch, "3 ready", all_ready(3)).await;
    assert!(
        first.iter().all(|i| i.instance_type == "small"),
        "the first type in preference order"
    );
    let deployed = location(&mut fleets, launch).await;
    assert_eq!(deployed.status(), pb::LocationStatus::Deployed);
    // DescribeFleet and ListFleets show the live counts, per location and summed over the fleet.
    let three_idle = ([3, 0, 3, 3], [0, 3, 0]);
    assert_eq!(
        counts_of(deployed.instance_counts, deployed.game_server_counts),
        three_idle
    );
    let described = describe(&mut fleets, launch).await.unwrap();
    assert_eq!(
        counts_of(described.instance_counts, described.game_server_counts),
        three_idle
    );
    let listed = fleets
        .list_fleets(pb::ListFleetsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let summed = listed.fleets.iter().find(|f| f.fleet_id == *launch).unwrap();
    assert_eq!(counts_of(summed.instance_counts, summed.game_server_counts), three_idle);
    let seen = events(&mut fleets, launch).await;
    let order: Vec<_> = seen.iter().map(|e| e.code()).collect();
    let position = |code| order.iter().position(|c| *c == code).unwrap();
    assert!(position(pb::FleetEventCode::LocationDeploying) < position(pb::FleetEventCode::FleetActivating));
    assert!(position(pb::FleetEventCode::FleetActivating) < position(pb::FleetEventCode::InstanceLaunched));
    assert!(position(pb::FleetEventCode::InstanceLaunched) < position(pb::FleetEventCode::LocationDeployed));
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceLaunched), 3);
    assert_eq!(count(&seen, pb::FleetEventCode::FleetActive), 1);
    let ready = utilization(&mut fleets, launch).await;
    assert_eq!(counts(&ready), ([3, 0, 3, 3], [0, 3, 0]));
    assert_eq!(
        (
            ready.active_server_processes,
            ready.available_game_sessions,
            ready.percent_idle_instances
        ),
        (3, 3, 100.0)
    );
    assert!(ready.server_startup_time_average_ms > 0, "{ready:?}");

    // A process killed outright is replaced.
    let victim = first[0].clone();
    // SAFETY: kill(2) of a game server this test's fleet launched.
    unsafe {
        libc::kill(pid(&victim), libc::SIGKILL);
    }
    let replaced = instances_when(&stack.store, launch, "the killed one replaced", |found| {
        all_ready(3)(found) && !ids(found).contains(&victim.id)
    })
    .await;
    assert_eq!(ids(&replaced).intersection(&ids(&first)).count(), 2);
    let seen = events(&mut fleets, launch).await;
    assert!(
        seen.iter()
            .any(|e| e.code() == pb::FleetEventCode::InstanceTerminated && e.instance_id == victim.id)
    );

    // A protected game session on one instance; lowering the desired count removes the idle ones, never it.
    let protected = &replaced[0];
    let server_id = protected.servers[0].id.clone();
    let session_id = berth_domain::game_session::new_game_session_id(launch);
    let new = NewGameSession {
        game_server_id: Some(&server_id),
        protected: Some(true),
        ..NewGameSession::new(&session_id, launch, 4)
    };
    let created = sessions::create_game_session(&stack.store, &new, &SESSION_TIMINGS)
        .await
        .unwrap();
    assert!(matches!(created, Created::Created(..)), "{created:?}");
    let hosting = utilization(&mut fleets, launch).await;
    assert_eq!(counts(&hosting), ([3, 0, 3, 2], [0, 2, 1]));
    assert_eq!(
        (hosting.activating_game_sessions, hosting.available_game_sessions),
        (1, 2)
    );
    assert!((hosting.percent_utilized_game_servers - 100.0 / 3.0).abs() < 1e-9);
    assert!(hosting.game_session_allocations_per_minute > 0.0);
    set_desired(&mut fleets, launch, 1).await;
    let left = instances_when(&stack.store, launch, "scaled in to 1", |found| found.len() == 1).await;
    assert_eq!(left[0].id, protected.id, "the protected instance stays");
    let scaled = utilization(&mut fleets, launch).await;
    assert_eq!(counts(&scaled).0, [1, 0, 1, 0]);
    set_desired(&mut fleets, launch, 0).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = instances::read_instances(&stack.store, launch, "local")
        .await
        .unwrap()
        .instances;
    assert_eq!(ids(&still), ids(&left), "not even at 0 is a protected instance removed");
    let seen = events(&mut fleets, launch).await;
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceTerminated), 3);
    drop(stack.health);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_launches_replaces_and_scales_in_its_instances_on_a_single_node() {
    a_fleet_launches_replaces_and_scales_in_its_instances(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_launches_replaces_and_scales_in_its_instances_on_a_cluster() {
    a_fleet_launches_replaces_and_scales_in_its_instances(TestRedis::cluster()).await;
}

async fn a_non_viable_instance_type_drains_and_is_replaced_first(redis: TestRedis) {
    let stack = stack(&redis, 1).await;
    let spot = &fleet_id("arena-spot");
    let _reaper = Reaper(vec![spot.into()]);
    let mut fleets = client(&stack.fleet[0]).await;
    fleets.create_fleet(managed(spot, &example(), 2)).await.unwrap();
    let small = instances_when(&stack.store, spot, "2 ready", all_ready(2)).await;
    let playing = small[0].servers[0].id.clone();
    let session_id = berth_domain::game_session::new_game_session_id(spot);
    let new = NewGameSession {
        game_server_id: Some(&playing),
        protected: Some(true),
        ..NewGameSession::new(&session_id, spot, 4)
    };
    sessions::create_game_session(&stack.store, &new, &SESSION_TIMINGS)
        .await
        .unwrap();

    let judged = pb::SetInstanceTypeViabilityRequest {
        fleet_id: spot.into(),
        location: "local".into(),
        instance_type: "small".into(),
        viable: false,
        reason: "interruptions".into(),
    };
    fleets.set_instance_type_viability(judged).await.unwrap();
    // Replacements of the other type come up; then the idle drained instance goes, the one with protected
    // gameplay stays, draining.
    let after = instances_when(&stack.store, spot, "replaced", |found| {
        let large: Vec<_> = found.iter().filter(|i| i.instance_type == "large").collect();
        large.len() == 2 && large.iter().all(|i| ready(i)) && found.len() == 3
    })
    .await;
    let kept: Vec<_> = after.iter().filter(|i| i.instance_type == "small").collect();
    assert_eq!(kept[0].id, small[0].id);
    assert_eq!(kept[0].state, berth_domain::stored::InstanceState::Draining);

    // DescribeInstances shows the same: the drained instance with its protected gameplay, its replacements running
    // with idle servers.
    let describe = |instance_id: &str, location: &str| pb::DescribeInstancesRequest {
        fleet_id: spot.into(),
        location: location.into(),
        instance_id: instance_id.into(),
    };
    let shown = fleets
        .describe_instances(describe("", "local"))
        .await
        .unwrap()
        .into_inner()
        .instances;
    assert_eq!(shown.len(), 3, "{shown:?}");
    let drained = shown.iter().find(|i| i.instance_id == small[0].id).unwrap();
    assert_eq!(drained.state(), pb::InstanceState::Draining);
    let hosting = drained.processes.iter().find(|p| p.game_server_id == playing).unwrap();
    assert_eq!((hosting.game_sessions, hosting.protected), (1, true), "{hosting:?}");
    for replacement in shown.iter().filter(|i| i.instance_type == "large") {
        assert_eq!(replacement.state(), pb::InstanceState::Running);
        assert!(!replacement.provisioner_handle.is_empty());
        assert!(
            replacement
                .processes
                .iter()
                .all(|p| p.state() == pb::ProcessState::StandingBy && p.register_time.is_some())
        );
    }
    let one = fleets
        .describe_instances(describe(&small[0].id, "local"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(one.instances.len(), 1);
    let unknown = fleets
        .describe_instances(describe("i-unknown", "local"))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    let elsewhere = fleets.describe_instances(describe("", "mars")).await.unwrap_err();
    assert_eq!(elsewhere.code(), tonic::Code::NotFound, "{elsewhere:?}");
    let unnamed = fleets.describe_instances(describe("", "")).await.unwrap_err();
    assert_eq!(unnamed.code(), tonic::Code::InvalidArgument);
    assert!(unnamed.message().contains("location"), "{unnamed:?}");
    let seen = events(&mut fleets, spot).await;
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceDraining), 2);
    let first_launch_of_large = seen
        .iter()
        .position(|e| e.code() == pb::FleetEventCode::InstanceLaunched && e.message == "large")
        .unwrap();
    let first_removal = seen
        .iter()
        .position(|e| e.code() == pb::FleetEventCode::InstanceTerminated)
        .unwrap();
    assert!(first_launch_of_large < first_removal, "replacements are launched first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_non_viable_instance_type_drains_and_is_replaced_first_on_a_single_node() {
    a_non_viable_instance_type_drains_and_is_replaced_first(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_non_viable_instance_type_drains_and_is_replaced_first_on_a_cluster() {
    a_non_viable_instance_type_drains_and_is_replaced_first(TestRedis::cluster()).await;
}

/// A launch path that exits at once, and one that does not exist: every launch fails or dies, with events (a crash
/// with its exit status for each exit), and the location turns UNHEALTHY at its first-heartbeat deadline (60 s, the
/// contract's least), launching nothing after, until new launch settings or new capacity deploy it again.
async fn a_build_that_never_runs_turns_its_location_unhealthy(redis: TestRedis) {
    let stack = stack(&redis, 1).await;
    let (exits, missing) = (&fleet_id("arena-exits"), &fleet_id("arena-missing"));
    let _reaper = Reaper(vec![exits.into(), missing.into()]);
    let mut fleets = client(&stack.fleet[0]).await;
    fleets.create_fleet(managed(exits, "/bin/false", 2)).await.unwrap();
    fleets
        .create_fleet(managed(missing, "/nonexistent/server", 2))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    for fleet_id in [exits, missing] {
        while location(&mut fleets, fleet_id).await.status() != pb::LocationStatus::Unhealthy {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{fleet_id} never turned UNHEALTHY"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let unhealthy = location(&mut fleets, fleet_id).await;
        assert!(
            unhealthy
                .status_message
                .contains("no server sent a heartbeat within 60 s")
        );
    }
    let exited = events(&mut fleets, exits).await;
    assert!(count(&exited, pb::FleetEventCode::InstanceLaunched) >= 2);
    assert!(
        count(&exited, pb::FleetEventCode::InstanceTerminated) >= 2,
        "each exit seen"
    );
    assert_eq!(count(&exited, pb::FleetEventCode::LocationUnhealthy), 1);
    let never_started = events(&mut fleets, missing).await;
    let failed: Vec<_> = never_started
        .iter()
        .filter(|e| e.code() == pb::FleetEventCode::InstanceLaunchFailed)
        .collect();
    assert!(failed.len() >= 2);
    assert!(
        failed[0].message.contains("cannot start /nonexistent/server"),
        "{}",
        failed[0].message
    );
    assert_eq!(count(&never_started, pb::FleetEventCode::InstanceLaunched), 0);
    // Backoff: far fewer attempts than one per pass over the minute.
    assert!(failed.len() < 20, "{} attempts", failed.len());
    // Each process that exited before registering is a crash, with its exit status: a crash loop shows as one.
    let crashes: Vec<_> = exited
        .iter()
        .filter(|e| e.code() == pb::FleetEventCode::ServerProcessCrashed)
        .collect();
    assert!(crashes.len() >= 2, "{exited:#?}");
    assert!(
        crashes
            .iter()
            .all(|e| e.message == "exited before registering (exit status: 1)" && !e.game_server_id.is_empty()),
        "{crashes:#?}"
    );
    let removed = exited
        .iter()
        .find(|e| e.code() == pb::FleetEventCode::InstanceTerminated)
        .unwrap();
    assert_eq!(removed.message, "its processes exited (exit status: 1)");
    // UNHEALTHY: nothing more is launched.
    let launched = count(&exited, pb::FleetEventCode::InstanceLaunched);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = events(&mut fleets, exits).await;
    assert_eq!(count(&later, pb::FleetEventCode::InstanceLaunched), launched);

    // New launch settings deploy the location again: the working build is launched and becomes ready.
    let fixed = pb::UpdateFleetRequest {
        fleet_id: exits.clone(),
        launch_configuration: Some(pb::ServerLaunchConfiguration {
            launch_path: example(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let updated = fleets.update_fleet(fixed).await.unwrap().into_inner().fleet.unwrap();
    assert_eq!(updated.locations[0].status(), pb::LocationStatus::Deploying);
    instances_when(&stack.store, exits, "the new build ready", |found| {
        found.iter().filter(|i| ready(i)).count() == 2
    })
    .await;
    assert_eq!(
        location(&mut fleets, exits).await.status(),
        pb::LocationStatus::Deployed
    );

    // New capacity deploys it again too, its deadlines counted afresh: it launches at once, backing off no more
    // than a first failure, and stays DEPLOYING rather than failing on the old deployment's deadline.
    let before = events(&mut fleets, missing).await;
    set_desired(&mut fleets, missing, 3).await;
    let failures = |events: &[pb::FleetEvent]| count(events, pb::FleetEventCode::InstanceLaunchFailed);
    let retried = when(
        "a launch after the new capacity",
        || async { vec![events(&mut client(&stack.fleet[0]).await, missing).await] },
        |found| failures(&found[0]) > failures(&before),
    )
    .await;
    let deploying = retried[0]
        .iter()
        .rposition(|e| e.code() == pb::FleetEventCode::LocationDeploying)
        .unwrap();
    assert_eq!(retried[0][deploying].message, "given capacity");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let again = location(&mut fleets, missing).await;
    assert_eq!(again.status(), pb::LocationStatus::Deploying, "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_build_that_never_runs_turns_its_location_unhealthy_on_a_single_node() {
    a_build_that_never_runs_turns_its_location_unhealthy(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_build_that_never_runs_turns_its_location_unhealthy_on_a_cluster() {
    a_build_that_never_runs_turns_its_location_unhealthy(TestRedis::cluster()).await;
}

/// A launch path that runs the example server, which ends as told (ProcessEnding), then lingers without exiting:
/// its shell ignores SIGTERM and sleeps on under the same pid.
fn lingering_server(fleet_id: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::temp_dir().join(format!("{fleet_id}-linger.sh"));
    let script = format!("#!/bin/sh\ntrap '' TERM\n'{}'\nexec sleep 60\n", example());
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// A process that sends ProcessEnding but does not exit is killed after the exit timeout, and the fleet's events
/// say so (SERVER_PROCESS_FORCE_TERMINATED, once), between its own ending and its instance's removal.
async fn a_process_that_ends_but_does_not_exit_is_killed_with_an_event(redis: TestRedis) {
    use berth_proto::health::v1::TerminateGameServerRequest;
    use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
    let stack = stack(&redis, 1).await;
    let lingering = &fleet_id("arena-linger");
    let _reaper = Reaper(vec![lingering.into()]);
    let mut fleets = client(&stack.fleet[0]).await;
    fleets
        .create_fleet(managed(lingering, &lingering_server(lingering), 1))
        .await
        .unwrap();
    let first = instances_when(&stack.store, lingering, "1 ready", all_ready(1)).await;
    let (instance, server) = (first[0].id.clone(), first[0].servers[0].id.clone());
    let channel = berth_sdk::connect(&stack.health.endpoint(), &token(Role::Operator, None))
        .await
        .unwrap();
    let terminate = TerminateGameServerRequest {
        fleet_id: lingering.clone(),
        game_server_id: server.clone(),
        reason: 0,
    };
    GameServerServiceClient::new(channel)
        .terminate_game_server(terminate)
        .await
        .unwrap();
    let removed = |events: &[pb::FleetEvent]| {
        events
            .iter()
            .any(|e| e.code() == pb::FleetEventCode::InstanceTerminated && e.instance_id == instance)
    };
    let seen = when(
        "the lingering instance removed",
        || async { vec![events(&mut client(&stack.fleet[0]).await, lingering).await] },
        |found| removed(&found[0]),
    )
    .await
    .remove(0);
    let of_server: Vec<_> = seen
        .iter()
        .filter(|e| e.game_server_id == server || e.instance_id == instance)
        .map(|e| (e.code(), e.message.as_str()))
        .collect();
    use pb::FleetEventCode as C;
    let at = |code| of_server.iter().position(|(c, _)| *c == code);
    let killed: Vec<_> = of_server
        .iter()
        .filter(|(c, _)| *c == C::ServerProcessForceTerminated)
        .collect();
    assert_eq!(
        killed,
        [&(
            C::ServerProcessForceTerminated,
            "sent ProcessEnding but did not exit in time (exit timeout 1 s); killed"
        )],
        "{of_server:#?}"
    );
    assert!(
        at(C::ServerProcessTerminated) < at(C::ServerProcessForceTerminated),
        "{of_server:#?}"
    );
    assert!(
        at(C::ServerProcessForceTerminated) < at(C::InstanceTerminated),
        "{of_server:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_process_that_ends_but_does_not_exit_is_killed_with_an_event_on_a_single_node() {
    a_process_that_ends_but_does_not_exit_is_killed_with_an_event(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_process_that_ends_but_does_not_exit_is_killed_with_an_event_on_a_cluster() {
    a_process_that_ends_but_does_not_exit_is_killed_with_an_event(TestRedis::cluster()).await;
}

/// Three fleet replicas reconcile one location: exactly the desired instances are launched, never one more, and
/// a change made under a lease that is no longer live changes nothing.
async fn replicas_never_both_act_for_one_location(redis: TestRedis) {
    let stack = stack(&redis, 3).await;
    let fleet = &fleet_id("arena-lease");
    let _reaper = Reaper(vec![fleet.into()]);
    let mut fleets = client(&stack.fleet[0]).await;
    fleets.create_fleet(managed(fleet, &example(), 4)).await.unwrap();
    instances_when(&stack.store, fleet, "4 ready", all_ready(4)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Every launch is of an instance of its own, and one more than the 4 only replaces one that ended.
    let seen = events(&mut fleets, fleet).await;
    let launched: Vec<_> = seen
        .iter()
        .filter(|e| e.code() == pb::FleetEventCode::InstanceLaunched)
        .map(|e| e.instance_id.clone())
        .collect();
    assert_eq!(
        launched.iter().collect::<BTreeSet<_>>().len(),
        launched.len(),
        "no instance launched twice"
    );
    assert_eq!(launched.len(), 4 + count(&seen, pb::FleetEventCode::InstanceTerminated));

    // The replicas stop; their leases are given up or lapse.
    for replica in stack.fleet {
        replica.shutdown().await;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    fenced_after_losing_the_lease(&stack.store, fleet).await;
}

/// A lease taken by a holder, then lost when it lapsed and another took it: the first holder's changes are fenced.
async fn fenced_after_losing_the_lease(store: &Store, fleet: &str) {
    let Lease::Held(stalled) = instances::take_lease(store, fleet, "local", "stalled", 200, None)
        .await
        .unwrap()
    else {
        panic!("the lease was not free once the replicas stopped");
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let Lease::Held(newer) = instances::take_lease(store, fleet, "local", "newer", 60_000, None)
        .await
        .unwrap()
    else {
        panic!("the lapsed lease was not taken over");
    };
    assert_ne!(stalled, newer);
    let old = Leased {
        fleet_id: fleet,
        location: "local",
        lease: &stalled,
    };
    let before = instances::read_instances(store, fleet, "local").await.unwrap();
    let launch = instances::record_launch(store, &old, "i-late", "small", &["i-late-0".into()]).await;
    assert_eq!(launch.unwrap(), Acted::Fenced);
    let victim = &before.instances[0].id;
    assert_eq!(
        instances::drain_instance(store, &old, victim).await.unwrap(),
        Acted::Fenced
    );
    assert_eq!(
        instances::remove_instance(
            store,
            &old,
            &instances::Removal {
                instance_id: victim,
                asked: false,
                retention_ms: 1000,
                exited: "",
            }
        )
        .await
        .unwrap(),
        Acted::Fenced
    );
    assert_eq!(
        instances::take_lease(store, fleet, "local", "stalled", 60_000, Some(&stalled))
            .await
            .unwrap(),
        Lease::Taken(newer.clone()),
        "a lapsed lease is not renewed"
    );
    let after = instances::read_instances(store, fleet, "local").await.unwrap();
    assert_eq!(
        after.instances, before.instances,
        "nothing changed under the lapsed lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_never_both_act_for_one_location_on_a_single_node() {
    replicas_never_both_act_for_one_location(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_never_both_act_for_one_location_on_a_cluster() {
    replicas_never_both_act_for_one_location(TestRedis::cluster()).await;
}

/// A `berth-fleet` process over `redis`, reconciling every 100 ms under 2 s leases (long enough that a loaded test
/// machine does not lose one to a late renewal) as replica `id`, its game servers speaking to `health`.
fn fleet_process(redis: &TestRedis, health: &RunningService, id: &str) -> BinaryProcess {
    let config = redis.config();
    let mode = match config.mode {
        RedisMode::Single => "single",
        RedisMode::Cluster => "cluster",
    };
    BinaryProcess::spawn(
        "berth-fleet",
        &[
            ("BERTH_REDIS_URL", config.urls.join(",")),
            ("BERTH_REDIS_MODE", mode.into()),
            ("BERTH_AUTH_KEY", String::from_utf8(TEST_KEY.to_vec()).unwrap()),
            ("BERTH_SDK_ENDPOINT", health.endpoint()),
            ("BERTH_RECONCILE_MS", "100".into()),
            ("BERTH_LEASE_MS", "2000".into()),
            ("BERTH_REPLICA_ID", id.into()),
        ],
    )
}

async fn binary_client(process: &BinaryProcess) -> Client {
    wait_for_health(&process.endpoint(), "", ServingStatus::Serving).await;
    FleetServiceClient::new(
        berth_sdk::connect(&process.endpoint(), &token(Role::Operator, None))
            .await
            .unwrap(),
    )
}

/// The holder of the location's lease, once `wanted` holds of it (within 15 s).
async fn lease_holder_when(store: &Store, fleet: &str, wanted: impl Fn(&str) -> bool) -> String {
    let key = FleetKeys::new(fleet).lease("local");
    let started = std::time::Instant::now();
    loop {
        let lease: Option<String> = store.query(redis::cmd("GET").arg(&key)).await.unwrap();
        let holder = lease
            .unwrap_or_default()
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_owned();
        if wanted(&holder) {
            return holder;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the lease stayed with {holder:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two `berth-fleet` processes over one fleet. The lease holder is frozen (SIGSTOP) past its lease; the other takes
/// the location over and scales it in. Resumed (SIGCONT), the frozen one launches nothing and removes nothing: what
/// it decided before it froze was decided under a lease that is no longer live, and its next passes find the lease
/// held by another.
async fn a_frozen_lease_holder_changes_nothing_once_resumed(redis: TestRedis) {
    let stack = stack(&redis, 0).await;
    let fleet = &fleet_id("arena-frozen");
    let _reaper = Reaper(vec![fleet.into()]);
    let first = fleet_process(&redis, &stack.health, "first");
    let mut through_first = binary_client(&first).await;
    through_first.create_fleet(managed(fleet, &example(), 2)).await.unwrap();
    instances_when(&stack.store, fleet, "2 ready", all_ready(2)).await;
    let second = fleet_process(&redis, &stack.health, "second");
    let mut through_second = binary_client(&second).await;
    lease_holder_when(&stack.store, fleet, |holder| holder == "first").await;

    first.signal(libc::SIGSTOP);
    lease_holder_when(&stack.store, fleet, |holder| holder == "second").await;
    set_desired(&mut through_second, fleet, 1).await;
    let one = instances_when(&stack.store, fleet, "scaled in to 1", |found| {
        found.len() == 1 && all_ready(1)(found)
    })
    .await;

    first.signal(libc::SIGCONT);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = instances::read_instances(&stack.store, fleet, "local")
        .await
        .unwrap()
        .instances;
    assert_eq!(ids(&after), ids(&one), "the resumed replica changed nothing");
    assert_eq!(
        lease_holder_when(&stack.store, fleet, |_| true).await,
        "second",
        "nor took the lease back"
    );
    let seen = events(&mut through_second, fleet).await;
    assert_eq!(
        count(&seen, pb::FleetEventCode::InstanceLaunched),
        2,
        "no launch after the first two"
    );
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceTerminated), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_lease_holder_changes_nothing_once_resumed_on_a_single_node() {
    a_frozen_lease_holder_changes_nothing_once_resumed(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_lease_holder_changes_nothing_once_resumed_on_a_cluster() {
    a_frozen_lease_holder_changes_nothing_once_resumed(TestRedis::cluster()).await;
}

/// The game-server processes running on this host for `fleet`, by the instance their environment names
/// (`BERTH_INSTANCE_ID`, as the `process` provisioner sets it); zombies, which run no more, are left out.
fn running_by_instance(fleet: &str) -> BTreeMap<String, usize> {
    let wanted = format!("BERTH_FLEET_ID={fleet}");
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
        if state != Some(Some('Z')) && state.is_some() {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
            if vars.contains(&wanted.as_bytes()) {
                let instance = vars
                    .iter()
                    .find_map(|var| var.strip_prefix(b"BERTH_INSTANCE_ID="))
                    .map(|id| String::from_utf8_lossy(id).into_owned())
                    .unwrap_or_default();
                *found.entry(instance).or_default() += 1;
            }
        }
    }
    found
}

/// Two `berth-fleet` processes over one fleet scaled from 0 to 4. The lease holder is SIGKILLed once it has begun
/// launching, mid-reconcile; the other takes the location over when the lease lapses and finishes. Every instance
/// the killed one recorded is either running and kept or found and removed (one recorded but never started
/// included): at the end exactly the 4 recorded instances run, each its one process — none launched twice for one
/// slot, none orphaned.
async fn a_killed_lease_holder_is_taken_over_and_leaves_nothing_behind(redis: TestRedis) {
    let stack = stack(&redis, 0).await;
    let fleet = &fleet_id("arena-killed");
    let _reaper = Reaper(vec![fleet.into()]);
    let mut replicas = [
        fleet_process(&redis, &stack.health, "first"),
        fleet_process(&redis, &stack.health, "second"),
    ];
    let mut through = binary_client(&replicas[0]).await;
    binary_client(&replicas[1]).await;
    through.create_fleet(managed(fleet, &example(), 4)).await.unwrap();
    instances_when(&stack.store, fleet, "a launch under way", |found| !found.is_empty()).await;
    let holder = lease_holder_when(&stack.store, fleet, |holder| !holder.is_empty()).await;
    let (killed, survivor) = if holder == "first" { (0, 1) } else { (1, 0) };
    replicas[killed].kill();

    let survivor_id = ["first", "second"][survivor];
    lease_holder_when(&stack.store, fleet, |holder| holder == survivor_id).await;
    let ready = instances_when(&stack.store, fleet, "4 ready", |found| {
        found.len() == 4 && all_ready(4)(found)
    })
    .await;
    let expected: BTreeMap<String, usize> = ids(&ready).into_iter().map(|id| (id, 1)).collect();
    let started = std::time::Instant::now();
    loop {
        let running = running_by_instance(fleet);
        if running == expected {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "processes running by instance {running:?}, recorded {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut through_survivor = binary_client(&replicas[survivor]).await;
    let counted = utilization(&mut through_survivor, fleet).await;
    assert_eq!(
        counts(&counted),
        ([4, 0, 4, 4], [0, 4, 0]),
        "the live counts hold what runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_lease_holder_is_taken_over_and_leaves_nothing_behind_on_a_single_node() {
    a_killed_lease_holder_is_taken_over_and_leaves_nothing_behind(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_lease_holder_is_taken_over_and_leaves_nothing_behind_on_a_cluster() {
    a_killed_lease_holder_is_taken_over_and_leaves_nothing_behind(TestRedis::cluster()).await;
}
