//! The input checks of `FleetService` requests, against the limits `berth/fleet/v1/fleets.proto` states field by
//! field, and the defaults a request's zero values stand for.
//!
//! Each check looks at the whole request before anything is read or changed and reports every broken rule at once.
//! Rules that depend on stored state — capacity bounds merged with the current ones, a location already in the
//! fleet, the expected revision — are the store's to enforce, atomically.

use std::collections::HashSet;

use berth_proto::fleet::v1 as pb;
use prost_types::value::Kind;
use tonic::Status;

use super::{defaults, parameters};
use crate::game_server::{INSTANCE_ID_LEN, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, check_fleet_id};
use crate::process::LOCATION_LEN;
use crate::stored::{FleetEventCode, FleetStatus};
use crate::validate::{Violations, check_count, check_labels, check_page_size, checked_entries};
use crate::watch::{check_watch_start, check_watched_fleets};

/// Longest name, description and status message, in characters.
pub const TEXT_MAX: usize = 1024;
/// Provisioner names: 1 to 64 characters of `[a-z0-9_-]`.
pub const PROVISIONER_LEN: (usize, usize) = (1, 64);
/// Longest launch path and parameters, in characters.
pub const LAUNCH_TEXT_MAX: usize = 1024;
/// Largest provisioner parameters, in bytes of their JSON form.
pub const PROVISIONER_PARAMETERS_MAX: usize = 65_536;
/// Instance types of a fleet.
pub const INSTANCE_DEFINITIONS_MAX: usize = 20;
/// Instance type names: 1 to 128 characters of `[A-Za-z0-9_.-]`.
pub const INSTANCE_TYPE_LEN: (usize, usize) = (1, 128);
/// Highest hourly cost, in millionths.
pub const HOURLY_COST_MAX: u64 = 1_000_000_000_000;
/// Most server processes per instance.
pub const PROCESSES_PER_INSTANCE_MAX: u32 = 256;
/// Most concurrent activations per instance.
pub const ACTIVATIONS_MAX: u32 = 1000;
/// Activation timeout bounds, s.
pub const ACTIVATION_TIMEOUT_S: (u32, u32) = (1, 600);
/// Reservation timeout bounds, s.
pub const RESERVATION_TIMEOUT_S: (u32, u32) = (10, 600);
/// Most game sessions per creator per period.
pub const PER_CREATOR_MAX: u32 = 100_000;
/// Creation-limit period bounds, minutes.
pub const POLICY_PERIOD_MINUTES: (u32, u32) = (1, 1440);
/// Locations of a fleet.
pub const LOCATIONS_MAX: usize = 100;
/// Most instances of a location.
pub const INSTANCES_MAX: u32 = 100_000;
/// Most labels of a fleet.
pub const LABELS_MAX: usize = 50;
/// Most standby servers of a location or a window.
pub const STANDBY_MAX: u32 = 100_000;
/// Dynamic standby thresholds.
pub const THRESHOLDS_MAX: usize = 5;
/// Scheduled standby windows of a location.
pub const WINDOWS_MAX: usize = 50;
/// Longest description of a standby window, in characters.
pub const WINDOW_DESCRIPTION_MAX: usize = 256;
/// Longest recurring standby window, s.
pub const RECURRING_WINDOW_MAX_S: i64 = 7 * 24 * 3600;

/// What a valid CreateFleet asks for: the fleet's configuration (defaults resolved, every unset value given its
/// meaning) and its locations, home first.
#[derive(Clone, Debug, PartialEq)]
pub struct NewFleet {
    pub config: pb::Fleet,
    pub locations: Vec<pb::LocationConfiguration>,
}

