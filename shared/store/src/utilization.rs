//! The live counts of a fleet's locations (GetFleetUtilization, and the autoscaler's inputs). The scripts of every
//! other area keep them as they change states (`fleets/tally.lua`), so reading them is a few hashes whatever
//! the fleet's size: no scan, no recount.

use std::collections::BTreeMap;

use redis::Value;

use crate::codec::{outcome_detail, strings, unexpected};
use crate::keys::FleetKeys;
use crate::scripts::{Area, scripts};
use crate::{Store, StoreError};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "utilization",
    helpers: &[],
    functions: &[("read_utilization", include_str!("utilization/read.lua"), true)],
};

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
        for (name, value) in other.counts() {
            *self.count_mut(name).expect("every count has a field") += value;
        }
        for (minute, seen) in &other.minutes {
            let mine = self.minutes.entry(*minute).or_default();
            mine.ready_ms += seen.ready_ms;
            mine.ready += seen.ready;
            mine.sessions_created += seen.sessions_created;
            mine.interrupted += seen.interrupted;
        }
    }

    /// The counts by their stored names.
    fn counts(&self) -> [(&'static str, u64); 24] {
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

    fn count_mut(&mut self, name: &str) -> Option<&mut u64> {
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

    /// A location's tally from its hash (field, value, ...) as of `now_ms`: counts, and the minutes of the last
    /// hour (older ones are slots of the hash not yet written over).
    fn decode(script: &str, desired: &str, pairs: &[String], now_ms: u64) -> Result<Tally, StoreError> {
        let mut tally = Tally {
            desired_instances: desired.parse().map_err(|_| unexpected(script, desired))?,
            ..Tally::default()
        };
        let this_minute = now_ms / 60_000;
        for pair in pairs.chunks_exact(2) {
            let (name, value) = (pair[0].as_str(), pair[1].as_str());
            if let Some(count) = tally.count_mut(name) {
                // A count is never below zero unless a script forgot to tally a change; a recount test guards that.
                *count = value.parse::<i64>().map_err(|_| unexpected(script, value))?.max(0) as u64;
            } else if name.starts_with('w') {
                let parts: Vec<u64> = value
                    .split('|')
                    .map(|part| part.parse().map_err(|_| unexpected(script, value)))
                    .collect::<Result<_, _>>()?;
                let [minute, ready_ms, ready, sessions_created, interrupted] = parts[..] else {
                    return Err(unexpected(script, value));
                };
                if minute + 60 > this_minute {
                    tally.minutes.insert(
                        minute,
                        Minute {
                            ready_ms,
                            ready,
                            sessions_created,
                            interrupted,
                        },
                    );
                }
            }
        }
        Ok(tally)
    }
}

/// The tallies of a fleet's locations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Utilization {
    /// Redis's clock when they were read, ms since the epoch.
    pub now_ms: u64,
    /// Each location read, in the fleet's order.
    pub locations: Vec<(String, Tally)>,
}

/// The outcome of reading a fleet's tallies.
#[derive(Debug, PartialEq)]
pub enum UtilizationRead {
    Read(Utilization),
    /// The fleet has no record.
    NotFound,
    /// The fleet has no such location.
    NoLocation,
}

/// Reads the tallies of `location`, or of every location of the fleet when it is empty. The FleetIQ servers, which
/// register without a location, count in the home location.
pub async fn read_utilization(store: &Store, fleet_id: &str, location: &str) -> Result<UtilizationRead, StoreError> {
    const SCRIPT: &str = "read_utilization";
    let mut call = scripts().read_utilization.for_fleet(&FleetKeys::new(fleet_id));
    call.arg(location);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, home, rest) = outcome_detail(SCRIPT, &raw)?;
    match outcome.as_str() {
        "FOUND" => {}
        "NOT_FOUND" => return Ok(UtilizationRead::NotFound),
        "NO_LOCATION" => return Ok(UtilizationRead::NoLocation),
        other => return Err(unexpected(SCRIPT, other)),
    }
    let now: String = redis::from_redis_value_ref(&raw[1]).map_err(|_| unexpected(SCRIPT, "a malformed reply"))?;
    let now_ms: u64 = now.parse().map_err(|_| unexpected(SCRIPT, &now))?;
    let mut locations: Vec<(String, Tally)> = Vec::new();
    for entry in rest.chunks_exact(3) {
        let [name, desired] = &strings(SCRIPT, &Value::Array(entry[..2].to_vec()))?[..] else {
            return Err(unexpected(SCRIPT, entry.len()));
        };
        let tally = Tally::decode(SCRIPT, desired, &strings(SCRIPT, &entry[2])?, now_ms)?;
        if name.is_empty() {
            let (_, home_tally) = locations
                .iter_mut()
                .find(|(location, _)| *location == home)
                .ok_or_else(|| unexpected(SCRIPT, "FleetIQ servers without the home location"))?;
            home_tally.add(&tally);
        } else {
            locations.push((name.clone(), tally));
        }
    }
    Ok(UtilizationRead::Read(Utilization { now_ms, locations }))
}
