//! Fleets as records through FleetService, on a single node and on the cluster: created whole or not at all,
//! described with the defaults their zero values stand for, listed a page at a time, their capacity changed against
//! the current bounds however changes race, and every step an event.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use berth_domain::fleet::settings::FleetSettings;
use berth_domain::game_server::ClaimTiers;
use berth_proto::fleet::v1 as pb;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::health::v1::TerminationReason;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use berth_proto::session::v1::{DescribeGameSessionsRequest, GameSessionStatus, GameSessionStatusReason};
use berth_runtime::auth::Role;
use berth_runtime::server::WRITES;
use berth_sdk::game_server::{Event, Events, GameServer, SdkError};
use berth_store::keys::FleetKeys;
use berth_store::{Store, endings, pool};
use berth_testkit::{
    RunningService, TestRedis, game_server_config, keys_without_expiry, spawn_service, token, wait_for_health,
};
use tokio::task::JoinSet;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_types::StatusExt;

pub(super) type Client = FleetServiceClient<berth_sdk::AuthedChannel>;

/// A provisioner the deployment names but this replica does not run: these tests are about records, so nothing is
/// launched for their fleets.
const RECORDS_ONLY: &str = "records-only";

async fn fleet_service(redis: &TestRedis) -> RunningService {
    fleet_service_with(redis, berth_fleet::FleetArgs::default()).await
}

/// A fleet service with `args`, but for what launches and sweeps, which these tests set.
pub(super) async fn fleet_service_with(redis: &TestRedis, args: berth_fleet::FleetArgs) -> RunningService {
    let store = Store::connect(&redis.config()).await.unwrap();
    let args = berth_fleet::FleetArgs {
        provisioners: vec![RECORDS_ONLY.into(), "docker".into()],
        sweep_ms: 50,
        ..args
    };
    spawn_service(berth_fleet::service(store.clone(), &args, None), store).await
}

pub(super) async fn client(service: &RunningService) -> Client {
    FleetServiceClient::new(
        berth_sdk::connect(&service.endpoint(), &token(Role::Operator, None))
            .await
            .unwrap(),
    )
}

fn location(name: &str, min: u32, max: u32, desired: u32) -> pb::LocationConfiguration {
    pb::LocationConfiguration {
        location: name.into(),
        capacity: Some(pb::FleetCapacity {
            minimum_instances: min,
            maximum_instances: max,
            desired_instances: desired,
        }),
        standby: None,
    }
}

pub(super) fn create(fleet_id: &str) -> pb::CreateFleetRequest {
    pb::CreateFleetRequest {
        fleet_id: fleet_id.into(),
        name: "Arena".into(),
        provisioner: RECORDS_ONLY.into(),
        launch_configuration: Some(pb::ServerLaunchConfiguration {
            launch_path: "/opt/arena/server".into(),
            ..Default::default()
        }),
        instance_definitions: vec![pb::InstanceDefinition {
            instance_type: "local".into(),
            ..Default::default()
        }],
        locations: vec![location("home", 0, 10, 3), location("away", 0, 5, 0)],
        ..Default::default()
    }
}

pub(super) async fn describe(client: &mut Client, fleet_id: &str) -> Result<pb::Fleet, tonic::Status> {
    let request = pb::DescribeFleetRequest {
        fleet_id: fleet_id.into(),
    };
    Ok(client.describe_fleet(request).await?.into_inner().fleet.unwrap())
}

pub(super) async fn events(client: &mut Client, fleet_id: &str) -> Vec<pb::FleetEvent> {
    let request = pb::ListFleetEventsRequest {
        fleet_id: fleet_id.into(),
        ..Default::default()
    };
    client.list_fleet_events(request).await.unwrap().into_inner().events
}

fn codes(events: &[pb::FleetEvent]) -> Vec<(pb::FleetEventCode, String)> {
    events.iter().map(|e| (e.code(), e.location.clone())).collect()
}

