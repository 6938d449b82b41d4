//! The SDK against a scripted SdkService on a real gRPC connection: registration, reply correlation, resuming a
//! broken stream with the unanswered requests re-sent under their ids, losing the server, and ending. The
//! service's own tests cover the real health service; these pin down the client's half of the conversation.

use std::time::Duration;

use berth_proto::health::v1::attach_request::Kind as RequestKind;
use berth_proto::health::v1::attach_response::Kind as ResponseKind;
use berth_proto::health::v1::sdk_service_server::{SdkService, SdkServiceServer};
use berth_proto::health::v1::{
    AttachRequest, AttachResponse, DesiredState, GameSessionAssignment, ProcessRegistered, Reply, reply,
};
use berth_proto::session::v1::GameSession;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Code, Request, Response, Status, Streaming};

use super::{Event, GameServer, GameServerConfig, SdkError};

/// One attach call, handed to the test to script.
struct Call {
    requests: Streaming<AttachRequest>,
    responses: mpsc::Sender<Result<AttachResponse, Status>>,
}

struct Scripted {
    calls: mpsc::UnboundedSender<Call>,
}

#[tonic::async_trait]
impl SdkService for Scripted {
    type AttachStream = ReceiverStream<Result<AttachResponse, Status>>;

    async fn attach(&self, request: Request<Streaming<AttachRequest>>) -> Result<Response<Self::AttachStream>, Status> {
        let (responses, stream) = mpsc::channel(16);
        let _ = self.calls.send(Call {
            requests: request.into_inner(),
            responses,
        });
        Ok(Response::new(ReceiverStream::new(stream)))
    }
}

async fn serve() -> (String, mpsc::UnboundedReceiver<Call>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (calls, received) = mpsc::unbounded_channel();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(SdkServiceServer::new(Scripted { calls }))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (endpoint, received)
}

fn config(endpoint: String) -> GameServerConfig {
    GameServerConfig {
        sdk_endpoint: endpoint,
        token: "token".into(),
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
        ..GameServerConfig::default()
    }
}

impl Call {
    /// The next request that is not a heartbeat.
    async fn request(&mut self) -> (String, RequestKind) {
        loop {
            let request = tokio::time::timeout(Duration::from_secs(5), self.requests.message())
                .await
                .expect("a request in time")
                .expect("the stream is healthy")
                .expect("the stream is open");
            match request.kind.expect("a kind") {
                RequestKind::Heartbeat(_) => continue,
                kind => return (request.request_id, kind),
            }
        }
    }

    async fn send(&self, request_id: &str, kind: ResponseKind) {
        let response = AttachResponse {
            request_id: request_id.to_owned(),
            kind: Some(kind),
        };
        self.responses.send(Ok(response)).await.unwrap();
    }

    /// Reads register_process and answers registered as `registration_id`; returns what was sent.
    async fn register(&mut self, registration_id: &str, desired_state: Option<DesiredState>) -> RequestKind {
        let (request_id, kind) = self.request().await;
        assert!(
            matches!(kind, RequestKind::RegisterProcess(_)),
            "first message is register_process"
        );
        let registered = ProcessRegistered {
            game_server_id: "gs-1".into(),
            registration_id: registration_id.into(),
            heartbeat_interval_ms: 1000,
            desired_state,
            ..ProcessRegistered::default()
        };
        self.send(&request_id, ResponseKind::Registered(registered)).await;
        kind
    }
}

async fn next_call(calls: &mut mpsc::UnboundedReceiver<Call>) -> Call {
    tokio::time::timeout(Duration::from_secs(10), calls.recv())
        .await
        .expect("an attach call in time")
        .expect("the service runs")
}

fn ok(result: Option<reply::Result>) -> ResponseKind {
    ResponseKind::Reply(Reply {
        result,
        ..Reply::default()
    })
}

fn game_session(id: &str) -> GameSession {
    GameSession {
        game_session_id: id.into(),
        ..GameSession::default()
    }
}

