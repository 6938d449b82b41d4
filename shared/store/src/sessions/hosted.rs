//! What a game server changes in the sessions it hosts, over its stream: lets a player in or out, ends (or rejects) a
//! game session. Changes it sent together go to Redis in one round trip, as one pipeline that Redis runs in order, and
//! each is answered apart; one alone is one call.

use berth_domain::game_session::{game_session_of, player_session_number};
use redis::Value;

use super::players::one_player;
use super::{Accepted, Removed, ServerEnded, routed_session};
use crate::codec::{outcome_detail, unexpected};
use crate::keys::FleetKeys;
use crate::scripts::{FunctionCall, scripts};
use crate::{Store, StoreError};

const ACCEPT: &str = "accept_player_session";
const REMOVE: &str = "remove_player_session";
const END: &str = "end_game_session";

/// A change a game server makes to a session it hosts.
#[derive(Clone, Copy, Debug)]
pub enum HostedChange<'a> {
    /// AcceptPlayerSession: RESERVED → ACTIVE.
    Accept {
        game_session_id: &'a str,
        player_session_id: &'a str,
    },
    /// RemovePlayerSession: → COMPLETED, its slot freed.
    Remove {
        game_session_id: &'a str,
        player_session_id: &'a str,
    },
    /// EndGameSession, or RejectGameSession (`reject`).
    End { game_session_id: &'a str, reject: bool },
}

/// What a [`HostedChange`] came to.
#[derive(Debug, PartialEq)]
pub enum Changed {
    Accepted(Accepted),
    Removed(Removed),
    Ended(ServerEnded),
}

impl HostedChange<'_> {
    /// The game session it names.
    pub fn game_session_id(&self) -> &str {
        match *self {
            HostedChange::Accept { game_session_id, .. }
            | HostedChange::Remove { game_session_id, .. }
            | HostedChange::End { game_session_id, .. } => game_session_id,
        }
    }

    /// The player session it names, if it names one.
    pub fn player_session_id(&self) -> Option<&str> {
        match *self {
            HostedChange::Accept { player_session_id, .. } | HostedChange::Remove { player_session_id, .. } => {
                Some(player_session_id)
            }
            HostedChange::End { .. } => None,
        }
    }

    /// Its function call. A player session's is made with the game session its id names and its number there,
    /// parsed here; None for an id Berth did not issue, which no session holds.
    fn call(&self, fleet_id: &str, game_server_id: &str) -> Option<FunctionCall<'static>> {
        let keys = FleetKeys::new(fleet_id);
        let game_session_id = self.game_session_id();
        let (script, player_session_id) = match *self {
            HostedChange::Accept { player_session_id, .. } => (&scripts().accept_player_session, player_session_id),
            HostedChange::Remove { player_session_id, .. } => (&scripts().remove_player_session, player_session_id),
            HostedChange::End { reject, .. } => {
                let mut call = scripts().end_game_session.for_fleet(&keys);
                call.arg(game_server_id)
                    .arg(game_session_id)
                    .arg(if reject { "REJECT" } else { "END" });
                return Some(call);
            }
        };
        let own = game_session_of(player_session_id)?;
        let n = player_session_number(&own, player_session_id)?;
        let mut call = script.for_fleet(&keys);
        call.arg(game_server_id).arg(game_session_id).arg(own).arg(n);
        Some(call)
    }

    /// What it came to when no session holds what it names.
    fn not_found(&self) -> Changed {
        match self {
            HostedChange::Accept { .. } => Changed::Accepted(Accepted::NotFound),
            HostedChange::Remove { .. } => Changed::Removed(Removed::NotFound),
            HostedChange::End { .. } => Changed::Ended(ServerEnded::NotFound),
        }
    }

    /// Its function's answer, decoded.
    fn answered(&self, fleet_id: &str, raw: Vec<Value>) -> Result<Changed, StoreError> {
        if let HostedChange::End { .. } = self {
            let raw: Vec<String> = redis::from_redis_value(Value::Array(raw)).map_err(|err| unexpected(END, err))?;
            return server_ended(&raw).map(Changed::Ended);
        }
        let game_session_id = self.game_session_id();
        let script = match self {
            HostedChange::Accept { .. } => ACCEPT,
            _ => REMOVE,
        };
        let (outcome, detail, rest) = outcome_detail(script, &raw)?;
        let player = || one_player(script, fleet_id, game_session_id, rest).map(Box::new);
        Ok(match (self, outcome.as_str()) {
            (HostedChange::Accept { .. }, "ACCEPTED") => Changed::Accepted(Accepted::Accepted(player()?)),
            (HostedChange::Accept { .. }, "NOT_FOUND") => Changed::Accepted(Accepted::NotFound),
            (HostedChange::Accept { .. }, "NOT_YOURS") => Changed::Accepted(Accepted::NotYours),
            (HostedChange::Accept { .. }, "NOT_ACTIVE") => Changed::Accepted(Accepted::NotActive(detail)),
            (HostedChange::Accept { .. }, "ENDED") => Changed::Accepted(Accepted::Ended(detail)),
            (HostedChange::Remove { .. }, "REMOVED") => Changed::Removed(Removed::Removed(player()?)),
            (HostedChange::Remove { .. }, "NOT_FOUND") => Changed::Removed(Removed::NotFound),
            (HostedChange::Remove { .. }, "NOT_YOURS") => Changed::Removed(Removed::NotYours),
            (_, other) => return Err(unexpected(script, other)),
        })
    }
}

