//! `berth-sim`: replays a day of demand against each way of scaling Berth offers — the same policy, standby and
//! decision functions the fleet service runs — on a simulated location whose instances take a start-up time to come
//! up, and prints what each would cost (instance-hours) and how long players would wait, with a chart of the day, so
//! that a studio chooses a policy by looking, not guessing.

mod chart;
mod model;
mod policies;
mod report;
mod run;
mod trace;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use model::Settings;
use report::Figures;
use run::Run;
use trace::{Day, Trace};

/// Replays a demand trace against Berth's scaling policies.
#[derive(Parser, Debug)]
#[command(name = "berth-sim", version)]
struct Args {
    /// A CSV trace of `minute,sessions` lines (game sessions asked for in each minute); the built-in day when unset.
    #[arg(long, env = "BERTH_SIM_TRACE")]
    trace: Option<PathBuf>,
    /// The built-in day: sessions asked for per minute at its quietest (08:00) and at its evening peak (20:00).
    #[arg(long, env = "BERTH_SIM_TROUGH", default_value_t = 15.0)]
    trough: f64,
    #[arg(long, env = "BERTH_SIM_PEAK", default_value_t = 120.0)]
    peak: f64,
    /// The built-in day's launch: demand multiplied by this factor from 18:00 for 45 minutes.
    #[arg(long, env = "BERTH_SIM_SPIKE", default_value_t = 2.5)]
    spike: f64,
    /// Server processes per instance.
    #[arg(long, env = "BERTH_SIM_SERVERS_PER_INSTANCE", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    servers_per_instance: u32,
    /// From an instance's launch to its servers being ready, s.
    #[arg(long, env = "BERTH_SIM_STARTUP_SECONDS", default_value_t = 120)]
    startup_seconds: u32,
    /// A game session's mean length, minutes.
    #[arg(long, env = "BERTH_SIM_SESSION_MINUTES", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    session_minutes: u32,
    /// How long a placement waits for a server before it times out, s.
    #[arg(long, env = "BERTH_SIM_TIMEOUT_SECONDS", default_value_t = 600)]
    timeout_seconds: u32,
    /// Simulated time between two autoscaling passes, s.
    #[arg(long, env = "BERTH_SIM_STEP_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=60))]
    step_seconds: u32,
    /// The location's most instances.
    #[arg(long, env = "BERTH_SIM_MAXIMUM_INSTANCES", default_value_t = 5000)]
    maximum_instances: u32,
    /// Where the chart is written (PNG).
    #[arg(long, env = "BERTH_SIM_CHART", default_value = "load-tests/reports/sim.png")]
    chart: PathBuf,
    /// Seed of the session lengths, for runs that compare alike.
    #[arg(long, env = "BERTH_SIM_SEED", default_value_t = 7)]
    seed: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let trace = match &args.trace {
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|err| err.to_string())
            .and_then(|text| Trace::from_csv(&text).map_err(|err| err.to_string()))
        {
            Ok(trace) => trace,
            Err(err) => {
                eprintln!("berth-sim: cannot read the trace {}: {err}", path.display());
                return ExitCode::FAILURE;
            }
        },
        None => Trace::day(&Day {
            trough: args.trough,
            peak: args.peak,
            spike_at_minute: 18 * 60,
            spike_minutes: 45,
            spike_factor: args.spike,
        }),
    };
    let run = Run {
        settings: Settings {
            servers_per_instance: args.servers_per_instance,
            startup_ms: i64::from(args.startup_seconds) * 1000,
            session_ms: i64::from(args.session_minutes) * 60_000,
            timeout_ms: i64::from(args.timeout_seconds) * 1000,
        },
        step_ms: i64::from(args.step_seconds) * 1000,
        maximum_instances: args.maximum_instances,
        seed: args.seed,
    };
    // PlayFab's sizing rule: start-up time × the peak's allocation rate.
    let peak = trace.per_minute.iter().copied().fold(0.0, f64::max);
    let standby = (peak * f64::from(args.startup_seconds) / 60.0).ceil() as u32;
    let hours = trace.per_minute.len() as f64 / 60.0;
    let days: Vec<run::Day> = policies::contenders(standby)
        .iter()
        .map(|contender| run::run(contender, &trace, &run))
        .collect();
    let figures: Vec<Figures> = days.iter().map(|day| Figures::of(day, hours)).collect();
    println!(
        "{hours:.0} h of demand, peak {peak:.0} sessions a minute; {} servers per instance, {} s start-up, {} min sessions, {} s queue timeout; standby sized {standby}",
        args.servers_per_instance, args.startup_seconds, args.session_minutes, args.timeout_seconds
    );
    print!("{}", report::table(&figures));
    if let Some(parent) = args.chart.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(parent);
    }
    match chart::write(&days, &args.chart) {
        Ok(()) => {
            println!("chart: {}", args.chart.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("berth-sim: {err}");
            ExitCode::FAILURE
        }
    }
}
