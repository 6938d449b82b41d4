//! What the requests of every event watch share (WatchSessionEvents, WatchFleetEvents, WatchGameSessionPlacements):
//! the fleets they name, the event types they filter on and where they start. All run on the same machinery
//! (`berth_runtime::watch`), so they are checked by the same rules, and a client learns the same limits from any.

use crate::game_server::FLEET_ID_LEN;
use crate::validate::{Violations, check_count, checked_entries};

/// Most fleet ids in one watch filter.
pub const FLEETS_MAX: usize = 100;
/// Longest watch cursor accepted back, in characters.
pub const CURSOR_MAX: usize = 1024;

/// Checks the fleets a watch names: at most [`FLEETS_MAX`] fleet ids (none means every fleet).
pub fn check_watched_fleets(v: &mut Violations, fleet_ids: &[String]) {
    check_count(v, "fleet_ids", fleet_ids.len(), 0, FLEETS_MAX);
    for (i, fleet_id) in checked_entries(fleet_ids, FLEETS_MAX) {
        v.id(&format!("fleet_ids[{i}]"), fleet_id, FLEET_ID_LEN.0, FLEET_ID_LEN.1);
    }
}

/// Checks where a watch starts: after a cursor of at most [`CURSOR_MAX`] characters (whether it parses is the
/// watch's to tell), from the oldest retained event, or from now — never two of them.
pub fn check_watch_start(v: &mut Violations, after_cursor: &str, from_oldest: bool) {
    v.text("after_cursor", after_cursor, CURSOR_MAX);
    // Each names a different starting point; taking one over the other silently would replay or skip events.
    if !after_cursor.is_empty() && from_oldest {
        v.add("from_oldest", "may not be set together with after_cursor");
    }
}

/// Checks a watch's filter of event types: at most `max` entries, each a type `known` (the contract's, but
/// UNSPECIFIED).
pub fn check_event_types(v: &mut Violations, event_types: &[i32], max: usize, known: impl Fn(i32) -> bool) {
    check_count(v, "event_types", event_types.len(), 0, max);
    for (i, event_type) in checked_entries(event_types, max) {
        if !known(*event_type) {
            v.add(
                &format!("event_types[{i}]"),
                format!(
                    "must be a kind of event that is sent (not UNSPECIFIED, not a retired number), got {event_type}"
                ),
            );
        }
    }
}
