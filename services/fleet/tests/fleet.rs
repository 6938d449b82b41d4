//! The fleet service: fleets as records (`fleet/records.rs`), their events watched (`fleet/watch.rs`), their
//! instances launched as processes (`fleet/provisioning.rs`), as containers (`fleet/docker.rs`) and through an
//! operator's hosting API (`fleet/http.rs`), and autoscaled (`fleet/scaling.rs`); the process serves health and reflection, and its RPCs are open to
//! operators only. What every service's edge does (insecure mode on loopback, metric labels) is tested here, on the
//! binary.

mod fleet {
    mod docker;
    mod http;
    mod provisioning;
    mod records;
    mod scaling;
    mod tally;
    mod watch;
}

use std::time::Duration;

use berth_proto::fleet::v1::ListFleetsRequest;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_runtime::auth::Role;
use berth_store::Store;
use berth_testkit::{BinaryProcess, TestRedis, assert_serves, free_port, spawn_service, token, wait_for_health};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_health_reflection_and_keeps_its_rpcs_to_operators() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    let service = spawn_service(
        berth_fleet::service(store.clone(), &berth_fleet::FleetArgs::default(), None),
        store,
    )
    .await;
    assert_serves(
        &service.endpoint(),
        &["berth.fleet.v1.FleetService", "berth.fleet.v1.ScalingService"],
    )
    .await;

    let as_client = berth_sdk::connect(&service.endpoint(), &token(Role::Client, None)).await;
    let err = FleetServiceClient::new(as_client.unwrap())
        .list_fleets(ListFleetsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
}

/// What a Prometheus scrape of `/metrics` on `port` returns.
async fn scrape(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await.unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    body
}

/// Whether `/proc/net/tcp{,6}` lists a socket listening on `port` at the address given in the kernel's hex form.
fn listening(port: u16, address: &str, table: &str) -> bool {
    let wanted = format!("{address}:{port:04X}");
    std::fs::read_to_string(table).unwrap_or_default().lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&wanted.as_str()) && fields.get(3) == Some(&"0A")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_mode_listens_on_loopback_only_and_says_where() {
    use std::io::BufRead;
    let redis = TestRedis::single();
    let port = berth_fleet::GRPC_PORT;
    assert!(
        std::net::TcpListener::bind(("0.0.0.0", port)).is_ok(),
        "port {port} is taken: stop whatever runs Berth here (make run) before the tests"
    );
    let envs = [
        ("BERTH_INSECURE_NO_AUTH", "true".to_owned()),
        ("BERTH_REDIS_URL", redis.config().urls[0].clone()),
        ("BERTH_METRICS_LISTEN", "off".to_owned()),
        ("BERTH_LOG", "warn".to_owned()),
    ];
    let (fleet, mut logs) = BinaryProcess::spawn_with_defaults("berth-fleet", port, &envs);
    let warning = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        while logs.read_line(&mut line).unwrap() > 0 {
            if line.contains("BERTH_INSECURE_NO_AUTH") {
                return line;
            }
            line.clear();
        }
        panic!("berth-fleet ended without the insecure-mode warning");
    });
    let warning = tokio::time::timeout(Duration::from_secs(30), warning)
        .await
        .expect("the warning in time")
        .unwrap();
    assert!(warning.contains(&format!("127.0.0.1:{port}")), "{warning}");
    wait_for_health(&fleet.endpoint(), "", ServingStatus::Serving).await;
    assert!(
        listening(port, "0100007F", "/proc/net/tcp"),
        "listens on 127.0.0.1:{port}"
    );
    assert!(!listening(port, "00000000", "/proc/net/tcp"), "not on 0.0.0.0:{port}");
    assert!(
        !listening(port, &"0".repeat(32), "/proc/net/tcp6"),
        "not on [::]:{port}"
    );
}

/// The berth-fleet binary over `redis` without auth, reconciling every 100 ms, serving: a channel to it, its metrics
/// port, and the process.
async fn metered_fleet(redis: &TestRedis) -> (tonic::transport::Channel, u16, BinaryProcess) {
    let metrics_port = free_port();
    let envs = [
        ("BERTH_INSECURE_NO_AUTH", "true".to_owned()),
        ("BERTH_REDIS_URL", redis.config().urls[0].clone()),
        ("BERTH_METRICS_LISTEN", format!("127.0.0.1:{metrics_port}")),
        ("BERTH_RECONCILE_MS", "100".to_owned()),
    ];
    let fleet = BinaryProcess::spawn("berth-fleet", &envs);
    wait_for_health(&fleet.endpoint(), "", ServingStatus::Serving).await;
    let channel = tonic::transport::Endpoint::from_shared(fleet.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap();
    (channel, metrics_port, fleet)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_the_contracts_do_not_define_mints_no_metric_label() {
    let redis = TestRedis::single();
    let (channel, metrics_port, _fleet) = metered_fleet(&redis).await;
    // A method the contract does not define is UNIMPLEMENTED and counted under `unknown`, not under a label of its
    // own.
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let invented = http::uri::PathAndQuery::from_static("/berth.fleet.v1.FleetService/Invented4711");
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    let err = grpc.unary(tonic::Request::new(()), invented, codec).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    let metrics = scrape(metrics_port).await;
    assert!(!metrics.contains("Invented4711"), "{metrics}");
    assert!(metrics.contains("method=\"unknown\""), "{metrics}");
}

/// The fleet binary's own metrics, scraped while it reconciles a process fleet: launches by outcome, instances by
/// state, the location's status, the leases it holds and took, how long its passes take, and Redis as its health
/// probe finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciling_a_fleet_shows_in_its_metrics() {
    let redis = TestRedis::single();
    let fleet_id = format!("metrics-{:x}", std::process::id());
    let _reaper = berth_testkit::Reaper(vec![fleet_id.clone()]);
    let (channel, metrics_port, _fleet) = metered_fleet(&redis).await;
    let launch = berth_proto::fleet::v1::ServerLaunchConfiguration {
        launch_path: "/bin/sleep".into(),
        parameters: "60".into(),
        ..Default::default()
    };
    let request = berth_teststack::process_fleet(&fleet_id, launch, 1);
    FleetServiceClient::new(channel).create_fleet(request).await.unwrap();

    let wanted = [
        format!("berth_instance_launches_total{{fleet=\"{fleet_id}\",location=\"local\",outcome=\"launched\"}} 1"),
        format!("berth_instances{{fleet=\"{fleet_id}\",location=\"local\",state=\"RUNNING\"}} 1"),
        format!("berth_location_status{{fleet=\"{fleet_id}\",location=\"local\",status=\"DEPLOYING\"}} 1"),
        "berth_location_leases_held 1".to_owned(),
        "berth_redis_up 1".to_owned(),
        "berth_redis_writable 1".to_owned(),
        "berth_location_leases_taken_total 1".to_owned(),
        "berth_reconcile_pass_seconds_count".to_owned(),
        "# HELP berth_instance_launches_total".to_owned(),
    ];
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = scrape(metrics_port).await;
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|series| !metrics.contains(series.as_str()))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{missing:?} not in the scrape:\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
