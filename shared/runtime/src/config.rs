//! Configuration shared by every service: clap flags, each also a `BERTH_*` environment variable, so the same
//! binary is configured by command line locally and by environment in containers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use berth_store::{Durability, RedisConfig, RedisMode};
use clap::{Args, ValueEnum};

/// Flags every Berth service takes.
#[derive(Args, Clone, Debug)]
pub struct CommonArgs {
    /// Redis URL(s), comma-separated: one for a single node, seed nodes for a cluster. `rediss://` for TLS;
    /// ACL credentials as `redis://user:password@host:port`.
    #[arg(
        long,
        env = "BERTH_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        value_delimiter = ','
    )]
    pub redis_url: Vec<String>,
    /// Whether Redis is a single node or a cluster.
    #[arg(long, env = "BERTH_REDIS_MODE", value_enum, default_value = "single")]
    pub redis_mode: RedisMode,
    /// Multiplexed Redis connections to keep open.
    #[arg(long, env = "BERTH_REDIS_CONNECTIONS", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub redis_connections: u16,
    /// How long one Redis command may take before the request fails with UNAVAILABLE, in ms.
    #[arg(long, env = "BERTH_REDIS_TIMEOUT_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub redis_timeout_ms: u64,
    /// When a write a caller is told of counts as made: `none`, once its primary has made it (a failover can lose
    /// the last such writes); `replica`, once a replica has it too (WAIT 1), else the call answers UNAVAILABLE.
    #[arg(long, env = "BERTH_REDIS_DURABILITY", value_enum, default_value = "none")]
    pub redis_durability: Durability,
    /// How long a replica has to confirm a write under `replica` durability, in ms.
    #[arg(long, env = "BERTH_REDIS_DURABILITY_TIMEOUT_MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    pub redis_durability_timeout_ms: u64,
    /// How often Redis is checked for the gRPC health status, in ms.
    #[arg(long, env = "BERTH_HEALTH_PROBE_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub health_probe_ms: u64,
    /// Log format.
    #[arg(long, env = "BERTH_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log filter, in tracing-subscriber's EnvFilter syntax (e.g. `info,berth_placement=debug`).
    #[arg(long, env = "BERTH_LOG", default_value = "info")]
    pub log: String,
    /// OTLP/gRPC endpoint to send traces to (e.g. `http://127.0.0.1:4317`). No traces are exported when unset.
    #[arg(long, env = "BERTH_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// File holding the secret that signs and checks bearer tokens (at least 32 bytes).
    #[arg(long, env = "BERTH_AUTH_KEY_FILE")]
    pub auth_key_file: Option<PathBuf>,
    /// The token-signing secret itself (at least 32 bytes); prefer the file in production.
    #[arg(long, env = "BERTH_AUTH_KEY", hide_env_values = true)]
    pub auth_key: Option<String>,
    /// Accept every call without a token, as an operator. For local development only: never in production.
    #[arg(long, env = "BERTH_INSECURE_NO_AUTH", default_value_t = false)]
    pub insecure_no_auth: bool,
    /// PEM certificate chain to serve TLS with. Plain HTTP/2 when unset.
    #[arg(long, env = "BERTH_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of the TLS certificate.
    #[arg(long, env = "BERTH_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA bundle: when set, clients must present a certificate it signed (mTLS).
    #[arg(long, env = "BERTH_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// How long in-flight calls may run on after SIGTERM/SIGINT before the service exits anyway, in seconds.
    #[arg(long, env = "BERTH_SHUTDOWN_GRACE_SECONDS", default_value_t = 30)]
    pub shutdown_grace_seconds: u64,
    /// Threads that run the service's work; unset, one per CPU core it may use (a container's CPU limit counts). A
    /// replica that shares its cores with other busy work spends less CPU per call on fewer: less work moves between
    /// threads.
    #[arg(long, env = "BERTH_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl CommonArgs {
    /// The Redis settings these flags describe.
    pub fn redis(&self) -> RedisConfig {
        RedisConfig {
            urls: self.redis_url.clone(),
            mode: self.redis_mode,
            connections: usize::from(self.redis_connections),
            connect_timeout: Duration::from_millis(self.redis_timeout_ms),
            response_timeout: Duration::from_millis(self.redis_timeout_ms),
            durability: self.redis_durability,
            durability_timeout: Duration::from_millis(self.redis_durability_timeout_ms),
        }
    }
}

/// Where a service listens. Each service flattens one of these into its flags; unset addresses take the
/// service's own default ports (see the README), on all interfaces — but gRPC only on loopback in insecure mode.
#[derive(Args, Clone, Debug)]
pub struct ListenArgs {
    /// Address for gRPC [default: 0.0.0.0 and the service's port; 127.0.0.1 with BERTH_INSECURE_NO_AUTH].
    #[arg(long, env = "BERTH_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Address for Prometheus `/metrics`, or `off` [default: 0.0.0.0 and the service's metrics port].
    #[arg(long, env = "BERTH_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
}

impl ListenArgs {
    /// The gRPC address, or the service's default: every interface, or only loopback when `insecure` (every
    /// caller is an operator then, so nobody else on the network may be one unless the address is asked for).
    pub fn grpc(&self, default_port: u16, insecure: bool) -> SocketAddr {
        let any = if insecure { [127, 0, 0, 1] } else { [0, 0, 0, 0] };
        self.listen.unwrap_or_else(|| SocketAddr::from((any, default_port)))
    }

    /// The metrics address, the service's default, or `None` when turned off.
    pub fn metrics(&self, default_port: u16) -> Result<Option<SocketAddr>, String> {
        match self.metrics_listen.as_deref() {
            None => Ok(Some(SocketAddr::from(([0, 0, 0, 0], default_port)))),
            Some("off") => Ok(None),
            Some(addr) => addr
                .parse()
                .map(Some)
                .map_err(|err| format!("BERTH_METRICS_LISTEN {addr:?} is not an address or 'off': {err}")),
        }
    }
}
