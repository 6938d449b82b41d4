//! Typed calls over game sessions and player sessions. Every change is one script over the fleet's slot (see
//! `sessions/lib.lua` for the keys): creation picks the server and places the session in the same step, and a
//! player session's slot is taken by the script that checks the count, so that no race can overfill a session or
//! place two sessions on one server. Replies are decoded with the store's codec.

use berth_domain::game_session::GameSessionRecord;

use crate::codec::{game_session, unexpected};
use crate::keys::FleetKeys;
use crate::processes::{Routing, hosting_only};
use crate::scripts::{Area, scripts};
use crate::sessions::placements::PlacementAttempt;
use crate::{Store, StoreError};

mod events;
mod hosted;
pub mod placements;
mod players;
mod reads;

pub use events::{SessionEventEntry, Subject, game_session_data, read_events};
pub use hosted::{
    Changed, HostedChange, accept_player_session, change_hosted, end_game_session, remove_player_session,
};
pub use players::{Accepted, NewPlayer, PlayersCreated, Removed, create_player_sessions};
pub use reads::{
    IndexScan, Page, PlayerSource, list_game_sessions, list_player_sessions, read_game_sessions, read_player_sessions,
    search_chunk, search_count,
};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "sessions",
    helpers: &[include_str!("sessions/lib.lua")],
    functions: &[
        ("create_game_session", include_str!("sessions/create.lua"), false),
        ("activate_game_session", include_str!("sessions/activate.lua"), false),
        ("update_game_session", include_str!("sessions/update.lua"), false),
        ("end_game_session", include_str!("sessions/end_session.lua"), false),
        (
            "create_player_sessions",
            include_str!("sessions/create_players.lua"),
            false,
        ),
        (
            "accept_player_session",
            include_str!("sessions/accept_player.lua"),
            false,
        ),
        (
            "remove_player_session",
            include_str!("sessions/remove_player.lua"),
            false,
        ),
        ("sweep_sessions", include_str!("sessions/sweep.lua"), false),
        ("read_sessions", include_str!("sessions/read.lua"), true),
        ("page_sessions", include_str!("sessions/page.lua"), true),
        ("search_sessions", include_str!("sessions/search.lua"), true),
        ("read_events", include_str!("sessions/read_events.lua"), true),
        ("placement_attempt", include_str!("sessions/placement.lua"), false),
        // A process's desired state lists its sessions and the players reserved in those it has yet to activate.
        ("desired_state", include_str!("sessions/desired.lua"), true),
    ],
};

/// Decodes `{outcome, now_ms, replica, version, desired state or '', detail, session fields...}`.
pub(crate) fn routed_session(
    script: &str,
    raw: &[String],
) -> Result<(String, Routing, String, Option<GameSessionRecord>), StoreError> {
    let [outcome, _now, replica, version, desired, detail, session @ ..] = raw else {
        return Err(unexpected(script, raw.len()));
    };
    let routing = Routing {
        replica: replica.clone(),
        version: version.parse().map_err(|_| unexpected(script, version))?,
        desired: (!desired.is_empty()).then(|| desired.clone()),
    };
    Ok((outcome.clone(), routing, detail.clone(), game_session(session)?))
}

/// Timings of the session service, as the scripts need them: the deployment's, where every fleet's own
/// (activation, reservation, creator limit, termination grace) are read from its record by the scripts themselves.
#[derive(Clone, Copy, Debug)]
pub struct SessionTimings {
    /// How long an ended game session and its player sessions stay readable.
    pub retention_ms: u64,
}

/// A game session to create.
#[derive(Clone, Debug)]
pub struct NewGameSession<'a> {
    /// Its id (see `berth_domain::game_session::new_game_session_id`); for a placement's attempt, the one its token
    /// names ([`placements::Attempt::game_session_id`]).
    pub game_session_id: &'a str,
    pub fleet_id: &'a str,
    /// The process to place it on; `None` picks one.
    pub game_server_id: Option<&'a str>,
    /// Its location; empty for any.
    pub location: &'a str,
    pub maximum_players: u32,
    pub accepts_players: bool,
    /// Whether it is protected from scale-in; `None` for the fleet's new_game_session_protection_policy.
    pub protected: Option<bool>,
    pub name: &'a str,
    pub properties: &'a [(String, String)],
    pub game_session_data: &'a str,
    pub matchmaker_data: &'a str,
    pub creator_id: &'a str,
    pub idempotency_token: &'a str,
    /// Tells a retry of this request from another request with the same token.
    pub digest: &'a str,
    pub placement_id: &'a str,
    /// Set for a placement's attempt (see [`placements`]); its token replaces `idempotency_token` and `digest`.
    pub attempt: Option<PlacementAttempt<'a>>,
}

