//! `berthctl describe`: one record whole, as the service answers it (YAML unless JSON is asked for).

use berth_proto::fleet::v1 as fleet;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::health::v1 as health;
use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::placement::v1 as placement;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::session::v1 as session;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;

use crate::cli::{DescribeKind, Output};
use crate::context::{Context, Service};
use crate::error::CtlError;
use crate::output::print_one;

/// A record the service should have sent and did not.
fn missing(what: &str) -> CtlError {
    CtlError::Refused {
        service: "berthctl",
        code: tonic::Code::Internal,
        message: format!("the answer holds no {what}"),
    }
}

/// Describes `kind` and prints it as `output` asks.
pub async fn describe(ctx: &Context, kind: DescribeKind, output: Output) -> Result<(), CtlError> {
    match kind {
        DescribeKind::Fleet { fleet } => {
            let mut client = FleetServiceClient::new(ctx.channel(Service::Fleet).await?);
            let request = fleet::DescribeFleetRequest { fleet_id: fleet };
            let answer = client
                .describe_fleet(request)
                .await
                .map_err(ctx.refusal(Service::Fleet))?;
            print_one(output, &answer.into_inner().fleet.ok_or_else(|| missing("fleet"))?)
        }
        DescribeKind::Queue { name } => {
            let mut client = QueueServiceClient::new(ctx.channel(Service::Placement).await?);
            let request = placement::DescribeQueueRequest { name };
            let answer = client
                .describe_queue(request)
                .await
                .map_err(ctx.refusal(Service::Placement))?;
            print_one(output, &answer.into_inner().queue.ok_or_else(|| missing("queue"))?)
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
                &answer.into_inner().placement.ok_or_else(|| missing("placement"))?,
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
                .ok_or_else(|| CtlError::Refused {
                    service: Service::Session.name(),
                    code: tonic::Code::NotFound,
                    message: format!("no game session {id:?}"),
                })?;
            print_one(output, &found)
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
                &answer.into_inner().game_server.ok_or_else(|| missing("game server"))?,
            )
        }
    }
}
