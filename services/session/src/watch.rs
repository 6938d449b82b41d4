//! WatchSessionEvents: every game-session and player-session transition, as the scripts appended it to its fleet's
//! event stream, delivered in order per fleet (so per game session) without the client polling.
//!
//! Each fleet has its own stream (a script may only touch its fleet's slot), so a watch reads the streams of the
//! fleets it covers in turn, polling each every [`POLL`] while nothing arrives; blocking reads would hold a
//! connection that every other call shares. A cursor is one stream position (`<ms>-<seq>` from Redis' clock) for
//! all fleets: a watch keeps each fleet's exact position while it lives, and hands out as cursor the earliest point
//! every fleet has been read up to (a fleet read to its end counts as read up to the time of that read). A resumed
//! watch starts [`RESUME_MARGIN_MS`] before its cursor in every fleet, so that events appended at the same moment in
//! another fleet (or on a cluster node whose clock lags by less than the margin) are delivered — perhaps twice,
//! which the event ids let a client see.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_domain::game_session::fleet_of;
use berth_proto::session::v1::{self as pb, watch_session_events_response::Kind};
use berth_store::game_servers::fleets;
use berth_store::sessions::{self as store, SessionEventEntry, Subject};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::Context;

/// How often a quiet watch reads its fleets' streams again.
const POLL: Duration = Duration::from_millis(100);
/// How long a watch sends nothing before it sends a keepalive.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How often a watch of every fleet looks for new fleets.
const FLEETS_REFRESH: Duration = Duration::from_secs(5);
/// How far before its cursor a resumed watch starts reading, in ms.
const RESUME_MARGIN_MS: u64 = 1_000;
/// Events read from one fleet per round trip.
const BATCH: usize = 200;
/// Messages waiting to go out before the watch waits for its client.
const QUEUE: usize = 64;

pub(crate) type Events = Pin<Box<dyn Stream<Item = Result<pb::WatchSessionEventsResponse, Status>> + Send>>;

/// Where a watch starts, from a checked request.
async fn start(context: &Context, req: &pb::WatchSessionEventsRequest, fleet_ids: &[String]) -> Result<String, Status> {
    if req.from_oldest {
        return Ok("0-0".into());
    }
    if req.after_cursor.is_empty() {
        // Everything of this millisecond on: an event appended in the same ms as the watch began is delivered
        // rather than lost (one from just before may come too).
        let now = store::redis_now_ms(&context.store).await?;
        return Ok(format!("{}-{}", now - 1, u64::MAX));
    }
    let (ms, _) = store::parse_position(&req.after_cursor).ok_or_else(|| {
        Status::invalid_argument("after_cursor is malformed: pass a cursor from an event or keepalive")
    })?;
    for fleet_id in fleet_ids {
        if store::events_trimmed_after(&context.store, fleet_id, &req.after_cursor).await? {
            return Err(Status::out_of_range(format!(
                "events of fleet {fleet_id:?} after this cursor are no longer retained: describe what you track, \
                 then watch from now"
            )));
        }
    }
    Ok(format!("{}-0", ms.saturating_sub(RESUME_MARGIN_MS)))
}

/// Opens a watch for a checked request.
pub(crate) async fn open(context: Arc<Context>, req: pb::WatchSessionEventsRequest) -> Result<Events, Status> {
    let fixed = !req.fleet_ids.is_empty();
    let fleet_ids = if fixed {
        req.fleet_ids.clone()
    } else {
        fleets(&context.store).await?
    };
    let start = start(&context, &req, &fleet_ids).await?;
    let (out, out_rx) = mpsc::channel(QUEUE);
    let first = store::parse_position(&start).unwrap_or_default();
    let watch = Watch {
        context,
        caught: fleet_ids.iter().map(|fleet| (fleet.clone(), first)).collect(),
        positions: fleet_ids.into_iter().map(|fleet| (fleet, start.clone())).collect(),
        start,
        fixed,
        sessions: req.game_session_ids.clone(),
        types: req.event_types().collect(),
        include_data: req.include_game_session_data,
        out,
    };
    tokio::spawn(watch.run());
    Ok(Box::pin(ReceiverStream::new(out_rx)))
}