impl<'a> NewGameSession<'a> {
    /// A session of up to `maximum_players` in any location of the fleet, on whichever process can host it, taking
    /// players, protected as the fleet's policy says, with nothing else set: set what a caller has with struct update syntax.
    pub fn new(game_session_id: &'a str, fleet_id: &'a str, maximum_players: u32) -> NewGameSession<'a> {
        NewGameSession {
            game_session_id,
            fleet_id,
            game_server_id: None,
            location: "",
            maximum_players,
            accepts_players: true,
            protected: None,
            name: "",
            properties: &[],
            game_session_data: "",
            matchmaker_data: "",
            creator_id: "",
            idempotency_token: "",
            digest: "",
            placement_id: "",
            attempt: None,
        }
    }
}

/// The outcome of creating a game session.
#[derive(Debug)]
pub enum Created {
    /// Created, ACTIVATING, on a process whose stream `routing` tells where to announce it.
    Created(Box<GameSessionRecord>, Routing),
    /// The idempotency token was used for the same request: the session as it stands.
    Existing(Box<GameSessionRecord>),
    /// The idempotency token was used for another request.
    TokenReused,
    /// The token is a placement attempt's that was given up (see [`placements`]): nothing was created.
    Abandoned,
    /// No ready process has room for it (or the one named is unknown or cannot host it).
    NoServer,
    /// Every ready process looked at takes fewer players than the session asks for.
    TooSmall,
    /// The creator reached the limit; it may create again at this time (ms).
    CreatorLimit(i64),
    /// The fleet does not exist, or has no such location: why.
    NotFound(String),
    /// The fleet is not ACTIVE, or the location not DEPLOYED: why.
    FleetNotActive(String),
}

