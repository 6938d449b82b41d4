//! Game session placements, in their queue's slot beside it (`queues/lib.lua` lists the keys). A PENDING placement
//! is one hash, an ended one a packed value kept for the retention; every transition of it is one script there —
//! start, each attempt, the end it reaches first (fulfilled, stopped, timed out) — so that a race between two of them
//! is decided in one place and each placement ends once, with one event. Placements reach the workers of every
//! replica through the queue's requests stream and its consumer group: an entry stays pending until a worker is done
//! with it, and the entries of a worker that died are taken over by another after a short idle time. A placement id
//! is held across queues in a slot of its own, so that Describe and Stop find a placement from its id alone.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use berth_domain::game_server::timestamp;
use berth_domain::game_session::{player_session_id, player_session_number};
use berth_domain::queue::order::Candidate;
use berth_domain::stored::{FirstChoiceOutcome, PlacementEventType, PlacementStatus, PlacementStatusReason};
use berth_proto::common::v1 as common;
use berth_proto::placement::v1 as pb;
use flate2::{Decompress, FlushDecompress, Status};
use miniz_oxide::deflate::core::{
    CompressionStrategy, CompressorOxide, TDEFLFlush, TDEFLStatus, compress_to_output,
    create_comp_flags_from_zip_params,
};
use prost::Message;
use redis::Value;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};

use crate::codec::{EventsRead, binary_fields, events_read, outcome_detail, text_field, unexpected};
use crate::keys::{DRAINING_QUEUES, QUEUES, QueueKeys, placement_id};
use crate::queues::queue_call;
use crate::scripts::scripts;
use crate::{Store, StoreError};

/// The consumer group of every queue's requests stream (`PLACEMENT_WORKERS` in `queues/lib.lua`).
const WORKERS: &str = "workers";

/// Redis's clock when a record was read, and this process's when the answer came: a later moment of Redis's clock is
/// the first plus what has elapsed since the second (off by at most the read's round trip).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisTime {
    pub ms: i64,
    pub at: Instant,
}

impl RedisTime {
    /// Redis's clock now, ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        self.ms + i64::try_from(self.at.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

/// A placement as stored: the contract's message, and what the workers need beside it.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacementRecord {
    /// As the contract shows it.
    pub placement: pb::GameSessionPlacement,
    /// The request it was started with.
    pub request: pb::StartGameSessionPlacementRequest,
    pub status: PlacementStatus,
    /// When it started and when it times out, ms since the epoch (Redis' clock).
    pub start_ms: i64,
    pub deadline_ms: i64,
    /// Attempts recorded, and the candidates of the last one.
    pub attempts: u32,
    pub candidates: Vec<Candidate>,
    /// The furthest any attempt got: the reason it times out with.
    pub furthest: Option<PlacementStatusReason>,
    /// When it was read, by Redis's clock: the clock its deadlines are kept by.
    pub read: RedisTime,
}

impl PlacementRecord {
    /// The record as recording its next attempt left it: `record_attempt` answers only what it changed.
    pub fn attempted(
        &mut self,
        attempts: u32,
        candidates: &[Candidate],
        furthest: Option<PlacementStatusReason>,
        read: RedisTime,
    ) {
        self.attempts = attempts;
        self.placement.attempt_count = attempts;
        self.candidates = candidates.to_vec();
        self.furthest = furthest;
        self.read = read;
    }
}

