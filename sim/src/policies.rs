//! The contenders a run compares, and the autoscaler that drives each one's simulated location through the same
//! pass the fleet service runs (`berth_domain::scaling::pass`).

use berth_domain::scaling::pass::{self, Location, LocationState};
use berth_domain::scaling::policy::PolicyState;
use berth_domain::scaling::{Capacity, Inputs};
use berth_proto::fleet::v1 as pb;
use pb::scaling_policy::Kind;

/// A way to scale: scaling policies, a standby rule, or both.
#[derive(Clone, Debug)]
pub struct Contender {
    pub name: &'static str,
    pub policies: Vec<pb::ScalingPolicy>,
    pub standby: Option<pb::StandbyConfiguration>,
}

fn policy(name: &str, interval_s: u32, kind: Kind) -> pb::ScalingPolicy {
    pb::ScalingPolicy {
        name: name.into(),
        evaluation_interval_seconds: interval_s,
        scale_in_stabilization_seconds: 300,
        kind: Some(kind),
        ..Default::default()
    }
}

fn rule(
    metric: pb::ScalingMetric,
    comparison: pb::ComparisonOperator,
    threshold: f64,
    percent: i32,
    cooldown_s: u32,
) -> Kind {
    Kind::RuleBased(pb::RuleBasedPolicy {
        metric: metric.into(),
        comparison_operator: comparison.into(),
        threshold,
        evaluation_periods: 1,
        adjustment_type: pb::AdjustmentType::PercentChangeInCapacity.into(),
        scaling_adjustment: percent,
        cooldown_seconds: Some(cooldown_s),
    })
}

/// The contenders of a run: a buffer, GameLift's target tracking, rule-based steps, and a dynamic standby pool
/// sized by PlayFab's rule (start-up time × allocation rate at the peak).
pub fn contenders(standby_servers: u32) -> Vec<Contender> {
    let buffer = Kind::Buffer(pb::BufferPolicy {
        idle_threshold_percent: 20,
        minimum_idle_servers: 8,
        persistent_idle: true,
        maximum_running_servers: 0,
    });
    let target = Kind::TargetTracking(pb::TargetTrackingPolicy {
        metric: pb::TargetTrackingMetric::PercentAvailableGameSessions.into(),
        target_percent: 20,
    });
    use pb::ComparisonOperator as C;
    use pb::ScalingMetric as M;
    vec![
        Contender {
            name: "buffer",
            policies: vec![policy("buffer", 30, buffer)],
            standby: None,
        },
        Contender {
            name: "target-tracking",
            policies: vec![policy("target", 60, target)],
            standby: None,
        },
        Contender {
            name: "rule-based",
            policies: vec![
                policy(
                    "out",
                    60,
                    rule(M::PercentAvailableGameSessions, C::LessThan, 10.0, 25, 120),
                ),
                policy("in", 60, rule(M::PercentIdleInstances, C::GreaterThan, 40.0, -10, 300)),
            ],
            standby: None,
        },
        Contender {
            name: "dynamic-standby",
            policies: Vec::new(),
            standby: Some(pb::StandbyConfiguration {
                standby_servers,
                dynamic_standby: Some(pb::DynamicStandby {
                    enabled: true,
                    ..Default::default()
                }),
                scheduled_windows: Vec::new(),
            }),
        },
    ]
}

/// A contender's autoscaler: its policies' states and its location's, from one pass to the next.
pub struct Autoscaler<'a> {
    contender: &'a Contender,
    states: Vec<PolicyState>,
    location: LocationState,
}

impl<'a> Autoscaler<'a> {
    pub fn new(contender: &'a Contender) -> Autoscaler<'a> {
        Autoscaler {
            contender,
            states: vec![PolicyState::default(); contender.policies.len()],
            location: LocationState::default(),
        }
    }

    /// One pass: the desired count it decides from `utilization` and the current `capacity`.
    pub fn pass(
        &mut self,
        utilization: &pb::LocationUtilization,
        capacity: Capacity,
        servers_per_instance: u32,
        now_ms: i64,
    ) -> u32 {
        let inputs = Inputs {
            now_ms,
            utilization,
            capacity,
            servers_per_instance,
        };
        let policies: Vec<(&pb::ScalingPolicy, PolicyState)> = self
            .contender
            .policies
            .iter()
            .zip(&self.states)
            .map(|(policy, state)| (policy, state.clone()))
            .collect();
        let at = Location {
            policies: &policies,
            standby: self.contender.standby.as_ref(),
            state: &self.location,
            lost: 0,
        };
        let due = pass::due(&at, &inputs);
        let passed = pass::pass(&at, &inputs, &due, |_| None);
        let change = passed
            .change(capacity.desired)
            .map(|change| (change.desired, change.winner.0.clone()));
        for (index, state, _) in passed.evaluated {
            self.states[index] = state;
        }
        self.location = passed.state;
        let Some((desired, winner)) = change else {
            return capacity.desired;
        };
        // As the fleet service's script records when a proposal won and changed the count (the cool-down's start).
        if let Some(winner) = self.contender.policies.iter().position(|p| p.name == winner) {
            self.states[winner].acted_ms = Some(now_ms);
        }
        desired
    }
}
