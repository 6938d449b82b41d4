//! berth-agent through Agones' official Rust SDK (the `agones` crate) as the game server's client, against a real
//! health service and a real Redis, single node and cluster: what an Agones game server sees of its life on Berth.

use std::collections::HashMap;
use std::time::Duration;

use agones::Sdk;
use berth_agent::Agent;
use berth_agent::record::SESSION_ID;
use berth_proto::agones::allocation::allocation_service_client::AllocationServiceClient;
use berth_proto::agones::allocation::{
    AllocationRequest, CounterAction, CounterSelector, GameServerSelector, ListAction, ListSelector, MetaPatch,
};
use berth_runtime::auth::Role;
use berth_store::Store;
use berth_testkit::{
    RunningService, TestRedis, anywhere_fleet, game_server_config, game_session_status, place_game_session,
    process_events, spawn_service, token,
};

mod agent {
    mod fleet;
}

const FLEET: &str = "agones-fleet";

/// A health replica over `redis` with the fleet created (ANYWHERE, in "local").
async fn health(redis: &TestRedis) -> (Store, RunningService) {
    let store = Store::connect(&redis.config()).await.expect("redis reachable");
    anywhere_fleet(&store, FLEET, &["local"]).await;
    let service = spawn_service(
        berth_health::service(store.clone(), &berth_health::HealthArgs::default()),
        store.clone(),
    )
    .await;
    (store, service)
}

/// An agent serving both faces of the SDK on free loopback ports.
async fn start_agent(config: berth_sdk::GameServerConfig) -> Agent {
    let any = "127.0.0.1:0".parse().unwrap();
    Agent::start(config, Default::default(), any, any).await.unwrap()
}

/// An agent for server `id` and the official SDK connected to it.
async fn agones_server(health: &RunningService, id: &str) -> (Agent, Sdk) {
    let config = game_server_config(&health.endpoint(), FLEET, id, "local", 1, 0);
    let agent = start_agent(config).await;
    let sdk = Sdk::new_with_host(Some("http://127.0.0.1".into()), Some(agent.grpc_address().port()), None)
        .await
        .expect("the agent serves the Agones SDK");
    (agent, sdk)
}

fn state(server: &agones::GameServer) -> String {
    server
        .status
        .as_ref()
        .map(|status| status.state.clone())
        .unwrap_or_default()
}

/// Goes Ready, is placed on, sees Allocated with its game session through WatchGameServer, sets a label and an
/// annotation, and ends its game session with Shutdown.
async fn an_agones_server_lives_its_life_on_berth(redis: TestRedis) {
    let (store, health) = health(&redis).await;
    let (_agent, mut sdk) = agones_server(&health, "gs-agones-1").await;

    let before = sdk.get_gameserver().await.unwrap();
    assert_eq!(state(&before), "Scheduled");
    assert_eq!(before.object_meta.as_ref().unwrap().name, "gs-agones-1");
    sdk.ready().await.unwrap();
    let mut watch = sdk.watch_gameserver().await.unwrap();
    let first = watch.message().await.unwrap().expect("the watch opens with the record");
    assert_eq!(state(&first), "Ready");
    let status = first.status.unwrap();
    assert_eq!(status.address, "10.0.0.7");
    assert_eq!(status.ports[0].port, 7777);

    let game_session_id = place_game_session(&store, FLEET, "gs-agones-1", 4).await;
    let allocated = allocated_over_grpc(&mut watch).await;
    let annotations = allocated.object_meta.unwrap().annotations;
    assert_eq!(annotations.get(SESSION_ID), Some(&game_session_id));

    sdk.set_label("mode", "ranked").await.unwrap();
    sdk.set_annotation("map", "dust").await.unwrap();
    let labelled = sdk.get_gameserver().await.unwrap().object_meta.unwrap();
    assert_eq!(
        labelled.labels.get("agones.dev/sdk-mode").map(String::as_str),
        Some("ranked")
    );
    assert_eq!(
        labelled.annotations.get("agones.dev/sdk-map").map(String::as_str),
        Some("dust")
    );

    sdk.shutdown().await.unwrap();
    assert_eq!(state(&sdk.get_gameserver().await.unwrap()), "Shutdown");
    let (status, _) = game_session_status(&store, &game_session_id).await.unwrap();
    assert_eq!(status, "TERMINATED", "Shutdown ends the game session the server hosted");
}

#[tokio::test]
async fn an_agones_server_lives_its_life_on_berth_on_a_single_node() {
    an_agones_server_lives_its_life_on_berth(TestRedis::single()).await;
}

