//! SearchGameSessions over each location's index of ACTIVE sessions (in order of creation time, player count and
//! maximum; and those with room, by creation time), so that a search reads what it could match, not the whole fleet:
//! - When the sort is on an indexed operand (creationTimeMillis — the default —, playerSessionCount,
//!   maximumSessions), the search reads that index in sort order (within the filter's range of it, when the filter
//!   bounds the same operand) and stops once the page is full: the cost is the sessions read until enough match,
//!   about (page end) / (fraction matching).
//! - When the filter bounds another index narrowly (at most [`WHOLE_MAX`] sessions in the range), or the sort has no
//!   index (names, properties, hasAvailablePlayerSessions), the filter's range is read whole and sorted here: the
//!   cost is the sessions in that range, every session of the location for a filter with no numeric bound.
//! - A search of every location reads each location's index the same way: whole ranges in full, a stream in sort
//!   order a chunk at a time from the location that has got least far, until a page lies before where every
//!   location has got. Each session is indexed once, under its own location, so that a player joining or leaving
//!   moves one index entry, not two.
//!
//! Only the fields a filter and a sort look at are read per candidate; whole records only for the page returned.

use berth_domain::game_session::{GameSessionRecord, GameSessionStatus};
use berth_domain::search::{Filter, IndexedOperand, SessionView, Sort};
use berth_domain::validate::invalid;
use berth_proto::session::v1 as pb;
use berth_store::Store;
use berth_store::fleets::fleet_locations;
use berth_store::sessions::{IndexScan, read_game_sessions, search_chunk, search_count};
use tonic::Status;

use berth_domain::page_token::{digest, issue, redeem};

/// Most candidates read per round trip: enough that a wide range takes few trips, few enough that one script does
/// not hold Redis for long. A stream starts with chunks the size of what it needs and grows them.
const CHUNK: usize = 1000;
/// A filter's range of another index than the sort's is read whole when it holds at most this many sessions;
/// beyond, streaming the sort's index is cheaper for the first pages.
const WHOLE_MAX: u64 = 5_000;

/// Whether a candidate an index named is a match. One whose record is no longer ACTIVE is not: an index can outlive
/// a session that an earlier release's replica ended while the two ran side by side (it kept the index in other keys,
/// see sessions/lib.lua).
fn found_in(filter: &Filter, session: &GameSessionRecord) -> bool {
    session.status == Some(GameSessionStatus::Active) && filter.matches(session)
}

/// How a search reads its candidates, in each location searched.
enum Plan<'a> {
    /// The whole range, sorted afterwards.
    Whole(Vec<IndexScan<'a>>),
    /// In sort order, until the page is full.
    Stream(Vec<IndexScan<'a>>),
}

async fn plan<'a>(
    store: &Store,
    fleet_id: &str,
    locations: &'a [String],
    filter: &Filter,
    sort: &Sort,
) -> Result<Option<Plan<'a>>, Status> {
    let scan = |operand: IndexedOperand, range: (Option<i64>, Option<i64>), descending: bool| {
        let scans = locations.iter().map(|location| IndexScan {
            location,
            order: operand,
            range,
            descending,
        });
        scans.collect::<Vec<_>>()
    };
    let hint = filter.index_hint();
    if hint.is_some_and(|range| range.is_empty()) {
        return Ok(None);
    }
    let everything = (None, None);
    Ok(Some(match (hint, sort.index_order()) {
        (Some(range), Some((operand, descending))) if range.operand == operand => {
            Plan::Stream(scan(operand, (range.min, range.max), descending))
        }
        (Some(range), Some((operand, descending))) => {
            let narrow = scan(range.operand, (range.min, range.max), false);
            let mut count = 0;
            for scan in &narrow {
                count += search_count(store, fleet_id, scan).await?;
            }
            if count <= WHOLE_MAX {
                Plan::Whole(narrow)
            } else {
                Plan::Stream(scan(operand, everything, descending))
            }
        }
        (None, Some((operand, descending))) => Plan::Stream(scan(operand, everything, descending)),
        (Some(range), None) => Plan::Whole(scan(range.operand, (range.min, range.max), false)),
        (None, None) => Plan::Whole(scan(IndexedOperand::CreationTimeMillis, everything, false)),
    }))
}

/// Reads the matches of a plan: all of them (`Whole`), or (`Stream`) at least the first `needed` in sort order, in no
/// order.
async fn matches(
    store: &Store,
    fleet_id: &str,
    plan: &Plan<'_>,
    filter: &Filter,
    needed: usize,
) -> Result<Vec<GameSessionRecord>, Status> {
    match plan {
        Plan::Stream(scans) if scans.len() > 1 => merged(store, fleet_id, scans, filter, needed).await,
        Plan::Stream(scans) | Plan::Whole(scans) => {
            let streaming = matches!(plan, Plan::Stream(_));
            let mut found = Vec::new();
            for scan in scans {
                found.extend(scan_matches(store, fleet_id, scan, streaming, filter, needed).await?);
            }
            Ok(found)
        }
    }
}

/// One location's scan, read a chunk at a time in score order.
struct Cursor<'a> {
    scan: IndexScan<'a>,
    /// Where the next chunk starts: the last score read, past the ties of it already read.
    last: Option<i64>,
    skip: usize,
    want: usize,
    /// The range is read to its end.
    done: bool,
}

