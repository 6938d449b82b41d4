//! The SDK stream through real gRPC against a real Redis, spoken by hand (not through the SDK) so that every
//! message of the protocol is visible: registration, ready, heartbeats, pushes through the other replica,
//! deadlines, termination, reconnection and refusals.

use std::sync::Arc;
use std::time::Duration;

use berth_domain::fleet::settings::FleetSettings;
use berth_domain::process::Registration;
use berth_proto::common::v1::Endpoint;
use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::health::v1::sdk_service_client::SdkServiceClient;
use berth_proto::health::v1::{
    self as pb, AttachRequest, AttachResponse, attach_request::Kind as Ask, attach_response::Kind as Tell,
};
use berth_runtime::auth::Role;
use berth_runtime::server::CAPACITY;
use berth_store::Store;
use berth_store::endings;
use berth_store::fleets::recent_fleet_events;
use berth_store::processes::{self, Attach, Attached, Heartbeat, Introduction, Joined, ProcessRef, Timings};
use berth_testkit::{
    RunningService, TestRedis, anywhere_fleet, anywhere_fleet_with, fast_settings, game_session_status, health_within,
    place_game_session, process_events, set_fleet_settings, spawn_service, token,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_types::StatusExt;

/// A replica that writes heartbeats and sweeps deadlines at once, and gives a first heartbeat 200 ms beyond the
/// fleet's window.
pub(crate) fn fast() -> berth_health::HealthArgs {
    berth_health::HealthArgs {
        initial_delay_ms: 200,
        heartbeat_flush_ms: 5,
        monitor_sweep_ms: 50,
        ..Default::default()
    }
}

/// The store's timings of the tests that attach and write heartbeats straight through it: a first heartbeat due a
/// minute after registering, lost records kept a minute.
const STORE_TIMINGS: Timings = Timings {
    initial_delay_ms: 60_000,
    retention_ms: 60_000,
};

/// Creates the fleet the processes of these tests register in: "arena", its home location eu-west, its processes
/// beating every 100 ms, lost after 3 missed (300 ms) or 3 UNHEALTHY in a row, with a minute to be ready and to end.
pub(crate) async fn arena(store: &Store) {
    arena_with(store, |_| {}).await;
}

/// As [`arena`], its settings changed by `change`.
pub(crate) async fn arena_with(store: &Store, change: impl FnOnce(&mut FleetSettings)) {
    anywhere_fleet(store, "arena", &["eu-west"]).await;
    let mut settings = FleetSettings {
        ready_ms: 60_000,
        termination_grace_ms: 60_000,
        ..fast_settings()
    };
    change(&mut settings);
    set_fleet_settings(store, "arena", &settings).await;
}

pub(crate) async fn replica(store: &Store, args: &berth_health::HealthArgs) -> RunningService {
    spawn_service(berth_health::service(store.clone(), args), store.clone()).await
}

/// A game-server process, spoken by hand.
pub(crate) struct Process {
    pub(crate) requests: mpsc::Sender<AttachRequest>,
    pub(crate) responses: Streaming<AttachResponse>,
    pub(crate) pushes: Vec<Tell>,
    next: u64,
    pub(crate) registered: pb::ProcessRegistered,
}

pub(crate) fn register(fleet: &str, id: &str) -> pb::RegisterProcess {
    pb::RegisterProcess {
        fleet_id: fleet.into(),
        game_server_id: id.into(),
        instance_id: "i-1".into(),
        location: "eu-west".into(),
        endpoint: Some(Endpoint {
            ip_address: "10.0.0.7".into(),
            dns_name: String::new(),
            port: 7777,
        }),
        max_concurrent_game_sessions: 1,
        sdk_version: "test/1".into(),
        ..Default::default()
    }
}

pub(crate) async fn attach_with(endpoint: &str, token: &str, register: pb::RegisterProcess) -> Result<Process, Status> {
    let (requests, rx) = mpsc::channel(64);
    let first = AttachRequest {
        request_id: "r0".into(),
        kind: Some(Ask::RegisterProcess(register)),
    };
    requests.send(first).await.unwrap();
    let channel = berth_sdk::connect(endpoint, token).await.unwrap();
    let mut responses = SdkServiceClient::new(channel)
        .attach(ReceiverStream::new(rx))
        .await?
        .into_inner();
    let registered = match responses.message().await?.and_then(|message| message.kind) {
        Some(Tell::Registered(registered)) => registered,
        other => panic!("expected registered, got {other:?}"),
    };
    Ok(Process {
        requests,
        responses,
        pushes: Vec::new(),
        next: 1,
        registered,
    })
}

pub(crate) async fn attach(endpoint: &str, fleet: &str, id: &str) -> Process {
    attach_with(
        endpoint,
        &token(Role::GameServer, Some((fleet, id))),
        register(fleet, id),
    )
    .await
    .unwrap()
}

impl Process {
    /// Sends a request and waits for its answer, keeping the pushes that arrive meanwhile.
    pub(crate) async fn ask(&mut self, kind: Ask) -> Result<Tell, Status> {
        let request_id = format!("r{}", self.next);
        self.next += 1;
        let request = AttachRequest {
            request_id: request_id.clone(),
            kind: Some(kind),
        };
        if self.requests.send(request).await.is_err() {
            return Err(Status::cancelled("the stream is over"));
        }
        loop {
            let message = tokio::time::timeout(Duration::from_secs(5), self.responses.message())
                .await
                .expect("an answer within 5 s")?
                .expect("the stream ended");
            if message.request_id == request_id {
                return Ok(message.kind.expect("an answer has a kind"));
            }
            self.pushes.extend(message.kind);
        }
    }

    pub(crate) async fn heartbeat(&mut self, health: pb::ProcessHealth, applied: u64) -> Result<Tell, Status> {
        let beat = pb::Heartbeat {
            sequence: self.next,
            health: health as i32,
            game_state: pb::GameState::StandingBy as i32,
            connected_player_ids: Vec::new(),
            applied_state_version: applied,
        };
        self.ask(Ask::Heartbeat(beat)).await
    }

    /// Waits for a push (keeping the stream alive with heartbeats) until `wanted` picks one.
    pub(crate) async fn push<T>(&mut self, wanted: impl Fn(&Tell) -> Option<T>) -> T {
        for _ in 0..100 {
            if let Some(found) = self.pushes.iter().find_map(&wanted) {
                return found;
            }
            if let Ok(Ok(Some(message))) =
                tokio::time::timeout(Duration::from_millis(50), self.responses.message()).await
                && let Some(kind) = message.kind
            {
                self.pushes.push(kind);
            }
            // An ack may carry the state before the push does (the process reports having applied nothing): what
            // it carries counts as delivered.
            if let Ok(Tell::HeartbeatAck(ack)) = self.heartbeat(pb::ProcessHealth::Healthy, 0).await
                && let Some(desired) = ack.desired_state
            {
                for assignment in desired.game_sessions {
                    let start = pb::StartGameSession {
                        game_session: assignment.game_session,
                        initial_player_sessions: assignment.player_sessions,
                        state_version: desired.version,
                    };
                    self.pushes.push(Tell::StartGameSession(start));
                }
                self.pushes.extend(desired.termination.map(Tell::TerminateProcess));
            }
        }
        panic!("the push never came; got {:?}", self.pushes);
    }
}

pub(crate) fn ok(answer: Tell) -> Option<pb::reply::Result> {
    match answer {
        Tell::Reply(reply) => {
            assert_eq!(reply.code, 0, "{}", reply.message);
            reply.result
        }
        other => panic!("expected a reply, got {other:?}"),
    }
}

pub(crate) fn code(answer: Tell) -> Code {
    match answer {
        Tell::Reply(reply) => Code::from_i32(reply.code),
        other => panic!("expected a reply, got {other:?}"),
    }
}

pub(crate) fn started(tell: &Tell) -> Option<String> {
    match tell {
        Tell::StartGameSession(start) => start
            .game_session
            .as_ref()
            .map(|session| session.game_session_id.clone()),
        _ => None,
    }
}

pub(crate) fn terminate(tell: &Tell) -> Option<pb::TerminateProcess> {
    match tell {
        Tell::TerminateProcess(terminate) => Some(*terminate),
        _ => None,
    }
}

pub(crate) async fn operator(service: &RunningService) -> GameServerServiceClient<berth_sdk::AuthedChannel> {
    GameServerServiceClient::new(
        berth_sdk::connect(&service.endpoint(), &token(Role::Operator, None))
            .await
            .unwrap(),
    )
}

pub(crate) async fn wait_for_event(store: &Store, fleet: &str, wanted: &str) -> berth_store::fleets::FleetEventEntry {
    for _ in 0..100 {
        let events = recent_fleet_events(store, fleet, 20).await.unwrap();
        if let Some(event) = events.into_iter().find(|event| event.code_name() == wanted) {
            return event;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {wanted} event");
}

/// A single-node Redis, one replica with `args`, and process gs-1 of fleet arena attached to it (and ready).
pub(crate) async fn one_process(
    args: &berth_health::HealthArgs,
    ready: bool,
) -> (TestRedis, Store, RunningService, Process) {
    one_process_on(TestRedis::single(), args, ready).await
}

/// As [`one_process`], on `redis`.
pub(crate) async fn one_process_on(
    redis: TestRedis,
    args: &berth_health::HealthArgs,
    ready: bool,
) -> (TestRedis, Store, RunningService, Process) {
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let service = replica(&store, args).await;
    let mut process = attach(&service.endpoint(), "arena", "gs-1").await;
    if ready {
        ok(process.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());
    }
    (redis, store, service, process)
}

async fn stream_flow_across_replicas(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let (a, b) = (replica(&store, &fast()).await, replica(&store, &fast()).await);
    let mut process = attach(&a.endpoint(), "arena", "gs-1").await;
    assert!(!process.registered.resumed);
    assert_eq!(process.registered.heartbeat_interval_ms, 100);
    ok(process.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());
    let Tell::HeartbeatAck(ack) = process.heartbeat(pb::ProcessHealth::Healthy, 0).await.unwrap() else {
        panic!("a heartbeat is answered by an ack");
    };
    assert_eq!(ack.state_version, 0);

    // The session service (here: the test) places a game session; the push reaches the process on replica A.
    let session = place_game_session(&store, "arena", "gs-1", 2).await;
    assert_eq!(process.push(started).await, session);
    let activated = ok(process
        .ask(Ask::ActivateGameSession(pb::ActivateGameSession {
            game_session_id: session.clone(),
        }))
        .await
        .unwrap());
    assert!(matches!(activated, Some(pb::reply::Result::GameSession(_))));
    let status = game_session_status(&store, &session).await;
    assert_eq!(status, Some(("ACTIVE".into(), String::new())));

    // An operator asks replica B to terminate it; the push reaches the process on replica A.
    let mut operator_b = operator(&b).await;
    let asked = operator_b.terminate_game_server(pb::TerminateGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
        reason: pb::TerminationReason::ScaleIn as i32,
    });
    assert!(asked.await.unwrap().into_inner().termination_deadline.is_some());
    let told = process.push(terminate).await;
    assert_eq!(told.reason(), pb::TerminationReason::ScaleIn);
    assert!(!told.force);

    // A newer release beside this one during an upgrade may store a reason this one does not know: the process
    // stays terminating with its deadline, readable here, instead of failing every read of its desired state.
    let process_key = berth_store::keys::FleetKeys::new("arena").game_server("gs-1");
    let newer = redis::cmd("HSET")
        .arg(process_key)
        .arg("term_reason")
        .arg("RETIRED_BY_A_NEWER_RELEASE")
        .clone();
    let _: () = store.query(&newer).await.unwrap();
    let again = operator_b.terminate_game_server(pb::TerminateGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
        reason: pb::TerminationReason::ScaleIn as i32,
    });
    assert!(again.await.unwrap().into_inner().termination_deadline.is_some());

    // It honours it.
    let ending = pb::ProcessEnding {
        reason: "terminated".into(),
    };
    ok(process.ask(Ask::ProcessEnding(ending)).await.unwrap());
    let event = wait_for_event(&store, "arena", "SERVER_PROCESS_TERMINATED").await;
    assert_eq!(event.game_server_id, "gs-1");
    let status = game_session_status(&store, &session).await;
    assert_eq!(
        status,
        Some(("TERMINATED".into(), "TRIGGERED_ON_PROCESS_TERMINATE".into()))
    );
    let mut operator_a = operator(&a).await;
    let described = operator_a.describe_game_server(pb::DescribeGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
    });
    assert_eq!(described.await.unwrap_err().code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_ready_pushes_and_termination_across_replicas_on_a_single_node() {
    stream_flow_across_replicas(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_ready_pushes_and_termination_across_replicas_on_a_cluster() {
    stream_flow_across_replicas(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_process_is_declared_lost_and_its_sessions_end() {
    let (_redis, store, service, mut process) = one_process(&fast(), true).await;
    let session = place_game_session(&store, "arena", "gs-1", 2).await;
    assert_eq!(process.push(started).await, session);
    let registration_id = process.registered.registration_id.clone();
    drop(process);

    let event = wait_for_event(&store, "arena", "SERVER_PROCESS_CRASHED").await;
    assert_eq!(event.game_server_id, "gs-1");
    let status = game_session_status(&store, &session).await;
    assert_eq!(status, Some(("ERROR".into(), "SERVER_CRASHED".into())));
    // Its registration cannot be resumed: it must exit.
    let mut late = register("arena", "gs-1");
    late.resume_registration_id = registration_id;
    let endpoint = service.endpoint();
    let refused = attach_with(&endpoint, &token(Role::GameServer, Some(("arena", "gs-1"))), late).await;
    assert_eq!(refused.err().unwrap().code(), Code::FailedPrecondition);
}

/// A replica whose heartbeat writes are always late (each waits 150 ms to be batched, past the 100 ms after which a
/// write counts as late, as happens to a replica past its capacity) still declares its silent process lost, later by
/// its lateness, and never the one that beats: a writer's lag is not its processes' silence, and not a reason to
/// stop finding the dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_always_late_writing_finds_its_silent_process_and_spares_the_beating_one() {
    let late = berth_health::HealthArgs {
        heartbeat_flush_ms: 150,
        ..fast()
    };
    let (_redis, store, service, mut beating) = one_process(&late, true).await;
    let mut silent = attach(&service.endpoint(), "arena", "gs-2").await;
    ok(silent.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());
    let started = tokio::time::Instant::now();
    let mut found = None;
    // Beats on for a second after the silent one is found (or for 10 s if it never is), each heartbeat as soon as
    // the last was answered.
    while started.elapsed() < Duration::from_secs(10)
        && found.is_none_or(|at| started.elapsed() < at + Duration::from_secs(1))
    {
        let answer = beating.heartbeat(pb::ProcessHealth::Healthy, 0).await;
        assert!(matches!(answer, Ok(Tell::HeartbeatAck(_))), "{answer:?}");
        if found.is_none() && !process_events(&store, "arena").await.is_empty() {
            found = Some(started.elapsed());
        }
    }
    let lost: Vec<(String, String)> = process_events(&store, "arena")
        .await
        .into_iter()
        .map(|event| (event.game_server_id.clone(), event.code_name().to_owned()))
        .collect();
    assert_eq!(
        lost,
        [("gs-2".to_owned(), "SERVER_PROCESS_TERMINATED_UNHEALTHY".to_owned())],
        "the silent process, and only it, is declared lost"
    );
}

/// A replica whose heartbeat writes are held up for over a second (every Redis client paused) turns a new stream
/// away with RESOURCE_EXHAUSTED and a retry hint, so that the SDK tries again through another replica, and takes new
/// streams again once it has caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_far_behind_its_heartbeat_writes_turns_new_streams_away_until_it_catches_up() {
    let (redis, _store, service, mut process) = one_process(&fast(), true).await;
    let endpoint = service.endpoint();
    let newcomer_token = token(Role::GameServer, Some(("arena", "gs-2")));
    let newcomer = || attach_with(&endpoint, &newcomer_token, register("arena", "gs-2"));
    redis.client_pause(Duration::from_secs(3));
    // A heartbeat the writer cannot write while Redis holds its call.
    let held = tokio::spawn(async move {
        let _ = process.heartbeat(pb::ProcessHealth::Healthy, 0).await;
        process
    });
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let refused = newcomer().await.err().expect("a new stream turned away");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("behind writing heartbeats"), "{refused:?}");
    assert!(
        refused.get_error_details().retry_info().is_some(),
        "a retry hint: {refused:?}"
    );
    health_within(&endpoint, CAPACITY, ServingStatus::NotServing, Duration::from_secs(1))
        .await
        .expect("its health status says it turns new work away");

    let _process = held.await.unwrap();
    health_within(&endpoint, CAPACITY, ServingStatus::Serving, Duration::from_secs(10))
        .await
        .expect("its health status says it takes new work again once it caught up");
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match newcomer().await {
            Ok(_) => break,
            Err(refused) if tokio::time::Instant::now() < until => {
                assert!(
                    matches!(refused.code(), Code::ResourceExhausted | Code::Unavailable),
                    "{refused:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(refused) => panic!("still turned away after Redis came back: {refused:?}"),
        }
    }
}

/// Redis held for three seconds, longer than the replica waits on it and than a heartbeat period: the replica still
/// answers every heartbeat while Redis holds its write, UNAVAILABLE saying it is not written yet, so that the process
/// keeps its stream rather than resume through another replica that waits on the same Redis. None of them gets a
/// second answer when the write ends, and once Redis is back the next heartbeat is acked on the same stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_are_answered_while_redis_holds_their_write() {
    let (redis, _store, _service, mut process) = one_process(&fast(), true).await;
    let url = redis.config().urls[0].clone();
    redis.client_pause(Duration::from_secs(3));
    // A PING without a timeout: it returns when the hold ends, and not before.
    let hold = tokio::task::spawn_blocking(move || {
        std::process::Command::new("redis-cli")
            .args(["-u", &url, "PING"])
            .output()
            .expect("redis-cli runs")
    });
    for _ in 0..3 {
        let answer = process.heartbeat(pb::ProcessHealth::Healthy, 0).await;
        let Ok(Tell::Reply(reply)) = &answer else {
            panic!("a reply: {answer:?}")
        };
        assert_eq!(reply.code, Code::Unavailable as i32, "{reply:?}");
        assert!(reply.message.contains("not written yet"), "{reply:?}");
    }
    assert!(
        !hold.is_finished(),
        "the heartbeats were answered while Redis held every client"
    );
    let pong = hold.await.unwrap();
    assert!(String::from_utf8_lossy(&pong.stdout).contains("PONG"), "{pong:?}");

    let answer = process.heartbeat(pb::ProcessHealth::Healthy, 0).await;
    assert!(matches!(answer, Ok(Tell::HeartbeatAck(_))), "{answer:?}");
    let answers: Vec<&Tell> = process
        .pushes
        .iter()
        .filter(|tell| matches!(tell, Tell::Reply(_) | Tell::HeartbeatAck(_)))
        .collect();
    assert!(answers.is_empty(), "no heartbeat answered twice: {answers:?}");
}

/// A fleet that the list of fleets lost (as a failover of the list's node can) is listed again by the next server
/// that attaches: else no sweep would judge its servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_the_list_lost_is_listed_again_by_its_next_server() {
    let (_redis, store, service, _process) = one_process(&fast(), false).await;
    let forget = redis::cmd("SREM").arg(berth_store::keys::FLEETS).arg("arena").clone();
    let _: i64 = store.query(&forget).await.unwrap();
    let _next = attach(&service.endpoint(), "arena", "gs-2").await;
    let listed = berth_store::fleets::fleets(&store).await.unwrap();
    assert_eq!(listed, ["arena"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleets_that_cannot_be_swept_do_not_stop_the_monitor_for_the_others() {
    let metrics = berth_runtime::metrics::install(None).unwrap();
    let (_redis, store, _service, process) = one_process(&fast(), true).await;
    // Fleets whose deadline keys hold the wrong type: every sweep of them fails, whichever order fleets come in.
    for n in 0..20 {
        let fleet = format!("broken-{n}");
        let _: i64 = store
            .query(redis::cmd("SADD").arg(berth_store::keys::FLEETS).arg(&fleet))
            .await
            .unwrap();
        let deadlines = berth_store::keys::FleetKeys::new(&fleet).heartbeat_deadlines();
        let _: () = store.query(redis::cmd("SET").arg(deadlines).arg("x")).await.unwrap();
    }
    drop(process);
    let event = wait_for_event(&store, "arena", "SERVER_PROCESS_CRASHED").await;
    assert_eq!(event.game_server_id, "gs-1");
    let rendered = metrics.render();
    assert!(
        rendered.contains("berth_background_fleet_failures_total{task=\"health_monitor\"}"),
        "{rendered}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_ignores_a_terminate_is_force_ended() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    arena_with(&store, |settings| settings.termination_grace_ms = 300).await;
    let service = replica(&store, &fast()).await;
    let mut process = attach(&service.endpoint(), "arena", "gs-1").await;
    ok(process.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());
    let request = pb::TerminateGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
        reason: 0,
    };
    operator(&service).await.terminate_game_server(request).await.unwrap();
    let told = process.push(terminate).await;
    assert!(!told.force);
    // It keeps heartbeating but never sends ProcessEnding.
    let forced = process
        .push(|tell| terminate(tell).filter(|terminate| terminate.force))
        .await;
    assert_eq!(forced.reason(), pb::TerminationReason::ScaleIn);
    let event = wait_for_event(&store, "arena", "SERVER_PROCESS_FORCE_TERMINATED").await;
    assert_eq!(event.game_server_id, "gs-1");
}

/// What a fleet's configuration says of its processes is what a process is told when it registers; a change of the
/// fleet's heartbeat settings reaches it with its next heartbeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_is_told_its_fleets_settings_and_their_changes() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    anywhere_fleet_with(&store, "arena", &["eu-west"], |req| {
        req.process_timeouts = Some(berth_proto::fleet::v1::ProcessTimeouts {
            heartbeat_interval_ms: 2000,
            unhealthy_after_missed_heartbeats: 4,
            ready_timeout_seconds: 20,
            termination_grace_seconds: 30,
            exit_timeout_seconds: 7,
            ..Default::default()
        });
    })
    .await;
    let service = replica(&store, &fast()).await;
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut process = attach(&service.endpoint(), "arena", "gs-1").await;
    let told = process.registered.clone();
    assert_eq!(
        (told.heartbeat_interval_ms, told.unhealthy_after_missed_heartbeats),
        (2000, 4)
    );
    assert_eq!((told.termination_grace_seconds, told.exit_timeout_seconds), (30, 7));
    let ready_in = told.ready_deadline.unwrap().seconds - now_s;
    assert!(
        (19..=21).contains(&ready_in),
        "ready within the fleet's 20 s, told {ready_in} s"
    );

    let changed = FleetSettings {
        heartbeat_ms: 1000,
        unhealthy_after: 2,
        ..FleetSettings::of(&berth_proto::fleet::v1::Fleet::default())
    };
    set_fleet_settings(&store, "arena", &changed).await;
    let change = process
        .push(|tell| match tell {
            Tell::HeartbeatIntervalChange(change) => Some(*change),
            _ => None,
        })
        .await;
    assert_eq!(
        (change.heartbeat_interval_ms, change.unhealthy_after_missed_heartbeats),
        (1000, 2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unhealthy_reports_in_a_row_end_the_process() {
    let (_redis, store, _service, mut process) = one_process(&fast(), true).await;
    // One bad report is forgiven when the next is healthy.
    process.heartbeat(pb::ProcessHealth::Unhealthy, 0).await.unwrap();
    process.heartbeat(pb::ProcessHealth::Healthy, 0).await.unwrap();
    process.heartbeat(pb::ProcessHealth::Unhealthy, 0).await.unwrap();
    process.heartbeat(pb::ProcessHealth::Unhealthy, 0).await.unwrap();
    let ended = process.heartbeat(pb::ProcessHealth::Unhealthy, 0).await;
    assert_eq!(ended.unwrap_err().code(), Code::FailedPrecondition);
    let forced = process
        .pushes
        .iter()
        .find_map(terminate)
        .expect("told to terminate before the stream ended");
    assert!(forced.force);
    assert_eq!(forced.reason(), pb::TerminationReason::Unhealthy);
    wait_for_event(&store, "arena", "SERVER_PROCESS_TERMINATED_UNHEALTHY").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_not_ready_in_time_is_ended() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    arena_with(&store, |settings| settings.ready_ms = 300).await;
    let service = replica(&store, &fast()).await;
    let mut process = attach(&service.endpoint(), "arena", "gs-1").await;
    let forced = process.push(terminate).await;
    assert_eq!(forced.reason(), pb::TerminationReason::ReadyTimeout);
    wait_for_event(&store, "arena", "SERVER_PROCESS_READY_TIMEOUT").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_resumes_on_another_replica_with_its_state() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let (a, b) = (replica(&store, &fast()).await, replica(&store, &fast()).await);
    let mut process = attach(&a.endpoint(), "arena", "gs-1").await;
    ok(process.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());
    let session = place_game_session(&store, "arena", "gs-1", 2).await;
    assert_eq!(process.push(started).await, session);
    let registration_id = process.registered.registration_id.clone();
    // Replica A dies; the process comes back through B within the heartbeat window.
    drop(a);
    drop(process);
    let mut resume = register("arena", "gs-1");
    resume.resume_registration_id = registration_id.clone();
    let token = token(Role::GameServer, Some(("arena", "gs-1")));
    let mut process = attach_with(&b.endpoint(), &token, resume).await.unwrap();
    assert!(process.registered.resumed);
    assert_eq!(process.registered.registration_id, registration_id);
    let desired = process.registered.desired_state.clone().unwrap();
    assert_eq!(desired.game_sessions.len(), 1, "its game session is still its own");
    // It stays alive well past the window, and nothing was declared lost.
    for _ in 0..8 {
        assert!(matches!(
            process.heartbeat(pb::ProcessHealth::Healthy, desired.version).await,
            Ok(Tell::HeartbeatAck(_))
        ));
        tokio::time::sleep(Duration::from_millis(80)).await;
    }
    assert!(process_events(&store, "arena").await.is_empty());
    // Commands now reach it through B.
    let request = pb::TerminateGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
        reason: 0,
    };
    operator(&b).await.terminate_game_server(request).await.unwrap();
    process.push(terminate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_announcement_costs_one_heartbeat() {
    let (_redis, store, _service, mut process) = one_process(&fast(), true).await;
    // Placed straight in the store, announced to nobody.
    let id = berth_domain::game_session::new_game_session_id("arena");
    let new = berth_store::sessions::NewGameSession {
        game_server_id: Some("gs-1"),
        ..berth_store::sessions::NewGameSession::new(&id, "arena", 2)
    };
    let created = berth_store::sessions::create_game_session(&store, &new, &berth_testkit::SESSION_TIMINGS).await;
    assert!(matches!(created.unwrap(), berth_store::sessions::Created::Created(..)));
    let Tell::HeartbeatAck(ack) = process.heartbeat(pb::ProcessHealth::Healthy, 0).await.unwrap() else {
        panic!("a heartbeat is answered by an ack");
    };
    let desired = ack
        .desired_state
        .expect("the ack carries the state the process is behind on");
    let session = desired.game_sessions[0].game_session.as_ref().unwrap();
    assert_eq!(session.game_session_id, id);
    assert_eq!(desired.operation(), pb::ProcessOperation::Active);
    let Tell::HeartbeatAck(ack) = process
        .heartbeat(pb::ProcessHealth::Healthy, desired.version)
        .await
        .unwrap()
    else {
        panic!("a heartbeat is answered by an ack");
    };
    assert!(ack.desired_state.is_none(), "nothing new once applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_and_bad_messages_are_refused_without_harming_other_streams() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let service = replica(&store, &fast()).await;
    let endpoint = service.endpoint();
    let mut healthy = attach(&endpoint, "arena", "gs-ok").await;

    let other_server = token(Role::GameServer, Some(("arena", "gs-2")));
    let err = attach_with(&endpoint, &other_server, register("arena", "gs-1"))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Code::PermissionDenied);
    // A fleet nobody created takes no process.
    let nowhere = token(Role::GameServer, Some(("nowhere", "gs-1")));
    let err = attach_with(&endpoint, &nowhere, register("nowhere", "gs-1"))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let other_fleet = token(Role::GameServer, Some(("other", "gs-1")));
    let err = attach_with(&endpoint, &other_fleet, register("arena", "gs-1"))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Code::PermissionDenied);
    let client = token(Role::Client, None);
    let err = attach_with(&endpoint, &client, register("arena", "gs-1"))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Code::PermissionDenied);
    let mut bad = register("arena", "gs-1");
    bad.endpoint = None;
    let own = token(Role::GameServer, Some(("arena", "gs-1")));
    let err = attach_with(&endpoint, &own, bad).await.err().unwrap();
    assert_eq!(err.code(), Code::InvalidArgument);
    let mut operator = operator(&service).await;
    let listed = operator.list_game_servers(pb::ListGameServersRequest {
        fleet_id: "arena".into(),
        page_size: 10,
        page_token: String::new(),
    });
    let ids: Vec<_> = listed
        .await
        .unwrap()
        .into_inner()
        .game_servers
        .into_iter()
        .map(|s| s.game_server_id)
        .collect();
    assert_eq!(ids, ["gs-ok"], "refused registrations changed nothing");

    // A second stream for a live registration is refused; out-of-order messages get clear errors.
    let twin = token(Role::GameServer, Some(("arena", "gs-ok")));
    let err = attach_with(&endpoint, &twin, register("arena", "gs-ok"))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), Code::AlreadyExists);
    let mut process = attach(&endpoint, "arena", "gs-1").await;
    let answer = process.heartbeat(pb::ProcessHealth::Unspecified, 0).await.unwrap();
    assert_eq!(code(answer), Code::InvalidArgument);
    let activate = Ask::ActivateGameSession(pb::ActivateGameSession {
        game_session_id: "arena/gsess-00000000-0000-0000-0000-000000000000".into(),
    });
    assert_eq!(code(process.ask(activate).await.unwrap()), Code::NotFound);
    let malformed = Ask::ActivateGameSession(pb::ActivateGameSession {
        game_session_id: "nope".into(),
    });
    assert_eq!(code(process.ask(malformed).await.unwrap()), Code::InvalidArgument);
    let again = process.ask(Ask::RegisterProcess(register("arena", "gs-1"))).await;
    assert_eq!(again.unwrap_err().code(), Code::FailedPrecondition);

    // The other stream never noticed.
    assert!(matches!(
        healthy.heartbeat(pb::ProcessHealth::Healthy, 0).await,
        Ok(Tell::HeartbeatAck(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_shutting_down_sends_its_streams_elsewhere_at_once() {
    let (_redis, _store, service, mut process) = one_process(&fast(), false).await;
    let shutdown = tokio::spawn(service.shutdown());
    let ended = tokio::time::timeout(Duration::from_secs(3), process.responses.message())
        .await
        .expect("the stream ends before the grace period");
    assert_eq!(
        ended.unwrap_err().code(),
        Code::Unavailable,
        "UNAVAILABLE: resume elsewhere"
    );
    tokio::time::timeout(Duration::from_secs(3), shutdown)
        .await
        .expect("the replica stops without waiting out the grace period")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_before_registration_is_refused() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let service = replica(&store, &fast()).await;
    let (requests, rx) = mpsc::channel(4);
    let early = AttachRequest {
        request_id: "r0".into(),
        kind: Some(Ask::Heartbeat(pb::Heartbeat {
            sequence: 1,
            health: pb::ProcessHealth::Healthy as i32,
            ..Default::default()
        })),
    };
    requests.send(early).await.unwrap();
    let channel = berth_sdk::connect(&service.endpoint(), &token(Role::GameServer, Some(("arena", "gs-1")))).await;
    let refused = SdkServiceClient::new(channel.unwrap())
        .attach(ReceiverStream::new(rx))
        .await;
    assert_eq!(refused.unwrap_err().code(), Code::FailedPrecondition);
    let mut operator = operator(&service).await;
    let described = operator.describe_game_server(pb::DescribeGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
    });
    assert_eq!(
        described.await.unwrap_err().code(),
        Code::NotFound,
        "nothing was registered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_stall_longer_than_the_window_kills_no_process() {
    let redis = berth_testkit::RedisServer::start();
    let store = Store::connect(&redis.config()).await.unwrap();
    arena(&store).await;
    let service = replica(&store, &fast()).await;
    let mut process = attach(&service.endpoint(), "arena", "gs-1").await;
    ok(process.ask(Ask::Ready(pb::ProcessReady::default())).await.unwrap());

    // Redis answers nothing for three windows; heartbeats meanwhile are answered UNAVAILABLE, not lost.
    redis.pause();
    let stalled = tokio::time::Instant::now();
    while stalled.elapsed() < Duration::from_millis(900) {
        let answer = process.heartbeat(pb::ProcessHealth::Healthy, 0).await.unwrap();
        assert!(!matches!(&answer, Tell::Reply(reply) if reply.code == Code::FailedPrecondition as i32));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    redis.resume();
    for _ in 0..15 {
        let answer = process.heartbeat(pb::ProcessHealth::Healthy, 0).await;
        assert!(answer.is_ok(), "the stream lives on: {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        process_events(&store, "arena").await.is_empty(),
        "nobody was declared dead"
    );
}

/// A new registration is told the desired state that a read of it finds, without the read: the one its attach
/// wrote (version 0, INITIALIZING, told nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_registration_is_told_the_desired_state_its_attach_wrote() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    anywhere_fleet(&store, "arena", &["home"]).await;
    let joined = registered_through(&store, "gs-1", "replica-0").await;
    let read = processes::desired_state(&store, "arena", "gs-1").await.unwrap();
    assert!(read.is_some(), "the process is known");
    assert_eq!(joined.desired, read);
}

/// Registers process `id` of fleet "arena" through `replica`, straight through the store.
async fn registered_through(store: &Store, id: &str, replica: &str) -> Box<Joined> {
    let registration = Registration {
        location: "home".to_owned(),
        ip_address: "10.0.0.1".to_owned(),
        port: 7000,
        max_sessions: 1,
        max_players: 4,
        sdk_version: "5.0.0".to_owned(),
        ..Default::default()
    };
    let attach = Attach {
        fleet_id: "arena",
        game_server_id: id,
        instance_id: "i-1",
        registration_id: id,
        resume: None,
        replica,
        attempt: 0,
        introduction: Introduction {
            registration: &registration,
            data: "",
            labels: &[],
            ports: &[],
        },
    };
    let Attached::Registered(joined) = processes::attach(store, &attach, &STORE_TIMINGS).await.unwrap() else {
        panic!("{id} registers");
    };
    joined
}

/// Attaches process `id` of fleet "arena" through `replica` and makes it ready, straight through the store: its
/// registration id and attach number.
async fn attached_through(store: &Store, id: &str, replica: &str) -> Heartbeat {
    let number = registered_through(store, id, replica).await.attach;
    let process = ProcessRef {
        fleet_id: "arena",
        game_server_id: id,
        registration_id: id,
    };
    processes::ready(store, &process, None).await.unwrap().expect("ready");
    Heartbeat {
        game_server_id: Arc::from(id),
        registration_id: Arc::from(id),
        attach: number,
        healthy: true,
        game_state: "ACTIVE",
        players: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_whose_replica_stopped_writing_gets_one_more_window_and_one_on_a_writing_replica_none() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    anywhere_fleet(&store, "arena", &["home"]).await;
    // Lost after 3 silent periods of 200 ms: a 600 ms window.
    let settings = FleetSettings {
        heartbeat_ms: 200,
        ..fast_settings()
    };
    set_fleet_settings(&store, "arena", &settings).await;
    let window = Duration::from_millis(600);
    // The stream of "stranded" is open on a replica that stops writing (killed, or cut off from Redis); "hung" and
    // "beating" are on one that goes on writing, "hung" never heartbeating again.
    let stranded = attached_through(&store, "stranded", "cut-off").await;
    let hung = attached_through(&store, "hung", "writing").await;
    let beating = attached_through(&store, "beating", "writing").await;
    let write = |beats: Vec<Heartbeat>, replica: &'static str| {
        let store = store.clone();
        async move {
            let writer = endings::Writer {
                replica,
                kept_up: Duration::from_secs(3600),
            };
            endings::record_heartbeats(&store, "arena", &beats, &STORE_TIMINGS, writer)
                .await
                .unwrap();
        }
    };
    write(vec![stranded], "cut-off").await;
    write(vec![hung, beating.clone()], "writing").await;
    let started = tokio::time::Instant::now();
    let mut lost: Vec<(Duration, String)> = Vec::new();
    while started.elapsed() < window * 3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        write(vec![beating.clone()], "writing").await;
        let judge = endings::Judge {
            replica: "monitor",
            answered: Duration::from_secs(60),
            lag: Duration::ZERO,
        };
        let swept = endings::sweep(&store, "arena", 100, &STORE_TIMINGS, judge)
            .await
            .unwrap();
        lost.extend(
            swept
                .lost
                .into_iter()
                .map(|lost| (started.elapsed(), lost.game_server_id)),
        );
    }
    let when = |id: &str| {
        lost.iter()
            .find(|(_, lost)| lost == id)
            .map(|(at, _)| *at)
            .unwrap_or_else(|| panic!("{id} declared lost: {lost:?}"))
    };
    assert!(!lost.iter().any(|(_, id)| id == "beating"), "{lost:?}");
    assert!(when("hung") < window + Duration::from_millis(250), "{lost:?}");
    assert!(when("stranded") >= window * 2, "{lost:?}");
}
