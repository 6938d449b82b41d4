//! The caller's deadline, from the `grpc-timeout` header its client sends: a handler that commits something (a
//! claim, a placement) must not commit it for a caller that has already given up, which is what a server that only
//! drops the handler at the deadline would do (Agones' allocator is known for allocating for callers gone).

use std::time::{Duration, Instant};

use tonic::metadata::MetadataMap;

/// When the caller stops waiting: its `grpc-timeout` from `arrived`; `None` when it set none (or a malformed one).
pub fn caller_deadline(metadata: &MetadataMap, arrived: Instant) -> Option<Instant> {
    arrived.checked_add(grpc_timeout(metadata.get("grpc-timeout")?.to_str().ok()?)?)
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

    fn with(timeout: &str) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        metadata.insert("grpc-timeout", timeout.parse().unwrap());
        metadata
    }

    #[test]
    fn every_unit_of_the_header_is_read() {
        let now = Instant::now();
        let after = |header: &str| caller_deadline(&with(header), now).map(|at| at - now);
        assert_eq!(after("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(after("3M"), Some(Duration::from_secs(180)));
        assert_eq!(after("5S"), Some(Duration::from_secs(5)));
        assert_eq!(after("250m"), Some(Duration::from_millis(250)));
        assert_eq!(after("750u"), Some(Duration::from_micros(750)));
        assert_eq!(after("100n"), Some(Duration::from_nanos(100)));
        assert_eq!(after("5x"), None);
        assert_eq!(after("m"), None);
        assert_eq!(caller_deadline(&MetadataMap::new(), now), None);
    }
}
