//! Player sessions: reserving slots (one script checks the count and takes them, all or none), and the game
//! server letting players in and out.

use berth_domain::game_session::{PlayerSessionRecord, game_session_of, player_session_number};
use redis::Value;

use crate::codec::{outcome_detail, stored_player_sessions, unexpected};
use crate::keys::FleetKeys;
use crate::scripts::{FunctionCall, scripts};
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

/// The outcome of a game server removing a player session.
#[derive(Debug, PartialEq, Eq)]
pub enum Removed {
    /// COMPLETED (now or before), as it now stands.
    Removed(Box<PlayerSessionRecord>),
    NotFound,
    NotYours,
}

const ACCEPT: &str = "accept_player_session";
const REMOVE: &str = "remove_player_session";

/// A game server letting a player session in or out.
#[derive(Clone, Copy, Debug)]
pub enum PlayerChange<'a> {
    Accept {
        game_session_id: &'a str,
        player_session_id: &'a str,
    },
    Remove {
        game_session_id: &'a str,
        player_session_id: &'a str,
    },
}

/// What a [`PlayerChange`] came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Changed {
    Accepted(Accepted),
    Removed(Removed),
}

impl PlayerChange<'_> {
    /// The game session and player session it names.
    pub fn ids(&self) -> (&str, &str) {
        match *self {
            PlayerChange::Accept {
                game_session_id,
                player_session_id,
            }
            | PlayerChange::Remove {
                game_session_id,
                player_session_id,
            } => (game_session_id, player_session_id),
        }
    }

    /// Its call (accept_player.lua's or remove_player.lua's arguments): the game session the player session's id
    /// names and its number there, parsed here; None for an id Berth did not issue, which no session holds.
    fn call(&self, fleet_id: &str, game_server_id: &str) -> Option<FunctionCall<'static>> {
        let (game_session_id, player_session_id) = self.ids();
        let script = match self {
            PlayerChange::Accept { .. } => &scripts().accept_player_session,
            PlayerChange::Remove { .. } => &scripts().remove_player_session,
        };
        let own = game_session_of(player_session_id)?;
        let n = player_session_number(&own, player_session_id)?;
        let mut call = script.for_fleet(&FleetKeys::new(fleet_id));
        call.arg(game_server_id).arg(game_session_id).arg(own).arg(n);
        Some(call)
    }

    /// What it came to for a player session no game session holds.
    fn not_found(&self) -> Changed {
        match self {
            PlayerChange::Accept { .. } => Changed::Accepted(Accepted::NotFound),
            PlayerChange::Remove { .. } => Changed::Removed(Removed::NotFound),
        }
    }

    /// Its function's answer, decoded.
    fn answered(&self, fleet_id: &str, raw: &[Value]) -> Result<Changed, StoreError> {
        let (game_session_id, _) = self.ids();
        let script = match self {
            PlayerChange::Accept { .. } => ACCEPT,
            PlayerChange::Remove { .. } => REMOVE,
        };
        let (outcome, detail, rest) = outcome_detail(script, raw)?;
        let player = || one_player(script, fleet_id, game_session_id, rest).map(Box::new);
        Ok(match (self, outcome.as_str()) {
            (PlayerChange::Accept { .. }, "ACCEPTED") => Changed::Accepted(Accepted::Accepted(player()?)),
            (PlayerChange::Accept { .. }, "NOT_FOUND") => Changed::Accepted(Accepted::NotFound),
            (PlayerChange::Accept { .. }, "NOT_YOURS") => Changed::Accepted(Accepted::NotYours),
            (PlayerChange::Accept { .. }, "NOT_ACTIVE") => Changed::Accepted(Accepted::NotActive(detail)),
            (PlayerChange::Accept { .. }, "ENDED") => Changed::Accepted(Accepted::Ended(detail)),
            (PlayerChange::Remove { .. }, "REMOVED") => Changed::Removed(Removed::Removed(player()?)),
            (PlayerChange::Remove { .. }, "NOT_FOUND") => Changed::Removed(Removed::NotFound),
            (PlayerChange::Remove { .. }, "NOT_YOURS") => Changed::Removed(Removed::NotYours),
            (_, other) => return Err(unexpected(script, other)),
        })
    }
}

/// A game server lets a player in: RESERVED → ACTIVE.
pub async fn accept_player_session(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    game_session_id: &str,
    player_session_id: &str,
) -> Result<Accepted, StoreError> {
    let change = PlayerChange::Accept {
        game_session_id,
        player_session_id,
    };
    match change_one(store, fleet_id, game_server_id, change).await? {
        Changed::Accepted(accepted) => Ok(accepted),
        Changed::Removed(_) => Err(unexpected(ACCEPT, "a removal's answer")),
    }
}

/// A game server reports that a player left: the player session completes and frees its slot.
pub async fn remove_player_session(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    game_session_id: &str,
    player_session_id: &str,
) -> Result<Removed, StoreError> {
    let change = PlayerChange::Remove {
        game_session_id,
        player_session_id,
    };
    match change_one(store, fleet_id, game_server_id, change).await? {
        Changed::Removed(removed) => Ok(removed),
        Changed::Accepted(_) => Err(unexpected(REMOVE, "an acceptance's answer")),
    }
}

/// One change, in a round trip of its own.
async fn change_one(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    change: PlayerChange<'_>,
) -> Result<Changed, StoreError> {
    let Some(call) = change.call(fleet_id, game_server_id) else {
        return Ok(change.not_found());
    };
    let raw: Vec<Value> = store.invoke(&call).await?;
    change.answered(fleet_id, &raw)
}

/// A game server lets players in (RESERVED → ACTIVE) and out (→ COMPLETED, the slot freed): as many changes as it
/// sent together, in one round trip, run by Redis in their order, each answered apart. Either is safe to repeat, as
/// [`Store::invoke_each`] needs: an ACTIVE player session accepted again, or a COMPLETED one removed again, is answered
/// as it stands.
pub async fn change_players(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    changes: &[PlayerChange<'_>],
) -> Result<Vec<Result<Changed, StoreError>>, StoreError> {
    let mut sent = Vec::with_capacity(changes.len());
    let mut called = Vec::with_capacity(changes.len());
    for change in changes {
        let call = change.call(fleet_id, game_server_id);
        called.push(call.is_some());
        sent.extend(call);
    }
    let mut answers = store.invoke_each(&sent).await?.into_iter();
    let mut changed = Vec::with_capacity(changes.len());
    for (change, called) in changes.iter().zip(called) {
        if !called {
            changed.push(Ok(change.not_found()));
            continue;
        }
        let answer = answers
            .next()
            .ok_or_else(|| unexpected("change_players", "fewer answers than calls"))?;
        changed.push(answer.and_then(|raw| match raw {
            Value::Array(raw) => change.answered(fleet_id, &raw),
            other => Err(unexpected("change_players", format!("{other:?}"))),
        }));
    }
    Ok(changed)
}
