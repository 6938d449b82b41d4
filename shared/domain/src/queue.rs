//! Game session queues (`berth/placement/v1/queues.proto`): every limit of QueueService's requests, checked whole
//! so that a refusal names each field it breaks and changes nothing, and an update applied to a queue. A queue is
//! kept as the contract's own `Queue` message (revision and times beside it), so this module is all a queue's
//! rules; whether its destination fleets exist is for the service to look up.

pub mod order;

use std::collections::HashSet;

use berth_proto::placement::v1 as pb;
use tonic::Status;

use crate::game_server::FLEET_ID_LEN;
use crate::process::LOCATION_LEN;
use crate::validate::{Violations, check_count, check_page_size, checked_entries};

/// Queue names: 1 to 128 characters of `[A-Za-z0-9_-]` (no dot, unlike other ids).
pub const NAME_LEN: (usize, usize) = (1, 128);
/// Destinations of a queue.
pub const DESTINATIONS_MAX: usize = 100;
/// A placement's time to stay PENDING, s, and the default for 0.
pub const TIMEOUT_S: (u32, u32) = (10, 600);
/// Player latency policies of a queue.
pub const LATENCY_POLICIES_MAX: usize = 10;
/// A latency policy's cap, ms.
pub const LATENCY_MS: (u32, u32) = (1, 60_000);
/// A latency policy's duration, s.
pub const POLICY_DURATION_MAX_S: u32 = 600;
/// Criteria of a priority order.
pub const PRIORITIES_MAX: usize = 4;
/// Locations of a location order or filter.
pub const LOCATIONS_MAX: usize = 100;
/// Characters of custom event data.
pub const CUSTOM_EVENT_DATA_MAX: usize = 256;
/// Most PENDING placements a queue may be limited to.
pub const PENDING_MAX: u32 = 1_000_000;
/// Queues per page of ListQueues, and the default.
pub const PAGE_SIZE: (u32, u32) = (1000, 100);

/// Checks a queue name, in `field`.
pub fn check_name(v: &mut Violations, field: &str, name: &str) {
    v.name(field, name, NAME_LEN.0, NAME_LEN.1);
}

/// Checks a CreateQueueRequest; the queue it creates, its timeout resolved (revision and times left to the store).
pub fn check_create(req: &pb::CreateQueueRequest) -> Result<pb::Queue, Status> {
    let mut v = Violations::new();
    check_name(&mut v, "name", &req.name);
    check_destinations(&mut v, "destinations", &req.destinations);
    if req.timeout_seconds != 0 {
        check_timeout(&mut v, req.timeout_seconds);
    }
    check_latency_policies(&mut v, "player_latency_policies", &req.player_latency_policies);
    check_common(
        &mut v,
        req.priority_configuration.as_ref(),
        req.filter_configuration.as_ref(),
        Some(&req.custom_event_data),
        Some(req.maximum_pending_placements),
    );
    v.into_result()?;
    Ok(pb::Queue {
        name: req.name.clone(),
        destinations: req.destinations.clone(),
        timeout_seconds: if req.timeout_seconds == 0 {
            TIMEOUT_S.1
        } else {
            req.timeout_seconds
        },
        player_latency_policies: req.player_latency_policies.clone(),
        priority_configuration: req.priority_configuration.clone().filter(|p| !is_default(p)),
        filter_configuration: req
            .filter_configuration
            .clone()
            .filter(|f| !f.allowed_locations.is_empty()),
        custom_event_data: req.custom_event_data.clone(),
        maximum_pending_placements: req.maximum_pending_placements,
        ..Default::default()
    })
}

/// Checks an UpdateQueueRequest: the fields it sets, by the rules of CreateQueue.
pub fn check_update(req: &pb::UpdateQueueRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_name(&mut v, "name", &req.name);
    if let Some(destinations) = &req.destinations {
        check_destinations(&mut v, "destinations.destinations", &destinations.destinations);
    }
    if let Some(timeout) = req.timeout_seconds {
        check_timeout(&mut v, timeout);
    }
    if let Some(policies) = &req.player_latency_policies {
        check_latency_policies(&mut v, "player_latency_policies.policies", &policies.policies);
    }
    check_common(
        &mut v,
        req.priority_configuration.as_ref(),
        req.filter_configuration.as_ref(),
        req.custom_event_data.as_deref(),
        req.maximum_pending_placements,
    );
    v.into_result()
}

