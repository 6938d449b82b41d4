//! Autoscaling of one fleet location, run by the replica that holds the location's lease, at the start of each of
//! its passes (every BERTH_RECONCILE_MS): the policies that are due are evaluated — at their interval, when their
//! window turns, or at once on a demand signal (placements waiting for a server here, the standby pool or a buffer
//! used below its target, servers lost) — and the largest standing proposal decides the desired count
//! (`berth_domain::scaling::pass`). What it evaluated and decided is written in one script under the lease, so that
//! two replicas never both act for a location and one that stalled past its lease writes nothing.

mod webhook;

use std::collections::HashMap;
use std::sync::Arc;

use berth_domain::fleet::{FleetRecord, LocationRecord};
use berth_domain::game_server::timestamp;
use berth_domain::scaling::pass::{self as scaling, LocationState};
use berth_domain::scaling::policy::{PolicyState, webhook_in_force};
use berth_domain::scaling::{Capacity, Inputs};
use berth_domain::stored::{FleetStatus, LocationStatus};
use berth_proto::fleet::v1 as pb;
use berth_store::instances::{Acted, Leased};
use berth_store::scaling::{self as store, Pass};
use berth_store::utilization::{UtilizationRead, read_utilization};
use berth_store::{Store, StoreError};

use berth_domain::fleet::utilization::location_utilization;
use webhook::Webhooks;

/// The autoscaler of the locations this replica holds.
pub(crate) struct Autoscaler {
    store: Store,
    webhooks: Arc<Webhooks>,
}

/// What a pass came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scaled {
    /// The desired count the location's instances are to follow now.
    Desired(u32),
    /// The lease was lost: the pass changed nothing.
    Fenced,
}

impl Autoscaler {
    pub(crate) fn new(store: Store) -> Autoscaler {
        Autoscaler {
            store,
            webhooks: Arc::default(),
        }
    }

