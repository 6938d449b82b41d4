//! WatchFleetEvents: every fleet event (a status changed, capacity changed, an instance launched, a process
//! crashed, ...), as the scripts appended it to its fleet's event stream, delivered in order per fleet without the
//! client polling. The merged order, cursors, keepalives and errors are the shared watch's
//! (`berth_runtime::watch`, as WatchSessionEvents' are); this is how a fleet event is read, filtered and shown.

use std::sync::Arc;

use berth_domain::fleet::check;
use berth_domain::stored::FleetEventCode;
use berth_proto::fleet::v1::{self as pb, watch_fleet_events_response::Kind};
use berth_runtime::watch::{self, EventStreams, Placed, Start};
use berth_store::fleets::{self as store, FleetEventEntry};
use berth_store::{EventsRead, StoreError};
use tonic::Status;

use crate::Context;
use crate::fleets::fleet_event;

pub(crate) type Events = watch::Events<pb::WatchFleetEventsResponse>;

/// Checks a request and opens its watch.
pub(crate) async fn open(context: Arc<Context>, req: pb::WatchFleetEventsRequest) -> Result<Events, Status> {
    let codes = check::check_watch_events(&req)?;
    let (store, closing) = (context.store.clone(), context.closing.subscribe());
    let start = Start {
        fleet_ids: req.fleet_ids,
        after_cursor: req.after_cursor,
        from_oldest: req.from_oldest,
    };
    watch::open(store, FleetEvents { context, codes }, start, closing).await
}

/// The fleet event streams, through a watch's filter of codes.
struct FleetEvents {
    context: Arc<Context>,
    /// The codes watched; none: every code.
    codes: Vec<FleetEventCode>,
}

impl EventStreams for FleetEvents {
    type Entry = FleetEventEntry;
    type Message = pb::WatchFleetEventsResponse;
    const SERVICE: &'static str = "fleet";

    fn tails(&self) -> &watch::Tails<FleetEventEntry> {
        &self.context.tails
    }

    async fn read(&self, fleet_id: &str, start: &str, count: usize) -> Result<EventsRead<FleetEventEntry>, StoreError> {
        store::poll_fleet_events(&self.context.store, fleet_id, start, count).await
    }

    fn position(entry: &FleetEventEntry) -> &str {
        &entry.position
    }

    async fn event(
        &self,
        fleet_id: &str,
        placed: Placed,
        entry: FleetEventEntry,
    ) -> Result<Option<pb::WatchFleetEventsResponse>, Status> {
        // A code this release does not know matches no filter, as in ListFleetEvents.
        if !self.codes.is_empty() && !entry.code.is_some_and(|code| self.codes.contains(&code)) {
            return Ok(None);
        }
        let event = pb::FleetEvent {
            cursor: placed.cursor,
            ..fleet_event(fleet_id, entry)
        };
        Ok(Some(pb::WatchFleetEventsResponse {
            kind: Some(Kind::Event(event)),
        }))
    }

    fn keepalive(&self, cursor: String, server_time: prost_types::Timestamp) -> pb::WatchFleetEventsResponse {
        pb::WatchFleetEventsResponse {
            kind: Some(Kind::Keepalive(pb::WatchKeepalive {
                cursor,
                server_time: Some(server_time),
            })),
        }
    }
}
