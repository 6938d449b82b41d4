//! What a run found and how it is shown: each measured line's latency histogram and error counts, boiled down to
//! throughput and percentiles, printed as a table for people and written as JSON for tooling that tracks figures
//! from run to run.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use tonic::Code;

use crate::Failure;
use crate::args::Args;
use crate::driver::Outcome;

/// The slowest latency told apart from the rest (µs); slower calls are recorded as this, and the call deadline
/// is well below it.
const LATENCY_CEILING_US: u64 = 60_000_000;

/// Every call of a line so far: latencies (µs) and failures by status code. Workers keep one each and merge at
/// the end, so recording never contends.
pub struct Tally {
    latencies: Histogram<u64>,
    errors: HashMap<Code, u64>,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            // Three significant figures: 0.1% resolution at any magnitude, some 150 KiB per tally.
            latencies: Histogram::new_with_bounds(1, LATENCY_CEILING_US, 3).expect("valid histogram bounds"),
            errors: HashMap::new(),
        }
    }
}

impl Tally {
    /// Counts one call.
    pub fn record(&mut self, latency: Duration, outcome: Outcome) {
        self.record_n(latency, 1, outcome);
    }

    /// Counts `count` operations done together in one call (a batch), each with that call's latency and outcome.
    pub fn record_n(&mut self, latency: Duration, count: u64, outcome: Outcome) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latencies.saturating_record_n(micros.max(1), count);
        if let Err(code) = outcome {
            *self.errors.entry(code).or_default() += count;
        }
    }

    /// Failures by status code, spelt as gRPC spells them.
    pub fn errors(&self) -> BTreeMap<String, u64> {
        self.errors
            .iter()
            .map(|(code, count)| (code_name(*code), *count))
            .collect()
    }

    /// Adds another tally of the same line.
    pub fn merge(&mut self, other: &Tally) {
        self.latencies
            .add(&other.latencies)
            .expect("tallies share their bounds");
        for (code, count) in &other.errors {
            *self.errors.entry(*code).or_default() += count;
        }
    }
}

/// Locks a [`Shards`] tally is split over, so that tasks on every runtime thread rarely wait on one another.
const SHARDS: u64 = 16;

/// One line's tally, shared by many tasks (streams, watches, calls) and split over several locks: a task records
/// under the lock its key (a server, a placement) picks.
pub struct Shards(Vec<Mutex<Tally>>);

impl Default for Shards {
    fn default() -> Shards {
        Shards((0..SHARDS).map(|_| Mutex::new(Tally::default())).collect())
    }
}

impl Shards {
    /// Counts one call, under the lock `key` picks.
    pub fn record(&self, key: u64, latency: Duration, outcome: Outcome) {
        let shard = &self.0[(key % SHARDS) as usize];
        shard.lock().expect("tally lock").record(latency, outcome);
    }

    /// Every shard's calls in one tally.
    pub fn merged(&self) -> Tally {
        let mut all = Tally::default();
        for shard in &self.0 {
            all.merge(&shard.lock().expect("tally lock"));
        }
        all
    }
}

/// `ResourceExhausted` as gRPC spells it everywhere else: `RESOURCE_EXHAUSTED`.
fn code_name(code: Code) -> String {
    let mut name = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// Latency percentiles of a line, in µs.
#[derive(Debug, Serialize)]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

/// One measured line.
#[derive(Debug, Serialize)]
pub struct Line {
    pub name: String,
    /// Calls made, failed ones included.
    pub calls: u64,
    /// Failed calls by gRPC status code.
    pub errors: BTreeMap<String, u64>,
    /// Wall time from the first call sent to the last answer.
    pub seconds: f64,
    /// Calls answered per second, failed ones included.
    pub ops_per_sec: f64,
    pub latency_us: Latency,
}

impl Line {
    /// Boils `tally` down; `elapsed` is the wall time of the whole line.
    pub fn new(name: &str, tally: &Tally, elapsed: Duration) -> Line {
        let h = &tally.latencies;
        let seconds = elapsed.as_secs_f64();
        Line {
            name: name.to_owned(),
            calls: h.len(),
            errors: tally.errors(),
            seconds,
            ops_per_sec: h.len() as f64 / seconds,
            latency_us: Latency {
                p50: h.value_at_quantile(0.50),
                p90: h.value_at_quantile(0.90),
                p99: h.value_at_quantile(0.99),
                p999: h.value_at_quantile(0.999),
                max: h.max(),
                mean: h.mean(),
            },
        }
    }
}

/// A line's throughput as a fraction of a floor's.
#[derive(Debug, Serialize)]
pub struct Ratio {
    pub line: String,
    pub floor: String,
    pub ratio: f64,
}

impl Ratio {
    /// `line`'s rate over `floor`'s.
    pub fn of(line: &Line, floor: &Line) -> Ratio {
        Ratio {
            line: line.name.clone(),
            floor: floor.name.clone(),
            ratio: line.ops_per_sec / floor.ops_per_sec,
        }
    }
}

/// A figure that is not a line of calls: memory, CPU time, a delay, a setting it depends on.
#[derive(Debug, Serialize)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
}

impl Figure {
    pub fn new(name: &str, value: f64, unit: &'static str) -> Figure {
        Figure {
            name: name.to_owned(),
            value,
            unit,
        }
    }
}

/// A figure held against a target set for it. Reported met or missed, never failed on: a target missed on a
/// small machine is a finding about capacity, not a broken system.
#[derive(Debug, Serialize)]
pub struct Target {
    pub name: String,
    pub measured: f64,
    /// The target value: a floor to reach when `at_least`, else a ceiling to stay under.
    pub target: f64,
    pub at_least: bool,
    pub unit: &'static str,
    pub met: bool,
    /// Why the measurement does not say what the target asks, when it does not.
    pub note: Option<String>,
}