async fn a_fleet_is_created_whole_with_its_defaults_and_events(redis: TestRedis) {
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    let created = fleets
        .create_fleet(create("arena"))
        .await
        .unwrap()
        .into_inner()
        .fleet
        .unwrap();
    assert_eq!(created.status(), pb::FleetStatus::New);
    assert_eq!(created.revision, 1);
    assert_eq!(created.game_session_activation_timeout_seconds, 300);
    assert_eq!(created.player_session_reservation_timeout_seconds, 60);
    assert_eq!(created.server_processes_per_instance, 1);
    assert_eq!(created.process_timeouts.unwrap().heartbeat_interval_ms, 5000);
    let statuses: Vec<_> = created
        .locations
        .iter()
        .map(|l| (l.location.as_str(), l.status()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("home", pb::LocationStatus::Deploying),
            ("away", pb::LocationStatus::Initialized)
        ]
    );
    assert_eq!(describe(&mut fleets, "arena").await.unwrap(), created);

    // The same id again: refused, nothing changed.
    let again = pb::CreateFleetRequest {
        name: "Other".into(),
        ..create("arena")
    };
    let err = fleets.create_fleet(again).await.unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert_eq!(describe(&mut fleets, "arena").await.unwrap().name, "Arena");

    // Bad input names its field and creates nothing.
    let bad = pb::CreateFleetRequest {
        locations: vec![location("home", 0, 2, 3)],
        ..create("broken")
    };
    let err = fleets.create_fleet(bad).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let fields: Vec<_> = err
        .get_details_bad_request()
        .unwrap()
        .field_violations
        .into_iter()
        .map(|f| f.field)
        .collect();
    assert_eq!(fields, ["locations[0].capacity.desired_instances"]);
    assert_eq!(
        describe(&mut fleets, "broken").await.unwrap_err().code(),
        Code::NotFound
    );
    let unknown = pb::CreateFleetRequest {
        provisioner: "kubernetes".into(),
        ..create("elsewhere")
    };
    let err = fleets.create_fleet(unknown).await.unwrap_err();
    assert!(err.message().contains("not configured"), "{}", err.message());

    assert_eq!(
        codes(&events(&mut fleets, "arena").await),
        [
            (pb::FleetEventCode::FleetCreated, String::new()),
            (pb::FleetEventCode::LocationAdded, "home".into()),
            (pb::FleetEventCode::LocationDeploying, "home".into()),
            (pb::FleetEventCode::LocationAdded, "away".into()),
        ]
    );

    // Locations are added all or none: one the fleet has already refuses the whole request.
    let add = |locations: Vec<pb::LocationConfiguration>| pb::CreateFleetLocationsRequest {
        fleet_id: "arena".into(),
        locations,
    };
    let err = fleets
        .create_fleet_locations(add(vec![location("north", 0, 1, 1), location("away", 0, 1, 0)]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert_eq!(describe(&mut fleets, "arena").await.unwrap().locations.len(), 2);
    let added = fleets
        .create_fleet_locations(add(vec![location("north", 0, 1, 1)]))
        .await
        .unwrap();
    let names: Vec<_> = added
        .into_inner()
        .fleet
        .unwrap()
        .locations
        .into_iter()
        .map(|l| l.location)
        .collect();
    assert_eq!(names, ["home", "away", "north"]);
    let many = (0..98).map(|n| location(&format!("zone-{n}"), 0, 0, 0)).collect();
    let err = fleets.create_fleet_locations(add(many)).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_is_created_whole_with_its_defaults_and_events_on_a_single_node() {
    a_fleet_is_created_whole_with_its_defaults_and_events(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_is_created_whole_with_its_defaults_and_events_on_a_cluster() {
    a_fleet_is_created_whole_with_its_defaults_and_events(TestRedis::cluster()).await;
}

async fn capacity_changes_hold_against_the_current_bounds_however_they_race(redis: TestRedis) {
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    fleets.create_fleet(create("arena")).await.unwrap();

    // The away location is INITIALIZED until it is given instances.
    let change =
        |location: &str, min: Option<u32>, max: Option<u32>, desired: Option<u32>| pb::UpdateFleetCapacityRequest {
            fleet_id: "arena".into(),
            location: location.into(),
            minimum_instances: min,
            maximum_instances: max,
            desired_instances: desired,
        };
    let away = fleets
        .update_fleet_capacity(change("away", None, None, Some(2)))
        .await
        .unwrap();
    let away = away.into_inner().location.unwrap();
    assert_eq!(away.status(), pb::LocationStatus::Deploying);
    assert_eq!(away.capacity.unwrap().desired_instances, 2);

    // Above the stored maximum: refused with the field, nothing changed.
    let err = fleets
        .update_fleet_capacity(change("", None, None, Some(11)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.get_details_bad_request().unwrap().field_violations[0].field,
        "desired_instances"
    );
    let home = describe(&mut fleets, "arena").await.unwrap().locations[0]
        .capacity
        .unwrap();
    assert_eq!(home.desired_instances, 3);
    let err = fleets
        .update_fleet_capacity(change("mars", None, None, Some(1)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // Lowering the maximum and raising the desired count race: each is valid alone, not both together. Whatever
    // the order, the location always ends in order.
    for round in 0..20u32 {
        fleets
            .update_fleet_capacity(change("", Some(0), Some(10), Some(3)))
            .await
            .unwrap();
        let mut racing = JoinSet::new();
        for task in 0..8u32 {
            let mut fleets = fleets.clone();
            let request = if task % 2 == 0 {
                change("", None, Some(4), None)
            } else {
                change("", None, None, Some(5 + (round + task) % 5))
            };
            racing.spawn(async move { fleets.update_fleet_capacity(request).await.map(|_| ()) });
        }
        let mut refused = 0;
        while let Some(outcome) = racing.join_next().await {
            if let Err(err) = outcome.unwrap() {
                assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
                refused += 1;
            }
        }
        assert!(
            refused > 0,
            "lowering the maximum below a desired count raised first is refused"
        );
        let capacity = describe(&mut fleets, "arena").await.unwrap().locations[0]
            .capacity
            .unwrap();
        assert!(
            capacity.minimum_instances <= capacity.desired_instances
                && capacity.desired_instances <= capacity.maximum_instances,
            "{capacity:?}"
        );
    }

    // Each change is an event with the desired count before and after.
    let changed: Vec<_> = events(&mut fleets, "arena")
        .await
        .into_iter()
        .filter(|e| e.code() == pb::FleetEventCode::CapacityChanged)
        .collect();
    let first = changed[0].capacity_change.clone().unwrap();
    assert_eq!(
        (
            changed[0].location.as_str(),
            first.previous_desired_instances,
            first.new_desired_instances
        ),
        ("away", 0, 2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_changes_hold_against_the_current_bounds_however_they_race_on_a_single_node() {
    capacity_changes_hold_against_the_current_bounds_however_they_race(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_changes_hold_against_the_current_bounds_however_they_race_on_a_cluster() {
    capacity_changes_hold_against_the_current_bounds_however_they_race(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creations_of_one_fleet_make_exactly_one() {
    let redis = TestRedis::cluster();
    let service = fleet_service(&redis).await;
    let fleets = client(&service).await;
    let mut racing = JoinSet::new();
    for task in 0..16 {
        let mut fleets = fleets.clone();
        let request = pb::CreateFleetRequest {
            name: format!("creator {task}"),
            ..create("contested")
        };
        racing.spawn(async move {
            fleets
                .create_fleet(request)
                .await
                .map(|r| r.into_inner().fleet.unwrap().name)
        });
    }
    let mut created = Vec::new();
    while let Some(outcome) = racing.join_next().await {
        match outcome.unwrap() {
            Ok(name) => created.push(name),
            Err(err) => assert_eq!(err.code(), Code::AlreadyExists),
        }
    }
    assert_eq!(created.len(), 1);
    let mut fleets = fleets;
    assert_eq!(describe(&mut fleets, "contested").await.unwrap().name, created[0]);
    let created_events = events(&mut fleets, "contested").await;
    assert_eq!(
        created_events
            .iter()
            .filter(|e| e.code() == pb::FleetEventCode::FleetCreated)
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleets_are_listed_in_id_order_a_page_at_a_time_and_by_status() {
    let redis = TestRedis::single();
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    for id in ["c", "a", "e", "b", "d"] {
        fleets.create_fleet(create(id)).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = fleets
            .list_fleets(pb::ListFleetsRequest {
                statuses: Vec::new(),
                page_size: 2,
                page_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.fleets.len() <= 2);
        seen.extend(page.fleets.into_iter().map(|f| f.fleet_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e"]);
    let active = fleets
        .list_fleets(pb::ListFleetsRequest {
            statuses: vec![pb::FleetStatus::Active as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(active.fleets.is_empty(), "new fleets are not ACTIVE");
    let err = fleets
        .list_fleets(pb::ListFleetsRequest {
            statuses: Vec::new(),
            page_size: 2,
            page_token: "forged.a".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

async fn configuration_changes_land_one_at_a_time_and_none_is_lost(redis: TestRedis) {
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    fleets.create_fleet(create("arena")).await.unwrap();
    let update = |name: Option<&str>, description: Option<&str>| pb::UpdateFleetRequest {
        fleet_id: "arena".into(),
        name: name.map(Into::into),
        description: description.map(Into::into),
        ..Default::default()
    };

    // Eight updates race, each from the record it read: a change computed from an older record is computed again,
    // so every one lands, each raising the revision once.
    let mut racing = JoinSet::new();
    for task in 0..8 {
        let mut fleets = fleets.clone();
        let request = if task % 2 == 0 {
            update(Some(&format!("name {task}")), None)
        } else {
            update(None, Some(&format!("description {task}")))
        };
        racing.spawn(async move { fleets.update_fleet(request).await.map(|_| ()) });
    }
    while let Some(outcome) = racing.join_next().await {
        outcome.unwrap().unwrap();
    }
    let fleet = describe(&mut fleets, "arena").await.unwrap();
    assert_eq!(fleet.revision, 9);
    assert!(fleet.name.starts_with("name ") && fleet.description.starts_with("description "));
    let updated = events(&mut fleets, "arena")
        .await
        .into_iter()
        .filter(|e| e.code() == pb::FleetEventCode::FleetUpdated)
        .count();
    assert_eq!(updated, 8);

    // A pinned revision that is not the fleet's is ABORTED; an update that changes nothing raises nothing.
    let pinned = pb::UpdateFleetRequest {
        expected_revision: 3,
        ..update(Some("late"), None)
    };
    assert_eq!(fleets.update_fleet(pinned).await.unwrap_err().code(), Code::Aborted);
    let same = fleets.update_fleet(update(Some(&fleet.name), None)).await.unwrap();
    assert_eq!(same.into_inner().fleet.unwrap().revision, 9);
    let bad = pb::UpdateFleetRequest {
        server_processes_per_instance: Some(0),
        ..update(None, None)
    };
    assert_eq!(
        fleets.update_fleet(bad).await.unwrap_err().code(),
        Code::InvalidArgument
    );

    // The settings the session and health scripts apply follow the configuration: the record keeps them beside it.
    let timeouts = pb::UpdateFleetRequest {
        game_session_activation_timeout_seconds: Some(45),
        new_game_session_protection_policy: pb::ProtectionPolicy::FullProtection.into(),
        process_timeouts: Some(pb::ProcessTimeouts {
            heartbeat_interval_ms: 3000,
            unhealthy_after_missed_heartbeats: 5,
            ..Default::default()
        }),
        ..update(None, None)
    };
    let changed = fleets.update_fleet(timeouts).await.unwrap().into_inner().fleet.unwrap();
    let settings = FleetSettings::of(&changed);
    assert_eq!(
        (
            settings.activation_ms,
            settings.protect_new_sessions,
            settings.heartbeat_ms,
            settings.unhealthy_after
        ),
        (45_000, true, 3000, 5)
    );
    let store = Store::connect(&redis.config()).await.unwrap();
    let kept: String = store
        .query(redis::cmd("HGET").arg(FleetKeys::new("arena").fleet()).arg("set"))
        .await
        .unwrap();
    assert_eq!(FleetSettings::decode(&kept), Some(settings));

    // Standby moves an INITIALIZED location to DEPLOYING; suspension and viability are per location.
    let standby = pb::UpdateFleetStandbyRequest {
        fleet_id: "arena".into(),
        location: "away".into(),
        standby: Some(pb::StandbyConfiguration {
            standby_servers: 4,
            ..Default::default()
        }),
    };
    let away = fleets
        .update_fleet_standby(standby)
        .await
        .unwrap()
        .into_inner()
        .location
        .unwrap();
    assert_eq!(away.status(), pb::LocationStatus::Deploying);
    assert_eq!(away.standby.unwrap().standby_servers, 4);
    let suspend = |locations: Vec<String>| pb::SuspendAutoscalingRequest {
        fleet_id: "arena".into(),
        locations,
    };
    let suspended = fleets
        .suspend_autoscaling(suspend(Vec::new()))
        .await
        .unwrap()
        .into_inner();
    assert!(
        suspended
            .fleet
            .unwrap()
            .locations
            .iter()
            .all(|l| l.autoscaling_suspended)
    );
    fleets.suspend_autoscaling(suspend(vec!["home".into()])).await.unwrap();
    let resume = pb::ResumeAutoscalingRequest {
        fleet_id: "arena".into(),
        locations: vec!["away".into()],
    };
    let resumed = fleets
        .resume_autoscaling(resume)
        .await
        .unwrap()
        .into_inner()
        .fleet
        .unwrap();
    let flags: Vec<_> = resumed.locations.iter().map(|l| l.autoscaling_suspended).collect();
    assert_eq!(flags, [true, false]);
    let err = fleets
        .suspend_autoscaling(suspend(vec!["mars".into()]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    let viability = |instance_type: &str, viable: bool| pb::SetInstanceTypeViabilityRequest {
        fleet_id: "arena".into(),
        location: "home".into(),
        instance_type: instance_type.into(),
        viable,
        reason: "spot interruptions".into(),
    };
    let judged = fleets
        .set_instance_type_viability(viability("local", false))
        .await
        .unwrap();
    let home = judged.into_inner().fleet.unwrap().locations[0].clone();
    assert_eq!(home.instance_type_viabilities.len(), 1);
    assert!(!home.instance_type_viabilities[0].viable);
    let err = fleets
        .set_instance_type_viability(viability("gpu", false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    let tail: Vec<_> = codes(&events(&mut fleets, "arena").await)
        .into_iter()
        .skip(12)
        .collect();
    assert_eq!(
        tail,
        [
            (pb::FleetEventCode::FleetUpdated, String::new()),
            (pb::FleetEventCode::LocationDeploying, "away".into()),
            (pb::FleetEventCode::AutoscalingSuspended, "home".into()),
            (pb::FleetEventCode::AutoscalingSuspended, "away".into()),
            (pb::FleetEventCode::AutoscalingResumed, "away".into()),
            (pb::FleetEventCode::InstanceTypeNotViable, "home".into()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_changes_land_one_at_a_time_and_none_is_lost_on_a_single_node() {
    configuration_changes_land_one_at_a_time_and_none_is_lost(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_changes_land_one_at_a_time_and_none_is_lost_on_a_cluster() {
    configuration_changes_land_one_at_a_time_and_none_is_lost(TestRedis::cluster()).await;
}

/// The status a refused registration failed with.
fn registration_code(err: SdkError) -> Code {
    match err {
        SdkError::Registration(status) => status.code(),
        other => panic!("expected a refused registration, got {other:?}"),
    }
}

/// Why a process is told to terminate, once it is.
async fn terminated_because(told: &mut Events) -> TerminationReason {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), told.recv()).await {
            Ok(Some(Event::Terminate { reason, .. })) => return reason,
            Ok(Some(_)) => continue,
            other => panic!("expected the process to be told to terminate, got {other:?}"),
        }
    }
}

/// A process of the fleet in `location`, ready, through a health replica.
async fn ready_process(health: &RunningService, fleet_id: &str, id: &str, location: &str) -> (GameServer, Events) {
    let config = game_server_config(&health.endpoint(), fleet_id, id, location, 1, 0);
    let (server, events) = GameServer::connect(config).await.unwrap();
    server.ready().await.unwrap();
    (server, events)
}

async fn a_deleted_fleet_or_location_ends_its_processes_then_goes(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    let health_args = berth_health::HealthArgs {
        initial_delay_ms: 500,
        heartbeat_flush_ms: 5,
        monitor_sweep_ms: 50,
        ..Default::default()
    };
    let health = spawn_service(berth_health::service(store.clone(), &health_args), store.clone()).await;
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    fleets.create_fleet(create("arena")).await.unwrap();
    let (server, mut told) = ready_process(&health, "arena", "gs-1", "home").await;
    let game = berth_testkit::place_game_session(&store, "arena", "gs-1", 2).await;
    // A FleetIQ server, registered without a process: nothing to tell, it goes with the fleet.
    let fleetiq = pool::Registration {
        fleet_id: "arena",
        game_server_id: "gs-fleetiq",
        instance_id: "i-fleetiq",
        connection_info: "10.0.0.9:7000",
        game_server_data: "",
    };
    assert!(matches!(
        pool::register(&store, &fleetiq).await.unwrap(),
        pool::Registered::New(_)
    ));
    let claim = pool::Claim {
        fleet_id: "arena",
        game_server_id: Some("gs-fleetiq"),
        game_server_data: None,
        tiers: ClaimTiers { lowest: 0, highest: 0 },
        timeout_ms: 60_000,
        claim_id: "claim-1",
        token: "",
    };
    assert!(matches!(
        pool::claim(&store, &claim).await.unwrap(),
        pool::Claimed::Claimed { .. }
    ));

    // A process in a location the fleet does not have is refused, with an event.
    let lost = game_server_config(&health.endpoint(), "arena", "gs-mars", "mars", 1, 0);
    let err = GameServer::connect(lost)
        .await
        .err()
        .expect("a process in an unknown location is refused");
    assert_eq!(registration_code(err), Code::NotFound);
    let rejected = events(&mut fleets, "arena").await.into_iter().last().unwrap();
    assert_eq!(
        (
            rejected.code(),
            rejected.location.as_str(),
            rejected.game_server_id.as_str()
        ),
        (pb::FleetEventCode::ServerProcessRegistrationRejected, "mars", "gs-mars")
    );

    // A location other than home is removed once its processes are gone; home only with the fleet.
    let (away, mut away_told) = ready_process(&health, "arena", "gs-away", "away").await;
    let remove = |location: &str| pb::DeleteFleetLocationsRequest {
        fleet_id: "arena".into(),
        locations: vec![location.into()],
    };
    let err = fleets.delete_fleet_locations(remove("home")).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let err = fleets.delete_fleet_locations(remove("mars")).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let removing = fleets
        .delete_fleet_locations(remove("away"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        removing.fleet.unwrap().locations[1].status(),
        pb::LocationStatus::Deleting
    );
    assert_eq!(
        terminated_because(&mut away_told).await,
        TerminationReason::FleetDeleted
    );
    away.process_ending("location removed").await.unwrap();
    let mut names = Vec::new();
    for _ in 0..200 {
        let fleet = describe(&mut fleets, "arena").await.unwrap();
        names = fleet.locations.into_iter().map(|l| l.location).collect();
        if names.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(names, ["home"]);

    // A live game session keeps the fleet unless the deletion is forced.
    let delete = |force| pb::DeleteFleetRequest {
        fleet_id: "arena".into(),
        force,
        expected_revision: 0,
    };
    let err = fleets.delete_fleet(delete(false)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("1 live game session"), "{}", err.message());
    assert!(
        err.message().contains("1 game server(s) claimed or UTILIZED"),
        "{}",
        err.message()
    );
    assert_eq!(
        describe(&mut fleets, "arena").await.unwrap().status(),
        pb::FleetStatus::Active
    );

    let deleting = fleets
        .delete_fleet(delete(true))
        .await
        .unwrap()
        .into_inner()
        .fleet
        .unwrap();
    assert_eq!(deleting.status(), pb::FleetStatus::Deleting);
    assert!(
        pool::describe(&store, "arena", "gs-fleetiq").await.unwrap().is_none(),
        "the fleet's FleetIQ server is deregistered with it"
    );
    let instance_servers: Vec<String> = store
        .query(redis::cmd("SMEMBERS").arg(FleetKeys::new("arena").instance("i-fleetiq")))
        .await
        .unwrap();
    assert!(instance_servers.is_empty(), "{instance_servers:?}");
    assert_eq!(terminated_because(&mut told).await, TerminationReason::FleetDeleted);
    // No process may register in a fleet being deleted.
    let late = game_server_config(&health.endpoint(), "arena", "gs-late", "home", 1, 0);
    let err = GameServer::connect(late)
        .await
        .err()
        .expect("a process registering in a DELETING fleet is refused");
    assert_eq!(registration_code(err), Code::FailedPrecondition);
    let err = fleets.delete_fleet(delete(true)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let update = pb::UpdateFleetRequest {
        fleet_id: "arena".into(),
        name: Some("late".into()),
        ..Default::default()
    };
    assert_eq!(
        fleets.update_fleet(update).await.unwrap_err().code(),
        Code::FailedPrecondition
    );

    // The process ends as told; the fleet is TERMINATED once it is gone.
    server.process_ending("fleet deleted").await.unwrap();
    let mut terminated = None;
    for _ in 0..200 {
        let fleet = describe(&mut fleets, "arena").await.unwrap();
        if fleet.status() == pb::FleetStatus::Terminated {
            terminated = Some(fleet);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(terminated.is_some(), "the fleet became TERMINATED");
    // What it leaves is kept for the retention and then expires: none of it stays for good (its ended game sessions
    // are deleted by the session sweep when their own retention passes). Looked at on a single node, where one SCAN
    // sees every key.
    if matches!(redis, TestRedis::Single(_)) {
        let (_, lasting) = keys_without_expiry(&store, "berth:{f:arena}:*").await.unwrap();
        for key in lasting {
            let swept = [":gend:", ":player:", ":players", ":ended", ":sessions"]
                .iter()
                .any(|kind| key.contains(kind));
            assert!(swept, "{key} never expires");
        }
    }
    // Its game session ended as the forced deletion says: TERMINATED, FLEET_DELETED.
    let sessions = spawn_service(
        berth_session::service(store.clone(), &berth_session::SessionArgs::default()),
        store.clone(),
    )
    .await;
    let channel = berth_sdk::connect(&sessions.endpoint(), &token(Role::Client, None))
        .await
        .unwrap();
    let described = GameSessionServiceClient::new(channel)
        .describe_game_sessions(DescribeGameSessionsRequest {
            game_session_ids: vec![game],
        })
        .await
        .unwrap()
        .into_inner()
        .game_sessions;
    assert_eq!(
        (described[0].status(), described[0].status_reason()),
        (GameSessionStatus::Terminated, GameSessionStatusReason::FleetDeleted)
    );
    let last: Vec<_> = codes(&events(&mut fleets, "arena").await)
        .into_iter()
        .map(|(code, _)| code)
        .collect();
    let deleting_at = last
        .iter()
        .position(|c| *c == pb::FleetEventCode::FleetDeleting)
        .unwrap();
    assert!(
        last[deleting_at..].contains(&pb::FleetEventCode::FleetTerminated),
        "{last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_fleet_or_location_ends_its_processes_then_goes_on_a_single_node() {
    a_deleted_fleet_or_location_ends_its_processes_then_goes(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_fleet_or_location_ends_its_processes_then_goes_on_a_cluster() {
    a_deleted_fleet_or_location_ends_its_processes_then_goes(TestRedis::cluster()).await;
}

/// Changes of one location's standby, viability and suspension computed at once from the same record: each is
/// written only if the location is still as it was read, so none undoes another.
async fn location_changes_racing_each_other_all_land(redis: TestRedis) {
    let service = fleet_service(&redis).await;
    let fleets = client(&service).await;
    fleets.clone().create_fleet(create("arena")).await.unwrap();
    for round in 0..10u32 {
        let mut racing = JoinSet::new();
        let suspended = round % 2 == 0;
        let mut f = fleets.clone();
        racing.spawn(async move {
            let standby = pb::UpdateFleetStandbyRequest {
                fleet_id: "arena".into(),
                location: "home".into(),
                standby: Some(pb::StandbyConfiguration {
                    standby_servers: round + 1,
                    ..Default::default()
                }),
            };
            f.update_fleet_standby(standby).await.map(drop)
        });
        let mut f = fleets.clone();
        racing.spawn(async move {
            let viability = pb::SetInstanceTypeViabilityRequest {
                fleet_id: "arena".into(),
                location: "home".into(),
                instance_type: "local".into(),
                viable: !suspended,
                reason: format!("round {round}"),
            };
            f.set_instance_type_viability(viability).await.map(drop)
        });
        let mut f = fleets.clone();
        racing.spawn(async move {
            let locations = vec!["home".to_owned()];
            if suspended {
                let request = pb::SuspendAutoscalingRequest {
                    fleet_id: "arena".into(),
                    locations,
                };
                f.suspend_autoscaling(request).await.map(drop)
            } else {
                let request = pb::ResumeAutoscalingRequest {
                    fleet_id: "arena".into(),
                    locations,
                };
                f.resume_autoscaling(request).await.map(drop)
            }
        });
        while let Some(outcome) = racing.join_next().await {
            outcome.unwrap().unwrap();
        }
        let home = describe(&mut fleets.clone(), "arena").await.unwrap().locations[0].clone();
        assert_eq!(home.standby.unwrap().standby_servers, round + 1, "round {round}");
        assert_eq!(home.autoscaling_suspended, suspended, "round {round}");
        let viable = home.instance_type_viabilities.first().is_none_or(|v| v.viable);
        assert_eq!(viable, !suspended, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_changes_racing_each_other_all_land_on_a_single_node() {
    location_changes_racing_each_other_all_land(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn location_changes_racing_each_other_all_land_on_a_cluster() {
    location_changes_racing_each_other_all_land(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_events_are_kept_for_the_retention() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    let args = berth_fleet::FleetArgs {
        provisioners: vec![RECORDS_ONLY.into()],
        retention_ms: 300,
        ..Default::default()
    };
    let service = spawn_service(berth_fleet::service(store.clone(), &args, None), store).await;
    let mut fleets = client(&service).await;
    let request = pb::CreateFleetRequest {
        provisioner: RECORDS_ONLY.into(),
        ..create("arena")
    };
    fleets.create_fleet(request).await.unwrap();
    assert_eq!(events(&mut fleets, "arena").await.len(), 4);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let change = pb::UpdateFleetCapacityRequest {
        fleet_id: "arena".into(),
        location: String::new(),
        minimum_instances: None,
        maximum_instances: None,
        desired_instances: Some(4),
    };
    fleets.update_fleet_capacity(change).await.unwrap();
    assert_eq!(
        codes(&events(&mut fleets, "arena").await),
        [(pb::FleetEventCode::CapacityChanged, "home".into())]
    );
}

/// Whether the list of fleets that the sweeps visit names `fleet_id`.
async fn listed(store: &Store, fleet_id: &str) -> bool {
    let listed = berth_store::fleets::fleets(store).await.unwrap();
    listed.iter().any(|id| id == fleet_id)
}

async fn a_deleted_fleet_leaves_the_list_of_fleets_once_its_retention_passed(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    let args = berth_fleet::FleetArgs {
        retention_ms: 300,
        ..Default::default()
    };
    let service = fleet_service_with(&redis, args).await;
    let mut fleets = client(&service).await;
    for id in ["brief", "kept"] {
        fleets.create_fleet(create(id)).await.unwrap();
    }
    let delete = pb::DeleteFleetRequest {
        fleet_id: "brief".into(),
        force: false,
        expected_revision: 0,
    };
    fleets.delete_fleet(delete).await.unwrap();
    let mut forgotten = false;
    for _ in 0..200 {
        if !listed(&store, "brief").await {
            forgotten = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(forgotten, "a fleet deleted and past its retention is still swept");
    assert!(listed(&store, "kept").await);
    // The id can be taken again: the new fleet is listed, and stays so sweep after sweep.
    fleets.create_fleet(create("brief")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(listed(&store, "brief").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_fleet_leaves_the_list_of_fleets_once_its_retention_passed_on_a_single_node() {
    a_deleted_fleet_leaves_the_list_of_fleets_once_its_retention_passed(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_fleet_leaves_the_list_of_fleets_once_its_retention_passed_on_a_cluster() {
    a_deleted_fleet_leaves_the_list_of_fleets_once_its_retention_passed(TestRedis::cluster()).await;
}

/// A fleet created under an id that sweeps are forgetting (as they forget one whose retention passed) is listed once
/// created, whichever way the create and the sweeps interleave: else no sweep would ever visit it.
async fn a_fleet_created_while_sweeps_forget_its_id_stays_listed(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    for round in 0..60 {
        let id = format!("again-{round}");
        let created = Arc::new(AtomicBool::new(false));
        let mut sweeps = JoinSet::new();
        for _ in 0..16 {
            let (store, id, created) = (store.clone(), id.clone(), created.clone());
            sweeps.spawn(async move {
                while !created.load(Ordering::SeqCst) {
                    if endings::finish_fleet_deletion(&store, &id, 1000).await.unwrap().gone {
                        berth_store::fleets::forget(&store, &id).await.unwrap();
                    }
                }
            });
        }
        fleets.create_fleet(create(&id)).await.unwrap();
        created.store(true, Ordering::SeqCst);
        sweeps.join_all().await;
        assert!(
            listed(&store, &id).await,
            "round {round}: {id} has a record that no sweep visits"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_created_while_sweeps_forget_its_id_stays_listed_on_a_single_node() {
    a_fleet_created_while_sweeps_forget_its_id_stays_listed(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_created_while_sweeps_forget_its_id_stays_listed_on_a_cluster() {
    a_fleet_created_while_sweeps_forget_its_id_stays_listed(TestRedis::cluster()).await;
}

async fn a_location_is_deployed_and_its_fleet_active_once_a_server_is_ready(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    let health_args = berth_health::HealthArgs {
        initial_delay_ms: 500,
        ..Default::default()
    };
    let health = spawn_service(berth_health::service(store.clone(), &health_args), store.clone()).await;
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    fleets.create_fleet(create("arena")).await.unwrap();
    let (_home, _told) = ready_process(&health, "arena", "gs-1", "home").await;
    let fleet = describe(&mut fleets, "arena").await.unwrap();
    assert_eq!(fleet.status(), pb::FleetStatus::Active);
    let statuses: Vec<_> = fleet.locations.iter().map(|l| l.status()).collect();
    assert_eq!(
        statuses,
        [pb::LocationStatus::Deployed, pb::LocationStatus::Initialized]
    );
    // A server ready in a location with no capacity yet (one started by someone else) deploys it too.
    let (_away, _told) = ready_process(&health, "arena", "gs-2", "away").await;
    let fleet = describe(&mut fleets, "arena").await.unwrap();
    assert_eq!(fleet.locations[1].status(), pb::LocationStatus::Deployed);
    let tail: Vec<_> = codes(&events(&mut fleets, "arena").await).into_iter().skip(4).collect();
    assert_eq!(
        tail,
        [
            (pb::FleetEventCode::LocationDeployed, "home".into()),
            (pb::FleetEventCode::FleetActive, String::new()),
            (pb::FleetEventCode::LocationDeployed, "away".into()),
        ]
    );

    // Each location counts its own ready server; the total sums them; one location may be asked for alone.
    let utilization = |location: &str| pb::GetFleetUtilizationRequest {
        fleet_id: "arena".into(),
        location: location.into(),
    };
    let read = fleets
        .get_fleet_utilization(utilization(""))
        .await
        .unwrap()
        .into_inner()
        .utilization
        .unwrap();
    let available = |u: &pb::LocationUtilization| {
        (
            u.location.clone(),
            u.game_server_counts.unwrap().available,
            u.instance_counts.unwrap().active,
        )
    };
    let per_location: Vec<_> = read.locations.iter().map(available).collect();
    assert_eq!(per_location, [("home".into(), 1, 1), ("away".into(), 1, 1)]);
    assert_eq!(available(read.total.as_ref().unwrap()), (String::new(), 2, 2));
    let away = fleets
        .get_fleet_utilization(utilization("away"))
        .await
        .unwrap()
        .into_inner()
        .utilization
        .unwrap();
    assert_eq!(away.locations.len(), 1);
    assert_eq!(away.total.unwrap().game_server_counts.unwrap().available, 1);
    let err = fleets.get_fleet_utilization(utilization("mars")).await.unwrap_err();
    assert_eq!((err.code(), err.message().contains("mars")), (Code::NotFound, true));
    let missing = pb::GetFleetUtilizationRequest {
        fleet_id: "nowhere".into(),
        location: String::new(),
    };
    let err = fleets.get_fleet_utilization(missing).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let malformed = pb::GetFleetUtilizationRequest {
        fleet_id: "a{b}".into(),
        location: String::new(),
    };
    let err = fleets.get_fleet_utilization(malformed).await.unwrap_err();
    assert_eq!(
        (err.code(), err.message().contains("fleet_id")),
        (Code::InvalidArgument, true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_is_deployed_and_its_fleet_active_once_a_server_is_ready_on_a_single_node() {
    a_location_is_deployed_and_its_fleet_active_once_a_server_is_ready(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_is_deployed_and_its_fleet_active_once_a_server_is_ready_on_a_cluster() {
    a_location_is_deployed_and_its_fleet_active_once_a_server_is_ready(TestRedis::cluster()).await;
}

/// Redis at its maxmemory (noeviction): every change is refused RESOURCE_EXHAUSTED naming Redis memory and leaves
/// nothing behind, reads keep working, the `writes` health status says so, and writes resume by themselves once
/// memory is freed.
async fn redis_at_its_maxmemory_refuses_changes_and_serves_reads(redis: TestRedis) {
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    fleets.create_fleet(create("arena")).await.unwrap();
    wait_for_health(&service.endpoint(), WRITES, ServingStatus::Serving).await;
    let recorded = events(&mut fleets, "arena").await;

    redis.config_set("maxmemory-policy", "noeviction");
    redis.config_set("maxmemory", "1");
    let refused = fleets.create_fleet(create("brawl")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("out of memory"), "{}", refused.message());
    let capacity = pb::UpdateFleetCapacityRequest {
        fleet_id: "arena".into(),
        location: "home".into(),
        desired_instances: Some(7),
        ..Default::default()
    };
    let refused = fleets.update_fleet_capacity(capacity.clone()).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    wait_for_health(&service.endpoint(), WRITES, ServingStatus::NotServing).await;
    // Reads go on, and show that nothing of the refused changes was written.
    let arena = describe(&mut fleets, "arena").await.unwrap();
    assert_eq!(arena.locations[0].capacity.unwrap().desired_instances, 3);
    assert_eq!(describe(&mut fleets, "brawl").await.unwrap_err().code(), Code::NotFound);
    let listed = fleets
        .list_fleets(pb::ListFleetsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.fleets.len(), 1);
    assert_eq!(
        events(&mut fleets, "arena").await,
        recorded,
        "no event of a refused change"
    );
    let utilization = pb::GetFleetUtilizationRequest {
        fleet_id: "arena".into(),
        location: String::new(),
    };
    fleets.get_fleet_utilization(utilization).await.unwrap();

    // Memory freed: writes resume, nothing to restart.
    redis.config_set("maxmemory", "0");
    wait_for_health(&service.endpoint(), WRITES, ServingStatus::Serving).await;
    fleets.create_fleet(create("brawl")).await.unwrap();
    fleets.update_fleet_capacity(capacity).await.unwrap();
    assert_eq!(
        describe(&mut fleets, "arena").await.unwrap().locations[0]
            .capacity
            .unwrap()
            .desired_instances,
        7
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_at_its_maxmemory_refuses_changes_and_serves_reads_on_a_single_node() {
    redis_at_its_maxmemory_refuses_changes_and_serves_reads(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_at_its_maxmemory_refuses_changes_and_serves_reads_on_a_cluster() {
    redis_at_its_maxmemory_refuses_changes_and_serves_reads(TestRedis::cluster()).await;
}

/// A request broken many times over is refused with its first violations and a count of the rest, small enough for
/// a default client's 8 KiB of metadata (grpc-go, grpc-python), which would otherwise see RESOURCE_EXHAUSTED instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_of_many_violations_fits_a_default_clients_metadata() {
    let redis = TestRedis::single();
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    fleets.create_fleet(create("arena")).await.unwrap();
    for copies in [101, 1001] {
        let add = pb::CreateFleetLocationsRequest {
            fleet_id: "arena".into(),
            locations: vec![location("north", 0, 1, 0); copies],
        };
        let remove = pb::DeleteFleetLocationsRequest {
            fleet_id: "arena".into(),
            locations: vec!["away".into(); copies],
        };
        for refused in [
            fleets.create_fleet_locations(add).await.unwrap_err(),
            fleets.delete_fleet_locations(remove).await.unwrap_err(),
        ] {
            assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
            let violations = refused.get_details_bad_request().unwrap().field_violations;
            assert_eq!(violations.len(), berth_domain::validate::VIOLATIONS_SHOWN + 1);
            let last = violations.last().unwrap();
            assert_eq!(last.field, "");
            assert!(last.description.contains("more violation"), "{}", last.description);
            // The details travel base64-encoded beside the message.
            let trailers = refused.message().len() + refused.details().len() * 4 / 3;
            assert!(trailers < 4096, "{trailers} bytes of trailers");
        }
    }
    assert_eq!(
        describe(&mut fleets, "arena").await.unwrap().locations.len(),
        2,
        "nothing changed"
    );
}

/// Game sessions go only to ACTIVE fleets, in locations they have and are not deleting.
async fn game_sessions_go_only_to_active_fleets_and_their_locations(redis: TestRedis) {
    use berth_proto::session::v1::CreateGameSessionRequest;
    let store = Store::connect(&redis.config()).await.unwrap();
    let health = berth_health::HealthArgs::default();
    let health = spawn_service(berth_health::service(store.clone(), &health), store.clone()).await;
    let session_args = berth_session::SessionArgs::default();
    let sessions = spawn_service(berth_session::service(store.clone(), &session_args), store.clone()).await;
    let channel = berth_sdk::connect(&sessions.endpoint(), &token(Role::Client, None))
        .await
        .unwrap();
    let mut games = GameSessionServiceClient::new(channel);
    let service = fleet_service(&redis).await;
    let mut fleets = client(&service).await;
    fleets.create_fleet(create("arena")).await.unwrap();
    let at = |location: &str| CreateGameSessionRequest {
        fleet_id: "arena".into(),
        location: location.into(),
        maximum_player_session_count: 2,
        ..Default::default()
    };

    // NEW: no server has been ready anywhere yet.
    let err = games.create_game_session(at("")).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("NEW"), "{}", err.message());

    let (_server, _told) = ready_process(&health, "arena", "gs-1", "home").await;
    let err = games.create_game_session(at("mars")).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let created = games.create_game_session(at("home")).await.unwrap().into_inner();
    assert_eq!(created.game_session.unwrap().location, "home");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn game_sessions_go_only_to_active_fleets_and_their_locations_on_a_single_node() {
    game_sessions_go_only_to_active_fleets_and_their_locations(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn game_sessions_go_only_to_active_fleets_and_their_locations_on_a_cluster() {
    game_sessions_go_only_to_active_fleets_and_their_locations(TestRedis::cluster()).await;
}
