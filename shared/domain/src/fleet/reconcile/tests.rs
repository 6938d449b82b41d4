use super::*;

const NOW: i64 = 1_000_000_000;

fn deadlines() -> Deadlines {
    Deadlines {
        register_ms: 300_000,
        termination_grace_ms: 300_000,
        exit_ms: 30_000,
        first_heartbeat_ms: 600_000,
        location_ready_ms: 5_400_000,
    }
}

fn location(desired: u32) -> LocationView<'static> {
    LocationView {
        now_ms: NOW,
        desired,
        status: LocationStatus::Deployed,
        first_launch_ms: Some(NOW - 60_000),
        registered_ms: Some(NOW - 50_000),
        deleting: false,
        launch_type: Some("c5.large"),
        not_viable: &[],
        protect_held_servers: false,
        launch_after_ms: 0,
        deadlines: deadlines(),
    }
}

fn ready(sessions: u32, held: bool, protected: bool) -> ServerView {
    ServerView {
        registered: true,
        state: ServerState::Ready {
            sessions,
            held,
            protected,
        },
    }
}

fn server(registered: bool, state: ServerState) -> ServerView {
    ServerView { registered, state }
}

fn instance(id: &str, servers: Vec<ServerView>) -> InstanceView {
    InstanceView {
        id: id.into(),
        instance_type: "c5.large".into(),
        state: InstanceState::Running,
        launch_ms: NOW - 10_000,
        kill_ms: None,
        running: Some(servers.len() as u32),
        servers,
    }
}

fn stopped(actions: &[Action]) -> Vec<(String, StopReason)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Stop { instance, why } => Some((instance.clone(), *why)),
            _ => None,
        })
        .collect()
}

#[test]
fn launches_what_is_missing_of_the_first_viable_type() {
    let instances = [instance("a", vec![ready(0, false, false)])];
    assert_eq!(
        plan(&location(3), &instances),
        [Action::Launch {
            count: 2,
            instance_type: "c5.large".into()
        }]
    );
    let none_viable = LocationView {
        launch_type: None,
        ..location(3)
    };
    assert!(plan(&none_viable, &instances).is_empty());
}

#[test]
fn launches_nothing_while_backing_off_or_unhealthy_or_deleting() {
    let backing_off = LocationView {
        launch_after_ms: NOW + 1,
        ..location(2)
    };
    assert!(plan(&backing_off, &[]).is_empty());
    let unhealthy = LocationView {
        status: LocationStatus::Unhealthy,
        ..location(2)
    };
    assert!(plan(&unhealthy, &[]).is_empty());
    let deleting = LocationView {
        deleting: true,
        ..location(2)
    };
    assert!(plan(&deleting, &[]).is_empty());
}

#[test]
fn scale_in_takes_pending_then_idle_then_least_busy_and_never_a_protected_one() {
    let instances = [
        instance("busy-2", vec![ready(1, false, false), ready(1, false, false)]),
        instance("protected", vec![ready(1, false, true), ready(0, false, false)]),
        instance("busy-1", vec![ready(1, false, false), ready(0, false, false)]),
        instance("idle", vec![ready(0, false, false), ready(0, false, false)]),
        instance(
            "pending",
            vec![server(false, ServerState::Absent), server(true, ServerState::Starting)],
        ),
    ];
    let order = |desired| stopped(&plan(&location(desired), &instances));
    assert_eq!(order(4), [("pending".to_owned(), StopReason::ScaleIn)]);
    assert_eq!(
        order(2),
        [
            ("pending".to_owned(), StopReason::ScaleIn),
            ("idle".to_owned(), StopReason::ScaleIn),
            ("busy-1".to_owned(), StopReason::ScaleIn)
        ]
    );
    assert_eq!(order(0).len(), 4, "the protected instance stays even at 0");
    assert!(!order(0).iter().any(|(id, _)| id == "protected"));
}

