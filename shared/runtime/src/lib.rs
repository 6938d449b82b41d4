//! What every Berth service shares at run time: its configuration ([`config`]), logs and traces
//! ([`telemetry`]), Prometheus metrics ([`metrics`]), bearer-token authentication ([`auth`]), its background work
//! ([`background`]), the resumable watches of its fleets' event streams ([`watch`]) and the gRPC server around its
//! routes ([`server`]): health, reflection, the auth and metrics edge, graceful shutdown; and the one poisoning
//! policy of their locks ([`sync`]).

pub mod auth;
pub mod background;
pub mod config;
pub mod deadline;
mod edge;
pub mod metrics;
pub mod server;
pub mod sync;
pub mod telemetry;
pub mod watch;

pub use background::{Background, for_each_fleet};
pub use config::CommonArgs;
pub use config::ListenArgs;
pub use server::{DefaultPorts, ServiceDef, run_binary, serve, shutdown_signal};