/// Checks a CreateFleet request; `provisioners` are those the deployment configures.
pub fn check_create(req: &pb::CreateFleetRequest, provisioners: &[&str]) -> Result<NewFleet, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    v.text("name", &req.name, TEXT_MAX);
    v.text("description", &req.description, TEXT_MAX);
    let compute = match pb::ComputeType::try_from(req.compute_type) {
        Ok(pb::ComputeType::Unspecified) => pb::ComputeType::Managed,
        Ok(compute) => compute,
        Err(_) => {
            v.add("compute_type", format!("{} is not a compute type", req.compute_type));
            pb::ComputeType::Managed
        }
    };
    let managed = compute == pb::ComputeType::Managed;
    if managed {
        check_provisioner(&mut v, &req.provisioner, provisioners);
        match &req.launch_configuration {
            Some(launch) => {
                check_launch(&mut v, "launch_configuration", launch);
                check_parameters(&mut v, &req.provisioner, launch);
            }
            None => v.add("launch_configuration", "is required for a MANAGED fleet"),
        }
        check_count(
            &mut v,
            "instance_definitions",
            req.instance_definitions.len(),
            1,
            INSTANCE_DEFINITIONS_MAX,
        );
    } else {
        if !req.provisioner.is_empty() {
            v.add("provisioner", "must be empty for an ANYWHERE fleet");
        }
        if let Some(launch) = &req.launch_configuration {
            check_launch(&mut v, "launch_configuration", launch);
        }
        check_count(
            &mut v,
            "instance_definitions",
            req.instance_definitions.len(),
            0,
            INSTANCE_DEFINITIONS_MAX,
        );
    }
    check_instance_definitions(&mut v, "instance_definitions", &req.instance_definitions);
    let balancing = enum_or(
        &mut v,
        "balancing_strategy",
        pb::BalancingStrategy::try_from(req.balancing_strategy),
        pb::BalancingStrategy::Unspecified,
        pb::BalancingStrategy::OnDemandOnly,
    );
    let processes = check_processes_per_instance(&mut v, req.server_processes_per_instance);
    check_at_most(
        &mut v,
        "max_concurrent_game_session_activations",
        req.max_concurrent_game_session_activations,
        ACTIVATIONS_MAX,
    );
    let activation = or_default(
        &mut v,
        "game_session_activation_timeout_seconds",
        req.game_session_activation_timeout_seconds,
        ACTIVATION_TIMEOUT_S,
        defaults::ACTIVATION_TIMEOUT_S,
    );
    let session_protection = enum_or(
        &mut v,
        "new_game_session_protection_policy",
        pb::ProtectionPolicy::try_from(req.new_game_session_protection_policy),
        pb::ProtectionPolicy::Unspecified,
        pb::ProtectionPolicy::NoProtection,
    );
    let server_protection = enum_or(
        &mut v,
        "game_server_protection_policy",
        pb::ProtectionPolicy::try_from(req.game_server_protection_policy),
        pb::ProtectionPolicy::Unspecified,
        pb::ProtectionPolicy::NoProtection,
    );
    if let Some(limit) = &req.resource_creation_limit_policy {
        check_creation_limit(&mut v, "resource_creation_limit_policy", limit);
    }
    let timeouts = check_timeouts(&mut v, "process_timeouts", &req.process_timeouts.unwrap_or_default());
    let reservation = or_default(
        &mut v,
        "player_session_reservation_timeout_seconds",
        req.player_session_reservation_timeout_seconds,
        RESERVATION_TIMEOUT_S,
        defaults::RESERVATION_TIMEOUT_S,
    );
    check_count(&mut v, "locations", req.locations.len(), 1, LOCATIONS_MAX);
    check_locations(&mut v, "locations", &req.locations);
    check_labels(&mut v, "labels", &req.labels, LABELS_MAX);
    v.into_result()?;
    Ok(NewFleet {
        config: pb::Fleet {
            fleet_id: req.fleet_id.clone(),
            name: req.name.clone(),
            description: req.description.clone(),
            compute_type: compute as i32,
            provisioner: req.provisioner.clone(),
            launch_configuration: req.launch_configuration.clone(),
            instance_definitions: req.instance_definitions.clone(),
            balancing_strategy: balancing as i32,
            server_processes_per_instance: processes,
            max_concurrent_game_session_activations: req.max_concurrent_game_session_activations,
            game_session_activation_timeout_seconds: activation,
            new_game_session_protection_policy: session_protection as i32,
            game_server_protection_policy: server_protection as i32,
            resource_creation_limit_policy: req
                .resource_creation_limit_policy
                .filter(|limit| limit.new_game_sessions_per_creator > 0),
            process_timeouts: Some(timeouts),
            player_session_reservation_timeout_seconds: reservation,
            labels: req.labels.clone(),
            ..Default::default()
        },
        locations: req.locations.clone(),
    })
}

