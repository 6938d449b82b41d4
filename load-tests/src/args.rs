//! What a run can be told. Every flag is also a `BERTH_BENCH_*` variable, so CI and `make bench` can change the
//! size of a run without editing the command line.

use std::path::PathBuf;

use berth_store::Durability;
use clap::Parser;
use serde::Serialize;

use crate::scenarios::Scenario;

/// Load-tests Berth against a throwaway Redis, with the services in-process over loopback gRPC.
#[derive(Debug, Parser, Serialize)]
#[command(name = "berth-bench", version)]
pub struct Args {
    /// What to measure.
    #[arg(long, env = "BERTH_BENCH_SCENARIO", value_enum, default_value_t = Scenario::Claim)]
    pub scenario: Scenario,
    /// Game servers: registered and claimed (claim), or connected as SDK processes (heartbeats, placements); player
    /// sessions created per call line, and ten per game session (sessions); also the number of calls in each floor.
    #[arg(
        long,
        env = "BERTH_BENCH_SERVERS",
        default_value_t = 20_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub servers: u64,
    /// HTTP/2 connections per service; calls are spread over them round-robin. The heartbeats scenario opens at
    /// least one per 1,000 servers.
    #[arg(
        long,
        env = "BERTH_BENCH_CONNECTIONS",
        default_value_t = 4,
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub connections: u16,
    /// Calls kept in flight at once.
    #[arg(
        long,
        env = "BERTH_BENCH_CONCURRENCY",
        default_value_t = 64,
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub concurrency: u16,
    /// Heartbeat period of the heartbeats scenario, in ms: its fleet's, which the health replica tells every
    /// process (process_timeouts.heartbeat_interval_ms).
    #[arg(
        long,
        env = "BERTH_BENCH_HEARTBEAT_MS",
        default_value_t = 1_000,
        value_parser = clap::value_parser!(u64).range(1_000..=60_000)
    )]
    pub heartbeat_ms: u64,
    /// How long a line of the heartbeats and placements scenarios is measured, in seconds: the heartbeats once every
    /// server is connected and heartbeating; each load of placements (closed loop, open loop).
    #[arg(
        long,
        env = "BERTH_BENCH_SECONDS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub seconds: u64,
    /// Placements started a second by the placements scenario's open loop, on a fixed schedule whatever became of
    /// the earlier ones.
    #[arg(
        long,
        env = "BERTH_BENCH_RATE",
        default_value_t = 2_500,
        value_parser = clap::value_parser!(u64).range(1..=1_000_000)
    )]
    pub rate: u64,
    /// Players each placement of the placements scenario reserves slots for, with their latencies to every
    /// location: each is a player session created, activated and completed with the game session.
    #[arg(
        long,
        env = "BERTH_BENCH_PLAYERS",
        default_value_t = 4,
        value_parser = clap::value_parser!(u64).range(0..=10)
    )]
    pub players: u64,
    /// Servers the heartbeats scenario silences at the end (streams dropped, no ProcessEnding), to time how soon
    /// the health replica declares them lost.
    #[arg(long, env = "BERTH_BENCH_DEAD", default_value_t = 100)]
    pub dead: u64,
    /// Instances the fleet scenario scales a process-provisioned fleet to and back from (one example game server
    /// each).
    #[arg(
        long,
        env = "BERTH_BENCH_INSTANCES",
        default_value_t = 200,
        value_parser = clap::value_parser!(u32).range(1..=2_000)
    )]
    pub instances: u32,
    /// How long the soak's traffic and chaos last, in minutes (its end, with the fleets' deletion, takes a few more).
    #[arg(
        long,
        env = "BERTH_BENCH_MINUTES",
        default_value_t = 2,
        value_parser = clap::value_parser!(u64).range(1..=1_440)
    )]
    pub minutes: u64,
    /// Run against a 3-master Redis Cluster instead of a single redis-server.
    #[arg(long, env = "BERTH_BENCH_CLUSTER")]
    pub cluster: bool,
    /// When the services' acknowledged writes count as made (BERTH_REDIS_DURABILITY): `replica` starts a replica
    /// of the bench's redis-server beside it, which must confirm each (single node only).
    #[arg(
        long,
        env = "BERTH_BENCH_DURABILITY",
        value_enum,
        default_value = "none",
        conflicts_with = "cluster"
    )]
    #[serde(serialize_with = "durability_name")]
    pub durability: Durability,
    /// Where to write every figure as JSON (its directory is created).
    #[arg(long, env = "BERTH_BENCH_JSON", default_value = "load-tests/reports/latest.json")]
    pub json: PathBuf,
}

/// A value as its flag (or environment variable) names it.
pub fn flag_name(value: &impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|value| value.get_name().to_owned())
        .unwrap_or_default()
}

/// The durability as its flag names it, in the report's settings.
fn durability_name<S: serde::Serializer>(durability: &Durability, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&flag_name(durability))
}
