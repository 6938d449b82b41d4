//! What `sdk.proto` promises beyond the flow of `stream.rs`, spoken by hand as a client written from the protos
//! would: a superseded stream learns it with ABORTED, a message rate limit, printable request ids, a complete
//! DescribeServer (with the endpoint ready gave), labels, annotations and counters kept, player sessions looked up
//! every way the session service allows, reservations, and the reasons sessions end with when their server hangs or
//! is asked to end.

use std::time::Duration;

use berth_proto::common::v1::{Endpoint, KeyValue};
use berth_proto::health::v1::{self as pb, AttachRequest, attach_request::Kind as Ask, attach_response::Kind as Tell};
use berth_proto::session::v1 as session;
use berth_runtime::auth::Role;
use berth_store::Store;
use berth_store::sessions::{PlayersCreated, create_player_sessions};
use berth_testkit::{TestRedis, game_session_status, place_game_session, token};
use tonic::{Code, Status};
use tonic_types::StatusExt;

use super::stream::{
    Process, arena, attach, attach_with, code, fast, ok, one_process, one_process_on, operator, register, replica,
    started, terminate, wait_for_event,
};

/// Reads the stream until it ends, keeping what it pushed; the status it ended with.
async fn ending(process: &mut Process) -> Status {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), process.responses.message()).await {
            Ok(Ok(Some(message))) => process.pushes.extend(message.kind),
            Ok(Ok(None)) => return Status::ok("ended"),
            Ok(Err(status)) => return status,
            Err(_) => panic!("the stream did not end"),
        }
    }
}

fn description(answer: Tell) -> pb::ServerDescription {
    match ok(answer) {
        Some(pb::reply::Result::Server(description)) => description,
        other => panic!("expected a server description, got {other:?}"),
    }
}

fn violations(answer: &Tell) -> Vec<String> {
    match answer {
        Tell::Reply(reply) => reply.field_violations.iter().map(|v| v.field.clone()).collect(),
        other => panic!("expected a reply, got {other:?}"),
    }
}

