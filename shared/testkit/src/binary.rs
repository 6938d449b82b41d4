//! Berth's own binaries as real processes, for tests that kill one outright (SIGKILL) as a crash or an orchestrator
//! would. The binaries are those `cargo test --workspace --all-targets` builds beside the test executables.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A running Berth binary, killed when dropped.
pub struct BinaryProcess {
    child: Child,
    /// The gRPC port it listens on.
    pub port: u16,
}

impl BinaryProcess {
    /// Starts `name` (e.g. `berth-health`) listening on a free port of 127.0.0.1, with `envs` on top of
    /// `BERTH_LISTEN`, metrics off and logs at warn.
    pub fn spawn(name: &str, envs: &[(&str, String)]) -> BinaryProcess {
        let path = binary(name);
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(&path)
            .env("BERTH_LISTEN", format!("127.0.0.1:{port}"))
            .env("BERTH_METRICS_LISTEN", "off")
            .env("BERTH_LOG", "warn")
            .envs(envs.iter().map(|(key, value)| (*key, value.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("starting {}: {err}", path.display()));
        BinaryProcess { child, port }
    }

    /// Its `http://` endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kills it with SIGKILL: no shutdown, no goodbyes.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for BinaryProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Where cargo put the workspace binary `name` (of any package): beside the directory of the running test
/// executable.
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows where it runs");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("tests run from target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run the tests with `cargo test --workspace --all-targets` (make test)",
        path.display()
    );
    path
}
