//! The session event streams: one per fleet, appended to by every script that moves a game or player session, and
//! read by watchers. A position is a Redis stream id (`<ms>-<seq>`), taken from Redis' clock at the append.

use berth_domain::game_session::{GameSessionRecord, PlayerSessionRecord};
use std::collections::HashMap;

use redis::Value;

use super::{game_session, player_session};
use crate::game_servers::unexpected;
use crate::keys::FleetKeys;
use crate::{Store, StoreError};

/// What an event is about, as it was just after the transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    GameSession(Box<GameSessionRecord>),
    PlayerSession(Box<PlayerSessionRecord>),
}

/// One session event of a fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionEventEntry {
    /// Its position in the fleet's stream.
    pub position: String,
    /// A SessionEventType name without its prefix (GAME_SESSION_CREATED, PLAYER_SESSION_RESERVED, …).
    pub event_type: String,
    /// When it happened, ms since the epoch.
    pub time_ms: i64,
    pub subject: Subject,
}

fn decode(fleet_id: &str, position: String, pairs: &[String]) -> Result<SessionEventEntry, StoreError> {
    let field = |name: &str| {
        pairs
            .chunks_exact(2)
            .find(|pair| pair[0] == name)
            .map(|pair| pair[1].clone())
            .unwrap_or_default()
    };
    let subject = if field("kind") == "g" {
        let record = game_session(pairs)?.ok_or_else(|| unexpected("session event", "an empty game session"))?;
        Subject::GameSession(Box::new(record))
    } else {
        let endpoint = [field("loc"), field("ip"), field("dns"), field("port")];
        let record = player_session(fleet_id, pairs, &endpoint)
            .ok_or_else(|| unexpected("session event", "an empty player session"))?;
        Subject::PlayerSession(Box::new(record))
    };
    Ok(SessionEventEntry {
        position,
        event_type: field("type"),
        time_ms: field("t").parse().unwrap_or(0),
        subject,
    })
}

/// Up to `count` events of a fleet after `after` (a position; "0-0" for the oldest retained), oldest first.
pub async fn read_events(
    store: &Store,
    fleet_id: &str,
    after: &str,
    count: usize,
) -> Result<Vec<SessionEventEntry>, StoreError> {
    let entries: Vec<(String, Vec<String>)> = store
        .query(
            redis::cmd("XRANGE")
                .arg(FleetKeys::new(fleet_id).session_events())
                .arg(format!("({after}"))
                .arg("+")
                .arg("COUNT")
                .arg(count),
        )
        .await?;
    entries
        .into_iter()
        .map(|(position, pairs)| decode(fleet_id, position, &pairs))
        .collect()
}

/// A position as a comparable pair; `None` when malformed.
pub fn parse_position(position: &str) -> Option<(u64, u64)> {
    let (ms, seq) = position.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// Whether events after `position` were trimmed from a fleet's stream (by retention or its length cap), so that a
/// watcher resuming there would miss some: trimming removes the oldest entries, so that is when entries were removed
/// and `position` is older than the oldest one left (or than the last one ever added, when none is left).
pub async fn events_trimmed_after(store: &Store, fleet_id: &str, position: &str) -> Result<bool, StoreError> {
    let key = FleetKeys::new(fleet_id).session_events();
    let exists: bool = store.query(redis::cmd("EXISTS").arg(&key)).await?;
    if !exists {
        return Ok(false);
    }
    let info: HashMap<String, Value> = store.query(redis::cmd("XINFO").arg("STREAM").arg(&key)).await?;
    let number = |name: &str| {
        info.get(name)
            .and_then(|value| redis::from_redis_value_ref::<u64>(value).ok())
    };
    let id = |name: &str| {
        info.get(name)
            .and_then(|value| redis::from_redis_value_ref::<String>(value).ok())
            .and_then(|id| parse_position(&id))
    };
    let (Some(length), Some(added), Some(after)) =
        (number("length"), number("entries-added"), parse_position(position))
    else {
        return Err(unexpected("XINFO STREAM", "a reply without length or entries-added"));
    };
    if added == length {
        return Ok(false);
    }
    let oldest_left = if length > 0 {
        id("recorded-first-entry-id")
    } else {
        id("last-generated-id")
    };
    Ok(oldest_left.is_some_and(|oldest| after < oldest))
}

/// Redis' clock, ms since the epoch: the position a watch that starts now starts after.
pub async fn redis_now_ms(store: &Store) -> Result<i64, StoreError> {
    let (seconds, micros): (i64, i64) = store.query(&redis::cmd("TIME")).await?;
    Ok(seconds * 1000 + micros / 1000)
}

/// A game session's data and matchmaker data, which events leave out; empty when the session is gone.
pub async fn game_session_data(
    store: &Store,
    fleet_id: &str,
    game_session_id: &str,
) -> Result<(String, String), StoreError> {
    let key = format!("{}{game_session_id}", FleetKeys::new(fleet_id).game_session_prefix());
    let (data, mm): (Option<String>, Option<String>) =
        store.query(redis::cmd("HMGET").arg(key).arg("data").arg("mm")).await?;
    Ok((data.unwrap_or_default(), mm.unwrap_or_default()))
}
