//! The session event streams: one per fleet, appended to by the scripts that make the transitions a watcher acts on
//! (the contract's SessionEventType says which), and read by watchers. A position is a Redis stream id (`<ms>-<seq>`), taken from Redis' clock at the append.

use berth_domain::game_session::{GameSessionRecord, PlayerSessionRecord};
use berth_domain::stored::SessionEventType;

use super::reads::read_game_sessions;
use crate::codec::{EventsRead, events_read, field, unexpected};
use crate::codec::{game_session, player_session};
use crate::keys::FleetKeys;
use crate::scripts::scripts;
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
    /// What happened; `None` for a type this release does not know (written by a newer one during an upgrade).
    pub event_type: Option<SessionEventType>,
    /// When it happened, ms since the epoch.
    pub time_ms: i64,
    pub subject: Subject,
    /// The player sessions that ended with the game session, on its end; empty otherwise.
    pub players: Vec<PlayerSessionRecord>,
}

fn decode(fleet_id: &str, position: String, pairs: &[String]) -> Result<SessionEventEntry, StoreError> {
    let field = |name: &str| field(pairs, name);
    let endpoint = [field("loc"), field("ip"), field("dns"), field("port")];
    let ended = field("players");
    let players = if ended.is_empty() {
        Vec::new()
    } else {
        let lists: Vec<Vec<String>> =
            serde_json::from_str(&ended).map_err(|_| unexpected("session event", format!("players {ended}")))?;
        lists
            .iter()
            .filter_map(|pairs| player_session(fleet_id, pairs, &endpoint))
            .collect()
    };
    let subject = if field("kind") == "g" {
        let record = game_session(pairs)?.ok_or_else(|| unexpected("session event", "an empty game session"))?;
        Subject::GameSession(Box::new(record))
    } else {
        let record = player_session(fleet_id, pairs, &endpoint)
            .ok_or_else(|| unexpected("session event", "an empty player session"))?;
        Subject::PlayerSession(Box::new(record))
    };
    Ok(SessionEventEntry {
        position,
        event_type: SessionEventType::parse(&field("type")),
        time_ms: field("t").parse().unwrap_or(0),
        subject,
        players,
    })
}

/// Up to `count` events of a fleet from `start` (an XRANGE start: a position, which it includes, or a position
/// after '(', which it excludes).
pub async fn read_events(
    store: &Store,
    fleet_id: &str,
    start: &str,
    count: usize,
) -> Result<EventsRead<SessionEventEntry>, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().read_events.prepare();
    call.key(keys.session_events())
        .key(keys.session_events_gone())
        .arg(start)
        .arg(count);
    let reply: (String, String, Vec<(String, Vec<String>)>) = store.invoke(&call).await?;
    events_read("read_events", reply, |(position, pairs)| {
        decode(fleet_id, position, &pairs)
    })
}

/// A game session's data and matchmaker data, which events leave out; empty when the session is gone.
pub async fn game_session_data(
    store: &Store,
    fleet_id: &str,
    game_session_id: &str,
) -> Result<(String, String), StoreError> {
    let read = read_game_sessions(store, fleet_id, &[game_session_id]).await?;
    Ok(read
        .into_iter()
        .flatten()
        .next()
        .map(|record| (record.game_session_data, record.matchmaker_data))
        .unwrap_or_default())
}
