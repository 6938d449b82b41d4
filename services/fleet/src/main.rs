//! `berth-fleet`: fleets, capacity and scaling.

use berth_runtime::{CommonArgs, DefaultPorts, ListenArgs};
use clap::Parser;

// glibc's allocator took a fifth of a busy replica's CPU (perf, the placements scenario); mimalloc a fraction of that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Berth's fleet service.
#[derive(Parser, Debug)]
#[command(name = "berth-fleet", version)]
struct Cli {
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    fleets: berth_fleet::FleetArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let ports = DefaultPorts {
        grpc: berth_fleet::GRPC_PORT,
        metrics: berth_fleet::METRICS_PORT,
    };
    // The key that checks callers' tokens also signs those of the game servers this replica launches.
    let tokens = match berth_runtime::server::ServeOptions::from_args(&cli.common).map(|options| options.auth) {
        Ok(berth_runtime::auth::AuthMode::Tokens(key)) => Some(key),
        _ => None,
    };
    berth_runtime::run_binary("berth-fleet", &cli.common, &cli.listen, ports, |store| {
        berth_fleet::service(store, &cli.fleets, tokens)
    })
}