impl Target {
    /// `measured` must reach `target`.
    pub fn at_least(name: &str, measured: f64, target: f64, unit: &'static str) -> Target {
        Target::new(name, measured, target, true, unit)
    }

    /// `measured` must stay at or under `target`.
    pub fn at_most(name: &str, measured: f64, target: f64, unit: &'static str) -> Target {
        Target::new(name, measured, target, false, unit)
    }

    fn new(name: &str, measured: f64, target: f64, at_least: bool, unit: &'static str) -> Target {
        Target {
            name: name.to_owned(),
            measured,
            target,
            at_least,
            unit,
            met: if at_least {
                measured >= target
            } else {
                measured <= target
            },
            note: None,
        }
    }
}

/// What a scenario answers: its lines in the order measured, how they compare with their floors, other figures
/// and the targets set for some of them, and the checks that failed (a bench that measures a broken system must
/// not look like a pass).
#[derive(Debug, Default, Serialize)]
pub struct Findings {
    pub lines: Vec<Line>,
    pub ratios: Vec<Ratio>,
    pub figures: Vec<Figure>,
    pub targets: Vec<Target>,
    pub failed_checks: Vec<String>,
}

/// A whole run: the settings it ran with and what it found.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub settings: &'a Args,
    /// CPUs this process could use: every figure depends on it.
    pub cpus: usize,
    #[serde(flatten)]
    pub findings: Findings,
}

fn ms(micros: u64) -> String {
    format!("{:.2}", micros as f64 / 1000.0)
}

/// A rate with decimals only where whole numbers would hide it (a line of calls that take seconds).
fn rate(ops_per_sec: f64) -> String {
    if ops_per_sec < 100.0 {
        format!("{ops_per_sec:.2}")
    } else {
        format!("{ops_per_sec:.0}")
    }
}

impl<'a> Report<'a> {
    /// The report of a run with `settings`.
    pub fn new(settings: &'a Args, findings: Findings) -> Report<'a> {
        Report {
            settings,
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            findings,
        }
    }

    /// Whether every check passed and no call failed.
    pub fn passed(&self) -> bool {
        self.findings.failed_checks.is_empty() && self.findings.lines.iter().all(|line| line.errors.is_empty())
    }

    /// Prints the table, the ratios and any failed check.
    pub fn print(&self) {
        let s = self.settings;
        println!(
            "\nberth-bench {}: {} servers, {} connections, {} in flight, redis {}, {} cpus\n",
            s.scenario.name(),
            s.servers,
            s.connections,
            s.concurrency,
            if s.cluster {
                "cluster (3 masters)"
            } else {
                "single node"
            },
            self.cpus
        );
        // As wide as the longest name, so that every column lines up.
        let width = self
            .findings
            .lines
            .iter()
            .map(|line| line.name.chars().count())
            .fold(14, usize::max);
        println!(
            "{:<width$} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8}  errors",
            "line", "calls", "ops/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"
        );
        for line in &self.findings.lines {
            let l = &line.latency_us;
            let errors = if line.errors.is_empty() {
                "-".to_owned()
            } else {
                let counts: Vec<String> = line
                    .errors
                    .iter()
                    .map(|(code, count)| format!("{code} {count}"))
                    .collect();
                counts.join(", ")
            };
            println!(
                "{:<width$} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8}  {errors}",
                line.name,
                line.calls,
                rate(line.ops_per_sec),
                ms(l.p50),
                ms(l.p90),
                ms(l.p99),
                ms(l.p999),
                ms(l.max)
            );
        }
        println!();
        let mut measured: Vec<&str> = Vec::new();
        for ratio in &self.findings.ratios {
            if !measured.contains(&ratio.line.as_str()) {
                measured.push(&ratio.line);
            }
        }
        for name in measured {
            let against: Vec<String> = self
                .findings
                .ratios
                .iter()
                .filter(|ratio| ratio.line == name)
                .map(|ratio| format!("{:.2} × {}", ratio.ratio, ratio.floor))
                .collect();
            println!("{name} = {}", against.join(", "));
        }
        if !self.findings.figures.is_empty() {
            println!();
        }
        let width = self
            .findings
            .figures
            .iter()
            .map(|figure| figure.name.chars().count())
            .fold(44, usize::max);
        for figure in &self.findings.figures {
            println!("{:<width$} {:>12.1} {}", figure.name, figure.value, figure.unit);
        }
        if !self.findings.targets.is_empty() {
            println!();
        }
        for target in &self.findings.targets {
            let (sign, verdict) = match (target.at_least, target.met) {
                (true, true) => ("≥", "met"),
                (true, false) => ("≥", "MISSED"),
                (false, true) => ("≤", "met"),
                (false, false) => ("≤", "MISSED"),
            };
            let note = target
                .note
                .as_ref()
                .map(|note| format!(" ({note})"))
                .unwrap_or_default();
            // A ratio near its target needs its second decimal: 0.75 is no 0.8.
            let decimals = if target.measured.abs() < 10.0 { 2 } else { 1 };
            println!(
                "target {} {sign} {} {}: {:.decimals$} {}, {verdict}{note}",
                target.name, target.target, target.unit, target.measured, target.unit
            );
        }
        for check in &self.findings.failed_checks {
            println!("FAILED: {check}");
        }
    }

    /// Writes every figure to `path` as JSON, creating its directory.
    pub fn write_json(&self, path: &Path) -> Result<(), Failure> {
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut out = BufWriter::new(File::create(path)?);
        serde_json::to_writer_pretty(&mut out, self)?;
        writeln!(out)?;
        out.flush()?;
        Ok(())
    }
}
