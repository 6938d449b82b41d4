//! The input checks of the session service's requests (`GameSessionService` and `PlayerSessionService`), against
//! the limits their contracts (`berth/session/v1/game_sessions.proto`, `player_sessions.proto`) state field by
//! field.
//!
//! Each check looks at the whole request before anything is read or changed, and reports every broken rule at once
//! (see [`Violations`]). Rules that depend on stored state — at most 16 properties after an update's merge, a new
//! maximum not below the current player count, a page token issued for the same filters — are the store's to
//! enforce.

use std::collections::HashMap;

use berth_proto::common::v1::KeyValue;
use berth_proto::session::v1 as pb;
use pb::describe_player_sessions_request::Selector;
use tonic::Status;

use super::{GAME_SESSION_ID_MAX, PLAYER_SESSION_ID_MAX, fleet_of};
use crate::game_server::{PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, check_fleet_id};
use crate::process::LOCATION_LEN;
use crate::search::{self, Filter, Sort};
use crate::validate::{Violations, check_count, check_page_size, checked_entries, is_id_char};
use crate::watch::{check_event_types, check_watch_start, check_watched_fleets};

/// Most player sessions holding a slot in one game session at once.
pub const MAXIMUM_PLAYERS_MAX: u32 = 1000;
/// Longest game-session name, in characters.
pub const NAME_MAX: usize = 1024;
/// Most game properties of a game session, and most entries of one request.
pub const PROPERTIES_MAX: usize = 16;
/// Game-property keys: 1 to 32 characters.
pub const PROPERTY_KEY_LEN: (usize, usize) = (1, 32);
/// Longest game-property value, in characters.
pub const PROPERTY_VALUE_MAX: usize = 96;
/// Largest game-session data and matchmaker data, in bytes of UTF-8.
pub const DATA_BYTES_MAX: usize = 262_144;
/// Longest creator id, in characters.
pub const CREATOR_ID_MAX: usize = 1024;
/// Longest idempotency token, in characters.
pub const IDEMPOTENCY_TOKEN_MAX: usize = 48;
/// Most ids in one DescribeGameSessions request.
pub const DESCRIBE_IDS_MAX: usize = 100;
/// Most statuses in a ListGameSessions filter.
pub const STATUSES_MAX: usize = 5;
/// Longest page token accepted back, in characters.
pub const PAGE_TOKEN_MAX: usize = 1024;
/// Largest page of a search.
pub const SEARCH_PAGE_SIZE_MAX: u32 = 100;
/// Page size of a search that leaves it at 0.
pub const SEARCH_PAGE_SIZE_DEFAULT: u32 = 20;
/// Longest player id, in characters.
pub const PLAYER_ID_MAX: usize = 1024;
/// Longest player data, in characters.
pub const PLAYER_DATA_MAX: usize = 2048;
/// Most players in one CreatePlayerSessions request.
pub const PLAYERS_PER_BATCH_MAX: usize = 25;
/// Most game-session ids in one watch filter.
pub const WATCH_IDS_MAX: usize = 100;
/// Most event types in one watch filter.
pub const EVENT_TYPES_MAX: usize = 10;

/// Checks a game-session id in `field`: one Berth could have issued, `<fleet_id>/gsess-<uuid>`.
pub fn check_game_session_id(v: &mut Violations, field: &str, id: &str) {
    if check_id_length(v, field, id, GAME_SESSION_ID_MAX) {
        check_session_id(v, field, id, "gsess-", "game session");
    }
}

/// Checks a player-session id in `field`: one Berth could have issued, `<fleet_id>/psess-<uuid>-<n>` (or
/// `<fleet_id>/psess-<uuid>`, as releases before numbered ones did).
pub fn check_player_session_id(v: &mut Violations, field: &str, id: &str) {
    if check_id_length(v, field, id, PLAYER_SESSION_ID_MAX) {
        check_session_id(v, field, id, "psess-", "player session");
    }
}

/// Checks that an id is 1 to `max` characters long; answers whether it is.
fn check_id_length(v: &mut Violations, field: &str, id: &str, max: usize) -> bool {
    let len = id.chars().count();
    let fits = (1..=max).contains(&len);
    if !fits {
        v.add(field, format!("must be 1 to {max} characters long, got {len}"));
    }
    fits
}

