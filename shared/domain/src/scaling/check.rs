//! The input checks of `ScalingService` requests, against the limits `berth/fleet/v1/scaling.proto` states field by
//! field, and the policy a valid PutScalingPolicy stores, with the defaults its zero values stand for. Whether the
//! fleet and location exist, the policy count and the expected revision are the store's to enforce, atomically.

use std::collections::HashSet;

use berth_proto::fleet::v1 as pb;
use pb::chain_entry::Kind as EntryKind;
use pb::put_scaling_policy_request::Kind as RequestKind;
use pb::scaling_policy::Kind;
use tonic::Status;

use super::window::Window;
use crate::fleet::check::{INSTANCES_MAX, check_at_most, in_range};
use crate::game_server::check_fleet_id;
use crate::process::LOCATION_LEN;
use crate::validate::{Violations, check_count, check_page_size};

/// Policy names: 1 to 128 characters of `[A-Za-z0-9_.-]`.
pub const NAME_LEN: (usize, usize) = (1, 128);
/// Most policies of a fleet.
pub const POLICIES_MAX: usize = 50;
/// Bounds of an evaluation interval, s.
pub const INTERVAL_S: (u32, u32) = (10, 3600);
/// Evaluation interval a request's 0 stands for, s; rule-based policies default to GameLift's period.
pub const INTERVAL_DEFAULT_S: u32 = 30;
pub const RULE_INTERVAL_DEFAULT_S: u32 = 60;
/// Longest scale-in stabilisation, s, and the default of an unset one.
pub const STABILIZATION_MAX_S: u32 = 3600;
pub const STABILIZATION_DEFAULT_S: u32 = 300;
/// Entries of a chain.
pub const CHAIN_ENTRIES: (usize, usize) = (1, 10);
/// Chain entry ids: 1 to 64 characters of `[A-Za-z0-9_.-]`.
pub const ENTRY_ID_LEN: (usize, usize) = (1, 64);
/// Longest webhook URL, in characters.
pub const URL_MAX: usize = 2048;
/// Bounds of a webhook's timeout, ms, and the default of 0.
pub const WEBHOOK_TIMEOUT_MS: (u32, u32) = (100, 30_000);
pub const WEBHOOK_TIMEOUT_DEFAULT_MS: u32 = 1000;
/// Largest CA bundle, in bytes.
pub const CA_BUNDLE_MAX: usize = 65_536;
/// Longest bearer token, in characters.
pub const BEARER_MAX: usize = 4096;
/// Bounds of a rule's threshold.
pub const THRESHOLD_MAX: f64 = 1e9;
/// Bounds of a rule's evaluation periods.
pub const PERIODS: (u32, u32) = (1, 60);
/// Longest cool-down, s.
pub const COOLDOWN_MAX_S: u32 = 86_400;
/// Most idle servers per 100 busy ones.
pub const IDLE_THRESHOLD_MAX: u32 = 1000;
/// Largest minimum idle servers, and largest most running servers.
pub const MINIMUM_IDLE_MAX: u32 = 100_000;
pub const RUNNING_MAX: u32 = 10_000_000;
/// Most policies on a page, and the default of 0.
pub const PAGE_SIZE_MAX: u32 = 100;
pub const PAGE_SIZE_DEFAULT: u32 = 50;

