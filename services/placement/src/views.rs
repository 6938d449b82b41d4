//! What a queue's placements order their candidates by: the queue's configuration and its destination fleets as
//! they stand, read again every [`REFRESH`] by the queue's worker rather than by each attempt, so that a burst of
//! placements costs Redis nothing more. A view a little stale only orders candidates: the script that creates a
//! game session checks the fleet and its location itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use berth_domain::queue::order::FleetView;
use berth_proto::placement::v1 as pb;
use berth_store::{Store, StoreError, fleets, queues};
use tokio::sync::watch;

/// How often a queue's view is read again.
pub(crate) const REFRESH: Duration = Duration::from_millis(250);

/// A queue as its placements see it.
#[derive(Clone, Debug, Default)]
pub(crate) struct View {
    /// The queue; `None` once deleted.
    pub(crate) queue: Option<pb::Queue>,
    /// Its destination fleets by id; `None` for one that does not exist.
    pub(crate) fleets: HashMap<String, Option<FleetView>>,
}

/// Reads a queue's view.
pub(crate) async fn read(store: &Store, queue_name: &str) -> Result<View, StoreError> {
    let Some(queue) = queues::read_queue(store, queue_name).await? else {
        return Ok(View::default());
    };
    let reads = queue
        .destinations
        .iter()
        .map(|destination| fleets::read_fleet(store, &destination.fleet_id));
    let records = futures::future::try_join_all(reads).await?;
    let fleets = queue
        .destinations
        .iter()
        .zip(records)
        .map(|(destination, record)| (destination.fleet_id.clone(), record.as_ref().map(FleetView::of)))
        .collect();
    Ok(View {
        queue: Some(queue),
        fleets,
    })
}

/// The latest view of a queue, shared by its placements.
pub(crate) type Views = watch::Receiver<Arc<View>>;

/// Keeps `views` up to date until every reader is gone.
pub(crate) async fn refresh(store: Store, queue_name: String, views: watch::Sender<Arc<View>>) {
    let mut tick = tokio::time::interval(REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if views.is_closed() {
            return;
        }
        match read(&store, &queue_name).await {
            Ok(view) => views.send_replace(Arc::new(view)),
            Err(err) => {
                tracing::debug!(queue = %queue_name, error = %err, "queue view not refreshed; the last one stands");
                continue;
            }
        };
    }
}