/// Checks an UpdateFleet request: every field given, against the same limits as at creation. Whether the fleet's
/// compute type needs the launch settings it keeps is not a question: an update cannot remove them.
pub fn check_update(req: &pb::UpdateFleetRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    if let Some(name) = &req.name {
        v.text("name", name, TEXT_MAX);
    }
    if let Some(description) = &req.description {
        v.text("description", description, TEXT_MAX);
    }
    if let Some(launch) = &req.launch_configuration {
        check_launch(&mut v, "launch_configuration", launch);
    }
    if let Some(definitions) = &req.instance_definitions {
        let field = "instance_definitions.instance_definitions";
        check_count(
            &mut v,
            field,
            definitions.instance_definitions.len(),
            1,
            INSTANCE_DEFINITIONS_MAX,
        );
        check_instance_definitions(&mut v, field, &definitions.instance_definitions);
    }
    enum_or(
        &mut v,
        "balancing_strategy",
        pb::BalancingStrategy::try_from(req.balancing_strategy),
        pb::BalancingStrategy::Unspecified,
        pb::BalancingStrategy::Unspecified,
    );
    if let Some(processes) = req.server_processes_per_instance {
        in_range(
            &mut v,
            "server_processes_per_instance",
            processes,
            (1, PROCESSES_PER_INSTANCE_MAX),
        );
    }
    if let Some(activations) = req.max_concurrent_game_session_activations {
        check_at_most(
            &mut v,
            "max_concurrent_game_session_activations",
            activations,
            ACTIVATIONS_MAX,
        );
    }
    if let Some(timeout) = req.game_session_activation_timeout_seconds {
        in_range(
            &mut v,
            "game_session_activation_timeout_seconds",
            timeout,
            ACTIVATION_TIMEOUT_S,
        );
    }
    for (field, value) in [
        (
            "new_game_session_protection_policy",
            req.new_game_session_protection_policy,
        ),
        ("game_server_protection_policy", req.game_server_protection_policy),
    ] {
        enum_or(
            &mut v,
            field,
            pb::ProtectionPolicy::try_from(value),
            pb::ProtectionPolicy::Unspecified,
            pb::ProtectionPolicy::Unspecified,
        );
    }
    if let Some(limit) = &req.resource_creation_limit_policy {
        check_creation_limit(&mut v, "resource_creation_limit_policy", limit);
    }
    if let Some(timeouts) = &req.process_timeouts {
        check_timeouts(&mut v, "process_timeouts", timeouts);
    }
    if let Some(timeout) = req.player_session_reservation_timeout_seconds {
        in_range(
            &mut v,
            "player_session_reservation_timeout_seconds",
            timeout,
            RESERVATION_TIMEOUT_S,
        );
    }
    if let Some(labels) = &req.labels {
        check_labels(&mut v, "labels.labels", &labels.labels, LABELS_MAX);
    }
    v.into_result()
}

/// The fields of UpdateFleet that are launch settings: changing one moves an UNHEALTHY location back to DEPLOYING.
pub const LAUNCH_SETTINGS: [&str; 4] = [
    "launch_configuration",
    "instance_definitions",
    "server_processes_per_instance",
    "process_timeouts",
];

/// Applies a checked UpdateFleet to a fleet's configuration; the names of the fields it changed, in the contract's
/// order.
pub fn apply_update(config: &mut pb::Fleet, req: &pb::UpdateFleetRequest) -> Vec<&'static str> {
    let c = &mut Vec::new();
    let given = |value: i32| (value != 0).then_some(value);
    assign(c, "name", &mut config.name, req.name.clone());
    assign(c, "description", &mut config.description, req.description.clone());
    assign(
        c,
        "launch_configuration",
        &mut config.launch_configuration,
        req.launch_configuration.clone().map(Some),
    );
    assign(
        c,
        "instance_definitions",
        &mut config.instance_definitions,
        req.instance_definitions.clone().map(|d| d.instance_definitions),
    );
    assign(
        c,
        "balancing_strategy",
        &mut config.balancing_strategy,
        given(req.balancing_strategy),
    );
    assign(
        c,
        "server_processes_per_instance",
        &mut config.server_processes_per_instance,
        req.server_processes_per_instance,
    );
    assign(
        c,
        "max_concurrent_game_session_activations",
        &mut config.max_concurrent_game_session_activations,
        req.max_concurrent_game_session_activations,
    );
    assign(
        c,
        "game_session_activation_timeout_seconds",
        &mut config.game_session_activation_timeout_seconds,
        req.game_session_activation_timeout_seconds,
    );
    assign(
        c,
        "new_game_session_protection_policy",
        &mut config.new_game_session_protection_policy,
        given(req.new_game_session_protection_policy),
    );
    assign(
        c,
        "game_server_protection_policy",
        &mut config.game_server_protection_policy,
        given(req.game_server_protection_policy),
    );
    assign(
        c,
        "resource_creation_limit_policy",
        &mut config.resource_creation_limit_policy,
        req.resource_creation_limit_policy
            .map(|limit| Some(limit).filter(|limit| limit.new_game_sessions_per_creator > 0)),
    );
    assign(
        c,
        "process_timeouts",
        &mut config.process_timeouts,
        req.process_timeouts
            .as_ref()
            .map(|timeouts| Some(check_timeouts(&mut Violations::new(), "process_timeouts", timeouts))),
    );
    assign(
        c,
        "player_session_reservation_timeout_seconds",
        &mut config.player_session_reservation_timeout_seconds,
        req.player_session_reservation_timeout_seconds,
    );
    assign(
        c,
        "labels",
        &mut config.labels,
        req.labels.clone().map(|labels| labels.labels),
    );
    std::mem::take(c)
}

/// Sets a field to a value an update gives, noting its name when that changes it.
fn assign<T: PartialEq>(changed: &mut Vec<&'static str>, name: &'static str, field: &mut T, given: Option<T>) {
    if let Some(value) = given {
        if *field != value {
            changed.push(name);
        }
        *field = value;
    }
}

/// Longest viability reason, in characters.
pub const REASON_MAX: usize = 256;

/// Checks an UpdateFleetStandby request.
pub fn check_update_standby(req: &pb::UpdateFleetStandbyRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_location(&mut v, "location", &req.location);
    if let Some(standby) = &req.standby {
        check_standby(&mut v, "standby", standby);
    }
    v.into_result()
}

