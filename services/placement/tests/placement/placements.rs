//! Placements through queues, end to end: a real health service whose SDK processes activate what they are given,
//! the placement service's workers, and clients that start, watch, describe and stop placements through gRPC.

use std::collections::HashSet;
use std::time::Duration;

use berth_proto::common::v1::KeyValue;
use berth_proto::placement::v1::placement_service_client::PlacementServiceClient;
use berth_proto::placement::v1::queue_service_client::QueueServiceClient;
use berth_proto::placement::v1::{self as pb, watch_game_session_placements_response::Kind};
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_sdk::game_server::{Event, GameServer};
use berth_store::Store;
use berth_store::keys::FleetKeys;
use berth_testkit::{
    RunningService, TestRedis, anywhere_fleet, fast_settings, game_server_config, game_session_status,
    set_fleet_settings, spawn_service, token, unary_without_timer,
};
use tokio::task::JoinHandle;
use tonic::{Code, Streaming};

/// The fleets of these tests: one in each of two locations.
pub(crate) const EU: (&str, &str) = ("arena-eu", "eu-west");
const US: (&str, &str) = ("arena-us", "us-east");

/// Redis, a health replica, a session replica (its sweep ends sessions not activated in time) and a placement
/// replica, in-process.
pub(crate) struct Stack {
    pub(crate) redis: TestRedis,
    pub(crate) store: Store,
    pub(crate) health: RunningService,
    _sessions: RunningService,
    pub(crate) placement: RunningService,
}

/// A placement replica's settings in these tests: it tries again every 100 ms and takes over after 1.5 s.
pub(crate) fn args() -> berth_placement::PlacementArgs {
    berth_placement::PlacementArgs {
        placement_retry_ms: 100,
        placement_reclaim_idle_ms: 1_500,
        ..Default::default()
    }
}

/// A replica that runs no workers: it answers calls, and other replicas place what it starts.
fn api_only() -> berth_placement::PlacementArgs {
    berth_placement::PlacementArgs {
        placement_concurrency: 0,
        ..args()
    }
}

/// What an SDK process of the tests does with a game session it is given.
#[derive(Clone, Copy)]
pub(crate) enum Activation {
    Now,
    After(Duration),
    Never,
}

impl Stack {
    async fn start(redis: TestRedis) -> Stack {
        Stack::with(redis, &args()).await
    }

    /// The stack, its placement replica run with `placement`.
    pub(crate) async fn with(redis: TestRedis, placement: &berth_placement::PlacementArgs) -> Stack {
        let store = Store::connect(&redis.config()).await.unwrap();
        for (fleet, location) in [EU, US] {
            anywhere_fleet(&store, fleet, &[location]).await;
            set_fleet_settings(&store, fleet, &fast_settings()).await;
        }
        let health = spawn_service(
            berth_health::service(store.clone(), &berth_health::HealthArgs::default()),
            store.clone(),
        )
        .await;
        let sessions = berth_session::SessionArgs {
            sweep_ms: 50,
            ..Default::default()
        };
        let sessions = spawn_service(berth_session::service(store.clone(), &sessions), store.clone()).await;
        let placement = spawn_service(berth_placement::service(store.clone(), placement), store.clone()).await;
        Stack {
            redis,
            store,
            health,
            _sessions: sessions,
            placement,
        }
    }

    pub(crate) async fn placements(&self) -> PlacementServiceClient<AuthedChannel> {
        let channel = berth_sdk::connect(&self.placement.endpoint(), &token(Role::Client, None))
            .await
            .unwrap();
        PlacementServiceClient::new(channel)
    }

    async fn queues(&self) -> QueueServiceClient<AuthedChannel> {
        let channel = berth_sdk::connect(&self.placement.endpoint(), &token(Role::Operator, None))
            .await
            .unwrap();
        QueueServiceClient::new(channel)
    }

    /// Creates queue `name` over both fleets, EU first, with a timeout of `timeout_ms` (below the contract's
    /// least, as tests need, written into the record the scripts read).
    pub(crate) async fn queue(&self, name: &str, timeout_ms: u64, change: impl FnOnce(&mut pb::CreateQueueRequest)) {
        let mut req = pb::CreateQueueRequest {
            name: name.into(),
            destinations: [EU, US]
                .iter()
                .map(|(fleet, _)| pb::QueueDestination {
                    fleet_id: (*fleet).into(),
                })
                .collect(),
            custom_event_data: format!("route:{name}"),
            ..Default::default()
        };
        change(&mut req);
        self.queues().await.create_queue(req).await.unwrap();
        let key = berth_store::keys::QueueKeys::new(name).record();
        let _: i64 = self
            .store
            .query(redis::cmd("HSET").arg(key).arg("timeout_ms").arg(timeout_ms))
            .await
            .unwrap();
    }

    /// Another placement replica over the stack's Redis.
    async fn replica(&self, args: &berth_placement::PlacementArgs) -> RunningService {
        spawn_service(berth_placement::service(self.store.clone(), args), self.store.clone()).await
    }

    /// A ready SDK process of `fleet` in `location` that activates the sessions it is given as `activation` says.
    pub(crate) async fn host(&self, at: (&str, &str), id: &str, activation: Activation) -> Host {
        self.host_of(at, id, activation, 0).await
    }

    /// A host whose sessions take at most `max_players` (0: the fleet's default).
    async fn host_of(
        &self,
        (fleet, location): (&str, &str),
        id: &str,
        activation: Activation,
        max_players: u32,
    ) -> Host {
        let config = game_server_config(&self.health.endpoint(), fleet, id, location, 1, max_players);
        let (server, mut events) = GameServer::connect(config).await.unwrap();
        server.ready().await.unwrap();
        let (started_tx, started) = tokio::sync::mpsc::unbounded_channel();
        let acting = server.clone();
        let task = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                if let Event::StartGameSession { game_session, .. } = event {
                    let _ = started_tx.send(game_session.game_session_id.clone());
                    let delay = match activation {
                        Activation::Now => Duration::ZERO,
                        Activation::After(delay) => delay,
                        Activation::Never => continue,
                    };
                    tokio::time::sleep(delay).await;
                    let _ = acting.activate_game_session(game_session.game_session_id).await;
                }
            }
        });
        Host {
            _server: server,
            task,
            started,
        }
    }

    async fn watch(&self, queues: &[&str]) -> Streaming<pb::WatchGameSessionPlacementsResponse> {
        let req = pb::WatchGameSessionPlacementsRequest {
            queue_names: queues.iter().map(|q| (*q).to_owned()).collect(),
            ..Default::default()
        };
        self.placements()
            .await
            .watch_game_session_placements(req)
            .await
            .unwrap()
            .into_inner()
    }
}

/// An SDK process of the tests, and the game sessions it was told to start.
pub(crate) struct Host {
    _server: GameServer,
    task: JoinHandle<()>,
    started: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) fn start(id: &str, queue: &str) -> pb::StartGameSessionPlacementRequest {
    pb::StartGameSessionPlacementRequest {
        placement_id: id.into(),
        queue_name: queue.into(),
        maximum_player_session_count: 8,
        game_session_name: format!("match {id}"),
        game_properties: vec![KeyValue {
            key: "mode".into(),
            value: "ranked".into(),
        }],
        desired_player_sessions: ["ana", "bo"]
            .iter()
            .map(|player| pb::DesiredPlayerSession {
                player_id: (*player).into(),
                player_data: format!("{{\"name\":\"{player}\"}}"),
            })
            .collect(),
        ..Default::default()
    }
}

