//! What one scaling policy proposes for one location: each kind's arithmetic, when a policy is due, and the state
//! an evaluation leaves for the next (a rule's consecutive periods, a cool-down, the last proposal). A webhook is
//! the one kind that needs I/O: the caller makes the call the policy asks for and hands in its answer.

use berth_proto::fleet::v1 as pb;
use pb::chain_entry::Kind as EntryKind;
use pb::scaling_policy::Kind;

use super::Inputs;
use super::window;
use crate::fleet::check::INSTANCES_MAX;

/// What a policy's evaluations left, per location it applies to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyState {
    /// When it was last evaluated, ms since the epoch.
    pub evaluated_ms: Option<i64>,
    /// What that evaluation proposed, in instances; it stands until the next one.
    pub proposal: Option<u32>,
    /// Whether that evaluation failed.
    pub failed: bool,
    /// Why it failed, why it proposed nothing, or which chain entry is in force.
    pub message: String,
    /// Consecutive evaluations in which its rule's comparison held.
    pub held: u32,
    /// When its proposal last won and changed the desired count, ms.
    pub acted_ms: Option<i64>,
}

/// A webhook's answer as its caller got it: the decision's proposal (`None`: it proposed nothing), or why the call
/// failed.
pub type WebhookAnswer = Result<Option<u32>, String>;

/// Default cool-down of a rule-based policy, s.
pub const COOLDOWN_DEFAULT_S: u32 = 600;

/// Whether `policy` is to be evaluated now: never evaluated yet, its interval elapsed, a demand signal came (placements
/// waiting for a server, the standby pool drained below its target, servers lost), or its window or chain entry in
/// force changed since its last evaluation (so that a schedule acts at its cron time, not up to an interval later).
pub fn due(policy: &pb::ScalingPolicy, state: &PolicyState, now_ms: i64, demand: bool) -> bool {
    let Some(at) = state.evaluated_ms else { return true };
    let interval_ms = i64::from(policy.evaluation_interval_seconds) * 1000;
    demand || now_ms >= at + interval_ms || in_force(policy, at) != in_force(policy, now_ms)
}

/// Which part of a policy is in force at `now_ms`: for a schedule, whether its window is; for a chain, the index of
/// the first entry whose window is; nothing for the other kinds.
fn in_force(policy: &pb::ScalingPolicy, now_ms: i64) -> Option<usize> {
    match &policy.kind {
        Some(Kind::Schedule(schedule)) => schedule
            .window
            .as_ref()
            .is_some_and(|w| window::in_force(w, now_ms))
            .then_some(0),
        Some(Kind::Chain(chain)) => entry_in_force(chain, now_ms),
        _ => None,
    }
}

fn entry_in_force(chain: &pb::ChainPolicy, now_ms: i64) -> Option<usize> {
    chain.entries.iter().position(|entry| match &entry.window {
        None => true,
        Some(w) => window::in_force(w, now_ms),
    })
}

/// The webhook `policy` asks to be called now: its own, or that of the chain entry in force.
pub fn webhook_in_force(policy: &pb::ScalingPolicy, now_ms: i64) -> Option<&pb::WebhookPolicy> {
    match &policy.kind {
        Some(Kind::Webhook(webhook)) => Some(webhook),
        Some(Kind::Chain(chain)) => match &chain.entries[entry_in_force(chain, now_ms)?].kind {
            Some(EntryKind::Webhook(webhook)) => Some(webhook),
            _ => None,
        },
        _ => None,
    }
}

/// Evaluates `policy` for a location: the state it leaves. `webhook` is the answer of the call
/// [`webhook_in_force`] asked for (`None` when none was made).
pub fn evaluate(
    policy: &pb::ScalingPolicy,
    inputs: &Inputs<'_>,
    state: &PolicyState,
    webhook: Option<WebhookAnswer>,
) -> PolicyState {
    let mut next = PolicyState {
        evaluated_ms: Some(inputs.now_ms),
        acted_ms: state.acted_ms,
        ..PolicyState::default()
    };
    let u = inputs.utilization;
    if u.game_server_counts.is_none() || u.instance_counts.is_none() {
        next.failed = true;
        next.message = "the location's utilization could not be read".into();
        return next;
    }
    let outcome = match &policy.kind {
        None => Err("the policy has no kind".to_owned()),
        Some(Kind::Buffer(policy)) => Ok(Some(buffer(policy, inputs))),
        Some(Kind::TargetTracking(target)) => Ok(target_tracking(target, inputs)),
        Some(Kind::RuleBased(rule)) => rule_based(rule, inputs, state, &mut next),
        Some(Kind::Schedule(schedule)) => Ok(scheduled(schedule, inputs.now_ms, &mut next)),
        Some(Kind::Webhook(_)) => answered(webhook),
        Some(Kind::Chain(chain)) => chained(chain, inputs, state, webhook, &mut next),
    };
    match outcome {
        Ok(proposal) => next.proposal = proposal,
        Err(why) => {
            next.failed = true;
            next.message = why;
        }
    }
    next
}

