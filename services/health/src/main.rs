//! `berth-health`: registers game servers, holds their SDK streams and watches their health.

use berth_runtime::{CommonArgs, DefaultPorts, ListenArgs};
use clap::Parser;

// glibc's allocator took a fifth of a busy replica's CPU (perf, the placements scenario); mimalloc a fraction of that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Berth's health service.
#[derive(Parser, Debug)]
#[command(name = "berth-health", version)]
struct Cli {
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    health: berth_health::HealthArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let ports = DefaultPorts {
        grpc: berth_health::GRPC_PORT,
        metrics: berth_health::METRICS_PORT,
    };
    berth_runtime::run_binary("berth-health", &cli.common, &cli.listen, ports, |store| {
        berth_health::service(store, &cli.health)
    })
}