/// Checks a SetInstanceTypeViability request.
pub fn check_viability(req: &pb::SetInstanceTypeViabilityRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_location(&mut v, "location", &req.location);
    v.id(
        "instance_type",
        &req.instance_type,
        INSTANCE_TYPE_LEN.0,
        INSTANCE_TYPE_LEN.1,
    );
    v.text("reason", &req.reason, REASON_MAX);
    v.into_result()
}

/// Checks the fleet and locations of SuspendAutoscaling or ResumeAutoscaling (no locations: every one).
pub fn check_autoscaling(fleet_id: &str, locations: &[String]) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, fleet_id);
    check_count(&mut v, "locations", locations.len(), 0, LOCATIONS_MAX);
    for (i, location) in checked_entries(locations, LOCATIONS_MAX) {
        v.id(&format!("locations[{i}]"), location, LOCATION_LEN.0, LOCATION_LEN.1);
    }
    v.into_result()
}

/// Checks a CreateFleetLocations request: 1 to 100 distinct locations, each as at creation.
pub fn check_create_locations(req: &pb::CreateFleetLocationsRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_count(&mut v, "locations", req.locations.len(), 1, LOCATIONS_MAX);
    check_locations(&mut v, "locations", &req.locations);
    v.into_result()
}

/// Most statuses in a ListFleets filter.
pub const STATUSES_MAX: usize = 6;
/// Most codes in a ListFleetEvents or WatchFleetEvents filter.
pub const CODES_MAX: usize = 32;

/// Checks a ListFleets request: the statuses it asks for, and the page size to serve.
pub fn check_list(req: &pb::ListFleetsRequest) -> Result<(Vec<FleetStatus>, usize), Status> {
    let mut v = Violations::new();
    check_count(&mut v, "statuses", req.statuses.len(), 0, STATUSES_MAX);
    let mut statuses = Vec::new();
    for (i, status) in checked_entries(&req.statuses, STATUSES_MAX) {
        match pb::FleetStatus::try_from(*status)
            .ok()
            .and_then(FleetStatus::from_proto)
        {
            Some(status) => statuses.push(status),
            None => v.add(&format!("statuses[{i}]"), format!("{status} is not a fleet status")),
        }
    }
    let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
    v.into_result().map(|()| (statuses, size))
}

/// What a valid ListFleetEvents asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventQuery {
    /// Only these codes; empty for every one.
    pub codes: Vec<FleetEventCode>,
    /// At or after this time, ms since the epoch.
    pub start_ms: Option<i64>,
    /// Before this time.
    pub end_ms: Option<i64>,
    /// The page size to serve.
    pub size: usize,
}

/// Checks a ListFleetEvents request.
pub fn check_list_events(req: &pb::ListFleetEventsRequest) -> Result<EventQuery, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_location(&mut v, "location", &req.location);
    let codes = check_codes(&mut v, &req.codes);
    let start_ms = req
        .start_time
        .as_ref()
        .and_then(|t| check_time(&mut v, "start_time", t));
    let end_ms = req.end_time.as_ref().and_then(|t| check_time(&mut v, "end_time", t));
    if let (Some(start), Some(end)) = (start_ms, end_ms)
        && end < start
    {
        v.add("end_time", "must not be before start_time");
    }
    let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
    v.into_result().map(|()| EventQuery {
        codes,
        start_ms,
        end_ms,
        size,
    })
}

/// Checks a WatchFleetEvents request, and returns the codes it asks for (none: every code).
pub fn check_watch_events(req: &pb::WatchFleetEventsRequest) -> Result<Vec<FleetEventCode>, Status> {
    let mut v = Violations::new();
    check_watched_fleets(&mut v, &req.fleet_ids);
    let codes = check_codes(&mut v, &req.codes);
    check_watch_start(&mut v, &req.after_cursor, req.from_oldest);
    v.into_result().map(|()| codes)
}

/// Checks an event filter's codes: at most [`CODES_MAX`], each a known code other than UNSPECIFIED. Returns those
/// that are.
fn check_codes(v: &mut Violations, codes: &[i32]) -> Vec<FleetEventCode> {
    check_count(v, "codes", codes.len(), 0, CODES_MAX);
    let mut known = Vec::new();
    for (i, code) in checked_entries(codes, CODES_MAX) {
        match pb::FleetEventCode::try_from(*code)
            .ok()
            .and_then(FleetEventCode::from_proto)
        {
            Some(code) => known.push(code),
            None => v.add(&format!("codes[{i}]"), format!("{code} is not a fleet event code")),
        }
    }
    known
}

/// Checks a DescribeFleet request.
pub fn check_describe(req: &pb::DescribeFleetRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    v.into_result()
}

/// Checks a GetFleetUtilization request.
pub fn check_utilization(req: &pb::GetFleetUtilizationRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_location(&mut v, "location", &req.location);
    v.into_result()
}