#[tokio::test]
async fn an_agones_server_lives_its_life_on_berth_on_a_cluster() {
    an_agones_server_lives_its_life_on_berth(TestRedis::cluster()).await;
}

/// Calls wait for the agent's stream to Berth and then answer UNAVAILABLE, as Agones' SDK server does while it is
/// not connected.
#[tokio::test]
async fn calls_answer_unavailable_while_berth_is_unreachable() {
    let unreachable = "http://127.0.0.1:9";
    let config = game_server_config(unreachable, FLEET, "gs-agones-2", "local", 1, 0);
    let agent = start_agent(config).await;
    let channel = tonic_channel(agent.grpc_address().port()).await;
    let mut client = berth_proto::agones::sdk::sdk_client::SdkClient::new(channel);
    let error = client
        .ready(berth_proto::agones::sdk::Empty {})
        .await
        .expect_err("no stream to Berth");
    assert_eq!(error.code(), tonic::Code::Unavailable);
}

async fn tonic_channel(port: u16) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The agent binary wrapping `script` (run by sh) as server `id`, registered with `health`.
fn agent_binary(health: &RunningService, id: &str, script: &str) -> tokio::process::Child {
    agent_command(health, id, script).spawn().expect("berth-agent starts")
}

fn agent_command(health: &RunningService, id: &str, script: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_berth-agent"));
    command
        .args(["--", "sh", "-c", script])
        .env("BERTH_SDK_ENDPOINT", health.endpoint())
        .env("BERTH_SDK_TOKEN", token(Role::GameServer, Some((FLEET, id))))
        .env("BERTH_FLEET_ID", FLEET)
        .env("BERTH_GAME_SERVER_ID", id)
        .env("BERTH_INSTANCE_ID", format!("i-{id}"))
        .env("BERTH_LOCATION", "local")
        .env("BERTH_SDK_IP_ADDRESS", "10.0.0.7")
        .env("BERTH_SDK_PORT", "7777")
        .env("AGONES_SDK_GRPC_PORT", "0")
        .env("AGONES_SDK_HTTP_PORT", "0")
        .kill_on_drop(true);
    command
}

/// A server killed with SIGKILL is reported to Berth at once (a ProcessEnding naming the signal, long before any
/// heartbeat would be missed), and the agent exits as a shell reports such a death.
#[tokio::test]
async fn a_server_killed_is_reported_at_once_and_the_agent_exits_with_it() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    // The child dies of SIGKILL a moment after it starts; an SDK call of the agent waits for its registration.
    let script = "sleep 1; kill -9 $$";
    let mut agent = agent_binary(&health, "gs-agones-3", script);
    let status = tokio::time::timeout(Duration::from_secs(20), agent.wait())
        .await
        .expect("the agent exits with its server")
        .unwrap();
    assert_eq!(status.code(), Some(137), "128 + SIGKILL");
    let events = process_events(&store, FLEET).await;
    assert!(
        events.iter().any(|event| event.game_server_id == "gs-agones-3"
            && event.message.contains("the game server exited: killed by signal 9")),
        "the ending is recorded with how the server died: {events:?}"
    );
}

/// An agent whose server exits while Berth is out of reach still exits with it (after trying to tell Berth for a
/// bounded time): a fleet's instance is never held up by an agent waiting on a control plane that is gone.
#[tokio::test]
async fn the_agent_exits_with_its_server_while_berth_is_gone() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    let mut agent = agent_binary(&health, "gs-agones-17", "sleep 3");
    tokio::time::timeout(Duration::from_secs(10), async {
        while berth_store::processes::describe(&store, FLEET, "gs-agones-17")
            .await
            .unwrap()
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the agent registers its server");
    health.shutdown().await;
    let status = tokio::time::timeout(Duration::from_secs(30), agent.wait())
        .await
        .expect("the agent exits with its server")
        .unwrap();
    assert_eq!(status.code(), Some(0), "the server's own exit code");
}

/// A call of the HTTP face: its status and its body as JSON.
async fn http_call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: &str,
) -> (u16, serde_json::Value) {
    let response = client.request(method, url).body(body.to_owned()).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// The first record WatchGameServer shows Allocated, within 10 s.
async fn allocated_over_grpc<E: std::fmt::Debug>(
    watch: &mut (impl tokio_stream::Stream<Item = Result<agones::GameServer, E>> + Unpin),
) -> agones::GameServer {
    use tokio_stream::StreamExt;
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let seen = watch.next().await.expect("the watch goes on").unwrap();
            if state(&seen) == "Allocated" {
                return seen;
            }
        }
    })
    .await
    .expect("WatchGameServer shows the server Allocated")
}

