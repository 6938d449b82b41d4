//! Resumable watches over the event streams Berth keeps one per fleet (the session events, the fleet events): what
//! WatchSessionEvents and WatchFleetEvents share, so that both promise the same order, cursors and errors. A
//! service says through [`EventStreams`] how to read one fleet's stream and what to send; [`open`] does the rest.
//!
//! Each fleet has its own stream (a script may only touch its fleet's slot), so a watch reads the streams of the
//! fleets it covers in turn; blocking reads would hold a connection that every other call shares. Rather than every
//! watch polling every stream it covers, one task of the replica ([`Tails`]) polls each stream that some watch of it
//! covers, every [`EventStreams::POLL`], and wakes that stream's watches when something was appended: a thousand
//! quiet watches of one stream cost Redis what one does. A woken watch reads its streams from where it stands; a
//! quiet one reads them once every [`QUIET`] all the same (a trim, a Redis outage). For the watches of every fleet,
//! the replica also lists the fleets every period, and wakes them when the list changed.
//!
//! The watch merges the fleets into one order — by stream position (`<ms>-<seq>` from Redis' clock), then fleet id —
//! and delivers an event only once every fleet has been read past it: each read also returns the clock of the node
//! holding the fleet, after which that fleet can only get later positions. So a single position, with the fleet it was
//! in, says exactly what has been delivered, and the cursor of each event is the position just after it: a resumed
//! watch starts with the next event. On a Redis Cluster whose nodes' clocks differ, events wait until the slowest
//! node's clock has passed them. A watch of every fleet lists them again each round, with the clock of the node holding
//! the list, so that a fleet created while it runs is watched from its first event.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use berth_domain::validate::invalid;
use berth_store::{EventsRead, Store, StoreError, parse_position};
use tokio::sync::{Notify, mpsc, watch};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

/// How often a replica reads again a stream its watches cover, by default.
pub const POLL: Duration = Duration::from_millis(100);
/// How often a watch that nothing woke reads its streams all the same.
pub const QUIET: Duration = Duration::from_secs(1);
/// How long a watch sends nothing before it sends a keepalive.
pub const KEEPALIVE: Duration = Duration::from_secs(15);
/// Events read from one fleet per round trip.
const BATCH: usize = 200;
/// Messages waiting to go out before the watch waits for its client.
const QUEUE: usize = 64;

/// The messages of an open watch, as a server-streaming handler returns them.
pub type Events<M> = Pin<Box<dyn Stream<Item = Result<M, Status>> + Send>>;

/// One kind of per-fleet event stream, and the messages a watch of it sends.
pub trait EventStreams: Send + Sync + 'static {
    /// An event as the store reads it (the watches a follower woke share one read of it: see [`Tails`]).
    type Entry: Clone + Send + Sync + 'static;
    /// What the watch streams: an event or a keepalive.
    type Message: Send + 'static;
    /// The service, as a replica shutting down names itself to its watchers.
    const SERVICE: &'static str;
    /// What one stream is of, as errors name it: a fleet's events, unless said otherwise.
    const STREAM: &'static str = "fleet";
    /// How often the replica reads again a stream its watches cover, and the list of every stream when a watch
    /// covers them all.
    const POLL: Duration = POLL;

    /// The replica's followers of these streams, which wake the watches when something was appended.
    fn tails(&self) -> &Tails<Self::Entry>;

    /// Every stream there is, with the clock of the node holding their list: a watch that names none watches
    /// these, and those that appear later from their first event. Every fleet's, unless said otherwise.
    fn every(&self, store: &Store) -> impl Future<Output = Result<(u64, Vec<String>), StoreError>> + Send {
        berth_store::fleets::fleets_now(store)
    }

    /// Up to `count` events of a fleet from `start` (an XRANGE start: a position, or one after '(' to exclude it),
    /// with the clock of the node holding them and the last event trimmed.
    fn read(
        &self,
        fleet_id: &str,
        start: &str,
        count: usize,
    ) -> impl Future<Output = Result<EventsRead<Self::Entry>, StoreError>> + Send;

    /// An event's position in its fleet's stream.
    fn position(entry: &Self::Entry) -> &str;

    /// The message for an event of `fleet_id` placed in the watch at `placed`; `None` when the watch's filters
    /// leave it out.
    fn event(
        &self,
        fleet_id: &str,
        placed: Placed,
        entry: Self::Entry,
    ) -> impl Future<Output = Result<Option<Self::Message>, Status>> + Send;

    /// A keepalive carrying the latest cursor.
    fn keepalive(&self, cursor: String, server_time: prost_types::Timestamp) -> Self::Message;
}

