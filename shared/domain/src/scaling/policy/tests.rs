use proptest::prelude::*;

use super::*;
use crate::scaling::Capacity;

/// A location with `busy` utilized servers, `idle` available ones, `waiting` placements, and `sessions` ACTIVE
/// game sessions (one per busy server), on instances of `per` servers.
fn utilization(busy: u32, idle: u32, waiting: u32) -> pb::LocationUtilization {
    pb::LocationUtilization {
        instance_counts: Some(pb::InstanceCounts::default()),
        game_server_counts: Some(pb::GameServerCounts {
            available: idle,
            utilized: busy,
            ..Default::default()
        }),
        active_server_processes: busy + idle,
        active_game_sessions: busy,
        available_game_sessions: idle,
        queue_depth: waiting,
        ..Default::default()
    }
}

fn inputs(u: &pb::LocationUtilization, per: u32, desired: u32) -> Inputs<'_> {
    Inputs {
        now_ms: 1_000_000,
        utilization: u,
        capacity: Capacity {
            minimum: 0,
            maximum: 1000,
            desired,
        },
        servers_per_instance: per,
    }
}

fn buffer_of(threshold: u32, minimum: u32, persistent: bool, most: u32) -> pb::BufferPolicy {
    pb::BufferPolicy {
        idle_threshold_percent: threshold,
        minimum_idle_servers: minimum,
        persistent_idle: persistent,
        maximum_running_servers: most,
    }
}

#[test]
fn the_buffer_follows_seed_003() {
    // 10 busy at 50 %: floor(5) + 1 idle → 16 servers; 4 per instance → 4 instances.
    assert_eq!(
        buffer(&buffer_of(50, 0, false, 0), &inputs(&utilization(10, 0, 0), 4, 0)),
        4
    );
    // 3 busy at 50 %: floor(1.5) = 1, raised to the persistent minimum 5, plus 1 → 9 servers.
    assert_eq!(
        buffer(&buffer_of(50, 5, true, 0), &inputs(&utilization(3, 0, 0), 1, 0)),
        9
    );
    // The minimum applies only when persistent: 1 + 1 → 5 servers.
    assert_eq!(
        buffer(&buffer_of(50, 5, false, 0), &inputs(&utilization(3, 0, 0), 1, 0)),
        5
    );
    // Capped by the most running servers.
    assert_eq!(
        buffer(&buffer_of(100, 0, false, 12), &inputs(&utilization(10, 0, 0), 1, 0)),
        12
    );
    // Placements waiting count as busy: a location at rest wakes for one.
    assert_eq!(
        buffer(&buffer_of(0, 0, false, 0), &inputs(&utilization(0, 0, 1), 1, 0)),
        2
    );
    assert_eq!(
        buffer(&buffer_of(50, 9, false, 0), &inputs(&utilization(0, 3, 0), 1, 5)),
        0,
        "rests at zero"
    );
    assert_eq!(
        buffer(&buffer_of(0, 0, true, 0), &inputs(&utilization(0, 3, 0), 1, 5)),
        1
    );
}

#[test]
fn a_buffer_used_below_its_idle_target_is_a_demand_signal() {
    let policy = pb::ScalingPolicy {
        kind: Some(Kind::Buffer(buffer_of(0, 2, true, 0))),
        ..Default::default()
    };
    // An idle target of 2 + 1.
    assert!(!buffer_short(&policy, &inputs(&utilization(1, 3, 0), 1, 4)));
    assert!(buffer_short(&policy, &inputs(&utilization(2, 2, 0), 1, 4)));
    let capped = pb::ScalingPolicy {
        kind: Some(Kind::Buffer(buffer_of(0, 2, true, 4))),
        ..Default::default()
    };
    assert!(
        !buffer_short(&capped, &inputs(&utilization(2, 2, 0), 1, 4)),
        "it may not grow"
    );
    assert!(!buffer_short(&rule(1, None), &inputs(&utilization(2, 0, 0), 1, 4)));
}