/// Checks a PutScalingPolicy request; the policy to store, its defaults applied and its output fields unset.
pub fn check_put(req: &pb::PutScalingPolicyRequest) -> Result<pb::ScalingPolicy, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    v.id("name", &req.name, NAME_LEN.0, NAME_LEN.1);
    if !req.location.is_empty() {
        v.id("location", &req.location, LOCATION_LEN.0, LOCATION_LEN.1);
    }
    let kind = req.kind.as_ref().map(|kind| match kind {
        RequestKind::Buffer(p) => Kind::Buffer(*p),
        RequestKind::TargetTracking(p) => Kind::TargetTracking(*p),
        RequestKind::RuleBased(p) => Kind::RuleBased(*p),
        RequestKind::Schedule(p) => Kind::Schedule(p.clone()),
        RequestKind::Chain(p) => Kind::Chain(p.clone()),
        RequestKind::Webhook(p) => Kind::Webhook(p.clone()),
    });
    let kind = match kind {
        None => {
            v.add(
                "kind",
                "exactly one of buffer, target_tracking, rule_based, schedule, chain or webhook must be set",
            );
            None
        }
        Some(kind) => Some(check_kind(&mut v, kind)),
    };
    let default_interval = match kind {
        Some(Kind::RuleBased(_)) => RULE_INTERVAL_DEFAULT_S,
        _ => INTERVAL_DEFAULT_S,
    };
    let interval = match req.evaluation_interval_seconds {
        0 => default_interval,
        given => {
            in_range(&mut v, "evaluation_interval_seconds", given, INTERVAL_S);
            given
        }
    };
    let stabilization = req.scale_in_stabilization_seconds.unwrap_or(STABILIZATION_DEFAULT_S);
    check_at_most(
        &mut v,
        "scale_in_stabilization_seconds",
        stabilization,
        STABILIZATION_MAX_S,
    );
    v.into_result()?;
    Ok(pb::ScalingPolicy {
        fleet_id: req.fleet_id.clone(),
        name: req.name.clone(),
        location: req.location.clone(),
        evaluation_interval_seconds: interval,
        scale_in_stabilization_seconds: stabilization,
        kind,
        ..Default::default()
    })
}

/// Checks a policy's kind; the kind with its defaults applied.
fn check_kind(v: &mut Violations, kind: Kind) -> Kind {
    match kind {
        Kind::Buffer(buffer) => {
            check_buffer(v, "buffer", &buffer);
            Kind::Buffer(buffer)
        }
        Kind::TargetTracking(target) => {
            check_target(v, "target_tracking", &target);
            Kind::TargetTracking(target)
        }
        Kind::RuleBased(rule) => {
            check_rule(v, "rule_based", &rule);
            Kind::RuleBased(rule)
        }
        Kind::Schedule(schedule) => {
            match &schedule.window {
                None => v.add("schedule.window", "is required"),
                Some(window) => check_window(v, "schedule.window", window),
            }
            check_at_most(
                v,
                "schedule.desired_instances",
                schedule.desired_instances,
                INSTANCES_MAX,
            );
            Kind::Schedule(schedule)
        }
        Kind::Chain(chain) => Kind::Chain(check_chain(v, chain)),
        Kind::Webhook(webhook) => Kind::Webhook(check_webhook(v, "webhook", webhook)),
    }
}

fn check_buffer(v: &mut Violations, at: &str, buffer: &pb::BufferPolicy) {
    check_at_most(
        v,
        &format!("{at}.idle_threshold_percent"),
        buffer.idle_threshold_percent,
        IDLE_THRESHOLD_MAX,
    );
    check_at_most(
        v,
        &format!("{at}.minimum_idle_servers"),
        buffer.minimum_idle_servers,
        MINIMUM_IDLE_MAX,
    );
    check_at_most(
        v,
        &format!("{at}.maximum_running_servers"),
        buffer.maximum_running_servers,
        RUNNING_MAX,
    );
}

fn check_target(v: &mut Violations, at: &str, target: &pb::TargetTrackingPolicy) {
    match pb::TargetTrackingMetric::try_from(target.metric) {
        Ok(pb::TargetTrackingMetric::Unspecified) | Err(_) => v.add(
            &format!("{at}.metric"),
            format!(
                "must be a TargetTrackingMetric other than UNSPECIFIED, got {}",
                target.metric
            ),
        ),
        Ok(_) => {}
    }
    in_range(v, &format!("{at}.target_percent"), target.target_percent, (1, 99));
}

