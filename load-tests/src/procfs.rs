//! What Linux's /proc says of a process: its resident memory and the CPU time it has used. The bench reads these
//! rather than sampling with a profiler (none is installed on the benchmark machine), to tell apart what the
//! service, Redis and the load generator each cost when they share the machine's cores.

use std::path::Path;
use std::time::Duration;

use crate::Failure;
use crate::report::Figure;

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

/// CPU seconds used so far by this process (the load generator, with any service it runs in-process), a service
/// replica of its own (0 when there is none, or once it is gone), Redis, and the machine as a whole.
pub struct CpuTimes {
    pub generator: f64,
    pub replica: f64,
    pub redis: f64,
    pub machine: f64,
}

impl CpuTimes {
    /// Reads them now; `redis` are the redis-server processes (see [`children`]).
    pub fn read(replica: Option<u32>, redis: &[u32]) -> Result<CpuTimes, Failure> {
        let mut redis_seconds = 0.0;
        for pid in redis {
            redis_seconds += cpu_seconds(*pid)?;
        }
        Ok(CpuTimes {
            generator: cpu_seconds(std::process::id())?,
            replica: replica.map(cpu_seconds).transpose()?.unwrap_or_default(),
            redis: redis_seconds,
            machine: machine_busy_seconds()?,
        })
    }
}

/// One part's CPU seconds in a reading.
type Part = fn(&CpuTimes) -> f64;

/// CPU used between two readings, over a window in which some operations were done.
pub struct Used<'a> {
    pub before: &'a CpuTimes,
    pub after: &'a CpuTimes,
    pub window: Duration,
    /// Operations done in the window, and what one is called ("heartbeat").
    pub ops: u64,
    pub op: &'a str,
}

impl Used<'_> {
    /// The cores each part kept busy, anything else on the machine included, named "CPU in {scope}: {part}"; then
    /// each part's CPU time per operation, "CPU per {op}: {part}": against the machine's cores, it says which part
    /// a faster rate needs. This process is the part called `generator`.
    pub fn figures(&self, scope: &str, generator: &str) -> Vec<Figure> {
        let seconds = |cpu: Part| cpu(self.after) - cpu(self.before);
        let cores = |cpu: Part| seconds(cpu) / self.window.as_secs_f64();
        let per_op = |cpu: Part| seconds(cpu) * 1e6 / self.ops.max(1) as f64;
        let parts: [(&str, Part); 3] = [
            (generator, |cpu| cpu.generator),
            ("health replica", |cpu| cpu.replica),
            ("redis", |cpu| cpu.redis),
        ];
        let mut figures: Vec<Figure> = parts
            .iter()
            .map(|(part, cpu)| Figure::new(&format!("CPU in {scope}: {part}"), cores(*cpu), "cores"))
            .collect();
        figures.push(Figure::new(
            &format!("CPU in {scope}: anything else"),
            // Never below zero, which the two clocks' different ticks could otherwise show on an idle machine.
            cores(|cpu| cpu.machine - cpu.generator - cpu.replica - cpu.redis).max(0.0),
            "cores",
        ));
        figures.extend(
            parts
                .iter()
                .map(|(part, cpu)| Figure::new(&format!("CPU per {}: {part}", self.op), per_op(*cpu), "µs")),
        );
        figures
    }
}
