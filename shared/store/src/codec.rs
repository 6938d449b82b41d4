//! How what Redis answers becomes Berth's records: the one place that reads stored hashes and script replies that
//! more than one area of the store sees (a process's desired state holds game sessions; a game session's scripts
//! answer with them), so that no area has to import another's decoders.

use std::borrow::Cow;
use std::collections::HashMap;

use berth_domain::game_session::{
    GameSessionRecord, GameSessionStatus, PlayerSessionRecord, PlayerSessionStatus, player_session_id,
};
use redis::Value;

use crate::StoreError;

/// The value of `name` in a flat name/value list; empty when absent.
pub(crate) fn field(pairs: &[String], name: &str) -> String {
    pairs
        .chunks_exact(2)
        .find(|pair| pair[0] == name)
        .map(|pair| pair[1].clone())
        .unwrap_or_default()
}

/// A reply that does not have the shape its script promises.
pub(crate) fn unexpected(script: &str, what: impl std::fmt::Debug) -> StoreError {
    StoreError::Unexpected(format!("{script} answered {what:?}"))
}

/// The reply shape most scripts share, `{outcome, now_ms, detail, rest...}`: the outcome word, the detail, and the
/// rest.
pub(crate) fn outcome_detail<'a>(script: &str, raw: &'a [Value]) -> Result<(String, String, &'a [Value]), StoreError> {
    let text = |value: &Value| {
        redis::from_redis_value_ref::<String>(value).map_err(|_| unexpected(script, "a malformed reply"))
    };
    let [outcome, _now, detail, rest @ ..] = raw else {
        return Err(unexpected(script, raw.len()));
    };
    Ok((text(outcome)?, text(detail)?, rest))
}

/// A record's stored fields from a script's reply of them, a flat name/value list; values as stored (a record may
/// hold encoded messages).
pub(crate) fn binary_fields(script: &str, raw: &[Value]) -> Result<HashMap<String, Vec<u8>>, StoreError> {
    let pairs: Vec<Vec<u8>> = raw
        .iter()
        .map(|value| redis::from_redis_value_ref(value).map_err(|_| unexpected(script, "a malformed field")))
        .collect::<Result<_, _>>()?;
    Ok(pairs
        .chunks_exact(2)
        .map(|pair| (String::from_utf8_lossy(&pair[0]).into_owned(), pair[1].clone()))
        .collect())
}

/// A field of [`binary_fields`] read as text; empty when missing.
pub(crate) fn text_field(fields: &HashMap<String, Vec<u8>>, name: &str) -> String {
    fields
        .get(name)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default()
}

/// A stream position (`<ms>-<seq>`, from Redis's clock) as a comparable pair; `None` when malformed.
pub fn parse_position(position: &str) -> Option<(u64, u64)> {
    let (ms, seq) = position.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// What one read of a fleet's event stream for a watcher found (the session events' and the fleet events' alike).
#[derive(Clone, Debug)]
pub struct EventsRead<E> {
    /// The time, ms since the epoch, on the node holding them when they were read: any event appended later has a
    /// position at or after it.
    pub now_ms: u64,
    /// Position of the last event trimmed (by retention or the cap); a reader before it missed it.
    pub gone: Option<(u64, u64)>,
    /// The events, oldest first.
    pub entries: Vec<E>,
}

/// The reply `{now_ms, last position trimmed or '', entries}` of a script that reads an event stream for watchers,
/// its entries decoded by `decode`.
pub(crate) fn events_read<R, E>(
    script: &str,
    (now, gone, entries): (String, String, Vec<R>),
    decode: impl FnMut(R) -> Result<E, StoreError>,
) -> Result<EventsRead<E>, StoreError> {
    Ok(EventsRead {
        now_ms: now.parse().map_err(|_| unexpected(script, &now))?,
        gone: if gone.is_empty() {
            None
        } else {
            Some(parse_position(&gone).ok_or_else(|| unexpected(script, &gone))?)
        },
        entries: entries.into_iter().map(decode).collect::<Result<_, _>>()?,
    })
}

/// Fields of a stored record by name.
type Fields<'a> = HashMap<&'a str, &'a str>;

pub(crate) fn strings(script: &str, value: &Value) -> Result<Vec<String>, StoreError> {
    redis::from_redis_value_ref(value).map_err(|_| unexpected(script, "a malformed reply"))
}

fn fields(pairs: &[String]) -> Fields<'_> {
    pairs
        .chunks_exact(2)
        .map(|pair| (pair[0].as_str(), pair[1].as_str()))
        .collect()
}

