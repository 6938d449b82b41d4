//! `berthctl get` and `search`: every record of one kind, or the game sessions a search finds, printed as a table
//! of the columns an operator scans first (or whole, as JSON or YAML).

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

use crate::cli::{GetKind, Output, Search};
use crate::context::{Context, Service};
use crate::error::CtlError;
use crate::lists::{self, all_pages};
use crate::output::{Column, print_list};

/// The columns of a game session in a table.
const GAME_SESSION_COLUMNS: &[Column] = &[
    Column("GAME_SESSION", "gameSessionId"),
    Column("STATUS", "status"),
    Column("LOCATION", "location"),
    Column("GAME_SERVER", "gameServerId"),
    Column("PLAYERS", "currentPlayerSessionCount"),
    Column("MAX", "maximumPlayerSessionCount"),
];

/// Prints the game sessions a search finds, in the order it asks.
pub async fn search(ctx: &Context, search: Search, output: Output) -> Result<(), CtlError> {
    let client = GameSessionServiceClient::new(ctx.channel(Service::Session).await?);
    let sessions = all_pages(ctx, Service::Session, |page_token| {
        let mut client = client.clone();
        let request = session::SearchGameSessionsRequest {
            fleet_id: search.fleet.clone(),
            location: search.location.clone().unwrap_or_default(),
            filter_expression: search.filter.clone().unwrap_or_default(),
            sort_expression: search.sort.clone().unwrap_or_default(),
            page_token,
            ..Default::default()
        };
        async move {
            let page = client.search_game_sessions(request).await?.into_inner();
            Ok((page.game_sessions, page.next_page_token))
        }
    })
    .await?;
    print_list(output, &sessions, GAME_SESSION_COLUMNS)
}