#[test]
fn held_servers_protect_only_under_full_game_server_protection() {
    let instances = [
        instance("claimed", vec![ready(0, true, false)]),
        instance("idle", vec![ready(0, false, false)]),
    ];
    assert_eq!(stopped(&plan(&location(0), &instances)).len(), 2);
    let protecting = LocationView {
        protect_held_servers: true,
        ..location(0)
    };
    assert_eq!(
        stopped(&plan(&protecting, &instances)),
        [("idle".to_owned(), StopReason::ScaleIn)]
    );
}

#[test]
fn non_viable_instances_drain_and_go_once_replacements_are_ready() {
    let not_viable = ["c4.large".to_owned()];
    let location = LocationView {
        not_viable: &not_viable,
        ..location(2)
    };
    let mut old = instance("old", vec![ready(0, false, false)]);
    old.instance_type = "c4.large".into();
    let mut playing = instance("playing", vec![ready(1, false, true)]);
    playing.instance_type = "c4.large".into();
    let instances = [old.clone(), playing.clone()];
    let first = plan(&location, &instances);
    assert_eq!(
        first,
        [
            Action::Drain { instance: "old".into() },
            Action::Drain {
                instance: "playing".into()
            },
            Action::Launch {
                count: 2,
                instance_type: "c5.large".into()
            }
        ],
        "replacements are launched, nothing is stopped before they are ready"
    );
    old.state = InstanceState::Draining;
    playing.state = InstanceState::Draining;
    let pending = instance("new-1", vec![server(true, ServerState::Starting)]);
    let mut with_replacements = vec![
        old.clone(),
        playing.clone(),
        pending,
        instance("new-2", vec![ready(0, false, false)]),
    ];
    assert!(stopped(&plan(&location, &with_replacements)).is_empty());
    with_replacements[2] = instance("new-1", vec![ready(0, false, false)]);
    assert_eq!(
        stopped(&plan(&location, &with_replacements)),
        [("old".to_owned(), StopReason::Drained)],
        "the instance with protected gameplay stays until it ends"
    );
}

#[test]
fn instances_with_nothing_running_are_removed_and_replaced() {
    let mut crashed = instance("crashed", vec![ready(0, false, false)]);
    crashed.running = Some(0);
    let mut stopping = instance("stopping", vec![server(true, ServerState::Ending)]);
    stopping.state = InstanceState::Terminating;
    stopping.running = Some(0);
    let actions = plan(&location(1), &[crashed, stopping]);
    assert_eq!(
        actions,
        [
            Action::Remove {
                instance: "crashed".into(),
                asked: false
            },
            Action::Remove {
                instance: "stopping".into(),
                asked: true
            },
            Action::Launch {
                count: 1,
                instance_type: "c5.large".into()
            }
        ]
    );
}

#[test]
fn stopping_instances_are_killed_at_their_deadline_and_not_counted() {
    let mut stopping = instance("stopping", vec![server(true, ServerState::Ending)]);
    stopping.state = InstanceState::Terminating;
    stopping.kill_ms = Some(NOW + 1);
    assert_eq!(
        plan(&location(0), std::slice::from_ref(&stopping)),
        [],
        "before its deadline, left alone"
    );
    stopping.kill_ms = Some(NOW);
    assert_eq!(
        plan(&location(1), &[stopping]),
        [
            Action::Kill {
                instance: "stopping".into()
            },
            Action::Launch {
                count: 1,
                instance_type: "c5.large".into()
            }
        ]
    );
}

#[test]
fn late_registration_and_spent_processes_stop_the_instance() {
    let mut late = instance("late", vec![server(false, ServerState::Absent)]);
    late.launch_ms = NOW - deadlines().register_ms;
    let mut in_time = instance("in-time", vec![server(false, ServerState::Absent)]);
    in_time.launch_ms = NOW - deadlines().register_ms + 1;
    let spent = instance(
        "spent",
        vec![server(true, ServerState::Absent), server(true, ServerState::Lost)],
    );
    let half = instance("half", vec![server(true, ServerState::Lost), ready(0, false, false)]);
    assert_eq!(
        stopped(&plan(&location(3), &[late, in_time, spent, half])),
        [
            ("late".to_owned(), StopReason::RegisterTimeout),
            ("spent".to_owned(), StopReason::ProcessesEnded)
        ]
    );
    assert_eq!(StopReason::RegisterTimeout.termination(), None);
    assert_eq!(StopReason::ScaleIn.kill_after_ms(&deadlines()), 330_000);
    assert_eq!(StopReason::ProcessesEnded.kill_after_ms(&deadlines()), 30_000);
}