/// Checks a session id of the kind whose ids start `<fleet_id>/<kind>`.
fn check_session_id(v: &mut Violations, field: &str, id: &str, kind: &str, what: &str) {
    // The store routes by the fleet part, which it puts inside a Redis hash tag: a brace in it would move the
    // keys to another slot, so the fleet part must be a valid fleet id and not merely present.
    let well_formed = fleet_of(id).is_some_and(|fleet_id| {
        let rest = &id[fleet_id.len() + 1..];
        fleet_id.chars().all(is_id_char)
            && rest
                .strip_prefix(kind)
                .is_some_and(|uuid| !uuid.is_empty() && uuid.chars().all(is_id_char))
    });
    if !well_formed {
        v.add(field, format!("is not a {what} id issued by Berth"));
    }
}

/// Checks game properties, in `game_properties`: at most 16, keys unique, key 1 to 32 and value at most 96
/// characters. An empty value is allowed (in an update it removes the key).
pub fn check_game_properties(v: &mut Violations, properties: &[KeyValue]) {
    check_count(v, "game_properties", properties.len(), 0, PROPERTIES_MAX);
    let mut seen = HashMap::new();
    for (i, property) in checked_entries(properties, PROPERTIES_MAX) {
        let key_field = format!("game_properties[{i}].key");
        let key_len = property.key.chars().count();
        if !(PROPERTY_KEY_LEN.0..=PROPERTY_KEY_LEN.1).contains(&key_len) {
            let (min, max) = PROPERTY_KEY_LEN;
            v.add(
                &key_field,
                format!("must be {min} to {max} characters long, got {key_len}"),
            );
        } else if let Some(first) = seen.insert(property.key.as_str(), i) {
            v.add(&key_field, format!("repeats the key of game_properties[{first}]"));
        }
        v.text(
            &format!("game_properties[{i}].value"),
            &property.value,
            PROPERTY_VALUE_MAX,
        );
    }
}

/// Checks a CreateGameSession request.
pub fn check_create_game_session(req: &pb::CreateGameSessionRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_location(&mut v, &req.location);
    check_maximum_players(&mut v, req.maximum_player_session_count);
    v.text("name", &req.name, NAME_MAX);
    check_game_properties(&mut v, &req.game_properties);
    check_data(&mut v, "game_session_data", &req.game_session_data);
    check_data(&mut v, "matchmaker_data", &req.matchmaker_data);
    v.text("creator_id", &req.creator_id, CREATOR_ID_MAX);
    check_idempotency_token(&mut v, &req.idempotency_token);
    check_policies(&mut v, req.player_session_creation_policy, req.protection_policy);
    v.into_result()
}

/// Checks a DescribeGameSessions request.
pub fn check_describe_game_sessions(req: &pb::DescribeGameSessionsRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_count(
        &mut v,
        "game_session_ids",
        req.game_session_ids.len(),
        1,
        DESCRIBE_IDS_MAX,
    );
    for (i, id) in checked_entries(&req.game_session_ids, DESCRIBE_IDS_MAX) {
        check_game_session_id(&mut v, &format!("game_session_ids[{i}]"), id);
    }
    v.into_result()
}

/// Checks a ListGameSessions request.
pub fn check_list_game_sessions(req: &pb::ListGameSessionsRequest) -> Result<usize, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_location(&mut v, &req.location);
    check_count(&mut v, "statuses", req.statuses.len(), 0, STATUSES_MAX);
    for (i, status) in checked_entries(&req.statuses, STATUSES_MAX) {
        // UNSPECIFIED means "any" for the whole filter, which an empty list already says; within a list it would
        // be ambiguous.
        if !matches!(pb::GameSessionStatus::try_from(*status), Ok(s) if s != pb::GameSessionStatus::Unspecified) {
            v.add(
                &format!("statuses[{i}]"),
                format!("must be ACTIVATING, ACTIVE, TERMINATING, TERMINATED or ERROR, got {status}"),
            );
        }
    }
    let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
    v.text("page_token", &req.page_token, PAGE_TOKEN_MAX);
    v.into_result().map(|()| size)
}

/// Checks an UpdateGameSession request. Unset fields are left alone; the store enforces the rules that need the
/// session as it stands.
pub fn check_update_game_session(req: &pb::UpdateGameSessionRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_game_session_id(&mut v, "game_session_id", &req.game_session_id);
    if let Some(maximum) = req.maximum_player_session_count {
        check_maximum_players(&mut v, maximum);
    }
    if let Some(name) = &req.name {
        v.text("name", name, NAME_MAX);
    }
    check_game_properties(&mut v, &req.game_properties);
    if let Some(data) = &req.matchmaker_data {
        check_data(&mut v, "matchmaker_data", data);
    }
    check_policies(&mut v, req.player_session_creation_policy, req.protection_policy);
    v.into_result()
}

