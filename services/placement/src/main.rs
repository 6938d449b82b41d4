//! `berth-placement`: decides where games are played.

use berth_placement::PlacementArgs;
use berth_runtime::{CommonArgs, DefaultPorts, ListenArgs};
use clap::Parser;

// glibc's allocator took a fifth of a busy replica's CPU (perf, the placements scenario); mimalloc a fraction of that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Berth's placement service.
#[derive(Parser, Debug)]
#[command(name = "berth-placement", version)]
struct Cli {
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    placement: PlacementArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let ports = DefaultPorts {
        grpc: berth_placement::GRPC_PORT,
        metrics: berth_placement::METRICS_PORT,
    };
    berth_runtime::run_binary("berth-placement", &cli.common, &cli.listen, ports, |store| {
        berth_placement::service(store, &cli.placement)
    })
}