fn chained(
    chain: &pb::ChainPolicy,
    inputs: &Inputs<'_>,
    state: &PolicyState,
    webhook: Option<WebhookAnswer>,
    next: &mut PolicyState,
) -> Result<Option<u32>, String> {
    let Some(at) = entry_in_force(chain, inputs.now_ms) else {
        next.message = "no chain entry is in force".into();
        return Ok(None);
    };
    let entry = &chain.entries[at];
    let proposal = match &entry.kind {
        None => Err(format!("chain entry {} has no kind", entry.id)),
        Some(EntryKind::Buffer(policy)) => Ok(Some(buffer(policy, inputs))),
        Some(EntryKind::TargetTracking(target)) => Ok(target_tracking(target, inputs)),
        Some(EntryKind::RuleBased(rule)) => rule_based(rule, inputs, state, next),
        Some(EntryKind::Webhook(_)) => answered(webhook),
        Some(EntryKind::DesiredInstances(desired)) => Ok(Some(*desired)),
    };
    let detail = std::mem::take(&mut next.message);
    next.message = if detail.is_empty() {
        format!("chain entry {} is in force", entry.id)
    } else {
        format!("chain entry {} is in force: {detail}", entry.id)
    };
    proposal.map_err(|why| format!("chain entry {}: {why}", entry.id))
}

/// Seed 003's buffer, in server processes: busy servers (utilized ones, and the placements waiting for one here,
/// which are about to be), an idle target of floor(busy × threshold), raised to the minimum when persistent, plus
/// one, capped by the most running. Without a persistent minimum, a location where nothing is busy or waiting keeps
/// nothing: the seed sizes its buffer when a game session is asked for, and none is.
pub fn buffer(policy: &pb::BufferPolicy, inputs: &Inputs<'_>) -> u32 {
    let (busy, idle) = buffer_servers(policy, inputs);
    let mut running = busy + idle;
    if policy.maximum_running_servers > 0 {
        running = running.min(u64::from(policy.maximum_running_servers));
    }
    inputs.instances(running)
}

/// A buffer's busy servers and its idle target.
fn buffer_servers(policy: &pb::BufferPolicy, inputs: &Inputs<'_>) -> (u64, u64) {
    let busy = inputs.busy_servers() + inputs.waiting();
    if busy == 0 && !policy.persistent_idle {
        return (0, 0);
    }
    let mut idle = busy * u64::from(policy.idle_threshold_percent) / 100;
    if policy.persistent_idle {
        idle = idle.max(u64::from(policy.minimum_idle_servers));
    }
    (busy, idle + 1)
}

/// Whether the buffer `policy` keeps (its own, or that of the chain entry in force) has been used below its idle
/// target: a demand signal, on which every policy is evaluated at once.
pub fn buffer_short(policy: &pb::ScalingPolicy, inputs: &Inputs<'_>) -> bool {
    let buffer = match &policy.kind {
        Some(Kind::Buffer(buffer)) => buffer,
        Some(Kind::Chain(chain)) => match entry_in_force(chain, inputs.now_ms).map(|at| &chain.entries[at].kind) {
            Some(Some(EntryKind::Buffer(buffer))) => buffer,
            _ => return false,
        },
        _ => return false,
    };
    let (busy, idle) = buffer_servers(buffer, inputs);
    let available = inputs
        .utilization
        .game_server_counts
        .as_ref()
        .map_or(0, |g| u64::from(g.available));
    // At its most running servers, a buffer cannot grow whatever is used of it.
    let most = u64::from(buffer.maximum_running_servers);
    available < idle && (most == 0 || busy + available < most)
}

