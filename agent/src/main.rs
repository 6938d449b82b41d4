//! berth-agent: wraps one game-server process built on Agones' SDK and runs it on Berth.

use std::net::SocketAddr;
use std::process::ExitCode;

use berth_agent::{Agent, args::Args, child};
use berth_sdk::GameServerConfig;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Duration, Instant};
use tracing::{error, info, warn};
use tracing_subscriber::EnvFilter;

// One thread: the agent serves one game server, and every thread more is memory on every instance.
#[tokio::main(flavor = "current_thread")]
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
    // First, so that a SIGTERM from the start is passed on rather than ending the agent alone.
    let mut terminate = signal(SignalKind::terminate()).map_err(|error| error.to_string())?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(|error| error.to_string())?;
    let config = GameServerConfig::from_env().map_err(|error| error.to_string())?;
    let grpc = SocketAddr::new(args.bind, args.grpc_port);
    let http = SocketAddr::new(args.bind, args.http_port);
    let mut agent = Agent::start(config, args.declared(), grpc, http)
        .await
        .map_err(|error| error.to_string())?;
    let mut game = child::spawn(&args.command, agent.grpc_address().port(), agent.http_address().port())
        .map_err(|error| format!("cannot start {:?}: {error}", args.command[0]))?;
    let grace = Duration::from_secs(args.kill_after_seconds);
    // Set once the child was told to end: past it, SIGKILL, as Kubernetes does after a pod's grace period.
    let mut kill_at: Option<Instant> = None;
    loop {
        let told = tokio::select! {
            status = game.wait() => {
                let status = status.map_err(|error| format!("waiting for the game server: {error}"))?;
                let (how, code) = child::outcome(status);
                info!(%how, "the game server exited");
                agent.child_exited(&how).await;
                return Ok(code);
            }
            _ = terminate.recv() => true,
            _ = interrupt.recv() => true,
            () = agent.child_must_end() => true,
            () = sleep_until_some(kill_at) => {
                warn!(?grace, "the game server outlived its grace after SIGTERM; killing it");
                child::signal(&game, libc::SIGKILL);
                kill_at = None;
                false
            }
        };
        if told {
            child::signal(&game, libc::SIGTERM);
            kill_at.get_or_insert_with(|| Instant::now() + grace);
        }
    }
}

/// Sleeps until `at`; never wakes when it is `None`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
