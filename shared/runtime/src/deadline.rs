//! The caller's deadline, from the `grpc-timeout` header its client sends: a handler that commits something (a
//! claim, a placement) must not commit it for a caller that has already given up, which is what a server that only
//! drops the handler at the deadline would do (Agones' allocator is known for allocating for callers gone). The edge
//! reads it once, as the request arrives, answers DEADLINE_EXCEEDED at it and leaves it in the request's extensions,
//! so that a handler stops committing at the very moment the caller is answered.

use std::time::{Duration, Instant};

/// How long before the caller's deadline Berth answers DEADLINE_EXCEEDED: more than the time between tonic's
/// timeout starting and the edge reading the same header (microseconds), so that the edge's timer never fires after
/// tonic's, and small beside any deadline a client sets.
const DEADLINE_MARGIN: Duration = Duration::from_millis(2);

/// When Berth stops working for a caller: its `grpc-timeout` less the margin, from when the request arrived. The
/// edge puts it in the request's extensions; `None` there when the caller set no deadline (or a malformed one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallerDeadline(pub Instant);

impl CallerDeadline {
    /// The deadline a `grpc-timeout` header value gives a request that arrived at `arrived`.
    pub(crate) fn of(header: &http::HeaderValue, arrived: Instant) -> Option<CallerDeadline> {
        let timeout = grpc_timeout(header.to_str().ok()?)?;
        arrived
            .checked_add(timeout.saturating_sub(DEADLINE_MARGIN))
            .map(CallerDeadline)
    }
}

/// When the edge stops waiting for a handler's answer to `request`, as it put it there.
pub fn caller_deadline<T>(request: &tonic::Request<T>) -> Option<Instant> {
    request.extensions().get::<CallerDeadline>().map(|deadline| deadline.0)
}

/// The time a `grpc-timeout` header value gives; `None` for a malformed one.
pub(crate) fn grpc_timeout(header: &str) -> Option<Duration> {
    // At most 8 digits and a unit, as the gRPC spec puts it.
    let (digits, unit) = header.split_at(header.len().checked_sub(1)?);
    let amount: u64 = digits.parse().ok()?;
    match unit {
        "H" => Some(Duration::from_secs(amount.checked_mul(3600)?)),
        "M" => Some(Duration::from_secs(amount.checked_mul(60)?)),
        "S" => Some(Duration::from_secs(amount)),
        "m" => Some(Duration::from_millis(amount)),
        "u" => Some(Duration::from_micros(amount)),
        "n" => Some(Duration::from_nanos(amount)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_of_the_header_is_read() {
        let after = grpc_timeout;
        assert_eq!(after("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(after("3M"), Some(Duration::from_secs(180)));
        assert_eq!(after("5S"), Some(Duration::from_secs(5)));
        assert_eq!(after("250m"), Some(Duration::from_millis(250)));
        assert_eq!(after("750u"), Some(Duration::from_micros(750)));
        assert_eq!(after("100n"), Some(Duration::from_nanos(100)));
        assert_eq!(after("5x"), None);
        assert_eq!(after("m"), None);
    }

    #[test]
    fn berth_stops_working_for_a_caller_just_before_its_deadline() {
        let now = Instant::now();
        let deadline = |header: &str| CallerDeadline::of(&header.parse().unwrap(), now).map(|d| d.0 - now);
        assert_eq!(deadline("250m"), Some(Duration::from_millis(248)));
        assert_eq!(deadline("1m"), Some(Duration::ZERO));
        assert_eq!(deadline("5x"), None);
        let mut request = tonic::Request::new(());
        assert_eq!(caller_deadline(&request), None);
        request.extensions_mut().insert(CallerDeadline(now));
        assert_eq!(caller_deadline(&request), Some(now));
    }
}