fn check_rule(v: &mut Violations, at: &str, rule: &pb::RuleBasedPolicy) {
    if !matches!(pb::ScalingMetric::try_from(rule.metric), Ok(m) if m != pb::ScalingMetric::Unspecified) {
        v.add(
            &format!("{at}.metric"),
            format!("must be a ScalingMetric other than UNSPECIFIED, got {}", rule.metric),
        );
    }
    if !matches!(pb::ComparisonOperator::try_from(rule.comparison_operator), Ok(c) if c != pb::ComparisonOperator::Unspecified)
    {
        v.add(
            &format!("{at}.comparison_operator"),
            format!(
                "must be a ComparisonOperator other than UNSPECIFIED, got {}",
                rule.comparison_operator
            ),
        );
    }
    if !rule.threshold.is_finite() || rule.threshold.abs() > THRESHOLD_MAX {
        v.add(
            &format!("{at}.threshold"),
            format!("must be from -1e9 to 1e9, got {}", rule.threshold),
        );
    }
    in_range(v, &format!("{at}.evaluation_periods"), rule.evaluation_periods, PERIODS);
    let adjustment = rule.scaling_adjustment;
    let range = match pb::AdjustmentType::try_from(rule.adjustment_type) {
        Ok(pb::AdjustmentType::ChangeInCapacity) => Some((-100_000, 100_000)),
        Ok(pb::AdjustmentType::ExactCapacity) => Some((0, 100_000)),
        Ok(pb::AdjustmentType::PercentChangeInCapacity) => Some((-100, 1000)),
        Ok(pb::AdjustmentType::Unspecified) | Err(_) => {
            v.add(
                &format!("{at}.adjustment_type"),
                format!(
                    "must be an AdjustmentType other than UNSPECIFIED, got {}",
                    rule.adjustment_type
                ),
            );
            None
        }
    };
    if let Some((min, max)) = range
        && !(min..=max).contains(&adjustment)
    {
        v.add(
            &format!("{at}.scaling_adjustment"),
            format!("must be {min} to {max} for this adjustment type, got {adjustment}"),
        );
    }
    if let Some(cooldown) = rule.cooldown_seconds {
        check_at_most(v, &format!("{at}.cooldown_seconds"), cooldown, COOLDOWN_MAX_S);
    }
}

fn check_window(v: &mut Violations, at: &str, window: &pb::ScheduleWindow) {
    if let Err((field, why)) = Window::read(window) {
        v.add(&format!("{at}.{field}"), why);
    }
}

fn check_chain(v: &mut Violations, mut chain: pb::ChainPolicy) -> pb::ChainPolicy {
    let at = "chain.entries";
    check_count(v, at, chain.entries.len(), CHAIN_ENTRIES.0, CHAIN_ENTRIES.1);
    let mut ids = HashSet::new();
    for (i, entry) in chain.entries.iter_mut().take(CHAIN_ENTRIES.1).enumerate() {
        let at = format!("{at}[{i}]");
        v.id(&format!("{at}.id"), &entry.id, ENTRY_ID_LEN.0, ENTRY_ID_LEN.1);
        if !ids.insert(entry.id.clone()) {
            v.add(&format!("{at}.id"), format!("{:?} is given twice", entry.id));
        }
        if let Some(window) = &entry.window {
            check_window(v, &format!("{at}.window"), window);
        }
        entry.kind = match entry.kind.take() {
            None => {
                v.add(
                    &format!("{at}.kind"),
                    "exactly one of buffer, target_tracking, rule_based, webhook or desired_instances must be set \
                     (chains and schedules do not nest)",
                );
                None
            }
            Some(EntryKind::Buffer(buffer)) => {
                check_buffer(v, &format!("{at}.buffer"), &buffer);
                Some(EntryKind::Buffer(buffer))
            }
            Some(EntryKind::TargetTracking(target)) => {
                check_target(v, &format!("{at}.target_tracking"), &target);
                Some(EntryKind::TargetTracking(target))
            }
            Some(EntryKind::RuleBased(rule)) => {
                check_rule(v, &format!("{at}.rule_based"), &rule);
                Some(EntryKind::RuleBased(rule))
            }
            Some(EntryKind::Webhook(webhook)) => {
                Some(EntryKind::Webhook(check_webhook(v, &format!("{at}.webhook"), webhook)))
            }
            Some(EntryKind::DesiredInstances(desired)) => {
                check_at_most(v, &format!("{at}.desired_instances"), desired, INSTANCES_MAX);
                Some(EntryKind::DesiredInstances(desired))
            }
        };
    }
    chain
}