/// The first record the HTTP watch (`GET /watch/gameserver`, a JSON object a line) shows Allocated, within 10 s.
async fn allocated_over_http(watch: &mut reqwest::Response) -> serde_json::Value {
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut pending = Vec::new();
        loop {
            let chunk = watch.chunk().await.unwrap().expect("the watch goes on");
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let seen: serde_json::Value = serde_json::from_slice(&line).unwrap();
                if seen["result"]["status"]["state"] == "Allocated" {
                    return seen;
                }
            }
        }
    })
    .await
    .expect("the HTTP watch shows the server Allocated")
}

/// A server written against the HTTP face alone (as with Agones' REST SDK) lives the same life: Ready, placed on
/// and seen Allocated through the watch stream, a label, Shutdown; malformed JSON is a 400 naming the problem and
/// an unknown path a 404, in the gateway's error shape.
#[tokio::test]
async fn a_server_speaking_only_http_lives_its_life_on_berth() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    let agent = start_agent(game_server_config(
        &health.endpoint(),
        FLEET,
        "gs-agones-4",
        "local",
        1,
        0,
    ))
    .await;
    let base = format!("http://{}", agent.http_address());
    let client = reqwest::Client::new();
    use reqwest::Method;

    let (code, _) = http_call(&client, Method::POST, format!("{base}/ready"), "{}").await;
    assert_eq!(code, 200);
    let (code, server) = http_call(&client, Method::GET, format!("{base}/gameserver"), "").await;
    assert_eq!(code, 200);
    assert_eq!(server["object_meta"]["name"], "gs-agones-4");
    assert_eq!(server["status"]["state"], "Ready");
    assert_eq!(server["status"]["ports"][0]["port"], 7777);

    let mut watch = client.get(format!("{base}/watch/gameserver")).send().await.unwrap();
    let game_session_id = place_game_session(&store, FLEET, "gs-agones-4", 4).await;
    let allocated = allocated_over_http(&mut watch).await;
    assert_eq!(
        allocated["result"]["object_meta"]["annotations"][SESSION_ID],
        game_session_id.as_str()
    );

    let (code, _) = http_call(
        &client,
        Method::PUT,
        format!("{base}/metadata/label"),
        r#"{"key": "mode", "value": "ranked"}"#,
    )
    .await;
    assert_eq!(code, 200);
    let (_, server) = http_call(&client, Method::GET, format!("{base}/gameserver"), "").await;
    assert_eq!(server["object_meta"]["labels"]["agones.dev/sdk-mode"], "ranked");

    let (code, error) = http_call(&client, Method::PUT, format!("{base}/metadata/label"), "{\"key\": ").await;
    assert_eq!(code, 400);
    assert_eq!(error["code"], 3);
    assert!(
        error["message"].as_str().unwrap().contains("agones.dev.sdk.KeyValue"),
        "{error}"
    );
    let (code, connected) = http_call(
        &client,
        Method::POST,
        format!("{base}/alpha/player/connect"),
        r#"{"playerID": "p9"}"#,
    )
    .await;
    assert_eq!((code, connected), (200, serde_json::json!({"bool": true})));
    let (_, connected) = http_call(&client, Method::GET, format!("{base}/alpha/player/connected/p9"), "").await;
    assert_eq!(connected, serde_json::json!({"bool": true}));
    let (_, count) = http_call(&client, Method::GET, format!("{base}/alpha/player/count"), "").await;
    assert_eq!(count, serde_json::json!({"count": "1"}), "64-bit numbers are strings");
    let (code, error) = http_call(&client, Method::GET, format!("{base}/no/such/path"), "").await;
    assert_eq!((code, error["code"].clone()), (404, serde_json::json!(5)));
    let (code, error) = http_call(&client, Method::GET, format!("{base}/ready"), "").await;
    assert_eq!(
        (code, error["code"].clone()),
        (501, serde_json::json!(12)),
        "a known path, another method"
    );

    let (code, _) = http_call(&client, Method::POST, format!("{base}/shutdown"), "{}").await;
    assert_eq!(code, 200);
    let (_, server) = http_call(&client, Method::GET, format!("{base}/gameserver"), "").await;
    assert_eq!(server["status"]["state"], "Shutdown");
    let (status, _) = game_session_status(&store, &game_session_id).await.unwrap();
    assert_eq!(status, "TERMINATED");
}

/// The status of player session `id` as Berth stores it ("RESERVED", "ACTIVE", "COMPLETED", …).
async fn player_session_status(store: &Store, fleet_id: &str, id: &str) -> String {
    berth_store::sessions::read_player_sessions(store, fleet_id, &[id])
        .await
        .unwrap()
        .pop()
        .flatten()
        .and_then(|record| record.status)
        .map(|status| status.as_str().to_owned())
        .unwrap_or_default()
}

