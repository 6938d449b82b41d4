use super::*;

fn put(kind: RequestKind) -> pb::PutScalingPolicyRequest {
    pb::PutScalingPolicyRequest {
        fleet_id: "arena".into(),
        name: "keep-a-buffer".into(),
        kind: Some(kind),
        ..Default::default()
    }
}

fn fields(status: Status) -> Vec<String> {
    use tonic_types::StatusExt;
    status
        .get_details_bad_request()
        .unwrap()
        .field_violations
        .into_iter()
        .map(|v| v.field)
        .collect()
}

#[test]
fn zero_values_stand_for_the_contracts_defaults() {
    let buffer = check_put(&put(RequestKind::Buffer(pb::BufferPolicy::default()))).unwrap();
    assert_eq!(buffer.evaluation_interval_seconds, INTERVAL_DEFAULT_S);
    assert_eq!(buffer.scale_in_stabilization_seconds, STABILIZATION_DEFAULT_S);
    let rule = pb::RuleBasedPolicy {
        metric: pb::ScalingMetric::QueueDepth.into(),
        comparison_operator: pb::ComparisonOperator::GreaterThan.into(),
        evaluation_periods: 1,
        adjustment_type: pb::AdjustmentType::ChangeInCapacity.into(),
        scaling_adjustment: 2,
        ..Default::default()
    };
    let mut request = put(RequestKind::RuleBased(rule));
    request.scale_in_stabilization_seconds = Some(0);
    let rule = check_put(&request).unwrap();
    assert_eq!(rule.evaluation_interval_seconds, RULE_INTERVAL_DEFAULT_S);
    assert_eq!(rule.scale_in_stabilization_seconds, 0, "an explicit 0 stays 0");
    let webhook = pb::WebhookPolicy {
        url: "https://scaler.example/review".into(),
        bearer_token: "secret".into(),
        ..Default::default()
    };
    let stored = check_put(&put(RequestKind::Webhook(webhook))).unwrap();
    let Some(Kind::Webhook(webhook)) = &stored.kind else {
        panic!()
    };
    assert_eq!(webhook.timeout_ms, WEBHOOK_TIMEOUT_DEFAULT_MS);
    assert_eq!(webhook.bearer_token, "secret", "kept for the calls");
    let Some(Kind::Webhook(shown)) = shown(stored).kind else {
        panic!()
    };
    assert!(shown.bearer_token.is_empty() && shown.has_bearer_token, "never shown");
}

#[test]
fn every_broken_limit_is_named_at_once() {
    let mut request = put(RequestKind::Buffer(pb::BufferPolicy {
        idle_threshold_percent: 1001,
        minimum_idle_servers: 100_001,
        maximum_running_servers: 10_000_001,
        persistent_idle: true,
    }));
    request.fleet_id = "no spaces".into();
    request.name = String::new();
    request.evaluation_interval_seconds = 9;
    request.scale_in_stabilization_seconds = Some(3601);
    assert_eq!(
        fields(check_put(&request).unwrap_err()),
        [
            "fleet_id",
            "name",
            "buffer.idle_threshold_percent",
            "buffer.minimum_idle_servers",
            "buffer.maximum_running_servers",
            "evaluation_interval_seconds",
            "scale_in_stabilization_seconds",
        ]
    );
    let mut none = put(RequestKind::Buffer(pb::BufferPolicy::default()));
    none.kind = None;
    assert_eq!(fields(check_put(&none).unwrap_err()), ["kind"]);
}