/// Creates a game session, placing it on a process in the same step.
pub async fn create_game_session(
    store: &Store,
    new: &NewGameSession<'_>,
    timings: &SessionTimings,
) -> Result<Created, StoreError> {
    const SCRIPT: &str = "create_game_session";
    let keys = FleetKeys::new(new.fleet_id);
    let mut call = scripts().create_game_session.for_fleet(&keys);
    let properties = serde_json::to_string(new.properties).map_err(|err| unexpected(SCRIPT, err.to_string()))?;
    // An attempt's session is created under the attempt's token, which is its own digest: any retry of it is the
    // same request.
    let token = new
        .attempt
        .as_ref()
        .map_or_else(|| new.idempotency_token.to_owned(), |a| a.attempt.token());
    let digest = if new.attempt.is_some() {
        token.as_str()
    } else {
        new.digest
    };
    // A retry, or a worker taking the placement over, finds the attempt's session by the id its token names.
    if let Some(attempt) = &new.attempt
        && attempt.attempt.game_session_id(new.fleet_id) != new.game_session_id
    {
        return Err(unexpected(
            SCRIPT,
            "a placement attempt's game session id is not the one its token names",
        ));
    }
    call.arg(new.game_session_id)
        .arg(new.game_server_id.unwrap_or(""))
        .arg(new.location)
        .arg(new.maximum_players)
        .arg(timings.retention_ms)
        .arg(&token)
        .arg(digest)
        .arg(new.creator_id)
        .arg(if new.accepts_players { "1" } else { "0" })
        .arg(match new.protected {
            Some(true) => "1",
            Some(false) => "0",
            None => "",
        })
        .arg(new.name)
        .arg(properties)
        .arg(new.game_session_data)
        .arg(new.matchmaker_data)
        .arg(new.placement_id)
        .arg(new.fleet_id);
    match &new.attempt {
        Some(placed) => {
            call.arg(placed.notify);
            placed.attempt.args(&mut call);
            call.arg(placed.avoid.join(" "))
                .arg(if placed.first_here { "1" } else { "" });
            for (player, data) in placed.players {
                call.arg(*player).arg(*data);
            }
        }
        None => {
            call.arg("").arg("").arg("").arg("").arg("").arg("");
        }
    }
    let raw: Vec<String> = store.invoke_acknowledged(&call).await?;
    let (outcome, mut routing, detail, session) = routed_session(SCRIPT, &raw)?;
    // The session is all its server hosts: the script left its desired state for this reply to build.
    if routing.desired.as_deref() == Some("1") {
        let now_ms = raw[1].parse().map_err(|_| unexpected(SCRIPT, &raw[1]))?;
        let players = new.attempt.as_ref().map_or(&[][..], |placed| placed.players);
        routing.desired = Some(hosting_only(routing.version, &raw[6..], players, now_ms));
    }
    let present =
        |session: Option<GameSessionRecord>| session.map(Box::new).ok_or_else(|| unexpected(SCRIPT, &outcome));
    Ok(match outcome.as_str() {
        "CREATED" => Created::Created(present(session)?, routing),
        "EXISTING" => Created::Existing(present(session)?),
        "TOKEN_REUSED" => Created::TokenReused,
        "ABANDONED" => Created::Abandoned,
        "NO_SERVER" => Created::NoServer,
        "TOO_SMALL" => Created::TooSmall,
        "CREATOR_LIMIT" => Created::CreatorLimit(detail.parse().map_err(|_| unexpected(SCRIPT, &detail))?),
        "NO_FLEET" | "NO_LOCATION" => Created::NotFound(detail),
        "NOT_ACTIVE" => Created::FleetNotActive(detail),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// The outcome of activating a game session.
#[derive(Debug, PartialEq, Eq)]
pub enum Activated {
    /// It is ACTIVE.
    Active(Box<GameSessionRecord>),
    /// No such session.
    NotFound,
    /// The session is on another process.
    NotYours,
    /// The session has ended or is ending, as it stands.
    Ended(Box<GameSessionRecord>),
}

/// Activates a game session on behalf of the process hosting it.
pub async fn activate_game_session(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    game_session_id: &str,
) -> Result<Activated, StoreError> {
    const SCRIPT: &str = "activate_game_session";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().activate_game_session.for_fleet(&keys);
    call.arg(game_server_id).arg(game_session_id);
    let raw: Vec<String> = store.invoke(&call).await?;
    let [outcome, _now, session @ ..] = raw.as_slice() else {
        return Err(unexpected(SCRIPT, raw.len()));
    };
    if outcome == "ACTIVATED"
        && let Some(replica) = session
            .chunks_exact(2)
            .find(|pair| pair[0] == "notify")
            .map(|pair| &pair[1])
    {
        placements::activated(store, replica, fleet_id, game_session_id);
    }
    let present = || -> Result<Box<GameSessionRecord>, StoreError> {
        game_session(session)?
            .map(Box::new)
            .ok_or_else(|| unexpected(SCRIPT, outcome))
    };
    Ok(match outcome.as_str() {
        "ACTIVATED" => Activated::Active(present()?),
        "ENDED" => Activated::Ended(present()?),
        "NOT_FOUND" => Activated::NotFound,
        "NOT_YOURS" => Activated::NotYours,
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// A change to a game session; `None` keeps a value.
#[derive(Clone, Debug, Default)]
pub struct GameSessionChange<'a> {
    pub game_session_id: &'a str,
    pub maximum_players: Option<u32>,
    pub accepts_players: Option<bool>,
    pub protected: Option<bool>,
    pub name: Option<&'a str>,
    pub matchmaker_data: Option<&'a str>,
    /// Properties to set; an empty value removes the key.
    pub properties: &'a [(String, String)],
    /// Most properties a session may hold after the merge.
    pub properties_max: usize,
}

/// The outcome of changing a game session.
#[derive(Debug)]
pub enum Updated {
    /// Changed; its server is told through `routing` when it must be.
    Updated(Box<GameSessionRecord>, Routing),
    NotFound,
    /// It has ended, with this status.
    Ended(String),
    /// The new maximum is below its player session count (given).
    BelowCount(u32),
    /// The new maximum is above what its server takes (given).
    AboveServer(u32),
    /// The merge would leave this many properties.
    TooManyProperties(usize),
}

fn flag(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "1",
        Some(false) => "0",
        None => "",
    }
}

/// Changes a game session.
pub async fn update_game_session(
    store: &Store,
    fleet_id: &str,
    change: &GameSessionChange<'_>,
) -> Result<Updated, StoreError> {
    const SCRIPT: &str = "update_game_session";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().update_game_session.for_fleet(&keys);
    let properties = serde_json::to_string(change.properties).map_err(|err| unexpected(SCRIPT, err.to_string()))?;
    call.arg(change.game_session_id)
        .arg(change.maximum_players.map(|max| max.to_string()).unwrap_or_default())
        .arg(flag(change.accepts_players))
        .arg(flag(change.protected))
        .arg(if change.name.is_some() { "1" } else { "0" })
        .arg(change.name.unwrap_or(""))
        .arg(if change.matchmaker_data.is_some() { "1" } else { "0" })
        .arg(change.matchmaker_data.unwrap_or(""))
        .arg(properties)
        .arg(change.properties_max);
    let raw: Vec<String> = store.invoke(&call).await?;
    let (outcome, routing, detail, session) = routed_session(SCRIPT, &raw)?;
    let number = |detail: &str| detail.parse().map_err(|_| unexpected(SCRIPT, detail));
    Ok(match outcome.as_str() {
        "UPDATED" => Updated::Updated(
            session.map(Box::new).ok_or_else(|| unexpected(SCRIPT, &outcome))?,
            routing,
        ),
        "NOT_FOUND" => Updated::NotFound,
        "ENDED" => Updated::Ended(detail),
        "BELOW_COUNT" => Updated::BelowCount(number(&detail)?),
        "ABOVE_SERVER" => Updated::AboveServer(number(&detail)?),
        "TOO_MANY_PROPERTIES" => Updated::TooManyProperties(number(&detail)? as usize),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// The outcome of a game server ending (or rejecting) a game session it hosts.
#[derive(Debug, PartialEq)]
pub enum ServerEnded {
    /// Ended, as it now stands, and where its process's desired state moved (its version when the session had ended
    /// already, with no desired state).
    Ended(Box<GameSessionRecord>, Routing),
    NotFound,
    NotYours,
    /// A reject of a session that is not ACTIVATING: its status.
    WrongState(String),
}

/// What one sweep of a fleet's sessions did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionSweep {
    /// Game sessions ended ACTIVATION_TIMEOUT.
    pub activation_timeouts: u64,
    /// TERMINATING game sessions forced to end.
    pub forced: u64,
    /// Player sessions ended TIMEDOUT.
    pub player_timeouts: u64,
    /// Ended game sessions deleted after their retention.
    pub deleted: u64,
    /// Processes whose desired state moved: (game-server id, routing), to announce.
    pub moved: Vec<(String, Routing)>,
}

/// How long and how many session events a fleet keeps.
#[derive(Clone, Copy, Debug)]
pub struct EventRetention {
    /// Events older than this are trimmed, ms.
    pub retention_ms: u64,
    /// At most this many are kept (the oldest go first).
    pub max_events: u64,
}

/// Sweeps one fleet's sessions: activation and reservation timeouts, forced terminations, retention.
pub async fn sweep(
    store: &Store,
    fleet_id: &str,
    limit: u32,
    events: EventRetention,
) -> Result<SessionSweep, StoreError> {
    const SCRIPT: &str = "sweep_sessions";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().sweep_sessions.for_fleet(&keys);
    call.arg(limit).arg(events.retention_ms).arg(events.max_events);
    let raw: Vec<String> = store.invoke(&call).await?;
    let [activation, forced, players, deleted, moved @ ..] = raw.as_slice() else {
        return Err(unexpected(SCRIPT, raw.len()));
    };
    let number = |text: &String| text.parse::<u64>().map_err(|_| unexpected(SCRIPT, text));
    Ok(SessionSweep {
        activation_timeouts: number(activation)?,
        forced: number(forced)?,
        player_timeouts: number(players)?,
        deleted: number(deleted)?,
        moved: moved
            .chunks_exact(3)
            .map(|entry| {
                Ok((
                    entry[0].clone(),
                    Routing {
                        replica: entry[1].clone(),
                        version: number(&entry[2])?,
                        desired: None,
                    },
                ))
            })
            .collect::<Result<_, StoreError>>()?,
    })
}
