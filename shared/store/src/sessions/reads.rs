//! Reading sessions: by id, a page of a listing, and a chunk of a search index.

use berth_domain::game_session::{GameSessionRecord, GameSessionStatus, PlayerSessionRecord};
use berth_domain::search::IndexedOperand;
use redis::Value;

use crate::codec::unexpected;
use crate::codec::{game_session, player_session, properties, strings};
use crate::keys::{FleetKeys, SEARCH_SPAN, member_prefix, order_base};
use crate::scripts::scripts;
use crate::{Store, StoreError};

/// A player session read with its game session's `{loc, ip, dns, port}`.
fn player_entry(script: &str, fleet_id: &str, value: &Value) -> Result<Option<PlayerSessionRecord>, StoreError> {
    let parts: Vec<Value> = redis::from_redis_value_ref(value).map_err(|_| unexpected(script, "a malformed reply"))?;
    match parts.as_slice() {
        [] => Ok(None),
        [fields, endpoint] => Ok(player_session(
            fleet_id,
            &strings(script, fields)?,
            &strings(script, endpoint)?,
        )),
        _ => Err(unexpected(script, parts.len())),
    }
}

/// A read of sessions of one `kind` (`g`ame or `p`layer sessions) by id.
fn read_call<'a>(fleet_id: &str, kind: &str, ids: &[&str]) -> crate::scripts::FunctionCall<'a> {
    let mut call = scripts().read_sessions.prepare();
    call.key(FleetKeys::new(fleet_id).game_sessions()).arg(kind);
    for id in ids {
        call.arg(*id);
    }
    call
}

/// Game sessions of one fleet by id, live or ended, in order; `None` for an unknown (or expired) one.
pub async fn read_game_sessions(
    store: &Store,
    fleet_id: &str,
    ids: &[&str],
) -> Result<Vec<Option<GameSessionRecord>>, StoreError> {
    const SCRIPT: &str = "read_sessions";
    let raw: Vec<Value> = store.invoke(&read_call(fleet_id, "g", ids)).await?;
    raw.iter().map(|value| game_session(&strings(SCRIPT, value)?)).collect()
}

/// Player sessions of one fleet by id, live or ended, in order; `None` for an unknown (or expired) one.
pub async fn read_player_sessions(
    store: &Store,
    fleet_id: &str,
    ids: &[&str],
) -> Result<Vec<Option<PlayerSessionRecord>>, StoreError> {
    const SCRIPT: &str = "read_sessions";
    let raw: Vec<Value> = store.invoke(&read_call(fleet_id, "p", ids)).await?;
    raw.iter().map(|value| player_entry(SCRIPT, fleet_id, value)).collect()
}

/// One page of a listing, and where the next starts (`None` on the last page).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// What a page reads: a sorted set of session ids of the fleet (`g`ame or `p`layer sessions), in an order (ASC |
/// DESC), keeping the ids in a location and statuses (empty: any).
struct Listing<'a> {
    kind: &'a str,
    set: String,
    order: &'a str,
    location: &'a str,
    statuses: &'a [&'a str],
    /// The game session whose player sessions to read (`set` is then its record), live or ended.
    game_session_id: &'a str,
    /// The player whose player sessions to read (`set` is then the fleet's players).
    player_id: &'a str,
}

fn page_call<'a>(listing: &Listing<'_>, after: Option<&str>, size: usize) -> crate::scripts::FunctionCall<'a> {
    let mut call = scripts().page_sessions.prepare();
    call.key(&listing.set)
        .arg(listing.kind)
        .arg(listing.order)
        .arg(after.unwrap_or(""))
        .arg(size)
        .arg(listing.location)
        .arg(listing.statuses.join(" "))
        .arg(listing.game_session_id)
        .arg(listing.player_id);
    call
}

fn split_page(script: &str, raw: &[Value]) -> Result<(Option<String>, Vec<Value>), StoreError> {
    let [next, items @ ..] = raw else {
        return Err(unexpected(script, "an empty reply"));
    };
    let next: String = redis::from_redis_value_ref(next).map_err(|_| unexpected(script, "a malformed position"))?;
    Ok(((!next.is_empty()).then_some(next), items.to_vec()))
}

/// A page of a fleet's game sessions, newest first, in `location` (empty: any) and `statuses` (empty: any),
/// starting after `after` (a position a previous page returned).
pub async fn list_game_sessions(
    store: &Store,
    fleet_id: &str,
    location: &str,
    statuses: &[&str],
    after: Option<&str>,
    size: usize,
) -> Result<Page<GameSessionRecord>, StoreError> {
    const SCRIPT: &str = "page_sessions";
    let listing = Listing {
        kind: "g",
        set: FleetKeys::new(fleet_id).game_sessions(),
        order: "DESC",
        location,
        statuses,
        game_session_id: "",
        player_id: "",
    };
    let call = page_call(&listing, after, size);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (next, items) = split_page(SCRIPT, &raw)?;
    let items = items
        .iter()
        .filter_map(|value| {
            strings(SCRIPT, value)
                .and_then(|fields| game_session(&fields))
                .transpose()
        })
        .collect::<Result<_, _>>()?;
    Ok(Page { items, next })
}