/// Checks a DescribeInstances request: a fleet, a location, and an instance id when one is named.
pub fn check_describe_instances(req: &pb::DescribeInstancesRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    v.id("location", &req.location, LOCATION_LEN.0, LOCATION_LEN.1);
    if !req.instance_id.is_empty() {
        v.id("instance_id", &req.instance_id, INSTANCE_ID_LEN.0, INSTANCE_ID_LEN.1);
    }
    v.into_result()
}

/// Checks a DeleteFleetLocations request: 1 to 100 distinct locations.
pub fn check_delete_locations(req: &pb::DeleteFleetLocationsRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_count(&mut v, "locations", req.locations.len(), 1, LOCATIONS_MAX);
    let mut names = HashSet::new();
    for (i, location) in checked_entries(&req.locations, LOCATIONS_MAX) {
        v.id(&format!("locations[{i}]"), location, LOCATION_LEN.0, LOCATION_LEN.1);
        if !names.insert(location.as_str()) {
            v.add(&format!("locations[{i}]"), format!("{location:?} is given twice"));
        }
    }
    v.into_result()
}

/// Checks a DeleteFleet request.
pub fn check_delete(req: &pb::DeleteFleetRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    v.into_result()
}

/// A capacity change: each bound given, or kept (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityChange {
    pub minimum: Option<u32>,
    pub maximum: Option<u32>,
    pub desired: Option<u32>,
}

/// Checks an UpdateFleetCapacity request: each bound at most [`INSTANCES_MAX`], and those given in order. Whether
/// the merged bounds hold is the store's to check, with the current ones.
pub fn check_update_capacity(req: &pb::UpdateFleetCapacityRequest) -> Result<CapacityChange, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_location(&mut v, "location", &req.location);
    let change = CapacityChange {
        minimum: req.minimum_instances,
        maximum: req.maximum_instances,
        desired: req.desired_instances,
    };
    for (field, value) in [
        ("minimum_instances", change.minimum),
        ("maximum_instances", change.maximum),
        ("desired_instances", change.desired),
    ] {
        if let Some(value) = value {
            check_at_most(&mut v, field, value, INSTANCES_MAX);
        }
    }
    if let Some(reason) = capacity_out_of_order(change.minimum, change.maximum, change.desired) {
        v.add(reason.0, reason.1);
    }
    if change.minimum.is_none() && change.maximum.is_none() && change.desired.is_none() {
        v.add(
            "desired_instances",
            "at least one of the minimum, maximum and desired counts must be given",
        );
    }
    v.into_result().map(|()| change)
}

/// The first rule of `minimum ≤ desired ≤ maximum` (and `minimum ≤ maximum`) that the given bounds break, as the
/// field to blame and why.
pub fn capacity_out_of_order(
    minimum: Option<u32>,
    maximum: Option<u32>,
    desired: Option<u32>,
) -> Option<(&'static str, String)> {
    if let (Some(min), Some(max)) = (minimum, maximum)
        && min > max
    {
        return Some((
            "maximum_instances",
            format!("must be at least the minimum {min}, got {max}"),
        ));
    }
    if let (Some(min), Some(desired)) = (minimum, desired)
        && desired < min
    {
        return Some((
            "desired_instances",
            format!("must be at least the minimum {min}, got {desired}"),
        ));
    }
    if let (Some(max), Some(desired)) = (maximum, desired)
        && desired > max
    {
        return Some((
            "desired_instances",
            format!("must be at most the maximum {max}, got {desired}"),
        ));
    }
    None
}

/// Checks a location name, where an empty one means the home location.
fn check_location(v: &mut Violations, field: &str, location: &str) {
    if !location.is_empty() {
        v.id(field, location, LOCATION_LEN.0, LOCATION_LEN.1);
    }
}

fn check_provisioner(v: &mut Violations, provisioner: &str, provisioners: &[&str]) {
    let len = provisioner.chars().count();
    if !(PROVISIONER_LEN.0..=PROVISIONER_LEN.1).contains(&len) {
        v.add(
            "provisioner",
            format!(
                "must be {} to {} characters long for a MANAGED fleet, got {len}",
                PROVISIONER_LEN.0, PROVISIONER_LEN.1
            ),
        );
    } else if let Some(bad) = provisioner
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-')))
    {
        v.add(
            "provisioner",
            format!("may hold only a-z 0-9 _ - characters, got {bad:?}"),
        );
    } else if !provisioners.contains(&provisioner) {
        v.add(
            "provisioner",
            format!(
                "{provisioner:?} is not configured in this deployment (configured: {})",
                provisioners.join(", ")
            ),
        );
    }
}

/// Checks an update's launch configuration against the provisioner of the fleet it changes.
pub fn check_update_parameters(fleet: &pb::Fleet, req: &pb::UpdateFleetRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    if let Some(launch) = &req.launch_configuration
        && fleet.compute_type() == pb::ComputeType::Managed
    {
        check_parameters(&mut v, &fleet.provisioner, launch);
    }
    v.into_result()
}