impl<'a> Cursor<'a> {
    fn new(scan: IndexScan<'a>, want: usize) -> Cursor<'a> {
        Cursor {
            scan,
            last: None,
            skip: 0,
            want,
            done: false,
        }
    }

    /// The next chunk, each session with its score; chunks grow fourfold up to [`CHUNK`].
    async fn next(&mut self, store: &Store, fleet_id: &str) -> Result<Vec<(GameSessionRecord, i64)>, Status> {
        if let Some(last) = self.last {
            if self.scan.descending {
                self.scan.range.1 = Some(last);
            } else {
                self.scan.range.0 = Some(last);
            }
        }
        let chunk = search_chunk(store, fleet_id, &self.scan, self.skip, self.want).await?;
        for (_, score) in &chunk {
            if self.last == Some(*score) {
                self.skip += 1;
            } else {
                (self.last, self.skip) = (Some(*score), 1);
            }
        }
        self.done = chunk.len() < self.want;
        self.want = (self.want * 4).min(CHUNK);
        Ok(chunk)
    }
}

/// The matches of one location's scan: all of them, or (`streaming`) the first `needed` in sort order. Ties come in
/// id order read upwards, which is the sort's tie order; read downwards they come reversed, so a descending read
/// takes the rest of the last score's ties too and the sort puts them right.
async fn scan_matches(
    store: &Store,
    fleet_id: &str,
    scan: &IndexScan<'_>,
    streaming: bool,
    filter: &Filter,
    needed: usize,
) -> Result<Vec<GameSessionRecord>, Status> {
    let mut found = Vec::new();
    let mut boundary: Option<i64> = None;
    let mut cursor = Cursor::new(
        *scan,
        if streaming {
            (needed * 2).clamp(50, CHUNK)
        } else {
            CHUNK
        },
    );
    loop {
        for (session, score) in cursor.next(store, fleet_id).await? {
            if boundary.is_some_and(|last| last != score) {
                return Ok(found);
            }
            if found_in(filter, &session) {
                found.push(session);
                if streaming && found.len() == needed {
                    if !scan.descending {
                        return Ok(found);
                    }
                    boundary = Some(score);
                }
            }
        }
        if cursor.done {
            return Ok(found);
        }
    }
}

/// The first `needed` matches in sort order of several locations' scans (and more): each location is read a chunk at
/// a time, always the one that has got least far, until `needed` matches lie before where every location not read to
/// its end has got (no session left unread can come before them, nor tie with them).
async fn merged(
    store: &Store,
    fleet_id: &str,
    scans: &[IndexScan<'_>],
    filter: &Filter,
    needed: usize,
) -> Result<Vec<GameSessionRecord>, Status> {
    let first = (needed * 2 / scans.len()).clamp(20, CHUNK);
    let mut cursors: Vec<Cursor> = scans.iter().map(|scan| Cursor::new(*scan, first)).collect();
    let descending = scans[0].descending;
    // Whether score `a` comes before score `b` in the reading order.
    let before = |a: i64, b: i64| if descending { a > b } else { a < b };
    let mut found: Vec<(GameSessionRecord, i64)> = Vec::new();
    let mut next = (0..cursors.len()).collect::<Vec<_>>();
    loop {
        for index in next.drain(..) {
            let chunk = cursors[index].next(store, fleet_id).await?;
            found.extend(chunk.into_iter().filter(|(session, _)| found_in(filter, session)));
        }
        // The location that has got least far among those with more to read, and how far.
        let behind = cursors
            .iter()
            .enumerate()
            .filter(|(_, cursor)| !cursor.done)
            .filter_map(|(index, cursor)| Some((index, cursor.last?)))
            .reduce(|a, b| if before(b.1, a.1) { b } else { a });
        let Some((index, frontier)) = behind else {
            return Ok(found.into_iter().map(|(session, _)| session).collect());
        };
        if found.iter().filter(|(_, score)| before(*score, frontier)).count() >= needed {
            return Ok(found.into_iter().map(|(session, _)| session).collect());
        }
        next.push(index);
    }
}

/// Runs a checked search, a page of `size`.
pub(crate) async fn search(
    store: &Store,
    req: &pb::SearchGameSessionsRequest,
    (filter, sort, size): (&Filter, &Sort, usize),
) -> Result<pb::SearchGameSessionsResponse, Status> {
    let selection = digest(&[
        req.fleet_id.as_bytes(),
        req.location.as_bytes(),
        req.filter_expression.as_bytes(),
        req.sort_expression.as_bytes(),
    ]);
    let start: usize = match redeem(&selection, &req.page_token)? {
        Some(position) => position
            .parse()
            .map_err(|_| invalid("page_token", "is malformed; start again without it"))?,
        None => 0,
    };
    let locations = if req.location.is_empty() {
        fleet_locations(store, &req.fleet_id).await?
    } else {
        vec![req.location.clone()]
    };
    let Some(plan) = plan(store, &req.fleet_id, &locations, filter, sort).await? else {
        return Ok(pb::SearchGameSessionsResponse::default());
    };
    // One more than the page, to know whether another page follows.
    let mut found = matches(store, &req.fleet_id, &plan, filter, start + size + 1).await?;
    found.sort_by(|a, b| sort.compare(a, b));
    let end = (start + size).min(found.len());
    let next = (end < found.len()).then(|| end.to_string());
    let ids: Vec<&str> = found[start.min(end)..end]
        .iter()
        .map(|session| session.game_session_id())
        .collect();
    // Whole records for the page only; one that ended since it was read is left out.
    let sessions = read_game_sessions(store, &req.fleet_id, &ids).await?;
    Ok(pb::SearchGameSessionsResponse {
        game_sessions: sessions.into_iter().flatten().map(Into::into).collect(),
        next_page_token: issue(&selection, next),
    })
}