#[tokio::test]
async fn registers_surfaces_the_desired_state_and_correlates_replies() {
    let (endpoint, mut calls) = serve().await;
    let script = tokio::spawn(async move {
        let mut call = next_call(&mut calls).await;
        let state = DesiredState {
            version: 3,
            game_sessions: vec![GameSessionAssignment {
                game_session: Some(game_session("A")),
                player_sessions: Vec::new(),
            }],
            ..DesiredState::default()
        };
        call.register("reg-1", Some(state)).await;
        let (ready, kind) = call.request().await;
        assert!(matches!(kind, RequestKind::Ready(_)));
        call.send(&ready, ok(None)).await;
        let (activate, _) = call.request().await;
        let refusal = Reply {
            code: Code::NotFound as i32,
            message: "no such session".into(),
            ..Reply::default()
        };
        call.send(&activate, ResponseKind::Reply(refusal)).await;
        call
    });

    let (server, mut events) = GameServer::connect(config(endpoint)).await.unwrap();
    assert_eq!(server.registration_id(), "reg-1");
    match events.recv().await {
        Some(Event::StartGameSession { game_session, .. }) => assert_eq!(game_session.game_session_id, "A"),
        other => panic!("{other:?}"),
    }
    server.ready().await.unwrap();
    match server.activate_game_session("A").await {
        Err(SdkError::Refused { code, message, .. }) => {
            assert_eq!(code, Code::NotFound);
            assert_eq!(message, "no such session");
        }
        other => panic!("{other:?}"),
    }
    script.await.unwrap();
}

#[tokio::test]
async fn resumes_a_broken_stream_and_resends_the_unanswered_request() {
    let (endpoint, mut calls) = serve().await;
    let script = tokio::spawn(async move {
        let mut first = next_call(&mut calls).await;
        match first.register("reg-1", None).await {
            RequestKind::RegisterProcess(register) => assert_eq!(register.attempt, 1),
            other => panic!("{other:?}"),
        }
        let (end, kind) = first.request().await;
        assert!(matches!(kind, RequestKind::EndGameSession(_)));
        first
            .responses
            .send(Err(Status::unavailable("replica shutting down")))
            .await
            .unwrap();

        // The first try to resume fails before it is answered; the next counts it.
        let mut failed = next_call(&mut calls).await;
        match failed.request().await.1 {
            RequestKind::RegisterProcess(register) => assert_eq!(register.attempt, 2),
            other => panic!("{other:?}"),
        }
        failed
            .responses
            .send(Err(Status::unavailable("Redis did not answer in time")))
            .await
            .unwrap();

        let mut resumed = next_call(&mut calls).await;
        match resumed.register("reg-1", None).await {
            RequestKind::RegisterProcess(register) => {
                assert_eq!(register.resume_registration_id, "reg-1");
                assert_eq!(register.attempt, 3, "every stream is a try of its own");
            }
            other => panic!("{other:?}"),
        }
        let (resent, kind) = resumed.request().await;
        assert_eq!(resent, end, "re-sent under the same id");
        assert!(matches!(kind, RequestKind::EndGameSession(_)));
        let ended = reply::Result::GameSession(game_session("A"));
        resumed.send(&resent, ok(Some(ended))).await;
        (failed, resumed)
    });

    let (server, _events) = GameServer::connect(config(endpoint)).await.unwrap();
    let ended = server.end_game_session("A").await.unwrap();
    assert_eq!(ended.game_session_id, "A");
    script.await.unwrap();
}

#[tokio::test]
async fn a_refused_resume_loses_the_server_and_fails_what_was_in_flight() {
    let (endpoint, mut calls) = serve().await;
    let script = tokio::spawn(async move {
        let mut first = next_call(&mut calls).await;
        first.register("reg-1", None).await;
        let _ = first.request().await;
        drop(first);
        let mut second = next_call(&mut calls).await;
        let _ = second.request().await;
        second
            .responses
            .send(Err(Status::failed_precondition("declared crashed")))
            .await
            .unwrap();
        second
    });

    let (server, mut events) = GameServer::connect(config(endpoint)).await.unwrap();
    assert!(matches!(server.describe_server().await, Err(SdkError::Disconnected)));
    match events.recv().await {
        Some(Event::Lost { status }) => assert_eq!(status.code(), Code::FailedPrecondition),
        other => panic!("{other:?}"),
    }
    assert!(events.recv().await.is_none());
    script.await.unwrap();
}

#[tokio::test]
async fn ends_without_resuming_once_process_ending_is_answered() {
    let (endpoint, mut calls) = serve().await;
    let script = tokio::spawn(async move {
        let mut call = next_call(&mut calls).await;
        call.register("reg-1", None).await;
        let (ending, kind) = call.request().await;
        assert!(matches!(kind, RequestKind::ProcessEnding(_)));
        call.send(&ending, ok(None)).await;
        drop(call);
        // No second stream comes.
        assert!(
            tokio::time::timeout(Duration::from_secs(1), calls.recv())
                .await
                .is_err()
        );
    });

    let (server, mut events) = GameServer::connect(config(endpoint)).await.unwrap();
    server.process_ending("match over").await.unwrap();
    assert!(events.recv().await.is_none());
    assert!(matches!(server.describe_server().await, Err(SdkError::Disconnected)));
    script.await.unwrap();
}
