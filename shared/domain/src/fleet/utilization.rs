//! A location's utilization: its live counts (what the store's scripts tally as states change, or what the policy
//! simulator counts in its model) turned into the contract's figures — GetFleetUtilization's, and the metrics
//! GameLift and FleetIQ scaling policies read. The fleet service and the simulator both call these formulas, so that
//! a policy replayed in the simulator reads exactly what it would read in production.

use std::collections::BTreeMap;

use berth_proto::fleet::v1 as pb;

use crate::game_server::timestamp;

/// Minutes of the window over which sessions created per minute are averaged.
const ALLOCATION_MINUTES: u64 = 10;

/// Minutes of the window of start-up times and interruptions.
const HOUR_MINUTES: u64 = 60;

/// What one location's tally holds (or the sum over locations).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Instances wanted (the location's desired capacity).
    pub desired_instances: u64,
    /// Instance ids launched or registered, none of their servers ready yet.
    pub pending_instances: u64,
    /// Instances with a ready server (idle and draining ones included).
    pub active_instances: u64,
    /// Active instances none of whose servers hosts a game session, is claimed or is UTILIZED.
    pub idle_instances: u64,
    /// Active instances being taken out of service.
    pub draining_instances: u64,
    /// Instances being stopped or interrupted.
    pub terminating_instances: u64,
    /// Game servers launched or registered, not ready yet.
    pub launching: u64,
    pub available: u64,
    pub utilized: u64,
    pub draining_available: u64,
    pub draining_utilized: u64,
    pub terminating: u64,
    /// Of all the game servers above, those reporting UNHEALTHY.
    pub unhealthy: u64,
    /// Free game-session slots on ready, healthy, unclaimed, AVAILABLE processes.
    pub free_slots: u64,
    /// As `free_slots`, on processes reporting UNHEALTHY.
    pub unhealthy_slots: u64,
    /// Game sessions that could begin activating now, within each instance's limit of concurrent activations.
    pub activatable_sessions: u64,
    pub activating_sessions: u64,
    pub active_sessions: u64,
    /// Player sessions RESERVED or ACTIVE.
    pub player_sessions: u64,
    /// Free player slots in ACTIVE game sessions that take players.
    pub free_player_slots: u64,
    /// Placements waiting for a server here, and how long they have waited, summed (ms).
    pub waiting: u64,
    pub waited_ms: u64,
    /// The effective standby target its autoscaler last applied, in server processes.
    pub standby_target: u64,
    /// Servers gone without being told to end, ever: a count that only grows.
    pub lost: u64,
    /// The last hour, by minute since the epoch.
    pub minutes: BTreeMap<u64, Minute>,
}

/// What happened in a location in one minute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Minute {
    /// Launch-to-ready time of the processes that became ready, summed (ms).
    pub ready_ms: u64,
    /// Processes that became ready.
    pub ready: u64,
    /// Game sessions created.
    pub sessions_created: u64,
    /// Game servers lost to instance interruptions.
    pub interrupted: u64,
}

impl Tally {
    /// Adds another tally to this one.
    pub fn add(&mut self, other: &Tally) {
        for (name, value) in other.stored_counts() {
            *self.stored_count_mut(name).expect("every count has a field") += value;
        }
        for (minute, seen) in &other.minutes {
            let mine = self.minutes.entry(*minute).or_default();
            mine.ready_ms += seen.ready_ms;
            mine.ready += seen.ready;
            mine.sessions_created += seen.sessions_created;
            mine.interrupted += seen.interrupted;
        }
    }

    /// The counts by the names the store gives them (its tally hash's fields, its counts string's slots).
    pub fn stored_counts(&self) -> [(&'static str, u64); 24] {
        [
            ("desired", self.desired_instances),
            ("i_pending", self.pending_instances),
            ("i_active", self.active_instances),
            ("i_idle", self.idle_instances),
            ("i_draining", self.draining_instances),
            ("i_terminating", self.terminating_instances),
            ("gs_launching", self.launching),
            ("gs_available", self.available),
            ("gs_utilized", self.utilized),
            ("gs_draining_available", self.draining_available),
            ("gs_draining_utilized", self.draining_utilized),
            ("gs_terminating", self.terminating),
            ("gs_unhealthy", self.unhealthy),
            ("slots_free", self.free_slots),
            ("slots_unhealthy", self.unhealthy_slots),
            ("activatable", self.activatable_sessions),
            ("s_activating", self.activating_sessions),
            ("s_active", self.active_sessions),
            ("players", self.player_sessions),
            ("players_free", self.free_player_slots),
            ("waiting", self.waiting),
            ("waited_ms", self.waited_ms),
            ("standby", self.standby_target),
            ("lost", self.lost),
        ]
    }

    /// The count the store names `name`; `None` for a name that is not a count.
    pub fn stored_count_mut(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "desired" => &mut self.desired_instances,
            "i_pending" => &mut self.pending_instances,
            "i_active" => &mut self.active_instances,
            "i_idle" => &mut self.idle_instances,
            "i_draining" => &mut self.draining_instances,
            "i_terminating" => &mut self.terminating_instances,
            "gs_launching" => &mut self.launching,
            "gs_available" => &mut self.available,
            "gs_utilized" => &mut self.utilized,
            "gs_draining_available" => &mut self.draining_available,
            "gs_draining_utilized" => &mut self.draining_utilized,
            "gs_terminating" => &mut self.terminating,
            "gs_unhealthy" => &mut self.unhealthy,
            "slots_free" => &mut self.free_slots,
            "slots_unhealthy" => &mut self.unhealthy_slots,
            "activatable" => &mut self.activatable_sessions,
            "s_activating" => &mut self.activating_sessions,
            "s_active" => &mut self.active_sessions,
            "players" => &mut self.player_sessions,
            "players_free" => &mut self.free_player_slots,
            "waiting" => &mut self.waiting,
            "waited_ms" => &mut self.waited_ms,
            "standby" => &mut self.standby_target,
            "lost" => &mut self.lost,
            _ => return None,
        })
    }
}