/// Checks a MANAGED fleet's provisioner parameters as its provisioner reads them.
fn check_parameters(v: &mut Violations, provisioner: &str, launch: &pb::ServerLaunchConfiguration) {
    if let Err(bad) = parameters::check(provisioner, launch) {
        v.add(&format!("{}.{}", parameters::FIELD, bad.field), bad.problem);
    }
}

fn check_launch(v: &mut Violations, field: &str, launch: &pb::ServerLaunchConfiguration) {
    let len = launch.launch_path.chars().count();
    if !(1..=LAUNCH_TEXT_MAX).contains(&len) {
        v.add(
            &format!("{field}.launch_path"),
            format!("must be 1 to {LAUNCH_TEXT_MAX} characters long, got {len}"),
        );
    }
    v.text(&format!("{field}.parameters"), &launch.parameters, LAUNCH_TEXT_MAX);
    if let Some(parameters) = &launch.provisioner_parameters {
        let size = json_size(&Kind::StructValue(parameters.clone()));
        if size > PROVISIONER_PARAMETERS_MAX {
            v.add(
                &format!("{field}.provisioner_parameters"),
                format!("must be at most {PROVISIONER_PARAMETERS_MAX} bytes as JSON, got {size}"),
            );
        }
    }
}

/// The length of a protobuf `Value`'s JSON form, in bytes.
fn json_size(kind: &Kind) -> usize {
    let quoted = |text: &str| {
        2 + text
            .chars()
            .map(|c| match c {
                '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
                c if (c as u32) < 0x20 => 6,
                c => c.len_utf8(),
            })
            .sum::<usize>()
    };
    match kind {
        Kind::NullValue(_) => 4,
        Kind::NumberValue(number) => number.to_string().len(),
        Kind::StringValue(text) => quoted(text),
        Kind::BoolValue(true) => 4,
        Kind::BoolValue(false) => 5,
        Kind::StructValue(fields) => {
            let entries: usize = fields
                .fields
                .iter()
                .map(|(key, value)| quoted(key) + 1 + value.kind.as_ref().map_or(4, json_size))
                .sum();
            2 + entries + fields.fields.len().saturating_sub(1)
        }
        Kind::ListValue(list) => {
            let entries: usize = list
                .values
                .iter()
                .map(|value| value.kind.as_ref().map_or(4, json_size))
                .sum();
            2 + entries + list.values.len().saturating_sub(1)
        }
    }
}

fn check_instance_definitions(v: &mut Violations, field: &str, definitions: &[pb::InstanceDefinition]) {
    let mut types = HashSet::new();
    for (i, definition) in checked_entries(definitions, INSTANCE_DEFINITIONS_MAX) {
        let type_field = format!("{field}[{i}].instance_type");
        v.id(
            &type_field,
            &definition.instance_type,
            INSTANCE_TYPE_LEN.0,
            INSTANCE_TYPE_LEN.1,
        );
        if !types.insert(definition.instance_type.as_str()) {
            v.add(&type_field, format!("{:?} is given twice", definition.instance_type));
        }
        for (name, cost) in [
            ("on_demand_hourly_cost_micros", definition.on_demand_hourly_cost_micros),
            ("spot_hourly_cost_micros", definition.spot_hourly_cost_micros),
        ] {
            if cost > HOURLY_COST_MAX {
                v.add(
                    &format!("{field}[{i}].{name}"),
                    format!("must be at most {HOURLY_COST_MAX}, got {cost}"),
                );
            }
        }
    }
}

fn check_processes_per_instance(v: &mut Violations, requested: u32) -> u32 {
    check_at_most(
        v,
        "server_processes_per_instance",
        requested,
        PROCESSES_PER_INSTANCE_MAX,
    );
    requested.max(1)
}

fn check_creation_limit(v: &mut Violations, field: &str, limit: &pb::ResourceCreationLimitPolicy) {
    check_at_most(
        v,
        &format!("{field}.new_game_sessions_per_creator"),
        limit.new_game_sessions_per_creator,
        PER_CREATOR_MAX,
    );
    let period = limit.policy_period_minutes;
    let (min, max) = POLICY_PERIOD_MINUTES;
    if limit.new_game_sessions_per_creator > 0 && !(min..=max).contains(&period) {
        v.add(
            &format!("{field}.policy_period_minutes"),
            format!("must be {min} to {max} when a limit is set, got {period}"),
        );
    }
}

