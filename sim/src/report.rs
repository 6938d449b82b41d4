//! The comparison a run prints: per contender, what it cost and what players waited.

use crate::run::Day;

/// The figures of one contender's day.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub name: &'static str,
    pub instance_hours: f64,
    pub fulfilled: usize,
    pub timed_out: u64,
    pub wait_p50_s: f64,
    pub wait_p99_s: f64,
    /// Ready, idle servers left on average over the day.
    pub standby_left: f64,
}

impl Figures {
    pub fn of(day: &Day, hours: f64) -> Figures {
        let mut waits = day.outcome.waits_ms.clone();
        waits.sort_unstable();
        let quantile = |q: f64| {
            if waits.is_empty() {
                return 0.0;
            }
            let at = ((waits.len() as f64 * q).ceil() as usize).clamp(1, waits.len()) - 1;
            waits[at] as f64 / 1000.0
        };
        Figures {
            name: day.name,
            instance_hours: day.outcome.instance_ms / 3_600_000.0,
            fulfilled: waits.len(),
            timed_out: day.outcome.timed_out,
            wait_p50_s: quantile(0.5),
            wait_p99_s: quantile(0.99),
            standby_left: day.outcome.idle_server_ms / (hours * 3_600_000.0),
        }
    }
}

/// The table, one contender a line.
pub fn table(figures: &[Figures]) -> String {
    let mut out = format!(
        "{:<18} {:>14} {:>10} {:>10} {:>12} {:>12} {:>13}\n",
        "policy", "instance-hours", "fulfilled", "timed out", "wait p50 s", "wait p99 s", "standby left"
    );
    for f in figures {
        out.push_str(&format!(
            "{:<18} {:>14.1} {:>10} {:>10} {:>12.1} {:>12.1} {:>13.1}\n",
            f.name, f.instance_hours, f.fulfilled, f.timed_out, f.wait_p50_s, f.wait_p99_s, f.standby_left
        ));
    }
    out
}
