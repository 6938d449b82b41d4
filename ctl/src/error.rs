//! What can go wrong for `berthctl`, each as one line an operator can act on and an exit code a script can test:
//! never a stack trace.

use std::process::ExitCode;

/// A failed command.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// Berth answered with a refusal: its gRPC code and message (which names the field and the limit).
    #[error("{service} refused ({code:?}): {message}")]
    Refused {
        service: &'static str,
        code: tonic::Code,
        message: String,
    },
    /// A service did not answer at its address.
    #[error("the {service} service did not answer at {address}: {why}")]
    Unreachable {
        service: &'static str,
        address: String,
        why: String,
    },
    /// The configuration (flags, environment, config file) does not say how to reach Berth or is malformed.
    #[error("{0}")]
    Config(String),
    /// A manifest is malformed or breaks a limit: its file, line and field.
    #[error("{0}")]
    Manifest(String),
    /// An apply stopped part way: what was made, where it failed, and that the rest was not made.
    #[error("{0}")]
    Partial(String),
    /// A placement ended without being fulfilled: its status and why.
    #[error("placement {id} ended {status}: {reason}")]
    NotFulfilled { id: String, status: String, reason: String },
}

impl CtlError {
    /// The exit code: 1 refused (or an apply stopped part way), 2 bad usage, configuration or manifest (as clap's
    /// own), 3 unreachable, 4 not fulfilled.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CtlError::Refused { .. } | CtlError::Partial(_) => 1,
            CtlError::Config(_) | CtlError::Manifest(_) => 2,
            CtlError::Unreachable { .. } => 3,
            CtlError::NotFulfilled { .. } => 4,
        })
    }

    /// A refusal from `service`, or its being out of reach when the call never got an answer.
    pub fn from_status(service: &'static str, address: &str, status: tonic::Status) -> CtlError {
        // A call that never reached the service carries the transport's error as its source; Berth's own
        // UNAVAILABLE (Redis out of reach) comes without one.
        let never_reached = std::error::Error::source(&status).is_some();
        match status.code() {
            tonic::Code::Unavailable | tonic::Code::Unknown if never_reached => CtlError::Unreachable {
                service,
                address: address.to_owned(),
                why: status.message().to_owned(),
            },
            code => CtlError::Refused {
                service,
                code,
                message: status.message().to_owned(),
            },
        }
    }
}