/// The next event of a watch, skipping keepalives.
async fn next_event(watch: &mut Streaming<pb::WatchGameSessionPlacementsResponse>) -> pb::GameSessionPlacementEvent {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), watch.message())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .expect("the watch goes on");
        if let Some(Kind::Event(event)) = message.kind {
            return event;
        }
    }
}

pub(crate) async fn describe(stack: &Stack, id: &str) -> Result<pb::GameSessionPlacement, tonic::Status> {
    let req = pb::DescribeGameSessionPlacementRequest {
        placement_id: id.into(),
    };
    let described = stack.placements().await.describe_game_session_placement(req).await?;
    Ok(described.into_inner().placement.unwrap())
}

/// Waits until placement `id` has ended; it as it ended.
pub(crate) async fn ended(stack: &Stack, id: &str, within: Duration) -> pb::GameSessionPlacement {
    let until = tokio::time::Instant::now() + within;
    loop {
        let placement = describe(stack, id).await.unwrap();
        if placement.status() != pb::PlacementStatus::Pending {
            return placement;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "placement {id} still PENDING after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_placement_is_fulfilled_once_with_its_players(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    stack.queue("ranked", 10_000, |_| {}).await;
    let mut watch = stack.watch(&["ranked"]).await;
    let mut host = stack.host(EU, "eu-1", Activation::Now).await;
    let mut placements = stack.placements().await;
    let started = placements
        .start_game_session_placement(start("match-1", "ranked"))
        .await
        .unwrap()
        .into_inner()
        .placement
        .unwrap();
    assert_eq!(started.status(), pb::PlacementStatus::Pending);
    assert_eq!(started.queue_name, "ranked");

    // A start is no event (its caller holds the reply): the placement's first event is its end.
    let fulfilled = next_event(&mut watch).await;
    assert_eq!(fulfilled.event_type(), pb::PlacementEventType::Fulfilled);
    assert_eq!(fulfilled.custom_event_data, "route:ranked");
    let placement = fulfilled.placement.unwrap();
    assert_eq!(placement.status(), pb::PlacementStatus::Fulfilled);
    assert_eq!((placement.fleet_id.as_str(), placement.location.as_str()), EU);
    assert_eq!(placement.endpoint.as_ref().map(|e| e.port), Some(7777));
    assert_eq!(placement.first_choice_outcome(), pb::FirstChoiceOutcome::Taken);
    let players: Vec<&str> = placement
        .placed_player_sessions
        .iter()
        .map(|p| p.player_id.as_str())
        .collect();
    assert_eq!(players, ["ana", "bo"]);
    assert_eq!(
        host.started.recv().await.as_deref(),
        Some(placement.game_session_id.as_str())
    );
    assert_eq!(
        game_session_status(&stack.store, &placement.game_session_id).await,
        Some(("ACTIVE".to_owned(), String::new()))
    );
    assert_eq!(describe(&stack, "match-1").await.unwrap(), placement);

    // A retry returns the placement as it stands; another request with the same id is refused.
    let again = placements
        .start_game_session_placement(start("match-1", "ranked"))
        .await
        .unwrap()
        .into_inner()
        .placement
        .unwrap();
    assert_eq!(again, placement);
    let mut other = start("match-1", "ranked");
    other.maximum_player_session_count = 9;
    let refused = placements.start_game_session_placement(other).await.unwrap_err();
    assert_eq!(refused.code(), Code::AlreadyExists, "{refused:?}");
    let stop = pb::StopGameSessionPlacementRequest {
        placement_id: "match-1".into(),
    };
    let refused = placements.stop_game_session_placement(stop).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(refused.message().contains("FULFILLED"), "{refused:?}");

    let unknown = placements
        .start_game_session_placement(start("match-2", "nowhere"))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    assert_eq!(describe(&stack, "match-2").await.unwrap_err().code(), Code::NotFound);

    let metrics = placements
        .get_queue_metrics(pb::GetQueueMetricsRequest {
            queue_name: "ranked".into(),
            window_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .metrics
        .unwrap();
    assert_eq!((metrics.placements_started, metrics.placements_succeeded), (1, 1));
    assert_eq!(metrics.queue_depth, 0);
    assert_eq!(metrics.succeeded_by_location.len(), 1);
    drop(stack.redis);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_placement_is_fulfilled_once_with_its_players_on_a_single_node() {
    a_placement_is_fulfilled_once_with_its_players(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_placement_is_fulfilled_once_with_its_players_on_a_cluster() {
    a_placement_is_fulfilled_once_with_its_players(TestRedis::cluster()).await;
}

/// With no ready server a placement waits, tries again, and times out on time with NO_CAPACITY; one started
/// before servers become ready is fulfilled once they do.
async fn no_capacity_times_out_on_time_then_servers_fulfil(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    stack.queue("casual", 1_500, |_| {}).await;
    let mut placements = stack.placements().await;
    let started = placements
        .start_game_session_placement(start("lonely", "casual"))
        .await
        .unwrap()
        .into_inner()
        .placement
        .unwrap();
    let timed_out = ended(&stack, "lonely", Duration::from_secs(5)).await;
    assert_eq!(timed_out.status(), pb::PlacementStatus::TimedOut);
    let waited = timed_out.end_time.unwrap().seconds * 1000 + i64::from(timed_out.end_time.unwrap().nanos / 1_000_000)
        - (started.start_time.unwrap().seconds * 1000 + i64::from(started.start_time.unwrap().nanos / 1_000_000));
    assert!((1_500..2_500).contains(&waited), "timed out after {waited} ms");
    // No server process ever registered in either location: they are not DEPLOYED, so nothing was a candidate. Each
    // pass that found so is an attempt (one every 100 ms).
    assert_eq!(timed_out.status_reason(), pb::PlacementStatusReason::NoCandidate);
    assert!(timed_out.attempt_count >= 5, "{timed_out:?}");

    // A server of the US fleet makes its location a candidate; once it is busy, the EU fleet's comes late.
    let _us = stack.host(US, "us-1", Activation::Now).await;
    placements
        .start_game_session_placement(start("first", "casual"))
        .await
        .unwrap();
    assert_eq!(
        ended(&stack, "first", Duration::from_secs(5)).await.status(),
        pb::PlacementStatus::Fulfilled
    );
    placements
        .start_game_session_placement(start("waiting", "casual"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        describe(&stack, "waiting").await.unwrap().status(),
        pb::PlacementStatus::Pending
    );
    let _eu = stack.host(EU, "eu-1", Activation::Now).await;
    let fulfilled = ended(&stack, "waiting", Duration::from_secs(5)).await;
    assert_eq!(fulfilled.status(), pb::PlacementStatus::Fulfilled);
    assert_eq!(fulfilled.fleet_id, EU.0);
    assert!(fulfilled.attempt_count > 1, "{fulfilled:?}");

    // With both busy a placement waits in both locations, the autoscaler's demand there, until a second US server
    // takes it. The create that placed it clears where it waited in that fleet; the EU fleet's mark lapses alone.
    placements
        .start_game_session_placement(start("again", "casual"))
        .await
        .unwrap();
    let waits_in = |(fleet, location): (&'static str, &'static str)| {
        let tag = FleetKeys::new(fleet)
            .game_session("")
            .trim_end_matches("gsess:")
            .to_owned();
        let store = stack.store.clone();
        async move {
            let score: Option<f64> = store
                .query(
                    redis::cmd("ZSCORE")
                        .arg(format!("{tag}wanting:{location}"))
                        .arg("again"),
                )
                .await
                .unwrap();
            score.is_some()
        }
    };
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while !(waits_in(US).await && waits_in(EU).await) {
        assert!(
            tokio::time::Instant::now() < until,
            "the placement never waited in both locations"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _second = stack.host(US, "us-2", Activation::Now).await;
    let fulfilled = ended(&stack, "again", Duration::from_secs(5)).await;
    assert_eq!(fulfilled.status(), pb::PlacementStatus::Fulfilled);
    assert_eq!(fulfilled.fleet_id, US.0);
    assert!(!waits_in(US).await, "it still counts as demand where it was placed");
    assert!(waits_in(EU).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_capacity_times_out_on_time_then_servers_fulfil_on_a_single_node() {
    no_capacity_times_out_on_time_then_servers_fulfil(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_capacity_times_out_on_time_then_servers_fulfil_on_a_cluster() {
    no_capacity_times_out_on_time_then_servers_fulfil(TestRedis::cluster()).await;
}

/// ListGameSessionPlacements pages through what a queue holds PENDING, longest waiting first; a placement that ended
/// is not listed, and a page token serves only the listing it came from.
async fn a_queues_pending_placements_are_listed_a_page_at_a_time(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    stack.queue("lobby", 60_000, |_| {}).await;
    stack.queue("other", 60_000, |_| {}).await;
    let mut placements = stack.placements().await;
    let ids: Vec<String> = (1..=5).map(|n| format!("wait-{n}")).collect();
    for id in &ids {
        placements
            .start_game_session_placement(start(id, "lobby"))
            .await
            .unwrap();
    }
    let list = |queue: &str, page_size: u32, page_token: String| pb::ListGameSessionPlacementsRequest {
        queue_name: queue.into(),
        page_size,
        page_token,
    };
    let mut listed = Vec::new();
    let mut sizes = Vec::new();
    let mut token = String::new();
    loop {
        let page = placements
            .list_game_session_placements(list("lobby", 2, token))
            .await
            .unwrap()
            .into_inner();
        sizes.push(page.placements.len());
        assert!(
            page.placements
                .iter()
                .all(|p| p.status() == pb::PlacementStatus::Pending)
        );
        listed.extend(page.placements.into_iter().map(|p| p.placement_id));
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(listed, ids, "longest waiting first, each once");
    assert_eq!(sizes, [2, 2, 1]);

    placements
        .stop_game_session_placement(pb::StopGameSessionPlacementRequest {
            placement_id: "wait-3".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        ended(&stack, "wait-3", Duration::from_secs(5)).await.status(),
        pb::PlacementStatus::Cancelled
    );
    let all = placements
        .list_game_session_placements(list("lobby", 0, String::new()))
        .await
        .unwrap()
        .into_inner();
    let left: Vec<_> = all.placements.iter().map(|p| p.placement_id.as_str()).collect();
    assert_eq!(left, ["wait-1", "wait-2", "wait-4", "wait-5"]);
    assert!(all.next_page_token.is_empty());

    let first = placements
        .list_game_session_placements(list("lobby", 1, String::new()))
        .await
        .unwrap()
        .into_inner();
    let elsewhere = placements
        .list_game_session_placements(list("other", 1, first.next_page_token))
        .await
        .unwrap_err();
    assert_eq!(elsewhere.code(), tonic::Code::InvalidArgument);
    assert!(elsewhere.message().contains("page_token"), "{elsewhere:?}");
    let unknown = placements
        .list_game_session_placements(list("nowhere", 0, String::new()))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    let too_many = placements
        .list_game_session_placements(list("lobby", 1001, String::new()))
        .await
        .unwrap_err();
    assert_eq!(too_many.code(), tonic::Code::InvalidArgument);
    assert!(too_many.message().contains("page_size"), "{too_many:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queues_pending_placements_are_listed_a_page_at_a_time_on_a_single_node() {
    a_queues_pending_placements_are_listed_a_page_at_a_time(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queues_pending_placements_are_listed_a_page_at_a_time_on_a_cluster() {
    a_queues_pending_placements_are_listed_a_page_at_a_time(TestRedis::cluster()).await;
}

/// A server that never activates the session it was given: the attempt is abandoned when the fleet's activation
/// timeout ends the session, and the placement is fulfilled on the other fleet; the abandoned session is ended.
async fn a_server_that_never_activates_sends_the_placement_elsewhere(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    let mut settings = fast_settings();
    settings.activation_ms = 500;
    set_fleet_settings(&stack.store, EU.0, &settings).await;
    stack.queue("stubborn", 10_000, |_| {}).await;
    let mut silent = stack.host(EU, "eu-silent", Activation::Never).await;
    let _us = stack.host(US, "us-1", Activation::Now).await;
    stack
        .placements()
        .await
        .start_game_session_placement(start("moved", "stubborn"))
        .await
        .unwrap();
    let fulfilled = ended(&stack, "moved", Duration::from_secs(5)).await;
    assert_eq!(fulfilled.status(), pb::PlacementStatus::Fulfilled);
    assert_eq!(fulfilled.fleet_id, US.0);
    assert_eq!(fulfilled.first_choice_outcome(), pb::FirstChoiceOutcome::OutOfCapacity);
    assert!(fulfilled.attempt_count >= 2, "{fulfilled:?}");
    let abandoned = silent.started.recv().await.unwrap();
    let (status, reason) = game_session_status(&stack.store, &abandoned).await.unwrap();
    assert_eq!(status, "TERMINATED");
    assert_eq!(reason, "ACTIVATION_TIMEOUT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_that_never_activates_sends_the_placement_elsewhere_on_a_single_node() {
    a_server_that_never_activates_sends_the_placement_elsewhere(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_that_never_activates_sends_the_placement_elsewhere_on_a_cluster() {
    a_server_that_never_activates_sends_the_placement_elsewhere(TestRedis::cluster()).await;
}

/// Stopping a PENDING placement cancels it, and the session it had started is ended with its players; stopping it
/// again returns it unchanged. Stops racing fulfilment end each placement exactly one way, with one event.
async fn stop_cancels_and_races_fulfilment_to_one_outcome(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    stack.queue("duel", 10_000, |_| {}).await;
    let mut silent = stack.host(EU, "eu-silent", Activation::Never).await;
    let mut placements = stack.placements().await;
    placements
        .start_game_session_placement(start("halted", "duel"))
        .await
        .unwrap();
    let given = silent.started.recv().await.unwrap();
    let stop = pb::StopGameSessionPlacementRequest {
        placement_id: "halted".into(),
    };
    let stopped = placements
        .stop_game_session_placement(stop.clone())
        .await
        .unwrap()
        .into_inner()
        .placement
        .unwrap();
    assert_eq!(stopped.status(), pb::PlacementStatus::Cancelled);
    assert_eq!(stopped.status_reason(), pb::PlacementStatusReason::Stopped);
    let again = placements.stop_game_session_placement(stop).await.unwrap().into_inner();
    assert_eq!(again.placement.unwrap(), stopped);
    for _ in 0..100 {
        if game_session_status(&stack.store, &given)
            .await
            .is_some_and(|(status, _)| status == "TERMINATED")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        game_session_status(&stack.store, &given).await,
        Some(("TERMINATED".to_owned(), "PLACEMENT_ABANDONED".to_owned()))
    );
    drop(silent);

    // Stops racing fulfilment: each placement ends once, and the watch sees one terminal event for each.
    let mut watch = stack.watch(&["duel"]).await;
    let mut hosts = Vec::new();
    for n in 0..6 {
        hosts.push(stack.host(US, &format!("us-{n}"), Activation::Now).await);
    }
    let ids: Vec<String> = (0..6).map(|n| format!("race-{n}")).collect();
    let mut racing = Vec::new();
    for id in &ids {
        let mut client = stack.placements().await;
        let id = id.clone();
        racing.push(tokio::spawn(async move {
            client.start_game_session_placement(start(&id, "duel")).await.unwrap();
            tokio::time::sleep(Duration::from_millis(u64::from(id.as_bytes()[5] % 3) * 3)).await;
            let stop = pb::StopGameSessionPlacementRequest { placement_id: id };
            match client.stop_game_session_placement(stop).await {
                Ok(stopped) => stopped.into_inner().placement.unwrap().status(),
                Err(refused) => {
                    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
                    pb::PlacementStatus::Fulfilled
                }
            }
        }));
    }
    let mut told = Vec::new();
    for race in racing {
        told.push(race.await.unwrap());
    }
    let mut terminal = HashSet::new();
    while terminal.len() < ids.len() {
        let placement = next_event(&mut watch).await.placement.unwrap();
        assert!(
            terminal.insert(placement.placement_id.clone()),
            "a second end for {}",
            placement.placement_id
        );
    }
    for (id, said) in ids.iter().zip(told) {
        assert_eq!(ended(&stack, id, Duration::from_secs(5)).await.status(), said, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_cancels_and_races_fulfilment_to_one_outcome_on_a_single_node() {
    stop_cancels_and_races_fulfilment_to_one_outcome(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stop_cancels_and_races_fulfilment_to_one_outcome_on_a_cluster() {
    stop_cancels_and_races_fulfilment_to_one_outcome(TestRedis::cluster()).await;
}

/// Every game session the hosts were told to start so far.
pub(crate) fn told(hosts: &mut [Host]) -> Vec<String> {
    let mut sessions = Vec::new();
    for host in hosts {
        while let Ok(session) = host.started.try_recv() {
            sessions.push(session);
        }
    }
    sessions
}

/// Where a worker may die: after taking the request, after recording its attempt, after creating the attempt's
/// session (which the server then activates on its own), or after the first candidate refused it.
#[derive(Clone, Copy, Debug)]
enum Cut {
    Taken,
    Recorded,
    Created,
    Refused,
}

/// A worker that dies between any two steps: another replica takes its request over once it has gone silent, and
/// the placement is fulfilled with exactly one game session — the dead worker's own when it had created one — and
/// a late create of the dead worker's attempt creates nothing.
async fn a_worker_dying_between_any_two_steps_leaves_one_session(redis: TestRedis, cut: Cut) {
    use berth_domain::queue::order::Candidate;
    use berth_store::queues::placements as store;
    use berth_store::sessions::placements::{Attempt, PlacementAttempt};
    use berth_store::sessions::{Created, NewGameSession, SessionTimings, create_game_session};

    let stack = Stack::with(redis, &api_only()).await;
    stack.queue("crash", 10_000, |_| {}).await;
    let mut hosts = vec![
        stack.host(EU, "eu-1", Activation::Now).await,
        stack.host(US, "us-1", Activation::Now).await,
    ];
    let started = stack
        .placements()
        .await
        .start_game_session_placement(start("fragile", "crash"))
        .await
        .unwrap()
        .into_inner()
        .placement
        .unwrap();
    let deadline_ms = started.deadline_time.unwrap().seconds * 1000 + 999;
    let taken = store::take_requests(&stack.store, "crash", "ghost", 10, 1000)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    let candidates = [EU, US].map(|(fleet, location)| Candidate {
        fleet_id: fleet.into(),
        location: location.into(),
    });
    let attempt = |location: &'static str| Attempt {
        placement_id: "fragile",
        number: 1,
        location,
        deadline_ms,
    };
    let (timings, store) = (SessionTimings { retention_ms: 60_000 }, &stack.store);
    let create = |(fleet, location): (&'static str, &'static str)| async move {
        let players = [("ana", "")];
        let game_session_id = attempt(location).game_session_id(fleet);
        let new = NewGameSession {
            location,
            placement_id: "fragile",
            attempt: Some(PlacementAttempt {
                attempt: attempt(location),
                notify: "ghost",
                players: &players,
                avoid: &[],
                first_here: false,
            }),
            ..NewGameSession::new(&game_session_id, fleet, 8)
        };
        create_game_session(store, &new, &timings).await.unwrap()
    };
    let mut ghost_session = None;
    if !matches!(cut, Cut::Taken) {
        let recorded = store::record_attempt(&stack.store, "crash", "fragile", 0, &candidates, None)
            .await
            .unwrap();
        assert!(
            matches!(recorded, store::AttemptRecorded::Recorded { .. }),
            "{recorded:?}"
        );
    }
    match cut {
        Cut::Created => {
            // Only under the id its token names can the attempt make a session: the one a takeover looks for.
            let stray = berth_domain::game_session::new_game_session_id(EU.0);
            let new = NewGameSession {
                location: EU.1,
                attempt: Some(PlacementAttempt {
                    attempt: attempt(EU.1),
                    notify: "ghost",
                    players: &[],
                    avoid: &[],
                    first_here: false,
                }),
                ..NewGameSession::new(&stray, EU.0, 8)
            };
            assert!(create_game_session(store, &new, &timings).await.is_err());
            match create(EU).await {
                Created::Created(session, routing) => {
                    berth_store::processes::announce(&stack.store, &routing, EU.0, &session.game_server_id, None).await;
                    ghost_session = Some(session.game_session_id);
                }
                other => panic!("the dead worker's create: {other:?}"),
            }
        }
        Cut::Refused => {
            // The EU host is busy with a session of its own: the attempt is refused there, spending it.
            berth_testkit::place_game_session(&stack.store, EU.0, "eu-1", 4).await;
            assert!(matches!(create(EU).await, Created::NoServer));
        }
        Cut::Taken | Cut::Recorded => {}
    }

    let _worker = stack.replica(&args()).await;
    let fulfilled = ended(&stack, "fragile", Duration::from_secs(8)).await;
    assert_eq!(
        fulfilled.status(),
        pb::PlacementStatus::Fulfilled,
        "{cut:?}: {fulfilled:?}"
    );
    if let Some(ghost_session) = &ghost_session {
        assert_eq!(
            &fulfilled.game_session_id, ghost_session,
            "{cut:?}: the dead worker's session is the one"
        );
    }
    // The dead worker wakes and takes its next step: it changes nothing.
    match cut {
        Cut::Taken => {
            let late = store::record_attempt(&stack.store, "crash", "fragile", 0, &candidates, None)
                .await
                .unwrap();
            assert!(matches!(late, store::AttemptRecorded::Moved(_)), "{late:?}");
        }
        Cut::Recorded => assert!(matches!(create(EU).await, Created::Abandoned)),
        Cut::Refused => assert!(matches!(create(US).await, Created::Abandoned)),
        Cut::Created => {}
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut ours = Vec::new();
    for session in told(&mut hosts) {
        if game_session_placement(&stack.store, &session).await == "fragile" {
            ours.push(session);
        }
    }
    assert_eq!(ours, [fulfilled.game_session_id], "{cut:?}: the placement's sessions");
}

/// The placement a game session was created for.
async fn game_session_placement(store: &Store, game_session_id: &str) -> String {
    let fleet_id = berth_domain::game_session::fleet_of(game_session_id).unwrap();
    let read = berth_store::sessions::read_game_sessions(store, fleet_id, &[game_session_id])
        .await
        .unwrap();
    read.into_iter()
        .flatten()
        .next()
        .map(|s| s.placement_id)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_dying_between_any_two_steps_leaves_one_session_on_a_single_node() {
    for cut in [Cut::Taken, Cut::Recorded, Cut::Created, Cut::Refused] {
        a_worker_dying_between_any_two_steps_leaves_one_session(TestRedis::single(), cut).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_dying_between_any_two_steps_leaves_one_session_on_a_cluster() {
    for cut in [Cut::Taken, Cut::Recorded, Cut::Created, Cut::Refused] {
        a_worker_dying_between_any_two_steps_leaves_one_session(TestRedis::cluster(), cut).await;
    }
}

/// Two replicas drain one queue at once: every placement is fulfilled, each on a server of its own, and no server
/// is told of a second session.
async fn two_replicas_drain_one_queue_without_a_duplicate(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    let _second = stack.replica(&args()).await;
    stack.queue("rush", 10_000, |_| {}).await;
    let mut hosts = Vec::new();
    for n in 0..12 {
        let fleet = if n % 2 == 0 { EU } else { US };
        hosts.push(stack.host(fleet, &format!("{}-{n}", fleet.0), Activation::Now).await);
    }
    let mut starts = Vec::new();
    for n in 0..12 {
        let mut client = stack.placements().await;
        starts.push(tokio::spawn(async move {
            client
                .start_game_session_placement(start(&format!("rush-{n}"), "rush"))
                .await
                .unwrap();
        }));
    }
    for started in starts {
        started.await.unwrap();
    }
    let mut sessions = HashSet::new();
    for n in 0..12 {
        let placement = ended(&stack, &format!("rush-{n}"), Duration::from_secs(8)).await;
        assert_eq!(placement.status(), pb::PlacementStatus::Fulfilled, "{placement:?}");
        assert!(
            sessions.insert(placement.game_session_id.clone()),
            "two placements on one session"
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let told = told(&mut hosts);
    assert_eq!(told.len(), 12, "each server told of one session: {told:?}");
    assert_eq!(told.into_iter().collect::<HashSet<_>>(), sessions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_drain_one_queue_without_a_duplicate_on_a_single_node() {
    two_replicas_drain_one_queue_without_a_duplicate(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_drain_one_queue_without_a_duplicate_on_a_cluster() {
    two_replicas_drain_one_queue_without_a_duplicate(TestRedis::cluster()).await;
}

/// A `berth-placement` process over the stack's Redis, as replica `id`.
fn placement_process(stack: &Stack, id: &str) -> berth_testkit::BinaryProcess {
    let config = stack.redis.config();
    let mode = match config.mode {
        berth_store::RedisMode::Single => "single",
        berth_store::RedisMode::Cluster => "cluster",
    };
    berth_testkit::BinaryProcess::spawn(
        "berth-placement",
        &[
            ("BERTH_REDIS_URL", config.urls.join(",")),
            ("BERTH_REDIS_MODE", mode.into()),
            (
                "BERTH_AUTH_KEY",
                String::from_utf8(berth_testkit::TEST_KEY.to_vec()).unwrap(),
            ),
            ("BERTH_PLACEMENT_RETRY_MS", "100".into()),
            ("BERTH_PLACEMENT_RECLAIM_IDLE_MS", "1500".into()),
            ("BERTH_REPLICA_ID", id.into()),
        ],
    )
}

/// A replica process SIGKILLed while its placements wait for their servers: another replica takes them over and
/// each is fulfilled once, on the session the dead one had created.
async fn a_killed_replicas_placements_are_fulfilled_once_by_another(redis: TestRedis) {
    let stack = Stack::with(redis, &api_only()).await;
    stack.queue("doomed", 20_000, |_| {}).await;
    let mut hosts = Vec::new();
    for n in 0..8 {
        let fleet = if n % 2 == 0 { EU } else { US };
        let activation = Activation::After(Duration::from_millis(800));
        hosts.push(stack.host(fleet, &format!("{}-{n}", fleet.0), activation).await);
    }
    let mut doomed = placement_process(&stack, "doomed");
    berth_testkit::wait_for_health(
        &doomed.endpoint(),
        "",
        tonic_health::pb::health_check_response::ServingStatus::Serving,
    )
    .await;
    let mut placements = stack.placements().await;
    for n in 0..8 {
        placements
            .start_game_session_placement(start(&format!("doomed-{n}"), "doomed"))
            .await
            .unwrap();
    }
    let mut given = Vec::new();
    while given.len() < 4 {
        given.extend(told(&mut hosts));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    doomed.kill();
    let _survivor = stack.replica(&args()).await;
    let mut sessions = HashSet::new();
    for n in 0..8 {
        let placement = ended(&stack, &format!("doomed-{n}"), Duration::from_secs(10)).await;
        assert_eq!(placement.status(), pb::PlacementStatus::Fulfilled, "{placement:?}");
        assert!(sessions.insert(placement.game_session_id));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    given.extend(told(&mut hosts));
    assert_eq!(given.len(), 8, "one session per placement: {given:?}");
    assert_eq!(given.into_iter().collect::<HashSet<_>>(), sessions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replicas_placements_are_fulfilled_once_by_another_on_a_single_node() {
    a_killed_replicas_placements_are_fulfilled_once_by_another(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replicas_placements_are_fulfilled_once_by_another_on_a_cluster() {
    a_killed_replicas_placements_are_fulfilled_once_by_another(TestRedis::cluster()).await;
}

fn latency(player: &str, location: &str, latency_ms: u32) -> pb::PlayerLatency {
    pb::PlayerLatency {
        player_id: player.into(),
        location: location.into(),
        latency_ms,
    }
}

fn ms(time: Option<prost_types::Timestamp>) -> i64 {
    let time = time.expect("a time");
    time.seconds * 1000 + i64::from(time.nanos / 1_000_000)
}

/// Seed 004's latency policies: no location is within 50 ms for the first second, then Europe is within 100 ms and
/// the placement lands there; a latency to a location no destination has is ignored; a player with no latency to
/// a location keeps the placement out of it, until the placement times out with NO_CANDIDATE.
async fn latency_policies_relax_on_schedule(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    stack
        .queue("near", 2_500, |queue| {
            queue.player_latency_policies = vec![
                pb::PlayerLatencyPolicy {
                    maximum_individual_player_latency_ms: 50,
                    policy_duration_seconds: 1,
                },
                pb::PlayerLatencyPolicy {
                    maximum_individual_player_latency_ms: 100,
                    policy_duration_seconds: 0,
                },
            ];
        })
        .await;
    let _eu = stack.host(EU, "eu-1", Activation::Now).await;
    let _us = stack.host(US, "us-1", Activation::Now).await;
    let mut near = start("near-1", "near");
    near.player_latencies = vec![
        latency("ana", EU.1, 80),
        latency("ana", US.1, 150),
        latency("ana", "mars-1", 5),
        latency("bo", EU.1, 70),
        latency("bo", US.1, 140),
    ];
    let mut placements = stack.placements().await;
    placements.start_game_session_placement(near).await.unwrap();
    let placed = ended(&stack, "near-1", Duration::from_secs(4)).await;
    assert_eq!(placed.status(), pb::PlacementStatus::Fulfilled, "{placed:?}");
    assert_eq!(placed.location, EU.1);
    assert!(placed.lowest_latency);
    let waited = ms(placed.end_time) - ms(placed.start_time);
    assert!(
        (1_000..2_000).contains(&waited),
        "placed after {waited} ms, once the 100 ms policy was in force"
    );

    let mut unmeasured = start("near-2", "near");
    unmeasured.player_latencies = vec![latency("ana", EU.1, 20), latency("cy", US.1, 20)];
    placements.start_game_session_placement(unmeasured).await.unwrap();
    let timed_out = ended(&stack, "near-2", Duration::from_secs(4)).await;
    assert_eq!(timed_out.status(), pb::PlacementStatus::TimedOut);
    assert_eq!(timed_out.status_reason(), pb::PlacementStatusReason::NoCandidate);
    assert!(timed_out.attempt_count >= 5, "every pass is an attempt: {timed_out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn latency_policies_relax_on_schedule_on_a_single_node() {
    latency_policies_relax_on_schedule(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn latency_policies_relax_on_schedule_on_a_cluster() {
    latency_policies_relax_on_schedule(TestRedis::cluster()).await;
}

/// Seed 004's cost ordering: a queue ordered by COST takes the Spot fleet at its Spot price over a cheaper
/// On-Demand price elsewhere; once the Spot fleet's type is judged not viable (FleetService), it is skipped, the
/// placement lands On-Demand, and the queue's metrics count its first choice not viable.
async fn cost_orders_candidates_and_non_viable_spot_is_skipped(redis: TestRedis) {
    use berth_proto::fleet::v1 as fpb;
    let stack = Stack::start(redis).await;
    let priced = |balancing: fpb::BalancingStrategy, on_demand: u64, spot: u64| {
        move |req: &mut fpb::CreateFleetRequest| {
            req.balancing_strategy = balancing as i32;
            req.instance_definitions = vec![fpb::InstanceDefinition {
                instance_type: "c5.large".into(),
                on_demand_hourly_cost_micros: on_demand,
                spot_hourly_cost_micros: spot,
            }];
        }
    };
    let spot = ("spot-eu", "eu-central");
    let on_demand = ("ondemand-us", "us-west");
    berth_testkit::anywhere_fleet_with(
        &stack.store,
        spot.0,
        &[spot.1],
        priced(fpb::BalancingStrategy::SpotOnly, 100_000, 30_000),
    )
    .await;
    berth_testkit::anywhere_fleet_with(
        &stack.store,
        on_demand.0,
        &[on_demand.1],
        priced(fpb::BalancingStrategy::OnDemandOnly, 80_000, 0),
    )
    .await;
    stack
        .queue("cheap", 5_000, |queue| {
            queue.destinations = [on_demand.0, spot.0]
                .iter()
                .map(|fleet| pb::QueueDestination {
                    fleet_id: (*fleet).into(),
                })
                .collect();
            queue.priority_configuration = Some(pb::PriorityConfiguration {
                priority_order: vec![pb::PriorityType::Cost as i32],
                location_order: Vec::new(),
            });
        })
        .await;
    let _spot = stack.host(spot, "spot-1", Activation::Now).await;
    let _on_demand = stack.host(on_demand, "od-1", Activation::Now).await;
    let mut placements = stack.placements().await;
    placements
        .start_game_session_placement(start("thrifty-1", "cheap"))
        .await
        .unwrap();
    let first = ended(&stack, "thrifty-1", Duration::from_secs(4)).await;
    assert_eq!(
        (first.fleet_id.as_str(), first.first_choice_outcome()),
        (spot.0, pb::FirstChoiceOutcome::Taken)
    );
    assert!(first.lowest_price);

    let fleets = spawn_service(
        berth_fleet::service(stack.store.clone(), &berth_fleet::FleetArgs::default(), None),
        stack.store.clone(),
    )
    .await;
    let channel = berth_sdk::connect(&fleets.endpoint(), &token(Role::Operator, None))
        .await
        .unwrap();
    fpb::fleet_service_client::FleetServiceClient::new(channel)
        .set_instance_type_viability(fpb::SetInstanceTypeViabilityRequest {
            fleet_id: spot.0.into(),
            instance_type: "c5.large".into(),
            location: spot.1.into(),
            viable: false,
            reason: "interruption rate too high".into(),
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    placements
        .start_game_session_placement(start("thrifty-2", "cheap"))
        .await
        .unwrap();
    let second = ended(&stack, "thrifty-2", Duration::from_secs(4)).await;
    assert_eq!(second.status(), pb::PlacementStatus::Fulfilled, "{second:?}");
    assert_eq!(
        (second.fleet_id.as_str(), second.first_choice_outcome()),
        (on_demand.0, pb::FirstChoiceOutcome::NotViable)
    );
    // Counted by the minute: a window of several takes both placements in when they straddle a minute's end.
    let metrics = placements
        .get_queue_metrics(pb::GetQueueMetricsRequest {
            queue_name: "cheap".into(),
            window_seconds: 300,
        })
        .await
        .unwrap()
        .into_inner()
        .metrics
        .unwrap();
    assert_eq!(metrics.placements_succeeded, 2);
    assert_eq!(metrics.first_choice_not_viable, 1);
    assert_eq!(metrics.lowest_price_placements, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cost_orders_candidates_and_non_viable_spot_is_skipped_on_a_single_node() {
    cost_orders_candidates_and_non_viable_spot_is_skipped(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cost_orders_candidates_and_non_viable_spot_is_skipped_on_a_cluster() {
    cost_orders_candidates_and_non_viable_spot_is_skipped(TestRedis::cluster()).await;
}

/// A queue with PENDING placements is deleted only with force, which cancels them (QUEUE_DELETED); a placement in
/// it can then no longer start.
async fn deleting_a_queue_with_pending_placements_takes_force(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    stack.queue("closing", 10_000, |_| {}).await;
    let mut placements = stack.placements().await;
    placements
        .start_game_session_placement(start("left", "closing"))
        .await
        .unwrap();
    let mut queues = stack.queues().await;
    let delete = pb::DeleteQueueRequest {
        name: "closing".into(),
        ..Default::default()
    };
    let refused = queues.delete_queue(delete.clone()).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(refused.message().contains("1 PENDING"), "{refused:?}");
    assert_eq!(
        describe(&stack, "left").await.unwrap().status(),
        pb::PlacementStatus::Pending
    );
    let forced = queues
        .delete_queue(pb::DeleteQueueRequest { force: true, ..delete })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(forced.cancelled_placement_count, 1);
    let cancelled = describe(&stack, "left").await.unwrap();
    assert_eq!(cancelled.status(), pb::PlacementStatus::Cancelled);
    assert_eq!(cancelled.status_reason(), pb::PlacementStatusReason::QueueDeleted);
    let gone = placements
        .start_game_session_placement(start("late", "closing"))
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_queue_with_pending_placements_takes_force_on_a_single_node() {
    deleting_a_queue_with_pending_placements_takes_force(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_queue_with_pending_placements_takes_force_on_a_cluster() {
    deleting_a_queue_with_pending_placements_takes_force(TestRedis::cluster()).await;
}

/// A placement that found no server is woken by the next server ready where it looked, rather than at its next
/// retry: with retries a second apart, it is fulfilled well within the second after the server comes.
async fn a_server_coming_ready_wakes_a_waiting_placement(redis: TestRedis) {
    let args = berth_placement::PlacementArgs {
        placement_retry_ms: 1_000,
        ..args()
    };
    let stack = Stack::with(redis, &args).await;
    stack
        .queue("eager", 10_000, |queue| {
            queue.destinations.truncate(1);
        })
        .await;
    let _busy = stack.host(EU, "eu-busy", Activation::Now).await;
    let mut placements = stack.placements().await;
    placements
        .start_game_session_placement(start("first", "eager"))
        .await
        .unwrap();
    assert_eq!(
        ended(&stack, "first", Duration::from_secs(5)).await.status(),
        pb::PlacementStatus::Fulfilled
    );
    placements
        .start_game_session_placement(start("second", "eager"))
        .await
        .unwrap();
    // Past its first attempt, and some way to its next.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let ready_at = tokio::time::Instant::now();
    let _fresh = stack.host(EU, "eu-fresh", Activation::Now).await;
    let fulfilled = ended(&stack, "second", Duration::from_secs(5)).await;
    assert_eq!(fulfilled.status(), pb::PlacementStatus::Fulfilled);
    let after = ready_at.elapsed();
    assert!(
        after < Duration::from_millis(600),
        "fulfilled {after:?} after the server came, as at a retry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_coming_ready_wakes_a_waiting_placement_on_a_single_node() {
    a_server_coming_ready_wakes_a_waiting_placement(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_coming_ready_wakes_a_waiting_placement_on_a_cluster() {
    a_server_coming_ready_wakes_a_waiting_placement(TestRedis::cluster()).await;
}

/// Starts whose callers give up while Redis stalls start nothing: the callers hear of their deadline, and once Redis
/// answers, the ids their calls held are let go of, so another request may use them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn placements_past_their_callers_deadline_are_not_started() {
    let stack = Stack::start(TestRedis::single()).await;
    stack.queue("slow", 10_000, |_| {}).await;
    let TestRedis::Single(server) = &stack.redis else {
        unreachable!("a single node")
    };
    server.pause();
    // Made without a client-side timer, so that what is seen is what the server answered at the deadline.
    let mut calls = Vec::new();
    for n in 0..12 {
        let endpoint = stack.placement.endpoint();
        calls.push(tokio::spawn(async move {
            let path = "/berth.placement.v1.PlacementService/StartGameSessionPlacement";
            let token = token(Role::Client, None);
            let request = start(&format!("late-{n}"), "slow");
            unary_without_timer(&endpoint, path, &token, &request, Duration::from_millis(300)).await
        }));
    }
    for call in calls {
        let status = call.await.unwrap();
        assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.resume();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut placements = stack.placements().await;
    for n in 0..12 {
        let id = format!("late-{n}");
        assert_eq!(
            describe(&stack, &id).await.unwrap_err().code(),
            Code::NotFound,
            "{id} was started"
        );
        let mut other = start(&id, "slow");
        other.maximum_player_session_count = 2;
        placements.start_game_session_placement(other).await.unwrap();
    }
}

/// A watch keeps to its filters and resumes after a cursor; bad requests are refused naming their fields.
async fn watches_filter_and_resume_and_bad_input_names_its_field(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    stack.queue("seen", 10_000, |_| {}).await;
    stack.queue("unseen", 10_000, |_| {}).await;
    let mut placements = stack.placements().await;
    let watcher = placements.clone();
    let watch_of = |req: pb::WatchGameSessionPlacementsRequest| {
        let mut client = watcher.clone();
        async move { client.watch_game_session_placements(req).await }
    };
    let mut filtered = watch_of(pb::WatchGameSessionPlacementsRequest {
        queue_names: vec!["seen".into()],
        event_types: vec![pb::PlacementEventType::Cancelled as i32],
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner();
    for (id, queue) in [("a", "unseen"), ("b", "seen"), ("c", "seen")] {
        placements.start_game_session_placement(start(id, queue)).await.unwrap();
        let stop = pb::StopGameSessionPlacementRequest {
            placement_id: id.into(),
        };
        placements.stop_game_session_placement(stop).await.unwrap();
    }
    let first = next_event(&mut filtered).await;
    assert_eq!(
        (
            first.event_type(),
            first.placement.as_ref().unwrap().placement_id.as_str()
        ),
        (pb::PlacementEventType::Cancelled, "b")
    );
    assert_eq!(first.custom_event_data, "route:seen");
    // Resumed after b's event, a watch of c's events alone gets c's CANCELLED, nothing of a or b.
    let mut resumed = watch_of(pb::WatchGameSessionPlacementsRequest {
        placement_ids: vec!["c".into(), "a".into()],
        queue_names: vec!["seen".into()],
        after_cursor: first.cursor.clone(),
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner();
    let cancelled = next_event(&mut resumed).await;
    assert_eq!(cancelled.event_type(), pb::PlacementEventType::Cancelled);
    assert_eq!(cancelled.placement.unwrap().placement_id, "c");

    let refused = watch_of(pb::WatchGameSessionPlacementsRequest {
        // 1 was STARTED, no longer sent: a filter that waits for it is refused rather than never matching.
        event_types: vec![0, 1],
        after_cursor: "nonsense".into(),
        from_oldest: true,
        ..Default::default()
    })
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(fields(&refused), ["event_types[0]", "event_types[1]", "from_oldest"]);
    let mut bad = start("bad", "seen");
    bad.player_latencies = vec![latency("ana", EU.1, 60_001)];
    bad.maximum_player_session_count = 0;
    let refused = placements.start_game_session_placement(bad).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(
        fields(&refused),
        [
            "maximum_player_session_count",
            "player_latencies[0].latency_ms",
            "desired_player_sessions"
        ]
    );
    assert_eq!(describe(&stack, "bad").await.unwrap_err().code(), Code::NotFound);
    let window = pb::GetQueueMetricsRequest {
        queue_name: "seen".into(),
        window_seconds: 86_401,
    };
    let refused = placements.get_queue_metrics(window).await.unwrap_err();
    assert_eq!(fields(&refused), ["window_seconds"]);
}

/// A queue created while the replica runs is worked at once: its creation is announced, so its first placement does
/// not wait for the replica's next listing of the queues (a minute here).
async fn a_new_queues_first_placement_is_worked_at_once(redis: TestRedis) {
    let listing_rarely = berth_placement::PlacementArgs {
        placement_queue_discovery_ms: 60_000,
        ..args()
    };
    let stack = Stack::with(redis, &listing_rarely).await;
    let _eu = stack.host(EU, "eu-1", Activation::Now).await;
    // The replica has listed the queues once, before this one existed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    stack.queue("fresh", 10_000, |_| {}).await;
    let mut placements = stack.placements().await;
    placements
        .start_game_session_placement(start("first-of-fresh", "fresh"))
        .await
        .unwrap();
    let placed = ended(&stack, "first-of-fresh", Duration::from_secs(10)).await;
    assert_eq!(placed.status(), pb::PlacementStatus::Fulfilled, "{placed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_queues_first_placement_is_worked_at_once_on_a_single_node() {
    a_new_queues_first_placement_is_worked_at_once(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_queues_first_placement_is_worked_at_once_on_a_cluster() {
    a_new_queues_first_placement_is_worked_at_once(TestRedis::cluster()).await;
}

/// A placement event names its placement, whose record is joined when the event is read: once the record is gone
/// with its retention, the event reads as trimmed, though the queue's sweep has not removed it yet.
async fn an_event_whose_placement_expired_reads_as_trimmed(redis: TestRedis) {
    use berth_store::queues::placements::read_placement_events;
    let brief = berth_placement::PlacementArgs {
        placement_retention_ms: 300,
        // No workers: no sweep trims the queue's events.
        ..api_only()
    };
    let stack = Stack::with(redis, &brief).await;
    stack.queue("brief", 10_000, |_| {}).await;
    let mut placements = stack.placements().await;
    placements
        .start_game_session_placement(start("short", "brief"))
        .await
        .unwrap();
    let stop = pb::StopGameSessionPlacementRequest {
        placement_id: "short".into(),
    };
    placements.stop_game_session_placement(stop).await.unwrap();
    let read = read_placement_events(&stack.store, "brief", "-", 10).await.unwrap();
    assert_eq!(read.gone, None);
    let [event] = read.entries.as_slice() else {
        panic!("one event, got {:?}", read.entries)
    };
    assert_eq!(event.placement.status(), pb::PlacementStatus::Cancelled);
    assert_eq!(event.placement.game_session_name, "match short", "the record is joined");
    let position = event.position.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let gone = loop {
        let read = read_placement_events(&stack.store, "brief", "-", 10).await.unwrap();
        if read.entries.is_empty() {
            break read.gone;
        }
        assert!(tokio::time::Instant::now() < deadline, "the placement never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (ms, seq) = position.split_once('-').unwrap();
    assert_eq!(gone, Some((ms.parse().unwrap(), seq.parse().unwrap())));
    let kept: u64 = stack
        .store
        .query(redis::cmd("XLEN").arg(berth_store::keys::QueueKeys::new("brief").events()))
        .await
        .unwrap();
    assert_eq!(kept, 1, "the event is still in the stream, unswept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_whose_placement_expired_reads_as_trimmed_on_a_single_node() {
    an_event_whose_placement_expired_reads_as_trimmed(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_whose_placement_expired_reads_as_trimmed_on_a_cluster() {
    an_event_whose_placement_expired_reads_as_trimmed(TestRedis::cluster()).await;
}

/// A watch resumed after events that were trimmed unread is OUT_OF_RANGE, naming the queue whose events are gone.
async fn a_cursor_whose_following_events_were_trimmed_is_out_of_range(redis: TestRedis) {
    let kept_one = berth_placement::PlacementArgs {
        placement_events_max: 1,
        ..args()
    };
    let stack = Stack::with(redis, &kept_one).await;
    stack.queue("brief", 10_000, |_| {}).await;
    let mut placements = stack.placements().await;
    let mut watch = stack.watch(&["brief"]).await;
    let mut first = None;
    for id in ["t-1", "t-2", "t-3"] {
        placements
            .start_game_session_placement(start(id, "brief"))
            .await
            .unwrap();
        let stop = pb::StopGameSessionPlacementRequest {
            placement_id: id.into(),
        };
        placements.stop_game_session_placement(stop).await.unwrap();
        if first.is_none() {
            first = Some(next_event(&mut watch).await);
        }
    }
    let first = first.expect("t-1 cancelled");
    // The queue keeps one event: its sweep trims the others, which a watch resumed after the first never read.
    let resumed = pb::WatchGameSessionPlacementsRequest {
        queue_names: vec!["brief".into()],
        after_cursor: first.cursor,
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let opened = placements.watch_game_session_placements(resumed.clone()).await;
        if let Err(refused) = opened {
            break refused;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the queue's events were never trimmed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
    assert!(
        refused.message().starts_with("events of queue \"brief\""),
        "{}",
        refused.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cursor_whose_following_events_were_trimmed_is_out_of_range_on_a_single_node() {
    a_cursor_whose_following_events_were_trimmed_is_out_of_range(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cursor_whose_following_events_were_trimmed_is_out_of_range_on_a_cluster() {
    a_cursor_whose_following_events_were_trimmed_is_out_of_range(TestRedis::cluster()).await;
}

fn fields(status: &tonic::Status) -> Vec<String> {
    use tonic_types::StatusExt;
    let bad = status.get_details_bad_request().expect("field violations attached");
    bad.field_violations.into_iter().map(|v| v.field).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watches_filter_and_resume_and_bad_input_names_its_field_on_a_single_node() {
    watches_filter_and_resume_and_bad_input_names_its_field(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watches_filter_and_resume_and_bad_input_names_its_field_on_a_cluster() {
    watches_filter_and_resume_and_bad_input_names_its_field(TestRedis::cluster()).await;
}

/// A placement asking for more players than any destination's servers take fails at once (UNSATISFIABLE) rather
/// than waiting out its timeout; one within their reach is fulfilled.
async fn more_players_than_any_server_takes_fails_at_once(redis: TestRedis) {
    let stack = Stack::start(redis).await;
    stack.queue("crowded", 10_000, |_| {}).await;
    let _eu = stack.host_of(EU, "eu-small", Activation::Now, 4).await;
    let _us = stack.host_of(US, "us-small", Activation::Now, 4).await;
    let mut placements = stack.placements().await;
    placements
        .start_game_session_placement(start("eight", "crowded"))
        .await
        .unwrap();
    let failed = ended(&stack, "eight", Duration::from_secs(3)).await;
    assert_eq!(failed.status(), pb::PlacementStatus::Failed, "{failed:?}");
    assert_eq!(failed.status_reason(), pb::PlacementStatusReason::Unsatisfiable);
    assert!(
        failed.status_message.contains("maximum_player_session_count 8"),
        "{failed:?}"
    );
    let mut four = start("four", "crowded");
    four.maximum_player_session_count = 4;
    placements.start_game_session_placement(four).await.unwrap();
    assert_eq!(
        ended(&stack, "four", Duration::from_secs(3)).await.status(),
        pb::PlacementStatus::Fulfilled
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn more_players_than_any_server_takes_fails_at_once_on_a_single_node() {
    more_players_than_any_server_takes_fails_at_once(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn more_players_than_any_server_takes_fails_at_once_on_a_cluster() {
    more_players_than_any_server_takes_fails_at_once(TestRedis::cluster()).await;
}