/// Checks a TerminateGameSession request: the mode is required.
pub fn check_terminate_game_session(req: &pb::TerminateGameSessionRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_game_session_id(&mut v, "game_session_id", &req.game_session_id);
    match pb::TerminationMode::try_from(req.termination_mode) {
        Ok(pb::TerminationMode::TriggerOnProcessTerminate | pb::TerminationMode::ForceTerminate) => {}
        Ok(pb::TerminationMode::Unspecified) => {
            v.add(
                "termination_mode",
                "must be set: TRIGGER_ON_PROCESS_TERMINATE or FORCE_TERMINATE",
            );
        }
        Err(_) => v.add(
            "termination_mode",
            format!(
                "must be TRIGGER_ON_PROCESS_TERMINATE or FORCE_TERMINATE, got {}",
                req.termination_mode
            ),
        ),
    }
    v.into_result()
}

/// Checks a SearchGameSessions request and parses its expressions; with the page size to serve.
pub fn check_search_game_sessions(req: &pb::SearchGameSessionsRequest) -> Result<(Filter, Sort, usize), Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_location(&mut v, &req.location);
    let filter = search::check_filter(&mut v, &req.filter_expression);
    let sort = search::check_sort(&mut v, &req.sort_expression);
    let size = check_page_size(&mut v, req.page_size, SEARCH_PAGE_SIZE_MAX, SEARCH_PAGE_SIZE_DEFAULT);
    v.text("page_token", &req.page_token, PAGE_TOKEN_MAX);
    v.into_result()?;
    // A refused expression is always recorded as a violation, so both are parsed here.
    let (filter, sort) = filter
        .zip(sort)
        .ok_or_else(|| Status::internal("search expression refused without a violation"))?;
    Ok((filter, sort, size))
}

/// Checks a CreatePlayerSession request.
pub fn check_create_player_session(req: &pb::CreatePlayerSessionRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_game_session_id(&mut v, "game_session_id", &req.game_session_id);
    check_player_id(&mut v, "player_id", &req.player_id);
    v.text("player_data", &req.player_data, PLAYER_DATA_MAX);
    v.into_result()
}

/// Checks a CreatePlayerSessions request: 1 to 25 players, each at most once.
pub fn check_create_player_sessions(req: &pb::CreatePlayerSessionsRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_game_session_id(&mut v, "game_session_id", &req.game_session_id);
    check_count(&mut v, "players", req.players.len(), 1, PLAYERS_PER_BATCH_MAX);
    // The batch is all or none and idempotent per player: a player twice in it would either take two slots or
    // make the answer ambiguous, so it is refused.
    let mut seen = HashMap::new();
    for (i, player) in checked_entries(&req.players, PLAYERS_PER_BATCH_MAX) {
        let id_field = format!("players[{i}].player_id");
        check_player_id(&mut v, &id_field, &player.player_id);
        if !player.player_id.is_empty()
            && let Some(first) = seen.insert(player.player_id.as_str(), i)
        {
            v.add(&id_field, format!("repeats the player id of players[{first}]"));
        }
        v.text(
            &format!("players[{i}].player_data"),
            &player.player_data,
            PLAYER_DATA_MAX,
        );
    }
    v.into_result()
}

/// Checks a DescribePlayerSessions request: exactly one selector, well formed.
pub fn check_describe_player_sessions(req: &pb::DescribePlayerSessionsRequest) -> Result<usize, Status> {
    let mut v = Violations::new();
    // Being a oneof, the selector cannot hold two choices once decoded (the last one on the wire wins); only its
    // absence is left to refuse.
    match &req.selector {
        None => v.add(
            "selector",
            "must set one of player_session_id, player_id or game_session_id",
        ),
        Some(Selector::PlayerSessionId(id)) => check_player_session_id(&mut v, "player_session_id", id),
        Some(Selector::PlayerId(id)) => check_player_id(&mut v, "player_id", id),
        Some(Selector::GameSessionId(id)) => check_game_session_id(&mut v, "game_session_id", id),
    }
    if pb::PlayerSessionStatus::try_from(req.status_filter).is_err() {
        v.add(
            "status_filter",
            format!(
                "must be RESERVED, ACTIVE, COMPLETED, TIMEDOUT or unset, got {}",
                req.status_filter
            ),
        );
    }
    let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
    v.text("page_token", &req.page_token, PAGE_TOKEN_MAX);
    v.into_result().map(|()| size)
}