/// A fleet's utilization from the tallies of its locations, read at `now_ms`: each location, and their sum.
pub fn fleet_utilization(fleet_id: &str, locations: &[(String, Tally)], now_ms: u64) -> pb::FleetUtilization {
    let mut total = Tally::default();
    let locations = locations
        .iter()
        .map(|(location, tally)| {
            total.add(tally);
            location_utilization(location, tally, now_ms)
        })
        .collect();
    pb::FleetUtilization {
        fleet_id: fleet_id.to_owned(),
        sample_time: Some(timestamp(now_ms as i64)),
        total: Some(location_utilization("", &total, now_ms)),
        locations,
    }
}

/// A location's utilization from its tally at `now_ms`.
pub fn location_utilization(location: &str, t: &Tally, now_ms: u64) -> pb::LocationUtilization {
    let this_minute = now_ms / 60_000;
    let recent = |minutes: u64| {
        t.minutes
            .range(this_minute + 1 - minutes.min(this_minute + 1)..)
            .map(|(_, m)| m)
    };
    let (ready_ms, ready, interrupted) = recent(HOUR_MINUTES).fold((0, 0, 0), |(ms, n, lost), minute| {
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

/// A tally's instance counts, as the contract shows them.
pub fn instance_counts(t: &Tally) -> pb::InstanceCounts {
    pb::InstanceCounts {
        desired: count(t.desired_instances),
        pending: count(t.pending_instances),
        active: count(t.active_instances),
        idle: count(t.idle_instances),
        draining: count(t.draining_instances),
        terminating: count(t.terminating_instances),
    }
}

/// A tally's game-server counts, as the contract shows them.
pub fn game_server_counts(t: &Tally) -> pb::GameServerCounts {
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

/// `part` of `whole` in percent; 0 when the whole is 0.
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// A count as the contract's 32 bits hold it: a larger one (never seen, but counts are summed) shows the most.
fn count(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE_MS: u64 = 60_000;

    fn busy_location() -> Tally {
        Tally {
            active_instances: 4,
            idle_instances: 1,
            available: 3,
            utilized: 4,
            draining_utilized: 1,
            free_slots: 6,
            unhealthy_slots: 2,
            active_sessions: 8,
            waiting: 4,
            waited_ms: 10_000,
            ..Tally::default()
        }
    }

    #[test]
    fn percentages_are_of_the_slots_servers_and_instances_that_could_be_used() {
        let seen = location_utilization("eu", &busy_location(), 100 * MINUTE_MS);
        assert_eq!(seen.active_server_processes, 8);
        assert_eq!(seen.percent_available_game_sessions, 6.0 * 100.0 / 16.0);
        assert_eq!(seen.percent_utilized_game_servers, 5.0 * 100.0 / 8.0);
        assert_eq!(seen.percent_idle_instances, 25.0);
        assert_eq!((seen.queue_depth, seen.wait_time_ms), (4, 2_500));
    }

    #[test]
    fn an_empty_location_reads_zero_not_a_division_by_zero() {
        let seen = location_utilization("eu", &Tally::default(), 0);
        assert_eq!(seen.percent_available_game_sessions, 0.0);
        assert_eq!(seen.percent_utilized_game_servers, 0.0);
        assert_eq!(seen.percent_idle_instances, 0.0);
        assert_eq!(seen.server_startup_time_average_ms, 0);
        assert_eq!(seen.wait_time_ms, 0);
    }

    #[test]
    fn start_ups_and_interruptions_average_over_the_hour_and_allocations_over_ten_minutes() {
        let now = 1_000 * MINUTE_MS + 30_000;
        let minute = |ready_ms, ready, sessions_created, interrupted| Minute {
            ready_ms,
            ready,
            sessions_created,
            interrupted,
        };
        let tally = Tally {
            minutes: BTreeMap::from([
                // An hour ago and more: left out.
                (940, minute(90_000, 1, 50, 7)),
                (941, minute(4_000, 2, 30, 1)),
                (995, minute(8_000, 2, 5, 0)),
                (1_000, minute(0, 0, 15, 2)),
            ]),
            ..Tally::default()
        };
        let seen = location_utilization("eu", &tally, now);
        assert_eq!(seen.server_startup_time_average_ms, 3_000);
        assert_eq!(seen.game_server_interruptions_last_hour, 3);
        assert_eq!(seen.game_session_allocations_per_minute, 2.0);
    }

    #[test]
    fn a_fleet_is_the_sum_of_its_locations() {
        let locations = vec![("eu".to_owned(), busy_location()), ("us".to_owned(), busy_location())];
        let fleet = fleet_utilization("arena", &locations, 100 * MINUTE_MS);
        let total = fleet.total.unwrap();
        assert_eq!(total.active_server_processes, 16);
        assert_eq!(total.percent_utilized_game_servers, 5.0 * 100.0 / 8.0);
        assert_eq!(total.location, "");
        assert_eq!(fleet.locations.len(), 2);
        assert_eq!(fleet.locations[1].location, "us");
    }
}
