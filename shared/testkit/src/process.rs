//! What every Berth process must serve, checked the way an operator would: `grpc.health.v1` SERVING for the
//! process and for each of its services, and reflection listing exactly its own services.

use berth_sdk::probe;
use tonic_health::pb::health_check_response::ServingStatus;

/// Waits up to 10 s for the health of `service` at `endpoint` to become `wanted`, as a load balancer would (a
/// process still starting may not even accept connections yet).
pub async fn wait_for_health(endpoint: &str, service: &str, wanted: ServingStatus) {
    if let Err(last) = health_within(endpoint, service, wanted, std::time::Duration::from_secs(10)).await {
        panic!("health of {service:?} never became {wanted:?}; last answer {last}");
    }
}

/// Whether the health of `service` at `endpoint` becomes `wanted` within `within` (a container may take a while to
/// start); the last answer when it does not.
pub async fn health_within(
    endpoint: &str,
    service: &str,
    wanted: ServingStatus,
    within: std::time::Duration,
) -> Result<(), String> {
    let until = tokio::time::Instant::now() + within;
    let endpoint = tonic::transport::Endpoint::from_shared(endpoint.to_owned()).expect("valid endpoint");
    let mut last = None;
    while tokio::time::Instant::now() < until {
        if let Ok(channel) = endpoint.connect().await {
            let status = probe::serving_status(channel, service).await;
            if matches!(&status, Ok(status) if *status == wanted) {
                return Ok(());
            }
            last = Some(status);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Err(format!("{last:?}"))
}

async fn channel(endpoint: &str) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(endpoint.to_owned())
        .expect("valid endpoint")
        .connect()
        .await
        .expect("service reachable")
}

/// Asserts that the process at `endpoint` is (or within 10 s becomes) SERVING and lists by reflection exactly `own` (plus health and
/// reflection themselves).
pub async fn assert_serves(endpoint: &str, own: &[&str]) {
    for service in std::iter::once("").chain(own.iter().copied()) {
        wait_for_health(endpoint, service, ServingStatus::Serving).await;
    }
    let mut listed = probe::list_services(channel(endpoint).await)
        .await
        .expect("reflection answers");
    listed.retain(|name| !name.starts_with("grpc."));
    listed.sort();
    let mut expected: Vec<String> = own.iter().map(|name| (*name).to_owned()).collect();
    expected.sort();
    assert_eq!(listed, expected, "services listed by reflection");
}
