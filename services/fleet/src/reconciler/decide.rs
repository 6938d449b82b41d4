//! Deciding a location's pass from what was gathered, with no I/O: the autoscaler's decision, the reconcile plan
//! for the desired count it leaves (`berth_domain::fleet::reconcile::plan`), and the launch backoff that holds.

use berth_domain::fleet::reconcile::backoff::LaunchBackoff;
use berth_domain::fleet::reconcile::{
    Action, Deadlines, InstanceView, LocationView, ServerState, launch_type, not_viable, plan,
};
use berth_domain::stored::{FleetStatus, LocationStatus};
use berth_proto::fleet::v1 as pb;

use super::gather::{Instances, Survey};
use crate::autoscaler::{self, Decided};

/// What a pass decided for a location.
#[derive(Debug)]
pub(super) struct Decision {
    /// The autoscaler's pass to record, when it has anything to record.
    pub scaling: Option<Decided>,
    /// The steps that bring the instances to the count the autoscaler leaves; none without a provisioner here.
    pub plan: Vec<Action>,
    /// When the autoscaler changes the count: the steps for the count as it stands, taken instead when the change
    /// is not recorded (an operator's change came first, or recording failed), so that the instances still follow
    /// the desired count.
    pub unscaled: Option<Vec<Action>>,
    /// The launch backoff from now on, the plan's failed launches counted.
    pub backoff: LaunchBackoff,
    pub deadlines: Deadlines,
}

/// Decides a location's pass.
pub(super) fn decide(survey: &Survey<'_>) -> Decision {
    let (fleet, record) = (survey.fleet, survey.record);
    let scaling = survey
        .scaling
        .as_ref()
        .and_then(|reading| autoscaler::decide(fleet, record, reading));
    let deadlines = Deadlines::of(&fleet.config.process_timeouts.unwrap_or_default());
    let Some(instances) = &survey.instances else {
        return Decision {
            scaling,
            plan: Vec::new(),
            unscaled: None,
            backoff: survey.backoff,
            deadlines,
        };
    };
    let views = &instances.views;
    let ready = views
        .iter()
        .any(|i| i.servers.iter().any(|s| matches!(s.state, ServerState::Ready { .. })));
    let backoff = survey.backoff.standing(record.status_change_ms, ready);
    let standing = record.capacity.desired_instances;
    let desired = scaling.as_ref().map_or(standing, Decided::desired);
    let excluded = not_viable(&record.viabilities);
    let config = &fleet.config;
    let view = |desired| LocationView {
        now_ms: instances.found.now_ms,
        desired,
        status: record.status,
        first_launch_ms: instances.found.first_launch_ms,
        registered_ms: instances.found.registered_ms,
        deleting: fleet.status == FleetStatus::Deleting || record.status == LocationStatus::Deleting,
        launch_type: launch_type(config, &excluded).filter(|_| fleet.status != FleetStatus::Error),
        not_viable: &excluded,
        protect_held_servers: config.game_server_protection_policy() == pb::ProtectionPolicy::FullProtection,
        launch_after_ms: backoff.launch_after_ms(),
        deadlines,
    };
    let steps = plan(&view(desired), views);
    let unscaled = (desired != standing).then(|| plan(&view(standing), views));
    let failed = failed_launches(&steps, instances);
    let backoff = (0..failed).fold(backoff, |backoff, _| backoff.failed(instances.found.now_ms));
    Decision {
        scaling,
        plan: steps,
        unscaled,
        backoff,
        deadlines,
    }
}