/// Checks process deadlines and returns them with every 0 given its default.
fn check_timeouts(v: &mut Violations, field: &str, t: &pb::ProcessTimeouts) -> pb::ProcessTimeouts {
    let mut at = |name: &str, value: u32, range: (u32, u32), default: u32| {
        or_default(v, &format!("{field}.{name}"), value, range, default)
    };
    pb::ProcessTimeouts {
        register_timeout_seconds: at(
            "register_timeout_seconds",
            t.register_timeout_seconds,
            (10, 3600),
            defaults::REGISTER_TIMEOUT_S,
        ),
        ready_timeout_seconds: at(
            "ready_timeout_seconds",
            t.ready_timeout_seconds,
            (10, 3600),
            defaults::READY_TIMEOUT_S,
        ),
        heartbeat_interval_ms: at(
            "heartbeat_interval_ms",
            t.heartbeat_interval_ms,
            (1000, 60_000),
            defaults::HEARTBEAT_INTERVAL_MS,
        ),
        unhealthy_after_missed_heartbeats: at(
            "unhealthy_after_missed_heartbeats",
            t.unhealthy_after_missed_heartbeats,
            (1, 10),
            defaults::UNHEALTHY_AFTER,
        ),
        termination_grace_seconds: at(
            "termination_grace_seconds",
            t.termination_grace_seconds,
            (10, 3600),
            defaults::TERMINATION_GRACE_S,
        ),
        exit_timeout_seconds: at(
            "exit_timeout_seconds",
            t.exit_timeout_seconds,
            (1, 600),
            defaults::EXIT_TIMEOUT_S,
        ),
        location_first_heartbeat_timeout_seconds: at(
            "location_first_heartbeat_timeout_seconds",
            t.location_first_heartbeat_timeout_seconds,
            (60, 86_400),
            defaults::FIRST_HEARTBEAT_TIMEOUT_S,
        ),
        location_ready_timeout_seconds: at(
            "location_ready_timeout_seconds",
            t.location_ready_timeout_seconds,
            (60, 86_400),
            defaults::LOCATION_READY_TIMEOUT_S,
        ),
    }
}

fn check_locations(v: &mut Violations, field: &str, locations: &[pb::LocationConfiguration]) {
    let mut names = HashSet::new();
    for (i, location) in checked_entries(locations, LOCATIONS_MAX) {
        let at = format!("{field}[{i}]");
        v.id(
            &format!("{at}.location"),
            &location.location,
            LOCATION_LEN.0,
            LOCATION_LEN.1,
        );
        if !names.insert(location.location.as_str()) {
            v.add(
                &format!("{at}.location"),
                format!("{:?} is given twice", location.location),
            );
        }
        if let Some(capacity) = &location.capacity {
            check_capacity(v, &format!("{at}.capacity"), capacity);
        }
        if let Some(standby) = &location.standby {
            check_standby(v, &format!("{at}.standby"), standby);
        }
    }
}

fn check_capacity(v: &mut Violations, field: &str, capacity: &pb::FleetCapacity) {
    for (name, value) in [
        ("minimum_instances", capacity.minimum_instances),
        ("maximum_instances", capacity.maximum_instances),
        ("desired_instances", capacity.desired_instances),
    ] {
        check_at_most(v, &format!("{field}.{name}"), value, INSTANCES_MAX);
    }
    if let Some((name, reason)) = capacity_out_of_order(
        Some(capacity.minimum_instances),
        Some(capacity.maximum_instances),
        Some(capacity.desired_instances),
    ) {
        v.add(&format!("{field}.{name}"), reason);
    }
}

/// Checks a standby configuration: targets, dynamic thresholds and windows in range, enabled windows not
/// overlapping.
pub fn check_standby(v: &mut Violations, field: &str, standby: &pb::StandbyConfiguration) {
    check_at_most(
        v,
        &format!("{field}.standby_servers"),
        standby.standby_servers,
        STANDBY_MAX,
    );
    if let Some(dynamic) = &standby.dynamic_standby {
        let at = format!("{field}.dynamic_standby");
        check_count(
            v,
            &format!("{at}.thresholds"),
            dynamic.thresholds.len(),
            0,
            THRESHOLDS_MAX,
        );
        let mut triggers = HashSet::new();
        for (i, threshold) in checked_entries(&dynamic.thresholds, THRESHOLDS_MAX) {
            let trigger = format!("{at}.thresholds[{i}].trigger_percent");
            in_range(v, &trigger, threshold.trigger_percent, (1, 99));
            if !triggers.insert(threshold.trigger_percent) {
                v.add(&trigger, format!("{} is given twice", threshold.trigger_percent));
            }
            in_range(
                v,
                &format!("{at}.thresholds[{i}].multiplier_percent"),
                threshold.multiplier_percent,
                (101, 1000),
            );
        }
        if dynamic.ramp_down_seconds != 0 {
            in_range(
                v,
                &format!("{at}.ramp_down_seconds"),
                dynamic.ramp_down_seconds,
                (60, 86_400),
            );
        }
    }
    let at = format!("{field}.scheduled_windows");
    check_count(v, &at, standby.scheduled_windows.len(), 0, WINDOWS_MAX);
    let mut spans: Vec<(usize, i64, i64, bool)> = Vec::new();
    for (i, window) in checked_entries(&standby.scheduled_windows, WINDOWS_MAX) {
        let at = format!("{at}[{i}]");
        v.text(
            &format!("{at}.description"),
            &window.description,
            WINDOW_DESCRIPTION_MAX,
        );
        check_at_most(v, &format!("{at}.standby_servers"), window.standby_servers, STANDBY_MAX);
        let (Some(start), Some(end)) = (&window.start_time, &window.end_time) else {
            v.add(&at, "start_time and end_time are required");
            continue;
        };
        let (Some(_), Some(_)) = (
            check_time(v, &format!("{at}.start_time"), start),
            check_time(v, &format!("{at}.end_time"), end),
        ) else {
            continue;
        };
        if end.seconds <= start.seconds {
            v.add(&format!("{at}.end_time"), "must be after start_time");
        } else if window.recurring_weekly && end.seconds - start.seconds > RECURRING_WINDOW_MAX_S {
            v.add(
                &format!("{at}.end_time"),
                "must be at most 7 days after start_time for a weekly window",
            );
        } else if !window.disabled {
            spans.push((i, start.seconds, end.seconds, window.recurring_weekly));
        }
    }
    for (n, &(i, start, end, weekly)) in spans.iter().enumerate() {
        if let Some(&(j, ..)) = spans[..n].iter().find(|&&(_, other_start, other_end, other_weekly)| {
            overlap((start, end, weekly), (other_start, other_end, other_weekly))
        }) {
            v.add(&format!("{at}[{i}]"), format!("overlaps scheduled_windows[{j}]"));
        }
    }
}

