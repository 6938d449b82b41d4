//! When a schedule policy or a chain entry is in force: between two times, and, when it has a cron expression, only
//! from each occurrence of that expression (read in an IANA time zone, so that "20:00 every Friday" follows the
//! players' clocks through daylight-saving changes) for a fixed duration.

use berth_proto::fleet::v1 as pb;
use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::fleet::check::time_ms;

/// Longest cron expression, in characters.
pub const CRON_MAX: usize = 128;
/// Bounds of a cron occurrence's duration, s.
pub const DURATION_S: (u32, u32) = (60, 604_800);
/// Longest time zone name, in characters.
pub const TIME_ZONE_MAX: usize = 64;

/// A window, read and checked.
#[derive(Clone, Debug)]
pub struct Window {
    start_ms: Option<i64>,
    end_ms: Option<i64>,
    recurring: Option<Recurring>,
}

/// Whether `window`, as stored (so already checked), is in force at `now_ms`; a window that no longer reads (it
/// cannot, once checked) is not.
pub fn in_force(window: &pb::ScheduleWindow, now_ms: i64) -> bool {
    Window::read(window).is_ok_and(|w| w.in_force(now_ms))
}

#[derive(Clone, Debug)]
struct Recurring {
    cron: Cron,
    zone: Tz,
    duration_ms: i64,
}

impl Window {
    /// Reads a window; a broken rule as the field (relative to the window) and what is wrong with it.
    pub fn read(window: &pb::ScheduleWindow) -> Result<Window, (&'static str, String)> {
        let start_ms = window
            .start_time
            .as_ref()
            .map(time_ms)
            .transpose()
            .map_err(|e| ("start_time", e))?;
        let end_ms = window
            .end_time
            .as_ref()
            .map(time_ms)
            .transpose()
            .map_err(|e| ("end_time", e))?;
        if let (Some(start), Some(end)) = (start_ms, end_ms)
            && end <= start
        {
            return Err(("end_time", "must be after start_time".into()));
        }
        let recurring = if window.cron.is_empty() {
            if window.duration_seconds != 0 {
                return Err(("duration_seconds", "must be 0 without cron".into()));
            }
            if !window.time_zone.is_empty() {
                return Err(("time_zone", "must be empty without cron".into()));
            }
            None
        } else {
            Some(recurring(window)?)
        };
        Ok(Window {
            start_ms,
            end_ms,
            recurring,
        })
    }

    /// Whether the window is in force at `now_ms` (ms since the epoch).
    pub fn in_force(&self, now_ms: i64) -> bool {
        if self.start_ms.is_some_and(|start| now_ms < start) || self.end_ms.is_some_and(|end| now_ms >= end) {
            return false;
        }
        let Some(recurring) = &self.recurring else { return true };
        let Some(now) = Utc.timestamp_millis_opt(now_ms).single() else {
            return false;
        };
        recurring
            .cron
            .find_previous_occurrence(&now.with_timezone(&recurring.zone), true)
            .is_ok_and(|began| now_ms < began.timestamp_millis() + recurring.duration_ms)
    }
}

