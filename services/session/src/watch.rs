//! WatchSessionEvents: every game-session and player-session transition, as the scripts appended it to its fleet's
//! event stream, delivered in order per fleet (so per game session) without the client polling.
//!
//! Each fleet has its own stream (a script may only touch its fleet's slot), so a watch reads the streams of the
//! fleets it covers in turn, polling each every [`POLL`] while nothing arrives; blocking reads would hold a
//! connection that every other call shares. The watch merges the fleets into one order — by stream position
//! (`<ms>-<seq>` from Redis' clock), then fleet id — and delivers an event only once every fleet has been read
//! past it: each read also returns the clock of the node holding the fleet, after which that fleet can only get
//! later positions. So a single position, with the fleet it was in, says exactly what has been delivered, and the
//! cursor of each event is the position just after it: a resumed watch starts with the next event. On a Redis
//! Cluster whose nodes' clocks differ, events wait until the slowest node's clock has passed them.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_domain::game_session::fleet_of;
use berth_domain::stored::SessionEventType;
use berth_domain::validate::invalid;
use berth_proto::session::v1::{self as pb, watch_session_events_response::Kind};
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
/// Events read from one fleet per round trip.
const BATCH: usize = 200;
/// Messages waiting to go out before the watch waits for its client.
const QUEUE: usize = 64;

pub(crate) type Events = Pin<Box<dyn Stream<Item = Result<pb::WatchSessionEventsResponse, Status>> + Send>>;

/// A place in the merged order of every fleet's events: everything up to stream position `at` — in every fleet
/// when `fleet` is `None`, else in the fleets whose ids sort up to `fleet` — and nothing after. As a cursor:
/// `<ms>-<seq>` or `<ms>-<seq>/<fleet>` (fleet ids hold no '/').
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mark {
    at: (u64, u64),
    fleet: Option<String>,
}

impl Mark {
    /// Just after an event of `fleet` at `at`.
    fn after(at: (u64, u64), fleet: &str) -> Mark {
        Mark {
            at,
            fleet: Some(fleet.to_owned()),
        }
    }

    /// Everything before time `ms`, in every fleet.
    fn before(ms: u64) -> Mark {
        Mark {
            at: (ms.saturating_sub(1), u64::MAX),
            fleet: None,
        }
    }

    fn parse(cursor: &str) -> Option<Mark> {
        let (position, fleet) = match cursor.split_once('/') {
            Some((position, fleet)) if !fleet.is_empty() => (position, Some(fleet.to_owned())),
            Some(_) => return None,
            None => (cursor, None),
        };
        // No event is ever at the last millisecond, and nothing could be read after it.
        let at = berth_store::parse_position(position).filter(|(ms, _)| *ms < u64::MAX)?;
        Some(Mark { at, fleet })
    }

    fn cursor(&self) -> String {
        let (ms, seq) = self.at;
        match &self.fleet {
            Some(fleet) => format!("{ms}-{seq}/{fleet}"),
            None => format!("{ms}-{seq}"),
        }
    }

    /// Where reading `fleet` starts to get exactly what comes after this mark: past `at`, or at `at` itself for a
    /// fleet sorting after the one the mark stopped in.
    fn start(&self, fleet: &str) -> String {
        let (ms, seq) = self.at;
        match &self.fleet {
            Some(stopped) if fleet > stopped.as_str() => format!("{ms}-{seq}"),
            _ => format!("({ms}-{seq}"),
        }
    }
}

impl Ord for Mark {
    fn cmp(&self, other: &Mark) -> Ordering {
        // `None` stands for every fleet, so it sorts after any one.
        fn fleet(mark: &Mark) -> (bool, Option<&str>) {
            (mark.fleet.is_none(), mark.fleet.as_deref())
        }
        self.at.cmp(&other.at).then_with(|| fleet(self).cmp(&fleet(other)))
    }
}

