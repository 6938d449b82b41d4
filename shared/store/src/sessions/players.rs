//! Player sessions: reserving slots (one script checks the count and takes them, all or none), and the game
//! server letting players in and out.

use berth_domain::game_session::{PlayerSessionRecord, game_session_of, player_session_number};
use redis::Value;

use crate::codec::{outcome_detail, stored_player_sessions, unexpected};
use crate::keys::FleetKeys;
use crate::scripts::{FunctionCall, LuaScript, scripts};
use crate::{Store, StoreError};

/// A player to reserve a slot for: player id and player data. A new player session's id is the store's to give
/// (`berth_domain::game_session::player_session_id`).
pub type NewPlayer<'a> = (&'a str, &'a str);

/// The outcome of reserving player sessions.
#[derive(Debug, PartialEq, Eq)]
pub enum PlayersCreated {
    /// One player session per player, in order (RESERVED, or the player's live one).
    Created(Vec<PlayerSessionRecord>),
    NotFound,
    /// The game session is not ACTIVE: its status.
    NotActive(String),
    /// The game session takes no new players.
    DenyAll,
    /// Fewer slots are free (given) than the new players.
    Full(u32),
    /// This player holds a live player session in it with other data.
    PlayerConflict(String),
}

/// Reserves slots for `players` in a game session, all or none.
pub async fn create_player_sessions(
    store: &Store,
    fleet_id: &str,
    game_session_id: &str,
    players: &[NewPlayer<'_>],
) -> Result<PlayersCreated, StoreError> {
    const SCRIPT: &str = "create_player_sessions";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().create_player_sessions.for_fleet(&keys);
    call.arg(game_session_id);
    for (player_id, data) in players {
        call.arg(*player_id).arg(*data);
    }
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, detail, rest) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "CREATED" => {
            let records = stored_player_sessions(SCRIPT, fleet_id, game_session_id, rest)?;
            if records.len() != players.len() {
                return Err(unexpected(SCRIPT, records.len()));
            }
            PlayersCreated::Created(records)
        }
        "NOT_FOUND" => PlayersCreated::NotFound,
        "NOT_ACTIVE" => PlayersCreated::NotActive(detail),
        "DENY_ALL" => PlayersCreated::DenyAll,
        "FULL" => PlayersCreated::Full(detail.parse().map_err(|_| unexpected(SCRIPT, &detail))?),
        "PLAYER_CONFLICT" => PlayersCreated::PlayerConflict(detail),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// The outcome of a game server accepting a player session.
#[derive(Debug, PartialEq, Eq)]
pub enum Accepted {
    /// ACTIVE.
    Accepted(Box<PlayerSessionRecord>),
    /// No such player session in that game session.
    NotFound,
    /// The player session belongs to a game session of another server.
    NotYours,
    /// Its game session is not ACTIVE: the game session's status.
    NotActive(String),
    /// It ended: its status (COMPLETED, TIMEDOUT).
    Ended(String),
}

/// A game server lets a player in: RESERVED → ACTIVE.
pub async fn accept_player_session(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    game_session_id: &str,
    player_session_id: &str,
) -> Result<Accepted, StoreError> {
    const SCRIPT: &str = "accept_player_session";
    let Some(call) = hosted_player_call(
        &scripts().accept_player_session,
        fleet_id,
        game_server_id,
        game_session_id,
        player_session_id,
    ) else {
        return Ok(Accepted::NotFound);
    };
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, detail, rest) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "ACCEPTED" => Accepted::Accepted(Box::new(one_player(SCRIPT, fleet_id, game_session_id, rest)?)),
        "NOT_FOUND" => Accepted::NotFound,
        "NOT_YOURS" => Accepted::NotYours,
        "NOT_ACTIVE" => Accepted::NotActive(detail),
        "ENDED" => Accepted::Ended(detail),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// The one player session an accept or remove answers.
fn one_player(
    script: &str,
    fleet_id: &str,
    game_session_id: &str,
    rest: &[Value],
) -> Result<PlayerSessionRecord, StoreError> {
    let mut records = stored_player_sessions(script, fleet_id, game_session_id, rest)?;
    match (records.pop(), records.is_empty()) {
        (Some(record), true) => Ok(record),
        _ => Err(unexpected(script, "not one player session")),
    }
}

/// The call of a game server's accept or remove of a player session (accept_player.lua's arguments): the game session
/// its id names and its number there, parsed here; None for an id Berth did not issue, which no session holds.
fn hosted_player_call<'s>(
    script: &'s LuaScript,
    fleet_id: &str,
    game_server_id: &str,
    game_session_id: &str,
    player_session_id: &str,
) -> Option<FunctionCall<'s>> {
    let own = game_session_of(player_session_id)?;
    let n = player_session_number(&own, player_session_id)?;
    let mut call = script.for_fleet(&FleetKeys::new(fleet_id));
    call.arg(game_server_id).arg(game_session_id).arg(own).arg(n);
    Some(call)
}

/// The outcome of a game server removing a player session.
#[derive(Debug, PartialEq, Eq)]
pub enum Removed {
    /// COMPLETED (now or before), as it now stands.
    Removed(Box<PlayerSessionRecord>),
    NotFound,
    NotYours,
}

/// A game server reports that a player left: the player session completes and frees its slot.
pub async fn remove_player_session(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    game_session_id: &str,
    player_session_id: &str,
) -> Result<Removed, StoreError> {
    const SCRIPT: &str = "remove_player_session";
    let Some(call) = hosted_player_call(
        &scripts().remove_player_session,
        fleet_id,
        game_server_id,
        game_session_id,
        player_session_id,
    ) else {
        return Ok(Removed::NotFound);
    };
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, _, rest) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "REMOVED" => Removed::Removed(Box::new(one_player(SCRIPT, fleet_id, game_session_id, rest)?)),
        "NOT_FOUND" => Removed::NotFound,
        "NOT_YOURS" => Removed::NotYours,
        other => return Err(unexpected(SCRIPT, other)),
    })
}
