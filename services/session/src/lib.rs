//! Berth's session service: game sessions (created on a ready process, activated by it, ended on request or by
//! its server), player sessions with atomic slots, and search. Any number of replicas may run: every change is
//! one script over the fleet's Redis slot, and the sweeper that times sessions out is safe to run on all of them.

mod game_sessions;
pub mod hosted;
mod metrics;
mod player_sessions;
mod search;
mod sweeper;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use berth_proto::session::v1::game_session_service_server::GameSessionServiceServer;
use berth_proto::session::v1::player_session_service_server::PlayerSessionServiceServer;
use berth_runtime::auth::{AccessRules, Role};
use berth_runtime::{Background, ServiceDef};
use berth_store::Store;
use berth_store::sessions::SessionTimings;
use tonic::service::Routes;

pub use game_sessions::GameSessions;
pub use player_sessions::PlayerSessions;

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

/// Settings of the session service: the deployment's. What differs by fleet (activation and reservation
/// deadlines, the creator limit, new-session protection, termination grace) is the fleet's record's, which the
/// scripts read as they act. Ended sessions stay readable for 24 hours unless set otherwise.
#[derive(clap::Args, Clone, Debug)]
pub struct SessionArgs {
    /// How long ended game sessions, their player sessions and session events stay readable, in ms.
    #[arg(long, env = "BERTH_SESSION_RETENTION_MS", default_value_t = 86_400_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub retention_ms: u64,
    /// Most session events each fleet keeps besides the retention; the oldest are trimmed first. Each takes about
    /// 0.2 KiB of Redis memory (see the README), so the default holds about 200 MiB per busy fleet. A watcher can
    /// resume from a cursor only while the events after it are kept.
    #[arg(long, env = "BERTH_SESSION_EVENTS_MAX", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub events_max: u64,
    /// How often timeouts and retention are swept, in ms.
    #[arg(long, env = "BERTH_SESSION_SWEEP_MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(1..))]
    pub sweep_ms: u64,
}

impl Default for SessionArgs {
    fn default() -> SessionArgs {
        SessionArgs {
            retention_ms: 86_400_000,
            events_max: 1_000_000,
            sweep_ms: 250,
        }
    }
}

/// What the handlers share.
pub(crate) struct Context {
    pub(crate) store: Store,
    pub(crate) args: SessionArgs,
    pub(crate) timings: SessionTimings,
    /// Becomes true when the replica shuts down: watches then end with UNAVAILABLE and their clients resume
    /// through another replica.
    pub(crate) closing: tokio::sync::watch::Sender<bool>,
    /// Follows the event streams this replica's watches cover.
    pub(crate) tails: berth_runtime::watch::Tails<berth_store::sessions::SessionEventEntry>,
}

/// The session service over `store`, with its sweeper running in the background.
pub fn service(store: Store, args: &SessionArgs) -> ServiceDef {
    metrics::describe();
    let context = Arc::new(Context {
        store,
        args: args.clone(),
        timings: SessionTimings {
            retention_ms: args.retention_ms,
        },
        closing: tokio::sync::watch::Sender::new(false),
        tails: berth_runtime::watch::Tails::default(),
    });
    let background = Background::new();
    let sweeping = context.clone();
    background.every("session_sweep", Duration::from_millis(args.sweep_ms), move || {
        sweeper::sweep(sweeping.clone())
    });
    let closing = context.clone();
    ServiceDef {
        name: "berth-session",
        grpc_services: &[
            "berth.session.v1.GameSessionService",
            "berth.session.v1.PlayerSessionService",
        ],
        rules: RULES,
        on_shutdown: Some(Box::new(move || {
            closing.closing.send_replace(true);
        })),
        background,
        has_room: None,
        routes: Routes::new(GameSessionServiceServer::new(GameSessions::new(context.clone())))
            .add_service(PlayerSessionServiceServer::new(PlayerSessions::new(context))),
    }
}