/// Whether two windows (start s, end s, weekly) are ever in force at once. A weekly window recurs every 7 days
/// from its start, forever; a one-off window holds once.
fn overlap(a: (i64, i64, bool), b: (i64, i64, bool)) -> bool {
    const WEEK: i64 = 7 * 24 * 3600;
    match (a.2, b.2) {
        (false, false) => a.0 < b.1 && b.0 < a.1,
        (true, true) => {
            let (a0, b0) = (a.0.rem_euclid(WEEK), b.0.rem_euclid(WEEK));
            let (al, bl) = (a.1 - a.0, b.1 - b.0);
            [-WEEK, 0, WEEK]
                .iter()
                .any(|shift| a0 < b0 + shift + bl && b0 + shift < a0 + al)
        }
        (true, false) => weekly_meets(a, b),
        (false, true) => weekly_meets(b, a),
    }
}

/// Whether a weekly window meets a one-off window at some recurrence from its first start on.
fn weekly_meets(weekly: (i64, i64, bool), once: (i64, i64, bool)) -> bool {
    const WEEK: i64 = 7 * 24 * 3600;
    let length = weekly.1 - weekly.0;
    let first = ((once.0 - weekly.0 - length).div_euclid(WEEK) + 1).max(0);
    let start = weekly.0 + first * WEEK;
    start < once.1 && once.0 < start + length
}

/// Latest time a request may name: the end of year 9999, as protobuf's Timestamp allows.
const TIME_MAX_S: i64 = 253_402_300_799;

/// Checks a time a request names; in ms when valid.
fn check_time(v: &mut Violations, field: &str, time: &prost_types::Timestamp) -> Option<i64> {
    time_ms(time).map_err(|why| v.add(field, why)).ok()
}

/// A time a request names, in ms: from the epoch to the end of year 9999, nanos below a second; else what is wrong.
pub(crate) fn time_ms(time: &prost_types::Timestamp) -> Result<i64, String> {
    if !(0..=TIME_MAX_S).contains(&time.seconds) || !(0..1_000_000_000).contains(&time.nanos) {
        return Err("must be a time from 1970 to the end of 9999, with nanos from 0 to 999999999".into());
    }
    Ok(time.seconds * 1000 + i64::from(time.nanos) / 1_000_000)
}

/// A value that 0 leaves at `default`, else within `range`.
fn or_default(v: &mut Violations, field: &str, value: u32, range: (u32, u32), default: u32) -> u32 {
    if value == 0 {
        return default;
    }
    in_range(v, field, value, range);
    value
}

pub(crate) fn in_range(v: &mut Violations, field: &str, value: u32, (min, max): (u32, u32)) {
    if !(min..=max).contains(&value) {
        v.add(field, format!("must be {min} to {max}, got {value}"));
    }
}

pub(crate) fn check_at_most(v: &mut Violations, field: &str, value: u32, max: u32) {
    if value > max {
        v.add(field, format!("must be at most {max}, got {value}"));
    }
}

/// A contract enum's value: `default` for its unset value, a violation for a number it does not define.
fn enum_or<T: Copy + PartialEq>(
    v: &mut Violations,
    field: &str,
    value: Result<T, prost::UnknownEnumValue>,
    unset: T,
    default: T,
) -> T {
    match value {
        Ok(value) if value == unset => default,
        Ok(value) => value,
        Err(prost::UnknownEnumValue(number)) => {
            v.add(field, format!("{number} is not one of its values"));
            default
        }
    }
}

#[cfg(test)]
mod tests;
