//! The example game server, as a real process on the SDK, against two real health replicas and a real Redis: it
//! registers, becomes ready, hosts a game session, refuses a player it cannot check, honours a terminate by
//! ending and exiting, and when killed outright is found dead and its session ended. Many servers resuming over and
//! over while Redis is held past the replicas' patience all come through it alive.

use std::time::Duration;

use berth_proto::health::v1 as pb;
use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_runtime::auth::Role;
use berth_store::Store;
use berth_store::fleets::{FleetEventEntry, recent_fleet_events};
use berth_store::pool::pool_sizes;
use berth_testkit::{
    BinaryProcess, ExampleGameServer, RunningService, TestRedis, anywhere_fleet, fast_settings, game_session_status,
    place_game_session, process_events, set_fleet_settings, spawn_service, token, wait_for_health,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tonic_health::pb::health_check_response::ServingStatus;

/// A replica that writes heartbeats and sweeps at once; the fleet's processes beat every 100 ms, lost after 3 missed
/// (`fast_settings`).
fn fast() -> berth_health::HealthArgs {
    berth_health::HealthArgs {
        initial_delay_ms: 500,
        heartbeat_flush_ms: 5,
        monitor_sweep_ms: 50,
        ..Default::default()
    }
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..200 {
        if let Some(found) = check().await {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} never happened");
}

async fn event(store: &Store, fleet: &str, code: &str) -> FleetEventEntry {
    eventually(code, async || {
        let events = recent_fleet_events(store, fleet, 20).await.unwrap();
        events.into_iter().find(|event| event.code_name() == code)
    })
    .await
}

async fn session_status(store: &Store, session: &str, wanted: (&str, &str)) {
    eventually(&format!("session {session} {wanted:?}"), async || {
        let status = game_session_status(store, session).await?;
        (status.0 == wanted.0 && status.1 == wanted.1).then_some(())
    })
    .await
}

/// Waits until the process is ready (in the pool) and places a game session on it.
async fn ready_with_session(store: &Store, fleet: &str, id: &str) -> String {
    eventually("ready", async || {
        (pool_sizes(store, fleet).await.unwrap().0 == 1).then_some(())
    })
    .await;
    let session = place_game_session(store, fleet, id, 4).await;
    session_status(store, &session, ("ACTIVE", "")).await;
    session
}

async fn replicas(store: &Store) -> (RunningService, RunningService) {
    let a = spawn_service(berth_health::service(store.clone(), &fast()), store.clone()).await;
    let b = spawn_service(berth_health::service(store.clone(), &fast()), store.clone()).await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_game_server_hosts_a_session_and_honours_a_terminate() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    anywhere_fleet(&store, "arena", &["local"]).await;
    set_fleet_settings(&store, "arena", &fast_settings()).await;
    let (a, b) = replicas(&store).await;
    let mut process = ExampleGameServer::spawn(&format!("{},{}", a.endpoint(), b.endpoint()), "arena", "gs-1");
    let session = ready_with_session(&store, "arena", "gs-1").await;

    // A player whose session cannot be checked yet is turned away at the door.
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", process.port))
        .await
        .unwrap();
    let (read, mut write) = stream.into_split();
    write.write_all(b"JOIN s-1 ps-1\n").await.unwrap();
    let mut answer = String::new();
    BufReader::new(read).read_line(&mut answer).await.unwrap();
    assert!(answer.starts_with("REFUSED"), "{answer}");

    let operator = berth_sdk::connect(&b.endpoint(), &token(Role::Operator, None))
        .await
        .unwrap();
    let request = pb::TerminateGameServerRequest {
        fleet_id: "arena".into(),
        game_server_id: "gs-1".into(),
        reason: pb::TerminationReason::ScaleIn as i32,
    };
    GameServerServiceClient::new(operator)
        .terminate_game_server(request)
        .await
        .unwrap();
    let exited = eventually("exit", async || process.child.try_wait().unwrap()).await;
    assert!(exited.success(), "the process ends cleanly when told to: {exited:?}");
    event(&store, "arena", "SERVER_PROCESS_TERMINATED").await;
    session_status(&store, &session, ("TERMINATED", "TRIGGERED_ON_PROCESS_TERMINATE")).await;
    assert!(
        process_events(&store, "arena")
            .await
            .iter()
            .all(|e| e.code_name() == "SERVER_PROCESS_TERMINATED")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_game_server_is_found_dead_and_its_session_ends() {
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    anywhere_fleet(&store, "arena", &["local"]).await;
    set_fleet_settings(&store, "arena", &fast_settings()).await;
    let (a, b) = replicas(&store).await;
    let process = ExampleGameServer::spawn(&format!("{},{}", a.endpoint(), b.endpoint()), "arena", "gs-1");
    let session = ready_with_session(&store, "arena", "gs-1").await;

    drop(process);
    let crashed = event(&store, "arena", "SERVER_PROCESS_CRASHED").await;
    assert_eq!(crashed.game_server_id, "gs-1");
    session_status(&store, &session, ("ERROR", "SERVER_CRASHED")).await;
    assert_eq!(pool_sizes(&store, "arena").await.unwrap(), (0, 0));
}

async fn replica_of(store: &Store, fleet: &str, id: &str) -> String {
    let key = berth_store::keys::FleetKeys::new(fleet).game_server(id);
    store.query(redis::cmd("HGET").arg(key).arg("replica")).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_a_health_replica_is_killed_its_servers_move_and_none_is_declared_dead() {
    let redis = berth_testkit::RedisServer::start();
    let store = Store::connect(&redis.config()).await.unwrap();
    anywhere_fleet(&store, "arena", &["local"]).await;
    set_fleet_settings(&store, "arena", &fast_settings()).await;
    let key = String::from_utf8(berth_testkit::TEST_KEY.to_vec()).unwrap();
    let replica = |name: &str| {
        let envs = [
            ("BERTH_REDIS_URL", redis.url()),
            ("BERTH_AUTH_KEY", key.clone()),
            ("BERTH_REPLICA_ID", name.to_owned()),
            ("BERTH_HEALTH_INITIAL_DELAY_MS", "500".to_owned()),
            ("BERTH_MONITOR_SWEEP_MS", "50".to_owned()),
        ];
        BinaryProcess::spawn("berth-health", &envs)
    };
    let mut replicas = [replica("replica-a"), replica("replica-b")];
    for endpoint in replicas.iter().map(BinaryProcess::endpoint) {
        wait_for_health(&endpoint, "", ServingStatus::Serving).await;
    }
    let endpoints = format!("{},{}", replicas[0].endpoint(), replicas[1].endpoint());
    let ids: Vec<String> = (0..8).map(|i| format!("gs-{i}")).collect();
    let _processes: Vec<_> = ids
        .iter()
        .map(|id| ExampleGameServer::spawn(&endpoints, "arena", id))
        .collect();
    eventually("all ready", async || {
        (pool_sizes(&store, "arena").await.unwrap().0 == 8).then_some(())
    })
    .await;
    // The balancer spreads streams at random: the replica killed is the one holding more of them.
    let mut on_a = 0;
    for id in &ids {
        on_a += usize::from(replica_of(&store, "arena", id).await == "replica-a");
    }
    let (victim, survivor) = if on_a >= 4 { (0, "replica-b") } else { (1, "replica-a") };
    replicas[victim].kill();
    for id in &ids {
        eventually("resumed on the survivor", async || {
            (replica_of(&store, "arena", id).await == survivor).then_some(())
        })
        .await;
    }
    // Well past the health window (3 × 100 ms), every server is alive and claimable, and no death was recorded.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(pool_sizes(&store, "arena").await.unwrap(), (8, 0));
    assert!(process_events(&store, "arena").await.is_empty());
}

/// Redis held for longer than the replicas wait on it (every client paused 2.5 s, replicas giving up after 0.5 s):
/// every server stops hearing acks, resumes, and resumes again as its tries time out, while the tries it gave up on
/// wait in Redis beside the newer ones, to run in any order once Redis is back. Not one server is declared lost or
/// told it is: a try that comes late must not take the registration from the stream that is live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_resume_many_times_while_redis_is_held_all_survive() {
    const SERVERS: u64 = 60;
    let redis = TestRedis::single();
    let store = Store::connect(&redis.config()).await.unwrap();
    anywhere_fleet(&store, "arena", &["local"]).await;
    set_fleet_settings(&store, "arena", &fast_settings()).await;
    let impatient = Store::connect(&berth_store::RedisConfig {
        response_timeout: Duration::from_millis(500),
        ..redis.config()
    })
    .await
    .unwrap();
    let (a, b) = replicas(&impatient).await;
    let endpoints = format!("{},{}", a.endpoint(), b.endpoint());
    let mut servers = Vec::new();
    for i in 0..SERVERS {
        let config = berth_testkit::game_server_config(&endpoints, "arena", &format!("gs-{i}"), "local", 1, 0);
        let (server, events) = berth_sdk::game_server::GameServer::connect(config).await.unwrap();
        server.ready().await.unwrap();
        servers.push((server, events));
    }
    eventually("all ready", async || {
        (pool_sizes(&store, "arena").await.unwrap().0 == SERVERS).then_some(())
    })
    .await;

    redis.client_pause(Duration::from_millis(2500));
    tokio::time::sleep(Duration::from_secs(6)).await;

    for (server, events) in &mut servers {
        while let Ok(Some(event)) = tokio::time::timeout(Duration::ZERO, events.recv()).await {
            assert!(
                !matches!(event, berth_sdk::game_server::Event::Lost { .. }),
                "{} was told it is lost: {event:?}",
                server.game_server_id()
            );
        }
    }
    assert!(
        process_events(&store, "arena").await.is_empty(),
        "{:?}",
        process_events(&store, "arena").await
    );
    assert_eq!(pool_sizes(&store, "arena").await.unwrap(), (SERVERS, 0));
    // The hold made servers try more than once (the first registration was try 1), or nothing was raced.
    let mut most = 0;
    for i in 0..SERVERS {
        let key = berth_store::keys::FleetKeys::new("arena").game_server(&format!("gs-{i}"));
        let tries: u32 = store.query(redis::cmd("HGET").arg(key).arg("try")).await.unwrap();
        most = most.max(tries);
    }
    assert!(most >= 3, "at most {most} tries");
}
