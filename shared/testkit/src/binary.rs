//! Berth's own binaries as real processes, for tests that kill one outright (SIGKILL) as a crash or an orchestrator
//! would. The binaries are those `cargo test --workspace --all-targets` builds beside the test executables.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};

use berth_runtime::auth::Role;

/// A running Berth binary, killed when dropped.
pub struct BinaryProcess {
    child: Child,
    /// The gRPC port it listens on.
    pub port: u16,
    /// The file its log lines (warnings and errors) go to, printed when a test fails with it running, so that a
    /// process that died or misbehaved says why in the test's output; none when the test reads them itself.
    log: Option<PathBuf>,
}

impl BinaryProcess {
    /// Starts `name` (e.g. `berth-health`) listening on a free port of 127.0.0.1, with `envs` on top of
    /// `BERTH_LISTEN`, metrics off and logs at warn.
    pub fn spawn(name: &str, envs: &[(&str, String)]) -> BinaryProcess {
        let path = binary(name);
        let port = crate::free_port();
        let log = std::env::temp_dir().join(format!("berth-test-{name}-{}-{port}.log", std::process::id()));
        let log_file = std::fs::File::create(&log).expect("creating a log file in the temporary directory");
        let child = Command::new(&path)
            .env("BERTH_LISTEN", format!("127.0.0.1:{port}"))
            .env("BERTH_METRICS_LISTEN", "off")
            .env("BERTH_LOG", "warn")
            .envs(envs.iter().map(|(key, value)| (*key, value.as_str())))
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|err| panic!("starting {}: {err}", path.display()));
        BinaryProcess {
            child,
            port,
            log: Some(log),
        }
    }

    /// Starts `name` with nothing chosen for it but `envs` — so on its default gRPC port, `port` — with its log
    /// lines on a pipe: for tests of what a service does when left to its defaults.
    pub fn spawn_with_defaults(
        name: &str,
        port: u16,
        envs: &[(&str, String)],
    ) -> (BinaryProcess, BufReader<ChildStderr>) {
        let path = binary(name);
        let mut child = Command::new(&path)
            .envs(envs.iter().map(|(key, value)| (*key, value.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("starting {}: {err}", path.display()));
        let stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
        (BinaryProcess { child, port, log: None }, stderr)
    }

    /// Its `http://` endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Sends it `signal` (e.g. `libc::SIGSTOP`, `libc::SIGCONT`).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child this value owns and has not reaped; no memory is involved.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// Kills it with SIGKILL: no shutdown, no goodbyes.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for BinaryProcess {
    fn drop(&mut self) {
        let exited = self.child.try_wait().ok().flatten();
        self.kill();
        let Some(log) = self.log.take() else { return };
        if std::thread::panicking()
            && let Ok(lines) = std::fs::read_to_string(&log)
        {
            let state = exited.map_or("running".to_owned(), |status| status.to_string());
            let tail: Vec<&str> = lines.lines().rev().take(LOG_TAIL).collect();
            eprintln!(
                "--- the binary on port {} ({state}), its last {} log lines:",
                self.port,
                tail.len()
            );
            tail.iter().rev().for_each(|line| eprintln!("{line}"));
        }
        let _ = std::fs::remove_file(log);
    }
}

/// How many of its last log lines a binary shows when a test fails with it.
const LOG_TAIL: usize = 40;

/// The example game server (`berth-example-game-server`) as a real process on the SDK, killed when dropped.
pub struct ExampleGameServer {
    /// The process, for a test that waits for it to exit.
    pub child: Child,
    /// The TCP port players join on.
    pub port: u16,
}

impl ExampleGameServer {
    /// Starts game server `id` of `fleet`, on a free port, speaking to the health replicas at `endpoints`
    /// (comma-separated) with a token scoped to it, as a provisioner would launch it.
    pub fn spawn(endpoints: &str, fleet: &str, id: &str) -> ExampleGameServer {
        let port = crate::free_port();
        let child = Command::new(binary("berth-example-game-server"))
            .env("BERTH_SDK_ENDPOINT", endpoints)
            .env("BERTH_SDK_TOKEN", crate::token(Role::GameServer, Some((fleet, id))))
            .env("BERTH_FLEET_ID", fleet)
            .env("BERTH_GAME_SERVER_ID", id)
            .env("BERTH_INSTANCE_ID", "i-1")
            .env("BERTH_LOCATION", "local")
            .env("BERTH_SDK_PORT", port.to_string())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the example game server is built with the tests");
        ExampleGameServer { child, port }
    }
}

impl Drop for ExampleGameServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