#[test]
fn rules_targets_schedules_and_webhooks_are_checked_field_by_field() {
    let rule = pb::RuleBasedPolicy {
        metric: 99,
        comparison_operator: 0,
        threshold: f64::NAN,
        evaluation_periods: 61,
        adjustment_type: pb::AdjustmentType::PercentChangeInCapacity.into(),
        scaling_adjustment: -101,
        cooldown_seconds: Some(86_401),
    };
    assert_eq!(
        fields(check_put(&put(RequestKind::RuleBased(rule))).unwrap_err()),
        [
            "rule_based.metric",
            "rule_based.comparison_operator",
            "rule_based.threshold",
            "rule_based.evaluation_periods",
            "rule_based.scaling_adjustment",
            "rule_based.cooldown_seconds",
        ]
    );
    let target = pb::TargetTrackingPolicy {
        metric: 0,
        target_percent: 100,
    };
    assert_eq!(
        fields(check_put(&put(RequestKind::TargetTracking(target))).unwrap_err()),
        ["target_tracking.metric", "target_tracking.target_percent"]
    );
    let schedule = pb::SchedulePolicy {
        window: Some(pb::ScheduleWindow {
            cron: "every friday".into(),
            duration_seconds: 3600,
            ..Default::default()
        }),
        desired_instances: 100_001,
    };
    assert_eq!(
        fields(check_put(&put(RequestKind::Schedule(schedule))).unwrap_err()),
        ["schedule.window.cron", "schedule.desired_instances"]
    );
    let zone = pb::SchedulePolicy {
        window: Some(pb::ScheduleWindow {
            cron: "0 20 * * FRI".into(),
            duration_seconds: 3600,
            time_zone: "Europe/Atlantis".into(),
            ..Default::default()
        }),
        desired_instances: 3,
    };
    assert_eq!(
        fields(check_put(&put(RequestKind::Schedule(zone))).unwrap_err()),
        ["schedule.window.time_zone"]
    );
    for url in ["ftp://scaler.example/", "not a url", "https://", ""] {
        let webhook = pb::WebhookPolicy {
            url: url.into(),
            timeout_ms: 99,
            ca_bundle_pem: "not pem".into(),
            ..Default::default()
        };
        assert_eq!(
            fields(check_put(&put(RequestKind::Webhook(webhook))).unwrap_err()),
            ["webhook.url", "webhook.timeout_ms", "webhook.ca_bundle_pem"],
            "{url:?}"
        );
    }
}

#[test]
fn a_chain_needs_one_to_ten_distinct_entries_each_with_a_kind() {
    let entry = |id: &str, kind: Option<EntryKind>| pb::ChainEntry {
        id: id.into(),
        window: None,
        kind,
    };
    let empty = pb::ChainPolicy { entries: vec![] };
    assert_eq!(
        fields(check_put(&put(RequestKind::Chain(empty))).unwrap_err()),
        ["chain.entries"]
    );
    let eleven = pb::ChainPolicy {
        entries: (0..11)
            .map(|i| entry(&format!("e{i}"), Some(EntryKind::DesiredInstances(1))))
            .collect(),
    };
    assert_eq!(
        fields(check_put(&put(RequestKind::Chain(eleven))).unwrap_err()),
        ["chain.entries"]
    );
    let broken = pb::ChainPolicy {
        entries: vec![
            entry("launch", Some(EntryKind::DesiredInstances(100_001))),
            entry("launch", None),
            entry(
                "rest",
                Some(EntryKind::Buffer(pb::BufferPolicy {
                    idle_threshold_percent: 2000,
                    ..Default::default()
                })),
            ),
        ],
    };
    assert_eq!(
        fields(check_put(&put(RequestKind::Chain(broken))).unwrap_err()),
        [
            "chain.entries[0].desired_instances",
            "chain.entries[1].id",
            "chain.entries[1].kind",
            "chain.entries[2].buffer.idle_threshold_percent",
        ]
    );
}

#[test]
fn describe_and_delete_check_their_fields() {
    let describe = pb::DescribeScalingPoliciesRequest {
        fleet_id: "arena".into(),
        location: "eu{x}".into(),
        status_filter: 9,
        page_size: 101,
        ..Default::default()
    };
    assert_eq!(
        fields(check_describe(&describe).unwrap_err()),
        ["location", "status_filter", "page_size"]
    );
    let default = pb::DescribeScalingPoliciesRequest {
        fleet_id: "arena".into(),
        ..Default::default()
    };
    assert_eq!(check_describe(&default).unwrap(), PAGE_SIZE_DEFAULT as usize);
    let delete = pb::DeleteScalingPolicyRequest {
        fleet_id: "arena".into(),
        ..Default::default()
    };
    assert_eq!(fields(check_delete(&delete).unwrap_err()), ["name"]);
}
