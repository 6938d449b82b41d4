//! The commands that change something: `scale` a location, `suspend` and `resume` its autoscaling, `place` a game session through a queue (waiting for its
//! outcome, the placement described again every 200 ms), `claim` a game server, `create` a game or player session
//! and `terminate` a game session.

use std::time::Duration;

use berth_proto::common::v1::KeyValue;
use berth_proto::fleet::v1 as fleet;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::placement::v1 as placement;
use berth_proto::placement::v1::claim_service_client::ClaimServiceClient;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::session::v1 as session;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use berth_proto::session::v1::player_session_service_client::PlayerSessionServiceClient;
use placement::PlacementStatus;

use crate::cli::{Autoscaling, Claim, CreateKind, Output, Place, Scale, TerminateKind};
use crate::context::{Context, Service};
use crate::error::CtlError;
use crate::output::print_one;

fn pairs(properties: Vec<(String, String)>) -> Vec<KeyValue> {
    properties
        .into_iter()
        .map(|(key, value)| KeyValue { key, value })
        .collect()
}

/// Sets a location's capacity and prints the location after it.
pub async fn scale(ctx: &Context, scale: Scale, output: Output) -> Result<(), CtlError> {
    if scale.desired.is_none() && scale.min.is_none() && scale.max.is_none() {
        return Err(CtlError::Config(
            "give at least one of --desired, --min and --max".into(),
        ));
    }
    let mut client = FleetServiceClient::new(ctx.channel(Service::Fleet).await?);
    let request = fleet::UpdateFleetCapacityRequest {
        fleet_id: scale.fleet,
        location: scale.location,
        minimum_instances: scale.min,
        maximum_instances: scale.max,
        desired_instances: scale.desired,
    };
    let answer = client
        .update_fleet_capacity(request)
        .await
        .map_err(ctx.refusal(Service::Fleet))?;
    match answer.into_inner().location {
        Some(location) => print_one(output, &location),
        None => Ok(()),
    }
}

