//! Redis failures as the services report them. An unreachable, overloaded or failing-over Redis, and a write no
//! replica confirmed when one must, are `UNAVAILABLE` (the client may retry, perhaps elsewhere); a Redis out of
//! memory is `RESOURCE_EXHAUSTED`; anything else is a bug on our side and `INTERNAL`.

use redis::{ErrorKind, RedisError, RetryMethod};

/// Why a call to Redis failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis could not be reached, did not answer within the configured timeout, or cannot serve right now.
    #[error("redis is unavailable: {0}")]
    Unavailable(String),
    /// Redis is out of memory and refuses writes.
    #[error("redis is out of memory: {0}")]
    OutOfMemory(String),
    /// Redis answered with something Berth did not expect.
    #[error("redis answered unexpectedly: {0}")]
    Unexpected(String),
    /// No replica confirmed a write within the durability timeout, in ms (BERTH_REDIS_DURABILITY=replica).
    #[error(
        "no redis replica confirmed this write within {0} ms: it may or may not have landed, and may be lost if \
         redis fails over now; a retry naming it the same way (its id, idempotency token or player) finds what \
         landed rather than making it twice"
    )]
    Unconfirmed(u64),
}

/// Server error codes that mean "not now" rather than "never": a script running long (BUSY), a replica still
/// loading, a master that cannot persist or has too few replicas, a cluster re-sharding or failing over.
const TRANSIENT_CODES: [&str; 8] = [
    "BUSY",
    "LOADING",
    "MISCONF",
    "MASTERDOWN",
    "READONLY",
    "NOREPLICAS",
    "TRYAGAIN",
    "CLUSTERDOWN",
];

impl From<RedisError> for StoreError {
    fn from(err: RedisError) -> Self {
        let code = err.code();
        if code == Some("OOM") {
            return StoreError::OutOfMemory(err.to_string());
        }
        let transient = code.is_some_and(|code| TRANSIENT_CODES.contains(&code));
        if transient || !matches!(err.retry_method(), RetryMethod::NoRetry) || err.kind() == ErrorKind::Io {
            StoreError::Unavailable(err.to_string())
        } else {
            StoreError::Unexpected(err.to_string())
        }
    }
}

impl From<StoreError> for tonic::Status {
    fn from(err: StoreError) -> Self {
        match &err {
            StoreError::Unavailable(_) | StoreError::Unconfirmed(_) => tonic::Status::unavailable(err.to_string()),
            StoreError::OutOfMemory(_) => tonic::Status::resource_exhausted(err.to_string()),
            StoreError::Unexpected(_) => tonic::Status::internal(err.to_string()),
        }
    }
}
