//! One autoscaling pass of a location, as the fleet service and the policy simulator both run it: which policies are
//! due (a demand signal — placements waiting, a buffer or the standby pool used below its target, servers lost —
//! makes every one due), their evaluations, the standby rule, and the decision from the
//! standing proposals. The caller makes the webhook calls the due policies ask for between [`due`] and [`pass`].

use berth_proto::fleet::v1 as pb;

use super::check::STABILIZATION_DEFAULT_S;
use super::decide::{Bounds, Decision, Won, decide};
use super::policy::{self, PolicyState, WebhookAnswer, buffer_short};
use super::standby::{Standby, StandbyState, standby};
use super::{Inputs, STANDBY};

/// What a location's autoscaling keeps between passes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocationState {
    /// The winning values of the stabilisation window that may still be its highest, oldest first.
    pub history: Vec<Won>,
    pub standby: StandbyState,
    /// The location's count of servers lost, as the last pass saw it.
    pub lost: u64,
}

/// A location's autoscaling as a pass finds it.
#[derive(Clone, Copy, Debug)]
pub struct Location<'a> {
    /// The policies that apply to it, each with its last evaluation here.
    pub policies: &'a [(&'a pb::ScalingPolicy, PolicyState)],
    pub standby: Option<&'a pb::StandbyConfiguration>,
    pub state: &'a LocationState,
    /// Its count of servers gone without being told to end, ever: one higher than the last pass saw is a demand
    /// signal.
    pub lost: u64,
}

/// What a pass came to.
#[derive(Clone, Debug, PartialEq)]
pub struct Passed {
    /// The policies evaluated (by their index in [`Location::policies`]), each with its new state and whether its
    /// failure is news (a SCALING_POLICY_FAILED event).
    pub evaluated: Vec<(usize, PolicyState, bool)>,
    pub standby: Standby,
    /// `None` when nothing proposed: the desired count stays.
    pub decision: Option<Decision>,
    /// The state to keep for the next pass.
    pub state: LocationState,
}

impl Passed {
    /// The decision when it changes the desired count from `desired`: the change to record, whose winner's
    /// cool-down starts with it.
    pub fn change(&self, desired: u32) -> Option<&Decision> {
        self.decision.as_ref().filter(|d| d.desired != desired)
    }
}

/// The indexes of the policies due now, for the caller to make the webhook calls those ask for.
pub fn due(location: &Location<'_>, inputs: &Inputs<'_>) -> Vec<usize> {
    let standby = standby(location.standby, inputs, &location.state.standby);
    let demand = inputs.waiting() > 0
        || standby.short
        || location.lost > location.state.lost
        || location.policies.iter().any(|(policy, _)| buffer_short(policy, inputs));
    location
        .policies
        .iter()
        .enumerate()
        .filter(|(_, (policy, state))| policy::due(policy, state, inputs.now_ms, demand))
        .map(|(at, _)| at)
        .collect()
}

/// Evaluates the policies `due` names, with the webhook answers `answer` gives for them, and decides.
pub fn pass(
    location: &Location<'_>,
    inputs: &Inputs<'_>,
    due: &[usize],
    mut answer: impl FnMut(usize) -> Option<WebhookAnswer>,
) -> Passed {
    let standby = standby(location.standby, inputs, &location.state.standby);
    let mut evaluated = Vec::new();
    let mut proposals: Vec<(String, u32)> = Vec::new();
    for (at, (policy, state)) in location.policies.iter().enumerate() {
        let standing = if due.contains(&at) {
            let next = policy::evaluate(policy, inputs, state, answer(at));
            let news = next.failed && (!state.failed || next.message != state.message);
            let proposal = next.proposal;
            evaluated.push((at, next, news));
            proposal
        } else {
            state.proposal
        };
        if let Some(proposal) = standing {
            proposals.push((policy.name.clone(), proposal));
        }
    }
    if let Some(proposal) = standby.proposal {
        proposals.push((STANDBY.to_owned(), proposal));
    }
    let stabilization_s = location
        .policies
        .iter()
        .map(|(policy, _)| policy.scale_in_stabilization_seconds)
        .max()
        .unwrap_or(STABILIZATION_DEFAULT_S);
    let instances = inputs.utilization.instance_counts.unwrap_or_default();
    let bounds = Bounds {
        minimum: inputs.capacity.minimum,
        maximum: inputs.capacity.maximum,
        desired: inputs.capacity.desired,
        busy: instances.active.saturating_sub(instances.idle),
        stabilization_ms: i64::from(stabilization_s) * 1000,
    };
    let decision = decide(&proposals, &bounds, &location.state.history, inputs.now_ms);
    let state = LocationState {
        // Without a proposal (a webhook that failed, say), the window keeps what it saw.
        history: decision
            .as_ref()
            .map_or_else(|| location.state.history.clone(), |d| d.history.clone()),
        standby: standby.state,
        lost: location.lost,
    };
    Passed {
        evaluated,
        standby,
        decision,
        state,
    }
}
