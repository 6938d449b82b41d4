//! What the agent can be told. Its identity on Berth comes from the environment the provisioners set
//! (`BERTH_SDK_ENDPOINT`, `BERTH_SDK_TOKEN`, `BERTH_FLEET_ID`, … — see the Berth SDK's `GameServerConfig`); the ports
//! are the variables Agones' SDKs read, so the child finds the SDK where it would on Agones.

use std::net::IpAddr;

use clap::Parser;

/// Runs a game server built on Agones' SDK on Berth: `berth-agent [flags] -- ./MyServer args…`.
#[derive(Debug, Parser)]
#[command(name = "berth-agent", version)]
pub struct Args {
    /// Port of the Agones SDK over gRPC; the child gets it in AGONES_SDK_GRPC_PORT.
    #[arg(long, env = "AGONES_SDK_GRPC_PORT", default_value_t = 9357)]
    pub grpc_port: u16,
    /// Port of the Agones SDK over HTTP/JSON; the child gets it in AGONES_SDK_HTTP_PORT.
    #[arg(long, env = "AGONES_SDK_HTTP_PORT", default_value_t = 9358)]
    pub http_port: u16,
    /// Address the SDK is served on. Loopback unless told otherwise: the SDK is the game server's own and carries
    /// no authentication of its own.
    #[arg(long, env = "BERTH_AGENT_BIND", default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Seconds the game server has to exit after SIGTERM before it is killed (SIGKILL), as a Kubernetes pod's
    /// termination grace period (30 s by default there too).
    #[arg(long, env = "BERTH_AGENT_KILL_AFTER_SECONDS", default_value_t = 30)]
    pub kill_after_seconds: u64,
    /// The game server and its arguments.
    #[arg(required = true, last = true)]
    pub command: Vec<String>,
}
