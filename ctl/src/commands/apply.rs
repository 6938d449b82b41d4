//! `berthctl apply -f FILE|DIR`: makes the fleets (with their locations, capacity, standby and scaling policies) and
//! queues the manifests declare exist as declared. It reads every manifest first, then the records as they are, and
//! plans the changes: only the fields a manifest sets are compared (a field it leaves out keeps whatever the service
//! resolved), so applying the same files twice plans nothing and says so. Each update carries the revision it was
//! planned from, so a change made meanwhile by someone else is refused (ABORTED) rather than overwritten. `--dry-run`
//! prints the plan and changes nothing; `--prune` also deletes the fleets and queues no manifest names.

use std::collections::BTreeSet;
use std::path::PathBuf;

use berth_proto::fleet::v1 as fleet;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::placement::v1 as placement;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_sdk::AuthedChannel;
use serde_json::{Map, Value};

use crate::context::{Context, Service};
use crate::error::CtlError;
use crate::lists;
use crate::manifest::{self, Declared};
use crate::output::json_of;

/// What `apply` is told.
pub struct Apply {
    pub files: Vec<PathBuf>,
    pub dry_run: bool,
    pub prune: bool,
}

/// One change to make.
enum Action {
    CreateFleet(fleet::CreateFleetRequest),
    UpdateFleet(fleet::UpdateFleetRequest),
    CreateLocations(fleet::CreateFleetLocationsRequest),
    DeleteLocations(fleet::DeleteFleetLocationsRequest),
    UpdateCapacity(fleet::UpdateFleetCapacityRequest),
    UpdateStandby(fleet::UpdateFleetStandbyRequest),
    PutPolicy(fleet::PutScalingPolicyRequest),
    DeletePolicy(fleet::DeleteScalingPolicyRequest),
    CreateQueue(placement::CreateQueueRequest),
    UpdateQueue(placement::UpdateQueueRequest),
    DeleteQueue(placement::DeleteQueueRequest),
    DeleteFleet(fleet::DeleteFleetRequest),
}

/// A change and how it reads in the plan.
struct Step {
    says: String,
    action: Action,
}

/// The fields of a fleet UpdateFleet can change, as proto3 JSON names them; the two replaced through a wrapper
/// message are named with the wrapper's field.
const FLEET_UPDATABLE: &[&str] = &[
    "name",
    "description",
    "launchConfiguration",
    "instanceDefinitions",
    "balancingStrategy",
    "serverProcessesPerInstance",
    "maxConcurrentGameSessionActivations",
    "gameSessionActivationTimeoutSeconds",
    "newGameSessionProtectionPolicy",
    "gameServerProtectionPolicy",
    "resourceCreationLimitPolicy",
    "processTimeouts",
    "playerSessionReservationTimeoutSeconds",
    "labels",
];

/// The fields of a queue UpdateQueue can change; `destinations` and `playerLatencyPolicies` go in wrappers.
const QUEUE_UPDATABLE: &[&str] = &[
    "destinations",
    "timeoutSeconds",
    "playerLatencyPolicies",
    "priorityConfiguration",
    "filterConfiguration",
    "customEventData",
    "maximumPendingPlacements",
];

/// Fields that are values rather than messages (a map, free-form JSON): compared and replaced whole, so that a key
/// the manifest no longer names goes.
const WHOLE_VALUES: &[&str] = &["labels", "provisionerParameters"];

/// Whether field `key`'s `want` is found in `have`: see [`within`], but for [`WHOLE_VALUES`], which must be equal.
fn holds(key: &str, want: &Value, have: &Value) -> bool {
    if WHOLE_VALUES.contains(&key) {
        want == have
    } else {
        within(want, have)
    }
}

/// Whether `want` is found in `have`: every field of an object (recursively), every element of a list in order.
fn within(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(want), Value::Object(have)) => want
            .iter()
            .all(|(key, value)| have.get(key).is_some_and(|there| holds(key, value, there))),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| within(w, h))
        }
        _ => want == have,
    }
}