fn ms(fields: &Fields, name: &str) -> Option<i64> {
    fields.get(name).and_then(|value| value.parse().ok())
}

fn count(fields: &Fields, name: &str) -> u32 {
    fields.get(name).and_then(|value| value.parse().ok()).unwrap_or(0)
}

fn owned(fields: &Fields, name: &str) -> String {
    fields.get(name).map_or_else(String::new, |value| (*value).to_owned())
}

/// Game properties as stored: JSON `[[key, value], ...]` (Lua's cjson writes an empty list as `{}`).
pub(crate) fn properties(json: &str) -> Result<Vec<(String, String)>, StoreError> {
    match json {
        "" | "[]" | "{}" => Ok(Vec::new()),
        json => serde_json::from_str(json).map_err(|err| unexpected("game session", err.to_string())),
    }
}

/// A game session from its stored fields (a flat name/value list); `None` when empty (unknown or expired).
pub(crate) fn game_session(pairs: &[String]) -> Result<Option<GameSessionRecord>, StoreError> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let f = fields(pairs);
    let properties = properties(f.get("props").copied().unwrap_or(""))?;
    let status = f.get("status").and_then(|status| GameSessionStatus::parse(status));
    Ok(Some(GameSessionRecord {
        status,
        creation_ms: ms(&f, "c_ms").unwrap_or(0),
        // Kept once activated (activation leaves it, one write fewer), shown only while it applies.
        activation_deadline_ms: ms(&f, "act_by_ms").filter(|_| status == Some(GameSessionStatus::Activating)),
        activation_ms: ms(&f, "act_ms"),
        termination_ms: ms(&f, "end_ms"),
        termination_deadline_ms: ms(&f, "term_by_ms"),
        current_players: count(&f, "cur"),
        maximum_players: count(&f, "max"),
        port: count(&f, "port"),
        accepts_players: f.get("accept") == Some(&"1"),
        protected: f.get("prot") == Some(&"1"),
        server_ending: f.get("srv_end") == Some(&"1"),
        properties,
        game_session_id: owned(&f, "id"),
        fleet_id: owned(&f, "fleet"),
        location: owned(&f, "loc"),
        game_server_id: owned(&f, "server"),
        instance_id: owned(&f, "inst"),
        ip_address: owned(&f, "ip"),
        dns_name: owned(&f, "dns"),
        status_reason: owned(&f, "reason"),
        name: owned(&f, "name"),
        game_session_data: owned(&f, "data"),
        matchmaker_data: owned(&f, "mm"),
        creator_id: owned(&f, "creator"),
        placement_id: owned(&f, "placement"),
    }))
}

/// A value of a reply by position as text, borrowed when Redis sent a string: `Some(None)` for a null (Lua's false),
/// `None` for what is no text (a list, an error).
fn reply_text(value: &Value) -> Option<Option<Cow<'_, str>>> {
    match value {
        Value::Nil => Some(None),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok().map(|text| Some(Cow::Borrowed(text))),
        Value::SimpleString(text) => Some(Some(Cow::Borrowed(text.as_str()))),
        Value::Int(n) => Some(Some(Cow::Owned(n.to_string()))),
        _ => None,
    }
}

/// A reply's values by position as text (see [`reply_text`]).
fn reply_texts<'v>(script: &str, values: &'v [Value]) -> Result<Vec<Option<Cow<'v, str>>>, StoreError> {
    values
        .iter()
        .map(|value| reply_text(value).ok_or_else(|| unexpected(script, "a malformed player session")))
        .collect()
}