/// GameLift's and FleetIQ's target tracking; `None` for a metric the contract does not define.
pub fn target_tracking(policy: &pb::TargetTrackingPolicy, inputs: &Inputs<'_>) -> Option<u32> {
    let target = u64::from(policy.target_percent.clamp(1, 99));
    let u = inputs.utilization;
    match policy.metric() {
        pb::TargetTrackingMetric::Unspecified => None,
        pb::TargetTrackingMetric::PercentAvailableGameSessions => {
            let used = u64::from(u.activating_game_sessions) + u64::from(u.active_game_sessions) + inputs.waiting();
            let slots = (used * 100).div_ceil(100 - target);
            Some(inputs.instances(slots.div_ceil(slots_per_server(u))))
        }
        pb::TargetTrackingMetric::PercentUtilizedGameServers => {
            let utilized = inputs.busy_servers() + inputs.waiting();
            Some(inputs.instances((utilized * 100).div_ceil(target)))
        }
    }
}

/// Game-session slots per ready server, as the location's ready servers hold them now; 1 without any.
fn slots_per_server(u: &pb::LocationUtilization) -> u64 {
    let slots = u64::from(u.activating_game_sessions)
        + u64::from(u.active_game_sessions)
        + u64::from(u.available_game_sessions)
        + u64::from(u.unhealthy_game_session_slots);
    match u64::from(u.active_server_processes) {
        0 => 1,
        ready => (slots / ready).max(1),
    }
}

fn rule_based(
    rule: &pb::RuleBasedPolicy,
    inputs: &Inputs<'_>,
    state: &PolicyState,
    next: &mut PolicyState,
) -> Result<Option<u32>, String> {
    let metric = rule.metric();
    let value = inputs
        .metric(metric)
        .ok_or_else(|| format!("metric {} could not be read", metric.as_str_name()))?;
    let threshold = rule.threshold;
    let holds = match rule.comparison_operator() {
        pb::ComparisonOperator::Unspecified => return Err("the rule has no comparison operator".into()),
        pb::ComparisonOperator::GreaterThan => value > threshold,
        pb::ComparisonOperator::GreaterThanOrEqualTo => value >= threshold,
        pb::ComparisonOperator::LessThan => value < threshold,
        pb::ComparisonOperator::LessThanOrEqualTo => value <= threshold,
    };
    next.held = if holds { state.held.saturating_add(1) } else { 0 };
    if !holds {
        next.message = format!("{} is {value}: the rule does not hold", metric.as_str_name());
        return Ok(None);
    }
    if next.held < rule.evaluation_periods.max(1) {
        next.message = format!(
            "the rule has held for {} of {} evaluations",
            next.held, rule.evaluation_periods
        );
        return Ok(None);
    }
    let cooldown_ms = i64::from(rule.cooldown_seconds.unwrap_or(COOLDOWN_DEFAULT_S)) * 1000;
    if let Some(acted) = state.acted_ms
        && inputs.now_ms < acted + cooldown_ms
    {
        next.message = format!("cooling down for {} ms more", acted + cooldown_ms - inputs.now_ms);
        return Ok(None);
    }
    Ok(Some(adjusted(rule, inputs.capacity.desired)))
}

/// A rule's proposal from the current desired count.
fn adjusted(rule: &pb::RuleBasedPolicy, desired: u32) -> u32 {
    let desired = i64::from(desired);
    let adjustment = i64::from(rule.scaling_adjustment);
    let proposal = match rule.adjustment_type() {
        pb::AdjustmentType::Unspecified | pb::AdjustmentType::ChangeInCapacity => desired + adjustment,
        pb::AdjustmentType::ExactCapacity => adjustment,
        pb::AdjustmentType::PercentChangeInCapacity => {
            let change = desired * adjustment / 100;
            desired + if change == 0 { adjustment.signum() } else { change }
        }
    };
    proposal.clamp(0, i64::from(INSTANCES_MAX)) as u32
}

fn scheduled(schedule: &pb::SchedulePolicy, now_ms: i64, next: &mut PolicyState) -> Option<u32> {
    let in_force = schedule.window.as_ref().is_some_and(|w| window::in_force(w, now_ms));
    if !in_force {
        next.message = "outside its window".into();
    }
    in_force.then_some(schedule.desired_instances)
}

fn answered(webhook: Option<WebhookAnswer>) -> Result<Option<u32>, String> {
    webhook.unwrap_or_else(|| Err("the webhook was not called".into()))
}

#[cfg(test)]
mod tests;
