//! What one placement's whole life costs Redis and the health replica, as the issue states its budget: from its
//! start to the end of its match, the client learning the outcome from its queue's watch, the server activating the
//! session, accepting each player with its own call and later removing each, then ending the session. A closed
//! loop of its own runs that many placements while nothing else is asked of the stack; what the stack does meanwhile
//! for no placement (heartbeats, sweeps, the workers' polls) is measured alone just before, over a quiet span, and
//! taken off in proportion. Commands, function calls and stream entries come from INFO commandstats, time spent in
//! functions from its µs, memory from used_memory after every match has ended (what the retention keeps) and, on a
//! single node, by kind of key from every key's MEMORY USAGE, CPU from /proc.

use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_store::Store;
use tonic::Code;

use super::hosts::Hosts;
use super::ledger::Ledger;
use super::{DRAIN, Matchmakers, start};
use crate::Failure;
use crate::procfs::CpuTimes;
use crate::redis_stats::{RedisStats, memory_by_kind};

/// How long the stack is watched doing nothing before the placements, for what it costs on its own.
const QUIET_SPAN: Duration = Duration::from_secs(3);
/// How long the matches may take to end once every placement has its outcome.
const MATCHES_PATIENCE: Duration = Duration::from_secs(30);

/// One placement's share.
pub struct Cost {
    /// Placements fulfilled and whose match ended.
    pub placements: u64,
    /// Redis's work per placement: commands, function calls and µs, memory kept.
    pub redis: RedisStats,
    /// CPU µs per placement of the redis-server processes and of the health replica.
    pub redis_cpu_us: f64,
    pub replica_cpu_us: f64,
    /// Where the memory kept goes: bytes per placement by kind of key, most first (a single node only).
    pub memory_kept: Vec<(String, f64)>,
}

/// Runs `count` placements, `ledger.cost`'s slots in flight, each to the end of its match, and answers what one cost;
/// `cpu` reads the CPU times of the replica and Redis.
pub async fn lifecycle(
    matchmakers: &Arc<Matchmakers>,
    ledger: &Arc<Ledger>,
    hosts: &Hosts,
    store: &Store,
    count: u64,
    cpu: impl Fn() -> Result<CpuTimes, Failure>,
) -> Result<Cost, Failure> {
    eprintln!("costing {count} placements, start to match end, after {QUIET_SPAN:?} of quiet");
    let held_before = memory_by_kind(store, "*").await?;
    let (quiet_stats, quiet_cpu, quiet_began) = (RedisStats::read(store).await?, cpu()?, Instant::now());
    tokio::time::sleep(QUIET_SPAN).await;
    let (before, cpu_before, began) = (RedisStats::read(store).await?, cpu()?, Instant::now());
    let quiet_seconds = began.duration_since(quiet_began).as_secs_f64();
    let (fulfilled_before, _) = ledger.fulfilled();
    let ended_before = hosts.ended();

    let load = &ledger.cost;
    let slots = load.slots.as_ref().expect("the cost load has slots");
    for index in 0..count {
        slots
            .acquire()
            .await
            .map_err(|_| "the cost load's slots closed")?
            .forget();
        let due = Instant::now();
        load.begin(index, due);
        tokio::spawn(start(matchmakers.clone(), load.clone(), index, due));
    }
    let stranded = load.drain(DRAIN, Err(Code::DeadlineExceeded)).await;
    if stranded > 0 {
        return Err(format!("{stranded} costed placements had no outcome {DRAIN:?} after the last start").into());
    }
    let fulfilled = ledger.fulfilled().0 - fulfilled_before;
    let patience = Instant::now() + MATCHES_PATIENCE;
    while hosts.ended() - ended_before < fulfilled {
        if Instant::now() > patience {
            return Err(format!(
                "{} of {fulfilled} costed matches ended within {MATCHES_PATIENCE:?}",
                hosts.ended() - ended_before
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (after, cpu_after) = (RedisStats::read(store).await?, cpu()?);
    let share = began.elapsed().as_secs_f64() / quiet_seconds;
    let background = before.since(&quiet_stats, share);
    let per = |part: fn(&CpuTimes) -> f64| {
        let quiet = (part(&cpu_before) - part(&quiet_cpu)) * share;
        (part(&cpu_after) - part(&cpu_before) - quiet).max(0.0) * 1e6 / fulfilled.max(1) as f64
    };
    let mut memory_kept = Vec::new();
    if let (Some(before), Some(after)) = (held_before, memory_by_kind(store, "*").await?) {
        for (kind, (_, bytes)) in after {
            let was = before.get(&kind).map_or(0.0, |(_, bytes)| *bytes);
            let kept = (bytes - was) / fulfilled.max(1) as f64;
            if kept >= 1.0 {
                memory_kept.push((kind, kept));
            }
        }
        memory_kept.sort_by(|a, b| b.1.total_cmp(&a.1));
    }
    Ok(Cost {
        memory_kept,
        placements: fulfilled,
        redis: after.per(&before, &background, fulfilled),
        redis_cpu_us: per(|c| c.redis),
        replica_cpu_us: per(|c| c.replica),
    })
}
