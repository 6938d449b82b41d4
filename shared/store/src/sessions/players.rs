//! Player sessions: reserving slots (one script checks the count and takes them, all or none), and what the game
//! server letting players in and out comes to (the calls are `hosted`'s).

use berth_domain::game_session::PlayerSessionRecord;
use redis::Value;

use crate::codec::{outcome_detail, stored_player_sessions, unexpected};
use crate::keys::FleetKeys;
use crate::scripts::scripts;
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

/// The one player session an accept or remove answers.
pub(super) fn one_player(
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

/// The outcome of a game server removing a player session.
#[derive(Debug, PartialEq, Eq)]
pub enum Removed {
    /// COMPLETED (now or before), as it now stands.
    Removed(Box<PlayerSessionRecord>),
    NotFound,
    NotYours,
}