/// Candidates as an attempt records them: `fleet/location` joined by ','; fleet ids and locations hold neither.
fn candidates_text(candidates: &[Candidate]) -> String {
    candidates
        .iter()
        .map(|c| format!("{}/{}", c.fleet_id, c.location))
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_candidates(text: &str) -> Vec<Candidate> {
    text.split(',')
        .filter_map(|pair| pair.split_once('/'))
        .map(|(fleet_id, location)| Candidate {
            fleet_id: fleet_id.to_owned(),
            location: location.to_owned(),
        })
        .collect()
}

/// The players placed as a placement keeps them: each one's player session by its number in the game session
/// (`berth_domain::game_session::player_session_id`) when it is the player of that rank among the desired ones, as a
/// new game session numbers them, space-separated — a few bytes where the ids would take 60 each. Otherwise (a
/// player reserved again in that session, ids of an earlier release) they are kept whole, as a JSON list of [player
/// id, player session id].
fn placed_text(
    game_session_id: &str,
    placed: &[(String, String)],
    desired: &[pb::DesiredPlayerSession],
) -> Result<String, serde_json::Error> {
    let numbers: Option<Vec<String>> = placed
        .iter()
        .map(|(player, id)| {
            let n = player_session_number(game_session_id, id)?;
            let rank = usize::try_from(n).ok()?.checked_sub(1)?;
            (desired.get(rank)?.player_id == *player).then(|| n.to_string())
        })
        .collect();
    match numbers {
        Some(numbers) => Ok(numbers.join(" ")),
        None => serde_json::to_string(placed),
    }
}

fn parse_placed(
    text: &str,
    game_session_id: &str,
    request: &pb::StartGameSessionPlacementRequest,
) -> Option<Vec<(String, String)>> {
    if text.starts_with('[') {
        return serde_json::from_str(text).ok();
    }
    text.split_whitespace()
        .map(|n| {
            let n: u64 = n.parse().ok()?;
            let player = request
                .desired_player_sessions
                .get(usize::try_from(n).ok()?.checked_sub(1)?)?;
            Some((player.player_id.clone(), player_session_id(game_session_id, n)))
        })
        .collect()
}

/// A request as a placement keeps it: its protobuf deflated, behind a 0 byte. Player latencies repeat each player's
/// id once per location, which deflating takes back (a request of 4 players with latencies to 4 locations keeps in
/// a quarter of its size); a request kept by an earlier release, not deflated, still reads, as no protobuf message
/// starts with a 0 byte. Deflated with the fixed Huffman codes by one compressor per thread, reset for each request
/// rather than made (its tables allocated) for each: for a request this small, building its own codes cost most of
/// the time (17 → 4.5 µs for the bench's request of 566 bytes, kept in 132 bytes rather than 121).
fn stored_request(request: &pb::StartGameSessionPlacementRequest) -> Vec<u8> {
    let encoded = request.encode_to_vec();
    let mut stored = Vec::with_capacity(encoded.len() / 2 + 16);
    stored.push(0);
    DEFLATER.with_borrow_mut(|deflater| {
        deflater.reset();
        let (status, _) = compress_to_output(deflater, &encoded, TDEFLFlush::Finish, |out| {
            stored.extend_from_slice(out);
            true
        });
        assert_eq!(status, TDEFLStatus::Done, "deflating into memory cannot fail");
    });
    stored
}

fn read_request(stored: &[u8]) -> Option<pb::StartGameSessionPlacementRequest> {
    let Some(deflated) = stored.strip_prefix(&[0]) else {
        return pb::StartGameSessionPlacementRequest::decode(stored).ok();
    };
    let encoded = INFLATER.with_borrow_mut(|inflater| inflate(inflater, deflated))?;
    pb::StartGameSessionPlacementRequest::decode(encoded.as_slice()).ok()
}

thread_local! {
    /// One deflater per thread (stored_request): the fastest level, fixed codes, no zlib header.
    static DEFLATER: RefCell<Box<CompressorOxide>> = RefCell::new(Box::new(CompressorOxide::new(
        create_comp_flags_from_zip_params(1, -15, CompressionStrategy::Fixed as i32),
    )));
    /// One inflater per thread, reset for each request: making one allocates and clears tens of KiB, which every
    /// read of a placement paid (a watch's events join their placements, a worker reads its request).
    static INFLATER: RefCell<Decompress> = RefCell::new(Decompress::new(false));
}

/// `deflated` inflated whole by `inflater`, into a buffer sized for it at once; None unless it is one whole deflate
/// stream.
fn inflate(inflater: &mut Decompress, deflated: &[u8]) -> Option<Vec<u8>> {
    inflater.reset(false);
    let mut inflated = Vec::with_capacity(deflated.len() * 4);
    loop {
        if inflated.len() == inflated.capacity() {
            inflated.reserve(inflated.capacity().max(64));
        }
        let (read, written) = (inflater.total_in(), inflater.total_out());
        let rest = deflated.get(usize::try_from(read).ok()?..)?;
        match inflater.decompress_vec(rest, &mut inflated, FlushDecompress::None) {
            Ok(Status::StreamEnd) => return Some(inflated),
            Ok(_) if inflater.total_in() != read || inflater.total_out() != written => {}
            // Room to write and nothing read or written: the stream is cut short (or not deflate at all).
            _ => return None,
        }
    }
}

/// A placement from its stored fields (`queues/lib.lua`).
fn record(script: &str, fields: &HashMap<String, Vec<u8>>, read_ms: i64) -> Result<PlacementRecord, StoreError> {
    let bad = |what: &str| unexpected(script, format!("a placement with {what}"));
    let text = |name: &str| text_field(fields, name);
    let number = |name: &str| text(name).parse::<i64>().map_err(|_| bad(name));
    let request = read_request(fields.get("req").map(Vec::as_slice).unwrap_or_default())
        .ok_or_else(|| bad("a request that does not decode"))?;
    let status = PlacementStatus::parse(&text("status")).ok_or_else(|| bad("an unknown status"))?;
    let reason = PlacementStatusReason::parse(&text("reason"));
    let start_ms = number("s_ms")?;
    let deadline_ms = number("dl_ms")?;
    let end_ms = text("e_ms").parse::<i64>().ok();
    let attempts = u32::try_from(number("n")?).map_err(|_| bad("n"))?;
    let fulfilled = status == PlacementStatus::Fulfilled;
    let placed = if fulfilled {
        parse_placed(&text("placed"), &text("gsid"), &request).ok_or_else(|| bad("malformed placed players"))?
    } else {
        Vec::new()
    };
    let placement = pb::GameSessionPlacement {
        placement_id: request.placement_id.clone(),
        queue_name: request.queue_name.clone(),
        status: status.to_proto() as i32,
        status_reason: reason.map_or(0, |r| r.to_proto() as i32),
        status_message: text("msg"),
        maximum_player_session_count: request.maximum_player_session_count,
        game_properties: request.game_properties.clone(),
        game_session_name: request.game_session_name.clone(),
        game_session_data: request.game_session_data.clone(),
        matchmaker_data: request.matchmaker_data.clone(),
        player_latencies: request.player_latencies.clone(),
        priority_configuration_override: request.priority_configuration_override.clone(),
        start_time: Some(timestamp(start_ms)),
        deadline_time: Some(timestamp(deadline_ms)),
        end_time: end_ms.map(timestamp),
        attempt_count: attempts,
        game_session_id: text("gsid"),
        fleet_id: text("fleet"),
        location: text("loc"),
        endpoint: fulfilled.then(|| common::Endpoint {
            ip_address: text("ip"),
            dns_name: text("dns"),
            port: text("port").parse().unwrap_or(0),
        }),
        placed_player_sessions: placed
            .into_iter()
            .map(|(player_id, player_session_id)| pb::PlacedPlayerSession {
                player_id,
                player_session_id,
            })
            .collect(),
        first_choice_outcome: FirstChoiceOutcome::parse(&text("fco")).map_or(0, |o| o.to_proto() as i32),
        lowest_latency: text("ll") == "1",
        lowest_price: text("lp") == "1",
    };
    Ok(PlacementRecord {
        placement,
        request,
        status,
        start_ms,
        deadline_ms,
        attempts,
        candidates: parse_candidates(&text("cands")),
        furthest: PlacementStatusReason::parse(&text("why")),
        read: RedisTime {
            ms: read_ms,
            at: Instant::now(),
        },
    })
}

/// The outcome word, its detail and the placement of a placement script's reply.
fn decode(script: &str, raw: &[Value]) -> Result<(String, String, Option<PlacementRecord>), StoreError> {
    let (outcome, detail, rest) = outcome_detail(script, raw)?;
    let placement = if rest.is_empty() {
        None
    } else {
        Some(record(
            script,
            &binary_fields(script, rest)?,
            redis_time(script, raw)?.ms,
        )?)
    };
    Ok((outcome, detail, placement))
}

/// Redis's clock as a placement script's reply tells it (its second value, after `outcome_detail` has checked the
/// reply's shape).
fn redis_time(script: &str, raw: &[Value]) -> Result<RedisTime, StoreError> {
    let now: String = redis::from_redis_value_ref(&raw[1]).map_err(|_| unexpected(script, "a malformed clock"))?;
    Ok(RedisTime {
        ms: now.parse().map_err(|_| unexpected(script, &now))?,
        at: Instant::now(),
    })
}

fn present(script: &str, placement: Option<PlacementRecord>) -> Result<Box<PlacementRecord>, StoreError> {
    placement
        .map(Box::new)
        .ok_or_else(|| unexpected(script, "no placement"))
}

/// Who holds a placement id.
#[derive(Debug, PartialEq, Eq)]
pub enum IdHold {
    /// Held now for this request.
    Claimed,
    /// Held already for this request (a retry).
    Held,
    /// Held for another request, in this queue.
    TakenBy(String),
}

fn holder(queue_name: &str, digest: &str) -> String {
    format!("{queue_name}\n{digest}")
}

/// Holds placement id `id` for a request (`digest`) in `queue_name` for `ttl_ms`.
pub async fn claim_placement_id(
    store: &Store,
    id: &str,
    queue_name: &str,
    digest: &str,
    ttl_ms: u64,
) -> Result<IdHold, StoreError> {
    // One command rather than a function call: Redis 7's SET with NX and GET holds the id unless it is held, and
    // answers what was held before.
    let mine = holder(queue_name, digest);
    let mut hold = redis::cmd("SET");
    hold.arg(placement_id(id))
        .arg(&mine)
        .arg("PX")
        .arg(ttl_ms)
        .arg("NX")
        .arg("GET");
    let held: Option<String> = store.query(&hold).await?;
    Ok(match held {
        None => IdHold::Claimed,
        Some(held) if held == mine => IdHold::Held,
        Some(held) => IdHold::TakenBy(
            held.split_once('\n')
                .map_or(held.as_str(), |(queue, _)| queue)
                .to_owned(),
        ),
    })
}

/// Lets go of a hold [`claim_placement_id`] made for a request that did not start.
pub async fn release_placement_id(store: &Store, id: &str, queue_name: &str, digest: &str) -> Result<(), StoreError> {
    let mut call = scripts().release_placement_id.prepare();
    call.key(placement_id(id)).arg(holder(queue_name, digest));
    let _: String = store.invoke(&call).await?;
    Ok(())
}

/// The outcome of starting a placement.
#[derive(Debug)]
pub enum Started {
    /// Started, PENDING.
    Created(Box<PlacementRecord>),
    /// Started before by the same request: as it stands.
    Existing(Box<PlacementRecord>),
    /// The id is in use with another request.
    TokenReused,
    /// No such queue.
    NoQueue,
    /// The queue holds its maximum_pending_placements (given).
    Full(u32),
}

/// Starts a placement of a checked request, whose digest is `digest`; `traceparent` goes with it to the worker.
pub async fn start_placement(
    store: &Store,
    request: &pb::StartGameSessionPlacementRequest,
    digest: &str,
    traceparent: Option<&str>,
) -> Result<Started, StoreError> {
    const SCRIPT: &str = "start_placement";
    let mut call = queue_call(&scripts().start_placement, &request.queue_name);
    call.arg(&request.placement_id)
        .arg(digest)
        .arg(stored_request(request))
        .arg(traceparent.unwrap_or_default());
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, detail, placement) = decode(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "CREATED" => Started::Created(present(SCRIPT, placement)?),
        "EXISTING" => Started::Existing(present(SCRIPT, placement)?),
        "TOKEN_REUSED" => Started::TokenReused,
        "NOT_FOUND" => Started::NoQueue,
        "FULL" => Started::Full(detail.parse().map_err(|_| unexpected(SCRIPT, &detail))?),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// A placement by queue and id; `None` when there is none.
pub async fn read_placement(store: &Store, queue_name: &str, id: &str) -> Result<Option<PlacementRecord>, StoreError> {
    const SCRIPT: &str = "read_placement";
    let mut call = queue_call(&scripts().read_placement, queue_name);
    call.arg(id);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, _, placement) = decode(SCRIPT, &raw)?;
    match outcome.as_str() {
        "FOUND" => present(SCRIPT, placement).map(|placement| Some(*placement)),
        "NOT_FOUND" => Ok(None),
        other => Err(unexpected(SCRIPT, other)),
    }
}

/// Up to `limit` of a queue's PENDING placements in the order they started, after the placement that started at
/// `after` (its start ms and id; `None` for the first page); `None` when there is no such queue.
pub async fn pending_placements(
    store: &Store,
    queue_name: &str,
    after: Option<(i64, &str)>,
    limit: usize,
) -> Result<Option<Vec<PlacementRecord>>, StoreError> {
    const SCRIPT: &str = "list_pending_placements";
    let mut call = queue_call(&scripts().list_pending_placements, queue_name);
    match after {
        Some((started_ms, id)) => call.arg(started_ms).arg(id),
        None => call.arg("").arg(""),
    };
    call.arg(limit);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let [outcome, now, placements @ ..] = raw.as_slice() else {
        return Err(unexpected(SCRIPT, "a short reply"));
    };
    let text = |value: &Value| -> Result<String, StoreError> {
        redis::from_redis_value_ref(value).map_err(|_| unexpected(SCRIPT, "a malformed reply"))
    };
    match text(outcome)?.as_str() {
        "FOUND" => {}
        "NOT_FOUND" => return Ok(None),
        other => return Err(unexpected(SCRIPT, other)),
    }
    let now = text(now)?;
    let now_ms = now.parse().map_err(|_| unexpected(SCRIPT, &now))?;
    placements
        .iter()
        .map(|fields| {
            let fields: Vec<Value> =
                redis::from_redis_value_ref(fields).map_err(|_| unexpected(SCRIPT, "a malformed placement"))?;
            record(SCRIPT, &binary_fields(SCRIPT, &fields)?, now_ms)
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A placement by id alone; `None` when there is none.
pub async fn find_placement(store: &Store, id: &str) -> Result<Option<PlacementRecord>, StoreError> {
    let held: Option<String> = store.query(redis::cmd("GET").arg(placement_id(id))).await?;
    match held.as_deref().and_then(|held| held.split_once('\n')) {
        Some((queue_name, _)) => read_placement(store, queue_name, id).await,
        None => Ok(None),
    }
}

/// The outcome of recording an attempt.
#[derive(Debug)]
pub enum AttemptRecorded {
    /// Recorded: its new attempt count, and Redis's clock when it was (the caller holds the rest, see
    /// `PlacementRecord::attempted`).
    Recorded {
        attempts: u32,
        read: RedisTime,
    },
    /// Another worker recorded one first, or it is no longer PENDING: as it stands.
    Moved(Box<PlacementRecord>),
    NotFound,
}

/// Records the next attempt of a placement read at `attempts`, with its candidates and the reason it would time
/// out with now.
pub async fn record_attempt(
    store: &Store,
    queue_name: &str,
    id: &str,
    attempts: u32,
    candidates: &[Candidate],
    furthest: Option<PlacementStatusReason>,
) -> Result<AttemptRecorded, StoreError> {
    const SCRIPT: &str = "record_attempt";
    let mut call = queue_call(&scripts().record_attempt, queue_name);
    call.arg(id)
        .arg(attempts)
        .arg(candidates_text(candidates))
        .arg(furthest.map_or("", PlacementStatusReason::as_str));
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, detail, placement) = decode(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "RECORDED" => AttemptRecorded::Recorded {
            attempts: detail.parse().map_err(|_| unexpected(SCRIPT, &detail))?,
            read: redis_time(SCRIPT, &raw)?,
        },
        "CONFLICT" | "ENDED" => AttemptRecorded::Moved(present(SCRIPT, placement)?),
        "NOT_FOUND" => AttemptRecorded::NotFound,
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// Where a FULFILLED placement's game session is, and how it was chosen.
#[derive(Clone, Debug)]
pub struct Fulfilment<'a> {
    pub game_session_id: &'a str,
    pub fleet_id: &'a str,
    pub location: &'a str,
    pub ip_address: &'a str,
    pub dns_name: &'a str,
    pub port: u32,
    /// (player id, player session id) of each desired player placed, in request order.
    pub placed: &'a [(String, String)],
    /// The request's desired players: a player session numbered n in the game session is kept as its number when it
    /// is the n-th of them's (see `placed_text`).
    pub desired: &'a [pb::DesiredPlayerSession],
    pub first_choice: FirstChoiceOutcome,
    pub lowest_latency: bool,
    pub lowest_price: bool,
}

/// An end for a PENDING placement.
#[derive(Clone, Debug)]
pub struct Finish<'a> {
    pub status: PlacementStatus,
    pub reason: Option<PlacementStatusReason>,
    pub message: &'a str,
    /// The attempt count it must be at; `None` for any.
    pub at_attempt: Option<u32>,
    /// Only once its deadline has passed (TIMED_OUT).
    pub after_deadline: bool,
    /// How long it stays readable once ended.
    pub retention_ms: u64,
    /// Set with FULFILLED.
    pub fulfilment: Option<Fulfilment<'a>>,
}

impl<'a> Finish<'a> {
    /// An end with `status`, `reason` and `message`, at whatever attempt, kept `retention_ms` once ended: set what
    /// a caller has beyond that with struct update syntax.
    pub fn new(
        status: PlacementStatus,
        reason: Option<PlacementStatusReason>,
        message: &'a str,
        retention_ms: u64,
    ) -> Finish<'a> {
        Finish {
            status,
            reason,
            message,
            at_attempt: None,
            after_deadline: false,
            retention_ms,
            fulfilment: None,
        }
    }

    /// FULFILLED by attempt `at_attempt`, as `fulfilment` says.
    pub fn fulfilled(at_attempt: u32, fulfilment: Fulfilment<'a>, retention_ms: u64) -> Finish<'a> {
        Finish {
            at_attempt: Some(at_attempt),
            fulfilment: Some(fulfilment),
            ..Finish::new(PlacementStatus::Fulfilled, None, "", retention_ms)
        }
    }
}

/// The outcome of ending a placement.
#[derive(Debug)]
pub enum Finished {
    /// Ended as asked, with its event's position in the queue's event stream.
    Finished(Box<PlacementRecord>, String),
    /// It had ended already, or moved to another attempt: as it stands.
    Moved(Box<PlacementRecord>),
    /// Its deadline (ms) has not passed.
    Waiting(i64),
    NotFound,
}

/// Ends a PENDING placement, unless something else ended it first.
pub async fn finish_placement(
    store: &Store,
    queue_name: &str,
    id: &str,
    finish: &Finish<'_>,
) -> Result<Finished, StoreError> {
    let (outcome, detail, placement) = finish_call(store, queue_name, id, finish, "").await?;
    Ok(match outcome.as_str() {
        "FINISHED" => Finished::Finished(present(FINISH, placement)?, detail),
        "ENDED" | "CONFLICT" => Finished::Moved(present(FINISH, placement)?),
        "WAITING" => Finished::Waiting(detail.parse().map_err(|_| unexpected(FINISH, &detail))?),
        "NOT_FOUND" => Finished::NotFound,
        other => return Err(unexpected(FINISH, other)),
    })
}

/// What became of a worker's last end of a placement.
#[derive(Debug)]
pub enum Done {
    /// Ended as asked, its request's entry acknowledged: the worker holds the rest of the placement, which is not
    /// sent back. With its event's position in the queue's event stream.
    Ended(String),
    /// It had ended already, or moved to another attempt: as it stands.
    Moved(Box<PlacementRecord>),
    NotFound,
}

/// Ends a PENDING placement as `finish` says (an end that needs no deadline to pass) and acknowledges its request's
/// `entry` in the same step: its worker has nothing left to do for it.
pub async fn finish_request(
    store: &Store,
    queue_name: &str,
    id: &str,
    finish: &Finish<'_>,
    entry: &str,
) -> Result<Done, StoreError> {
    let (outcome, detail, placement) = finish_call(store, queue_name, id, finish, entry).await?;
    Ok(match outcome.as_str() {
        "FINISHED" => Done::Ended(detail),
        "ENDED" | "CONFLICT" => Done::Moved(present(FINISH, placement)?),
        "NOT_FOUND" => Done::NotFound,
        other => return Err(unexpected(FINISH, other)),
    })
}

const FINISH: &str = "finish_placement";

/// Calls finish_placement: its outcome, detail and placement (none when `entry` was acknowledged).
async fn finish_call(
    store: &Store,
    queue_name: &str,
    id: &str,
    finish: &Finish<'_>,
    entry: &str,
) -> Result<(String, String, Option<PlacementRecord>), StoreError> {
    let mut call = queue_call(&scripts().finish_placement, queue_name);
    call.arg(id)
        .arg(finish.status.as_str())
        .arg(finish.reason.map_or("", PlacementStatusReason::as_str))
        .arg(finish.message)
        .arg(finish.at_attempt.map(|n| n.to_string()).unwrap_or_default())
        .arg(if finish.after_deadline { "1" } else { "0" })
        .arg(finish.retention_ms)
        .arg(entry);
    if let Some(f) = &finish.fulfilment {
        let placed =
            placed_text(f.game_session_id, f.placed, f.desired).map_err(|err| unexpected(FINISH, err.to_string()))?;
        call.arg("gsid")
            .arg(f.game_session_id)
            .arg("fleet")
            .arg(f.fleet_id)
            .arg("loc")
            .arg(f.location)
            .arg("ip")
            .arg(f.ip_address)
            .arg("dns")
            .arg(f.dns_name)
            .arg("port")
            .arg(f.port)
            .arg("placed")
            .arg(placed)
            .arg("fco")
            .arg(f.first_choice.as_str())
            .arg("ll")
            .arg(if f.lowest_latency { "1" } else { "0" })
            .arg("lp")
            .arg(if f.lowest_price { "1" } else { "0" });
    }
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    decode(FINISH, &raw)
}

/// A placement's request as a worker takes it from its queue's stream.
#[derive(Clone, Debug)]
pub struct Request {
    /// The stream entry: the worker holds it until it is done with the placement.
    pub entry: String,
    pub placement_id: String,
    /// When the placement times out, ms since the epoch (Redis' clock).
    pub deadline_ms: i64,
    /// The trace context of the call that started it (W3C traceparent), when it was traced.
    pub traceparent: Option<String>,
    /// The placement as it started, which a new entry carries whole (its request, start and deadline): the worker
    /// that takes the entry first works from it without reading the record. `None` for an entry taken over from
    /// another worker, which may have moved the placement on, and for one written by an earlier release.
    pub started: Option<Box<PlacementRecord>>,
}

/// A request from its stream entry; `first` when no worker has taken it before.
fn request_of(entry: &StreamId, first: bool) -> Option<Request> {
    let text = |name: &str| -> Option<String> { entry.get(name) };
    let deadline = text("dl_ms")?;
    Some(Request {
        entry: entry.id.clone(),
        placement_id: text("id")?,
        deadline_ms: deadline.parse().ok()?,
        traceparent: text("tp"),
        started: first.then(|| started(entry, deadline)).flatten().map(Box::new),
    })
}

/// The record of a placement just started, from its request's entry: PENDING, no attempt made, started when the
/// entry was added (its id's time, Redis's clock) and read then. `None` for an entry without its request.
fn started(entry: &StreamId, deadline: String) -> Option<PlacementRecord> {
    let request: Vec<u8> = entry.get("req")?;
    let start_ms = entry.id.split_once('-')?.0;
    let fields = HashMap::from([
        ("req".to_owned(), request),
        ("status".to_owned(), PlacementStatus::Pending.as_str().into()),
        ("s_ms".to_owned(), start_ms.into()),
        ("dl_ms".to_owned(), deadline.into_bytes()),
        ("n".to_owned(), b"0".to_vec()),
    ]);
    record("take_requests", &fields, start_ms.parse().ok()?).ok()
}

/// Takes up to `count` new requests of a queue for worker `consumer`, waiting up to `block_ms` for one. `store`
/// must be one the caller keeps for this alone: the wait holds its connection. An entry that does not read (written
/// by another release) is left pending for a worker that reads it.
pub async fn take_requests(
    store: &Store,
    queue_name: &str,
    consumer: &str,
    count: usize,
    block_ms: u64,
) -> Result<Vec<Request>, StoreError> {
    let reply: Option<StreamReadReply> = store
        .query(
            redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(WORKERS)
                .arg(consumer)
                .arg("COUNT")
                .arg(count)
                .arg("BLOCK")
                .arg(block_ms)
                .arg("STREAMS")
                .arg(QueueKeys::new(queue_name).requests())
                .arg(">"),
        )
        .await?;
    Ok(reply
        .into_iter()
        .flat_map(|reply| reply.keys)
        .flat_map(|key| key.ids)
        .filter_map(|entry| request_of(&entry, true))
        .collect())
}

/// Takes over up to `count` requests of a queue that their workers have not touched for `idle_ms` (they died, or
/// stalled), for worker `consumer`.
pub async fn reclaim_requests(
    store: &Store,
    queue_name: &str,
    consumer: &str,
    idle_ms: u64,
    count: usize,
) -> Result<Vec<Request>, StoreError> {
    let reply: StreamAutoClaimReply = store
        .query(
            redis::cmd("XAUTOCLAIM")
                .arg(QueueKeys::new(queue_name).requests())
                .arg(WORKERS)
                .arg(consumer)
                .arg(idle_ms)
                .arg("0-0")
                .arg("COUNT")
                .arg(count),
        )
        .await?;
    Ok(reply
        .claimed
        .iter()
        .filter_map(|entry| request_of(entry, false))
        .collect())
}

/// Tells the queue that worker `consumer` still works on `entries`, so that no other takes them over; returns those
/// it no longer holds (another worker took them over while it was silent, or they are done with), which it must let
/// go of.
pub async fn touch_requests(
    store: &Store,
    queue_name: &str,
    consumer: &str,
    entries: &[String],
) -> Result<Vec<String>, StoreError> {
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let mut call = queue_call(&scripts().touch_requests, queue_name);
    call.arg(consumer).arg(entries);
    store.invoke(&call).await
}

/// A worker is done with placement `id`'s request: the entry leaves the stream.
pub async fn placement_done(store: &Store, queue_name: &str, id: &str, entry: &str) -> Result<(), StoreError> {
    let mut call = queue_call(&scripts().placement_done, queue_name);
    call.arg(entry).arg(id);
    let _: i64 = store.invoke(&call).await?;
    Ok(())
}

/// Trims a queue's events to `retention_ms` and `cap`; returns how many placements are PENDING and their average
/// wait, ms.
pub async fn sweep_queue(
    store: &Store,
    queue_name: &str,
    retention_ms: u64,
    cap: u64,
) -> Result<(u64, u64), StoreError> {
    let mut call = queue_call(&scripts().sweep_queue, queue_name);
    call.arg(retention_ms).arg(cap);
    let (pending, sum, now): (u64, i64, i64) = store.invoke(&call).await?;
    let average = match i64::try_from(pending) {
        Ok(n) if n > 0 => u64::try_from(now - sum / n).unwrap_or(0),
        _ => 0,
    };
    Ok((pending, average))
}

/// The queues whose placements the workers visit: every queue, and deleted ones whose requests are not all done
/// with. A deleted queue with none left is dropped from the second list here.
pub async fn queues_to_work(store: &Store) -> Result<Vec<String>, StoreError> {
    let mut names: Vec<String> = store.query(redis::cmd("ZRANGE").arg(QUEUES).arg(0).arg(-1)).await?;
    let draining: Vec<String> = store
        .query(redis::cmd("ZRANGE").arg(DRAINING_QUEUES).arg(0).arg(-1))
        .await?;
    for name in draining {
        let left: i64 = store
            .query(redis::cmd("XLEN").arg(QueueKeys::new(&name).requests()))
            .await?;
        if left == 0 {
            let _: i64 = store.query(redis::cmd("ZREM").arg(DRAINING_QUEUES).arg(&name)).await?;
        } else if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// The queues, with the clock of the node holding their list (see `queues/now.lua`).
pub async fn queues_now(store: &Store) -> Result<(u64, Vec<String>), StoreError> {
    let mut call = scripts().queues_now.prepare();
    call.key(QUEUES);
    let (now, names): (String, Vec<String>) = store.invoke(&call).await?;
    let now = now.parse().map_err(|_| unexpected("queues_now", &now))?;
    Ok((now, names))
}

/// A stream entry as XRANGE returns it: its position and its fields, as stored.
type StreamEntry = (String, Vec<Value>);

/// One placement event of a queue.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacementEventEntry {
    /// Its position in the queue's stream.
    pub position: String,
    /// What happened; `None` for a type this release does not know.
    pub event_type: Option<PlacementEventType>,
    /// When it happened, ms since the epoch.
    pub time_ms: i64,
    /// The queue's custom event data then.
    pub custom_event_data: String,
    /// The placement just after it.
    pub placement: Box<pb::GameSessionPlacement>,
}

/// Up to `count` placement events of a queue from `start` (an XRANGE start), each with its placement as the event
/// left it (`queues/read_events.lua`).
pub async fn read_placement_events(
    store: &Store,
    queue_name: &str,
    start: &str,
    count: usize,
) -> Result<EventsRead<PlacementEventEntry>, StoreError> {
    const SCRIPT: &str = "read_placement_events";
    let mut call = queue_call(&scripts().read_placement_events, queue_name);
    call.arg(start).arg(count);
    let reply: (String, String, Vec<StreamEntry>) = store.invoke(&call).await?;
    events_read(SCRIPT, reply, |(position, pairs)| {
        let fields = binary_fields(SCRIPT, &pairs)?;
        let text = |name: &str| text_field(&fields, name);
        let time_ms = text("t").parse().unwrap_or(0);
        Ok(PlacementEventEntry {
            event_type: PlacementEventType::parse(&text("type")),
            time_ms,
            custom_event_data: text("ced"),
            placement: Box::new(record(SCRIPT, &fields, time_ms)?.placement),
            position,
        })
    })
}

/// A queue's counts over whole minutes and its PENDING placements now, as `queues/metrics.lua` reads them.
#[derive(Clone, Debug, Default)]
pub struct QueueCounts {
    /// Redis' clock when read, ms.
    pub now_ms: i64,
    /// Placements PENDING now, the sum of their start times and the oldest start, ms.
    pub pending: u64,
    pub pending_start_sum_ms: i64,
    pub oldest_start_ms: Option<i64>,
    /// Every counter of the window's minutes, summed (see `queues/lib.lua` for the names).
    pub counters: HashMap<String, u64>,
}

/// A queue's counts from minute `from_minute` (ms / 60000) to now; `None` when the queue does not exist.
pub async fn queue_counts(
    store: &Store,
    queue_name: &str,
    from_minute: i64,
) -> Result<Option<QueueCounts>, StoreError> {
    const SCRIPT: &str = "queue_metrics";
    let mut call = queue_call(&scripts().queue_metrics, queue_name);
    call.arg(from_minute);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let [now, exists, pending, sum, oldest, minutes @ ..] = raw.as_slice() else {
        return Err(unexpected(SCRIPT, raw.len()));
    };
    let number = |value: &Value| -> Result<i64, StoreError> {
        match value {
            Value::Int(n) => Ok(*n),
            other => redis::from_redis_value_ref::<String>(other)
                .ok()
                .and_then(|text| text.parse().ok())
                .ok_or_else(|| unexpected(SCRIPT, "a malformed number")),
        }
    };
    if number(exists)? == 0 {
        return Ok(None);
    }
    let mut counters = HashMap::new();
    for minute in minutes {
        let pairs: Vec<String> =
            redis::from_redis_value_ref(minute).map_err(|_| unexpected(SCRIPT, "a malformed minute"))?;
        for pair in pairs.chunks_exact(2) {
            *counters.entry(pair[0].clone()).or_default() += pair[1].parse::<u64>().unwrap_or(0);
        }
    }
    let oldest = redis::from_redis_value_ref::<String>(oldest).unwrap_or_default();
    Ok(Some(QueueCounts {
        now_ms: number(now)?,
        pending: u64::try_from(number(pending)?).unwrap_or(0),
        pending_start_sum_ms: number(sum)?,
        oldest_start_ms: oldest.parse().ok(),
        counters,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_domain::game_session::new_game_session_id;

    fn request() -> pb::StartGameSessionPlacementRequest {
        let players: Vec<String> = (0..4).map(|n| format!("{}-player-{n}", "p".repeat(36))).collect();
        pb::StartGameSessionPlacementRequest {
            placement_id: "p".repeat(36),
            queue_name: "ranked".into(),
            maximum_player_session_count: 10,
            player_latencies: players
                .iter()
                .flat_map(|player| {
                    ["eu-west-1", "us-east-1", "ap-south-1", "sa-east-1"]
                        .iter()
                        .map(|location| pb::PlayerLatency {
                            player_id: player.clone(),
                            location: (*location).into(),
                            latency_ms: 42,
                        })
                })
                .collect(),
            desired_player_sessions: players
                .iter()
                .map(|player| pb::DesiredPlayerSession {
                    player_id: player.clone(),
                    player_data: String::new(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_request_is_kept_deflated_and_one_kept_plain_still_reads() {
        let request = request();
        let stored = stored_request(&request);
        assert_eq!(read_request(&stored), Some(request.clone()));
        // The thread's deflater starts afresh for each request.
        assert_eq!(stored_request(&request), stored);
        let plain = request.encode_to_vec();
        assert!(
            stored.len() * 2 < plain.len(),
            "{} of {} bytes",
            stored.len(),
            plain.len()
        );
        assert_eq!(read_request(&plain), Some(request.clone()));
        assert_eq!(read_request(&[0, 1, 2]), None);
        assert_eq!(read_request(&stored[..stored.len() / 2]), None, "a stream cut short");
        // The thread's inflater starts afresh after a stream it could not read.
        assert_eq!(read_request(&stored), Some(request));
    }

    #[test]
    fn players_placed_are_kept_by_number_and_read_back_whole() {
        let request = request();
        let game_session_id = new_game_session_id("fleet-1");
        let placed: Vec<(String, String)> = request
            .desired_player_sessions
            .iter()
            .zip(1..)
            .map(|(p, n)| (p.player_id.clone(), player_session_id(&game_session_id, n)))
            .filter(|(_, id)| !id.ends_with("-2"))
            .collect();
        let desired = &request.desired_player_sessions;
        let text = placed_text(&game_session_id, &placed, desired).unwrap();
        assert_eq!(text, "1 3 4");
        assert_eq!(parse_placed(&text, &game_session_id, &request), Some(placed.clone()));
        // A player reserved again in the session (numbered past the desired ones), and ids of an earlier release,
        // are kept whole.
        let again = vec![(desired[1].player_id.clone(), player_session_id(&game_session_id, 5))];
        let earlier = vec![("a".to_owned(), "fleet-1/psess-x".to_owned())];
        for kept in [again, earlier] {
            let text = placed_text(&game_session_id, &kept, desired).unwrap();
            assert!(text.starts_with('['), "{text}");
            assert_eq!(parse_placed(&text, &game_session_id, &request), Some(kept));
        }
        assert_eq!(parse_placed("9", &game_session_id, &request), None);
    }
}
