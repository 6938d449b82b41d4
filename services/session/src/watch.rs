//! WatchSessionEvents: the game-session and player-session transitions a watcher acts on, as the scripts appended
//! them to their fleet's event stream, delivered in order per fleet (so per game session) without the client
//! polling. The merged order, cursors, keepalives and errors are the shared watch's (`berth_runtime::watch`); this is
//! how a session event is read, filtered and shown.

use std::sync::Arc;

use berth_domain::game_session::fleet_of;
use berth_domain::stored::SessionEventType;
use berth_proto::session::v1::{self as pb, watch_session_events_response::Kind};
use berth_runtime::watch::{self, EventStreams, Placed, Start};
use berth_store::sessions::{self as store, SessionEventEntry, Subject};
use berth_store::{EventsRead, StoreError};
use tonic::Status;

use crate::Context;

pub(crate) type Events = watch::Events<pb::WatchSessionEventsResponse>;

/// Opens a watch for a checked request.
pub(crate) async fn open(context: Arc<Context>, req: pb::WatchSessionEventsRequest) -> Result<Events, Status> {
    let (store, closing) = (context.store.clone(), context.closing.subscribe());
    let sessions = SessionEvents {
        types: req.event_types().collect(),
        sessions: req.game_session_ids,
        include_data: req.include_game_session_data,
        context,
    };
    let start = Start {
        fleet_ids: req.fleet_ids,
        after_cursor: req.after_cursor,
        from_oldest: req.from_oldest,
    };
    watch::open(store, sessions, start, closing).await
}

/// The session event streams, through a watch's filters.
struct SessionEvents {
    context: Arc<Context>,
    sessions: Vec<String>,
    types: Vec<pb::SessionEventType>,
    include_data: bool,
}

impl EventStreams for SessionEvents {
    type Entry = SessionEventEntry;
    type Message = pb::WatchSessionEventsResponse;
    const SERVICE: &'static str = "session";

    fn tails(&self) -> &watch::Tails<SessionEventEntry> {
        &self.context.tails
    }

    async fn read(
        &self,
        fleet_id: &str,
        start: &str,
        count: usize,
    ) -> Result<EventsRead<SessionEventEntry>, StoreError> {
        store::read_events(&self.context.store, fleet_id, start, count).await
    }

    fn position(entry: &SessionEventEntry) -> &str {
        &entry.position
    }

    async fn event(
        &self,
        fleet_id: &str,
        placed: Placed,
        entry: SessionEventEntry,
    ) -> Result<Option<pb::WatchSessionEventsResponse>, Status> {
        // A type a newer release writes is passed over here rather than stopping the watch.
        let Some(event_type) = entry.event_type.map(SessionEventType::to_proto) else {
            return Ok(None);
        };
        if !self.types.is_empty() && !self.types.contains(&event_type) {
            return Ok(None);
        }
        let game_session_id = match &entry.subject {
            Subject::GameSession(record) => &record.game_session_id,
            Subject::PlayerSession(record) => &record.game_session_id,
        };
        if !self.sessions.is_empty() && !self.sessions.contains(game_session_id) {
            return Ok(None);
        }
        let subject = match entry.subject {
            Subject::GameSession(record) => {
                let mut session: pb::GameSession = (*record).into();
                if self.include_data && fleet_of(&session.game_session_id).is_some() {
                    let (data, mm) =
                        store::game_session_data(&self.context.store, fleet_id, &session.game_session_id).await?;
                    session.game_session_data = data;
                    session.matchmaker_data = mm;
                }
                pb::session_event::Subject::GameSession(session)
            }
            Subject::PlayerSession(record) => pb::session_event::Subject::PlayerSession((*record).into()),
        };
        let event = pb::SessionEvent {
            event_id: placed.event_id,
            cursor: placed.cursor,
            event_type: event_type as i32,
            event_time: Some(berth_domain::game_server::timestamp(entry.time_ms)),
            subject: Some(subject),
            player_sessions: entry.players.into_iter().map(Into::into).collect(),
        };
        Ok(Some(pb::WatchSessionEventsResponse {
            kind: Some(Kind::Event(event)),
        }))
    }

    fn keepalive(&self, cursor: String, server_time: prost_types::Timestamp) -> pb::WatchSessionEventsResponse {
        pb::WatchSessionEventsResponse {
            kind: Some(Kind::Keepalive(pb::WatchKeepalive {
                cursor,
                server_time: Some(server_time),
            })),
        }
    }
}
