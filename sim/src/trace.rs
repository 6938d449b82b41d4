//! Demand traces: how many game sessions players ask for in each minute of a day. Either the built-in day — a
//! diurnal curve peaking in the evening, with a launch spike — or a CSV a studio exports from its own metrics.

use std::f64::consts::PI;

/// Game sessions asked for per minute, minute by minute from the trace's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub per_minute: Vec<f64>,
}

/// Why a CSV trace cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(
        "line {line}: expected `minute,sessions` with a whole minute and a number of sessions 0 or more, got {text:?}"
    )]
    Malformed { line: usize, text: String },
    #[error("the trace holds no minute")]
    Empty,
}

/// The built-in day's shape.
#[derive(Clone, Copy, Debug)]
pub struct Day {
    /// Sessions per minute at the quietest hour (08:00, twelve hours from the peak) and at the evening peak (20:00).
    pub trough: f64,
    pub peak: f64,
    /// A launch: from this minute of the day, for this many minutes, demand is multiplied by `spike_factor`.
    pub spike_at_minute: usize,
    pub spike_minutes: usize,
    pub spike_factor: f64,
}

const DAY_MINUTES: usize = 24 * 60;
const PEAK_MINUTE: f64 = 20.0 * 60.0;

impl Trace {
    /// A day of the built-in shape.
    pub fn day(day: &Day) -> Trace {
        let per_minute = (0..DAY_MINUTES)
            .map(|minute| {
                let phase = 2.0 * PI * (minute as f64 - PEAK_MINUTE) / DAY_MINUTES as f64;
                let base = day.trough + (day.peak - day.trough) * (1.0 + phase.cos()) / 2.0;
                let spiking = (day.spike_at_minute..day.spike_at_minute + day.spike_minutes).contains(&minute);
                if spiking { base * day.spike_factor } else { base }
            })
            .collect();
        Trace { per_minute }
    }

    /// A trace from CSV lines `minute,sessions` (a header line, blank lines and `#` comments are skipped); minutes
    /// missing between two given ones ask for nothing.
    pub fn from_csv(text: &str) -> Result<Trace, TraceError> {
        let mut per_minute = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || (n == 0 && line.starts_with(|c: char| c.is_alphabetic())) {
                continue;
            }
            let malformed = || TraceError::Malformed {
                line: n + 1,
                text: line.to_owned(),
            };
            let (minute, sessions) = line.split_once(',').ok_or_else(malformed)?;
            let minute: usize = minute.trim().parse().map_err(|_| malformed())?;
            let sessions: f64 = sessions.trim().parse().map_err(|_| malformed())?;
            if !sessions.is_finite() || sessions < 0.0 || minute > 10 * DAY_MINUTES {
                return Err(malformed());
            }
            if per_minute.len() <= minute {
                per_minute.resize(minute + 1, 0.0);
            }
            per_minute[minute] = sessions;
        }
        if per_minute.is_empty() {
            return Err(TraceError::Empty);
        }
        Ok(Trace { per_minute })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_peaks_in_the_evening_and_spikes_at_its_launch() {
        let day = Day {
            trough: 10.0,
            peak: 100.0,
            spike_at_minute: 600,
            spike_minutes: 60,
            spike_factor: 3.0,
        };
        let trace = Trace::day(&day);
        assert_eq!(trace.per_minute.len(), 1440);
        assert!((trace.per_minute[1200] - 100.0).abs() < 1e-9);
        assert!((trace.per_minute[480] - 10.0).abs() < 1e-9);
        let before = trace.per_minute[599];
        assert!((trace.per_minute[600] / before - 3.0).abs() < 0.1);
        assert!(trace.per_minute[660] < trace.per_minute[659] / 2.0, "the spike is over");
    }

    #[test]
    fn a_csv_trace_is_read_minute_by_minute() {
        let trace = Trace::from_csv("minute,sessions\n0,5\n# quiet\n\n3,7.5\n").unwrap();
        assert_eq!(trace.per_minute, [5.0, 0.0, 0.0, 7.5]);
        assert!(matches!(
            Trace::from_csv("0,5\n1,-2\n"),
            Err(TraceError::Malformed { line: 2, .. })
        ));
        assert!(matches!(Trace::from_csv("minute,sessions\n"), Err(TraceError::Empty)));
    }
}
