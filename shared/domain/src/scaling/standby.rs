//! A location's standby rule (PlayFab): how many ready, idle server processes it keeps for new game sessions. The
//! effective target is the largest enabled scheduled window in force, else the base; dynamic standby multiplies it
//! while the pool is being used up fast, then ramps back down linearly once no threshold applies.

use berth_proto::fleet::v1 as pb;

use super::Inputs;

/// PlayFab's dynamic standby thresholds, for a configuration that names none: (trigger %, multiplier %).
pub const THRESHOLDS_DEFAULT: [(u32, u32); 3] = [(50, 150), (25, 300), (5, 400)];
/// Default ramp-down of a raised target, s.
pub const RAMP_DOWN_DEFAULT_S: u32 = 1800;

const WEEK_MS: i64 = 7 * 24 * 3600 * 1000;

/// What the rule keeps between evaluations: the multiplier a threshold last raised the target to, when a threshold
/// last applied (the ramp-down starts there), and whether the pool has ever been full (a pool still being built is
/// not being used up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StandbyState {
    /// Percent; 0 or 100 when not raised.
    pub raised_percent: u32,
    pub raised_ms: i64,
    pub filled: bool,
}

/// The rule's evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Standby {
    /// Effective target, in server processes.
    pub target: u32,
    /// Instances to keep the target idle beside the busy servers; `None` without a standby rule in force.
    pub proposal: Option<u32>,
    /// Ready, idle servers (and those starting) fewer than the target: the pool is being used up, and the policies
    /// are evaluated now.
    pub short: bool,
    pub state: StandbyState,
}

/// Evaluates a location's standby configuration (`None`: no rule).
pub fn standby(config: Option<&pb::StandbyConfiguration>, inputs: &Inputs<'_>, state: &StandbyState) -> Standby {
    // Servers still starting count as standing by: they soon are, and a pool being built is not being used up.
    let idle = inputs
        .utilization
        .game_server_counts
        .as_ref()
        .map_or(0, |g| u64::from(g.available) + u64::from(g.launching));
    let base = config.map_or(0, |c| base_target(c, inputs.now_ms));
    if base == 0 {
        return Standby {
            target: 0,
            proposal: None,
            short: false,
            state: StandbyState::default(),
        };
    }
    // Full once it held the base target, idle or taken since.
    let filled = state.filled || idle + inputs.busy_servers() >= u64::from(base);
    let dynamic = config
        .and_then(|c| c.dynamic_standby.as_ref())
        .filter(|d| d.enabled && filled);
    let (multiplier, mut state) = match dynamic {
        Some(dynamic) => multiplier(dynamic, idle * 100 / u64::from(base), inputs.now_ms, state),
        None => (100, StandbyState::default()),
    };
    state.filled = filled;
    let cap = u64::from(inputs.capacity.maximum) * u64::from(inputs.servers_per_instance.max(1));
    let target = (u64::from(base) * u64::from(multiplier) / 100).min(cap);
    let servers = inputs.busy_servers() + inputs.waiting() + target;
    Standby {
        target: u32::try_from(target).unwrap_or(u32::MAX),
        proposal: Some(inputs.instances(servers)),
        short: idle < target,
        state,
    }
}

/// The largest target of the enabled windows in force, else the base target.
fn base_target(config: &pb::StandbyConfiguration, now_ms: i64) -> u32 {
    config
        .scheduled_windows
        .iter()
        .filter(|w| !w.disabled && window_in_force(w, now_ms))
        .map(|w| w.standby_servers)
        .max()
        .unwrap_or(config.standby_servers)
}

fn window_in_force(window: &pb::ScheduledStandbyWindow, now_ms: i64) -> bool {
    let ms = |t: &Option<prost_types::Timestamp>| t.as_ref().map(|t| t.seconds * 1000);
    let (Some(start), Some(end)) = (ms(&window.start_time), ms(&window.end_time)) else {
        return false;
    };
    if now_ms < start {
        return false;
    }
    if window.recurring_weekly {
        (now_ms - start) % WEEK_MS < end - start
    } else {
        now_ms < end
    }
}

/// The multiplier in force (percent) with `left_percent` of the base target idle, and the state after.
fn multiplier(
    dynamic: &pb::DynamicStandby,
    left_percent: u64,
    now_ms: i64,
    state: &StandbyState,
) -> (u32, StandbyState) {
    let configured: Vec<(u32, u32)> = dynamic
        .thresholds
        .iter()
        .map(|t| (t.trigger_percent, t.multiplier_percent))
        .collect();
    let thresholds = if configured.is_empty() {
        &THRESHOLDS_DEFAULT[..]
    } else {
        &configured[..]
    };
    let applying = thresholds
        .iter()
        .filter(|(trigger, _)| left_percent < u64::from(*trigger))
        .min_by_key(|(trigger, _)| *trigger);
    if let Some((_, raised)) = applying {
        // A target raised further while the ramp-down of a higher one runs keeps the higher one.
        let percent = (*raised).max(ramped(dynamic, now_ms, state));
        return (
            percent,
            StandbyState {
                raised_percent: percent,
                raised_ms: now_ms,
                filled: true,
            },
        );
    }
    match ramped(dynamic, now_ms, state) {
        100 => (100, StandbyState::default()),
        percent => (percent, *state),
    }
}

