//! Agones' allocation API on the placement service, through real gRPC and plain HTTP against a real Redis: racing
//! allocations each get a different server or RESOURCE_EXHAUSTED; selectors by labels, expressions, state, counters
//! and lists, with the metadata and the counter and list actions written in the same step and the process told at
//! once; the JSON face with grpc-gateway's errors; bad input changing nothing.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use berth_proto::agones::allocation::allocation_service_client::AllocationServiceClient;
use berth_proto::agones::allocation::{
    self as pb, CounterAction, CounterSelector, GameServerSelector, LabelSelectorRequirement, ListAction, ListSelector,
    MetaPatch,
};
use berth_proto::common::v1::KeyValue;
use berth_proto::health::v1::{ClaimStatus, ServerCounter, ServerLabels, ServerList, UpdateServer};
use berth_runtime::auth::Role;
use berth_sdk::game_server::{Events, GameServer};
use berth_sdk::{AuthedChannel, Event};
use berth_store::Store;
use berth_testkit::{RunningService, TestRedis, anywhere_fleet, game_server_config, spawn_service, token};
use tonic::Code;

const FLEET: &str = "alloc";

type Client = AllocationServiceClient<AuthedChannel>;

struct Stack {
    _health: RunningService,
    placement: RunningService,
    health_endpoint: String,
    allocator: Client,
}

async fn stack(redis: &TestRedis) -> Stack {
    let store = Store::connect(&redis.config()).await.expect("redis reachable");
    anywhere_fleet(&store, FLEET, &["local"]).await;
    let health = spawn_service(
        berth_health::service(store.clone(), &berth_health::HealthArgs::default()),
        store.clone(),
    )
    .await;
    let args = berth_placement::PlacementArgs {
        claim_timeout_ms: 60_000,
        claim_sweep_ms: 100,
        ..Default::default()
    };
    let placement = spawn_service(berth_placement::service(store.clone(), &args), store.clone()).await;
    let channel = berth_sdk::connect(&placement.endpoint(), &token(Role::Client, None))
        .await
        .unwrap();
    Stack {
        health_endpoint: health.endpoint(),
        _health: health,
        placement,
        allocator: AllocationServiceClient::new(channel),
    }
}

fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A selector of the fleet's servers with these labels besides.
fn selector(more: &[(&str, &str)]) -> GameServerSelector {
    let mut match_labels = labels(more);
    match_labels.insert("agones.dev/fleet".into(), FLEET.into());
    GameServerSelector {
        match_labels,
        ..Default::default()
    }
}

fn request(selectors: Vec<GameServerSelector>) -> pb::AllocationRequest {
    pb::AllocationRequest {
        namespace: "default".into(),
        game_server_selectors: selectors,
        ..Default::default()
    }
}

/// A ready SDK process of the fleet with these labels, counters and lists.
async fn process(s: &Stack, id: &str, with: UpdateServer) -> (GameServer, Events) {
    let config = game_server_config(&s.health_endpoint, FLEET, id, "local", 1, 8);
    let (server, events) = GameServer::connect(config).await.unwrap();
    server.update_server(with).await.unwrap();
    server.ready().await.unwrap();
    (server, events)
}

fn metadata(labels: &[(&str, &str)], counters: Vec<ServerCounter>, lists: Vec<ServerList>) -> UpdateServer {
    UpdateServer {
        labels: Some(ServerLabels {
            labels: labels
                .iter()
                .map(|(key, value)| KeyValue {
                    key: key.to_string(),
                    value: value.to_string(),
                })
                .collect(),
        }),
        counters,
        lists,
        ..Default::default()
    }
}

fn name(result: Result<tonic::Response<pb::AllocationResponse>, tonic::Status>) -> String {
    result.unwrap().into_inner().game_server_name
}

