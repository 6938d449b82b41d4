//! Prometheus metrics: one recorder per process, every metric named `berth_*`, served on its own port so
//! scraping never competes with gRPC traffic.

use std::net::SocketAddr;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};

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
            metrics::set_global_recorder(recorder).map_err(BuildError::FailedToSetGlobalRecorder)?;
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
    describe();
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

/// Requests by method (one the contracts define, else `unknown`) and status code.
pub(crate) const GRPC_REQUESTS: &str = "berth_grpc_requests_total";
/// Request latency by method.
pub(crate) const GRPC_REQUEST_DURATION: &str = "berth_grpc_request_duration_seconds";
/// Background work for one fleet that failed, by task.
const BACKGROUND_FLEET_FAILURES: &str = "berth_background_fleet_failures_total";

/// Whether Redis answered the last health probe (1) or not (0).
const REDIS_UP: &str = "berth_redis_up";
/// Whether Redis took writes at the last probe (1), or was at its maxmemory or out of reach (0).
const REDIS_WRITABLE: &str = "berth_redis_writable";

/// The help text of the metrics the runtime records itself.
fn describe() {
    metrics::describe_gauge!(
        REDIS_UP,
        "1 while Redis answers this replica's health probe, 0 while it does not"
    );
    metrics::describe_gauge!(
        REDIS_WRITABLE,
        "1 while Redis takes this replica's writes, 0 while it is at its maxmemory or out of reach"
    );
    metrics::describe_counter!(
        GRPC_REQUESTS,
        "gRPC requests, by method (one the contracts define, else unknown) and status code"
    );
    metrics::describe_histogram!(
        GRPC_REQUEST_DURATION,
        metrics::Unit::Seconds,
        "gRPC request latency, by method"
    );
    metrics::describe_counter!(
        BACKGROUND_FLEET_FAILURES,
        "Background work (sweeps, monitors) that failed for one fleet, by task; the other fleets were served"
    );
}

/// Counts background work that failed for one fleet.
pub(crate) fn background_fleet_failure(task: &'static str) {
    metrics::counter!(BACKGROUND_FLEET_FAILURES, "task" => task).increment(1);
}

/// What the last health probe found of Redis.
pub(crate) fn redis_probed(up: bool, writable: bool) {
    metrics::gauge!(REDIS_UP).set(if up { 1.0 } else { 0.0 });
    metrics::gauge!(REDIS_WRITABLE).set(if writable { 1.0 } else { 0.0 });
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn scrape(addr: SocketAddr) -> Option<String> {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await.ok()?;
        let mut body = String::new();
        stream.read_to_string(&mut body).await.ok()?;
        Some(body)
    }

    #[tokio::test]
    async fn serves_metrics_on_its_own_port() {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        super::install(Some(addr)).unwrap();
        metrics::counter!("berth_test_scrapes_total").increment(3);
        for _ in 0..100 {
            if let Some(body) = scrape(addr).await
                && body.contains("berth_test_scrapes_total 3")
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("/metrics never showed the counter");
    }
}
