//! Prometheus metrics: one recorder per process, every metric named `berth_*`, served on its own port so
//! scraping never competes with gRPC traffic.

use std::net::SocketAddr;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

/// Prefix of every Berth metric.
pub const PREFIX: &str = "berth";

/// Seconds buckets for RPC latencies: Berth answers in well under a millisecond on the hot paths, so the
/// buckets start at 50 µs.
const LATENCY_BUCKETS: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder, and serves `/metrics` on `listen` when given. Later calls (several
/// services in one test process) reuse the first recorder.
pub fn install(listen: Option<SocketAddr>) -> Result<PrometheusHandle, BuildError> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let builder = PrometheusBuilder::new().set_buckets(&LATENCY_BUCKETS)?;
    let handle = match listen {
        Some(addr) => {
            let builder = builder.with_http_listener(addr);
            let (recorder, exporter) = builder.build()?;
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder)
                .map_err(BuildError::FailedToSetGlobalRecorder)?;
            tokio::spawn(async move {
                if let Err(err) = exporter.await {
                    tracing::error!(error = ?err, "metrics listener stopped");
                }
            });
            handle
        }
        None => builder.install_recorder()?,
    };
    let handle = HANDLE.get_or_init(|| handle).clone();
    let upkeep = handle.clone();
    // Histograms keep raw samples until upkeep folds them; without it memory grows with traffic.
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// The name of a Berth metric: `berth_<name>`.
pub fn name(name: &str) -> String {
    format!("{PREFIX}_{name}")
}
