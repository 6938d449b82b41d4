//! What the placement service asks of a fleet's sessions. A placement's attempt creates its game session with the
//! placement's players in one step (`create_game_session` with a [`PlacementAttempt`]), under an idempotency token
//! the placement recorded first, which names the session ([`Attempt::game_session_id`]); as the placement and the
//! fleet live in different hash slots, a worker that takes a placement over, or gives an attempt up, finds the
//! attempt by that name here. A token with no session is then
//! spent, so a create of the attempt still on its way creates nothing: no placement ever leaves a session nobody
//! owns.

use berth_domain::game_session::{GameSessionRecord, named_game_session_id};

use crate::codec::unexpected;
use crate::keys::{FleetKeys, placed_channel};
use crate::processes::Routing;
use crate::scripts::scripts;
use crate::sessions::{NewPlayer, routed_session};
use crate::{Store, StoreError};

/// One attempt of a placement in one location (see `attempt_spent` in `sessions/lib.lua`).
#[derive(Clone, Copy, Debug)]
pub struct Attempt<'a> {
    pub placement_id: &'a str,
    /// Its number, from 1.
    pub number: u32,
    pub location: &'a str,
    /// The placement's deadline, ms since the epoch: nothing is created for it after.
    pub deadline_ms: i64,
}

impl Attempt<'_> {
    /// The idempotency token its game session is created under. Client tokens hold no ':'.
    pub fn token(&self) -> String {
        format!("placement:{}:{}:{}", self.placement_id, self.number, self.location)
    }

    /// The id of the game session it creates in `fleet_id`, named by its token: a retry of the attempt, or a worker
    /// looking it up, finds the session by its id.
    pub fn game_session_id(&self, fleet_id: &str) -> String {
        named_game_session_id(fleet_id, &self.token())
    }

    /// The key holding how far its placement's attempts in its location are spent.
    fn spend_key(&self) -> String {
        format!("placement:{}:{}", self.placement_id, self.location)
    }

    /// What the scripts take of it after the token: spend key, number, deadline.
    pub(crate) fn args(&self, call: &mut crate::scripts::FunctionCall<'_>) {
        call.arg(self.spend_key()).arg(self.number).arg(self.deadline_ms);
    }
}

/// What a placement's attempt adds to a game session's creation.
#[derive(Clone, Debug)]
pub struct PlacementAttempt<'a> {
    pub attempt: Attempt<'a>,
    /// The placement replica to tell when the session is activated (see [`activated`]).
    pub notify: &'a str,
    /// The players to reserve slots for with the session; their reservations start at activation.
    pub players: &'a [NewPlayer<'a>],
    /// Game servers the placement's earlier attempts failed on (they never activated its session): not tried again.
    pub avoid: &'a [String],
    /// No earlier create of the placement can have come to this fleet: it is the first attempt, and no candidate
    /// before this one was in the fleet. So it waits nowhere here (a refused create marks where it waits), and the
    /// create spares looking.
    pub first_here: bool,
}

/// An attempt found by its token.
#[derive(Debug)]
pub enum AttemptSession {
    /// It has no session, and none can be created with its token any more.
    Abandoned,
    /// Its session as it stands (ended, when it was given up), with its live players as (player id, player
    /// session id), and where to tell its server when giving it up changed what the server must do.
    Found(Box<GameSessionRecord>, Vec<(String, String)>, Routing),
}

/// Looks up (`give_up` false) or gives up `attempt` in `fleet_id`.
pub async fn placement_attempt(
    store: &Store,
    fleet_id: &str,
    attempt: &Attempt<'_>,
    give_up: bool,
) -> Result<AttemptSession, StoreError> {
    const SCRIPT: &str = "placement_attempt";
    let mut call = scripts().placement_attempt.for_fleet(&FleetKeys::new(fleet_id));
    call.arg(attempt.token()).arg(if give_up { "ABANDON" } else { "LOOK" });
    attempt.args(&mut call);
    call.arg(attempt.game_session_id(fleet_id));
    let raw: Vec<String> = store.invoke(&call).await?;
    let (outcome, routing, detail, session) = routed_session(SCRIPT, &raw)?;
    match (outcome.as_str(), session) {
        ("ABANDONED", _) => Ok(AttemptSession::Abandoned),
        ("FOUND", Some(session)) => {
            let live: Vec<String> = serde_json::from_str(&detail).map_err(|_| unexpected(SCRIPT, &detail))?;
            let players = live
                .chunks_exact(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect();
            Ok(AttemptSession::Found(Box::new(session), players, routing))
        }
        (other, _) => Err(unexpected(SCRIPT, other)),
    }
}

/// Tells placement replica `replica` that game session `game_session_id` of `fleet_id`, created by one of its
/// placements, is activated. Best effort, and not awaited: a worker that misses it finds out when it next reads
/// the session.
pub(crate) fn activated(store: &Store, replica: &str, fleet_id: &str, game_session_id: &str) {
    if replica.is_empty() {
        return;
    }
    let (store, channel) = (store.clone(), placed_channel(replica));
    let payload = format!("{fleet_id}\n{game_session_id}");
    tokio::spawn(async move {
        if let Err(err) = store.publish(&channel, &payload).await {
            tracing::debug!(error = %err, "activation announcement lost; the placement reads the session later");
        }
    });
}

/// An announcement as [`activated`] sends it: (fleet id, game session id).
pub fn parse_activated(payload: &str) -> Option<(&str, &str)> {
    payload.split_once('\n')
}