/// How often a placement still PENDING is described again.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// Starts a placement and, unless told not to, waits for its outcome; prints the placement. One that ends other
/// than FULFILLED is an error (exit code 4) after it is printed.
pub async fn place(ctx: &Context, place: Place, output: Output) -> Result<(), CtlError> {
    let mut client = PlacementServiceClient::new(ctx.channel(Service::Placement).await?);
    let placement_id = place
        .id
        .unwrap_or_else(|| format!("berthctl-{}", uuid::Uuid::now_v7().simple()));
    let request = placement::StartGameSessionPlacementRequest {
        placement_id: placement_id.clone(),
        queue_name: place.queue,
        maximum_player_session_count: place.max_players,
        game_session_name: place.name.unwrap_or_default(),
        game_properties: pairs(place.properties),
        desired_player_sessions: place
            .players
            .into_iter()
            .map(|player_id| placement::DesiredPlayerSession {
                player_id,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let started = client
        .start_game_session_placement(request)
        .await
        .map_err(ctx.refusal(Service::Placement))?
        .into_inner()
        .placement;
    let mut current = started.ok_or_else(|| CtlError::Config("the answer holds no placement".into()))?;
    let until = tokio::time::Instant::now() + Duration::from_secs(place.timeout_seconds);
    while !place.no_wait && current.status() == PlacementStatus::Pending && tokio::time::Instant::now() < until {
        tokio::time::sleep(POLL_EVERY).await;
        let request = placement::DescribeGameSessionPlacementRequest {
            placement_id: placement_id.clone(),
        };
        let answer = client
            .describe_game_session_placement(request)
            .await
            .map_err(ctx.refusal(Service::Placement))?;
        if let Some(described) = answer.into_inner().placement {
            current = described;
        }
    }
    print_one(output, &current)?;
    match current.status() {
        PlacementStatus::Fulfilled => Ok(()),
        PlacementStatus::Pending if place.no_wait => Ok(()),
        status => Err(CtlError::NotFulfilled {
            id: placement_id,
            status: status.as_str_name().to_owned(),
            reason: if current.status_message.is_empty() {
                current.status_reason().as_str_name().to_owned()
            } else {
                current.status_message
            },
        }),
    }
}

/// Claims a game server and prints it with the claim's id.
pub async fn claim(ctx: &Context, claim: Claim, output: Output) -> Result<(), CtlError> {
    let mut client = ClaimServiceClient::new(ctx.channel(Service::Placement).await?);
    let request = placement::ClaimGameServerRequest {
        fleet_id: claim.fleet,
        game_server_id: claim.game_server.unwrap_or_default(),
        ..Default::default()
    };
    let answer = client
        .claim_game_server(request)
        .await
        .map_err(ctx.refusal(Service::Placement))?;
    print_one(output, &answer.into_inner())
}

/// Creates a game session or a player session and prints it.
pub async fn create(ctx: &Context, kind: CreateKind, output: Output) -> Result<(), CtlError> {
    match kind {
        CreateKind::GameSession {
            fleet,
            location,
            max_players,
            name,
            properties,
        } => {
            let mut client = GameSessionServiceClient::new(ctx.channel(Service::Session).await?);
            let request = session::CreateGameSessionRequest {
                fleet_id: fleet,
                location: location.unwrap_or_default(),
                maximum_player_session_count: max_players,
                name: name.unwrap_or_default(),
                game_properties: pairs(properties),
                ..Default::default()
            };
            let answer = client
                .create_game_session(request)
                .await
                .map_err(ctx.refusal(Service::Session))?;
            print_one(output, &answer.into_inner())
        }
        CreateKind::PlayerSession {
            game_session,
            player,
            data,
        } => {
            let mut client = PlayerSessionServiceClient::new(ctx.channel(Service::Session).await?);
            let request = session::CreatePlayerSessionRequest {
                game_session_id: game_session,
                player_id: player,
                player_data: data.unwrap_or_default(),
            };
            let answer = client
                .create_player_session(request)
                .await
                .map_err(ctx.refusal(Service::Session))?;
            print_one(output, &answer.into_inner())
        }
    }
}

/// Ends a game session and prints it after.
pub async fn terminate(ctx: &Context, kind: TerminateKind, output: Output) -> Result<(), CtlError> {
    let TerminateKind::GameSession { id, force } = kind;
    let mut client = GameSessionServiceClient::new(ctx.channel(Service::Session).await?);
    let mode = if force {
        session::TerminationMode::ForceTerminate
    } else {
        session::TerminationMode::TriggerOnProcessTerminate
    };
    let request = session::TerminateGameSessionRequest {
        game_session_id: id,
        termination_mode: mode.into(),
    };
    let answer = client
        .terminate_game_session(request)
        .await
        .map_err(ctx.refusal(Service::Session))?;
    print_one(output, &answer.into_inner())
}

/// Suspends (`suspend`) or resumes a fleet's autoscaling and prints the fleet after.
pub async fn autoscaling(ctx: &Context, which: Autoscaling, suspend: bool, output: Output) -> Result<(), CtlError> {
    let mut client = FleetServiceClient::new(ctx.channel(Service::Fleet).await?);
    let answer = if suspend {
        let request = fleet::SuspendAutoscalingRequest {
            fleet_id: which.fleet,
            locations: which.locations,
        };
        client.suspend_autoscaling(request).await.map(|a| a.into_inner().fleet)
    } else {
        let request = fleet::ResumeAutoscalingRequest {
            fleet_id: which.fleet,
            locations: which.locations,
        };
        client.resume_autoscaling(request).await.map(|a| a.into_inner().fleet)
    };
    match answer.map_err(ctx.refusal(Service::Fleet))? {
        Some(fleet) => print_one(output, &fleet),
        None => Ok(()),
    }
}
