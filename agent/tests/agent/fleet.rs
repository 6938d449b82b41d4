//! The whole road of an Agones game server on Berth, with nothing of the test between them: the fleet service's
//! `process` provisioner launches `berth-agent -- <server>` as it would any build, the server learns its SDK ports
//! from its environment, goes Ready, is placed (by a placement through a queue, and by an Agones allocation with a
//! label selector), sees Allocated with its annotations, tracks a player and a counter, and Shutdown ends its
//! instance. Once through the official `agones` crate and once through the HTTP face alone, single node and cluster.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agones::Sdk;
use berth_agent::record::{MATCHMAKER_DATA, PROPERTY_PREFIX, SESSION_ID};
use berth_proto::agones::allocation::allocation_service_client::AllocationServiceClient;
use berth_proto::agones::allocation::{AllocationRequest, GameServerSelector, MetaPatch};
use berth_proto::common::v1::KeyValue;
use berth_proto::fleet::v1 as fpb;
use berth_proto::placement::v1 as pb;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_store::instances;
use berth_testkit::{Reaper, RunningService, TestRedis, token};
use reqwest::Method;

use crate::{allocated_over_grpc, allocated_over_http, http_call, player_session_status};

/// The four services over one Redis, and a fleet of this run's own whose servers are `berth-agent -- server.sh`,
/// with a queue over it.
struct Stack {
    services: berth_teststack::Stack,
    fleet_id: String,
    /// Where each server's script writes the SDK ports it was given, a file named by its game server id.
    ports: PathBuf,
    _reaper: Reaper,
}

impl Stack {
    async fn start(redis: &TestRedis, instances: u32) -> Stack {
        let fleet_id = format!("agones-{:x}", uuid::Uuid::now_v7().simple());
        let ports = std::env::temp_dir().join(&fleet_id);
        std::fs::create_dir_all(&ports).unwrap();
        let stack = Stack {
            services: berth_teststack::Stack::start(redis).await,
            _reaper: Reaper(vec![fleet_id.clone()]),
            fleet_id,
            ports,
        };
        stack.create_fleet(instances).await;
        stack
    }

    async fn channel(service: &RunningService, role: Role) -> AuthedChannel {
        berth_sdk::connect(&service.endpoint(), &token(role, None))
            .await
            .unwrap()
    }