/// Checks a WatchSessionEvents request.
pub fn check_watch_session_events(req: &pb::WatchSessionEventsRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_watched_fleets(&mut v, &req.fleet_ids);
    check_count(&mut v, "game_session_ids", req.game_session_ids.len(), 0, WATCH_IDS_MAX);
    for (i, id) in checked_entries(&req.game_session_ids, WATCH_IDS_MAX) {
        check_game_session_id(&mut v, &format!("game_session_ids[{i}]"), id);
    }
    check_event_types(
        &mut v,
        &req.event_types,
        EVENT_TYPES_MAX,
        |t| matches!(pb::SessionEventType::try_from(t), Ok(t) if t != pb::SessionEventType::Unspecified),
    );
    check_watch_start(&mut v, &req.after_cursor, req.from_oldest);
    v.into_result()
}

/// An empty location means the fleet's home location (create) or every location (list, search).
fn check_location(v: &mut Violations, location: &str) {
    if !location.is_empty() {
        v.id("location", location, LOCATION_LEN.0, LOCATION_LEN.1);
    }
}

/// Checks a maximum player session count.
pub(crate) fn check_maximum_players(v: &mut Violations, maximum: u32) {
    if !(1..=MAXIMUM_PLAYERS_MAX).contains(&maximum) {
        v.add(
            "maximum_player_session_count",
            format!("must be 1 to {MAXIMUM_PLAYERS_MAX}, got {maximum}"),
        );
    }
}

/// The data limit is in bytes, not characters, since it bounds what the store and the streams carry; prost has
/// already refused anything that is not UTF-8.
pub(crate) fn check_data(v: &mut Violations, field: &str, data: &str) {
    if data.len() > DATA_BYTES_MAX {
        v.add(
            field,
            format!("must be at most {DATA_BYTES_MAX} bytes of UTF-8, got {}", data.len()),
        );
    }
}

/// Player ids are free text chosen by the game, but an empty one could not be told apart from "no player".
pub(crate) fn check_player_id(v: &mut Violations, field: &str, player_id: &str) {
    let len = player_id.chars().count();
    if !(1..=PLAYER_ID_MAX).contains(&len) {
        v.add(
            field,
            format!("must be 1 to {PLAYER_ID_MAX} characters long, got {len}"),
        );
    }
}

/// Unlike ids, tokens may not hold `.`, as GameLift's.
pub(crate) fn check_idempotency_token(v: &mut Violations, token: &str) {
    let len = token.chars().count();
    if len > IDEMPOTENCY_TOKEN_MAX {
        v.add(
            "idempotency_token",
            format!("must be at most {IDEMPOTENCY_TOKEN_MAX} characters long, got {len}"),
        );
    } else if let Some(bad) = token
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
    {
        v.add(
            "idempotency_token",
            format!("may hold only A-Z a-z 0-9 _ - characters, got {bad:?}"),
        );
    }
}

