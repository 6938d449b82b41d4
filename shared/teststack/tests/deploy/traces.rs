//! One placement is one trace. The placement, session and health services run as their own processes exporting to
//! an OTLP/gRPC receiver served here; a matchmaker's calls carry its W3C `traceparent`, and the test follows the
//! trace through each hop: the StartGameSessionPlacement call, the worker that took the request from the queue's
//! Redis stream, the health replica that pushed the session to its game server after an announcement through Redis
//! pub/sub, and the matchmaker's next call, to the session service.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::session::v1 as spb;
use berth_proto::session::v1::player_session_service_client::PlayerSessionServiceClient;
use berth_runtime::auth::Role;
use berth_store::Store;
use berth_testkit::{BinaryProcess, ExampleGameServer, TEST_KEY, TestRedis, anywhere_fleet, token, wait_for_health};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use tonic_health::pb::health_check_response::ServingStatus;

const FLEET: &str = "traced";
/// The matchmaker's trace, and the span its calls are made in.
const TRACE_ID: &str = "5b8efff798038103d269b633813fc60c";
const MATCHMAKER_SPAN: &str = "eee19b7ec3c1b174";

/// A span as exported: by which service, in which trace, under which parent.
#[derive(Clone, Debug)]
struct Exported {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
}

/// An OTLP/gRPC trace receiver keeping every span it is sent.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Exported>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|resource| &resource.attributes)
                .find(|attribute| attribute.key == "service.name")
                .and_then(|attribute| match attribute.value.as_ref()?.value.as_ref()? {
                    Value::StringValue(name) => Some(name.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for span in resource_spans.scope_spans.into_iter().flat_map(|scope| scope.spans) {
                spans.push(Exported {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Serves a receiver on a free port; its endpoint and what it receives.
async fn receiver() -> (String, Receiver) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let receiver = Receiver::default();
    let service = TraceServiceServer::new(receiver.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (endpoint, receiver)
}

/// A request made in the matchmaker's span.
fn traced<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{TRACE_ID}-{MATCHMAKER_SPAN}-01").parse().unwrap(),
    );
    request
}

/// `service` as a process over `redis`, exporting its spans to `otlp` at once rather than every 5 s.
fn service(name: &str, redis: &TestRedis, otlp: &str) -> BinaryProcess {
    let envs = [
        ("BERTH_REDIS_URL", redis.config().urls.join(",")),
        ("BERTH_AUTH_KEY", String::from_utf8(TEST_KEY.to_vec()).unwrap()),
        ("BERTH_OTLP_ENDPOINT", otlp.to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
        ("BERTH_PLACEMENT_RETRY_MS", "100".to_owned()),
    ];
    BinaryProcess::spawn(name, &envs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_placement_is_one_trace_across_placement_health_and_session() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    let (otlp, received) = receiver().await;
    let placement = service("berth-placement", &redis, &otlp);
    let session = service("berth-session", &redis, &otlp);
    let health = service("berth-health", &redis, &otlp);
    for process in [&placement, &session, &health] {
        wait_for_health(&process.endpoint(), "", ServingStatus::Serving).await;
    }
    anywhere_fleet(&store, FLEET, &["local"]).await;
    let _server = ExampleGameServer::spawn(&health.endpoint(), FLEET, "gs-1");
    let operator = berth_sdk::connect(&placement.endpoint(), &token(Role::Operator, None))
        .await
        .unwrap();
    let queue = pb::CreateQueueRequest {
        name: FLEET.into(),
        destinations: vec![pb::QueueDestination { fleet_id: FLEET.into() }],
        timeout_seconds: 60,
        ..Default::default()
    };
    QueueServiceClient::new(operator).create_queue(queue).await.unwrap();

    let client = berth_sdk::connect(&placement.endpoint(), &token(Role::Client, None))
        .await
        .unwrap();
    let mut placements = PlacementServiceClient::new(client);
    let start = pb::StartGameSessionPlacementRequest {
        placement_id: "traced-1".into(),
        queue_name: FLEET.into(),
        maximum_player_session_count: 4,
        ..Default::default()
    };
    placements.start_game_session_placement(traced(start)).await.unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    let fulfilled = loop {
        let describe = pb::DescribeGameSessionPlacementRequest {
            placement_id: "traced-1".into(),
        };
        let found = placements
            .describe_game_session_placement(describe)
            .await
            .unwrap()
            .into_inner()
            .placement
            .unwrap();
        if found.status() == pb::PlacementStatus::Fulfilled {
            break found;
        }
        assert_eq!(found.status(), pb::PlacementStatus::Pending, "{found:?}");
        assert!(tokio::time::Instant::now() < until, "not fulfilled in 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let players = berth_sdk::connect(&session.endpoint(), &token(Role::Client, None))
        .await
        .unwrap();
    let join = spb::CreatePlayerSessionRequest {
        game_session_id: fulfilled.game_session_id.clone(),
        player_id: "late-joiner".into(),
        ..Default::default()
    };
    PlayerSessionServiceClient::new(players)
        .create_player_session(traced(join))
        .await
        .unwrap();

    // Every hop, each a child of the one before it.
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let spans: Vec<Exported> = received
            .spans
            .lock()
            .unwrap()
            .iter()
            .filter(|span| span.trace_id == TRACE_ID)
            .cloned()
            .collect();
        let find = |service: &str, name: &str, parent: &str| {
            spans
                .iter()
                .find(|span| span.service == service && span.name == name && span.parent_span_id == parent)
                .map(|span| span.span_id.clone())
        };
        let started = find(
            "berth-placement",
            "berth.placement.v1.PlacementService/StartGameSessionPlacement",
            MATCHMAKER_SPAN,
        );
        let worked = started
            .as_deref()
            .and_then(|started| find("berth-placement", "placement.work", started));
        let pushed = worked
            .as_deref()
            .and_then(|worked| find("berth-health", "health.push", worked));
        let joined = find(
            "berth-session",
            "berth.session.v1.PlayerSessionService/CreatePlayerSession",
            MATCHMAKER_SPAN,
        );
        if pushed.is_some() && joined.is_some() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the trace is incomplete after 30 s: StartGameSessionPlacement {started:?}, its worker {worked:?}, the \
             push to the server {pushed:?}, CreatePlayerSession {joined:?}; spans of the trace: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