impl PartialOrd for Mark {
    fn partial_cmp(&self, other: &Mark) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// What a watch knows of a fleet when it opens: its node's time and its last event trimmed.
async fn survey(context: &Context, fleet_id: &str) -> Result<(u64, Option<(u64, u64)>), Status> {
    let read = store::read_events(&context.store, fleet_id, "-", 0).await?;
    Ok((read.now_ms, read.gone))
}

/// Opens a watch for a checked request.
pub(crate) async fn open(context: Arc<Context>, req: pb::WatchSessionEventsRequest) -> Result<Events, Status> {
    let fixed = !req.fleet_ids.is_empty();
    let (listed_at, mut fleet_ids) = if fixed {
        (None, req.fleet_ids.clone())
    } else {
        let (now, fleet_ids) = berth_store::fleets::fleets_now(&context.store).await?;
        (Some(now), fleet_ids)
    };
    fleet_ids.sort_unstable();
    fleet_ids.dedup();
    let mut earliest = listed_at;
    let mut floors = HashMap::new();
    let resume = match req.after_cursor.as_str() {
        "" => None,
        cursor => Some(
            Mark::parse(cursor)
                .ok_or_else(|| invalid("after_cursor", "is malformed: pass a cursor from an event or keepalive"))?,
        ),
    };
    for fleet_id in &fleet_ids {
        let (now, gone) = survey(&context, fleet_id).await?;
        earliest = Some(earliest.map_or(now, |earliest| earliest.min(now)));
        let Some(gone) = gone.map(|gone| Mark::after(gone, fleet_id)) else {
            continue;
        };
        if resume.as_ref().is_some_and(|mark| gone > *mark) {
            return Err(trimmed_after(fleet_id));
        }
        if req.from_oldest {
            // The oldest retained event is the first after the last one trimmed.
            floors.insert(fleet_id.clone(), gone);
        }
    }
    // A watch from now starts at the earliest clock among the nodes it reads, so that no event of a node whose
    // clock lags is taken for one from before it began.
    let delivered = match resume {
        Some(mark) => mark,
        None if req.from_oldest => Mark {
            at: (0, 0),
            fleet: None,
        },
        None => Mark::before(earliest.unwrap_or_default()),
    };
    let (out, out_rx) = mpsc::channel(QUEUE);
    let watch = Watch {
        context,
        fleet_ids,
        delivered,
        floors,
        fixed,
        sessions: req.game_session_ids.clone(),
        types: req.event_types().collect(),
        include_data: req.include_game_session_data,
        out,
    };
    tokio::spawn(watch.run());
    Ok(Box::pin(ReceiverStream::new(out_rx)))
}

/// Events of a fleet after the watcher's position were trimmed before it read them.
fn trimmed_after(fleet_id: &str) -> Status {
    Status::out_of_range(format!(
        "events of fleet {fleet_id:?} after this cursor are no longer retained: describe what you track, then watch \
         from now"
    ))
}

struct Watch {
    context: Arc<Context>,
    fleet_ids: Vec<String>,
    /// How far the merged order has been delivered.
    delivered: Mark,
    /// For a watch from the oldest event: each fleet's last event trimmed when it began, which it never expected.
    floors: HashMap<String, Mark>,
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
        loop {
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
                    cursor: self.delivered.cursor(),
                    server_time: Some(prost_types::Timestamp::from(std::time::SystemTime::now())),
                };
                if !self.send(Kind::Keepalive(keepalive)).await {
                    return;
                }
            }
            if read.gone {
                return;
            }
            // Read again at once only while a fleet has more waiting and the watch moves: a node whose clock lags
            // can hold everything back.
            if !read.full || !read.moved {
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

    /// Reads every fleet once, and delivers in order what every fleet has been read past.
    async fn round(&mut self) -> Result<Round, Status> {
        let mut round = Round::default();
        // A fleet is known here before anything of it can be delivered: a fleet added after this read has only
        // positions after its time.
        let mut reached = None;
        if !self.fixed {
            let (now, fleet_ids) = berth_store::fleets::fleets_now(&self.context.store).await?;
            self.fleet_ids = fleet_ids;
            reached = Some(Mark::before(now));
        }
        let mut entries = Vec::new();
        let before = self.delivered.clone();
        for fleet_id in &self.fleet_ids {
            let start = self.delivered.start(fleet_id);
            let read = store::read_events(&self.context.store, fleet_id, &start, BATCH).await?;
            // Missed: the last event trimmed comes after what was delivered (and, from the oldest, after the last
            // one trimmed when the watch began).
            let missed = read.gone.map(|gone| Mark::after(gone, fleet_id)).is_some_and(|gone| {
                gone > self.delivered && self.floors.get(fleet_id).is_none_or(|floor| gone > *floor)
            });
            if missed {
                return Err(trimmed_after(fleet_id));
            }
            let (now, read) = (read.now_ms, read.entries);
            let full = read.len() == BATCH;
            round.full |= full;
            let last = read
                .last()
                .and_then(|entry| berth_store::parse_position(&entry.position))
                .map(|at| Mark::after(at, fleet_id));
            // Read to its end, the fleet gets nothing more before the node's time (or its last event, should that
            // be later); with more waiting, it has been read up to its last event.
            let fleet_reached = match last {
                Some(last) if full => last,
                last => last.map_or(Mark::before(now), |last| last.max(Mark::before(now))),
            };
            reached = Some(match reached {
                Some(reached) => reached.min(fleet_reached),
                None => fleet_reached,
            });
            entries.extend(read.into_iter().map(|entry| (fleet_id.clone(), entry)));
        }
        let Some(reached) = reached else {
            return Ok(round);
        };
        let mut ready: Vec<(Mark, String, SessionEventEntry)> = entries
            .into_iter()
            .filter_map(|(fleet_id, entry)| {
                let mark = Mark::after(berth_store::parse_position(&entry.position)?, &fleet_id);
                (mark <= reached).then_some((mark, fleet_id, entry))
            })
            .collect();
        ready.sort_by(|a, b| a.0.cmp(&b.0));
        for (mark, fleet_id, entry) in ready {
            let event = self.event(&fleet_id, &mark, entry).await?;
            self.delivered = mark;
            if let Some(event) = event {
                if !self.send(Kind::Event(event)).await {
                    round.gone = true;
                    return Ok(round);
                }
                round.sent += 1;
            }
        }
        self.delivered = self.delivered.clone().max(reached);
        round.moved = self.delivered != before;
        Ok(round)
    }

    /// The event as the contract speaks it, when it passes the filters.
    async fn event(
        &self,
        fleet_id: &str,
        mark: &Mark,
        entry: SessionEventEntry,
    ) -> Result<Option<pb::SessionEvent>, Status> {
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
        Ok(Some(pb::SessionEvent {
            event_id: format!("{fleet_id}/{}", entry.position),
            cursor: mark.cursor(),
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
    /// Whether the watch got further.
    moved: bool,
    /// Whether the client went away.
    gone: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_order_by_position_then_fleet() {
        for mark in [Mark::after((5, 2), "arena"), Mark::before(1_700_000_000_000)] {
            assert_eq!(Mark::parse(&mark.cursor()), Some(mark));
        }
        assert_eq!(Mark::parse("12-3/"), None);
        assert_eq!(Mark::parse(&format!("{}-{}", u64::MAX, u64::MAX)), None);
        assert_eq!(Mark::parse("12/arena"), None);
        let a = Mark::after((5, 2), "a");
        let b = Mark::after((5, 2), "b");
        let every = Mark {
            at: (5, 2),
            fleet: None,
        };
        assert!(a < b && b < every && every < Mark::after((5, 3), "a"));
    }

    #[test]
    fn a_mark_resumes_each_fleet_just_after_it() {
        let mark = Mark::after((5, 2), "m");
        assert_eq!(mark.start("a"), "(5-2");
        assert_eq!(mark.start("m"), "(5-2");
        assert_eq!(mark.start("z"), "5-2");
        assert_eq!(Mark::before(10).start("z"), format!("(9-{}", u64::MAX));
    }
}