    /// One pass over `location` of `fleet`, under `leased`.
    pub(crate) async fn pass(
        &self,
        fleet: &FleetRecord,
        location: &LocationRecord,
        leased: &Leased<'_>,
    ) -> Result<Scaled, StoreError> {
        let desired = location.capacity.desired_instances;
        let off = location.autoscaling_suspended
            || matches!(
                fleet.status,
                FleetStatus::Deleting | FleetStatus::Terminated | FleetStatus::Error
            )
            || location.status == LocationStatus::Deleting;
        if off {
            return Ok(Scaled::Desired(desired));
        }
        let (fleet_id, name) = (leased.fleet_id, leased.location);
        let Some(read) = store::read_policies(&self.store, fleet_id, name).await? else {
            return Ok(Scaled::Desired(desired));
        };
        let applying: Vec<_> = read
            .policies
            .iter()
            .filter(|stored| stored.policy.location.is_empty() || stored.policy.location == name)
            .collect();
        if applying.is_empty() && location.standby.is_none() && read.location == LocationState::default() {
            return Ok(Scaled::Desired(desired));
        }
        let UtilizationRead::Read(counts) = read_utilization(&self.store, fleet_id, name).await? else {
            return Ok(Scaled::Desired(desired));
        };
        let Some((_, tally)) = counts.locations.first() else {
            return Ok(Scaled::Desired(desired));
        };
        let utilization = location_utilization(name, tally, counts.now_ms);
        let now = counts.now_ms as i64;
        let capacity = Capacity {
            minimum: location.capacity.minimum_instances,
            maximum: location.capacity.maximum_instances,
            desired,
        };
        let inputs = Inputs {
            now_ms: now,
            utilization: &utilization,
            capacity,
            servers_per_instance: fleet.config.server_processes_per_instance.max(1),
        };
        let policies: Vec<(&pb::ScalingPolicy, PolicyState)> = applying
            .iter()
            .map(|stored| {
                let state = stored.evaluations.iter().find(|(at, _)| at == name);
                (&stored.policy, state.map(|(_, s)| s.clone()).unwrap_or_default())
            })
            .collect();
        let at = scaling::Location {
            policies: &policies,
            standby: location.standby.as_ref(),
            state: &read.location,
            lost: tally.lost,
        };
        let mut due = scaling::due(&at, &inputs);
        // A policy whose webhook has not answered yet waits for a later pass, as it stands.
        let mut answers = HashMap::new();
        due.retain(|&index| {
            let policy = policies[index].0;
            let Some(hook) = webhook_in_force(policy, now) else {
                return true;
            };
            let asking = (
                fleet_id.to_owned(),
                name.to_owned(),
                policy.name.clone(),
                policy.revision,
            );
            match self.webhooks.answer(asking, hook, review(fleet, policy, &inputs)) {
                Some(answer) => {
                    answers.insert(index, answer);
                    true
                }
                None => false,
            }
        });
        let passed = scaling::pass(&at, &inputs, &due, |index| answers.remove(&index));
        for (index, state, _) in &passed.evaluated {
            if state.failed {
                tracing::warn!(fleet = %fleet_id, location = %name, policy = %policies[*index].0.name,
                    reason = %state.message, "scaling policy failed");
            }
        }
        let (decision, standby, state) = (passed.decision.as_ref(), &passed.standby, &passed.state);
        let change = decision.filter(|d| d.desired != desired);
        if passed.evaluated.is_empty() && change.is_none() && *state == read.location {
            return Ok(Scaled::Desired(desired));
        }
        let (winner, message) = match change {
            Some(d) => (
                d.winner.0.as_str(),
                format!(
                    "{} proposed {} → desired {desired} → {} ({})",
                    d.winner.0,
                    d.winner.1,
                    d.desired,
                    inputs_read(&inputs, standby.target)
                ),
            ),
            None => ("", String::new()),
        };
        let pass = Pass {
            decided_from: desired,
            desired: change.map(|d| d.desired),
            winner,
            message: &message,
            state,
            standby_target: standby.target,
            evaluated: passed
                .evaluated
                .iter()
                .map(|(index, state, news)| {
                    let policy = policies[*index].0;
                    (
                        policy.name.as_str(),
                        policy.revision,
                        state,
                        news.then_some(state.message.as_str()),
                    )
                })
                .collect(),
        };
        Ok(match store::record_pass(&self.store, leased, &pass).await? {
            Acted::Done(true) => {
                let scaled = change.map_or(desired, |d| d.desired);
                tracing::info!(fleet = %fleet_id, location = %name, %message, "scaled");
                metrics::counter!("berth_scaling_actions_total",
                    "direction" => if scaled > desired { "out" } else { "in" })
                .increment(1);
                Scaled::Desired(scaled)
            }
            Acted::Done(false) | Acted::Gone => Scaled::Desired(desired),
            Acted::Fenced => Scaled::Fenced,
        })
    }
}

/// What a webhook is asked.
fn review(fleet: &FleetRecord, policy: &pb::ScalingPolicy, inputs: &Inputs<'_>) -> pb::ScalingWebhookReview {
    pb::ScalingWebhookReview {
        review_id: uuid::Uuid::now_v7().to_string(),
        fleet_id: fleet.config.fleet_id.clone(),
        location: inputs.utilization.location.clone(),
        policy_name: policy.name.clone(),
        review_time: Some(timestamp(inputs.now_ms)),
        server_processes_per_instance: inputs.servers_per_instance,
        capacity: Some(pb::FleetCapacity {
            minimum_instances: inputs.capacity.minimum,
            maximum_instances: inputs.capacity.maximum,
            desired_instances: inputs.capacity.desired,
        }),
        utilization: Some(inputs.utilization.clone()),
    }
}

/// The inputs a decision read, for its event.
fn inputs_read(inputs: &Inputs<'_>, standby_target: u32) -> String {
    let u = inputs.utilization;
    let servers = u.game_server_counts.unwrap_or_default();
    format!(
        "busy servers {}, available servers {}, placements waiting {}, sessions activating {} and active {}, \
         standby target {standby_target}, {} servers per instance",
        inputs.busy_servers(),
        servers.available + servers.draining_available,
        u.queue_depth,
        u.activating_game_sessions,
        u.active_game_sessions,
        inputs.servers_per_instance
    )
}
