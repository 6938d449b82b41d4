//! Berth's session service: game and player sessions, and search. Its RPCs are declared in `proto/berth/session/v1` and answer UNIMPLEMENTED
//! until the issues that build them land; the process already serves health, reflection and metrics, so that
//! deployments and `make run` have their final shape.

use berth_runtime::ServiceDef;
use berth_runtime::auth::{AccessRules, Role};
use berth_store::Store;
use tonic::service::Routes;

/// Default gRPC port.
pub const GRPC_PORT: u16 = 7102;
/// Default metrics port.
pub const METRICS_PORT: u16 = 9102;

const RULES: AccessRules = &[
    ("/berth.session.v1.GameSessionService/", &[Role::Operator, Role::Client]),
    (
        "/berth.session.v1.PlayerSessionService/",
        &[Role::Operator, Role::Client],
    ),
];

/// The session service over `store`.
pub fn service(_store: Store) -> ServiceDef {
    ServiceDef {
        name: "berth-session",
        grpc_services: &[
            "berth.session.v1.GameSessionService",
            "berth.session.v1.PlayerSessionService",
        ],
        rules: RULES,
        on_shutdown: None,
        routes: Routes::default(),
    }
}
