//! `berth-fleet`: fleets, capacity and scaling.

use berth_runtime::{CommonArgs, DefaultPorts, ListenArgs};
use clap::Parser;

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

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let ports = DefaultPorts {
        grpc: berth_fleet::GRPC_PORT,
        metrics: berth_fleet::METRICS_PORT,
    };
    berth_runtime::run_binary("berth-fleet", &cli.common, &cli.listen, ports, |store| {
        berth_fleet::service(store, &cli.fleets)
    })
    .await
}
