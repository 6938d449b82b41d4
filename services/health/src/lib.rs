//! Berth's health service: the registry of game servers and, as later work adds it, the stream each game server
//! holds for heartbeats and commands. Any number of replicas may run; all state is in Redis.

mod game_servers;

use berth_proto::health::v1::game_server_service_server::GameServerServiceServer;
use berth_runtime::ServiceDef;
use berth_runtime::auth::{AccessRules, Role};
use berth_store::Store;
use tonic::service::Routes;

pub use game_servers::GameServers;

/// Default gRPC port.
pub const GRPC_PORT: u16 = 7104;
/// Default metrics port.
pub const METRICS_PORT: u16 = 9104;

const RULES: AccessRules = &[
    (
        "/berth.health.v1.GameServerService/SetInstanceStatus",
        &[Role::Operator],
    ),
    (
        "/berth.health.v1.GameServerService/ListGameServers",
        &[Role::Operator, Role::Client],
    ),
    (
        "/berth.health.v1.GameServerService/DescribeGameServer",
        &[Role::Operator, Role::Client, Role::GameServer],
    ),
    (
        "/berth.health.v1.GameServerService/UpdateGameServer",
        &[Role::Operator, Role::Client, Role::GameServer],
    ),
    (
        "/berth.health.v1.GameServerService/",
        &[Role::Operator, Role::GameServer],
    ),
    ("/berth.health.v1.SdkService/", &[Role::GameServer]),
];

/// The health service over `store`.
pub fn service(store: Store) -> ServiceDef {
    ServiceDef {
        name: "berth-health",
        grpc_services: &["berth.health.v1.GameServerService", "berth.health.v1.SdkService"],
        rules: RULES,
        routes: Routes::new(GameServerServiceServer::new(GameServers::new(store))),
    }
}