fn check_webhook(v: &mut Violations, at: &str, mut webhook: pb::WebhookPolicy) -> pb::WebhookPolicy {
    let len = webhook.url.chars().count();
    let field = format!("{at}.url");
    if len == 0 || len > URL_MAX {
        v.add(&field, format!("must be 1 to {URL_MAX} characters long, got {len}"));
    } else {
        match url::Url::parse(&webhook.url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {}
            Ok(url) => v.add(
                &field,
                format!(
                    "must be an http or https URL with a host, got scheme {:?}",
                    url.scheme()
                ),
            ),
            Err(err) => v.add(&field, format!("is not a URL: {err}")),
        }
    }
    webhook.timeout_ms = match webhook.timeout_ms {
        0 => WEBHOOK_TIMEOUT_DEFAULT_MS,
        given => {
            in_range(v, &format!("{at}.timeout_ms"), given, WEBHOOK_TIMEOUT_MS);
            given
        }
    };
    if webhook.ca_bundle_pem.len() > CA_BUNDLE_MAX {
        v.add(
            &format!("{at}.ca_bundle_pem"),
            format!(
                "must be at most {CA_BUNDLE_MAX} bytes, got {}",
                webhook.ca_bundle_pem.len()
            ),
        );
    } else if !webhook.ca_bundle_pem.is_empty() && !webhook.ca_bundle_pem.contains("-----BEGIN CERTIFICATE-----") {
        v.add(
            &format!("{at}.ca_bundle_pem"),
            "must hold PEM certificates (-----BEGIN CERTIFICATE-----)",
        );
    }
    if !webhook.bearer_token.is_empty() {
        v.printable(&format!("{at}.bearer_token"), &webhook.bearer_token, 1, BEARER_MAX);
    }
    webhook.has_bearer_token = !webhook.bearer_token.is_empty();
    webhook
}

/// Checks a DeleteScalingPolicy request.
pub fn check_delete(req: &pb::DeleteScalingPolicyRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    v.id("name", &req.name, NAME_LEN.0, NAME_LEN.1);
    v.into_result()
}

/// Checks a DescribeScalingPolicies request; the page size to serve.
pub fn check_describe(req: &pb::DescribeScalingPoliciesRequest) -> Result<usize, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    if !req.location.is_empty() {
        v.id("location", &req.location, LOCATION_LEN.0, LOCATION_LEN.1);
    }
    if pb::ScalingPolicyStatus::try_from(req.status_filter).is_err() {
        v.add(
            "status_filter",
            format!("must be a ScalingPolicyStatus, got {}", req.status_filter),
        );
    }
    let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
    v.into_result()?;
    Ok(size)
}

/// The policy as DescribeScalingPolicies shows it: its bearer tokens left out (they are write-only).
pub fn shown(mut policy: pb::ScalingPolicy) -> pb::ScalingPolicy {
    let hide = |webhook: &mut pb::WebhookPolicy| {
        webhook.has_bearer_token = !webhook.bearer_token.is_empty();
        webhook.bearer_token.clear();
    };
    match &mut policy.kind {
        Some(Kind::Webhook(webhook)) => hide(webhook),
        Some(Kind::Chain(chain)) => {
            for entry in &mut chain.entries {
                if let Some(EntryKind::Webhook(webhook)) = &mut entry.kind {
                    hide(webhook);
                }
            }
        }
        _ => {}
    }
    policy
}

#[cfg(test)]
mod tests;
