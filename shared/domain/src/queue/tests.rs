use proptest::prelude::*;
use tonic::Code;
use tonic_types::StatusExt;

use super::*;

fn create() -> pb::CreateQueueRequest {
    pb::CreateQueueRequest {
        name: "ranked-eu".into(),
        destinations: ["arena-eu", "arena-us"]
            .map(|fleet_id| pb::QueueDestination {
                fleet_id: fleet_id.into(),
            })
            .to_vec(),
        player_latency_policies: vec![policy(50, 60), policy(100, 60), policy(200, 0)],
        priority_configuration: Some(pb::PriorityConfiguration {
            priority_order: vec![pb::PriorityType::Location as i32, pb::PriorityType::Cost as i32],
            location_order: vec!["eu-west-1".into(), "us-east-1".into()],
        }),
        ..Default::default()
    }
}

fn policy(maximum_ms: u32, seconds: u32) -> pb::PlayerLatencyPolicy {
    pb::PlayerLatencyPolicy {
        maximum_individual_player_latency_ms: maximum_ms,
        policy_duration_seconds: seconds,
    }
}

fn refused(status: Status) -> Vec<String> {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let bad = status.get_details_bad_request().expect("field violations attached");
    bad.field_violations.into_iter().map(|f| f.field).collect()
}

#[test]
fn a_queue_is_created_with_its_defaults_resolved() {
    let queue = check_create(&create()).unwrap();
    assert_eq!(queue.timeout_seconds, 600, "0 means 600 s");
    assert_eq!(queue.destinations.len(), 2);
    let plain = pb::CreateQueueRequest {
        priority_configuration: Some(pb::PriorityConfiguration::default()),
        filter_configuration: Some(pb::FilterConfiguration::default()),
        timeout_seconds: 30,
        ..create()
    };
    let queue = check_create(&plain).unwrap();
    assert_eq!(queue.timeout_seconds, 30);
    assert_eq!(queue.priority_configuration, None, "empty lists are the default order");
    assert_eq!(
        queue.filter_configuration, None,
        "an empty filter allows every location"
    );
}

#[test]
fn each_broken_limit_is_named_by_its_field() {
    type Breaks = fn(&mut pb::CreateQueueRequest);
    let destination = |fleet_id: &str| pb::QueueDestination {
        fleet_id: fleet_id.into(),
    };
    let cases: &[(&[&str], Breaks)] = &[
        (&["name"], |r| r.name.clear()),
        (&["name"], |r| r.name = "ranked.eu".into()),
        (&["name"], |r| r.name = "q".repeat(129)),
        (&["destinations"], |r| r.destinations.clear()),
        (&["destinations"], |r| {
            r.destinations = (0..101)
                .map(|n| pb::QueueDestination {
                    fleet_id: format!("f{n}"),
                })
                .collect()
        }),
        (&["destinations[2].fleet_id"], |r| {
            r.destinations.push(r.destinations[0].clone())
        }),
        (&["destinations[1].fleet_id"], |r| {
            r.destinations[1].fleet_id = "a{b}".into()
        }),
        (&["timeout_seconds"], |r| r.timeout_seconds = 9),
        (&["timeout_seconds"], |r| r.timeout_seconds = 601),
        (&["player_latency_policies"], |r| {
            r.player_latency_policies = (1..=11).map(|n| policy(n * 10, 10)).collect()
        }),
        (
            &["player_latency_policies[0].maximum_individual_player_latency_ms"],
            |r| r.player_latency_policies[0] = policy(0, 60),
        ),
        (
            &["player_latency_policies[2].maximum_individual_player_latency_ms"],
            |r| r.player_latency_policies[2] = policy(60_001, 0),
        ),
        (
            &["player_latency_policies[1].maximum_individual_player_latency_ms"],
            |r| r.player_latency_policies[1] = policy(50, 60),
        ),
        (&["player_latency_policies[0].policy_duration_seconds"], |r| {
            r.player_latency_policies[0] = policy(50, 601)
        }),
        (&["player_latency_policies[0].policy_duration_seconds"], |r| {
            r.player_latency_policies[0] = policy(50, 0)
        }),
        (&["priority_configuration.priority_order[1]"], |r| {
            r.priority_configuration.as_mut().unwrap().priority_order[1] = 0
        }),
        (&["priority_configuration.priority_order[1]"], |r| {
            r.priority_configuration.as_mut().unwrap().priority_order[1] = 9
        }),
        (&["priority_configuration.priority_order[1]"], |r| {
            r.priority_configuration.as_mut().unwrap().priority_order[1] = pb::PriorityType::Location as i32
        }),
        (&["priority_configuration.priority_order"], |r| {
            r.priority_configuration.as_mut().unwrap().priority_order = vec![1, 2, 3, 4, 1]
        }),
        (&["priority_configuration.location_order"], |r| {
            r.priority_configuration.as_mut().unwrap().location_order.clear()
        }),
        (&["priority_configuration.location_order[1]"], |r| {
            r.priority_configuration.as_mut().unwrap().location_order[1] = "eu-west-1".into()
        }),
        (&["filter_configuration.allowed_locations[0]"], |r| {
            r.filter_configuration = Some(pb::FilterConfiguration {
                allowed_locations: vec!["eu west".into()],
            })
        }),
        (&["filter_configuration.allowed_locations"], |r| {
            r.filter_configuration = Some(pb::FilterConfiguration {
                allowed_locations: (0..101).map(|n| format!("loc-{n}")).collect(),
            })
        }),
        (&["custom_event_data"], |r| r.custom_event_data = "x".repeat(257)),
        (&["maximum_pending_placements"], |r| {
            r.maximum_pending_placements = 1_000_001
        }),
    ];
    for (fields, breaks) in cases {
        let mut req = create();
        breaks(&mut req);
        assert_eq!(refused(check_create(&req).unwrap_err()), *fields, "{req:?}");
    }
    assert!(
        check_create(&pb::CreateQueueRequest {
            destinations: vec![destination("only")],
            ..Default::default()
        })
        .is_err()
    );
}

