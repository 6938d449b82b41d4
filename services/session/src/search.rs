//! SearchGameSessions. The filter picks the narrowest range of one per-location index of ACTIVE sessions (creation
//! time, player count, maximum, or free slots) that holds every match; only that range is read, a chunk per round
//! trip, and the filter and sort are applied here. A filter with no usable bound reads every ACTIVE session of the
//! location, so a search costs O(sessions in the range), plus a sort of the matches.

use berth_domain::game_session::{GameSessionRecord, check};
use berth_domain::search::{Filter, IndexedOperand, Sort};
use berth_proto::session::v1 as pb;
use berth_store::Store;
use berth_store::sessions::search_chunk;
use tonic::Status;

use crate::tokens::{digest, issue, redeem};

/// Sessions read per round trip: large enough that a wide range takes few trips, small enough that one script
/// does not hold Redis for long.
const CHUNK: usize = 1000;

fn index_name(operand: IndexedOperand) -> &'static str {
    match operand {
        IndexedOperand::CreationTimeMillis => "created",
        IndexedOperand::PlayerSessionCount => "players",
        IndexedOperand::MaximumSessions => "max",
        IndexedOperand::AvailableSlots => "free",
    }
}

/// Runs a checked search.
pub(crate) async fn search(
    store: &Store,
    req: &pb::SearchGameSessionsRequest,
    filter: &Filter,
    sort: &Sort,
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
            .map_err(|_| Status::invalid_argument("page_token is malformed; start again without it"))?,
        None => 0,
    };
    let size = check::page_size(req.page_size, check::SEARCH_PAGE_SIZE_DEFAULT);
    let (index, range) = match filter.index_hint() {
        Some(range) if range.is_empty() => return Ok(pb::SearchGameSessionsResponse::default()),
        Some(range) => (index_name(range.operand), (range.min, range.max)),
        None => ("created", (None, None)),
    };
    let mut matches: Vec<GameSessionRecord> = Vec::new();
    let mut offset = 0;
    loop {
        let chunk = search_chunk(store, &req.fleet_id, &req.location, index, range, offset, CHUNK).await?;
        let read = chunk.len();
        matches.extend(chunk.into_iter().filter(|session| filter.matches(session)));
        if read < CHUNK {
            break;
        }
        offset += read;
    }
    matches.sort_by(|a, b| sort.compare(a, b));
    let end = (start + size).min(matches.len());
    let next = (end < matches.len()).then(|| end.to_string());
    Ok(pb::SearchGameSessionsResponse {
        game_sessions: matches.drain(start.min(end)..end).map(Into::into).collect(),
        next_page_token: issue(&selection, next),
    })
}