/// The multiplier `state` has ramped down to by `now_ms`, percent: linearly from the raised one to 100.
fn ramped(dynamic: &pb::DynamicStandby, now_ms: i64, state: &StandbyState) -> u32 {
    if state.raised_percent <= 100 {
        return 100;
    }
    let ramp_s = if dynamic.ramp_down_seconds == 0 {
        RAMP_DOWN_DEFAULT_S
    } else {
        dynamic.ramp_down_seconds
    };
    let ramp_ms = i64::from(ramp_s) * 1000;
    let elapsed = (now_ms - state.raised_ms).clamp(0, ramp_ms);
    let extra = i64::from(state.raised_percent - 100);
    100 + (extra - extra * elapsed / ramp_ms) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::Capacity;

    fn config(base: u32, dynamic: bool) -> pb::StandbyConfiguration {
        pb::StandbyConfiguration {
            standby_servers: base,
            dynamic_standby: Some(pb::DynamicStandby {
                enabled: dynamic,
                thresholds: vec![],
                ramp_down_seconds: 100,
            }),
            scheduled_windows: vec![],
        }
    }

    fn evaluated(
        config: &pb::StandbyConfiguration,
        idle: u32,
        busy: u32,
        now_ms: i64,
        state: &StandbyState,
    ) -> Standby {
        let counts = pb::GameServerCounts {
            available: idle,
            utilized: busy,
            ..Default::default()
        };
        evaluated_with(config, counts, now_ms, state)
    }

    fn evaluated_with(
        config: &pb::StandbyConfiguration,
        counts: pb::GameServerCounts,
        now_ms: i64,
        state: &StandbyState,
    ) -> Standby {
        let u = pb::LocationUtilization {
            game_server_counts: Some(counts),
            ..Default::default()
        };
        let inputs = Inputs {
            now_ms,
            utilization: &u,
            capacity: Capacity {
                minimum: 0,
                maximum: 100,
                desired: 5,
            },
            servers_per_instance: 2,
        };
        standby(Some(config), &inputs, state)
    }

    #[test]
    fn servers_starting_count_as_standing_by() {
        let starting = pb::GameServerCounts {
            launching: 10,
            ..Default::default()
        };
        let building = evaluated_with(&config(10, true), starting, 0, &StandbyState::default());
        assert_eq!(
            (building.target, building.short),
            (10, false),
            "not multiplied while it is built"
        );
    }

    #[test]
    fn the_target_is_kept_idle_beside_the_busy_servers() {
        let rule = evaluated(&config(10, false), 10, 5, 0, &StandbyState::default());
        assert_eq!((rule.target, rule.proposal, rule.short), (10, Some(8), false));
        let drained = evaluated(&config(10, false), 3, 12, 0, &StandbyState::default());
        assert_eq!((drained.target, drained.proposal, drained.short), (10, Some(11), true));
        let none = evaluated(&config(0, true), 0, 12, 0, &StandbyState::default());
        assert_eq!((none.target, none.proposal), (0, None));
    }

    #[test]
    fn dynamic_standby_multiplies_the_target_as_the_pool_drains_then_ramps_down() {
        let on = config(10, true);
        let empty = StandbyState::default();
        assert_eq!(
            evaluated(&on, 0, 0, 0, &empty).target,
            10,
            "a pool still being built is not multiplied"
        );
        let fresh = evaluated(&on, 10, 0, 0, &empty).state;
        assert!(fresh.filled);
        assert_eq!(evaluated(&on, 6, 0, 0, &fresh).target, 10);
        assert_eq!(evaluated(&on, 4, 0, 0, &fresh).target, 15, "below 50 %: 1.5x");
        assert_eq!(evaluated(&on, 2, 0, 0, &fresh).target, 30, "below 25 %: 3x");
        let drained = evaluated(&on, 0, 0, 1000, &fresh);
        assert_eq!(drained.target, 40, "below 5 %: 4x");
        // Refilled: the 4x target returns to the base linearly over the 100 s ramp.
        assert_eq!(evaluated(&on, 10, 0, 51_000, &drained.state).target, 25);
        let later = evaluated(&on, 10, 0, 101_000, &drained.state);
        assert_eq!((later.target, later.state.raised_percent), (10, 0));
        // Drained a little again while ramping down: the higher ramped target holds.
        assert_eq!(evaluated(&on, 4, 0, 51_000, &drained.state).target, 25);
        // Capped by the location's maximum: 100 instances of 2.
        assert_eq!(evaluated(&config(60, true), 0, 0, 0, &fresh).target, 200);
    }

    #[test]
    fn the_largest_enabled_window_in_force_replaces_the_base() {
        let time = |s: i64| Some(prost_types::Timestamp { seconds: s, nanos: 0 });
        let window = |start: i64, end: i64, servers: u32, weekly: bool, disabled: bool| pb::ScheduledStandbyWindow {
            start_time: time(start),
            end_time: time(end),
            standby_servers: servers,
            recurring_weekly: weekly,
            disabled,
            ..Default::default()
        };
        let mut with = config(10, false);
        with.scheduled_windows = vec![
            window(1000, 2000, 30, false, false),
            window(1500, 1600, 50, false, false),
            window(1000, 2000, 90, false, true),
            window(0, 100, 20, true, false),
        ];
        let target = |s: i64| evaluated(&with, 100, 0, s * 1000, &StandbyState::default()).target;
        assert_eq!(target(999), 10);
        assert_eq!(target(1000), 30);
        assert_eq!(target(1550), 50);
        assert_eq!(target(2000), 10);
        assert_eq!(target(7 * 24 * 3600 + 50), 20, "a weekly window a week on");
        assert_eq!(target(7 * 24 * 3600 + 150), 10);
    }
}