proptest! {
    #[test]
    fn the_buffer_keeps_an_idle_server_beside_the_busy_ones_within_its_cap(
        busy in 0u32..5000, waiting in 0u32..100, threshold in 0u32..=1000, minimum in 0u32..1000,
        persistent: bool, most in 0u32..20_000, per in 1u32..8,
    ) {
        let u = utilization(busy, 0, waiting);
        let policy = buffer_of(threshold, minimum, persistent, most);
        let proposed = u64::from(buffer(&policy, &inputs(&u, per, 0)));
        let servers = proposed * u64::from(per);
        let wanted = u64::from(busy) + u64::from(waiting);
        if most > 0 {
            prop_assert!(proposed <= u64::from(most).div_ceil(u64::from(per)));
        }
        if wanted == 0 && !persistent {
            prop_assert_eq!(proposed, 0);
        } else {
            let floor = (wanted + 1).min(if most > 0 { u64::from(most) } else { u64::MAX });
            prop_assert!(servers >= floor, "{} servers for {} busy", servers, wanted);
            if persistent && (most == 0 || u64::from(most) > wanted + u64::from(minimum)) {
                prop_assert!(servers > wanted + u64::from(minimum));
            }
        }
        let more = utilization(busy + 1, 0, waiting);
        prop_assert!(u64::from(buffer(&policy, &inputs(&more, per, 0))) >= proposed, "monotone in demand");
    }

    #[test]
    fn target_tracking_proposes_the_fewest_instances_that_hold_the_target(
        busy in 0u32..3000, idle in 0u32..3000, waiting in 0u32..50, target in 1u32..=99, per in 1u32..8,
    ) {
        let u = utilization(busy, idle, waiting);
        let at = inputs(&u, per, 0);
        let used = u64::from(busy) + u64::from(waiting);
        let metrics = [
            pb::TargetTrackingMetric::PercentAvailableGameSessions,
            pb::TargetTrackingMetric::PercentUtilizedGameServers,
        ];
        for metric in metrics {
            let policy = pb::TargetTrackingPolicy { metric: metric.into(), target_percent: target };
            let proposed = u64::from(target_tracking(&policy, &at).unwrap());
            // One slot per server here, so the two ratios mirror each other.
            let slots = proposed * u64::from(per);
            let holds = |slots: u64| match metric {
                pb::TargetTrackingMetric::PercentAvailableGameSessions => {
                    slots >= used && (slots - used) * 100 >= u64::from(target) * slots
                }
                _ => used * 100 <= u64::from(target) * slots,
            };
            prop_assert!(holds(slots) || proposed == u64::from(INSTANCES_MAX), "{:?}: {} slots for {} used", metric, slots, used);
            if proposed > 0 {
                prop_assert!(!holds(slots - u64::from(per)), "{:?}: one instance fewer would do", metric);
            }
        }
    }
}

fn rule(periods: u32, cooldown: Option<u32>) -> pb::ScalingPolicy {
    pb::ScalingPolicy {
        name: "queue".into(),
        evaluation_interval_seconds: 60,
        kind: Some(Kind::RuleBased(pb::RuleBasedPolicy {
            metric: pb::ScalingMetric::QueueDepth.into(),
            comparison_operator: pb::ComparisonOperator::GreaterThanOrEqualTo.into(),
            threshold: 5.0,
            evaluation_periods: periods,
            adjustment_type: pb::AdjustmentType::PercentChangeInCapacity.into(),
            scaling_adjustment: 10,
            cooldown_seconds: cooldown,
        })),
        ..Default::default()
    }
}

#[test]
fn a_rule_proposes_after_its_periods_then_cools_down() {
    let policy = rule(3, Some(120));
    let deep = utilization(4, 0, 7);
    let shallow = utilization(4, 0, 2);
    let mut state = PolicyState::default();
    let at = |u: &pb::LocationUtilization, now_ms: i64, state: &PolicyState| {
        let mut i = inputs(u, 1, 8);
        i.now_ms = now_ms;
        evaluate(&policy, &i, state, None)
    };
    for (n, now) in [(1, 0), (2, 60_000)] {
        state = at(&deep, now, &state);
        assert_eq!((state.held, state.proposal), (n, None), "{}", state.message);
    }
    state = at(&shallow, 120_000, &state);
    assert_eq!(
        (state.held, state.proposal),
        (0, None),
        "a break starts the count again"
    );
    for now in [180_000, 240_000] {
        state = at(&deep, now, &state);
    }
    state = at(&deep, 300_000, &state);
    // 10 % of 8 truncates to 0: changed by at least one.
    assert_eq!(state.proposal, Some(9));
    state.acted_ms = Some(300_000);
    state = at(&deep, 360_000, &state);
    assert_eq!(state.proposal, None, "{}", state.message);
    assert!(state.message.starts_with("cooling down"));
    state = at(&deep, 420_000, &state);
    assert_eq!(state.proposal, Some(9), "the cool-down is over");
}

