//! `berthctl events`: a fleet's events, a fleet's session events, or a queue's placement outcomes, through the
//! services' watch streams. The retained events come first; without `--follow` the command ends once none has come
//! for a moment. With it, the command keeps printing, and when the connection breaks (a replica restarting) it
//! reconnects and resumes after the last cursor it saw, skipping events it already printed, since a watch delivers
//! at least once.

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::time::Duration;

use berth_proto::fleet::v1 as fleet;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::placement::v1 as placement;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::session::v1 as session;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use serde_json::Value;
use tokio_stream::{Stream, StreamExt};

use crate::cli::{EventsKind, Output};
use crate::context::{Context, Service};
use crate::error::CtlError;
use crate::output::{cell, json_of};

/// How long without a message the retained events are taken to be all printed (without `--follow`).
const CAUGHT_UP_AFTER: Duration = Duration::from_secs(2);
/// Pause before reconnecting a broken watch.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);
/// Event ids remembered to skip those delivered again after a reconnect.
const REMEMBERED: usize = 10_000;

/// One message of a watch, whichever service sent it.
enum Seen {
    Event { id: String, cursor: String, json: Value },
    Keepalive { cursor: String },
}

type Watch = Pin<Box<dyn Stream<Item = Result<Seen, tonic::Status>> + Send>>;

/// The service a kind of event comes from, and the paths of an event's JSON that make its line in a table.
fn shape(kind: &EventsKind) -> (Service, &'static [&'static str]) {
    match kind {
        EventsKind::Fleet { .. } => (
            Service::Fleet,
            &["eventTime", "code", "location", "instanceId", "gameServerId", "message"],
        ),
        EventsKind::Sessions { .. } => (
            Service::Session,
            &[
                "eventTime",
                "eventType",
                "gameSession.gameSessionId",
                "gameSession.status",
                "playerSession.playerSessionId",
                "playerSession.status",
            ],
        ),
        EventsKind::Placements { .. } => (
            Service::Placement,
            &[
                "eventTime",
                "eventType",
                "placement.placementId",
                "placement.status",
                "placement.location",
                "placement.gameSessionId",
            ],
        ),
    }
}

/// Opens the watch of `kind` after `cursor`, or from the oldest retained event without one.
async fn open(ctx: &Context, kind: &EventsKind, cursor: Option<String>) -> Result<Watch, CtlError> {
    let (service, _) = shape(kind);
    let channel = ctx.channel(service).await?;
    let from_oldest = cursor.is_none();
    let after_cursor = cursor.unwrap_or_default();
    let refused = ctx.refusal(service);
    Ok(match kind {
        EventsKind::Fleet { fleet: fleet_id } => {
            let request = fleet::WatchFleetEventsRequest {
                fleet_ids: vec![fleet_id.clone()],
                after_cursor,
                from_oldest,
                ..Default::default()
            };
            let stream = FleetServiceClient::new(channel)
                .watch_fleet_events(request)
                .await
                .map_err(refused)?
                .into_inner();
            watching(stream)
        }
        EventsKind::Sessions { fleet: fleet_id } => {
            let request = session::WatchSessionEventsRequest {
                fleet_ids: vec![fleet_id.clone()],
                after_cursor,
                from_oldest,
                ..Default::default()
            };
            let stream = GameSessionServiceClient::new(channel)
                .watch_session_events(request)
                .await
                .map_err(refused)?
                .into_inner();
            watching(stream)
        }
        EventsKind::Placements { queue } => {
            let request = placement::WatchGameSessionPlacementsRequest {
                queue_names: vec![queue.clone()],
                after_cursor,
                from_oldest,
                ..Default::default()
            };
            let stream = PlacementServiceClient::new(channel)
                .watch_game_session_placements(request)
                .await
                .map_err(refused)?
                .into_inner();
            watching(stream)
        }
    })
}

/// A watch's responses as what they hold: each service's response is an `event` (with its `eventId` and `cursor`)
/// or a `keepalive` (with a `cursor`), read from the response's proto3 JSON.
fn watching<M>(stream: tonic::Streaming<M>) -> Watch
where
    M: prost::Message + prost::Name + Default + 'static,
{
    Box::pin(stream.map(|message| {
        let json = json_of(&message?).map_err(|err| tonic::Status::internal(err.to_string()))?;
        let text = |value: &Value, field: &str| value[field].as_str().unwrap_or_default().to_owned();
        Ok(match json.get("event") {
            Some(event) => Seen::Event {
                id: text(event, "eventId"),
                cursor: text(event, "cursor"),
                json: event.clone(),
            },
            None => Seen::Keepalive {
                cursor: text(&json["keepalive"], "cursor"),
            },
        })
    }))
}

/// Whether a watch that failed so is worth opening again: the replica went away or the connection broke.
fn broken(err: &CtlError) -> bool {
    matches!(err, CtlError::Unreachable { .. })
        || matches!(
            err,
            CtlError::Refused {
                code: tonic::Code::Unavailable,
                ..
            }
        )
}

fn print(output: Output, paths: &[&str], json: &Value) -> Result<(), CtlError> {
    match output {
        Output::Table => println!(
            "{}",
            paths.iter().map(|path| cell(json, path)).collect::<Vec<_>>().join("  ")
        ),
        Output::Json => println!("{json}"),
        Output::Yaml => print!(
            "---\n{}",
            serde_yaml::to_string(json).map_err(|err| CtlError::Config(err.to_string()))?
        ),
    }
    Ok(())
}

/// Prints the events of `kind` as `output` asks; with `follow`, until stopped.
pub async fn events(ctx: &Context, kind: EventsKind, follow: bool, output: Output) -> Result<(), CtlError> {
    let (service, paths) = shape(&kind);
    let mut cursor: Option<String> = None;
    let mut printed: HashSet<String> = HashSet::new();
    let mut order: VecDeque<String> = VecDeque::new();
    loop {
        let mut watch = match open(ctx, &kind, cursor.clone()).await {
            Ok(watch) => watch,
            Err(err) if follow && broken(&err) => {
                tokio::time::sleep(RECONNECT_AFTER).await;
                continue;
            }
            Err(CtlError::Refused {
                code: tonic::Code::OutOfRange,
                ..
            }) if follow && cursor.is_some() => {
                eprintln!(
                    "warning: events were dropped from the retention while disconnected; starting from the oldest kept"
                );
                cursor = None;
                continue;
            }
            Err(err) => return Err(err),
        };
        loop {
            let next = if follow {
                watch.next().await
            } else {
                match tokio::time::timeout(CAUGHT_UP_AFTER, watch.next()).await {
                    Ok(next) => next,
                    Err(_) => return Ok(()),
                }
            };
            match next {
                Some(Ok(Seen::Event { id, cursor: at, json })) => {
                    cursor = Some(at);
                    if printed.insert(id.clone()) {
                        order.push_back(id);
                        if order.len() > REMEMBERED
                            && let Some(oldest) = order.pop_front()
                        {
                            printed.remove(&oldest);
                        }
                        print(output, paths, &json)?;
                    }
                }
                Some(Ok(Seen::Keepalive { cursor: at })) => {
                    if !at.is_empty() {
                        cursor = Some(at);
                    }
                    if !follow {
                        return Ok(());
                    }
                }
                Some(Err(status)) => {
                    let err = ctx.refusal(service)(status);
                    if !(follow && broken(&err)) {
                        return Err(err);
                    }
                    break;
                }
                None if follow => break,
                None => return Ok(()),
            }
        }
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}