/// Applies a checked update to a queue; the names of the fields it changed (none: nothing to write).
pub fn apply_update(queue: &mut pb::Queue, req: &pb::UpdateQueueRequest) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut set = |name: &'static str, differs: bool| {
        if differs {
            changed.push(name);
        }
    };
    if let Some(destinations) = &req.destinations {
        set("destinations", queue.destinations != destinations.destinations);
        queue.destinations.clone_from(&destinations.destinations);
    }
    if let Some(timeout) = req.timeout_seconds {
        set("timeout_seconds", queue.timeout_seconds != timeout);
        queue.timeout_seconds = timeout;
    }
    if let Some(policies) = &req.player_latency_policies {
        set(
            "player_latency_policies",
            queue.player_latency_policies != policies.policies,
        );
        queue.player_latency_policies.clone_from(&policies.policies);
    }
    if let Some(priority) = &req.priority_configuration {
        let priority = Some(priority.clone()).filter(|p| !is_default(p));
        set("priority_configuration", queue.priority_configuration != priority);
        queue.priority_configuration = priority;
    }
    if let Some(filter) = &req.filter_configuration {
        let filter = Some(filter.clone()).filter(|f| !f.allowed_locations.is_empty());
        set("filter_configuration", queue.filter_configuration != filter);
        queue.filter_configuration = filter;
    }
    if let Some(data) = &req.custom_event_data {
        set("custom_event_data", queue.custom_event_data != *data);
        queue.custom_event_data.clone_from(data);
    }
    if let Some(pending) = req.maximum_pending_placements {
        set(
            "maximum_pending_placements",
            queue.maximum_pending_placements != pending,
        );
        queue.maximum_pending_placements = pending;
    }
    changed
}

/// Checks a DeleteQueueRequest.
pub fn check_delete(req: &pb::DeleteQueueRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_name(&mut v, "name", &req.name);
    v.into_result()
}

/// Checks a DescribeQueueRequest.
pub fn check_describe(req: &pb::DescribeQueueRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_name(&mut v, "name", &req.name);
    v.into_result()
}

/// Checks a ListQueuesRequest; the page size to serve (the token is checked where it is redeemed).
pub fn check_list(req: &pb::ListQueuesRequest) -> Result<usize, Status> {
    let mut v = Violations::new();
    let size = check_page_size(&mut v, req.page_size, PAGE_SIZE.0, PAGE_SIZE.1);
    v.into_result().map(|()| size)
}

/// Checks what CreateQueue and UpdateQueue carry alike, where given.
fn check_common(
    v: &mut Violations,
    priority: Option<&pb::PriorityConfiguration>,
    filter: Option<&pb::FilterConfiguration>,
    custom_event_data: Option<&str>,
    maximum_pending: Option<u32>,
) {
    if let Some(priority) = priority {
        check_priority(v, priority);
    }
    if let Some(filter) = filter {
        check_locations(v, "filter_configuration.allowed_locations", &filter.allowed_locations);
    }
    if let Some(data) = custom_event_data {
        v.text("custom_event_data", data, CUSTOM_EVENT_DATA_MAX);
    }
    if let Some(pending) = maximum_pending {
        check_pending(v, pending);
    }
}

/// The contract's "no priority configuration": both lists empty restores the default order.
fn is_default(priority: &pb::PriorityConfiguration) -> bool {
    priority.priority_order.is_empty() && priority.location_order.is_empty()
}

