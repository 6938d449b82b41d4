//! The autoscaler's decision for one location, with no I/O: which policies are due, and what the pass comes to —
//! the evaluations to record, the location's new state, and the desired count when it changes, with the message of
//! its SCALING_ACTION event. The domain's `scaling::pass` decides, as it does for the policy simulator.

use std::collections::HashMap;

use berth_domain::fleet::{FleetRecord, LocationRecord};
use berth_domain::scaling::decide::Decision;
use berth_domain::scaling::pass::{self as scaling, LocationState, Passed};
use berth_domain::scaling::policy::{PolicyState, WebhookAnswer};
use berth_domain::scaling::{Capacity, Inputs};
use berth_domain::stored::{FleetStatus, LocationStatus};
use berth_proto::fleet::v1 as pb;

/// What an autoscaling pass read of a location.
#[derive(Clone, Debug)]
pub(crate) struct Reading {
    /// Redis' clock, ms.
    pub now_ms: i64,
    /// The policies that apply to the location, each with its last evaluation there.
    pub policies: Vec<(pb::ScalingPolicy, PolicyState)>,
    /// The location's autoscaling state as the last pass left it.
    pub state: LocationState,
    pub utilization: pb::LocationUtilization,
    /// Its count of servers lost, ever.
    pub lost: u64,
    /// The policies due now, by index; one whose webhook has not answered yet waits for a later pass.
    pub due: Vec<usize>,
    /// The answers of the due webhook policies, by index.
    pub answers: HashMap<usize, WebhookAnswer>,
}

impl Reading {
    /// The inputs its policies read.
    pub(crate) fn inputs(&self, fleet: &FleetRecord, location: &LocationRecord) -> Inputs<'_> {
        Inputs {
            now_ms: self.now_ms,
            utilization: &self.utilization,
            capacity: Capacity {
                minimum: location.capacity.minimum_instances,
                maximum: location.capacity.maximum_instances,
                desired: location.capacity.desired_instances,
            },
            servers_per_instance: fleet.config.server_processes_per_instance.max(1),
        }
    }

    /// Its policies as the domain's pass takes them.
    pub(crate) fn standing(&self) -> Vec<(&pb::ScalingPolicy, PolicyState)> {
        self.policies
            .iter()
            .map(|(policy, state)| (policy, state.clone()))
            .collect()
    }
}

/// Whether autoscaling is off in a location: suspended there, or its fleet or itself going or gone.
pub(crate) fn off(fleet: &FleetRecord, location: &LocationRecord) -> bool {
    location.autoscaling_suspended
        || matches!(
            fleet.status,
            FleetStatus::Deleting | FleetStatus::Terminated | FleetStatus::Error
        )
        || location.status == LocationStatus::Deleting
}

/// The indexes of the policies due now, before their webhooks are asked.
pub(crate) fn due(fleet: &FleetRecord, location: &LocationRecord, reading: &Reading) -> Vec<usize> {
    let policies = reading.standing();
    scaling::due(&at(location, reading, &policies), &reading.inputs(fleet, location))
}

/// The location as the domain's pass takes it.
fn at<'a>(
    location: &'a LocationRecord,
    reading: &'a Reading,
    policies: &'a [(&'a pb::ScalingPolicy, PolicyState)],
) -> scaling::Location<'a> {
    scaling::Location {
        policies,
        standby: location.standby.as_ref(),
        state: &reading.state,
        lost: reading.lost,
    }
}

/// What a pass decided, to record under the lease.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Decided {
    /// The desired count it decided from.
    pub from: u32,
    pub passed: Passed,
    /// The event message of its change: what won, and the inputs it read; empty without a change.
    pub message: String,
}

impl Decided {
    /// Its change of the desired count, if any.
    pub(crate) fn change(&self) -> Option<&Decision> {
        self.passed.change(self.from)
    }

    /// The desired count once it is recorded.
    pub(crate) fn desired(&self) -> u32 {
        self.change().map_or(self.from, |d| d.desired)
    }
}

/// The pass of a location from what was read; `None` when it has nothing to record (nothing evaluated, no change,
/// the state as it was).
pub(crate) fn decide(fleet: &FleetRecord, location: &LocationRecord, reading: &Reading) -> Option<Decided> {
    let inputs = reading.inputs(fleet, location);
    let policies = reading.standing();
    let answer = |index| reading.answers.get(&index).cloned();
    let passed = scaling::pass(&at(location, reading, &policies), &inputs, &reading.due, answer);
    let from = inputs.capacity.desired;
    let message = passed.change(from).map_or_else(String::new, |d| {
        format!(
            "{} proposed {} → desired {from} → {} ({})",
            d.winner.0,
            d.winner.1,
            d.desired,
            inputs_read(&inputs, passed.standby.target)
        )
    });
    let news = !passed.evaluated.is_empty() || passed.change(from).is_some() || passed.state != reading.state;
    news.then_some(Decided { from, passed, message })
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
