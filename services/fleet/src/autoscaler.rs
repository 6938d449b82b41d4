//! Autoscaling of one fleet location, run by the replica that holds the location's lease, as part of each of its
//! reconcile passes (every BERTH_RECONCILE_MS): the policies that are due are evaluated — at their interval, when
//! their window turns, or at once on a demand signal (placements waiting for a server here, the standby pool or a
//! buffer used below its target, servers lost) — and the largest standing proposal decides the desired count. A
//! pass reads here ([`Autoscaler::read`]: the policies, the location's live counts, and the answers of the due
//! webhook policies), decides in [`decide`] with no I/O, and records here ([`Autoscaler::record`]) what it
//! evaluated and decided, in one script under the lease, so that two replicas never both act for a location and
//! one that stalled past its lease writes nothing.

mod decide;
mod webhook;

use std::collections::HashMap;
use std::sync::Arc;

use berth_domain::fleet::utilization::location_utilization;
use berth_domain::fleet::{FleetRecord, LocationRecord};
use berth_domain::game_server::timestamp;
use berth_domain::scaling::Inputs;
use berth_domain::scaling::pass::LocationState;
use berth_domain::scaling::policy::webhook_in_force;
use berth_proto::fleet::v1 as pb;
use berth_store::instances::{Acted, Leased};
use berth_store::scaling::{self as store, Pass};
use berth_store::utilization::{UtilizationRead, read_utilization};
use berth_store::{Store, StoreError};

pub(crate) use decide::{Decided, Reading, decide};
use webhook::Webhooks;

/// The autoscaler of the locations this replica holds.
pub(crate) struct Autoscaler {
    store: Store,
    webhooks: Arc<Webhooks>,
}

/// What recording a pass came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scaled {
    /// The pass's change of the desired count was recorded: the instances follow it.
    Applied,
    /// No change was recorded (none was decided, or an operator's change came first): the instances follow the
    /// desired count as it stood.
    Kept,
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

    /// What a pass over `location` of `fleet` decides from; `None` when autoscaling is off there or has nothing to
    /// evaluate. Asks the webhooks of the due policies that ask them, and leaves those not answered yet for a later
    /// pass.
    pub(crate) async fn read(
        &self,
        fleet: &FleetRecord,
        location: &LocationRecord,
    ) -> Result<Option<Reading>, StoreError> {
        if decide::off(fleet, location) {
            return Ok(None);
        }
        let (fleet_id, name) = (fleet.config.fleet_id.as_str(), location.location.as_str());
        let Some(read) = store::read_policies(&self.store, fleet_id, name).await? else {
            return Ok(None);
        };
        let policies: Vec<_> = read
            .policies
            .into_iter()
            .filter(|stored| stored.policy.location.is_empty() || stored.policy.location == name)
            .map(|stored| {
                let state = stored.evaluations.into_iter().find(|(at, _)| at == name);
                (stored.policy, state.map(|(_, s)| s).unwrap_or_default())
            })
            .collect();
        if policies.is_empty() && location.standby.is_none() && read.location == LocationState::default() {
            return Ok(None);
        }
        let UtilizationRead::Read(counts) = read_utilization(&self.store, fleet_id, name).await? else {
            return Ok(None);
        };
        let Some((_, tally)) = counts.locations.first() else {
            return Ok(None);
        };
        let mut reading = Reading {
            now_ms: counts.now_ms as i64,
            policies,
            state: read.location,
            utilization: location_utilization(name, tally, counts.now_ms),
            lost: tally.lost,
            due: Vec::new(),
            answers: HashMap::new(),
        };
        let mut due = decide::due(fleet, location, &reading);
        let inputs = reading.inputs(fleet, location);
        let mut answers = HashMap::new();
        due.retain(|&index| {
            let policy = &reading.policies[index].0;
            let Some(hook) = webhook_in_force(policy, reading.now_ms) else {
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
        (reading.due, reading.answers) = (due, answers);
        Ok(Some(reading))
    }

    /// Records what a pass `decided` from `reading`, under `leased`.
    pub(crate) async fn record(
        &self,
        leased: &Leased<'_>,
        reading: &Reading,
        decided: &Decided,
    ) -> Result<Scaled, StoreError> {
        let (fleet_id, name) = (leased.fleet_id, leased.location);
        let passed = &decided.passed;
        for (index, state, _) in &passed.evaluated {
            if state.failed {
                tracing::warn!(fleet = %fleet_id, location = %name, policy = %reading.policies[*index].0.name,
                    reason = %state.message, "scaling policy failed");
            }
        }
        let change = decided.change();
        let pass = Pass {
            decided_from: decided.from,
            desired: change.map(|d| d.desired),
            winner: change.map_or("", |d| d.winner.0.as_str()),
            message: &decided.message,
            state: &passed.state,
            standby_target: passed.standby.target,
            evaluated: passed
                .evaluated
                .iter()
                .map(|(index, state, news)| {
                    let policy = &reading.policies[*index].0;
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
                let scaled = decided.desired();
                tracing::info!(fleet = %fleet_id, location = %name, message = %decided.message, "scaled");
                crate::metrics::scaling_action(fleet_id, name, scaled > decided.from);
                Scaled::Applied
            }
            Acted::Done(false) | Acted::Gone => Scaled::Kept,
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
