//! GetFleetUtilization: the live counts the store keeps per location, turned into the contract's figures — the
//! metrics GameLift and FleetIQ scaling policies read, per location and summed over the fleet.

use berth_domain::game_server::timestamp;
use berth_proto::fleet::v1 as pb;
use berth_store::utilization::{Tally, Utilization};

/// Minutes of the window over which sessions created per minute are averaged.
const ALLOCATION_MINUTES: u64 = 10;

/// The fleet's utilization as read: each location, and their sum.
pub(crate) fn fleet_utilization(fleet_id: &str, read: &Utilization) -> pb::FleetUtilization {
    let mut total = Tally::default();
    let locations = read
        .locations
        .iter()
        .map(|(location, tally)| {
            total.add(tally);
            location_utilization(location, tally, read.now_ms)
        })
        .collect();
    pb::FleetUtilization {
        fleet_id: fleet_id.to_owned(),
        sample_time: Some(timestamp(read.now_ms as i64)),
        total: Some(location_utilization("", &total, read.now_ms)),
        locations,
    }
}

/// `part` of `whole` in percent; 0 when the whole is 0.
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn count(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A fleet as the contract shows it, each location and the fleet's sums with the counts of `read` (a location added
/// after the read keeps the record's).
pub(crate) fn with_counts(mut fleet: pb::Fleet, read: &Utilization) -> pb::Fleet {
    let mut total = Tally::default();
    for location in &mut fleet.locations {
        if let Some((_, tally)) = read.locations.iter().find(|(name, _)| *name == location.location) {
            location.instance_counts = Some(instance_counts(tally));
            location.game_server_counts = Some(game_server_counts(tally));
            total.add(tally);
        }
    }
    fleet.instance_counts = Some(instance_counts(&total));
    fleet.game_server_counts = Some(game_server_counts(&total));
    fleet
}

/// A location as the contract shows it, with the counts of its tally.
pub(crate) fn location_with_counts(mut location: pb::FleetLocation, tally: &Tally) -> pb::FleetLocation {
    location.instance_counts = Some(instance_counts(tally));
    location.game_server_counts = Some(game_server_counts(tally));
    location
}

fn instance_counts(t: &Tally) -> pb::InstanceCounts {
    pb::InstanceCounts {
        desired: count(t.desired_instances),
        pending: count(t.pending_instances),
        active: count(t.active_instances),
        idle: count(t.idle_instances),
        draining: count(t.draining_instances),
        terminating: count(t.terminating_instances),
    }
}

fn game_server_counts(t: &Tally) -> pb::GameServerCounts {
    pb::GameServerCounts {
        launching: count(t.launching),
        available: count(t.available),
        utilized: count(t.utilized),
        draining_available: count(t.draining_available),
        draining_utilized: count(t.draining_utilized),
        terminating: count(t.terminating),
        unhealthy: count(t.unhealthy),
    }
}

pub(crate) fn location_utilization(location: &str, t: &Tally, now_ms: u64) -> pb::LocationUtilization {
    let this_minute = now_ms / 60_000;
    let recent = |minutes: u64| {
        t.minutes
            .range(this_minute + 1 - minutes.min(this_minute + 1)..)
            .map(|(_, m)| m)
    };
    let (ready_ms, ready, interrupted) = recent(60).fold((0, 0, 0), |(ms, n, lost), minute| {
        (ms + minute.ready_ms, n + minute.ready, lost + minute.interrupted)
    });
    let created: u64 = recent(ALLOCATION_MINUTES).map(|minute| minute.sessions_created).sum();
    let ready_servers = t.available + t.utilized + t.draining_available + t.draining_utilized;
    pb::LocationUtilization {
        location: location.to_owned(),
        instance_counts: Some(instance_counts(t)),
        game_server_counts: Some(game_server_counts(t)),
        active_server_processes: count(ready_servers),
        activating_game_sessions: count(t.activating_sessions),
        active_game_sessions: count(t.active_sessions),
        available_game_sessions: count(t.free_slots),
        unhealthy_game_session_slots: count(t.unhealthy_slots),
        percent_available_game_sessions: percent(t.free_slots, t.active_sessions + t.free_slots + t.unhealthy_slots),
        concurrent_activatable_game_sessions: count(t.activatable_sessions),
        current_player_sessions: count(t.player_sessions),
        available_player_sessions: count(t.free_player_slots),
        percent_idle_instances: percent(t.idle_instances, t.active_instances),
        percent_utilized_game_servers: percent(t.utilized + t.draining_utilized, ready_servers),
        game_server_interruptions_last_hour: count(interrupted),
        server_startup_time_average_ms: ready_ms.checked_div(ready).unwrap_or(0),
        game_session_allocations_per_minute: created as f64 / ALLOCATION_MINUTES as f64,
        queue_depth: count(t.waiting),
        wait_time_ms: t.waited_ms.checked_div(t.waiting).unwrap_or(0),
        standby_target_servers: count(t.standby_target),
    }
}
