//! Game sessions for tests of the processes that host them: placed on a named process straight through the
//! store, as the session service's CreateGameSession does, and read back.

use berth_store::Store;
use berth_store::processes::announce;
use berth_store::sessions::{self, Created, NewGameSession, SessionTimings};

/// Timings of sessions placed here: ended ones stay readable for an hour (the fleet's record gives the rest).
pub const SESSION_TIMINGS: SessionTimings = SessionTimings {
    retention_ms: 3_600_000,
};

/// Places a game session of up to `max_players` on process `game_server_id` and tells its health replica, as the
/// session service does; returns the session's id. Panics when the process cannot host it.
pub async fn place_game_session(store: &Store, fleet_id: &str, game_server_id: &str, max_players: u32) -> String {
    let game_session_id = berth_domain::game_session::new_game_session_id(fleet_id);
    let new = NewGameSession {
        game_server_id: Some(game_server_id),
        name: "test match",
        ..NewGameSession::new(&game_session_id, fleet_id, max_players)
    };
    match sessions::create_game_session(store, &new, &SESSION_TIMINGS)
        .await
        .unwrap()
    {
        Created::Created(record, routing) => {
            announce(store, &routing, fleet_id, &record.game_server_id, None).await;
            game_session_id
        }
        other => panic!("cannot place a game session on {game_server_id}: {other:?}"),
    }
}

/// A game session's status and status reason (stored names, e.g. ("ERROR", "SERVER_CRASHED")); `None` when
/// unknown.
pub async fn game_session_status(store: &Store, game_session_id: &str) -> Option<(String, String)> {
    let fleet_id = berth_domain::game_session::fleet_of(game_session_id)?;
    let record = sessions::read_game_sessions(store, fleet_id, &[game_session_id])
        .await
        .unwrap()
        .pop()
        .flatten()?;
    Some((
        record
            .status
            .map(|status| status.as_str().to_owned())
            .unwrap_or_default(),
        record.status_reason,
    ))
}