#[test]
fn adjustments_of_every_type() {
    let with = |kind: pb::AdjustmentType, adjustment: i32, desired: u32| {
        let rule = pb::RuleBasedPolicy {
            adjustment_type: kind.into(),
            scaling_adjustment: adjustment,
            ..Default::default()
        };
        adjusted(&rule, desired)
    };
    assert_eq!(with(pb::AdjustmentType::ChangeInCapacity, -3, 10), 7);
    assert_eq!(with(pb::AdjustmentType::ChangeInCapacity, -30, 10), 0);
    assert_eq!(with(pb::AdjustmentType::ExactCapacity, 4, 10), 4);
    assert_eq!(with(pb::AdjustmentType::PercentChangeInCapacity, 50, 10), 15);
    assert_eq!(with(pb::AdjustmentType::PercentChangeInCapacity, -25, 10), 8);
    assert_eq!(
        with(pb::AdjustmentType::PercentChangeInCapacity, -5, 10),
        9,
        "at least one"
    );
    assert_eq!(
        with(pb::AdjustmentType::PercentChangeInCapacity, 1000, 100_000),
        INSTANCES_MAX
    );
}

fn window(start_ms: i64, end_ms: i64) -> pb::ScheduleWindow {
    let time = |ms: i64| {
        Some(prost_types::Timestamp {
            seconds: ms / 1000,
            nanos: 0,
        })
    };
    pb::ScheduleWindow {
        start_time: time(start_ms),
        end_time: time(end_ms),
        ..Default::default()
    }
}

#[test]
fn a_schedule_is_due_when_its_window_turns_and_proposes_only_inside_it() {
    let policy = pb::ScalingPolicy {
        evaluation_interval_seconds: 3600,
        kind: Some(Kind::Schedule(pb::SchedulePolicy {
            window: Some(window(2_000_000, 3_000_000)),
            desired_instances: 7,
        })),
        ..Default::default()
    };
    let u = utilization(0, 0, 0);
    let mut at = inputs(&u, 1, 1);
    let state = evaluate(&policy, &at, &PolicyState::default(), None);
    assert_eq!((state.proposal, state.message.as_str()), (None, "outside its window"));
    assert!(!due(&policy, &state, 1_999_000, false), "the interval has not elapsed");
    assert!(due(&policy, &state, 2_000_000, false), "the window opened");
    assert!(due(&policy, &state, 1_500_000, true), "a demand signal");
    at.now_ms = 2_000_000;
    let state = evaluate(&policy, &at, &state, None);
    assert_eq!(state.proposal, Some(7));
    assert!(!due(&policy, &state, 2_999_999, false));
    assert!(due(&policy, &state, 3_000_000, false), "the window closed");
}

#[test]
fn the_first_chain_entry_in_force_decides() {
    let entry = |id: &str, window: Option<pb::ScheduleWindow>, kind: EntryKind| pb::ChainEntry {
        id: id.into(),
        window,
        kind: Some(kind),
    };
    let hook = pb::WebhookPolicy {
        url: "http://scaler.local/".into(),
        ..Default::default()
    };
    let policy = pb::ScalingPolicy {
        kind: Some(Kind::Chain(pb::ChainPolicy {
            entries: vec![
                entry(
                    "launch",
                    Some(window(2_000_000, 3_000_000)),
                    EntryKind::DesiredInstances(40),
                ),
                entry("ask", Some(window(3_000_000, 4_000_000)), EntryKind::Webhook(hook)),
                entry("rest", None, EntryKind::Buffer(buffer_of(0, 2, true, 0))),
            ],
        })),
        ..Default::default()
    };
    let u = utilization(0, 0, 0);
    let mut at = inputs(&u, 1, 1);
    let rest = evaluate(&policy, &at, &PolicyState::default(), None);
    assert_eq!(rest.proposal, Some(3));
    assert_eq!(rest.message, "chain entry rest is in force");
    assert!(webhook_in_force(&policy, at.now_ms).is_none());
    at.now_ms = 2_500_000;
    assert_eq!(evaluate(&policy, &at, &rest, None).proposal, Some(40));
    at.now_ms = 3_500_000;
    assert!(webhook_in_force(&policy, at.now_ms).is_some());
    assert_eq!(evaluate(&policy, &at, &rest, Some(Ok(Some(12)))).proposal, Some(12));
    let failed = evaluate(&policy, &at, &rest, Some(Err("answered 500".into())));
    assert!(failed.failed);
    assert_eq!(failed.proposal, None);
    assert_eq!(failed.message, "chain entry ask: answered 500");
}

#[test]
fn nothing_is_proposed_from_a_utilization_that_was_not_read() {
    let policy = pb::ScalingPolicy {
        kind: Some(Kind::Buffer(buffer_of(0, 0, true, 0))),
        ..Default::default()
    };
    let unread = pb::LocationUtilization::default();
    let state = evaluate(&policy, &inputs(&unread, 1, 3), &PolicyState::default(), None);
    assert!(state.failed);
    assert_eq!(state.proposal, None);
}
