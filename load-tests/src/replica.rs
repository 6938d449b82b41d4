//! One service replica as a separate OS process: the real `berth-health` or `berth-fleet` binary, configured
//! through its `BERTH_*` variables as a deployment configures it. Being a process of its own, its resident memory
//! and CPU time can be read from /proc without the load generator's mixed in.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use berth_store::RedisConfig;
use berth_testkit::TEST_KEY;
use tonic::transport::Endpoint;
use tonic_health::pb::health_check_response::ServingStatus;

use crate::Failure;
use crate::args::flag_name;
use crate::procfs;
use crate::report::Figure;

/// How long the replica has to report SERVING: it starts in well under a second.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// A replica's CPU time so far and resident memory.
pub struct Usage {
    cpu_seconds: f64,
    rss_kib: u64,
}

/// A running replica, killed when dropped (also when the bench panics), so that no replica outlives a run.
pub struct Replica {
    child: Child,
    port: u16,
    binary: &'static str,
    /// Everything it was started with, to start it again as it was.
    redis: RedisConfig,
    settings: Vec<(String, String)>,
}

impl Replica {
    /// Starts `binary` (built beside `berth-bench` by `cargo build --release --bins`) over `redis` with `settings`
    /// (`BERTH_*` variables of its service) and waits until `grpc.health.v1` reports it SERVING. It inherits the
    /// bench's environment, so any other setting of the service (BERTH_HEARTBEAT_FLUSH_MS,
    /// BERTH_REDIS_CONNECTIONS…) can be given to the bench and reaches it; `settings` and what the bench must decide
    /// (addresses, Redis, token key, logs) win.
    pub async fn start(
        binary: &'static str,
        redis: &RedisConfig,
        settings: &[(&str, String)],
    ) -> Result<Replica, Failure> {
        // Bound and released at once: the replica binds it a moment later. Another process could take it in
        // between, which the start-up check below would report.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let settings: Vec<(String, String)> = settings
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect();
        let child = spawn(binary, port, redis, &settings)?;
        let mut replica = Replica {
            child,
            port,
            binary,
            redis: redis.clone(),
            settings,
        };
        replica.wait_until_serving().await?;
        Ok(replica)
    }

    /// SIGKILLs it, as a crashed host or an OOM kill would: no drain, its streams cut.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on its port with its settings, after [`Replica::kill`], and waits until it is SERVING.
    pub async fn restart(&mut self) -> Result<(), Failure> {
        self.kill();
        self.child = spawn(self.binary, self.port, &self.redis, &self.settings)?;
        self.wait_until_serving().await
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its CPU time and resident memory now, to measure a line against.
    pub fn usage(&self) -> Result<Usage, Failure> {
        Ok(Usage {
            cpu_seconds: procfs::cpu_seconds(self.pid())?,
            rss_kib: procfs::rss_kib(self.pid())?,
        })
    }

    /// What it cost since `before` over `calls` calls: its CPU per call and its resident memory before and after,
    /// as figures of `service` per `call`.
    pub fn cost_since(&self, before: &Usage, calls: u64, service: &str, call: &str) -> Result<Vec<Figure>, Failure> {
        let now = self.usage()?;
        let mib = |kib: u64| kib as f64 / 1024.0;
        Ok(vec![
            Figure::new(
                &format!("{service} replica CPU per {call}"),
                (now.cpu_seconds - before.cpu_seconds) * 1e6 / calls.max(1) as f64,
                "µs",
            ),
            Figure::new(
                &format!("{service} replica resident memory, before"),
                mib(before.rss_kib),
                "MiB",
            ),
            Figure::new(
                &format!("{service} replica resident memory, after"),
                mib(now.rss_kib),
                "MiB",
            ),
        ])
    }

    /// Its `http://` endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn wait_until_serving(&mut self) -> Result<(), Failure> {
        let started = Instant::now();
        let endpoint = Endpoint::from_shared(self.endpoint())?;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(format!("{} exited at start-up ({status}); its output is above", self.binary).into());
            }
            if let Ok(channel) = endpoint.connect().await
                && matches!(
                    berth_sdk::probe::serving_status(channel, "").await,
                    Ok(ServingStatus::Serving)
                )
            {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(format!("{} did not report SERVING within {START_TIMEOUT:?}", self.binary).into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `binary` listening on `port`, over `redis`, with `settings`.
fn spawn(
    binary: &'static str,
    port: u16,
    redis: &RedisConfig,
    settings: &[(String, String)],
) -> Result<Child, Failure> {
    let path = beside_the_bench(binary)?;
    let key = std::str::from_utf8(TEST_KEY)?;
    Command::new(&path)
        // Warnings (a failed batch write, a failed sweep) belong in the bench's output, unless `settings` say less.
        .env("BERTH_LOG", "warn")
        .envs(settings.iter().map(|(name, value)| (name, value)))
        .env("BERTH_LISTEN", format!("127.0.0.1:{port}"))
        .env("BERTH_METRICS_LISTEN", "off")
        .env("BERTH_REDIS_URL", redis.urls.join(","))
        .env("BERTH_REDIS_MODE", flag_name(&redis.mode))
        .env("BERTH_REDIS_DURABILITY", flag_name(&redis.durability))
        .env(
            "BERTH_REDIS_DURABILITY_TIMEOUT_MS",
            redis.durability_timeout.as_millis().to_string(),
        )
        // The testkit's key, so that the tokens `berth_testkit::token` signs verify.
        .env("BERTH_AUTH_KEY", key)
        .env_remove("BERTH_AUTH_KEY_FILE")
        .env_remove("BERTH_INSECURE_NO_AUTH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|err| format!("starting {}: {err}", path.display()).into())
}

/// A binary beside the running `berth-bench` (cargo puts every binary of a profile in one directory).
pub fn beside_the_bench(binary: &str) -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()?;
    let path = exe.with_file_name(binary);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is not built; run `cargo build --release --bins` first (`make bench` does)",
            path.display()
        )
        .into())
    }
}
