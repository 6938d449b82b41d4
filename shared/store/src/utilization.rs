//! The live counts of a fleet's locations (GetFleetUtilization, and the autoscaler's inputs). The scripts of every
//! other area keep them as they change states (`fleets/tally.lua`), so reading them is a hash and a string per
//! location whatever the fleet's size: no scan, no recount. What a tally holds, and the figures made of it, are the domain's
//! (`berth_domain::fleet::utilization`).

pub use berth_domain::fleet::utilization::{Minute, Tally};
use std::collections::HashMap;

use redis::Value;

use crate::codec::{outcome_detail, strings, unexpected};
use crate::keys::FleetKeys;
use crate::keys::counts::counts_in;
use crate::scripts::{Area, scripts};
use crate::{Store, StoreError};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "utilization",
    helpers: &[],
    functions: &[("read_utilization", include_str!("utilization/read.lua"), true)],
};

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
    for entry in rest.chunks_exact(4) {
        let [name, desired] = &strings(SCRIPT, &Value::Array(entry[..2].to_vec()))?[..] else {
            return Err(unexpected(SCRIPT, entry.len()));
        };
        let Value::BulkString(counts) = &entry[3] else {
            return Err(unexpected(SCRIPT, "a location's counts that are not a string"));
        };
        let mut fields = strings(SCRIPT, &entry[2])?;
        fields.extend(counts_in(counts).into_iter().flat_map(|(name, value)| [name, value]));
        let tally = decode_tally(SCRIPT, desired, &fields, now_ms)?;
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

/// A location's tally from its fields (name, value, ...: its tally hash's, then its counts string's, see
/// `keys::counts`; a count in both is their sum) as of `now_ms`: counts, and the minutes of the last hour (older
/// ones are windows not yet written over).
fn decode_tally(script: &str, desired: &str, pairs: &[String], now_ms: u64) -> Result<Tally, StoreError> {
    let mut tally = Tally {
        desired_instances: desired.parse().map_err(|_| unexpected(script, desired))?,
        ..Tally::default()
    };
    let this_minute = now_ms / 60_000;
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for pair in pairs.chunks_exact(2) {
        let (name, value) = (pair[0].as_str(), pair[1].as_str());
        // A window is `w<minute mod 60>` (`waiting` and `waited_ms` are counts).
        if name.len() > 1 && name.starts_with('w') && name[1..].bytes().all(|b| b.is_ascii_digit()) {
            let parts: Vec<u64> = value
                .split('|')
                .map(|part| part.parse().map_err(|_| unexpected(script, value)))
                .collect::<Result<_, _>>()?;
            let [minute, ready_ms, ready, sessions_created, interrupted] = parts[..] else {
                return Err(unexpected(script, value));
            };
            if minute + 60 > this_minute {
                let kept = tally.minutes.entry(minute).or_default();
                kept.ready_ms += ready_ms;
                kept.ready += ready;
                kept.sessions_created += sessions_created;
                kept.interrupted += interrupted;
            }
        } else if name != "mca" && name != "hungry" {
            *counts.entry(name).or_default() += value.parse::<i64>().map_err(|_| unexpected(script, value))?;
        }
    }
    // Player slots as the sessions' shares count them (`session_counts` in fleets/tally.lua): players in sessions
    // with seats, players elsewhere, and those seats.
    let (mut open_players, mut other_players, mut seats) = (0_i64, 0_i64, 0_i64);
    for (name, value) in counts {
        if let Some(slot) = match name {
            "p_open" => Some(&mut open_players),
            "p_other" => Some(&mut other_players),
            "seats" => Some(&mut seats),
            _ => None,
        } {
            *slot = value;
        } else if let Some(count) = tally.stored_count_mut(name) {
            // A count is never below zero unless a script forgot to tally a change; a recount test guards that.
            *count = value.max(0) as u64;
        }
    }
    tally.player_sessions += (open_players + other_players).max(0) as u64;
    tally.free_player_slots += (seats - open_players).max(0) as u64;
    Ok(tally)
}