fn recurring(window: &pb::ScheduleWindow) -> Result<Recurring, (&'static str, String)> {
    let len = window.cron.chars().count();
    if len > CRON_MAX {
        return Err(("cron", format!("must be at most {CRON_MAX} characters long, got {len}")));
    }
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(&window.cron)
        .map_err(|err| {
            (
                "cron",
                format!("must be a 5-field cron expression (minute hour day-of-month month day-of-week): {err}"),
            )
        })?;
    let (min, max) = DURATION_S;
    if !(min..=max).contains(&window.duration_seconds) {
        return Err((
            "duration_seconds",
            format!("must be {min} to {max} with cron, got {}", window.duration_seconds),
        ));
    }
    let zone = if window.time_zone.is_empty() {
        Tz::UTC
    } else if window.time_zone.chars().count() > TIME_ZONE_MAX {
        return Err(("time_zone", format!("must be at most {TIME_ZONE_MAX} characters long")));
    } else {
        window
            .time_zone
            .parse::<Tz>()
            .map_err(|_| ("time_zone", format!("{:?} is not an IANA time zone", window.time_zone)))?
    };
    Ok(Recurring {
        cron,
        zone,
        duration_ms: i64::from(window.duration_seconds) * 1000,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .timestamp_millis()
    }

    fn cron(expression: &str, duration_seconds: u32, time_zone: &str) -> pb::ScheduleWindow {
        pb::ScheduleWindow {
            cron: expression.into(),
            duration_seconds,
            time_zone: time_zone.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_cron_window_is_in_force_for_its_duration_from_each_occurrence_in_its_time_zone() {
        // 20:00 in Paris on Fridays, for an hour: 19:00 UTC in winter, 18:00 UTC in summer.
        let window = Window::read(&cron("0 20 * * FRI", 3600, "Europe/Paris")).unwrap();
        assert!(window.in_force(at("2026-01-09T19:00:00Z")));
        assert!(window.in_force(at("2026-01-09T19:59:59Z")));
        assert!(!window.in_force(at("2026-01-09T20:00:00Z")));
        assert!(!window.in_force(at("2026-01-09T18:59:59Z")));
        assert!(window.in_force(at("2026-07-10T18:30:00Z")));
        assert!(!window.in_force(at("2026-07-10T19:30:00Z")));
        assert!(!window.in_force(at("2026-01-08T19:30:00Z")), "a Thursday");
    }

    #[test]
    fn a_window_holds_only_between_its_start_and_end() {
        let mut bounded = cron("*/10 * * * *", 60, "");
        bounded.start_time = Some(prost_types::Timestamp {
            seconds: at("2026-03-01T00:00:00Z") / 1000,
            nanos: 0,
        });
        bounded.end_time = Some(prost_types::Timestamp {
            seconds: at("2026-03-02T00:00:00Z") / 1000,
            nanos: 0,
        });
        let window = Window::read(&bounded).unwrap();
        assert!(window.in_force(at("2026-03-01T10:10:30Z")));
        assert!(!window.in_force(at("2026-03-01T10:11:30Z")));
        assert!(!window.in_force(at("2026-02-28T10:10:30Z")));
        assert!(!window.in_force(at("2026-03-02T00:00:30Z")));
        let span = pb::ScheduleWindow {
            cron: String::new(),
            duration_seconds: 0,
            time_zone: String::new(),
            ..bounded
        };
        let window = Window::read(&span).unwrap();
        assert!(window.in_force(at("2026-03-01T00:00:00Z")));
        assert!(window.in_force(at("2026-03-01T23:59:59Z")));
        assert!(!window.in_force(at("2026-03-02T00:00:00Z")));
        assert!(
            Window::read(&pb::ScheduleWindow::default()).unwrap().in_force(0),
            "no bounds: always"
        );
    }

    #[test]
    fn a_malformed_window_names_its_field() {
        let field = |window: pb::ScheduleWindow| Window::read(&window).unwrap_err().0;
        assert_eq!(field(cron("0 20 * *", 3600, "")), "cron");
        assert_eq!(
            field(cron("0 0 20 * * FRI", 3600, "")),
            "cron",
            "seconds are not allowed"
        );
        assert_eq!(field(cron("61 * * * *", 3600, "")), "cron");
        assert_eq!(field(cron(&"1".repeat(129), 3600, "")), "cron");
        assert_eq!(field(cron("0 20 * * *", 59, "")), "duration_seconds");
        assert_eq!(field(cron("0 20 * * *", 604_801, "")), "duration_seconds");
        assert_eq!(field(cron("0 20 * * *", 3600, "Mars/Olympus")), "time_zone");
        assert_eq!(field(cron("", 3600, "")), "duration_seconds");
        assert_eq!(field(cron("", 0, "UTC")), "time_zone");
        let backwards = pb::ScheduleWindow {
            start_time: Some(prost_types::Timestamp { seconds: 20, nanos: 0 }),
            end_time: Some(prost_types::Timestamp { seconds: 10, nanos: 0 }),
            ..Default::default()
        };
        assert_eq!(field(backwards), "end_time");
    }
}
