//! Redis failures as the services report them: an unreachable or timed-out Redis is `UNAVAILABLE` (the client
//! may retry, perhaps elsewhere), anything else is a bug on our side and `INTERNAL`.

use redis::{RedisError, RetryMethod};

/// Why a call to Redis failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis could not be reached, or did not answer within the configured timeout.
    #[error("redis is unavailable: {0}")]
    Unavailable(String),
    /// Redis answered with something Berth did not expect.
    #[error("redis answered unexpectedly: {0}")]
    Unexpected(String),
}

impl From<RedisError> for StoreError {
    fn from(err: RedisError) -> Self {
        match err.retry_method() {
            RetryMethod::NoRetry => StoreError::Unexpected(err.to_string()),
            _ => StoreError::Unavailable(err.to_string()),
        }
    }
}

impl From<StoreError> for tonic::Status {
    fn from(err: StoreError) -> Self {
        match &err {
            StoreError::Unavailable(_) => tonic::Status::unavailable(err.to_string()),
            StoreError::Unexpected(_) => tonic::Status::internal(err.to_string()),
        }
    }
}
