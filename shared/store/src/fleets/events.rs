//! A fleet's event stream (`k.events`, appended to by every area's scripts through `fleet_event` in `lib.lua`),
//! read a range at a time, or after a position with what a watcher needs besides. A position is a Redis stream id
//! (`<ms>-<seq>`), taken from Redis's clock.

use berth_domain::stored::FleetEventCode;

use crate::codec::{EventsRead, events_read};
use crate::keys::FleetKeys;
use crate::scripts::scripts;
use crate::{Store, StoreError};

/// One fleet event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetEventEntry {
    /// Its position in the fleet's stream.
    pub position: String,
    /// What happened; `None` for a code this release does not know (written by a newer one during an upgrade).
    pub code: Option<FleetEventCode>,
    /// When, ms since the epoch.
    pub time_ms: i64,
    pub message: String,
    pub location: String,
    pub instance_id: String,
    pub game_server_id: String,
    pub game_session_id: String,
    /// For a change of the desired count: before, after, and the policy that made it (empty: an operator).
    pub capacity_change: Option<(u32, u32, String)>,
}

impl FleetEventEntry {
    /// Its code's stored name (`SERVER_PROCESS_CRASHED`, …); empty for a code this release does not know.
    pub fn code_name(&self) -> &'static str {
        self.code.map_or("", FleetEventCode::as_str)
    }
}

/// Up to `count` events of a fleet between two XRANGE bounds (`start` may be `(<position>` to exclude it).
pub async fn read_fleet_events(
    store: &Store,
    fleet_id: &str,
    start: &str,
    end: &str,
    count: usize,
) -> Result<Vec<FleetEventEntry>, StoreError> {
    let entries: Vec<Entry> = store
        .query(
            redis::cmd("XRANGE")
                .arg(FleetKeys::new(fleet_id).events())
                .arg(start)
                .arg(end)
                .arg("COUNT")
                .arg(count),
        )
        .await?;
    Ok(entries.into_iter().map(decode).collect())
}

/// Up to `count` events of a fleet from `start` (an XRANGE start, as for [`read_fleet_events`]), with the clock of
/// the node holding them and the position of the last event trimmed, for a watcher.
pub async fn poll_fleet_events(
    store: &Store,
    fleet_id: &str,
    start: &str,
    count: usize,
) -> Result<EventsRead<FleetEventEntry>, StoreError> {
    let mut call = scripts().poll_fleet_events.for_fleet(&FleetKeys::new(fleet_id));
    call.arg(start).arg(count);
    let reply: (String, String, Vec<Entry>) = store.invoke(&call).await?;
    events_read("poll_fleet_events", reply, |entry| Ok(decode(entry)))
}

/// The latest `count` events of a fleet, oldest first.
pub async fn recent_fleet_events(
    store: &Store,
    fleet_id: &str,
    count: usize,
) -> Result<Vec<FleetEventEntry>, StoreError> {
    let entries: Vec<Entry> = store
        .query(
            redis::cmd("XREVRANGE")
                .arg(FleetKeys::new(fleet_id).events())
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(count),
        )
        .await?;
    Ok(entries.into_iter().rev().map(decode).collect())
}

/// A stream entry as XRANGE answers it: its position and its fields.
type Entry = (String, Vec<(String, String)>);

fn decode((position, fields): Entry) -> FleetEventEntry {
    let field = |name: &str| {
        fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .unwrap_or_default()
    };
    let capacity_change = match (field("prev").parse(), field("new").parse()) {
        (Ok(previous), Ok(new)) => Some((previous, new, field("policy"))),
        _ => None,
    };
    FleetEventEntry {
        code: FleetEventCode::parse(&field("code")),
        time_ms: field("time_ms").parse().unwrap_or(0),
        message: field("message"),
        location: field("location"),
        instance_id: field("instance_id"),
        game_server_id: field("game_server_id"),
        game_session_id: field("game_session_id"),
        capacity_change,
        position,
    }
}