/// Whose player sessions to list.
#[derive(Clone, Copy, Debug)]
pub enum PlayerSource<'a> {
    /// A game session's.
    GameSession(&'a str),
    /// A player's, in this fleet.
    Player(&'a str),
}

/// A page of player sessions, oldest first, in `status` (empty: any), starting after `after`.
pub async fn list_player_sessions(
    store: &Store,
    fleet_id: &str,
    source: PlayerSource<'_>,
    status: &str,
    after: Option<&str>,
    size: usize,
) -> Result<Page<PlayerSessionRecord>, StoreError> {
    const SCRIPT: &str = "page_sessions";
    let keys = FleetKeys::new(fleet_id);
    let (set, game_session_id, player_id) = match source {
        PlayerSource::GameSession(id) => (keys.game_session(id), id, ""),
        PlayerSource::Player(id) => (keys.players(), "", id),
    };
    let statuses: Vec<&str> = if status.is_empty() { Vec::new() } else { vec![status] };
    let listing = Listing {
        kind: "p",
        set,
        order: "ASC",
        location: "",
        statuses: &statuses,
        game_session_id,
        player_id,
    };
    let call = page_call(&listing, after, size);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (next, items) = split_page(SCRIPT, &raw)?;
    let items = items
        .iter()
        .filter_map(|value| player_entry(SCRIPT, fleet_id, value).transpose())
        .collect::<Result<_, _>>()?;
    Ok(Page { items, next })
}

/// A range of one order (created, players, max or free) of one location's search index, read in score order
/// (`descending`: from the top). A search of every location reads each location's (the index holds each session
/// once, so that a player joining moves one entry).
#[derive(Clone, Copy, Debug)]
pub struct IndexScan<'a> {
    pub location: &'a str,
    pub order: IndexedOperand,
    pub range: (Option<i64>, Option<i64>),
    pub descending: bool,
}

impl IndexScan<'_> {
    /// Where the scan's order starts in the index.
    fn base(&self) -> i64 {
        order_base(self.order)
    }

    /// The location's index and the scores of the range, as the index holds them (a range that holds no value of
    /// the order reads as lowest above highest).
    fn set(&self) -> (&str, i64, i64) {
        let base = self.base();
        let lowest = self.range.0.map_or(0, |min| min.clamp(0, SEARCH_SPAN));
        let highest = self
            .range
            .1
            .map_or(SEARCH_SPAN - 1, |max| max.clamp(-1, SEARCH_SPAN - 1));
        (self.location, base + lowest, base + highest)
    }
}

/// Up to `count` ACTIVE game sessions of a scan, past the first `skip` of its range (ties of the range's first
/// score that an earlier chunk read: narrow the range to go on from the last score read), with what a filter and a
/// sort look at (name, properties, counts, creation time, policy; the rest left empty), each with its index score.
pub async fn search_chunk(
    store: &Store,
    fleet_id: &str,
    scan: &IndexScan<'_>,
    skip: usize,
    count: usize,
) -> Result<Vec<(GameSessionRecord, i64)>, StoreError> {
    const SCRIPT: &str = "search_sessions";
    let mut call = scripts().search_sessions.prepare();
    let (location, min, max) = scan.set();
    let prefix = member_prefix(scan.order);
    call.key(FleetKeys::new(fleet_id).search_index(location))
        .arg(min)
        .arg(max)
        .arg(if scan.descending { "DESC" } else { "ASC" })
        .arg(skip)
        .arg(count)
        .arg(prefix.len());
    let raw: Value = store.invoke(&call).await?;
    strings(SCRIPT, &raw)?
        .chunks(9)
        .map(|row| {
            let [member, score, name, props, max, cur, created, accept, status] = row else {
                return Err(unexpected(SCRIPT, row.len()));
            };
            let id = member.strip_prefix(prefix).ok_or_else(|| unexpected(SCRIPT, member))?;
            let number = |text: &String| text.parse::<f64>().map_err(|_| unexpected(SCRIPT, text));
            let record = GameSessionRecord {
                game_session_id: id.to_owned(),
                name: name.clone(),
                properties: properties(props)?,
                maximum_players: number(max)? as u32,
                current_players: number(cur)? as u32,
                creation_ms: number(created)? as i64,
                accepts_players: accept == "1",
                status: GameSessionStatus::parse(status),
                ..GameSessionRecord::default()
            };
            Ok((record, number(score)? as i64 - scan.base()))
        })
        .collect()
}

/// How many ACTIVE game sessions a scan's range holds.
pub async fn search_count(store: &Store, fleet_id: &str, scan: &IndexScan<'_>) -> Result<u64, StoreError> {
    let (location, min, max) = scan.set();
    let key = FleetKeys::new(fleet_id).search_index(location);
    store.query(redis::cmd("ZCOUNT").arg(key).arg(min).arg(max)).await
}