/// An event's id, unique among every fleet's (or queue's) events: `<fleet>/<position>`, the same in a watch and in a
/// listing.
pub fn event_id(fleet_id: &str, position: &str) -> String {
    format!("{fleet_id}/{position}")
}

/// Where an event stands in a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Its id, unique among every fleet's events: `<fleet>/<position>`.
    pub event_id: String,
    /// The position just after it, to resume from.
    pub cursor: String,
}

/// What a (checked) watch request asks for.
#[derive(Clone, Debug, Default)]
pub struct Start {
    /// The fleets to watch; none means every fleet, new ones as they appear.
    pub fleet_ids: Vec<String>,
    /// Resume after this cursor; empty starts with the events from now on.
    pub after_cursor: String,
    /// Start with the oldest retained event instead of now.
    pub from_oldest: bool,
}

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
        let at = parse_position(position).filter(|(ms, _)| *ms < u64::MAX)?;
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

/// Opens a watch of `streams` for a checked request: INVALID_ARGUMENT for a malformed cursor, OUT_OF_RANGE when
/// events after it were trimmed. The watch runs until its client goes away, ending with UNAVAILABLE once `closing`
/// turns true (the replica shuts down).
pub async fn open<S: EventStreams>(
    store: Store,
    streams: S,
    start: Start,
    closing: watch::Receiver<bool>,
) -> Result<Events<S::Message>, Status> {
    let fixed = !start.fleet_ids.is_empty();
    let (listed_at, mut fleet_ids) = if fixed {
        (None, start.fleet_ids)
    } else {
        let (now, fleet_ids) = streams.every(&store).await?;
        (Some(now), fleet_ids)
    };
    fleet_ids.sort_unstable();
    fleet_ids.dedup();
    let resume = match start.after_cursor.as_str() {
        "" => None,
        cursor => Some(
            Mark::parse(cursor)
                .ok_or_else(|| invalid("after_cursor", "is malformed: pass a cursor from an event or keepalive"))?,
        ),
    };
    let mut earliest = listed_at;
    let mut floors = HashMap::new();
    for fleet_id in &fleet_ids {
        // What the watch knows of a fleet when it opens: its node's time and its last event trimmed.
        let read = streams.read(fleet_id, "-", 0).await?;
        earliest = Some(earliest.map_or(read.now_ms, |earliest| earliest.min(read.now_ms)));
        let Some(gone) = read.gone.map(|gone| Mark::after(gone, fleet_id)) else {
            continue;
        };
        if resume.as_ref().is_some_and(|mark| gone > *mark) {
            return Err(trimmed_after::<S>(fleet_id));
        }
        if start.from_oldest {
            // The oldest retained event is the first after the last one trimmed.
            floors.insert(fleet_id.clone(), gone);
        }
    }
    // A watch from now starts at the earliest clock among the nodes it reads, so that no event of a node whose
    // clock lags is taken for one from before it began.
    let delivered = match resume {
        Some(mark) => mark,
        None if start.from_oldest => Mark {
            at: (0, 0),
            fleet: None,
        },
        None => Mark::before(earliest.unwrap_or_default()),
    };
    let (out, out_rx) = mpsc::channel(QUEUE);
    let streams = Arc::new(streams);
    let woken = Arc::new(Notify::new());
    // Followed before the first round reads, so that nothing appended after that read goes unnoticed.
    let following = streams
        .tails()
        .follow(&streams, &store, &followed(fixed, &fleet_ids), &woken);
    let watch = Watch {
        store,
        streams,
        fleet_ids,
        delivered,
        floors,
        fixed,
        out,
        woken,
        following,
    };
    tokio::spawn(watch.run(closing));
    Ok(Box::pin(ReceiverStream::new(out_rx)))
}

/// Events of a fleet after the watcher's position were trimmed before it read them.
fn trimmed_after<S: EventStreams>(fleet_id: &str) -> Status {
    Status::out_of_range(format!(
        "events of {} {fleet_id:?} after this cursor are no longer retained: describe what you track, then watch \
         from now",
        S::STREAM
    ))
}

struct Watch<S: EventStreams> {
    store: Store,
    streams: Arc<S>,
    fleet_ids: Vec<String>,
    /// How far the merged order has been delivered.
    delivered: Mark,
    /// For a watch from the oldest event: each fleet's last event trimmed when it began, which it never expected.
    floors: HashMap<String, Mark>,
    /// Whether the request named its fleets (else every fleet is watched, new ones as they appear).
    fixed: bool,
    out: mpsc::Sender<Result<S::Message, Status>>,
    /// Woken when a stream the watch covers got something, or the list of every stream changed (see [`Tails`]).
    woken: Arc<Notify>,
    /// Its place among the followers of its streams (and of the list, for a watch of every stream), while it runs.
    following: Following<S::Entry>,
}