/// The fields of `written` (the manifest's keys, as the canonical JSON `desired` of the request has them) that
/// `current` does not already hold, among `allowed`; a differing field outside `allowed` is an error.
fn changed_fields(
    name: &str,
    written: &Value,
    desired: &Value,
    current: &Value,
    allowed: &[&str],
    ignored: &[&str],
) -> Result<Map<String, Value>, CtlError> {
    let mut changed = Map::new();
    for key in written
        .as_object()
        .map(|o| o.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if ignored.contains(&key.as_str()) {
            continue;
        }
        // A field written at its default is left to the service: canonical JSON leaves it out.
        let Some(want) = desired.get(&key) else { continue };
        let have = current.get(&key).unwrap_or(&Value::Null);
        if holds(&key, want, have) {
            continue;
        }
        if !allowed.contains(&key.as_str()) {
            return Err(CtlError::Manifest(format!(
                "{name}: {key} cannot change once created ({have} → {want}); delete it and apply again"
            )));
        }
        let value = if WHOLE_VALUES.contains(&key.as_str()) {
            want.clone()
        } else {
            overlaid(want, have)
        };
        changed.insert(key, value);
    }
    Ok(changed)
}

/// `want` laid over `have`: a message field by field, so that what a manifest leaves out of a message (which an
/// update replaces whole) stays as it is, as the plan compared it; anything else, and [`WHOLE_VALUES`], whole.
fn overlaid(want: &Value, have: &Value) -> Value {
    match (want, have) {
        (Value::Object(want), Value::Object(have)) => {
            let mut out = have.clone();
            for (key, value) in want {
                let laid = match have.get(key) {
                    Some(there) if !WHOLE_VALUES.contains(&key.as_str()) => overlaid(value, there),
                    _ => value.clone(),
                };
                out.insert(key.clone(), laid);
            }
            Value::Object(out)
        }
        _ => want.clone(),
    }
}