fn check_destinations(v: &mut Violations, field: &str, destinations: &[pb::QueueDestination]) {
    check_count(v, field, destinations.len(), 1, DESTINATIONS_MAX);
    let mut seen = HashSet::new();
    for (i, destination) in checked_entries(destinations, DESTINATIONS_MAX) {
        let entry = format!("{field}[{i}].fleet_id");
        v.id(&entry, &destination.fleet_id, FLEET_ID_LEN.0, FLEET_ID_LEN.1);
        if !seen.insert(destination.fleet_id.as_str()) {
            v.add(&entry, format!("lists fleet {:?} a second time", destination.fleet_id));
        }
    }
}

fn check_timeout(v: &mut Violations, timeout: u32) {
    if !(TIMEOUT_S.0..=TIMEOUT_S.1).contains(&timeout) {
        v.add(
            "timeout_seconds",
            format!("must be {} to {} s, got {timeout}", TIMEOUT_S.0, TIMEOUT_S.1),
        );
    }
}

fn check_latency_policies(v: &mut Violations, field: &str, policies: &[pb::PlayerLatencyPolicy]) {
    check_count(v, field, policies.len(), 0, LATENCY_POLICIES_MAX);
    let highest = policies.iter().map(|p| p.maximum_individual_player_latency_ms).max();
    let mut maxima = HashSet::new();
    for (i, policy) in checked_entries(policies, LATENCY_POLICIES_MAX) {
        let latency = policy.maximum_individual_player_latency_ms;
        let entry = format!("{field}[{i}].maximum_individual_player_latency_ms");
        if !(LATENCY_MS.0..=LATENCY_MS.1).contains(&latency) {
            v.add(
                &entry,
                format!("must be {} to {} ms, got {latency}", LATENCY_MS.0, LATENCY_MS.1),
            );
        } else if !maxima.insert(latency) {
            v.add(&entry, format!("repeats the maximum {latency} ms of another policy"));
        }
        let duration = policy.policy_duration_seconds;
        let entry = format!("{field}[{i}].policy_duration_seconds");
        if duration > POLICY_DURATION_MAX_S {
            v.add(
                &entry,
                format!("must be at most {POLICY_DURATION_MAX_S} s, got {duration}"),
            );
        } else if duration == 0 && Some(latency) != highest {
            v.add(
                &entry,
                "may be 0 (until the placement times out) only on the policy with the highest maximum",
            );
        }
    }
}

fn check_priority(v: &mut Violations, priority: &pb::PriorityConfiguration) {
    let field = "priority_configuration.priority_order";
    check_count(v, field, priority.priority_order.len(), 0, PRIORITIES_MAX);
    let mut seen = HashSet::new();
    for (i, criterion) in checked_entries(&priority.priority_order, PRIORITIES_MAX) {
        let entry = format!("{field}[{i}]");
        match pb::PriorityType::try_from(*criterion) {
            Ok(pb::PriorityType::Unspecified) | Err(_) => {
                v.add(&entry, format!("{criterion} is not a priority criterion"));
            }
            Ok(_) if !seen.insert(*criterion) => v.add(&entry, "lists a criterion a second time"),
            Ok(_) => {}
        }
    }
    let by_location = priority.priority_order.contains(&(pb::PriorityType::Location as i32));
    if by_location && priority.location_order.is_empty() {
        v.add(
            "priority_configuration.location_order",
            "must list at least one location when priority_order holds LOCATION",
        );
    }
    check_locations(v, "priority_configuration.location_order", &priority.location_order);
}

fn check_locations(v: &mut Violations, field: &str, locations: &[String]) {
    check_count(v, field, locations.len(), 0, LOCATIONS_MAX);
    let mut seen = HashSet::new();
    for (i, location) in checked_entries(locations, LOCATIONS_MAX) {
        let entry = format!("{field}[{i}]");
        v.id(&entry, location, LOCATION_LEN.0, LOCATION_LEN.1);
        if !seen.insert(location.as_str()) {
            v.add(&entry, format!("lists location {location:?} a second time"));
        }
    }
}

fn check_pending(v: &mut Violations, pending: u32) {
    if pending > PENDING_MAX {
        v.add(
            "maximum_pending_placements",
            format!("must be at most {PENDING_MAX}, got {pending}"),
        );
    }
}

#[cfg(test)]
mod tests;
