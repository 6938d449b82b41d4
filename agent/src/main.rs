//! berth-agent: wraps one game-server process built on Agones' SDK and runs it on Berth.

use std::net::SocketAddr;
use std::process::ExitCode;

use berth_agent::{Agent, args::Args, child};
use berth_sdk::GameServerConfig;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    match run(args).await {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            error!("{message}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: Args) -> Result<u8, String> {
    let config = GameServerConfig::from_env().map_err(|error| error.to_string())?;
    let grpc = SocketAddr::new(args.bind, args.grpc_port);
    let http = SocketAddr::new(args.bind, args.http_port);
    let mut agent = Agent::start(config, grpc, http)
        .await
        .map_err(|error| error.to_string())?;
    let mut game = child::spawn(&args.command, agent.grpc_address().port(), agent.http_address().port())
        .map_err(|error| format!("cannot start {:?}: {error}", args.command[0]))?;
    let mut terminate = signal(SignalKind::terminate()).map_err(|error| error.to_string())?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(|error| error.to_string())?;
    loop {
        tokio::select! {
            status = game.wait() => {
                let status = status.map_err(|error| format!("waiting for the game server: {error}"))?;
                let (how, code) = child::outcome(status);
                info!(%how, "the game server exited");
                agent.child_exited(&how).await;
                return Ok(code);
            }
            _ = terminate.recv() => child::signal(&game, libc::SIGTERM),
            _ = interrupt.recv() => child::signal(&game, libc::SIGTERM),
            () = agent.child_must_end() => child::signal(&game, libc::SIGTERM),
        }
    }
}