struct Watch {
    context: Arc<Context>,
    /// Each fleet's position: its last event read.
    positions: HashMap<String, String>,
    /// Where fleets found after the watch began start.
    start: String,
    /// How far each fleet has been read: its last event, or the time of a read that reached its end.
    caught: HashMap<String, (u64, u64)>,
    /// Whether the request named its fleets (else every fleet is watched, new ones as they appear).
    fixed: bool,
    sessions: Vec<String>,
    types: Vec<pb::SessionEventType>,
    include_data: bool,
    out: mpsc::Sender<Result<pb::WatchSessionEventsResponse, Status>>,
}

impl Watch {
    async fn run(mut self) {
        let mut closing = self.context.closing.subscribe();
        let mut last_sent = Instant::now();
        let mut fleets_read = Instant::now();
        loop {
            if !self.fixed && fleets_read.elapsed() >= FLEETS_REFRESH {
                fleets_read = Instant::now();
                if let Ok(names) = fleets(&self.context.store).await {
                    let first = store::parse_position(&self.start).unwrap_or_default();
                    for name in names {
                        self.caught.entry(name.clone()).or_insert(first);
                        self.positions.entry(name).or_insert_with(|| self.start.clone());
                    }
                }
            }
            let read = match self.round().await {
                Ok(read) => read,
                Err(status) => {
                    let _ = self.out.send(Err(status)).await;
                    return;
                }
            };
            if read.sent > 0 {
                last_sent = Instant::now();
            } else if last_sent.elapsed() >= KEEPALIVE {
                last_sent = Instant::now();
                let keepalive = pb::WatchKeepalive {
                    cursor: self.cursor(None),
                    server_time: Some(prost_types::Timestamp::from(std::time::SystemTime::now())),
                };
                if !self.send(Kind::Keepalive(keepalive)).await {
                    return;
                }
            }
            if read.gone {
                return;
            }
            if !read.full {
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    _ = closing.changed() => {
                        let _ = self.out.send(Err(Status::unavailable(
                            "this session replica is shutting down; resume through another with your last cursor",
                        ))).await;
                        return;
                    }
                }
            }
        }
    }

    async fn send(&self, kind: Kind) -> bool {
        self.out
            .send(Ok(pb::WatchSessionEventsResponse { kind: Some(kind) }))
            .await
            .is_ok()
    }

    /// The cursor to hand out: the earliest point every fleet has been read up to, and not past `event`.
    fn cursor(&self, event: Option<(u64, u64)>) -> String {
        let (ms, seq) = self.caught.values().copied().chain(event).min().unwrap_or_default();
        format!("{ms}-{seq}")
    }

    /// Reads every fleet once and sends what matches.
    async fn round(&mut self) -> Result<Round, Status> {
        let mut round = Round::default();
        let now = u64::try_from(store::redis_now_ms(&self.context.store).await?).unwrap_or_default();
        let fleet_ids: Vec<String> = self.positions.keys().cloned().collect();
        for fleet_id in fleet_ids {
            let after = self.positions[&fleet_id].clone();
            let entries = store::read_events(&self.context.store, &fleet_id, &after, BATCH).await?;
            let caught_up = entries.len() < BATCH;
            round.full |= !caught_up;
            for entry in entries {
                self.positions.insert(fleet_id.clone(), entry.position.clone());
                if let Some(event) = self.event(&fleet_id, entry).await? {
                    if !self.send(Kind::Event(event)).await {
                        round.gone = true;
                        return Ok(round);
                    }
                    round.sent += 1;
                }
            }
            let reached = if caught_up {
                (now, 0)
            } else {
                store::parse_position(&self.positions[&fleet_id]).unwrap_or_default()
            };
            self.caught.insert(fleet_id, reached);
        }
        Ok(round)
    }

    /// The event as the contract speaks it, when it passes the filters.
    async fn event(&self, fleet_id: &str, entry: SessionEventEntry) -> Result<Option<pb::SessionEvent>, Status> {
        let Some(event_type) = pb::SessionEventType::from_str_name(&format!("SESSION_EVENT_TYPE_{}", entry.event_type))
        else {
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
        let cursor = self.cursor(store::parse_position(&entry.position));
        Ok(Some(pb::SessionEvent {
            event_id: format!("{fleet_id}/{}", entry.position),
            cursor,
            event_type: event_type as i32,
            event_time: Some(berth_domain::game_server::timestamp(entry.time_ms)),
            subject: Some(subject),
        }))
    }
}

/// What one round of reads did.
#[derive(Default)]
struct Round {
    /// Events sent.
    sent: usize,
    /// Whether some fleet had more than one batch waiting (read again at once).
    full: bool,
    /// Whether the client went away.
    gone: bool,
}