async fn superseded_streams_end_aborted(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let (a, b) = (replica(&store, &fast()).await, replica(&store, &fast()).await);
    let own = token(Role::GameServer, Some(("arena", "gs-1")));
    let mut first = attach(&a.endpoint(), "arena", "gs-1").await;
    let mut resume = register("arena", "gs-1");
    resume.resume_registration_id = first.registered.registration_id.clone();

    // The same process attaches again through the other replica while its first stream is still open.
    let mut second = attach_with(&b.endpoint(), &own, resume.clone()).await.unwrap();
    assert!(second.registered.resumed);
    assert_eq!(ending(&mut first).await.code(), Code::Aborted);
    // And once more through the first replica: the stream on the second ends too.
    let mut third = attach_with(&a.endpoint(), &own, resume.clone()).await.unwrap();
    assert_eq!(ending(&mut second).await.code(), Code::Aborted);
    // Through the same replica as the live one.
    let mut fourth = attach_with(&a.endpoint(), &own, resume).await.unwrap();
    assert_eq!(ending(&mut third).await.code(), Code::Aborted);
    assert!(matches!(
        fourth.heartbeat(pb::ProcessHealth::Healthy, 0).await,
        Ok(Tell::HeartbeatAck(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_stream_ends_aborted_on_a_single_node() {
    superseded_streams_end_aborted(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_stream_ends_aborted_on_a_cluster() {
    superseded_streams_end_aborted(TestRedis::cluster()).await;
}

/// A resume whose attempt is below one the registration took is a try the process gave up on that arrived late: it
/// is refused with ABORTED and the live stream keeps the registration. The same attempt again is the same try run
/// twice, and taken; a resume that does not count its tries (attempt 0) is taken as before and leaves the count.
async fn a_late_try_leaves_the_live_stream_alone(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let (a, b) = (replica(&store, &fast()).await, replica(&store, &fast()).await);
    let own = token(Role::GameServer, Some(("arena", "gs-1")));
    let try_number = |attempt, resume: &str| pb::RegisterProcess {
        attempt,
        resume_registration_id: resume.to_owned(),
        ..register("arena", "gs-1")
    };
    let first = attach_with(&a.endpoint(), &own, try_number(1, "")).await.unwrap();
    let registration = first.registered.registration_id.clone();
    let late = async |attempt| {
        let refused = attach_with(&a.endpoint(), &own, try_number(attempt, &registration))
            .await
            .err();
        let refused = refused.unwrap_or_else(|| panic!("the late attempt {attempt} was taken"));
        assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
        assert!(
            refused.message().contains(&format!("attempt {attempt} ")),
            "{refused:?}"
        );
    };

    let mut live = attach_with(&b.endpoint(), &own, try_number(3, &registration))
        .await
        .unwrap();
    let holder = redis::cmd("HGET")
        .arg(berth_store::keys::FleetKeys::new("arena").game_server("gs-1"))
        .arg("replica")
        .clone();
    let live_holder: String = store.query(&holder).await.unwrap();
    late(1).await;
    late(2).await;
    assert!(matches!(
        live.heartbeat(pb::ProcessHealth::Healthy, 0).await,
        Ok(Tell::HeartbeatAck(_))
    ));
    let still: String = store.query(&holder).await.unwrap();
    assert_eq!(
        still, live_holder,
        "the registration still names the live stream's replica"
    );

    let again = attach_with(&a.endpoint(), &own, try_number(3, &registration))
        .await
        .unwrap();
    assert!(again.registered.resumed, "the same attempt again is taken");
    assert_eq!(ending(&mut live).await.code(), Code::Aborted);
    let mut newer = attach_with(&b.endpoint(), &own, try_number(4, &registration))
        .await
        .unwrap();
    let mut uncounted = attach_with(&a.endpoint(), &own, try_number(0, &registration))
        .await
        .unwrap();
    assert_eq!(ending(&mut newer).await.code(), Code::Aborted);
    late(3).await;
    assert!(matches!(
        uncounted.heartbeat(pb::ProcessHealth::Healthy, 0).await,
        Ok(Tell::HeartbeatAck(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_try_to_resume_leaves_the_live_stream_alone_on_a_single_node() {
    a_late_try_leaves_the_live_stream_alone(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_try_to_resume_leaves_the_live_stream_alone_on_a_cluster() {
    a_late_try_leaves_the_live_stream_alone(TestRedis::cluster()).await;
}

fn describe_request(id: usize) -> AttachRequest {
    AttachRequest {
        request_id: format!("d{id}"),
        kind: Some(Ask::DescribeServer(pb::DescribeServer {})),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_a_hundred_messages_a_second_end_the_stream() {
    let (_redis, store, service, mut process) = one_process(&fast(), false).await;
    // 50 a second for two seconds is within the limit: every request is answered.
    for id in 0..100 {
        process.requests.send(describe_request(id)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut answered = 0;
    while answered < 100 {
        let message = process.responses.message().await.unwrap().unwrap();
        if message.request_id.starts_with('d') {
            answered += 1;
        }
    }
    // 150 at once is not.
    for id in 0..150 {
        if process.requests.send(describe_request(id)).await.is_err() {
            break;
        }
    }
    assert_eq!(ending(&mut process).await.code(), Code::ResourceExhausted);
    drop(store);
    drop(service);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_must_be_printable_ascii() {
    let (_redis, _store, _service, mut process) = one_process(&fast(), false).await;
    let bad = AttachRequest {
        request_id: "\u{1}\u{2}".into(),
        kind: Some(Ask::DescribeServer(pb::DescribeServer {})),
    };
    process.requests.send(bad).await.unwrap();
    let status = ending(&mut process).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    let bad_request = status.get_details_bad_request().expect("a field violation");
    assert_eq!(bad_request.field_violations[0].field, "request_id");
}

async fn describe_and_update(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let service = replica(&store, &fast()).await;
    let mut registration = register("arena", "gs-1");
    registration.location = "eu-west".into();
    registration.max_concurrent_game_sessions = 3;
    registration.max_players = 8;
    registration.endpoint = Some(Endpoint {
        ip_address: "10.0.0.9".into(),
        dns_name: "gs-1.example".into(),
        port: 7001,
    });
    registration.labels = vec![KeyValue {
        key: "map".into(),
        value: "harbor".into(),
    }];
    registration.ports = vec![pb::ServerPort {
        name: "voice".into(),
        port: 7002,
        protocol: pb::TransportProtocol::Tcp as i32,
    }];
    let own = token(Role::GameServer, Some(("arena", "gs-1")));
    let mut process = attach_with(&service.endpoint(), &own, registration).await.unwrap();
    // It learned its port only once loaded.
    let ready = pb::ProcessReady {
        endpoint: Some(Endpoint {
            ip_address: "10.0.0.10".into(),
            dns_name: String::new(),
            port: 7005,
        }),
        log_paths: Vec::new(),
    };
    ok(process.ask(Ask::Ready(ready)).await.unwrap());
    let session = place_game_session(&store, "arena", "gs-1", 2).await;
    process.push(started).await;
    let beat = pb::Heartbeat {
        sequence: 100,
        health: pb::ProcessHealth::Healthy as i32,
        game_state: pb::GameState::Active as i32,
        connected_player_ids: vec!["alice".into()],
        applied_state_version: 0,
    };
    process.ask(Ask::Heartbeat(beat)).await.unwrap();

    let described = description(process.ask(Ask::DescribeServer(pb::DescribeServer {})).await.unwrap());
    assert_eq!(described.max_concurrent_game_sessions, 3);
    assert_eq!(described.max_players, 8);
    assert_eq!(described.location, "eu-west");
    let endpoint = described.endpoint.clone().unwrap();
    assert_eq!((endpoint.ip_address.as_str(), endpoint.port), ("10.0.0.10", 7005));
    assert_eq!(endpoint.dns_name, "");
    assert_eq!(
        described.game_server.as_ref().unwrap().connection_info,
        "10.0.0.10:7005"
    );
    assert_eq!(described.game_state(), pb::GameState::Active);
    assert_eq!(described.health(), pb::ProcessHealth::Healthy);
    assert_eq!(described.connected_player_ids, ["alice"]);
    assert_eq!(described.game_session_ids, [session]);
    assert_eq!(described.labels[0].value, "harbor");
    assert_eq!(described.ports[0].name, "voice");
    assert_eq!(described.ports[0].protocol(), pb::TransportProtocol::Tcp);

    // Labels are replaced, counters merged; both are kept.
    let counter = |name: &str, count: i64, capacity: i64| pb::ServerCounter {
        name: name.into(),
        count,
        capacity,
    };
    let update = pb::UpdateServer {
        labels: Some(pb::ServerLabels {
            labels: vec![KeyValue {
                key: "mode".into(),
                value: "duel".into(),
            }],
        }),
        counters: vec![counter("rooms", 2, 4), counter("spectators", 1 << 62, 0)],
        annotations: Some(pb::ServerAnnotations {
            annotations: vec![KeyValue {
                key: "agones.dev/sdk-match".into(),
                value: "x".repeat(1024),
            }],
        }),
        ..Default::default()
    };
    let updated = description(process.ask(Ask::UpdateServer(update)).await.unwrap());
    assert_eq!(updated.labels.len(), 1);
    assert_eq!(updated.labels[0].key, "mode");
    assert_eq!(updated.annotations[0].value.len(), 1024);
    assert_eq!(updated.counters.len(), 2);
    let update = pb::UpdateServer {
        counters: vec![counter("rooms", 3, 4), counter("spectators", 0, 0)],
        ..Default::default()
    };
    process.ask(Ask::UpdateServer(update)).await.unwrap();
    let described = description(process.ask(Ask::DescribeServer(pb::DescribeServer {})).await.unwrap());
    assert_eq!(described.labels[0].key, "mode");
    assert_eq!(described.counters, [counter("rooms", 3, 4)]);
    assert_eq!(
        described.annotations[0].key, "agones.dev/sdk-match",
        "kept by an update that leaves them unset"
    );
    let too_long = pb::UpdateServer {
        annotations: Some(pb::ServerAnnotations {
            annotations: vec![KeyValue {
                key: "note".into(),
                value: "x".repeat(1025),
            }],
        }),
        ..Default::default()
    };
    let answer = process.ask(Ask::UpdateServer(too_long)).await.unwrap();
    assert_eq!(violations(&answer), ["update_server.annotations.annotations[0].value"]);

    // A count above its capacity, and more than 16 counters in all, are refused by field and change nothing.
    let over = pb::UpdateServer {
        counters: vec![counter("rooms", 5, 4)],
        ..Default::default()
    };
    let answer = process.ask(Ask::UpdateServer(over)).await.unwrap();
    assert_eq!(violations(&answer), ["update_server.counters[0].count"]);
    let many = |from: usize| pb::UpdateServer {
        counters: (from..from + 10).map(|i| counter(&format!("c{i}"), 1, 0)).collect(),
        ..Default::default()
    };
    process.ask(Ask::UpdateServer(many(0))).await.unwrap();
    let answer = process.ask(Ask::UpdateServer(many(10))).await.unwrap();
    assert_eq!(violations(&answer), ["update_server.counters"]);
    let described = description(process.ask(Ask::DescribeServer(pb::DescribeServer {})).await.unwrap());
    assert_eq!(described.counters.len(), 11);

    // Labels and annotations set by key join those there, replacing only their own key's value.
    let pair = |key: String, value: &str| KeyValue {
        key,
        value: value.into(),
    };
    let set = pb::UpdateServer {
        set_labels: vec![pair("mode".into(), "ranked"), pair("map".into(), "dust")],
        set_annotations: vec![pair("note".into(), "hi")],
        ..Default::default()
    };
    let updated = description(process.ask(Ask::UpdateServer(set)).await.unwrap());
    let keyed = |pairs: &[KeyValue]| -> Vec<(String, String)> {
        pairs.iter().map(|p| (p.key.clone(), p.value.clone())).collect()
    };
    assert_eq!(
        keyed(&updated.labels),
        [("mode".into(), "ranked".into()), ("map".into(), "dust".into())]
    );
    assert_eq!(updated.annotations.len(), 2, "{:?}", updated.annotations);
    // Past 64 labels on the process: refused by field, nothing changed.
    let many = pb::UpdateServer {
        set_labels: (0..63).map(|i| pair(format!("k{i}"), "v")).collect(),
        ..Default::default()
    };
    let answer = process.ask(Ask::UpdateServer(many)).await.unwrap();
    assert_eq!(violations(&answer), ["update_server.set_labels"]);
    let described = description(process.ask(Ask::DescribeServer(pb::DescribeServer {})).await.unwrap());
    assert_eq!(described.labels.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_server_is_complete_and_labels_and_counters_are_kept_on_a_single_node() {
    describe_and_update(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_server_is_complete_and_labels_and_counters_are_kept_on_a_cluster() {
    describe_and_update(TestRedis::cluster()).await;
}

fn player_sessions(answer: Tell) -> session::DescribePlayerSessionsResponse {
    match ok(answer) {
        Some(pb::reply::Result::PlayerSessions(page)) => page,
        other => panic!("expected player sessions, got {other:?}"),
    }
}

fn describe_players(selector: session::describe_player_sessions_request::Selector, token: &str) -> Ask {
    Ask::DescribePlayerSessions(session::DescribePlayerSessionsRequest {
        selector: Some(selector),
        page_size: 1,
        page_token: token.into(),
        ..Default::default()
    })
}

async fn player_sessions_by_every_selector(redis: TestRedis) {
    use session::describe_player_sessions_request::Selector;
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let service = replica(&store, &fast()).await;
    let mut one = attach(&service.endpoint(), "arena", "gs-1").await;
    let mut two = attach(&service.endpoint(), "arena", "gs-2").await;
    let mut sessions = Vec::new();
    for (process, id) in [(&mut one, "gs-1"), (&mut two, "gs-2")] {
        ok(process.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());
        let game_session = place_game_session(&store, "arena", id, 4).await;
        process.push(started).await;
        let activate = Ask::ActivateGameSession(pb::ActivateGameSession {
            game_session_id: game_session.clone(),
        });
        ok(process.ask(activate).await.unwrap());
        let players = [("alice", ""), ("bob", "")];
        let created = create_player_sessions(&store, "arena", &game_session, &players)
            .await
            .unwrap();
        let PlayersCreated::Created(created) = created else {
            panic!("players join an ACTIVE session: {created:?}");
        };
        sessions.push(created);
    }

    // By player session: its own, and another server's is no player session at all.
    let mine = &sessions[0][0].player_session_id;
    let found = player_sessions(
        one.ask(describe_players(Selector::PlayerSessionId(mine.clone()), ""))
            .await
            .unwrap(),
    );
    assert_eq!(found.player_sessions[0].player_session_id, *mine);
    let theirs = &sessions[1][0].player_session_id;
    let answer = one
        .ask(describe_players(Selector::PlayerSessionId(theirs.clone()), ""))
        .await
        .unwrap();
    assert_eq!(code(answer), Code::NotFound);

    // By player: only the sessions of this server's games, paged.
    let found = player_sessions(
        one.ask(describe_players(Selector::PlayerId("alice".into()), ""))
            .await
            .unwrap(),
    );
    assert_eq!(found.player_sessions.len(), 1);
    assert_eq!(found.player_sessions[0].player_session_id, *mine);
    let by_game = Selector::GameSessionId(sessions[0][0].game_session_id.clone());
    let first = player_sessions(one.ask(describe_players(by_game.clone(), "")).await.unwrap());
    assert!(!first.next_page_token.is_empty());
    let second = player_sessions(
        one.ask(describe_players(by_game.clone(), &first.next_page_token))
            .await
            .unwrap(),
    );
    assert_ne!(first.player_sessions, second.player_sessions);

    // A page token not issued for this selection is refused by field.
    let answer = one.ask(describe_players(by_game, "forged.123")).await.unwrap();
    assert_eq!(violations(&answer), ["describe_player_sessions.page_token"]);
    let answer = one
        .ask(describe_players(
            Selector::PlayerId("alice".into()),
            &first.next_page_token,
        ))
        .await
        .unwrap();
    assert_eq!(violations(&answer), ["describe_player_sessions.page_token"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn player_sessions_are_described_by_every_selector_but_only_its_own_on_a_single_node() {
    player_sessions_by_every_selector(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn player_sessions_are_described_by_every_selector_but_only_its_own_on_a_cluster() {
    player_sessions_by_every_selector(TestRedis::cluster()).await;
}

async fn hung_with_its_stream_open(redis: TestRedis) {
    let (_redis, store, _service, mut process) = one_process_on(redis, &fast(), true).await;
    let session = place_game_session(&store, "arena", "gs-1", 2).await;
    assert_eq!(process.push(started).await, session);
    // It stops heartbeating but keeps its stream: it is told to end at once, as unhealthy.
    let told = loop {
        let message = tokio::time::timeout(Duration::from_secs(5), process.responses.message())
            .await
            .expect("told in time")
            .unwrap()
            .expect("the stream stays open");
        if let Some(told) = message.kind.as_ref().and_then(terminate) {
            break told;
        }
    };
    assert_eq!(told.reason(), pb::TerminationReason::Unhealthy);
    assert!(told.force);
    wait_for_event(&store, "arena", "SERVER_PROCESS_TERMINATED_UNHEALTHY").await;
    let status = game_session_status(&store, &session).await;
    assert_eq!(status, Some(("ERROR".into(), "SERVER_UNHEALTHY".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_hangs_with_its_stream_open_ends_its_sessions_unhealthy_on_a_single_node() {
    hung_with_its_stream_open(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_hangs_with_its_stream_open_ends_its_sessions_unhealthy_on_a_cluster() {
    hung_with_its_stream_open(TestRedis::cluster()).await;
}

async fn ended_after_a_terminate(redis: TestRedis) {
    let (_redis, store, service, mut process) = one_process_on(redis, &fast(), true).await;
    let session = place_game_session(&store, "arena", "gs-1", 2).await;
    assert_eq!(process.push(started).await, session);
    let request = pb::TerminateGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
        reason: pb::TerminationReason::ScaleIn as i32,
    };
    operator(&service).await.terminate_game_server(request).await.unwrap();
    process.push(terminate).await;
    let end = Ask::EndGameSession(pb::EndGameSession {
        game_session_id: session.clone(),
    });
    ok(process.ask(end).await.unwrap());
    let status = game_session_status(&store, &session).await;
    assert_eq!(
        status,
        Some(("TERMINATED".into(), "TRIGGERED_ON_PROCESS_TERMINATE".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ended_after_its_server_was_told_to_terminate_was_triggered_by_it_on_a_single_node() {
    ended_after_a_terminate(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ended_after_its_server_was_told_to_terminate_was_triggered_by_it_on_a_cluster() {
    ended_after_a_terminate(TestRedis::cluster()).await;
}

/// reserve (Agones Reserve): a ready server leaves the pool until its reserved_until_time, so that no game session is
/// placed on it even by name, and shows no claim; 0 ends the reservation at once; more than a day is
/// INVALID_ARGUMENT; a server hosting a game session cannot be reserved (FAILED_PRECONDITION).
async fn reservations(redis: TestRedis) {
    use berth_store::sessions::{Created, NewGameSession, create_game_session};
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let service = replica(&store, &fast()).await;
    let own = token(Role::GameServer, Some(("arena", "gs-1")));
    let mut process = attach_with(&service.endpoint(), &own, register("arena", "gs-1"))
        .await
        .unwrap();
    ok(process.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());
    let reserve = |duration_seconds| Ask::Reserve(pb::ReserveServer { duration_seconds });

    let too_long = process.ask(reserve(86_401)).await.unwrap();
    assert_eq!(violations(&too_long), ["reserve.duration_seconds"]);
    let reserved = description(process.ask(reserve(60)).await.unwrap());
    assert!(reserved.reserved_until_time.is_some());
    assert_eq!(
        reserved.game_server.unwrap().claim_status(),
        pb::ClaimStatus::Unspecified,
        "a reservation is not a claim"
    );
    let id = berth_domain::game_session::new_game_session_id("arena");
    let named = NewGameSession {
        game_server_id: Some("gs-1"),
        ..NewGameSession::new(&id, "arena", 2)
    };
    let refused = create_game_session(&store, &named, &berth_testkit::SESSION_TIMINGS)
        .await
        .unwrap();
    assert!(matches!(refused, Created::NoServer), "{refused:?}");
    // No client can act as the holder of the reservation by presenting its claim id.
    let mut matchmaker = super::client(&service, Role::Client, None).await;
    let posing = matchmaker
        .update_game_server(pb::UpdateGameServerRequest {
            fleet_id: "arena".into(),
            game_server_id: "gs-1".into(),
            utilization_status: pb::UtilizationStatus::Utilized as i32,
            claim_id: berth_domain::game_server::RESERVATION.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(posing.code(), Code::FailedPrecondition, "{posing:?}");

    let released = description(process.ask(reserve(0)).await.unwrap());
    assert_eq!(released.reserved_until_time, None);
    place_game_session(&store, "arena", "gs-1", 2).await;
    assert_eq!(code(process.ask(reserve(60)).await.unwrap()), Code::FailedPrecondition);
}

#[tokio::test]
async fn reserve_holds_a_server_out_of_the_pool_on_a_single_node() {
    reservations(TestRedis::single()).await;
}

#[tokio::test]
async fn reserve_holds_a_server_out_of_the_pool_on_a_cluster() {
    reservations(TestRedis::cluster()).await;
}

fn player_session(answer: &Tell) -> Option<&session::PlayerSession> {
    match answer {
        Tell::Reply(reply) => match &reply.result {
            Some(pb::reply::Result::PlayerSession(player)) => Some(player),
            _ => None,
        },
        _ => None,
    }
}

/// Accepts, removals and ends a process sends back to back, with other requests and refusals among them, are each
/// answered as alone would be, in the order sent: the replica answers the run together (one round trip to Redis),
/// so this is what that must not change.
async fn player_changes_sent_together(redis: TestRedis) {
    use berth_domain::game_session::player_session_id;
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let service = replica(&store, &fast()).await;
    let mut process = attach(&service.endpoint(), "arena", "gs-1").await;
    ok(process.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());
    let game_session = place_game_session(&store, "arena", "gs-1", 8).await;
    process.push(started).await;
    let activate = Ask::ActivateGameSession(pb::ActivateGameSession {
        game_session_id: game_session.clone(),
    });
    ok(process.ask(activate).await.unwrap());
    let players = [("alice", ""), ("bob", ""), ("carol", "")];
    let PlayersCreated::Created(created) = create_player_sessions(&store, "arena", &game_session, &players)
        .await
        .unwrap()
    else {
        panic!("players join an ACTIVE session");
    };
    let [alice, bob, carol] = [0, 1, 2].map(|n| created[n].player_session_id.clone());
    let accept = |id: &str| {
        Ask::AcceptPlayerSession(pb::AcceptPlayerSession {
            game_session_id: game_session.clone(),
            player_session_id: id.into(),
        })
    };
    let remove = |id: &str| {
        Ask::RemovePlayerSession(pb::RemovePlayerSession {
            game_session_id: game_session.clone(),
            player_session_id: id.into(),
        })
    };
    let heartbeat = Ask::Heartbeat(pb::Heartbeat {
        sequence: 1,
        health: pb::ProcessHealth::Healthy as i32,
        ..Default::default()
    });
    let reject = |reason: String| {
        Ask::RejectGameSession(pb::RejectGameSession {
            game_session_id: game_session.clone(),
            reason,
        })
    };
    let end = Ask::EndGameSession(pb::EndGameSession {
        game_session_id: game_session.clone(),
    });
    let unissued = player_session_id(&game_session, 9);
    let foreign = unissued.replacen("arena/", "elsewhere/", 1);
    // What each request is answered, in the order sent: a code, and for an answer the player session's status.
    use session::PlayerSessionStatus::{Active, Completed};
    let asked: Vec<(Ask, Code, Option<session::PlayerSessionStatus>)> = vec![
        (accept(&alice), Code::Ok, Some(Active)),
        (accept(&bob), Code::Ok, Some(Active)),
        (accept(&foreign), Code::NotFound, None),
        (accept(&unissued), Code::NotFound, None),
        (remove(&alice), Code::Ok, Some(Completed)),
        (heartbeat, Code::Ok, None),
        (accept(&alice), Code::FailedPrecondition, None),
        (remove(&bob), Code::Ok, Some(Completed)),
        (remove(&carol), Code::Ok, Some(Completed)),
        (accept(&bob), Code::FailedPrecondition, None),
        // A reason past its limit is refused by field; only a session being started can be rejected, and this one
        // is ACTIVE. Then it ends.
        (reject("x".repeat(1025)), Code::InvalidArgument, None),
        (reject("the map did not load".into()), Code::FailedPrecondition, None),
        (end, Code::Ok, None),
    ];
    let sent: Vec<String> = (0..asked.len()).map(|n| format!("together-{n}")).collect();
    for ((kind, _, _), request_id) in asked.iter().zip(&sent) {
        let request = AttachRequest {
            request_id: request_id.clone(),
            kind: Some(kind.clone()),
        };
        process.requests.send(request).await.unwrap();
    }
    let mut answered = Vec::new();
    while answered.len() < sent.len() {
        let message = tokio::time::timeout(Duration::from_secs(5), process.responses.message())
            .await
            .expect("every request answered within 5 s")
            .unwrap()
            .expect("the stream stays open");
        if message.request_id.starts_with("together-") {
            answered.push((message.request_id, message.kind.expect("an answer has a kind")));
        }
    }
    // A heartbeat is answered once the replica's writer has written it, whenever that is; the rest in their order.
    let (acks, answered): (Vec<_>, Vec<_>) = answered
        .into_iter()
        .partition(|(_, tell)| matches!(tell, Tell::HeartbeatAck(_)));
    assert_eq!(acks.len(), 1);
    let asked: Vec<_> = asked
        .into_iter()
        .zip(sent)
        .filter(|((kind, _, _), _)| !matches!(kind, Ask::Heartbeat(_)))
        .collect();
    let order: Vec<&String> = answered.iter().map(|(id, _)| id).collect();
    assert_eq!(
        order,
        asked.iter().map(|(_, id)| id).collect::<Vec<_>>(),
        "answered in the order asked"
    );
    for ((_, tell), ((kind, wanted, status), _)) in answered.into_iter().zip(&asked) {
        let player = player_session(&tell).cloned();
        if matches!(kind, Ask::EndGameSession(_)) {
            let Some(pb::reply::Result::GameSession(ended)) = ok(tell) else {
                panic!("an end is answered with the session");
            };
            assert_eq!(ended.status(), session::GameSessionStatus::Terminated);
            continue;
        }
        if *wanted == Code::InvalidArgument {
            assert_eq!(violations(&tell), ["reject_game_session.reason"]);
        }
        assert_eq!(code(tell), *wanted, "{kind:?}");
        assert_eq!(
            player.map(|player| player.status),
            status.map(|status| status as i32),
            "{kind:?}"
        );
    }
    // What the answers said is what Redis holds: every player left, and the session has its slots back.
    let by_game = session::describe_player_sessions_request::Selector::GameSessionId(game_session.clone());
    let described = player_sessions(process.ask(describe_players(by_game, "")).await.unwrap());
    assert!(
        described
            .player_sessions
            .iter()
            .all(|player| player.status == session::PlayerSessionStatus::Completed as i32),
        "{described:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn player_changes_sent_together_are_each_answered_in_order_on_a_single_node() {
    player_changes_sent_together(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn player_changes_sent_together_are_each_answered_in_order_on_a_cluster() {
    player_changes_sent_together(TestRedis::cluster()).await;
}
