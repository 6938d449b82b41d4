//! `berthctl describe`: one record whole, as the service answers it (YAML unless JSON is asked for).

use berth_proto::fleet::v1 as fleet;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::scaling_service_client::ScalingServiceClient;
use berth_proto::health::v1 as health;
use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::placement::v1 as placement;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::session::v1 as session;
use berth_proto::session::v1::describe_player_sessions_request::Selector;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;

use crate::cli::{DescribeKind, Output};
use crate::context::{Context, Service};
use crate::error::CtlError;
use crate::lists::{self, missing};
use crate::output::{json_of, print_one, print_value};

/// What a lookup that found nothing says: what the service would have said of a record it does not hold.
fn not_found(service: Service, message: String) -> CtlError {
    CtlError::Refused {
        service: service.name(),
        code: tonic::Code::NotFound,
        message,
    }
}

/// Describes `kind` and prints it as `output` asks.
pub async fn describe(ctx: &Context, kind: DescribeKind, output: Output) -> Result<(), CtlError> {
    match kind {
        DescribeKind::Fleet { fleet } => print_one(output, &lists::fleet(ctx, &fleet).await?),
        DescribeKind::Queue { name } => {
            let mut client = QueueServiceClient::new(ctx.channel(Service::Placement).await?);
            let request = placement::DescribeQueueRequest { name };
            let answer = client
                .describe_queue(request)
                .await
                .map_err(ctx.refusal(Service::Placement))?;
            print_one(
                output,
                &answer
                    .into_inner()
                    .queue
                    .ok_or_else(|| missing(Service::Placement, "queue"))?,
            )
        }
        DescribeKind::Placement { id } => {
            let mut client = PlacementServiceClient::new(ctx.channel(Service::Placement).await?);
            let request = placement::DescribeGameSessionPlacementRequest { placement_id: id };
            let answer = client
                .describe_game_session_placement(request)
                .await
                .map_err(ctx.refusal(Service::Placement))?;
            print_one(
                output,
                &answer
                    .into_inner()
                    .placement
                    .ok_or_else(|| missing(Service::Placement, "placement"))?,
            )
        }
        DescribeKind::GameSession { id } => {
            let mut client = GameSessionServiceClient::new(ctx.channel(Service::Session).await?);
            let request = session::DescribeGameSessionsRequest {
                game_session_ids: vec![id.clone()],
            };
            let answer = client
                .describe_game_sessions(request)
                .await
                .map_err(ctx.refusal(Service::Session))?
                .into_inner();
            let found = answer
                .game_sessions
                .into_iter()
                .next()
                .ok_or_else(|| not_found(Service::Session, format!("no game session {id:?}")))?;
            print_one(output, &found)
        }
        DescribeKind::Location { fleet, location } => {
            let described = lists::fleet(ctx, &fleet).await?;
            let found = described
                .locations
                .into_iter()
                .find(|there| there.location == location)
                .ok_or_else(|| not_found(Service::Fleet, format!("fleet {fleet:?} has no location {location:?}")))?;
            let mut client = FleetServiceClient::new(ctx.channel(Service::Fleet).await?);
            let request = fleet::GetFleetUtilizationRequest {
                fleet_id: fleet,
                location: location.clone(),
            };
            let utilization = client
                .get_fleet_utilization(request)
                .await
                .map_err(ctx.refusal(Service::Fleet))?
                .into_inner()
                .utilization
                .ok_or_else(|| missing(Service::Fleet, "utilization"))?;
            let mut shown = json_of(&found)?;
            if let Some(counts) = utilization.locations.iter().find(|there| there.location == location) {
                shown["utilization"] = json_of(counts)?;
            }
            print_value(output, &shown)
        }
        DescribeKind::Instance { fleet, location, id } => {
            let found = lists::instances(ctx, &fleet, &location, id.clone()).await?;
            let instance = found.into_iter().next().ok_or_else(|| {
                not_found(
                    Service::Fleet,
                    format!("location {location:?} of fleet {fleet:?} has no instance {id:?}"),
                )
            })?;
            print_one(output, &instance)
        }
        DescribeKind::PlayerSession { id } => {
            let found = lists::player_sessions(ctx, Selector::PlayerSessionId(id.clone())).await?;
            let session = found
                .into_iter()
                .next()
                .ok_or_else(|| not_found(Service::Session, format!("no player session {id:?}")))?;
            print_one(output, &session)
        }
        DescribeKind::Policy { fleet, name } => {
            let client = ScalingServiceClient::new(ctx.channel(Service::Fleet).await?);
            let policy = lists::policies(ctx, &client, &fleet)
                .await?
                .into_iter()
                .find(|policy| policy.name == name)
                .ok_or_else(|| {
                    not_found(
                        Service::Fleet,
                        format!("fleet {fleet:?} has no scaling policy {name:?}"),
                    )
                })?;
            print_one(output, &policy)
        }
        DescribeKind::GameServer { fleet, id } => {
            let mut client = GameServerServiceClient::new(ctx.channel(Service::Health).await?);
            let request = health::DescribeGameServerRequest {
                fleet_id: fleet,
                game_server_id: id,
            };
            let answer = client
                .describe_game_server(request)
                .await
                .map_err(ctx.refusal(Service::Health))?;
            print_one(
                output,
                &answer
                    .into_inner()
                    .game_server
                    .ok_or_else(|| missing(Service::Health, "game server"))?,
            )
        }
    }
}