#[test]
fn an_update_checks_and_changes_only_what_it_sets() {
    let mut queue = check_create(&create()).unwrap();
    let nothing = pb::UpdateQueueRequest {
        name: "ranked-eu".into(),
        ..Default::default()
    };
    check_update(&nothing).unwrap();
    assert!(apply_update(&mut queue, &nothing).is_empty());

    let update = pb::UpdateQueueRequest {
        timeout_seconds: Some(120),
        player_latency_policies: Some(pb::PlayerLatencyPolicies::default()),
        priority_configuration: Some(pb::PriorityConfiguration::default()),
        custom_event_data: Some("team-a".into()),
        ..nothing.clone()
    };
    check_update(&update).unwrap();
    let changed = apply_update(&mut queue, &update);
    assert_eq!(
        changed,
        [
            "timeout_seconds",
            "player_latency_policies",
            "priority_configuration",
            "custom_event_data"
        ]
    );
    assert_eq!(queue.timeout_seconds, 120);
    assert!(queue.player_latency_policies.is_empty());
    assert_eq!(
        queue.priority_configuration, None,
        "both lists empty restore the default order"
    );
    assert!(
        apply_update(&mut queue, &update).is_empty(),
        "the same update again changes nothing"
    );

    let bad = pb::UpdateQueueRequest {
        destinations: Some(pb::QueueDestinations::default()),
        timeout_seconds: Some(5),
        maximum_pending_placements: Some(PENDING_MAX + 1),
        ..nothing
    };
    assert_eq!(
        refused(check_update(&bad).unwrap_err()),
        [
            "destinations.destinations",
            "timeout_seconds",
            "maximum_pending_placements"
        ]
    );
}

#[test]
fn names_and_pages_are_checked_on_every_request() {
    let named = |name: &str| pb::DescribeQueueRequest { name: name.into() };
    assert!(check_describe(&named("ranked-eu")).is_ok());
    assert_eq!(refused(check_describe(&named("")).unwrap_err()), ["name"]);
    let delete = pb::DeleteQueueRequest {
        name: "a/b".into(),
        ..Default::default()
    };
    assert_eq!(refused(check_delete(&delete).unwrap_err()), ["name"]);
    let page = |page_size| pb::ListQueuesRequest {
        page_size,
        page_token: String::new(),
    };
    assert_eq!(check_list(&page(0)).unwrap(), 100);
    assert_eq!(check_list(&page(1000)).unwrap(), 1000);
    assert_eq!(refused(check_list(&page(1001)).unwrap_err()), ["page_size"]);
}

proptest! {
    /// Latency policies are accepted exactly when their maxima are in range and distinct, their durations at most
    /// 600 s, and a duration of 0 (until the timeout) only on the highest maximum.
    #[test]
    fn latency_policies_follow_their_rules(
        policies in proptest::collection::vec((0u32..70_000, 0u32..700), 0..12),
    ) {
        let policies: Vec<_> = policies.into_iter().map(|(ms, s)| policy(ms, s)).collect();
        let highest = policies.iter().map(|p| p.maximum_individual_player_latency_ms).max();
        let mut maxima = HashSet::new();
        let valid = policies.len() <= LATENCY_POLICIES_MAX
            && policies.iter().all(|p| {
                let ms = p.maximum_individual_player_latency_ms;
                (1..=60_000).contains(&ms)
                    && maxima.insert(ms)
                    && p.policy_duration_seconds <= 600
                    && (p.policy_duration_seconds > 0 || Some(ms) == highest)
            });
        let req = pb::CreateQueueRequest {
            player_latency_policies: policies,
            ..create()
        };
        prop_assert_eq!(check_create(&req).is_ok(), valid);
    }
}