impl<S: EventStreams> Watch<S> {
    async fn run(mut self, mut closing: watch::Receiver<bool>) {
        let mut last_sent = Instant::now();
        // A stream's follower that started with this watch may have first read it after the watch's first round:
        // what came between, only the watch's next read finds.
        let mut first = true;
        // The replica's shutdown, waited on once for the watch's whole life: a wait made anew at each quiet round
        // joined and left the switch's lists of waiters, whose locks every watch of the replica shares.
        let shutdown = closing.changed();
        tokio::pin!(shutdown);
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
                let keepalive = self
                    .streams
                    .keepalive(self.delivered.cursor(), SystemTime::now().into());
                if self.out.send(Ok(keepalive)).await.is_err() {
                    return;
                }
            }
            if read.gone {
                return;
            }
            // Read again at once only while a fleet has more waiting and the watch moves: a node whose clock lags
            // can hold everything back. Events held back for a lagging clock are read again after a poll period, as
            // are streams whose follower has just started (see `first`); otherwise the watch waits to be woken.
            if !read.full || !read.moved {
                let wait = if read.held || read.followed || first {
                    S::POLL
                } else {
                    QUIET
                };
                first = false;
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = self.woken.notified() => {}
                    // A client that went away stops the polling now, not at the next message it would have got.
                    _ = self.out.closed() => return,
                    _ = &mut shutdown => {
                        let _ = self.out.send(Err(Status::unavailable(format!(
                            "this {} replica is shutting down; resume through another with your last cursor",
                            S::SERVICE
                        )))).await;
                        return;
                    }
                }
            }
        }
    }

    /// Reads every fleet once, and delivers in order what every fleet has been read past.
    async fn round(&mut self) -> Result<Round, Status> {
        let mut round = Round::default();
        // A fleet is known here before anything of it can be delivered: a fleet added after this read has only
        // positions after its time.
        let mut reached = None;
        if !self.fixed {
            let (now, mut fleet_ids) = self.streams.every(&self.store).await?;
            fleet_ids.sort_unstable();
            if fleet_ids != self.fleet_ids {
                let tails = self.streams.tails();
                self.following = tails.follow(&self.streams, &self.store, &followed(false, &fleet_ids), &self.woken);
                self.fleet_ids = fleet_ids;
                round.followed = true;
            }
            reached = Some(Mark::before(now));
        }
        let mut entries = Vec::new();
        let before = self.delivered.clone();
        for fleet_id in &self.fleet_ids {
            let start = self.delivered.start(fleet_id);
            let read = self.streams.tails().read(&*self.streams, fleet_id, &start).await?;
            // Missed: the last event trimmed comes after what was delivered (and, from the oldest, after the last
            // one trimmed when the watch began).
            let missed = read.gone.map(|gone| Mark::after(gone, fleet_id)).is_some_and(|gone| {
                gone > self.delivered && self.floors.get(fleet_id).is_none_or(|floor| gone > *floor)
            });
            if missed {
                return Err(trimmed_after::<S>(fleet_id));
            }
            let (now, read) = (read.now_ms, read.entries);
            let full = read.len() == BATCH;
            round.full |= full;
            let last = read
                .last()
                .and_then(|entry| parse_position(S::position(entry)))
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
        let read = entries.len();
        let mut ready: Vec<(Mark, String, S::Entry)> = entries
            .into_iter()
            .filter_map(|(fleet_id, entry)| {
                let mark = Mark::after(parse_position(S::position(&entry))?, &fleet_id);
                (mark <= reached).then_some((mark, fleet_id, entry))
            })
            .collect();
        round.held = ready.len() < read;
        ready.sort_by(|a, b| a.0.cmp(&b.0));
        for (mark, fleet_id, entry) in ready {
            let placed = Placed {
                event_id: event_id(&fleet_id, S::position(&entry)),
                cursor: mark.cursor(),
            };
            let message = self.streams.event(&fleet_id, placed, entry).await?;
            self.delivered = mark;
            if let Some(message) = message {
                if self.out.send(Ok(message)).await.is_err() {
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
    /// Whether events read wait for another stream's clock to pass them.
    held: bool,
    /// Whether the watch began following streams it found listed.
    followed: bool,
}

/// What a watch follows: its streams, and for a watch of every stream the list of them too ([`EVERY`]).
fn followed(fixed: bool, stream_ids: &[String]) -> Vec<String> {
    let mut followed = stream_ids.to_vec();
    if !fixed {
        followed.push(EVERY.to_owned());
    }
    followed
}

/// The list of every stream, as [`Tails`] follows it beside the streams (a stream's id is never empty).
const EVERY: &str = "";

/// A replica's followers of the streams its watches cover: one task per stream, polling it every
/// [`EventStreams::POLL`] while some watch covers it, wakes those watches when something was appended (or the read
/// failed, for each watch to meet the failure itself). The watches woken together mostly stand at the same place,
/// so they share their reads: the first to read a stream from a place reads it, and the others take its answer,
/// until the follower finds more or a poll period passes. A service keeps one, shared by all its watches. A caller
/// of the same replica that has just appended to a stream tells its follower where ([`Tails::appended`]), which then
/// wakes the watches at once, without a read of its own, rather than at its next poll: the replica's own watches hear
/// of what it did without waiting a period, for no more reads than the poll would have made them do.
pub struct Tails<E>(Arc<Mutex<HashMap<String, Followers<E>>>>);

impl<E> Clone for Tails<E> {
    fn clone(&self) -> Self {
        Tails(self.0.clone())
    }
}

impl<E> Default for Tails<E> {
    fn default() -> Self {
        Tails(Arc::default())
    }
}

/// The watches covering one stream, whether a task follows it (one that finds no watch left ends, and removes this,
/// under the lock a watch takes to join, so that a stream never has two), and the reads its watches share, by
/// where they start.
struct Followers<E> {
    watches: Vec<Arc<Notify>>,
    followed: bool,
    reads: HashMap<String, Arc<SharedRead<E>>>,
    /// Cuts the follower's wait for its next poll short (its permit kept when it comes during a read), to take
    /// `told`.
    poked: Arc<Notify>,
    /// The latest position this replica appended at since the follower last looked ([`Tails::appended`]).
    told: Option<(u64, u64)>,
}

impl<E> Default for Followers<E> {
    fn default() -> Self {
        Followers {
            watches: Vec::new(),
            followed: false,
            reads: HashMap::new(),
            poked: Arc::default(),
            told: None,
        }
    }
}

/// One read of a stream that the watches asking for the same take, once the first of them made it.
struct SharedRead<E> {
    begun: Instant,
    read: tokio::sync::OnceCell<EventsRead<E>>,
}

/// A watch's place among the followers of its streams; it leaves them when dropped.
struct Following<E> {
    tails: Tails<E>,
    stream_ids: Vec<String>,
    woken: Arc<Notify>,
}

impl<E: Clone + Send + Sync + 'static> Tails<E> {
    /// Has `woken` notified whenever one of `stream_ids` gets something, starting the follower of each stream that
    /// has none.
    fn follow<S: EventStreams<Entry = E>>(
        &self,
        streams: &Arc<S>,
        store: &Store,
        stream_ids: &[String],
        woken: &Arc<Notify>,
    ) -> Following<E> {
        let mut tails = crate::sync::lock(&self.0);
        for stream_id in stream_ids {
            let followers = tails.entry(stream_id.clone()).or_default();
            if !followers.followed {
                followers.followed = true;
                let seen = if stream_id == EVERY {
                    Seen::Listed(None)
                } else {
                    Seen::Start(None)
                };
                let probe = Probe {
                    streams: streams.clone(),
                    store: store.clone(),
                    seen,
                };
                tokio::spawn(self.clone().tail(probe, stream_id.clone()));
            }
            followers.watches.push(woken.clone());
        }
        Following {
            tails: self.clone(),
            stream_ids: stream_ids.to_vec(),
            woken: woken.clone(),
        }
    }

    /// Polls one stream (or the list, [`EVERY`]) until no watch covers it. Before it wakes the watches, the reads
    /// they shared are dropped: one begun before what it found came would not find it.
    async fn tail<S: EventStreams<Entry = E>>(self, mut probe: Probe<S>, stream_id: String) {
        let (mut told, mut next_poll) = (None, tokio::time::Instant::now());
        loop {
            // Told of an append, it wakes the watches unread when the append is past what it has read, and keeps its
            // polls where they were either way: being told adds no read.
            let wake = match told.take().and_then(|at| probe.appended(at)) {
                Some(wake) => wake,
                None => {
                    let wake = probe.changed(&stream_id).await;
                    next_poll = tokio::time::Instant::now() + S::POLL;
                    wake
                }
            };
            let poked = {
                let mut tails = crate::sync::lock(&self.0);
                let Some(followers) = tails
                    .get_mut(&stream_id)
                    .filter(|followers| !followers.watches.is_empty())
                else {
                    tails.remove(&stream_id);
                    return;
                };
                if wake {
                    followers.reads.clear();
                    followers.watches.iter().for_each(|woken| woken.notify_one());
                }
                followers.poked.clone()
            };
            tokio::select! {
                _ = tokio::time::sleep_until(next_poll) => {}
                _ = poked.notified() => {
                    told = crate::sync::lock(&self.0).get_mut(&stream_id).and_then(|followers| followers.told.take());
                }
            }
        }
    }

    /// Tells the follower of `stream_id` that this replica has just appended to it at `position`: it wakes the
    /// stream's watches now rather than at its next poll. Nothing when no watch of this replica covers the stream.
    pub fn appended(&self, stream_id: &str, position: &str) {
        let Some(at) = parse_position(position) else {
            return;
        };
        if let Some(followers) = crate::sync::lock(&self.0).get_mut(stream_id) {
            followers.told = followers.told.max(Some(at));
            followers.poked.notify_one();
        }
    }

    /// Reads up to a batch of `stream_id` from `start` for a watch, through the read another watch made from there
    /// (or is making) when there is one.
    async fn read<S: EventStreams<Entry = E>>(
        &self,
        streams: &S,
        stream_id: &str,
        start: &str,
    ) -> Result<EventsRead<E>, StoreError> {
        let shared = {
            let mut tails = crate::sync::lock(&self.0);
            tails.get_mut(stream_id).map(|followers| {
                followers.reads.retain(|_, shared| shared.begun.elapsed() < S::POLL);
                followers
                    .reads
                    .entry(start.to_owned())
                    .or_insert_with(|| {
                        Arc::new(SharedRead {
                            begun: Instant::now(),
                            read: tokio::sync::OnceCell::new(),
                        })
                    })
                    .clone()
            })
        };
        let Some(shared) = shared else {
            return streams.read(stream_id, start, BATCH).await;
        };
        let read = shared.read.get_or_try_init(|| streams.read(stream_id, start, BATCH));
        read.await.cloned()
    }
}

/// What a follower reads, and what it has seen so far.
struct Probe<S> {
    streams: Arc<S>,
    store: Store,
    seen: Seen,
}

/// What a follower has seen: none before its first read.
enum Seen {
    /// Of a stream, where its next read starts: after the node's clock at the read before (an entry appended later
    /// has a later position), or after a position this replica appended at, so one entry is enough to tell; the
    /// first read only reads the clock.
    Start(Option<String>),
    /// Of the list of every stream ([`EVERY`]), the streams it listed last.
    Listed(Option<Vec<String>>),
}

impl<S: EventStreams> Probe<S> {
    /// Whether position `at`, where this replica appended, is past what the follower has read (it then reads on
    /// from there: the watches it wakes read everything before it themselves); `None` before its first read, which
    /// it then makes.
    fn appended(&mut self, at: (u64, u64)) -> Option<bool> {
        let Seen::Start(Some(start)) = &mut self.seen else {
            return None;
        };
        let read = parse_position(start.trim_start_matches('('))?;
        if at <= read {
            return Some(false);
        }
        *start = format!("({}-{}", at.0, at.1);
        Some(true)
    }

    /// Whether `stream_id` got something since the last call (or the list of every stream changed), or the read
    /// failed: either way its watches have something to read.
    async fn changed(&mut self, stream_id: &str) -> bool {
        match &mut self.seen {
            Seen::Listed(last) => match self.streams.every(&self.store).await {
                Ok((_, mut listed)) => {
                    listed.sort_unstable();
                    let changed = last.as_ref().is_some_and(|last| *last != listed);
                    *last = Some(listed);
                    changed
                }
                Err(_) => true,
            },
            Seen::Start(start) => {
                let (from, count) = start.as_deref().map_or(("-", 0), |start| (start, 1));
                match self.streams.read(stream_id, from, count).await {
                    Ok(read) => {
                        *start = Some(format!("({}-{}", read.now_ms.saturating_sub(1), u64::MAX));
                        !read.entries.is_empty()
                    }
                    Err(_) => true,
                }
            }
        }
    }
}

impl<E> Drop for Following<E> {
    fn drop(&mut self) {
        let mut tails = crate::sync::lock(&self.tails.0);
        for stream_id in &self.stream_ids {
            if let Some(followers) = tails.get_mut(stream_id)
                && let Some(at) = followers
                    .watches
                    .iter()
                    .position(|woken| Arc::ptr_eq(woken, &self.woken))
            {
                followers.watches.swap_remove(at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
    use std::sync::{Arc, Mutex};

    use berth_testkit::TestRedis;
    use tokio_stream::StreamExt;
    use tonic::Code;

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

    /// One fleet's stream in memory: its events' positions, its node's clock, and its last event trimmed.
    #[derive(Default)]
    struct Fleet {
        events: Vec<(u64, u64)>,
        now_ms: u64,
        gone: Option<(u64, u64)>,
    }

    /// Streams kept in memory, changed by the test while a watch reads them; a message is an event's id and
    /// cursor, or a keepalive's cursor. It holds the replica's shutdown switch and its followers of the streams, as
    /// a service's context does, and counts the reads its watches and followers make.
    #[derive(Clone)]
    struct Memory<const POLL_MS: u64 = 100>(
        Arc<Mutex<HashMap<String, Fleet>>>,
        Arc<watch::Sender<bool>>,
        Tails<String>,
        Arc<AtomicUsize>,
        Arc<AtomicUsize>,
    );

    impl Memory {
        fn new() -> Memory {
            Memory::default()
        }
    }

    /// Streams whose followers poll once an hour: only being told of an append wakes their watches sooner.
    const HOUR_MS: u64 = 3_600_000;

    impl Memory<HOUR_MS> {
        fn sleepy() -> Memory<HOUR_MS> {
            Memory::default()
        }
    }

    impl<const POLL_MS: u64> Default for Memory<POLL_MS> {
        fn default() -> Self {
            Memory(
                Arc::default(),
                Arc::new(watch::Sender::new(false)),
                Tails::default(),
                Arc::default(),
                Arc::default(),
            )
        }
    }

    impl<const POLL_MS: u64> Memory<POLL_MS> {
        fn reads(&self) -> usize {
            self.3.load(AtomicOrdering::Relaxed)
        }

        /// The reads of the streams' followers, which read one entry at most (a watch reads a batch).
        fn follower_reads(&self) -> usize {
            self.4.load(AtomicOrdering::Relaxed)
        }

        fn with(&self, fleet_id: &str, change: impl FnOnce(&mut Fleet)) {
            change(self.0.lock().unwrap().entry(fleet_id.to_owned()).or_default());
        }

        async fn open(
            &self,
            fleet_ids: &[&str],
            after_cursor: &str,
            redis: &TestRedis,
        ) -> Result<Events<Placed>, Status> {
            let store = Store::connect(&redis.config()).await.unwrap();
            let start = Start {
                fleet_ids: fleet_ids.iter().map(|id| id.to_string()).collect(),
                after_cursor: after_cursor.into(),
                from_oldest: after_cursor.is_empty(),
            };
            open(store, self.clone(), start, self.1.subscribe()).await
        }
    }

    impl<const POLL_MS: u64> EventStreams for Memory<POLL_MS> {
        type Entry = String;
        type Message = Placed;
        const SERVICE: &'static str = "test";
        const POLL: Duration = Duration::from_millis(POLL_MS);

        fn tails(&self) -> &Tails<String> {
            &self.2
        }

        async fn every(&self, _: &Store) -> Result<(u64, Vec<String>), StoreError> {
            self.3.fetch_add(1, AtomicOrdering::Relaxed);
            let fleets = self.0.lock().unwrap();
            let now_ms = fleets.values().map(|fleet| fleet.now_ms).max().unwrap_or_default();
            Ok((now_ms, fleets.keys().cloned().collect()))
        }

        async fn read(&self, fleet_id: &str, start: &str, count: usize) -> Result<EventsRead<String>, StoreError> {
            self.3.fetch_add(1, AtomicOrdering::Relaxed);
            if count <= 1 {
                self.4.fetch_add(1, AtomicOrdering::Relaxed);
            }
            let fleets = self.0.lock().unwrap();
            let Some(fleet) = fleets.get(fleet_id) else {
                return Ok(EventsRead {
                    now_ms: 0,
                    gone: None,
                    entries: Vec::new(),
                });
            };
            let (after, from) = match start.strip_prefix('(') {
                Some(position) => (true, parse_position(position)),
                None => (false, parse_position(start)),
            };
            let entries = fleet
                .events
                .iter()
                .filter(|at| from.is_none_or(|from| if after { **at > from } else { **at >= from }))
                .take(count)
                .map(|(ms, seq)| format!("{ms}-{seq}"))
                .collect();
            Ok(EventsRead {
                now_ms: fleet.now_ms,
                gone: fleet.gone,
                entries,
            })
        }

        fn position(entry: &String) -> &str {
            entry
        }

        async fn event(&self, _: &str, placed: Placed, _: String) -> Result<Option<Placed>, Status> {
            Ok(Some(placed))
        }

        fn keepalive(&self, cursor: String, _: prost_types::Timestamp) -> Placed {
            Placed {
                event_id: String::new(),
                cursor,
            }
        }
    }

    async fn next_ids(events: &mut Events<Placed>, count: usize) -> Vec<String> {
        let mut ids = Vec::new();
        while ids.len() < count {
            let next = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
            ids.push(next.expect("an event in time").unwrap().unwrap().event_id);
        }
        ids
    }

    #[tokio::test]
    async fn fleets_merge_by_position_then_fleet_and_wait_for_the_slowest_clock() {
        let redis = TestRedis::single();
        let memory = Memory::new();
        memory.with("a", |a| {
            a.events = vec![(10, 0), (20, 0)];
            a.now_ms = 30;
        });
        // b's node lags: nothing of a after its clock can go out yet.
        memory.with("b", |b| {
            b.events = vec![(10, 0)];
            b.now_ms = 15;
        });
        let mut events = memory.open(&["b", "a"], "", &redis).await.unwrap();
        assert_eq!(next_ids(&mut events, 2).await, ["a/10-0", "b/10-0"]);
        // b could still get an event before a's second: it did.
        memory.with("b", |b| {
            b.events.push((15, 0));
            b.now_ms = 40;
        });
        assert_eq!(next_ids(&mut events, 2).await, ["b/15-0", "a/20-0"]);
    }

    #[tokio::test]
    async fn a_cursor_resumes_just_after_its_event_unless_what_follows_was_trimmed() {
        let redis = TestRedis::single();
        let memory = Memory::new();
        for fleet_id in ["a", "b"] {
            memory.with(fleet_id, |fleet| {
                fleet.events = vec![(10, 0), (20, 0)];
                fleet.now_ms = 30;
            });
        }
        let mut events = memory.open(&["a", "b"], "", &redis).await.unwrap();
        let first = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
        let first = first.unwrap().unwrap().unwrap();
        assert_eq!(first.event_id, "a/10-0");
        let mut resumed = memory.open(&["a", "b"], &first.cursor, &redis).await.unwrap();
        assert_eq!(next_ids(&mut resumed, 3).await, ["b/10-0", "a/20-0", "b/20-0"]);
        // b's first event is gone: a watcher past it goes on, one before it is told.
        memory.with("b", |b| {
            b.events.remove(0);
            b.gone = Some((10, 0));
        });
        let mut past = memory.open(&["a", "b"], "10-0/b", &redis).await.unwrap();
        assert_eq!(next_ids(&mut past, 2).await, ["a/20-0", "b/20-0"]);
        let refused = memory.open(&["a", "b"], &first.cursor, &redis).await;
        assert_eq!(refused.err().map(|status| status.code()), Some(Code::OutOfRange));
    }

    /// A watch of fleet a, which holds one event, past that event.
    async fn past_first_event(memory: &Memory, redis: &TestRedis) -> Events<Placed> {
        memory.with("a", |a| {
            a.events = vec![(10, 0)];
            a.now_ms = 15;
        });
        let mut events = memory.open(&["a"], "", redis).await.unwrap();
        assert_eq!(next_ids(&mut events, 1).await, ["a/10-0"]);
        events
    }

    /// The code a watch ends with, once its next message is its end.
    async fn end_code(events: &mut Events<Placed>) -> Option<Code> {
        let ended = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
        let ended = ended.expect("the end in time").expect("a status");
        ended.err().map(|status| status.code())
    }

    #[tokio::test]
    async fn a_running_watch_whose_next_events_were_trimmed_unread_ends_out_of_range() {
        let redis = TestRedis::single();
        let memory = Memory::new();
        let mut events = past_first_event(&memory, &redis).await;
        // One more came and went between two reads.
        memory.with("a", |a| {
            a.events = vec![(30, 0)];
            a.gone = Some((20, 0));
            a.now_ms = 40;
        });
        assert_eq!(end_code(&mut events).await, Some(Code::OutOfRange));
    }

    #[tokio::test]
    async fn a_watch_ends_unavailable_when_its_replica_shuts_down_after_quiet_rounds() {
        let redis = TestRedis::single();
        let memory = Memory::new();
        let mut events = past_first_event(&memory, &redis).await;
        // Rounds go by, quiet and not, before the switch turns: the wait on it lasts across them.
        tokio::time::sleep(Duration::from_millis(300)).await;
        memory.with("a", |a| {
            a.events.push((20, 0));
            a.now_ms = 25;
        });
        assert_eq!(next_ids(&mut events, 1).await, ["a/20-0"]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        memory.1.send_replace(true);
        assert_eq!(end_code(&mut events).await, Some(Code::Unavailable));
        let after = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
        assert!(
            after.expect("the stream's end in time").is_none(),
            "nothing after the end"
        );
    }

    #[tokio::test]
    async fn a_follower_told_of_an_append_wakes_its_watches_at_once_without_a_read() {
        let redis = TestRedis::single();
        let memory = Memory::sleepy();
        memory.with("a", |a| a.now_ms = 5);
        let mut events = memory.open(&["a"], "", &redis).await.unwrap();
        // Quiet rounds of the watch go by while its follower waits for its hour.
        let quiet = tokio::time::timeout(QUIET + Duration::from_millis(300), events.next()).await;
        assert!(quiet.is_err(), "nothing to send yet");
        let before = memory.follower_reads();
        memory.with("a", |a| {
            a.events.push((10, 0));
            a.now_ms = 15;
        });
        memory.2.appended("a", "10-0");
        memory.2.appended("unfollowed", "10-0");
        // Within the hour its watch's reads take the answer of the read the watches shared before: only the wake,
        // which drops it, brings the event.
        assert_eq!(next_ids(&mut events, 1).await, ["a/10-0"]);
        assert_eq!(memory.follower_reads(), before, "the follower read nothing to wake it");
    }

    /// WATCHES watches of `fleet_ids` (every fleet when none) over fleet a, quiet once each has its one event: how
    /// many reads they and their followers make in 10 poll periods.
    async fn quiet_watches(memory: &Memory, fleet_ids: &[&str], redis: &TestRedis) -> (Vec<Events<Placed>>, usize) {
        memory.with("a", |a| {
            a.events = vec![(10, 0)];
            a.now_ms = 20;
        });
        let mut watches = Vec::new();
        for _ in 0..WATCHES {
            let mut events = memory.open(fleet_ids, "", redis).await.unwrap();
            assert_eq!(next_ids(&mut events, 1).await, ["a/10-0"]);
            watches.push(events);
        }
        let before = memory.reads();
        tokio::time::sleep(POLL * 10).await;
        (watches, memory.reads() - before)
    }

    #[tokio::test]
    async fn quiet_watches_of_one_stream_cost_about_the_reads_of_one_and_all_wake_to_its_next_event() {
        let redis = TestRedis::single();
        let memory = Memory::new();
        let (mut watches, quiet) = quiet_watches(&memory, &["a"], &redis).await;
        // Polling each on its own, the watches would read the stream WATCHES times a poll period; followed, it is
        // read once a period, and each watch reads it once a QUIET second.
        assert!(quiet < 10 + 2 * WATCHES, "{quiet} reads in 10 poll periods");
        let before = memory.reads();
        memory.with("a", |a| {
            a.events.push((30, 0));
            a.now_ms = 40;
        });
        for events in &mut watches {
            assert_eq!(next_ids(events, 1).await, ["a/30-0"]);
        }
        // Woken together, standing at the same place, they share one read (beside the follower's).
        let woken = memory.reads() - before;
        assert!(
            woken < WATCHES / 5,
            "{woken} reads to bring the event to {WATCHES} watches"
        );
    }

    #[tokio::test]
    async fn quiet_watches_of_every_stream_cost_about_the_reads_of_one_and_all_follow_a_new_one() {
        let redis = TestRedis::single();
        let memory = Memory::new();
        let (mut watches, quiet) = quiet_watches(&memory, &[], &redis).await;
        // Each round of a watch of every stream lists them and reads each: polling on its own, 2 reads a period
        // each; followed, the list and the stream are read once a period, and each watch does a round a second.
        assert!(quiet < 2 * 10 + 2 * 2 * WATCHES, "{quiet} reads in 10 poll periods");
        memory.with("a", |a| a.now_ms = 40);
        memory.with("b", |b| {
            b.events = vec![(30, 0)];
            b.now_ms = 40;
        });
        for events in &mut watches {
            assert_eq!(next_ids(events, 1).await, ["b/30-0"]);
        }
    }

    /// Quiet watches in each test of their cost.
    const WATCHES: usize = 50;
}
