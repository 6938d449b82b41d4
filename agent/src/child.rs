//! The game-server process the agent wraps: started with the SDK's ports in its environment, told to end with
//! SIGTERM, and waited for, so that its exit reaches Berth at once rather than through missed heartbeats.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, Command};

/// Starts `command` (program, then arguments) with AGONES_SDK_GRPC_PORT and AGONES_SDK_HTTP_PORT set to the SDK's
/// ports, inheriting the rest of the agent's environment and its standard streams.
pub fn spawn(command: &[String], grpc_port: u16, http_port: u16) -> std::io::Result<Child> {
    let (program, arguments) = command
        .split_first()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no game server to run"))?;
    Command::new(program)
        .args(arguments)
        .env("AGONES_SDK_GRPC_PORT", grpc_port.to_string())
        .env("AGONES_SDK_HTTP_PORT", http_port.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
}

/// Sends `signal` to the child, if it still runs.
pub fn signal(child: &Child, signal: i32) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) has no memory effects; a pid that already exited is answered ESRCH, which is ignored.
        unsafe { libc::kill(pid as i32, signal) };
    }
}

/// How the child ended, in words, and the code the agent exits with: the child's own, or 128 + the signal that
/// killed it, as a shell reports it.
pub fn outcome(status: ExitStatus) -> (String, u8) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (format!("exit code {code}"), code as u8),
        (None, Some(signal)) => (
            format!("killed by signal {signal}"),
            128_u8.saturating_add(signal as u8),
        ),
        (None, None) => ("ended".to_owned(), 1),
    }
}