/// The player sessions of one game session as a reply by position holds them (sessions/lib.lua: players_reply,
/// append_player): the game session's `{loc, ip, dns, port}`, then 8 values per player session (see
/// [`stored_player`]).
pub(crate) fn stored_player_sessions(
    script: &str,
    fleet_id: &str,
    game_session_id: &str,
    values: &[Value],
) -> Result<Vec<PlayerSessionRecord>, StoreError> {
    let values = reply_texts(script, values)?;
    let [loc, ip, dns, port, sessions @ ..] = values.as_slice() else {
        return Err(unexpected(script, values.len()));
    };
    if sessions.len() % 8 != 0 {
        return Err(unexpected(script, values.len()));
    }
    let text = |value: &Option<Cow<'_, str>>| value.as_deref().unwrap_or_default().to_owned();
    let endpoint = [text(loc), text(ip), text(dns), text(port)];
    Ok(sessions
        .chunks_exact(8)
        .map(|session| stored_player(fleet_id, game_session_id, session, &endpoint))
        .collect())
}

/// One player session of game session `game_session_id` from its values by position — its number in the game
/// session (or the id an earlier release gave it), player, status, data, c_ms, act_ms, end_ms and its reservation
/// deadline, null (or left off, at the end) where it has none — and its game session's `{loc, ip, dns, port}`.
pub(crate) fn stored_player(
    fleet_id: &str,
    game_session_id: &str,
    values: &[Option<Cow<'_, str>>],
    endpoint: &[String; 4],
) -> PlayerSessionRecord {
    let at = |i: usize| values.get(i).and_then(|value| value.as_deref());
    let text = |i: usize| at(i).unwrap_or_default().to_owned();
    let ms = |i: usize| at(i).and_then(|ms| ms.parse().ok());
    let id = text(0);
    PlayerSessionRecord {
        player_session_id: match id.parse() {
            Ok(n) => player_session_id(game_session_id, n),
            Err(_) => id,
        },
        player_id: text(1),
        game_session_id: game_session_id.to_owned(),
        fleet_id: fleet_id.to_owned(),
        status: at(2).and_then(PlayerSessionStatus::parse),
        player_data: text(3),
        creation_ms: ms(4).unwrap_or(0),
        activation_ms: ms(5),
        termination_ms: ms(6),
        reserved_until_ms: ms(7),
        location: endpoint[0].clone(),
        ip_address: endpoint[1].clone(),
        dns_name: endpoint[2].clone(),
        port: endpoint[3].parse().unwrap_or(0),
    }
}

/// The values of one player session in a reply by position (see [`stored_player`]).
pub(crate) fn stored_player_values<'v>(
    script: &str,
    value: &'v Value,
) -> Result<Vec<Option<Cow<'v, str>>>, StoreError> {
    match value {
        Value::Array(values) if values.len() >= 7 => reply_texts(script, values),
        _ => Err(unexpected(script, "a malformed player session")),
    }
}

/// A player session from its stored fields and its game session's `{loc, ip, dns, port}`.
pub(crate) fn player_session(fleet_id: &str, pairs: &[String], endpoint: &[String]) -> Option<PlayerSessionRecord> {
    if pairs.is_empty() {
        return None;
    }
    let f = fields(pairs);
    let at = |i: usize| endpoint.get(i).cloned().unwrap_or_default();
    Some(PlayerSessionRecord {
        status: f.get("status").and_then(|status| PlayerSessionStatus::parse(status)),
        creation_ms: ms(&f, "c_ms").unwrap_or(0),
        reserved_until_ms: ms(&f, "until_ms"),
        activation_ms: ms(&f, "act_ms"),
        termination_ms: ms(&f, "end_ms"),
        player_session_id: owned(&f, "id"),
        player_id: owned(&f, "player"),
        game_session_id: owned(&f, "gs"),
        player_data: owned(&f, "data"),
        fleet_id: fleet_id.to_owned(),
        location: at(0),
        ip_address: at(1),
        dns_name: at(2),
        port: at(3).parse().unwrap_or(0),
    })
}