/// Player tracking: a player holding a reservation in the hosted game session is accepted into it on
/// PlayerConnect and completed on PlayerDisconnect; one without connects all the same; the capacity is enforced
/// with Agones' error; the lists and counts follow, and GetGameServer shows them.
#[tokio::test]
async fn player_tracking_follows_the_players_and_their_reservations() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    let (_agent, mut sdk) = agones_server(&health, "gs-agones-5").await;
    sdk.ready().await.unwrap();
    let game_session_id = place_game_session(&store, FLEET, "gs-agones-5", 4).await;
    tokio::time::timeout(Duration::from_secs(10), async {
        while game_session_status(&store, &game_session_id)
            .await
            .map(|(status, _)| status)
            != Some("ACTIVE".to_owned())
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the agent activates the game session placed on its server");
    let created = berth_store::sessions::create_player_sessions(&store, FLEET, &game_session_id, &[("p1", "")])
        .await
        .unwrap();
    let berth_store::sessions::PlayersCreated::Created(reserved) = created else {
        panic!("a slot is reserved: {created:?}");
    };
    let p1_session = reserved[0].player_session_id.clone();

    let mut alpha = sdk.alpha().clone();
    assert_eq!(
        alpha.get_player_capacity().await.unwrap(),
        1000,
        "the process's max_players"
    );
    assert!(alpha.player_connect("p1").await.unwrap());
    assert_eq!(player_session_status(&store, FLEET, &p1_session).await, "ACTIVE");
    assert!(!alpha.player_connect("p1").await.unwrap(), "already connected");
    assert!(
        alpha.player_connect("p2").await.unwrap(),
        "no reservation: connected all the same"
    );
    alpha.set_player_capacity(2).await.unwrap();
    match alpha.player_connect("p3").await {
        Err(agones::errors::Error::Rpc(status)) => assert_eq!(status.message(), "players are already at capacity"),
        other => panic!("a player beyond the capacity is refused: {other:?}"),
    }
    assert!(alpha.is_player_connected("p2").await.unwrap());
    assert!(!alpha.is_player_connected("p3").await.unwrap());
    assert_eq!(alpha.get_connected_players().await.unwrap(), ["p1", "p2"]);
    let players = sdk.get_gameserver().await.unwrap().status.unwrap().players.unwrap();
    assert_eq!((players.count, players.capacity), (2, 2));

    assert!(alpha.player_disconnect("p1").await.unwrap());
    assert_eq!(player_session_status(&store, FLEET, &p1_session).await, "COMPLETED");
    assert!(!alpha.player_disconnect("p1").await.unwrap(), "no longer connected");
    assert_eq!(alpha.get_player_count().await.unwrap(), 1);
}

/// Places a game session anywhere in the fleet's location, as CreateGameSession does; the server it went to, if any.
async fn place_anywhere(store: &Store) -> Option<String> {
    use berth_store::sessions::{Created, NewGameSession, create_game_session};
    let id = berth_domain::game_session::new_game_session_id(FLEET);
    let new = NewGameSession {
        location: "local",
        ..NewGameSession::new(&id, FLEET, 4)
    };
    match create_game_session(store, &new, &berth_testkit::SESSION_TIMINGS)
        .await
        .unwrap()
    {
        Created::Created(record, _) => Some(record.game_server_id),
        Created::NoServer => None,
        other => panic!("a placement is placed or finds no server: {other:?}"),
    }
}

/// Reserve holds a server out of a burst of placements racing for the fleet's two ready servers: only the other
/// one is taken, once. When the reservation lapses (the claim sweep) the server is Ready and placed on again.
#[tokio::test]
async fn reserve_holds_a_server_out_of_a_burst_of_placements_until_it_lapses() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    let (_reserved_agent, mut reserved) = agones_server(&health, "gs-agones-6").await;
    let (_other_agent, mut other) = agones_server(&health, "gs-agones-7").await;
    reserved.ready().await.unwrap();
    other.ready().await.unwrap();
    // 0 holds it until told; Ready tells it.
    reserved.reserve(Duration::ZERO).await.unwrap();
    assert_eq!(state(&reserved.get_gameserver().await.unwrap()), "Reserved");
    reserved.ready().await.unwrap();
    assert_eq!(state(&reserved.get_gameserver().await.unwrap()), "Ready");
    reserved.reserve(Duration::from_secs(30)).await.unwrap();
    assert_eq!(state(&reserved.get_gameserver().await.unwrap()), "Reserved");

    let burst: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { place_anywhere(&store).await })
        })
        .collect();
    let mut placed = Vec::new();
    for task in burst {
        placed.extend(task.await.unwrap());
    }
    assert_eq!(placed, ["gs-agones-7"], "one session, on the server not reserved");

    reserved.reserve(Duration::from_secs(1)).await.unwrap();
    let mut watch = reserved.watch_gameserver().await.unwrap();
    assert_eq!(state(&watch.message().await.unwrap().unwrap()), "Reserved");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // The placement service's claim sweep, which this test runs by hand.
    berth_store::pool::expire_claims(&store, FLEET, 100).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while state(&watch.message().await.unwrap().unwrap()) != "Ready" {}
    })
    .await
    .expect("the watch shows the server Ready once its reservation lapsed");
    assert_eq!(place_anywhere(&store).await.as_deref(), Some("gs-agones-6"));
}