    /// The fleet, `instances` servers each alone on its instance, each with a `rooms` counter of capacity 10 and a
    /// script that writes down its SDK ports and then waits to be told to end; and a queue of the same name.
    async fn create_fleet(&self, instances: u32) {
        let script = self.ports.join("server.sh");
        let body = format!(
            "#!/bin/sh\necho \"$AGONES_SDK_GRPC_PORT $AGONES_SDK_HTTP_PORT\" > {dir}/$BERTH_GAME_SERVER_ID.tmp\n\
             mv {dir}/$BERTH_GAME_SERVER_ID.tmp {dir}/$BERTH_GAME_SERVER_ID.ports\nexec sleep 600\n",
            dir = self.ports.display()
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let launch = fpb::ServerLaunchConfiguration {
            launch_path: env!("CARGO_BIN_EXE_berth-agent").into(),
            parameters: format!("--counter rooms=0/10 -- {}", script.display()),
            ..Default::default()
        };
        let fleet = berth_teststack::process_fleet(&self.fleet_id, launch, instances);
        self.services.fleet_and_queue(fleet).await;
    }

    /// The game servers launched so far and their SDK ports (gRPC, HTTP), once there are `count` (within 60 s).
    async fn servers(&self, count: usize) -> Vec<(String, u16, u16)> {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let found = launched(&self.ports);
            if found.len() >= count {
                return found;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "only {found:?} launched after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Places a game session through the queue, with a game property, matchmaker data and a reserved player `p1`;
    /// the placement once it has ended (within 60 s).
    async fn place(&self, placement_id: &str) -> pb::GameSessionPlacement {
        let mut placements = PlacementServiceClient::new(Stack::channel(&self.services.placement, Role::Client).await);
        let request = pb::StartGameSessionPlacementRequest {
            placement_id: placement_id.into(),
            queue_name: self.fleet_id.clone(),
            maximum_player_session_count: 4,
            game_properties: vec![KeyValue {
                key: "map".into(),
                value: "dust".into(),
            }],
            matchmaker_data: r#"{"matchId":"m-1"}"#.into(),
            desired_player_sessions: vec![pb::DesiredPlayerSession {
                player_id: "p1".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        placements.start_game_session_placement(request).await.unwrap();
        self.services.placement_ended(placement_id).await
    }

    /// Allocates, through Agones' allocation API, a server of the fleet labelled `agones.dev/sdk-face: face`, with
    /// a `match` annotation; the name of the server allocated.
    async fn allocate(&self, face: &str) -> String {
        let channel = Stack::channel(&self.services.placement, Role::Client).await;
        let request = AllocationRequest {
            namespace: "default".into(),
            game_server_selectors: vec![GameServerSelector {
                match_labels: HashMap::from([
                    ("agones.dev/fleet".to_owned(), self.fleet_id.clone()),
                    ("agones.dev/sdk-face".to_owned(), face.to_owned()),
                ]),
                ..Default::default()
            }],
            metadata: Some(MetaPatch {
                labels: HashMap::new(),
                annotations: HashMap::from([("match".to_owned(), "m-2".to_owned())]),
            }),
            ..Default::default()
        };
        let answer = AllocationServiceClient::new(channel)
            .allocate(request)
            .await
            .unwrap()
            .into_inner();
        answer.game_server_name
    }

    /// The instance server `id` runs on, if it still runs.
    async fn hosting(&self, id: &str) -> Option<instances::InstanceRecord> {
        let location = instances::read_instances(&self.services.store, &self.fleet_id, "local")
            .await
            .unwrap();
        location
            .instances
            .into_iter()
            .find(|instance| instance.servers.iter().any(|server| server.id == id))
    }

    /// Waits (within 30 s) until `instance` is gone from the location, and its agent (the process the provisioner
    /// launched) with it.
    async fn instance_ends(&self, id: &str, instance: &instances::InstanceRecord) {
        let pid = instance.handle.split(':').next().unwrap();
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let running = !stat.is_empty() && !stat.contains(") Z ");
            let hosting = self.hosting(id).await;
            if hosting.is_none() && !running {
                return;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "the instance of {id} did not end: {hosting:?}, agent running: {running}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The servers whose script has written down its ports in `dir`: (game server id, gRPC port, HTTP port).
fn launched(dir: &Path) -> Vec<(String, u16, u16)> {
    let mut found: Vec<(String, u16, u16)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.strip_suffix(".ports")?.to_owned();
            let text = std::fs::read_to_string(entry.path()).ok()?;
            let (grpc, http) = text.trim().split_once(' ')?;
            Some((name, grpc.parse().ok()?, http.parse().ok()?))
        })
        .collect();
    found.sort();
    found
}

/// How a placement reaches a server.
#[derive(Clone, Copy, Debug)]
enum Placed {
    ThroughQueue,
    ByAllocation,
}

/// What the server saw once Allocated: its annotations.
type Annotations = HashMap<String, String>;

/// What a placement through the queue made: the game session, and player `p1`'s reserved player session.
struct QueuePlacement {
    game_session_id: String,
    p1: String,
}

/// A server's health pings, every 200 ms as a live server sends them, until dropped: a server that stopped pinging
/// would turn Unhealthy and be ended, which must not pass for the ending its Shutdown asks.
struct Pinger(tokio::task::JoinHandle<()>);

impl Drop for Pinger {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One server's life through the official crate: labelled `face: grpc`, Ready, placed, Allocated with its
/// annotations, player `p1` and a room counted, Shutdown; its pings go on.
async fn grpc_server_life(stack: &Stack, id: &str, grpc: u16, placed: Placed) -> (Annotations, Pinger) {
    let mut sdk = Sdk::new_with_host(Some("http://127.0.0.1".into()), Some(grpc), None)
        .await
        .expect("the agent the fleet launched serves the SDK on the port it gave the server");
    let pings = sdk.health_check();
    let pinger = Pinger(tokio::spawn(async move {
        while pings.send(()).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }));
    sdk.set_label("face", "grpc").await.unwrap();
    sdk.ready().await.unwrap();
    let mut watch = sdk.watch_gameserver().await.unwrap();

    let queued = place(stack, id, "grpc", placed).await;
    let allocated = allocated_over_grpc(&mut watch).await;
    let annotations = allocated.object_meta.unwrap().annotations;
    if let Some(placed) = &queued {
        assert_eq!(annotations.get(SESSION_ID), Some(&placed.game_session_id));
    }

    let mut alpha = sdk.alpha().clone();
    assert!(alpha.player_connect("p1").await.unwrap());
    assert_eq!(alpha.get_connected_players().await.unwrap(), ["p1"]);
    reservation_accepted(stack, &queued).await;
    let mut beta = sdk.beta().clone();
    beta.increment_counter("rooms", 1).await.unwrap();
    assert_eq!(beta.get_counter_count("rooms").await.unwrap(), 1);

    sdk.shutdown().await.unwrap();
    (annotations, pinger)
}

/// The same life through the HTTP face alone, labelled `face: http`.
async fn http_server_life(stack: &Stack, id: &str, http: u16, placed: Placed) -> (Annotations, Pinger) {
    let base = format!("http://127.0.0.1:{http}");
    let client = reqwest::Client::new();
    let call =
        |method: Method, path: &str, body: &'static str| http_call(&client, method, format!("{base}{path}"), body);
    let health = client.post(format!("{base}/health")).body("{}");
    let pinger = Pinger(tokio::spawn(async move {
        while health
            .try_clone()
            .unwrap()
            .send()
            .await
            .is_ok_and(|answer| answer.status().is_success())
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }));
    let label = r#"{"key": "face", "value": "http"}"#;
    assert_eq!(call(Method::PUT, "/metadata/label", label).await.0, 200);
    assert_eq!(call(Method::POST, "/ready", "{}").await.0, 200);
    let mut watch = client.get(format!("{base}/watch/gameserver")).send().await.unwrap();

    let queued = place(stack, id, "http", placed).await;
    let allocated = allocated_over_http(&mut watch).await;
    let annotations: Annotations =
        serde_json::from_value(allocated["result"]["object_meta"]["annotations"].clone()).unwrap();
    if let Some(placed) = &queued {
        assert_eq!(annotations.get(SESSION_ID), Some(&placed.game_session_id));
    }

    let connected = call(Method::POST, "/alpha/player/connect", r#"{"playerID": "p1"}"#).await;
    assert_eq!(connected, (200, serde_json::json!({"bool": true})));
    reservation_accepted(stack, &queued).await;
    let (code, counter) = call(Method::PATCH, "/v1beta1/counters/rooms", r#"{"countDiff": "1"}"#).await;
    assert_eq!(
        (code, counter["count"].clone()),
        (200, serde_json::json!("1")),
        "{counter}"
    );

    assert_eq!(call(Method::POST, "/shutdown", "{}").await.0, 200);
    (annotations, pinger)
}

/// Player `p1`, connected, holds its reservation in a game session placed through the queue.
async fn reservation_accepted(stack: &Stack, queued: &Option<QueuePlacement>) {
    if let Some(placed) = queued {
        let status = player_session_status(&stack.services.store, &stack.fleet_id, &placed.p1).await;
        assert_eq!(status, "ACTIVE", "PlayerConnect accepts the player's reservation");
    }
}

/// Places server `id` (the only Ready one its placement can reach), labelled `face`; what the placement made when
/// it went through the queue.
async fn place(stack: &Stack, id: &str, face: &str, placed: Placed) -> Option<QueuePlacement> {
    match placed {
        Placed::ThroughQueue => {
            let placement = stack.place(&format!("{id}-placement")).await;
            assert_eq!(placement.status(), pb::PlacementStatus::Fulfilled, "{placement:?}");
            let p1 = placement.placed_player_sessions[0].player_session_id.clone();
            assert_eq!(
                player_session_status(&stack.services.store, &stack.fleet_id, &p1).await,
                "RESERVED"
            );
            Some(QueuePlacement {
                game_session_id: placement.game_session_id,
                p1,
            })
        }
        Placed::ByAllocation => {
            assert_eq!(stack.allocate(face).await, id);
            None
        }
    }
}

/// Four servers, one after another (each the only Ready one while it is placed): through the crate and through
/// HTTP, each placed through the queue and by an allocation.
async fn agones_servers_launched_by_a_fleet_live_their_life(redis: TestRedis) {
    let stack = Stack::start(&redis, 4).await;
    let servers = stack.servers(4).await;
    let lives = [
        ("grpc", Placed::ThroughQueue),
        ("grpc", Placed::ByAllocation),
        ("http", Placed::ThroughQueue),
        ("http", Placed::ByAllocation),
    ];
    for ((id, grpc, http), (face, placed)) in servers.iter().zip(lives) {
        let instance = stack
            .hosting(id)
            .await
            .expect("each server runs on an instance of its own");
        let (annotations, _pinger) = match face {
            "grpc" => grpc_server_life(&stack, id, *grpc, placed).await,
            _ => http_server_life(&stack, id, *http, placed).await,
        };
        match placed {
            Placed::ThroughQueue => {
                assert_eq!(
                    annotations.get(&format!("{PROPERTY_PREFIX}map")).map(String::as_str),
                    Some("dust"),
                    "{face}: {annotations:?}"
                );
                assert_eq!(
                    annotations.get(MATCHMAKER_DATA).map(String::as_str),
                    Some(r#"{"matchId":"m-1"}"#)
                );
            }
            Placed::ByAllocation => {
                assert_eq!(annotations.get("match").map(String::as_str), Some("m-2"), "{face}")
            }
        }
        stack.instance_ends(id, &instance).await;
    }
}

#[tokio::test]
async fn agones_servers_launched_by_a_fleet_live_their_life_on_a_single_node() {
    agones_servers_launched_by_a_fleet_live_their_life(TestRedis::single()).await;
}

#[tokio::test]
async fn agones_servers_launched_by_a_fleet_live_their_life_on_a_cluster() {
    agones_servers_launched_by_a_fleet_live_their_life(TestRedis::cluster()).await;
}
