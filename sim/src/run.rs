//! One contender's day: the simulated location stepped through the trace, its autoscaler passing every step, and
//! what came of it, with a sample a minute for the chart.

use berth_domain::scaling::Capacity;

use crate::model::{Location, Outcome, Settings};
use crate::policies::{Autoscaler, Contender};
use crate::trace::Trace;

/// How a run steps.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub settings: Settings,
    /// Simulated time between two steps (and autoscaling passes), ms.
    pub step_ms: i64,
    pub maximum_instances: u32,
    pub seed: u64,
}

/// A minute of a run: the instances running or starting, and the instances the games then in play filled.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    pub hour: f64,
    pub instances: f64,
    pub needed: f64,
}

/// What a contender's day came to.
#[derive(Clone, Debug)]
pub struct Day {
    pub name: &'static str,
    pub outcome: Outcome,
    pub samples: Vec<Sample>,
}

/// Runs `contender` over `trace`.
pub fn run(contender: &Contender, trace: &Trace, run: &Run) -> Day {
    let mut location = Location::new(run.settings, run.seed);
    let mut autoscaler = Autoscaler::new(contender);
    let mut desired = 0;
    let mut samples = Vec::new();
    let end_ms = trace.per_minute.len() as i64 * 60_000;
    let per = f64::from(run.settings.servers_per_instance.max(1));
    let mut now = 0;
    while now < end_ms {
        now += run.step_ms;
        let minute = ((now - 1) / 60_000) as usize;
        location.step(now, run.step_ms, trace.per_minute[minute]);
        let utilization = location.utilization(now);
        let capacity = Capacity {
            minimum: 0,
            maximum: run.maximum_instances,
            desired,
        };
        desired = autoscaler.pass(&utilization, capacity, run.settings.servers_per_instance, now);
        location.follow(desired, now);
        if now % 60_000 == 0 {
            let busy = utilization.game_server_counts.unwrap_or_default().utilized;
            samples.push(Sample {
                hour: now as f64 / 3_600_000.0,
                instances: location.instances() as f64,
                needed: f64::from(busy) / per,
            });
        }
    }
    Day {
        name: contender.name,
        outcome: location.outcome,
        samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::contenders;

    fn steady(per_minute: f64, minutes: usize) -> Trace {
        Trace {
            per_minute: vec![per_minute; minutes],
        }
    }

    fn settings() -> Run {
        Run {
            settings: Settings {
                servers_per_instance: 2,
                startup_ms: 60_000,
                session_ms: 600_000,
                timeout_ms: 600_000,
            },
            step_ms: 5_000,
            maximum_instances: 1000,
            seed: 3,
        }
    }

    #[test]
    fn every_contender_serves_a_steady_demand_and_pays_for_what_it_runs() {
        let trace = steady(6.0, 180);
        for contender in contenders(12) {
            let day = run(&contender, &trace, &settings());
            assert_eq!(day.samples.len(), 180);
            // Rule-based steps grow a location from nothing a step per cool-down: its first players time out.
            if contender.name == "rule-based" {
                assert!(day.outcome.timed_out > 0);
                assert!(day.outcome.waits_ms.len() >= 6 * 180 - 60, "{}", contender.name);
            } else {
                assert_eq!(day.outcome.timed_out, 0, "{}", contender.name);
                assert!(day.outcome.waits_ms.len() >= 6 * 180 - 6, "{}", contender.name);
            }
            // About 60 games in play at once need 30 instances; more is the buffer a policy keeps.
            let last = day.samples.last().unwrap();
            assert!((25.0..=60.0).contains(&last.instances), "{}: {last:?}", contender.name);
            let hours = day.outcome.instance_ms / 3_600_000.0;
            assert!(hours > 0.0 && hours < 60.0 * 3.0, "{}: {hours}", contender.name);
        }
    }

    #[test]
    fn the_chart_is_a_png() {
        let trace = steady(6.0, 30);
        let days: Vec<Day> = contenders(12).iter().map(|c| run(c, &trace, &settings())).collect();
        let path = std::env::temp_dir().join(format!("berth-sim-{}.png", std::process::id()));
        crate::chart::write(&days, &path).unwrap();
        let written = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(&written[..8], b"\x89PNG\r\n\x1a\n");
        assert!(written.len() > 10_000, "a chart, not an empty image");
    }
}