/// Where `want` differs from `have`, as `path: before → after`, down to the fields of messages.
fn differences(path: &str, want: &Value, have: &Value, out: &mut Vec<String>) {
    let field = path.rsplit('.').next().unwrap_or(path);
    match (want, have) {
        (Value::Object(want), Value::Object(have)) if !WHOLE_VALUES.contains(&field) => {
            for (key, value) in want {
                differences(
                    &format!("{path}.{key}"),
                    value,
                    have.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        _ if want != have => out.push(format!("{path}: {have} → {want}")),
        _ => {}
    }
}

/// `changed` as the summary line of a plan: each field that changes with its value before and after.
fn summary(changed: &Map<String, Value>, current: &Value) -> String {
    let mut out = Vec::new();
    for (key, want) in changed {
        differences(key, want, current.get(key).unwrap_or(&Value::Null), &mut out);
    }
    out.join("; ")
}

/// A message from JSON built here (never a person's typo): a failure is a bug of berthctl, said as such.
fn built<M: prost::Message + prost::Name + Default>(json: &Value) -> Result<M, CtlError> {
    let bytes = serde_json::to_vec(json).map_err(|err| CtlError::Config(err.to_string()))?;
    berth_proto::json::from_json_strict(&bytes)
        .map_err(|err| CtlError::Config(format!("berthctl built a bad request: {err}")))
}

/// Clients of the services `apply` speaks to.
struct Clients {
    fleets: FleetServiceClient<AuthedChannel>,
    policies: ScalingServiceClient<AuthedChannel>,
    queues: QueueServiceClient<AuthedChannel>,
}

/// Applies the manifests as `apply` says, printing the plan and each change made.
pub async fn apply(ctx: &Context, apply: Apply) -> Result<(), CtlError> {
    let declared = manifest::read(&apply.files)?;
    let fleet_channel = ctx.channel(Service::Fleet).await?;
    let mut clients = Clients {
        fleets: FleetServiceClient::new(fleet_channel.clone()),
        policies: ScalingServiceClient::new(fleet_channel),
        queues: QueueServiceClient::new(ctx.channel(Service::Placement).await?),
    };
    let steps = plan(ctx, &mut clients, &declared, apply.prune).await?;
    if steps.is_empty() {
        println!(
            "no changes: the {} records the files declare are as declared",
            declared.len()
        );
        return Ok(());
    }
    if apply.dry_run {
        for step in &steps {
            println!("{}", step.says);
        }
        println!("dry run: {} changes planned, none made", steps.len());
        return Ok(());
    }
    let total = steps.len();
    for (done, step) in steps.into_iter().enumerate() {
        if let Err(err) = run(ctx, &mut clients, step.action).await {
            return Err(CtlError::Partial(format!(
                "{done} of {total} changes made; failed at {}: {err}; the rest were not made",
                step.says
            )));
        }
        println!("{}", step.says);
    }
    Ok(())
}

/// The changes that make the records as `declared`.
async fn plan(ctx: &Context, clients: &mut Clients, declared: &[Declared], prune: bool) -> Result<Vec<Step>, CtlError> {
    let mut fleet_steps = Vec::new();
    let mut queue_steps = Vec::new();
    for one in declared {
        match one {
            Declared::Fleet {
                fleet,
                written,
                policies,
            } => fleet_steps.extend(plan_fleet(ctx, clients, fleet, written, policies).await?),
            Declared::Queue { queue, written } => queue_steps.extend(plan_queue(ctx, clients, queue, written).await?),
        }
    }
    let mut steps = fleet_steps;
    steps.extend(queue_steps);
    if prune {
        steps.extend(plan_prune(ctx, clients, declared).await?);
    }
    Ok(steps)
}

async fn plan_fleet(
    ctx: &Context,
    clients: &mut Clients,
    desired: &fleet::CreateFleetRequest,
    written: &Value,
    policies: &[(fleet::PutScalingPolicyRequest, Value)],
) -> Result<Vec<Step>, CtlError> {
    let name = format!("fleet/{}", desired.fleet_id);
    let request = fleet::DescribeFleetRequest {
        fleet_id: desired.fleet_id.clone(),
    };
    let current = match clients.fleets.describe_fleet(request).await {
        Ok(answer) => answer.into_inner().fleet,
        Err(status) if status.code() == tonic::Code::NotFound => None,
        Err(status) => return Err(ctx.refusal(Service::Fleet)(status)),
    };
    let Some(current) = current else {
        let mut steps = vec![Step {
            says: format!("{name} created"),
            action: Action::CreateFleet(desired.clone()),
        }];
        steps.extend(policies.iter().map(|(policy, _)| Step {
            says: format!("{name}: scaling policy {} created", policy.name),
            action: Action::PutPolicy(policy.clone()),
        }));
        return Ok(steps);
    };
    let mut steps = Vec::new();
    let (desired_json, current_json) = (json_of(desired)?, json_of(&current)?);
    let ignored = ["fleetId", "locations", "scalingPolicies"];
    let changed = changed_fields(&name, written, &desired_json, &current_json, FLEET_UPDATABLE, &ignored)?;
    if !changed.is_empty() {
        let says = format!("{name} updated: {}", summary(&changed, &current_json));
        let mut update = Map::new();
        update.insert("fleetId".into(), Value::String(desired.fleet_id.clone()));
        update.insert("expectedRevision".into(), Value::String(current.revision.to_string()));
        for (key, value) in changed {
            let value = match key.as_str() {
                "instanceDefinitions" | "labels" => Value::Object(Map::from_iter([(key.clone(), value)])),
                _ => value,
            };
            update.insert(key, value);
        }
        steps.push(Step {
            says,
            action: Action::UpdateFleet(built(&Value::Object(update))?),
        });
    }
    steps.extend(plan_locations(&name, desired, &current));
    steps.extend(plan_policies(ctx, clients, &name, desired, policies).await?);
    Ok(steps)
}

/// Locations added, removed, and their capacity and standby where the manifest gives them.
fn plan_locations(name: &str, desired: &fleet::CreateFleetRequest, current: &fleet::Fleet) -> Vec<Step> {
    let mut steps = Vec::new();
    for wanted in &desired.locations {
        let Some(there) = current.locations.iter().find(|l| l.location == wanted.location) else {
            steps.push(Step {
                says: format!("{name}: location {} added", wanted.location),
                action: Action::CreateLocations(fleet::CreateFleetLocationsRequest {
                    fleet_id: desired.fleet_id.clone(),
                    locations: vec![wanted.clone()],
                }),
            });
            continue;
        };
        if let Some(capacity) = wanted.capacity
            && Some(capacity) != there.capacity
        {
            let had = there.capacity.unwrap_or_default();
            steps.push(Step {
                says: format!(
                    "{name}: location {} capacity min/desired/max {}/{}/{} → {}/{}/{}",
                    wanted.location,
                    had.minimum_instances,
                    had.desired_instances,
                    had.maximum_instances,
                    capacity.minimum_instances,
                    capacity.desired_instances,
                    capacity.maximum_instances
                ),
                action: Action::UpdateCapacity(fleet::UpdateFleetCapacityRequest {
                    fleet_id: desired.fleet_id.clone(),
                    location: wanted.location.clone(),
                    minimum_instances: Some(capacity.minimum_instances),
                    maximum_instances: Some(capacity.maximum_instances),
                    desired_instances: Some(capacity.desired_instances),
                }),
            });
        }
        if let Some(standby) = &wanted.standby
            && Some(standby) != there.standby.as_ref()
        {
            steps.push(Step {
                says: format!("{name}: location {} standby changed", wanted.location),
                action: Action::UpdateStandby(fleet::UpdateFleetStandbyRequest {
                    fleet_id: desired.fleet_id.clone(),
                    location: wanted.location.clone(),
                    standby: Some(standby.clone()),
                }),
            });
        }
    }
    let gone: Vec<String> = current
        .locations
        .iter()
        .filter(|there| !desired.locations.iter().any(|l| l.location == there.location))
        .map(|there| there.location.clone())
        .collect();
    if !gone.is_empty() {
        steps.push(Step {
            says: format!("{name}: locations {} removed", gone.join(", ")),
            action: Action::DeleteLocations(fleet::DeleteFleetLocationsRequest {
                fleet_id: desired.fleet_id.clone(),
                locations: gone,
            }),
        });
    }
    steps
}

/// Scaling policies put where missing or different, and deleted where the manifest no longer has them.
async fn plan_policies(
    ctx: &Context,
    clients: &Clients,
    name: &str,
    desired: &fleet::CreateFleetRequest,
    policies: &[(fleet::PutScalingPolicyRequest, Value)],
) -> Result<Vec<Step>, CtlError> {
    let current = lists::policies(ctx, &clients.policies, &desired.fleet_id).await?;
    let mut steps = Vec::new();
    for (policy, written) in policies {
        let there = current
            .iter()
            .find(|p| p.name == policy.name && p.location == policy.location);
        let mut put = policy.clone();
        match there {
            None => steps.push(Step {
                says: format!("{name}: scaling policy {} created", policy.name),
                action: Action::PutPolicy(put),
            }),
            Some(there) => {
                let ignored = ["fleetId", "name", "location"];
                let allowed: Vec<&str> = written
                    .as_object()
                    .map(|o| o.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                let there_json = json_of(there)?;
                let changed = changed_fields(name, written, &json_of(policy)?, &there_json, &allowed, &ignored)?;
                if !changed.is_empty() {
                    put.expected_revision = Some(there.revision);
                    steps.push(Step {
                        says: format!(
                            "{name}: scaling policy {} updated: {}",
                            policy.name,
                            summary(&changed, &there_json)
                        ),
                        action: Action::PutPolicy(put),
                    });
                }
            }
        }
    }
    for there in &current {
        if !policies
            .iter()
            .any(|(p, _)| p.name == there.name && p.location == there.location)
        {
            steps.push(Step {
                says: format!("{name}: scaling policy {} deleted", there.name),
                action: Action::DeletePolicy(fleet::DeleteScalingPolicyRequest {
                    fleet_id: desired.fleet_id.clone(),
                    name: there.name.clone(),
                    expected_revision: there.revision,
                }),
            });
        }
    }
    Ok(steps)
}

async fn plan_queue(
    ctx: &Context,
    clients: &mut Clients,
    desired: &placement::CreateQueueRequest,
    written: &Value,
) -> Result<Vec<Step>, CtlError> {
    let name = format!("queue/{}", desired.name);
    let request = placement::DescribeQueueRequest {
        name: desired.name.clone(),
    };
    let current = match clients.queues.describe_queue(request).await {
        Ok(answer) => answer.into_inner().queue,
        Err(status) if status.code() == tonic::Code::NotFound => None,
        Err(status) => return Err(ctx.refusal(Service::Placement)(status)),
    };
    let Some(current) = current else {
        return Ok(vec![Step {
            says: format!("{name} created"),
            action: Action::CreateQueue(desired.clone()),
        }]);
    };
    let current_json = json_of(&current)?;
    let changed = changed_fields(
        &name,
        written,
        &json_of(desired)?,
        &current_json,
        QUEUE_UPDATABLE,
        &["name"],
    )?;
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let says = format!("{name} updated: {}", summary(&changed, &current_json));
    let mut update = Map::new();
    update.insert("name".into(), Value::String(desired.name.clone()));
    update.insert("expectedRevision".into(), Value::String(current.revision.to_string()));
    for (key, value) in changed {
        let value = match key.as_str() {
            "destinations" => Value::Object(Map::from_iter([("destinations".into(), value)])),
            "playerLatencyPolicies" => Value::Object(Map::from_iter([("policies".into(), value)])),
            _ => value,
        };
        update.insert(key, value);
    }
    Ok(vec![Step {
        says,
        action: Action::UpdateQueue(built(&Value::Object(update))?),
    }])
}

/// Deletes of the queues and then the fleets that no manifest names.
async fn plan_prune(ctx: &Context, clients: &Clients, declared: &[Declared]) -> Result<Vec<Step>, CtlError> {
    let named: BTreeSet<String> = declared.iter().map(Declared::name).collect();
    let queues = lists::queues(ctx, &clients.queues).await?;
    let fleets = lists::fleets(ctx, &clients.fleets).await?;
    let queue_steps = queues
        .into_iter()
        .filter(|queue| !named.contains(&format!("queue/{}", queue.name)))
        .map(|queue| Step {
            says: format!("queue/{} deleted (pruned)", queue.name),
            action: Action::DeleteQueue(placement::DeleteQueueRequest {
                name: queue.name,
                force: false,
                expected_revision: queue.revision,
            }),
        });
    let fleet_steps = fleets
        .into_iter()
        .filter(|found| !named.contains(&format!("fleet/{}", found.fleet_id)))
        .map(|found| Step {
            says: format!("fleet/{} deleted (pruned)", found.fleet_id),
            action: Action::DeleteFleet(fleet::DeleteFleetRequest {
                fleet_id: found.fleet_id,
                force: false,
                expected_revision: found.revision,
            }),
        });
    Ok(queue_steps.chain(fleet_steps).collect())
}

/// Makes one change.
async fn run(ctx: &Context, clients: &mut Clients, action: Action) -> Result<(), CtlError> {
    let fleet_refused = ctx.refusal(Service::Fleet);
    let queue_refused = ctx.refusal(Service::Placement);
    match action {
        Action::CreateFleet(request) => clients
            .fleets
            .create_fleet(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::UpdateFleet(request) => clients
            .fleets
            .update_fleet(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::CreateLocations(request) => clients
            .fleets
            .create_fleet_locations(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::DeleteLocations(request) => clients
            .fleets
            .delete_fleet_locations(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::UpdateCapacity(request) => clients
            .fleets
            .update_fleet_capacity(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::UpdateStandby(request) => clients
            .fleets
            .update_fleet_standby(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::PutPolicy(request) => clients
            .policies
            .put_scaling_policy(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::DeletePolicy(request) => clients
            .policies
            .delete_scaling_policy(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::DeleteFleet(request) => clients
            .fleets
            .delete_fleet(request)
            .await
            .map(drop)
            .map_err(fleet_refused),
        Action::CreateQueue(request) => clients
            .queues
            .create_queue(request)
            .await
            .map(drop)
            .map_err(queue_refused),
        Action::UpdateQueue(request) => clients
            .queues
            .update_queue(request)
            .await
            .map(drop)
            .map_err(queue_refused),
        Action::DeleteQueue(request) => clients
            .queues
            .delete_queue(request)
            .await
            .map(drop)
            .map_err(queue_refused),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_a_manifest_leaves_out_is_not_a_change() {
        let have =
            json!({"processTimeouts": {"heartbeatIntervalMs": 1000, "registerTimeoutSeconds": 300}, "n": [1, 2]});
        assert!(within(
            &json!({"processTimeouts": {"heartbeatIntervalMs": 1000}}),
            &have
        ));
        assert!(!within(
            &json!({"processTimeouts": {"heartbeatIntervalMs": 2000}}),
            &have
        ));
        assert!(!within(&json!({"n": [1]}), &have), "a list is compared whole");
    }

    #[test]
    fn a_message_keeps_what_the_manifest_leaves_out_and_a_value_is_replaced_whole() {
        let have = json!({"processTimeouts": {"heartbeatIntervalMs": 1000, "exitTimeoutSeconds": 60},
            "labels": {"team": "a", "old": "x"}});
        let want = json!({"processTimeouts": {"heartbeatIntervalMs": 2000}, "labels": {"team": "a"}});
        let changed = changed_fields("fleet/f", &want, &want, &have, FLEET_UPDATABLE, &[]).unwrap();
        assert_eq!(
            changed["processTimeouts"],
            json!({"heartbeatIntervalMs": 2000, "exitTimeoutSeconds": 60})
        );
        assert_eq!(
            changed["labels"],
            json!({"team": "a"}),
            "a label the manifest dropped goes"
        );
        assert_eq!(
            summary(&changed, &have),
            r#"labels: {"old":"x","team":"a"} → {"team":"a"}; processTimeouts.heartbeatIntervalMs: 1000 → 2000"#
        );
        let same = json!({"labels": {"team": "a", "old": "x"}});
        assert!(
            changed_fields("fleet/f", &same, &same, &have, FLEET_UPDATABLE, &[])
                .unwrap()
                .is_empty()
        );
    }
}