/// A registration Berth refuses for good (here: a fleet with no record) is not retried: every call answers the
/// refusal rather than UNAVAILABLE, and the child is told to end, since it can never take a match.
#[tokio::test]
async fn a_final_refusal_is_answered_and_ends_the_server() {
    let redis = TestRedis::single();
    let (_store, health) = health(&redis).await;
    let mut config = game_server_config(&health.endpoint(), "no-such-fleet", "gs-agones-8", "local", 1, 0);
    config.token = token(Role::GameServer, Some(("no-such-fleet", "gs-agones-8")));
    let mut agent = start_agent(config).await;
    let channel = tonic_channel(agent.grpc_address().port()).await;
    let mut client = berth_proto::agones::sdk::sdk_client::SdkClient::new(channel);
    let refused = client
        .ready(berth_proto::agones::sdk::Empty {})
        .await
        .expect_err("the fleet does not exist");
    assert_ne!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().starts_with("Berth refused this game server"),
        "{refused:?}"
    );
    tokio::time::timeout(Duration::from_secs(5), agent.child_must_end())
        .await
        .expect("the child is told to end");
}

/// A server that ignores SIGTERM is killed once its grace has passed, as Kubernetes kills a pod's container, and the
/// agent exits as a shell reports such a death.
#[tokio::test]
async fn a_server_that_ignores_sigterm_is_killed_after_its_grace() {
    let redis = TestRedis::single();
    let (_store, health) = health(&redis).await;
    let mut agent = agent_command(&health, "gs-agones-9", "trap '' TERM; exec sleep 30")
        .env("BERTH_AGENT_KILL_AFTER_SECONDS", "1")
        .spawn()
        .expect("berth-agent starts");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // SAFETY: kill(2) has no memory effects.
    unsafe { libc::kill(agent.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(10), agent.wait())
        .await
        .expect("the agent exits once its server is killed")
        .unwrap();
    assert_eq!(status.code(), Some(137), "128 + SIGKILL");
}

/// A placement service over `store`, whose claims lapse after `claim_timeout_ms`, and a matchmaker's client of its
/// Agones allocation API.
async fn allocator(
    store: &Store,
    claim_timeout_ms: u64,
) -> (RunningService, AllocationServiceClient<berth_sdk::AuthedChannel>) {
    let args = berth_placement::PlacementArgs {
        claim_timeout_ms,
        claim_sweep_ms: 100,
        ..Default::default()
    };
    let service = spawn_service(berth_placement::service(store.clone(), &args), store.clone()).await;
    let channel = berth_sdk::connect(&service.endpoint(), &token(Role::Client, None))
        .await
        .unwrap();
    (service, AllocationServiceClient::new(channel))
}

/// An allocation of the fleet's servers with these labels besides.
fn allocation(labels: &[(&str, &str)]) -> AllocationRequest {
    let mut match_labels: HashMap<String, String> =
        labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    match_labels.insert("agones.dev/fleet".into(), FLEET.into());
    AllocationRequest {
        namespace: "default".into(),
        game_server_selectors: vec![GameServerSelector {
            match_labels,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A matchmaker allocates by a label the server set through the SDK; the server sees itself Allocated, with the
/// allocation's annotations, through WatchGameServer, and stays so after the claim timeout (the agent made the
/// allocation its own), while the other server is still there to allocate.
async fn an_agones_allocation_by_label_reaches_the_server(redis: TestRedis) {
    let (store, health) = health(&redis).await;
    let (_placement, mut allocator) = allocator(&store, 300).await;
    let (_ranked_agent, mut ranked) = agones_server(&health, "gs-agones-10").await;
    let (_other_agent, mut other) = agones_server(&health, "gs-agones-11").await;
    ranked.ready().await.unwrap();
    other.ready().await.unwrap();
    ranked.set_label("mode", "ranked").await.unwrap();
    let mut watch = ranked.watch_gameserver().await.unwrap();
    assert_eq!(state(&watch.message().await.unwrap().unwrap()), "Ready");

    let mut request = allocation(&[("agones.dev/sdk-mode", "ranked")]);
    request.metadata = Some(MetaPatch {
        labels: HashMap::from([("match".to_owned(), "m-1".to_owned())]),
        annotations: HashMap::from([("map".to_owned(), "dust".to_owned())]),
    });
    let answer = allocator.allocate(request).await.unwrap().into_inner();
    assert_eq!(answer.game_server_name, "gs-agones-10");
    assert_eq!(answer.address, "10.0.0.7");
    assert_eq!(answer.ports[0].port, 7777);

    let allocated = allocated_over_grpc(&mut watch).await;
    let meta = allocated.object_meta.unwrap();
    assert_eq!(meta.annotations.get("map").map(String::as_str), Some("dust"));
    assert_eq!(meta.labels.get("match").map(String::as_str), Some("m-1"));

    // Well past the claim timeout and a sweep, it is still Allocated and not allocated again.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(state(&ranked.get_gameserver().await.unwrap()), "Allocated");
    let again = allocator
        .allocate(allocation(&[("agones.dev/sdk-mode", "ranked")]))
        .await
        .unwrap_err();
    assert_eq!(again.code(), tonic::Code::ResourceExhausted);
    let rest = allocator.allocate(allocation(&[])).await.unwrap().into_inner();
    assert_eq!(rest.game_server_name, "gs-agones-11");
}

#[tokio::test]
async fn an_agones_allocation_by_label_reaches_the_server_on_a_single_node() {
    an_agones_allocation_by_label_reaches_the_server(TestRedis::single()).await;
}

#[tokio::test]
async fn an_agones_allocation_by_label_reaches_the_server_on_a_cluster() {
    an_agones_allocation_by_label_reaches_the_server(TestRedis::cluster()).await;
}

/// Reserve holds a server out of a burst of allocations racing for the fleet's two ready servers: only the other
/// is allocated, once.
#[tokio::test]
async fn reserve_holds_a_server_out_of_a_burst_of_allocations() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    let (_placement, allocator) = allocator(&store, 60_000).await;
    let (_reserved_agent, mut reserved) = agones_server(&health, "gs-agones-12").await;
    let (_other_agent, mut other) = agones_server(&health, "gs-agones-13").await;
    reserved.ready().await.unwrap();
    other.ready().await.unwrap();
    reserved.reserve(Duration::from_secs(30)).await.unwrap();
    let burst: Vec<_> = (0..16)
        .map(|_| {
            let mut allocator = allocator.clone();
            tokio::spawn(async move { allocator.allocate(allocation(&[])).await })
        })
        .collect();
    let mut allocated = Vec::new();
    for task in burst {
        match task.await.unwrap() {
            Ok(answer) => allocated.push(answer.into_inner().game_server_name),
            Err(status) => assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}"),
        }
    }
    assert_eq!(
        allocated,
        ["gs-agones-13"],
        "one allocation, of the server not reserved"
    );
    assert_eq!(state(&reserved.get_gameserver().await.unwrap()), "Reserved");
}

/// An agent for server `id` declaring a counter `rooms` (0 of `rooms`) and an empty list `players` of capacity
/// `players`, as --counter and --list do.
/// Labels the server sets while allocations write theirs on it are all kept: each is set where the labels are
/// stored, so neither side's write replaces the other's.
#[tokio::test]
async fn labels_set_by_the_server_and_by_allocations_at_once_are_all_kept() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    let (_placement, allocator) = allocator(&store, 60_000).await;
    let (_agent, mut sdk) = agones_server(&health, "gs-agones-16").await;
    sdk.ready().await.unwrap();
    let patched = |label: String| {
        let mut request = allocation(&[]);
        request.metadata = Some(MetaPatch {
            labels: HashMap::from([(label, "x".to_owned())]),
            annotations: HashMap::new(),
        });
        request
    };
    allocator.clone().allocate(patched("first".into())).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    // The agent paces SDK calls (45 a second): the allocations are spread over the same time.
    for i in 0..30 {
        let mut sdk = sdk.clone();
        tasks.spawn(async move {
            sdk.set_label(&format!("s{i}"), "x")
                .await
                .map(|_| ())
                .map_err(|e| format!("{e:?}"))
        });
        let mut allocator = allocator.clone();
        let mut again = patched(format!("a{i}"));
        again.game_server_selectors[0].game_server_state =
            berth_proto::agones::allocation::game_server_selector::GameServerState::Allocated as i32;
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(20 * i)).await;
            allocator
                .allocate(again)
                .await
                .map(|_| ())
                .map_err(|e| format!("{e:?}"))
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap().unwrap();
    }
    let labels = sdk.get_gameserver().await.unwrap().object_meta.unwrap().labels;
    for i in 0..30 {
        assert!(
            labels.contains_key(&format!("agones.dev/sdk-s{i}")),
            "s{i} lost: {labels:?}"
        );
        assert!(labels.contains_key(&format!("a{i}")), "a{i} lost: {labels:?}");
    }
    assert!(labels.contains_key("first"));
}

async fn counting_agent(health: &RunningService, id: &str, rooms: i64, players: i64) -> Agent {
    let config = game_server_config(&health.endpoint(), FLEET, id, "local", 1, 0);
    let declared = berth_proto::health::v1::UpdateServer {
        counters: vec![berth_proto::health::v1::ServerCounter {
            name: "rooms".into(),
            count: 0,
            capacity: rooms,
        }],
        lists: vec![berth_proto::health::v1::ServerList {
            name: "players".into(),
            capacity: players,
            values: Vec::new(),
        }],
        ..Default::default()
    };
    let any = "127.0.0.1:0".parse().unwrap();
    Agent::start(config, declared, any, any).await.unwrap()
}

/// Counters and lists declared at the agent's start live with the Berth process: the server changes them through
/// Agones' beta SDK, an allocation selects on them and changes them, and each side sees the other's change; errors
/// are Agones' (code UNKNOWN, its words).
#[tokio::test]
async fn counters_and_lists_are_shared_by_the_server_and_allocations() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    let (_placement, mut allocator) = allocator(&store, 60_000).await;
    let agent = counting_agent(&health, "gs-agones-14", 3, 2).await;
    let sdk = Sdk::new_with_host(Some("http://127.0.0.1".into()), Some(agent.grpc_address().port()), None)
        .await
        .unwrap();
    let mut beta = sdk.beta().clone();
    let mut ready = sdk.clone();
    ready.ready().await.unwrap();

    beta.increment_counter("rooms", 2).await.unwrap();
    assert_eq!(beta.get_counter_count("rooms").await.unwrap(), 2);
    let past = format!("{:?}", beta.increment_counter("rooms", 2).await.unwrap_err());
    assert!(past.contains("out of range"), "{past}");
    assert_eq!(
        beta.get_counter_count("rooms").await.unwrap(),
        2,
        "a refused change changes nothing"
    );
    let missing = format!("{:?}", beta.get_counter_count("seats").await.unwrap_err());
    assert!(missing.contains("counter not found"), "{missing}");
    let missing = format!("{:?}", beta.increment_counter("seats", 1).await.unwrap_err());
    assert!(missing.contains("counter not found: seats"), "{missing}");

    beta.append_list_value("players", "p1").await.unwrap();
    let twice = format!("{:?}", beta.append_list_value("players", "p1").await.unwrap_err());
    assert!(twice.contains("already exists"), "{twice}");

    // The allocation finds it by its room and its list, and takes the last room and the last place.
    let mut request = allocation(&[]);
    request.game_server_selectors[0].counters = HashMap::from([(
        "rooms".to_owned(),
        CounterSelector {
            min_available: 1,
            ..Default::default()
        },
    )]);
    request.game_server_selectors[0].lists = HashMap::from([(
        "players".to_owned(),
        ListSelector {
            contains_value: "p1".into(),
            ..Default::default()
        },
    )]);
    request.counters = HashMap::from([(
        "rooms".to_owned(),
        CounterAction {
            action: Some("Increment".into()),
            amount: Some(1),
            capacity: None,
        },
    )]);
    request.lists = HashMap::from([(
        "players".to_owned(),
        ListAction {
            add_values: vec!["p2".into()],
            ..Default::default()
        },
    )]);
    let answer = allocator.allocate(request).await.unwrap().into_inner();
    assert_eq!(answer.game_server_name, "gs-agones-14");
    assert_eq!(beta.get_counter_count("rooms").await.unwrap(), 3);
    assert_eq!(beta.get_list_values("players").await.unwrap(), ["p1", "p2"]);
    let full = format!("{:?}", beta.append_list_value("players", "p3").await.unwrap_err());
    assert!(full.contains("out of range"), "{full}");
    beta.delete_list_value("players", "p1").await.unwrap();
    beta.set_list_capacity("players", 5).await.unwrap();
    assert_eq!(beta.get_list_capacity("players").await.unwrap(), 5);
    assert!(!beta.list_contains("players", "p1").await.unwrap());
    let gone = format!("{:?}", beta.delete_list_value("players", "p1").await.unwrap_err());
    assert!(gone.contains("not found"), "{gone}");
}

