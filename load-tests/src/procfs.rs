//! What Linux's /proc says of a process: its resident memory and the CPU time it has used. The bench reads these
//! rather than sampling with a profiler (none is installed on the benchmark machine), to tell apart what the
//! service, Redis and the load generator each cost when they share the machine's cores.

use std::path::Path;

use crate::Failure;

/// Clock ticks per second of /proc/<pid>/stat's times: USER_HZ, which Linux fixes at 100 for user space.
const TICKS_PER_SECOND: f64 = 100.0;

/// Resident memory of `pid` (VmRSS), in KiB.
pub fn rss_kib(pid: u32) -> Result<u64, Failure> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("/proc/{pid}/status has no VmRSS").into())
}

/// The fields of /proc/<pid>/stat after the command name, which is in parentheses and may hold spaces: the
/// process state first, then the parent's pid, … (`proc(5)` numbers them from 3).
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default()
}

/// CPU time `pid` has used so far, user and system, every thread of it, in seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64, Failure> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields = stat_fields(&stat);
    // utime and stime, fields 14 and 15.
    let ticks = |index: usize| fields.get(index).and_then(|field| field.parse::<u64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => Ok((user + system) as f64 / TICKS_PER_SECOND),
        _ => Err(format!("/proc/{pid}/stat has no CPU times").into()),
    }
}

/// The pids of this process's children running `command` (e.g. the redis-server processes the testkit started).
pub fn children(command: &str) -> Vec<u32> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) else {
                return false;
            };
            let named = stat
                .split_once('(')
                .and_then(|(_, rest)| rest.rsplit_once(')'))
                .is_some_and(|(name, _)| name == command);
            named && stat_fields(&stat).get(1) == Some(&me.as_str())
        })
        .collect()
}

/// CPU time the whole machine has spent busy so far (every core, every process, the kernel), in seconds: less what
/// the bench's own processes use, it is what else competed with them.
pub fn machine_busy_seconds() -> Result<f64, Failure> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("cpu "))
        .map(|rest| rest.split_whitespace().filter_map(|field| field.parse().ok()).collect())
        .unwrap_or_default();
    // user nice system idle iowait irq softirq steal …: all but idle and iowait are busy.
    if ticks.len() < 5 {
        return Err("/proc/stat has no cpu line".into());
    }
    let busy: u64 = ticks.iter().sum::<u64>() - ticks[3] - ticks[4];
    Ok(busy as f64 / TICKS_PER_SECOND)
}
