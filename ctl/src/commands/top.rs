//! `berthctl top`: a live view of the deployment, redrawn in place every few seconds — each fleet location's status,
//! capacity, instances and game servers by state and whether its autoscaling is suspended; each queue's depth, wait
//! and outcomes over the last five minutes; and the latest scaling actions. `--once` prints one frame (and, with
//! `-o json`, the frame as one JSON object for scripts).

use std::time::Duration;

use berth_proto::fleet::v1 as fleet;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::placement::v1 as placement;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_sdk::AuthedChannel;
use serde_json::{Value, json};

use crate::cli::{Output, Top};
use crate::context::{Context, Service};
use crate::error::CtlError;
use crate::lists;
use crate::output::{Column, json_of, table};

/// The window of a queue's metrics.
const QUEUE_WINDOW_SECONDS: u32 = 300;
/// Scaling actions shown.
const LATEST_ACTIONS: usize = 5;

/// Clients of the services a frame reads.
struct Clients {
    fleets: FleetServiceClient<AuthedChannel>,
    queues: QueueServiceClient<AuthedChannel>,
    placements: PlacementServiceClient<AuthedChannel>,
}

/// One frame: fleet locations, queues and the latest scaling actions, each a list of rows.
async fn frame(ctx: &Context, clients: &mut Clients) -> Result<Value, CtlError> {
    let mut locations = Vec::new();
    let mut actions = Vec::new();
    for found in lists::fleets(ctx, &clients.fleets).await? {
        for location in &found.locations {
            let mut row = json_of(location)?;
            row["fleet"] = json!(format!("{}/{}", found.fleet_id, location.location));
            locations.push(row);
        }
        let request = fleet::ListFleetEventsRequest {
            fleet_id: found.fleet_id.clone(),
            codes: vec![fleet::FleetEventCode::ScalingAction.into()],
            page_size: 100,
            ..Default::default()
        };
        let events = clients
            .fleets
            .list_fleet_events(request)
            .await
            .map_err(ctx.refusal(Service::Fleet))?
            .into_inner()
            .events;
        for event in events {
            actions.push(json_of(&event)?);
        }
    }
    actions.sort_by_key(|action| cell_text(action, "eventTime"));
    let latest = actions.split_off(actions.len().saturating_sub(LATEST_ACTIONS));
    let mut queues = Vec::new();
    for queue in lists::queues(ctx, &clients.queues).await? {
        let request = placement::GetQueueMetricsRequest {
            queue_name: queue.name.clone(),
            window_seconds: QUEUE_WINDOW_SECONDS,
        };
        let metrics = clients
            .placements
            .get_queue_metrics(request)
            .await
            .map_err(ctx.refusal(Service::Placement))?
            .into_inner()
            .metrics;
        if let Some(metrics) = metrics {
            queues.push(json_of(&metrics)?);
        }
    }
    Ok(json!({"locations": locations, "queues": queues, "scalingActions": latest}))
}

fn cell_text(value: &Value, field: &str) -> String {
    value[field].as_str().unwrap_or_default().to_owned()
}

/// A frame as text.
fn draw(frame: &Value) -> String {
    let rows = |key: &str| frame[key].as_array().cloned().unwrap_or_default();
    let locations = table(
        &rows("locations"),
        &[
            Column("FLEET/LOCATION", "fleet"),
            Column("STATUS", "status"),
            Column("DESIRED", "capacity.desiredInstances"),
            Column("MIN", "capacity.minimumInstances"),
            Column("MAX", "capacity.maximumInstances"),
            Column("ACTIVE", "instanceCounts.active"),
            Column("PENDING", "instanceCounts.pending"),
            Column("DRAINING", "instanceCounts.draining"),
            Column("AVAILABLE", "gameServerCounts.available"),
            Column("UTILIZED", "gameServerCounts.utilized"),
            Column("UNHEALTHY", "gameServerCounts.unhealthy"),
            Column("SUSPENDED", "autoscalingSuspended"),
        ],
    );
    let queues = table(
        &rows("queues"),
        &[
            Column("QUEUE", "queueName"),
            Column("DEPTH", "queueDepth"),
            Column("OLDEST_WAIT_MS", "oldestWaitTimeMs"),
            Column("STARTED", "placementsStarted"),
            Column("SUCCEEDED", "placementsSucceeded"),
            Column("TIMED_OUT", "placementsTimedOut"),
            Column("WAIT_P50_MS", "fulfilledWaitTimeP50Ms"),
            Column("WAIT_P95_MS", "fulfilledWaitTimeP95Ms"),
        ],
    );
    let actions = table(
        &rows("scalingActions"),
        &[
            Column("TIME", "eventTime"),
            Column("FLEET", "fleetId"),
            Column("LOCATION", "location"),
            Column("FROM", "capacityChange.previousDesiredInstances"),
            Column("TO", "capacityChange.newDesiredInstances"),
            Column("POLICY", "capacityChange.policyName"),
        ],
    );
    format!(
        "{locations}\nqueues, last {} min:\n{queues}\nlatest scaling actions:\n{actions}",
        QUEUE_WINDOW_SECONDS / 60
    )
}

/// Draws frames every `top.interval_seconds` until stopped, or one with `--once`.
pub async fn top(ctx: &Context, top: Top, output: Output) -> Result<(), CtlError> {
    let fleet_channel = ctx.channel(Service::Fleet).await?;
    let placement_channel = ctx.channel(Service::Placement).await?;
    let mut clients = Clients {
        fleets: FleetServiceClient::new(fleet_channel),
        queues: QueueServiceClient::new(placement_channel.clone()),
        placements: PlacementServiceClient::new(placement_channel),
    };
    loop {
        let shown = frame(ctx, &mut clients).await?;
        match (output, top.once) {
            (Output::Json, _) => println!("{shown}"),
            (Output::Yaml, _) => print!(
                "---\n{}",
                serde_yaml::to_string(&shown).map_err(|err| CtlError::Config(err.to_string()))?
            ),
            (Output::Table, true) => print!("{}", draw(&shown)),
            // Home and clear, then the frame: redrawn in place as `top` does.
            (Output::Table, false) => print!("\x1b[H\x1b[2J{}", draw(&shown)),
        }
        if top.once {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(top.interval_seconds.max(1))).await;
    }
}