/// Lists `kind` and prints it as `output` asks.
pub async fn get(ctx: &Context, kind: GetKind, output: Output) -> Result<(), CtlError> {
    match kind {
        GetKind::Fleets => {
            let client = FleetServiceClient::new(ctx.channel(Service::Fleet).await?);
            let fleets = lists::fleets(ctx, &client).await?;
            let columns = [
                Column("FLEET", "fleetId"),
                Column("STATUS", "status"),
                Column("PROVISIONER", "provisioner"),
                Column("LOCATIONS", "locations[].location"),
                Column("DESIRED", "locations[].capacity.desiredInstances"),
            ];
            print_list(output, &fleets, &columns)
        }
        GetKind::Queues => {
            let client = QueueServiceClient::new(ctx.channel(Service::Placement).await?);
            let queues = lists::queues(ctx, &client).await?;
            let columns = [
                Column("QUEUE", "name"),
                Column("DESTINATIONS", "destinations[].fleetId"),
                Column("TIMEOUT_S", "timeoutSeconds"),
                Column("REVISION", "revision"),
            ];
            print_list(output, &queues, &columns)
        }
        GetKind::GameServers { fleet } => {
            let client = GameServerServiceClient::new(ctx.channel(Service::Health).await?);
            let servers = all_pages(ctx, Service::Health, |page_token| {
                let (mut client, fleet_id) = (client.clone(), fleet.clone());
                async move {
                    let request = health::ListGameServersRequest {
                        fleet_id,
                        page_token,
                        ..Default::default()
                    };
                    let page = client.list_game_servers(request).await?.into_inner();
                    Ok((page.game_servers, page.next_page_token))
                }
            })
            .await?;
            let columns = [
                Column("GAME_SERVER", "gameServerId"),
                Column("INSTANCE", "instanceId"),
                Column("UTILIZATION", "utilizationStatus"),
                Column("CLAIM", "claimStatus"),
                Column("INSTANCE_STATUS", "instanceStatus"),
                Column("CONNECTION", "connectionInfo"),
            ];
            print_list(output, &servers, &columns)
        }
        GetKind::GameSessions { fleet, location } => {
            let client = GameSessionServiceClient::new(ctx.channel(Service::Session).await?);
            let sessions = all_pages(ctx, Service::Session, |page_token| {
                let (mut client, fleet_id, location) = (client.clone(), fleet.clone(), location.clone());
                async move {
                    let request = session::ListGameSessionsRequest {
                        fleet_id,
                        location: location.unwrap_or_default(),
                        page_token,
                        ..Default::default()
                    };
                    let page = client.list_game_sessions(request).await?.into_inner();
                    Ok((page.game_sessions, page.next_page_token))
                }
            })
            .await?;
            print_list(output, &sessions, GAME_SESSION_COLUMNS)
        }
        GetKind::Policies { fleet } => {
            let client = ScalingServiceClient::new(ctx.channel(Service::Fleet).await?);
            let policies = lists::policies(ctx, &client, &fleet).await?;
            let columns = [
                Column("POLICY", "name"),
                Column("LOCATION", "location"),
                Column("STATUS", "status"),
                Column("INTERVAL_S", "evaluationIntervalSeconds"),
                Column("LAST_PROPOSED", "lastProposedInstances"),
            ];
            print_list(output, &policies, &columns)
        }
        GetKind::Locations { fleet } => {
            let described = lists::fleet(ctx, &fleet).await?;
            let columns = [
                Column("LOCATION", "location"),
                Column("STATUS", "status"),
                Column("MIN", "capacity.minimumInstances"),
                Column("DESIRED", "capacity.desiredInstances"),
                Column("MAX", "capacity.maximumInstances"),
                Column("ACTIVE", "instanceCounts.active"),
                Column("IDLE", "instanceCounts.idle"),
                Column("AVAILABLE", "gameServerCounts.available"),
                Column("UTILIZED", "gameServerCounts.utilized"),
            ];
            print_list(output, &described.locations, &columns)
        }
        GetKind::Instances { fleet, location } => {
            let instances = lists::instances(ctx, &fleet, &location, String::new()).await?;
            let columns = [
                Column("INSTANCE", "instanceId"),
                Column("TYPE", "instanceType"),
                Column("STATE", "state"),
                Column("LAUNCHED", "launchTime"),
                Column("PROCESSES", "processes[].state"),
                Column("HANDLE", "provisionerHandle"),
            ];
            print_list(output, &instances, &columns)
        }
        GetKind::PlayerSessions { game_session, player } => {
            let selector = match (game_session, player) {
                (Some(id), _) => Selector::GameSessionId(id),
                (None, Some(player)) => Selector::PlayerId(player),
                (None, None) => unreachable!("clap requires one of --game-session and --player"),
            };
            let sessions = lists::player_sessions(ctx, selector).await?;
            print_list(output, &sessions, PLAYER_SESSION_COLUMNS)
        }
        GetKind::Placements { queue } => {
            let client = PlacementServiceClient::new(ctx.channel(Service::Placement).await?);
            let placements = all_pages(ctx, Service::Placement, |page_token| {
                let (mut client, queue_name) = (client.clone(), queue.clone());
                async move {
                    let request = placement::ListGameSessionPlacementsRequest {
                        queue_name,
                        page_token,
                        ..Default::default()
                    };
                    let page = client.list_game_session_placements(request).await?.into_inner();
                    Ok((page.placements, page.next_page_token))
                }
            })
            .await?;
            let columns = [
                Column("PLACEMENT", "placementId"),
                Column("STATUS", "status"),
                Column("STARTED", "startTime"),
                Column("ATTEMPTS", "attemptCount"),
                Column("MAX_PLAYERS", "maximumPlayerSessionCount"),
            ];
            print_list(output, &placements, &columns)
        }
    }
}

/// The columns of a player session in a table.
pub const PLAYER_SESSION_COLUMNS: &[Column] = &[
    Column("PLAYER_SESSION", "playerSessionId"),
    Column("PLAYER", "playerId"),
    Column("STATUS", "status"),
    Column("GAME_SESSION", "gameSessionId"),
    Column("CREATED", "creationTime"),
];