#[test]
fn an_instance_the_provisioner_cannot_see_counts_and_is_left_alone() {
    let mut unknown = instance("unknown", vec![server(false, ServerState::Absent)]);
    unknown.running = None;
    unknown.launch_ms = 0;
    assert!(plan(&location(1), &[unknown]).is_empty());
}

#[test]
fn deletion_stops_every_instance_and_launches_nothing() {
    let deleting = LocationView {
        deleting: true,
        ..location(3)
    };
    let instances = [
        instance("a", vec![ready(1, false, true)]),
        instance("b", vec![server(false, ServerState::Absent)]),
    ];
    assert_eq!(
        stopped(&plan(&deleting, &instances)),
        [
            ("a".to_owned(), StopReason::Deleted),
            ("b".to_owned(), StopReason::Deleted)
        ]
    );
}

#[test]
fn a_deploying_location_fails_when_no_server_registers_or_becomes_ready_in_time() {
    let deploying = |first: i64, registered: Option<i64>| LocationView {
        status: LocationStatus::Deploying,
        first_launch_ms: Some(first),
        registered_ms: registered,
        launch_type: None,
        ..location(1)
    };
    let d = deadlines();
    assert!(plan(&deploying(NOW - d.first_heartbeat_ms + 1, None), &[]).is_empty());
    assert_eq!(
        plan(&deploying(NOW - d.first_heartbeat_ms, None), &[]),
        [Action::Unhealthy {
            message: "no server sent a heartbeat within 600 s of the first launch".into()
        }]
    );
    let first = NOW - d.first_heartbeat_ms;
    assert_eq!(
        plan(&deploying(first, Some(first - 1)), &[]).len(),
        1,
        "a registration before the first launch is not one"
    );
    assert!(plan(&deploying(first, Some(first)), &[]).is_empty());
    assert_eq!(
        plan(&deploying(NOW - d.location_ready_ms, Some(NOW - 1)), &[]),
        [Action::Unhealthy {
            message: "no server became ready within 5400 s of the first launch".into()
        }]
    );
    let deployed = LocationView {
        status: LocationStatus::Deployed,
        ..deploying(0, None)
    };
    assert!(plan(&deployed, &[]).is_empty());
}

#[test]
fn launches_the_first_viable_type_and_on_demand_only_when_allowed() {
    let definition = |t: &str| pb::InstanceDefinition {
        instance_type: t.into(),
        ..Default::default()
    };
    let mut fleet = pb::Fleet {
        instance_definitions: vec![definition("c4.large"), definition("c5.large")],
        balancing_strategy: pb::BalancingStrategy::SpotPreferred as i32,
        ..Default::default()
    };
    let viability = |t: &str, viable| pb::InstanceTypeViability {
        instance_type: t.into(),
        viable,
        ..Default::default()
    };
    let c4_out = not_viable(&[viability("c4.large", false), viability("c5.large", true)]);
    assert_eq!(c4_out, ["c4.large"]);
    assert_eq!(launch_type(&fleet, &[]), Some("c4.large"));
    assert_eq!(launch_type(&fleet, &c4_out), Some("c5.large"));
    let none = ["c4.large".to_owned(), "c5.large".to_owned()];
    assert_eq!(
        launch_type(&fleet, &none),
        Some("c4.large"),
        "On-Demand when no type is viable"
    );
    fleet.balancing_strategy = pb::BalancingStrategy::SpotOnly as i32;
    assert_eq!(launch_type(&fleet, &none), None);
}
