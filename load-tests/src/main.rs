//! `berth-bench`: puts a real Berth stack under load and reports every measured line beside the floors this
//! machine allows, so that a rate is read as "how close to what the hardware can do", not as a bare number that
//! changes with every laptop.

mod args;
mod connections;
mod driver;
mod fleet;
mod floors;
mod procfs;
mod redis_stats;
mod replica;
mod report;
mod scenarios;
mod sdk_stream;
mod stack;

use std::process::ExitCode;

use berth_store::Durability;
use berth_testkit::{RedisServer, TestRedis};
use clap::Parser;

// As the services' binaries: the stack this process runs in-process allocates as they do.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use crate::args::Args;
use crate::report::Report;
use crate::scenarios::Scenario;
use crate::stack::Stack;

/// Anything that stops a run before it has figures to report.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let mut args = Args::parse();
    // Settled before the run, so that the report shows the connections used.
    args.connections = args.scenario.connections(&args);
    // Started here, on the main thread, which lives as long as the process: the testkit ties a redis-server's
    // life to the thread that started it, and a runtime thread may retire in the middle of a run.
    let redis = if args.cluster {
        TestRedis::cluster()
    } else if matches!(args.scenario, Scenario::Soak) {
        // Restarted by the soak's chaos, it must bring back what it acknowledged, as a production Redis would.
        TestRedis::Single(RedisServer::persistent())
    } else {
        TestRedis::single()
    };
    let replica = match (&redis, args.durability) {
        (TestRedis::Single(primary), Durability::Replica) => Some(RedisServer::replica_of(primary)),
        _ => None,
    };
    // The services' own runtime: those a scenario runs in-process are scheduled as in production.
    let outcome = berth_runtime::server::runtime(None)
        .map_err(Failure::from)
        .and_then(|runtime| runtime.block_on(run(&args, redis, replica)));
    match outcome {
        Ok(report) if report.passed() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("berth-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args, redis: TestRedis, replica: Option<RedisServer>) -> Result<Report<'_>, Failure> {
    let stack = Stack::start(redis, replica, args).await?;
    let findings = args.scenario.run(&stack, args).await?;
    let report = Report::new(args, findings);
    report.print();
    report.write_json(&args.json)?;
    eprintln!("figures written to {}", args.json.display());
    Ok(report)
}