/// A server speaking only HTTP is allocated by a label it set, sees it through its watch, and keeps its counters
/// and lists through the beta paths, with Agones' errors.
#[tokio::test]
async fn a_server_speaking_only_http_is_allocated_by_label_and_counts() {
    let redis = TestRedis::single();
    let (store, health) = health(&redis).await;
    let (_placement, mut allocator) = allocator(&store, 60_000).await;
    let agent = counting_agent(&health, "gs-agones-15", 4, 1).await;
    let base = format!("http://{}", agent.http_address());
    let client = reqwest::Client::new();
    use reqwest::Method;

    assert_eq!(
        http_call(&client, Method::POST, format!("{base}/ready"), "{}").await.0,
        200
    );
    let label = r#"{"key": "mode", "value": "ranked"}"#;
    assert_eq!(
        http_call(&client, Method::PUT, format!("{base}/metadata/label"), label)
            .await
            .0,
        200
    );
    let mut watch = client.get(format!("{base}/watch/gameserver")).send().await.unwrap();
    let mut request = allocation(&[("agones.dev/sdk-mode", "ranked")]);
    request.metadata = Some(MetaPatch {
        labels: HashMap::new(),
        annotations: HashMap::from([("match".to_owned(), "m-9".to_owned())]),
    });
    let answer = allocator.allocate(request).await.unwrap().into_inner();
    assert_eq!(answer.game_server_name, "gs-agones-15");
    let allocated = allocated_over_http(&mut watch).await;
    assert_eq!(allocated["result"]["object_meta"]["annotations"]["match"], "m-9");

    let (code, counter) = http_call(
        &client,
        Method::PATCH,
        format!("{base}/v1beta1/counters/rooms"),
        r#"{"countDiff": "3"}"#,
    )
    .await;
    assert_eq!(code, 200, "{counter}");
    assert_eq!(counter["count"], "3");
    let (code, error) = http_call(
        &client,
        Method::PATCH,
        format!("{base}/v1beta1/counters/rooms"),
        r#"{"countDiff": "2"}"#,
    )
    .await;
    assert_eq!((code, error["code"].clone()), (500, serde_json::json!(2)), "{error}");
    assert!(
        error["message"].as_str().unwrap().starts_with("out of range"),
        "{error}"
    );
    let (_, counter) = http_call(&client, Method::GET, format!("{base}/v1beta1/counters/rooms"), "").await;
    assert_eq!(counter["count"], "3", "a refused change changes nothing");

    let add = r#"{"value": "p1"}"#;
    let (code, list) = http_call(
        &client,
        Method::POST,
        format!("{base}/v1beta1/lists/players:addValue"),
        add,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["values"], serde_json::json!(["p1"]));
    let (code, error) = http_call(
        &client,
        Method::POST,
        format!("{base}/v1beta1/lists/players:addValue"),
        add,
    )
    .await;
    assert_eq!(code, 500);
    assert!(
        error["message"].as_str().unwrap().starts_with("already exists"),
        "{error}"
    );
    let (code, list) = http_call(
        &client,
        Method::PATCH,
        format!("{base}/v1beta1/lists/players?updateMask=capacity%2Cvalues"),
        r#"{"capacity": "3", "values": ["p1", "p2", "p2"]}"#,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["capacity"], "3");
    assert_eq!(
        list["values"],
        serde_json::json!(["p1", "p2"]),
        "the values replaced, repeats dropped"
    );
    let (code, error) = http_call(&client, Method::GET, format!("{base}/v1beta1/counters/seats"), "").await;
    assert_eq!(code, 500);
    assert!(
        error["message"].as_str().unwrap().starts_with("counter not found"),
        "{error}"
    );
}

/// A server setting labels as fast as it can is paced under the stream's message-rate limit rather than cut off:
/// every call succeeds and the server is still Ready after.
#[tokio::test]
async fn a_burst_of_sdk_calls_is_paced_not_cut_off() {
    let redis = TestRedis::single();
    let (_store, health) = health(&redis).await;
    let (_agent, mut sdk) = agones_server(&health, "gs-agones-16").await;
    sdk.ready().await.unwrap();
    let burst: Vec<_> = (0..60)
        .map(|i| {
            let mut sdk = sdk.clone();
            tokio::spawn(async move { sdk.set_label(format!("k{i}"), "v").await })
        })
        .collect();
    for call in burst {
        call.await.unwrap().unwrap();
    }
    let server = sdk.get_gameserver().await.unwrap();
    assert_eq!(state(&server), "Ready");
    assert_eq!(server.object_meta.unwrap().labels.len(), 60);
}