/// UNSPECIFIED is allowed in both policies: it means the default on create and "unchanged" on update.
fn check_policies(v: &mut Violations, creation_policy: i32, protection_policy: i32) {
    if pb::PlayerSessionCreationPolicy::try_from(creation_policy).is_err() {
        v.add(
            "player_session_creation_policy",
            format!("must be ACCEPT_ALL, DENY_ALL or unset, got {creation_policy}"),
        );
    }
    if pb::ProtectionPolicy::try_from(protection_policy).is_err() {
        v.add(
            "protection_policy",
            format!("must be NO_PROTECTION, FULL_PROTECTION or unset, got {protection_policy}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use tonic_types::StatusExt;

    use super::*;
    use crate::game_session::{new_game_session_id, player_session_id};

    /// The fields a refusal names, in order; empty when the request passed.
    fn fields<T>(result: Result<T, Status>) -> Vec<String> {
        match result {
            Ok(_) => Vec::new(),
            Err(status) => {
                let bad = status.get_details_bad_request().expect("field violations attached");
                for violation in &bad.field_violations {
                    assert!(status.message().contains(&violation.field), "{}", status.message());
                }
                bad.field_violations.into_iter().map(|f| f.field).collect()
            }
        }
    }

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }

    fn gsess() -> String {
        new_game_session_id("fleet-1")
    }

    fn props(count: usize) -> Vec<KeyValue> {
        (0..count).map(|i| kv(&format!("key{i}"), "v")).collect()
    }

    fn create() -> pb::CreateGameSessionRequest {
        pb::CreateGameSessionRequest {
            fleet_id: "fleet-1".into(),
            location: "eu-west-1".into(),
            maximum_player_session_count: 10,
            name: "match".into(),
            game_properties: vec![kv("mode", "ranked"), kv("map", "")],
            game_session_data: "{}".into(),
            creator_id: "player 1".into(),
            idempotency_token: "token_1-A".into(),
            matchmaker_data: "{}".into(),
            player_session_creation_policy: pb::PlayerSessionCreationPolicy::DenyAll as i32,
            protection_policy: pb::ProtectionPolicy::FullProtection as i32,
        }
    }

    type Edit<R> = fn(&mut R);

    /// Applies each edit to a valid request and compares the fields the check then names.
    fn assert_table<R: Clone, T>(valid: R, check: fn(&R) -> Result<T, Status>, table: &[(&[&str], Edit<R>)]) {
        assert_eq!(fields(check(&valid)), Vec::<String>::new(), "the valid request");
        for (i, (expected, edit)) in table.iter().enumerate() {
            let mut req = valid.clone();
            edit(&mut req);
            assert_eq!(fields(check(&req)), *expected, "row {i}");
        }
    }

    #[test]
    fn session_ids_must_be_of_their_kind_and_well_formed() {
        let check = |id: &str, game: bool| {
            let mut v = Violations::new();
            if game {
                check_game_session_id(&mut v, "id", id);
            } else {
                check_player_session_id(&mut v, "id", id);
            }
            v.into_result().map_err(|status| status.message().to_owned())
        };
        let longest = new_game_session_id(&"f".repeat(128));
        assert_eq!(longest.chars().count(), GAME_SESSION_ID_MAX);
        assert!(check(&longest, true).is_ok());
        assert!(check(&player_session_id(&new_game_session_id("fleet-1"), 1), false).is_ok());
        let not_issued = [
            "fleet-1",
            "fleet-1/psess-1",
            "/gsess-1",
            "fleet-1/gsess-",
            "a{b}/gsess-1",
            "f/gsess-a/b",
        ];
        for id in not_issued {
            let message = check(id, true).unwrap_err();
            assert!(
                message.contains("is not a game session id issued by Berth"),
                "{id}: {message}"
            );
        }
        assert!(check(&gsess(), false).unwrap_err().contains("player session id"));
        let longest_player = player_session_id(&longest, 9_999_999_999);
        assert!(check(&longest_player, false).is_ok());
        assert!(
            check(&format!("{longest_player}0"), false)
                .unwrap_err()
                .contains("1 to 182 characters")
        );
        assert!(check("", true).unwrap_err().contains("1 to 171 characters"));
        assert!(
            check(&format!("{longest}0"), true)
                .unwrap_err()
                .contains("1 to 171 characters")
        );
    }

    #[test]
    fn create_game_session_limits() {
        assert_table(
            create(),
            check_create_game_session,
            &[
                // Exactly at the limits.
                (&[], |r| r.location.clear()),
                (&[], |r| r.maximum_player_session_count = 1000),
                (&[], |r| r.name = "n".repeat(1024)),
                (&[], |r| r.game_properties = props(16)),
                (&[], |r| r.game_properties = vec![kv(&"k".repeat(32), &"v".repeat(96))]),
                (&[], |r| r.game_session_data = "é".repeat(131_072)),
                (&[], |r| r.matchmaker_data = "x".repeat(262_144)),
                (&[], |r| r.creator_id = "c".repeat(1024)),
                (&[], |r| r.idempotency_token = "t".repeat(48)),
                (&[], |r| r.idempotency_token.clear()),
                (&[], |r| r.player_session_creation_policy = 0),
                (&[], |r| r.protection_policy = 0),
                // Just over.
                (&["fleet_id"], |r| r.fleet_id.clear()),
                (&["fleet_id"], |r| r.fleet_id = "f".repeat(129)),
                (&["location"], |r| r.location = "l".repeat(65)),
                (&["location"], |r| r.location = "eu west".into()),
                (&["maximum_player_session_count"], |r| {
                    r.maximum_player_session_count = 0
                }),
                (&["maximum_player_session_count"], |r| {
                    r.maximum_player_session_count = 1001
                }),
                (&["name"], |r| r.name = "n".repeat(1025)),
                (&["game_properties"], |r| r.game_properties = props(17)),
                (&["game_properties[1].key"], |r| r.game_properties[1].key.clear()),
                (&["game_properties[1].key"], |r| {
                    r.game_properties[1].key = "k".repeat(33)
                }),
                (&["game_properties[1].key"], |r| {
                    r.game_properties[1].key = "mode".into()
                }),
                (&["game_properties[0].value"], |r| {
                    r.game_properties[0].value = "v".repeat(97)
                }),
                (&["game_session_data"], |r| {
                    r.game_session_data = "é".repeat(131_072) + "x"
                }),
                (&["matchmaker_data"], |r| r.matchmaker_data = "x".repeat(262_145)),
                (&["creator_id"], |r| r.creator_id = "c".repeat(1025)),
                (&["idempotency_token"], |r| r.idempotency_token = "t".repeat(49)),
                (&["idempotency_token"], |r| r.idempotency_token = "a.b".into()),
                (&["player_session_creation_policy"], |r| {
                    r.player_session_creation_policy = 3
                }),
                (&["protection_policy"], |r| r.protection_policy = -1),
                // Every broken rule at once.
                (&["fleet_id", "name", "creator_id"], |r| {
                    r.fleet_id.clear();
                    r.name = "n".repeat(1025);
                    r.creator_id = "c".repeat(1025);
                }),
            ],
        );
    }

    #[test]
    fn describe_and_list_game_sessions_limits() {
        let describe = pb::DescribeGameSessionsRequest {
            game_session_ids: vec![gsess(), gsess()],
        };
        assert_table(
            describe,
            check_describe_game_sessions,
            &[
                (&[], |r| r.game_session_ids = (0..100).map(|_| gsess()).collect()),
                (&["game_session_ids"], |r| r.game_session_ids.clear()),
                (&["game_session_ids"], |r| {
                    r.game_session_ids = (0..101).map(|_| gsess()).collect()
                }),
                (&["game_session_ids[1]"], |r| {
                    r.game_session_ids[1] = player_session_id(&new_game_session_id("f"), 1)
                }),
            ],
        );
        let list = pb::ListGameSessionsRequest {
            fleet_id: "fleet-1".into(),
            location: String::new(),
            statuses: vec![pb::GameSessionStatus::Active as i32],
            page_size: 0,
            page_token: String::new(),
        };
        assert_table(
            list,
            check_list_game_sessions,
            &[
                (&[], |r| r.statuses = (1..=5).collect()),
                (&[], |r| r.page_size = 1000),
                (&[], |r| r.page_token = "p".repeat(1024)),
                (&["fleet_id"], |r| r.fleet_id = "a/b".into()),
                (&["location"], |r| r.location = "l".repeat(65)),
                (&["statuses"], |r| r.statuses = vec![1; 6]),
                (&["statuses[0]"], |r| r.statuses = vec![0]),
                (&["statuses[1]"], |r| r.statuses = vec![1, 6]),
                (&["page_size"], |r| r.page_size = 1001),
                (&["page_token"], |r| r.page_token = "p".repeat(1025)),
            ],
        );
    }

    #[test]
    fn update_and_terminate_game_session_limits() {
        let update = pb::UpdateGameSessionRequest {
            game_session_id: gsess(),
            maximum_player_session_count: Some(10),
            name: Some("renamed".into()),
            game_properties: vec![kv("mode", "casual"), kv("map", "")],
            matchmaker_data: Some("{}".into()),
            ..Default::default()
        };
        assert_table(
            update,
            check_update_game_session,
            &[
                (&[], |r| {
                    *r = pb::UpdateGameSessionRequest {
                        game_session_id: gsess(),
                        ..Default::default()
                    }
                }),
                (&[], |r| r.maximum_player_session_count = Some(1000)),
                (&[], |r| r.game_properties = props(16)),
                (&[], |r| r.matchmaker_data = Some("x".repeat(262_144))),
                (&["game_session_id"], |r| r.game_session_id = "fleet-1".into()),
                (&["maximum_player_session_count"], |r| {
                    r.maximum_player_session_count = Some(0)
                }),
                (&["maximum_player_session_count"], |r| {
                    r.maximum_player_session_count = Some(1001)
                }),
                (&["name"], |r| r.name = Some("n".repeat(1025))),
                (&["game_properties"], |r| r.game_properties = props(17)),
                (&["game_properties[1].key"], |r| {
                    r.game_properties[1].key = "mode".into()
                }),
                (&["game_properties[0].value"], |r| {
                    r.game_properties[0].value = "v".repeat(97)
                }),
                (&["matchmaker_data"], |r| r.matchmaker_data = Some("x".repeat(262_145))),
                (&["player_session_creation_policy"], |r| {
                    r.player_session_creation_policy = 9
                }),
                (&["protection_policy"], |r| r.protection_policy = 9),
            ],
        );
        let terminate = pb::TerminateGameSessionRequest {
            game_session_id: gsess(),
            termination_mode: pb::TerminationMode::ForceTerminate as i32,
        };
        assert_table(
            terminate,
            check_terminate_game_session,
            &[
                (&[], |r| {
                    r.termination_mode = pb::TerminationMode::TriggerOnProcessTerminate as i32
                }),
                (&["game_session_id"], |r| r.game_session_id.clear()),
                (&["termination_mode"], |r| r.termination_mode = 0),
                (&["termination_mode"], |r| r.termination_mode = 3),
            ],
        );
    }

    #[test]
    fn search_game_sessions_limits_and_expressions() {
        let search = pb::SearchGameSessionsRequest {
            fleet_id: "fleet-1".into(),
            location: String::new(),
            filter_expression: "hasAvailablePlayerSessions = true AND gameSessionProperties.mode = 'ranked'".into(),
            sort_expression: "playerSessionCount DESC".into(),
            page_size: 0,
            page_token: String::new(),
        };
        assert!(check_search_game_sessions(&search).is_ok());
        assert_table(
            search,
            check_search_game_sessions,
            &[
                (&[], |r| r.page_size = 100),
                (&[], |r| r.filter_expression.clear()),
                (&[], |r| r.sort_expression.clear()),
                (&["fleet_id"], |r| r.fleet_id.clear()),
                (&["location"], |r| r.location = "l l".into()),
                (&["filter_expression"], |r| {
                    r.filter_expression = "playerSessionCount = 'x'".into()
                }),
                (&["sort_expression"], |r| {
                    r.sort_expression = "playerSessionCount".into()
                }),
                (&["page_size"], |r| r.page_size = 101),
                (&["page_token"], |r| r.page_token = "p".repeat(1025)),
            ],
        );
    }

    #[test]
    fn create_player_sessions_limits() {
        let one = pb::CreatePlayerSessionRequest {
            game_session_id: gsess(),
            player_id: "player 1".into(),
            player_data: "{}".into(),
        };
        assert_table(
            one,
            check_create_player_session,
            &[
                (&[], |r| r.player_id = "p".repeat(1024)),
                (&[], |r| r.player_data = "d".repeat(2048)),
                (&["game_session_id"], |r| {
                    r.game_session_id = player_session_id(&new_game_session_id("fleet-1"), 1)
                }),
                (&["player_id"], |r| r.player_id.clear()),
                (&["player_id"], |r| r.player_id = "p".repeat(1025)),
                (&["player_data"], |r| r.player_data = "d".repeat(2049)),
            ],
        );
        fn players(count: usize) -> Vec<pb::DesiredPlayerSession> {
            (0..count)
                .map(|i| pb::DesiredPlayerSession {
                    player_id: format!("player-{i}"),
                    player_data: String::new(),
                })
                .collect()
        }
        let batch = pb::CreatePlayerSessionsRequest {
            game_session_id: gsess(),
            players: players(3),
        };
        assert_table(
            batch,
            check_create_player_sessions,
            &[
                (&[], |r| r.players = players(25)),
                (&[], |r| r.players[2].player_data = "d".repeat(2048)),
                (&["game_session_id"], |r| r.game_session_id.clear()),
                (&["players"], |r| r.players.clear()),
                (&["players"], |r| r.players = players(26)),
                (&["players[2].player_id"], |r| {
                    r.players[2].player_id = "player-0".into()
                }),
                (&["players[1].player_id"], |r| r.players[1].player_id.clear()),
                (&["players[1].player_id"], |r| r.players[1].player_id = "p".repeat(1025)),
                (&["players[0].player_data"], |r| {
                    r.players[0].player_data = "d".repeat(2049)
                }),
            ],
        );
    }

    #[test]
    fn describe_player_sessions_needs_one_well_formed_selector() {
        let describe = pb::DescribePlayerSessionsRequest {
            selector: Some(Selector::PlayerId("player 1".into())),
            status_filter: pb::PlayerSessionStatus::Active as i32,
            page_size: 0,
            page_token: String::new(),
        };
        assert_table(
            describe,
            check_describe_player_sessions,
            &[
                (&[], |r| {
                    r.selector = Some(Selector::PlayerSessionId(player_session_id(
                        &new_game_session_id("f"),
                        1,
                    )))
                }),
                (&[], |r| r.selector = Some(Selector::GameSessionId(gsess()))),
                (&[], |r| r.selector = Some(Selector::PlayerId("p".repeat(1024)))),
                (&[], |r| r.status_filter = 0),
                (&[], |r| r.page_size = 1000),
                (&["selector"], |r| r.selector = None),
                (&["player_session_id"], |r| {
                    r.selector = Some(Selector::PlayerSessionId(gsess()))
                }),
                (&["game_session_id"], |r| {
                    r.selector = Some(Selector::GameSessionId(String::new()))
                }),
                (&["player_id"], |r| r.selector = Some(Selector::PlayerId(String::new()))),
                (&["player_id"], |r| {
                    r.selector = Some(Selector::PlayerId("p".repeat(1025)))
                }),
                (&["status_filter"], |r| r.status_filter = 5),
                (&["page_size"], |r| r.page_size = 1001),
                (&["page_token"], |r| r.page_token = "p".repeat(1025)),
            ],
        );
    }

    #[test]
    fn watch_session_events_limits() {
        let watch = pb::WatchSessionEventsRequest {
            fleet_ids: vec!["fleet-1".into()],
            game_session_ids: vec![gsess()],
            event_types: vec![pb::SessionEventType::GameSessionActivated as i32],
            after_cursor: "cursor".into(),
            from_oldest: false,
            include_game_session_data: true,
        };
        assert_table(
            watch,
            check_watch_session_events,
            &[
                (&[], |r| *r = pb::WatchSessionEventsRequest::default()),
                (&[], |r| r.fleet_ids = vec!["f".into(); 100]),
                (&[], |r| r.game_session_ids = (0..100).map(|_| gsess()).collect()),
                (&[], |r| r.event_types = vec![2, 3, 4, 5, 6, 10, 2, 3, 4, 5]),
                (&[], |r| r.after_cursor = "c".repeat(1024)),
                (&[], |r| {
                    r.after_cursor.clear();
                    r.from_oldest = true;
                }),
                (&["fleet_ids"], |r| r.fleet_ids = vec!["f".into(); 101]),
                (&["fleet_ids[0]"], |r| r.fleet_ids[0] = "f}".into()),
                (&["game_session_ids"], |r| {
                    r.game_session_ids = (0..101).map(|_| gsess()).collect()
                }),
                (&["game_session_ids[0]"], |r| r.game_session_ids[0] = "fleet-1".into()),
                (&["event_types"], |r| r.event_types = vec![2; 11]),
                (&["event_types[0]"], |r| r.event_types = vec![0]),
                (&["event_types[0]"], |r| r.event_types = vec![11]),
                (&["event_types[0]"], |r| r.event_types = vec![1]),
                (&["event_types[1]"], |r| r.event_types = vec![2, 9]),
                (&["after_cursor"], |r| r.after_cursor = "c".repeat(1025)),
                (&["from_oldest"], |r| r.from_oldest = true),
            ],
        );
    }

    #[test]
    fn an_oversized_list_is_refused_by_its_count_alone() {
        let mut req = create();
        req.game_properties = vec![kv("", ""); 10_000];
        let names = fields(check_create_game_session(&req));
        assert_eq!(names.first().map(String::as_str), Some("game_properties"));
        assert!(names.len() <= 1 + 2 * PROPERTIES_MAX, "{} violations", names.len());
    }

    #[test]
    fn page_size_zero_means_the_default() {
        let search = |page_size| pb::SearchGameSessionsRequest {
            fleet_id: "arena".into(),
            page_size,
            ..Default::default()
        };
        assert_eq!(check_search_game_sessions(&search(0)).unwrap().2, 20);
        assert_eq!(check_search_game_sessions(&search(7)).unwrap().2, 7);
    }
}
