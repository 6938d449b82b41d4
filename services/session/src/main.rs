//! `berth-session`: game and player sessions, and search.

use berth_runtime::{CommonArgs, DefaultPorts, ListenArgs};
use berth_session::SessionArgs;
use clap::Parser;

// glibc's allocator took a fifth of a busy replica's CPU (perf, the placements scenario); mimalloc a fraction of that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Berth's session service.
#[derive(Parser, Debug)]
#[command(name = "berth-session", version)]
struct Cli {
    #[command(flatten)]
    listen: ListenArgs,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    session: SessionArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let ports = DefaultPorts {
        grpc: berth_session::GRPC_PORT,
        metrics: berth_session::METRICS_PORT,
    };
    berth_runtime::run_binary("berth-session", &cli.common, &cli.listen, ports, |store| {
        berth_session::service(store, &cli.session)
    })
}