async fn allocation_race(redis: TestRedis) {
    let mut s = stack(&redis).await;
    let mut servers = Vec::new();
    for i in 0..29 {
        servers.push(process(&s, &format!("gs-{i:02}"), UpdateServer::default()).await);
    }
    // The last in the pool's order, found past the first few batches the allocation reads.
    servers.push(process(&s, "gs-29", metadata(&[("deep", "yes")], vec![], vec![])).await);
    let deep = s.allocator.allocate(request(vec![selector(&[("deep", "yes")])])).await;
    assert_eq!(name(deep), "gs-29");
    let racing: Vec<_> = (0..120)
        .map(|_| {
            let mut allocator = s.allocator.clone();
            tokio::spawn(async move { allocator.allocate(request(vec![selector(&[])])).await })
        })
        .collect();
    let mut won = HashSet::new();
    let mut exhausted = 0;
    for allocation in racing {
        match allocation.await.unwrap() {
            Ok(answer) => {
                let id = answer.into_inner().game_server_name;
                assert!(won.insert(id.clone()), "{id} was allocated to two callers");
            }
            Err(status) if status.code() == Code::ResourceExhausted => exhausted += 1,
            Err(status) => panic!("unexpected {status:?}"),
        }
    }
    assert_eq!(won.len(), 29);
    assert_eq!(exhausted, 91);
    let status = s.allocator.allocate(request(vec![selector(&[])])).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_allocations_take_each_server_once_on_a_single_node() {
    allocation_race(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_allocations_take_each_server_once_on_a_cluster() {
    allocation_race(TestRedis::cluster()).await;
}

/// Waits for the process to be told that its record changed, and answers the record.
async fn told(events: &mut Events) -> berth_proto::health::v1::ServerDescription {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(Event::ServerChanged { server }) = events.recv().await {
                return *server;
            }
        }
    })
    .await
    .expect("the process is told of its allocation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_pick_by_labels_state_counters_and_lists_and_actions_apply_with_the_allocation() {
    let redis = TestRedis::single();
    let mut s = stack(&redis).await;
    let rooms = |count, capacity| ServerCounter {
        name: "rooms".into(),
        count,
        capacity,
    };
    let players = ServerList {
        name: "players".into(),
        capacity: 4,
        values: vec!["p0".into()],
    };
    let (_ranked, mut ranked_events) = process(
        &s,
        "ranked-1",
        metadata(&[("mode", "ranked")], vec![rooms(0, 2)], vec![players]),
    )
    .await;
    let (_casual, _) = process(&s, "casual-1", metadata(&[("mode", "casual")], vec![], vec![])).await;
    let (_plain, _) = process(&s, "ranked-2", metadata(&[("mode", "ranked")], vec![], vec![])).await;

    // Only ranked-1 has a room to spare; the actions and the metadata are written with the allocation.
    let mut with_room = selector(&[("mode", "ranked")]);
    with_room.counters = HashMap::from([(
        "rooms".to_owned(),
        CounterSelector {
            min_available: 1,
            ..Default::default()
        },
    )]);
    let mut first = request(vec![with_room.clone()]);
    first.metadata = Some(MetaPatch {
        labels: labels(&[("match", "m1")]),
        annotations: labels(&[("map", "dust")]),
    });
    first.counters = HashMap::from([(
        "rooms".to_owned(),
        CounterAction {
            action: Some("Increment".into()),
            amount: Some(1),
            capacity: None,
        },
    )]);
    first.lists = HashMap::from([(
        "players".to_owned(),
        ListAction {
            add_values: vec!["p1".into(), "p0".into()],
            ..Default::default()
        },
    )]);
    let answer = s.allocator.allocate(first).await.unwrap().into_inner();
    assert_eq!(answer.game_server_name, "ranked-1");
    assert_eq!(answer.address, "10.0.0.7");
    assert_eq!(answer.ports[0].name, "default");
    assert_eq!(answer.ports[0].port, 7777);
    assert_eq!(answer.node_name, "i-ranked-1");
    let meta = answer.metadata.unwrap();
    assert_eq!(meta.labels.get("match").map(String::as_str), Some("m1"));
    assert_eq!(meta.labels.get("mode").map(String::as_str), Some("ranked"));
    assert_eq!(meta.labels.get("agones.dev/fleet").map(String::as_str), Some(FLEET));
    assert_eq!(meta.annotations.get("map").map(String::as_str), Some("dust"));
    assert_eq!(answer.counters["rooms"].count, Some(1));
    assert_eq!(
        answer.lists["players"].values,
        ["p0", "p1"],
        "a value already there is not added twice"
    );

    let record = told(&mut ranked_events).await;
    assert_eq!(record.game_server.unwrap().claim_status(), ClaimStatus::Claimed);
    assert!(record.annotations.iter().any(|a| a.key == "map" && a.value == "dust"));

    // Claimed now, it is no longer READY; ranked-2 has no rooms counter.
    let again = s
        .allocator
        .allocate(request(vec![with_room.clone()]))
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::ResourceExhausted);

    // From ALLOCATED, by its room and by a value of its list: handed out again, and counted down to no room.
    let mut allocated = with_room.clone();
    allocated.game_server_state = pb::game_server_selector::GameServerState::Allocated as i32;
    allocated.lists = HashMap::from([(
        "players".to_owned(),
        ListSelector {
            contains_value: "p1".into(),
            min_available: 1,
            ..Default::default()
        },
    )]);
    let mut take_room = request(vec![allocated.clone()]);
    take_room.counters = HashMap::from([(
        "rooms".to_owned(),
        CounterAction {
            action: Some("Increment".into()),
            amount: Some(5),
            capacity: None,
        },
    )]);
    let answer = s.allocator.allocate(take_room.clone()).await.unwrap().into_inner();
    assert_eq!(answer.game_server_name, "ranked-1");
    assert_eq!(
        answer.counters["rooms"].count,
        Some(2),
        "the count stops at its capacity"
    );
    let full = s.allocator.allocate(take_room).await.unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted);

    // Selectors are tried in order; expressions select too.
    let mut not_ranked = selector(&[]);
    not_ranked.match_expressions = vec![LabelSelectorRequirement {
        key: "mode".into(),
        operator: "NotIn".into(),
        values: vec!["ranked".into()],
    }];
    let ordered = request(vec![selector(&[("mode", "none")]), not_ranked]);
    assert_eq!(name(s.allocator.allocate(ordered).await), "casual-1");

    // A bad request names its fields and takes nothing: ranked-2 is still there to allocate.
    let mut bad = request(vec![selector(&[("mode", "ranked")])]);
    bad.priorities = vec![pb::Priority {
        r#type: 9,
        key: "rooms".into(),
        order: 0,
    }];
    let refused = s.allocator.allocate(bad).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("priorities[0].type"), "{refused:?}");
    assert_eq!(
        name(s.allocator.allocate(request(vec![selector(&[])])).await),
        "ranked-2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_face_allocates_and_answers_errors_as_the_gateway_does() {
    let redis = TestRedis::single();
    let s = stack(&redis).await;
    let (_server, _) = process(&s, "json-1", metadata(&[("mode", "ranked")], vec![], vec![])).await;
    let url = format!("{}/gameserverallocation", s.placement.endpoint());
    let client = reqwest::Client::new();
    let post = |body: &'static str, bearer: Option<String>| {
        let mut call = client.post(&url).header("content-type", "application/json").body(body);
        if let Some(bearer) = bearer {
            call = call.bearer_auth(bearer);
        }
        async move {
            let response = call.send().await.unwrap();
            let status = response.status().as_u16();
            let json: serde_json::Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
            (status, json)
        }
    };
    let matchmaker = || Some(token(Role::Client, None));

    let (status, body) = post(
        r#"{"gameServerSelectors":[{"matchLabels":{"agones.dev/fleet":"alloc","mode":"ranked"}}]}"#,
        None,
    )
    .await;
    assert_eq!(status, 401, "the same auth as gRPC: {body}");
    assert_eq!(body["code"], 16);

    let (status, body) = post("{not json", matchmaker()).await;
    assert_eq!(status, 400);
    assert_eq!(body["code"], 3);

    let (status, body) = post(
        r#"{"gameServerSelectors":[{"matchLabels":{"agones.dev/fleet":"alloc","mode":"ranked"}}],
            "metadata":{"annotations":{"match":"m7"}}}"#,
        matchmaker(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["gameServerName"], "json-1");
    assert_eq!(body["address"], "10.0.0.7");
    assert_eq!(body["ports"][0]["port"], 7777);
    assert_eq!(body["metadata"]["annotations"]["match"], "m7");

    let (status, body) = post(
        r#"{"gameServerSelectors":[{"matchLabels":{"agones.dev/fleet":"alloc"}}]}"#,
        matchmaker(),
    )
    .await;
    assert_eq!(status, 429, "nothing left: {body}");
    assert_eq!(body["code"], 8);
}