/// How many instances the plan removes that ended unasked before any of their processes registered: launches that
/// failed, so that a build that cannot start is not launched again in a tight loop.
fn failed_launches(steps: &[Action], instances: &Instances) -> usize {
    let never_ran = |id: &str| {
        let view: Option<&InstanceView> = instances.views.iter().find(|i| i.id == id);
        view.is_some_and(|i| i.servers.iter().all(|s| !s.registered))
    };
    steps
        .iter()
        .filter(|step| matches!(step, Action::Remove { instance, asked: false } if never_ran(instance)))
        .count()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use berth_domain::fleet::reconcile::ServerView;
    use berth_domain::fleet::{FleetRecord, LocationRecord};
    use berth_domain::stored::InstanceState;
    use berth_store::instances::LocationInstances;

    use super::*;
    use crate::autoscaler::Reading;

    const NOW: i64 = 1_000_000_000;

    fn fleet(standby_servers: u32) -> FleetRecord {
        let location = LocationRecord {
            location: "local".into(),
            status: LocationStatus::Deployed,
            status_message: String::new(),
            status_change_ms: NOW - 60_000,
            capacity: pb::FleetCapacity {
                minimum_instances: 0,
                maximum_instances: 10,
                desired_instances: 0,
            },
            standby: Some(pb::StandbyConfiguration {
                standby_servers,
                ..Default::default()
            }),
            autoscaling_suspended: false,
            viabilities: Vec::new(),
            create_ms: NOW - 60_000,
            version: 1,
        };
        FleetRecord {
            config: pb::Fleet {
                fleet_id: "arena".into(),
                server_processes_per_instance: 1,
                instance_definitions: vec![pb::InstanceDefinition {
                    instance_type: "small".into(),
                    ..Default::default()
                }],
                process_timeouts: Some(pb::ProcessTimeouts {
                    register_timeout_seconds: 300,
                    termination_grace_seconds: 300,
                    exit_timeout_seconds: 30,
                    location_first_heartbeat_timeout_seconds: 600,
                    location_ready_timeout_seconds: 5400,
                    ..Default::default()
                }),
                ..Default::default()
            },
            status: FleetStatus::Active,
            status_message: String::new(),
            revision: 1,
            create_ms: NOW - 60_000,
            update_ms: NOW - 60_000,
            locations: vec![location],
        }
    }

    /// Autoscaling with nothing idle, and an instance whose process exited before it registered.
    fn survey(fleet: &FleetRecord) -> Survey<'_> {
        let crashed = InstanceView {
            id: "i-crashed".into(),
            instance_type: "small".into(),
            state: InstanceState::Running,
            launch_ms: NOW - 5_000,
            kill_ms: None,
            servers: vec![ServerView {
                registered: false,
                state: ServerState::Absent,
            }],
            running: Some(0),
        };
        Survey {
            fleet,
            record: &fleet.locations[0],
            lease: "lease".into(),
            scaling: Some(Reading {
                now_ms: NOW,
                policies: Vec::new(),
                state: Default::default(),
                utilization: pb::LocationUtilization::default(),
                lost: 0,
                due: Vec::new(),
                answers: HashMap::new(),
            }),
            instances: Some(Instances {
                found: LocationInstances {
                    now_ms: NOW,
                    first_launch_ms: None,
                    registered_ms: None,
                    instances: Vec::new(),
                },
                views: vec![crashed],
            }),
            backoff: LaunchBackoff::default(),
        }
    }

    #[test]
    fn the_plan_follows_the_autoscalers_count_and_a_second_the_count_as_it_stands() {
        let fleet = fleet(4);
        let decision = decide(&survey(&fleet));
        let scaling = decision.scaling.expect("the standby rule proposes");
        assert_eq!((scaling.from, scaling.desired()), (0, 4));
        let removed = Action::Remove {
            instance: "i-crashed".into(),
            asked: false,
        };
        let launched = Action::Launch {
            count: 4,
            instance_type: "small".into(),
        };
        assert_eq!(decision.plan, [removed.clone(), launched]);
        assert_eq!(decision.unscaled, Some(vec![removed]));
    }

    #[test]
    fn an_instance_that_ended_before_registering_is_a_failed_launch() {
        let fleet = fleet(0);
        let decision = decide(&survey(&fleet));
        assert_eq!(decision.scaling, None, "nothing to evaluate, nothing changed");
        assert_eq!(decision.unscaled, None);
        assert_eq!(decision.backoff, LaunchBackoff::default().failed(NOW));
        // A ready server shows the build runs: the backoff kept from earlier failures ends.
        let mut ran = survey(&fleet);
        ran.backoff = LaunchBackoff::default().failed(NOW - 1_000);
        let instances = ran.instances.as_mut().unwrap();
        let mut ready = instances.views[0].clone();
        ready.id = "i-ready".into();
        ready.running = Some(1);
        ready.servers[0] = ServerView {
            registered: true,
            state: ServerState::Ready {
                sessions: 0,
                held: false,
                protected: false,
            },
        };
        instances.views.push(ready);
        assert_eq!(decide(&ran).backoff, LaunchBackoff::default().failed(NOW));
    }
}