/// Decodes end_game_session's answer.
fn server_ended(raw: &[String]) -> Result<ServerEnded, StoreError> {
    let (outcome, routing, detail, session) = routed_session(END, raw)?;
    Ok(match outcome.as_str() {
        "ENDED" => ServerEnded::Ended(session.map(Box::new).ok_or_else(|| unexpected(END, &outcome))?, routing),
        "NOT_FOUND" => ServerEnded::NotFound,
        "NOT_YOURS" => ServerEnded::NotYours,
        "WRONG_STATE" => ServerEnded::WrongState(detail),
        other => return Err(unexpected(END, other)),
    })
}

/// One change, in a round trip of its own.
async fn change_one(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    change: HostedChange<'_>,
) -> Result<Changed, StoreError> {
    let Some(call) = change.call(fleet_id, game_server_id) else {
        return Ok(change.not_found());
    };
    let raw: Vec<Value> = store.invoke(&call).await?;
    change.answered(fleet_id, raw)
}

/// A game server lets a player in: RESERVED → ACTIVE.
pub async fn accept_player_session(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    game_session_id: &str,
    player_session_id: &str,
) -> Result<Accepted, StoreError> {
    let change = HostedChange::Accept {
        game_session_id,
        player_session_id,
    };
    match change_one(store, fleet_id, game_server_id, change).await? {
        Changed::Accepted(accepted) => Ok(accepted),
        other => Err(unexpected(ACCEPT, other)),
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
    let change = HostedChange::Remove {
        game_session_id,
        player_session_id,
    };
    match change_one(store, fleet_id, game_server_id, change).await? {
        Changed::Removed(removed) => Ok(removed),
        other => Err(unexpected(REMOVE, other)),
    }
}

/// A game server ends a game session it hosts (EndGameSession), or refuses one it was given (`reject`).
pub async fn end_game_session(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    game_session_id: &str,
    reject: bool,
) -> Result<ServerEnded, StoreError> {
    let change = HostedChange::End {
        game_session_id,
        reject,
    };
    match change_one(store, fleet_id, game_server_id, change).await? {
        Changed::Ended(ended) => Ok(ended),
        other => Err(unexpected(END, other)),
    }
}

/// Changes a game server sent together: in one round trip, run by Redis in their order, each answered apart. Each is
/// safe to repeat, as [`Store::invoke_each`] needs: an ACTIVE player session accepted again, a COMPLETED one removed
/// again, or an ended game session ended again, is answered as it stands.
pub async fn change_hosted(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    changes: &[HostedChange<'_>],
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
            .ok_or_else(|| unexpected("change_hosted", "fewer answers than calls"))?;
        changed.push(answer.and_then(|raw| match raw {
            Value::Array(raw) => change.answered(fleet_id, raw),
            other => Err(unexpected("change_hosted", format!("{other:?}"))),
        }));
    }
    Ok(changed)
}
