//! The session service against real Redis (single node and cluster), a real health replica and game servers
//! speaking the SDK stream: game sessions created on ready processes and activated by them, player sessions that
//! never overfill a session whatever races, timeouts, search, and bad input.

mod session {
    mod allocation;
    mod announced;
    mod contract;
    mod flow;
    mod legacy;
}

use std::time::Duration;

use berth_domain::fleet::settings::FleetSettings;
use berth_domain::game_session::{game_session_of, new_game_session_id};
use berth_health::HealthArgs;
use berth_proto::common::v1::KeyValue;
use berth_proto::session::v1::game_session_service_client::GameSessionServiceClient;
use berth_proto::session::v1::player_session_service_client::PlayerSessionServiceClient;
use berth_proto::session::v1::{self as pb, describe_player_sessions_request::Selector};
use berth_runtime::auth::Role;
use berth_sdk::game_server::{Event, Events, GameServer, SdkError};
use berth_session::SessionArgs;
use berth_store::Store;
use berth_testkit::{
    RunningService, TestRedis, anywhere_fleet, assert_serves, fast_settings, game_server_config, set_fleet_settings,
    spawn_service, token,
};
use tokio::task::JoinSet;
use tonic::Code;

const FLEET: &str = "arena";

fn fast_health() -> HealthArgs {
    HealthArgs {
        initial_delay_ms: 500,
        heartbeat_flush_ms: 5,
        monitor_sweep_ms: 50,
        ..Default::default()
    }
}

fn fast_sessions() -> SessionArgs {
    SessionArgs {
        sweep_ms: 50,
        ..Default::default()
    }
}

/// Redis, one health replica and one session service, in-process.
pub(crate) struct Stack {
    _redis: TestRedis,
    pub(crate) store: Store,
    pub(crate) health: RunningService,
    sessions: RunningService,
}

impl Stack {
    pub(crate) async fn start(redis: TestRedis, args: &SessionArgs) -> Stack {
        let store = Store::connect(&redis.config()).await.unwrap();
        anywhere_fleet(&store, FLEET, &["local", "other"]).await;
        let health = spawn_service(berth_health::service(store.clone(), &fast_health()), store.clone()).await;
        let sessions = spawn_service(berth_session::service(store.clone(), args), store.clone()).await;
        let stack = Stack {
            _redis: redis,
            store,
            health,
            sessions,
        };
        stack.settings(|_| {}).await;
        stack
    }

    /// Gives the fleet `fast_settings` (heartbeats every 100 ms) as `change` changes them, as its record keeps them:
    /// deadlines shorter than the contract lets a fleet have, for tests that wait on them.
    pub(crate) async fn settings(&self, change: impl FnOnce(&mut FleetSettings)) {
        let mut settings = fast_settings();
        change(&mut settings);
        set_fleet_settings(&self.store, FLEET, &settings).await;
    }

    async fn channel(&self) -> berth_sdk::AuthedChannel {
        berth_sdk::connect(&self.sessions.endpoint(), &token(Role::Client, None))
            .await
            .unwrap()
    }

    pub(crate) async fn games(&self) -> GameSessionServiceClient<berth_sdk::AuthedChannel> {
        GameSessionServiceClient::new(self.channel().await)
    }

    pub(crate) async fn players(&self) -> PlayerSessionServiceClient<berth_sdk::AuthedChannel> {
        PlayerSessionServiceClient::new(self.channel().await)
    }

    /// A game server process of the fleet, in-process on the SDK, ready.
    async fn server(&self, id: &str, sessions: u32, location: &str) -> (GameServer, Events) {
        self.server_of(id, sessions, location, 0).await
    }

    /// A ready game server process hosting up to `sessions` sessions of up to `max_players` each (0: 1000).
    async fn server_of(&self, id: &str, sessions: u32, location: &str, max_players: u32) -> (GameServer, Events) {
        let config = game_server_config(&self.health.endpoint(), FLEET, id, location, sessions, max_players);
        let (server, events) = GameServer::connect(config).await.unwrap();
        server.ready().await.unwrap();
        (server, events)
    }
}

fn create(max: u32) -> pb::CreateGameSessionRequest {
    pb::CreateGameSessionRequest {
        fleet_id: FLEET.into(),
        maximum_player_session_count: max,
        name: "duel".into(),
        ..Default::default()
    }
}

/// The next StartGameSession a server is told of.
async fn started(events: &mut Events) -> pb::GameSession {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
            Ok(Some(Event::StartGameSession { game_session, .. })) => return game_session,
            Ok(Some(_)) => continue,
            other => panic!("expected start_game_session, got {other:?}"),
        }
    }
}

/// Creates a game session on the fleet and has `server` (whose events these are) activate it.
async fn active_session(
    stack: &Stack,
    server: &GameServer,
    events: &mut Events,
    request: pb::CreateGameSessionRequest,
) -> String {
    let session = new_session(stack, request).await;
    assert_eq!(session.status(), pb::GameSessionStatus::Activating);
    let told = started(events).await;
    assert_eq!(told.game_session_id, session.game_session_id);
    let activated = server
        .activate_game_session(session.game_session_id.clone())
        .await
        .unwrap();
    assert_eq!(activated.status(), pb::GameSessionStatus::Active);
    session.game_session_id
}

/// The game session CreateGameSession answers `request` with.
async fn new_session(stack: &Stack, request: pb::CreateGameSessionRequest) -> pb::GameSession {
    stack
        .games()
        .await
        .create_game_session(request)
        .await
        .unwrap()
        .into_inner()
        .game_session
        .unwrap()
}

/// DescribeGameSessions of one id.
async fn described(stack: &Stack, id: &str) -> pb::DescribeGameSessionsResponse {
    stack
        .games()
        .await
        .describe_game_sessions(pb::DescribeGameSessionsRequest {
            game_session_ids: vec![id.into()],
        })
        .await
        .unwrap()
        .into_inner()
}

async fn describe(stack: &Stack, id: &str) -> pb::GameSession {
    let found = described(stack, id).await;
    found.game_sessions.into_iter().next().expect("the session exists")
}

/// Waits until game session `id` is past its retention: unknown to DescribeGameSessions.
pub(crate) async fn expired(stack: &Stack, id: &str) {
    eventually("expiry", async || {
        (described(stack, id).await.unknown_game_session_ids == [id]).then_some(())
    })
    .await;
}

pub(crate) async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..200 {
        if let Some(found) = check().await {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} never happened");
}

fn join(game_session_id: &str, player: &str) -> pb::CreatePlayerSessionRequest {
    pb::CreatePlayerSessionRequest {
        game_session_id: game_session_id.into(),
        player_id: player.into(),
        player_data: String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_health_reflection_and_guards_its_rpcs() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    assert_serves(
        &stack.sessions.endpoint(),
        &[
            "berth.session.v1.GameSessionService",
            "berth.session.v1.PlayerSessionService",
        ],
    )
    .await;
    let (endpoint, server_token) = (
        stack.sessions.endpoint(),
        token(Role::GameServer, Some((FLEET, "gs-1"))),
    );
    let as_server = berth_sdk::connect(&endpoint, &server_token).await.unwrap();
    let err = GameSessionServiceClient::new(as_server)
        .describe_game_sessions(pb::DescribeGameSessionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
}

async fn a_full_session_takes_exactly_its_slots(redis: TestRedis) {
    let stack = Stack::start(redis, &fast_sessions()).await;
    // The race holds the shared cores long enough to delay a heartbeat past the fast settings' 300 ms window, which
    // would end the session ERROR mid-race: this test is about slots, so the server gets a 6 s window.
    stack.settings(|settings| settings.heartbeat_ms = 2_000).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(100)).await;

    // 1,000 players race for 100 slots, over 8 connections.
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(stack.players().await);
    }
    let mut racers = JoinSet::new();
    for player in 0..1000 {
        let mut client = clients[player % clients.len()].clone();
        let request = join(&session, &format!("player-{player}"));
        // A call that timed out (UNAVAILABLE: the outcome is unknown) is retried as a client would: creation is
        // idempotent per player, so a retry returns the slot the first call took, if it took one.
        racers.spawn(async move {
            let mut attempts = 0;
            loop {
                match client.create_player_session(request.clone()).await {
                    Err(status) if status.code() == Code::Unavailable && attempts < 5 => attempts += 1,
                    outcome => return outcome.map(|_| ()),
                }
            }
        });
    }
    let (mut won, mut full) = (0, 0);
    while let Some(outcome) = racers.join_next().await {
        match outcome.unwrap() {
            Ok(()) => won += 1,
            Err(status) if status.code() == Code::ResourceExhausted => full += 1,
            Err(status) => panic!("unexpected {status:?}"),
        }
    }
    assert_eq!((won, full), (100, 900));
    let described = describe(&stack, &session).await;
    assert_eq!(described.current_player_session_count, 100, "{described:?}");
    let listed = stack
        .players()
        .await
        .describe_player_sessions(pb::DescribePlayerSessionsRequest {
            selector: Some(Selector::GameSessionId(session.clone())),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.player_sessions.len(), 100);
    assert!(listed.next_page_token.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_players_racing_for_a_hundred_slots_get_exactly_a_hundred_on_a_single_node() {
    a_full_session_takes_exactly_its_slots(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_players_racing_for_a_hundred_slots_get_exactly_a_hundred_on_a_cluster() {
    a_full_session_takes_exactly_its_slots(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_all_or_nothing_and_repeats_are_idempotent_per_player() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(30)).await;
    let batch = |from: usize, count: usize, data: &str| pb::CreatePlayerSessionsRequest {
        game_session_id: session.clone(),
        players: (from..from + count)
            .map(|n| pb::DesiredPlayerSession {
                player_id: format!("p{n}"),
                player_data: data.into(),
            })
            .collect(),
    };
    let mut players = stack.players().await;
    let first = players
        .create_player_sessions(batch(0, 20, "x"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.player_sessions.len(), 20);
    assert!(
        first
            .player_sessions
            .iter()
            .all(|p| p.status() == pb::PlayerSessionStatus::Reserved)
    );

    // 25 more do not fit in the 10 slots left: none is created.
    let err = players.create_player_sessions(batch(20, 25, "x")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert_eq!(describe(&stack, &session).await.current_player_session_count, 20);

    // Players who hold a slot get theirs back and take no new one; with other data they are refused.
    let again = players
        .create_player_sessions(batch(15, 10, "x"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        again.player_sessions[0].player_session_id,
        first.player_sessions[15].player_session_id
    );
    assert_eq!(describe(&stack, &session).await.current_player_session_count, 25);
    let err = players.create_player_sessions(batch(0, 1, "other")).await.unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);

    // The server lets one in and out: its slot reopens.
    let id = first.player_sessions[0].player_session_id.clone();
    let accepted = server.accept_player_session(session.clone(), id.clone()).await.unwrap();
    assert_eq!(accepted.status(), pb::PlayerSessionStatus::Active);
    let removed = server.remove_player_session(session.clone(), id.clone()).await.unwrap();
    assert_eq!(removed.status(), pb::PlayerSessionStatus::Completed);
    assert_eq!(describe(&stack, &session).await.current_player_session_count, 24);
    let by_player = players
        .describe_player_sessions(pb::DescribePlayerSessionsRequest {
            selector: Some(Selector::PlayerId("p0".into())),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_player.player_sessions.len(), 1);
    assert_eq!(
        by_player.player_sessions[0].status(),
        pb::PlayerSessionStatus::Completed
    );
    assert_eq!(
        by_player.player_sessions[0].endpoint.as_ref().unwrap().ip_address,
        "10.0.0.7"
    );

    // Pages of 7 go through all 25, though a batch's player sessions share their creation time.
    let mut ids = Vec::new();
    let mut token = String::new();
    loop {
        let page = players
            .describe_player_sessions(pb::DescribePlayerSessionsRequest {
                selector: Some(Selector::GameSessionId(session.clone())),
                page_size: 7,
                page_token: token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.extend(page.player_sessions.into_iter().map(|p| p.player_session_id));
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!((ids.len(), distinct.len()), (25, 25));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_states_unknown_ids_and_other_servers_sessions_are_refused() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server_a, mut events_a) = stack.server("gs-a", 1, "local").await;
    let (server_b, mut events_b) = stack.server("gs-b", 1, "local").await;
    let mut games = stack.games().await;
    let mut players = stack.players().await;

    // ACTIVATING: players cannot join yet, and the error names the state.
    let created = games
        .create_game_session(create(4))
        .await
        .unwrap()
        .into_inner()
        .game_session
        .unwrap();
    let err = players
        .create_player_session(join(&created.game_session_id, "p"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("ACTIVATING"), "{}", err.message());
    let (host, host_events, other, other_events) = if created.game_server_id == "gs-a" {
        (&server_a, &mut events_a, &server_b, &mut events_b)
    } else {
        (&server_b, &mut events_b, &server_a, &mut events_a)
    };
    started(host_events).await;
    host.activate_game_session(created.game_session_id.clone())
        .await
        .unwrap();
    let psid = players
        .create_player_session(join(&created.game_session_id, "p"))
        .await
        .unwrap()
        .into_inner()
        .player_session
        .unwrap()
        .player_session_id;

    // The other server may not let that player in.
    let other_session = active_session(&stack, other, other_events, create(4)).await;
    match other.accept_player_session(other_session.clone(), psid.clone()).await {
        Err(SdkError::Refused { code, .. }) => assert_eq!(code, Code::PermissionDenied),
        other => panic!("expected PERMISSION_DENIED, got {other:?}"),
    }
    match other
        .accept_player_session(created.game_session_id.clone(), psid.clone())
        .await
    {
        Err(SdkError::Refused { code, .. }) => assert_eq!(code, Code::PermissionDenied),
        other => panic!("expected PERMISSION_DENIED, got {other:?}"),
    }

    // No server is left to host a third session.
    let err = games.create_game_session(create(4)).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);

    // Unknown ids, fleets and bad input.
    let unknown = format!("{FLEET}/gsess-00000000-0000-0000-0000-000000000000");
    let err = players.create_player_session(join(&unknown, "p")).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = games
        .create_game_session(pb::CreateGameSessionRequest {
            fleet_id: "nowhere".into(),
            ..create(4)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = games.create_game_session(create(1001)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("maximum_player_session_count"),
        "{}",
        err.message()
    );
    let long = "d".repeat(2049);
    let err = players
        .create_player_session(pb::CreatePlayerSessionRequest {
            player_data: long,
            ..join(&other_session, "q")
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(describe(&stack, &other_session).await.current_player_session_count, 0);

    // Ended: terminate forced, then nothing more changes it.
    let terminated = games
        .terminate_game_session(pb::TerminateGameSessionRequest {
            game_session_id: other_session.clone(),
            termination_mode: pb::TerminationMode::ForceTerminate as i32,
        })
        .await
        .unwrap()
        .into_inner()
        .game_session
        .unwrap();
    assert_eq!(terminated.status(), pb::GameSessionStatus::Terminated);
    assert_eq!(terminated.status_reason(), pb::GameSessionStatusReason::ForceTerminated);
    let err = players
        .create_player_session(join(&other_session, "q"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("TERMINATED"), "{}", err.message());
    let err = games
        .update_game_session(pb::UpdateGameSessionRequest {
            game_session_id: other_session.clone(),
            name: Some("renamed".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_not_activated_or_players_not_accepted_in_time_end_and_free_their_slots() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    stack
        .settings(|settings| {
            settings.activation_ms = 300;
            settings.reservation_ms = 300;
        })
        .await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let mut games = stack.games().await;

    // Never activated: TERMINATED (ACTIVATION_TIMEOUT), and the server is free for the next one.
    let first = games
        .create_game_session(create(2))
        .await
        .unwrap()
        .into_inner()
        .game_session
        .unwrap();
    started(&mut events).await;
    let ended = eventually("activation timeout", async || {
        let session = describe(&stack, &first.game_session_id).await;
        (session.status() == pb::GameSessionStatus::Terminated).then_some(session)
    })
    .await;
    assert_eq!(ended.status_reason(), pb::GameSessionStatusReason::ActivationTimeout);
    let err = server
        .activate_game_session(first.game_session_id.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            SdkError::Refused {
                code: Code::FailedPrecondition,
                ..
            }
        ),
        "{err:?}"
    );

    // A player who never connects: TIMEDOUT, slot freed, and an event of its own, which nobody asked for.
    let session = active_session(&stack, &server, &mut events, create(2)).await;
    let mut watch = games
        .watch_session_events(watch_from(FLEET, ""))
        .await
        .unwrap()
        .into_inner();
    let mut players = stack.players().await;
    let late = players.create_player_session(join(&session, "late")).await.unwrap();
    let late = late.into_inner().player_session.unwrap();
    // The reservation runs from the creation (the session is ACTIVE) for the fleet's 300 ms, as the player is told.
    let ms = |t: Option<prost_types::Timestamp>| t.map(|t| t.seconds * 1_000 + i64::from(t.nanos) / 1_000_000);
    assert_eq!(
        ms(late.reserved_until_time),
        ms(late.creation_time).map(|created| created + 300)
    );
    let late = late.player_session_id;
    assert_eq!(describe(&stack, &session).await.current_player_session_count, 1);
    let timed_out = eventually("reservation timeout", async || {
        let found = players
            .describe_player_sessions(pb::DescribePlayerSessionsRequest {
                selector: Some(Selector::GameSessionId(session.clone())),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let player = found.player_sessions.into_iter().next()?;
        (player.status() == pb::PlayerSessionStatus::Timedout).then_some(player)
    })
    .await;
    assert!(timed_out.termination_time.is_some());
    assert_eq!(describe(&stack, &session).await.current_player_session_count, 0);
    let told = next_event(&mut watch).await;
    assert_eq!(told.event_type(), pb::SessionEventType::PlayerSessionTimedOut);
    match told.subject {
        Some(pb::session_event::Subject::PlayerSession(p)) => {
            assert_eq!(
                (p.status(), p.player_session_id),
                (pb::PlayerSessionStatus::Timedout, late)
            );
            assert_eq!(p.endpoint.map(|e| e.ip_address), Some("10.0.0.7".to_owned()));
        }
        other => panic!("expected a player session, got {other:?}"),
    }
}

/// A session of 2 players on a new server gs-1, which player p joined, then ended by its server.
async fn ended_with_one_player(stack: &Stack) -> (GameServer, String, pb::PlayerSession) {
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let session = active_session(stack, &server, &mut events, create(2)).await;
    let mut players = stack.players().await;
    let player = players
        .create_player_session(join(&session, "p"))
        .await
        .unwrap()
        .into_inner()
        .player_session
        .unwrap();
    server.end_game_session(session.clone()).await.unwrap();
    (server, session, player)
}

/// Where no server is named, a session packs onto a process already hosting others with room to spare, once a
/// process that hosts several at a time has registered, before it goes to an idle one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_pack_onto_a_process_that_hosts_several() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (_several, _several_events) = stack.server("gs-a-several", 2, "local").await;
    let (_one, _one_events) = stack.server("gs-b-one", 1, "local").await;
    let mut hosts = Vec::new();
    for _ in 0..3 {
        hosts.push(new_session(&stack, create(4)).await.game_server_id);
    }
    assert_eq!(hosts, ["gs-a-several", "gs-a-several", "gs-b-one"]);
}

/// A game session purged after its retention takes every player session it made with it, however many over its
/// life: a long-lived lobby passes the ~8,000 values Lua hands one Redis call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_made_thousands_of_player_sessions_is_purged_whole() {
    use berth_store::sessions::{
        Changed, HostedChange, PlayersCreated, Removed, change_hosted, create_player_sessions,
    };
    let args = SessionArgs {
        retention_ms: 400,
        ..fast_sessions()
    };
    let stack = Stack::start(TestRedis::single(), &args).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(1000)).await;
    for round in 0..9 {
        let ids: Vec<String> = (0..1000).map(|n| format!("p{round}-{n}")).collect();
        let players: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "")).collect();
        let made = create_player_sessions(&stack.store, FLEET, &session, &players)
            .await
            .unwrap();
        let PlayersCreated::Created(made) = made else {
            panic!("1,000 seats are free: {made:?}");
        };
        let leaving: Vec<HostedChange> = made
            .iter()
            .map(|player| HostedChange::Remove {
                game_session_id: &session,
                player_session_id: &player.player_session_id,
            })
            .collect();
        let left = change_hosted(&stack.store, FLEET, "gs-1", &leaving).await.unwrap();
        assert!(
            left.iter()
                .all(|left| matches!(left, Ok(Changed::Removed(Removed::Removed(_)))))
        );
    }
    server.end_game_session(session.clone()).await.unwrap();
    expired(&stack, &session).await;
    let index = berth_store::keys::FleetKeys::new(FLEET).players();
    let listed: u64 = stack.store.query(redis::cmd("ZCARD").arg(&index)).await.unwrap();
    assert_eq!(listed, 0, "every player session it made is gone from the index");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_sessions_stay_readable_for_the_retention_then_expire() {
    let args = SessionArgs {
        retention_ms: 400,
        ..fast_sessions()
    };
    let stack = Stack::start(TestRedis::single(), &args).await;
    let (_server, session, player) = ended_with_one_player(&stack).await;
    let mut players = stack.players().await;
    let ended = describe(&stack, &session).await;
    assert_eq!(ended.status(), pb::GameSessionStatus::Terminated);
    assert_eq!(ended.status_reason(), pb::GameSessionStatusReason::EndedByServer);
    expired(&stack, &session).await;
    let err = players
        .describe_player_sessions(pb::DescribePlayerSessionsRequest {
            selector: Some(Selector::PlayerSessionId(player.player_session_id)),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let of_player = players
        .describe_player_sessions(pb::DescribePlayerSessionsRequest {
            selector: Some(Selector::PlayerId("p".into())),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(of_player.player_sessions.is_empty(), "{of_player:?}");
    // Its events are gone too: a watcher that far behind is told it missed some.
    let err = stack
        .games()
        .await
        .watch_session_events(watch_from(FLEET, "1-0"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_sessions_player_sessions_are_kept_in_its_record() {
    let stack = Stack::start(TestRedis::cluster(), &fast_sessions()).await;
    let (server, session, player) = ended_with_one_player(&stack).await;
    assert_eq!(
        game_session_of(&player.player_session_id).as_deref(),
        Some(session.as_str())
    );
    let mut players = stack.players().await;
    // The player session is kept in its game session's record: found by its id, its game session's and its
    // player's, completed and with the endpoint still.
    let selectors = [
        Selector::PlayerSessionId(player.player_session_id.clone()),
        Selector::GameSessionId(session.clone()),
        Selector::PlayerId("p".into()),
    ];
    for selector in &selectors {
        let found = players
            .describe_player_sessions(pb::DescribePlayerSessionsRequest {
                selector: Some(selector.clone()),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .player_sessions;
        assert_eq!(found.len(), 1, "{selector:?}: {found:?}");
        assert_eq!(found[0].player_session_id, player.player_session_id);
        assert_eq!(found[0].status(), pb::PlayerSessionStatus::Completed);
        assert_eq!(found[0].endpoint, player.endpoint, "{selector:?}");
    }
    // Its server is answered as it was before the end: the player left already.
    let removed = server
        .remove_player_session(session.clone(), player.player_session_id.clone())
        .await
        .unwrap();
    assert_eq!(removed.status(), pb::PlayerSessionStatus::Completed);
    let err = server
        .accept_player_session(session.clone(), player.player_session_id.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("COMPLETED"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_session_kept_less_long_than_the_events_stays_while_its_end_event_does() {
    use berth_store::sessions::{Created, NewGameSession, SessionTimings, create_game_session};
    // Events are kept 3 s; the session is created, as a placement's is, with a retention of its own, 200 ms.
    let args = SessionArgs {
        retention_ms: 3_000,
        ..fast_sessions()
    };
    let stack = Stack::start(TestRedis::single(), &args).await;
    let (_server, _events) = stack.server("gs-1", 1, "local").await;
    let id = new_game_session_id(FLEET);
    let timings = SessionTimings { retention_ms: 200 };
    let created = create_game_session(&stack.store, &NewGameSession::new(&id, FLEET, 2), &timings)
        .await
        .unwrap();
    assert!(matches!(created, Created::Created(..)), "{created:?}");
    stack
        .games()
        .await
        .terminate_game_session(pb::TerminateGameSessionRequest {
            game_session_id: id.clone(),
            termination_mode: pb::TerminationMode::ForceTerminate as i32,
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Past its own retention, it is still read, and so is its end event, whose record it is.
    assert_eq!(describe(&stack, &id).await.status(), pb::GameSessionStatus::Terminated);
    let mut watch = stack
        .games()
        .await
        .watch_session_events(pb::WatchSessionEventsRequest {
            fleet_ids: vec![FLEET.into()],
            from_oldest: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let ended = next_event(&mut watch).await;
    assert_eq!(ended.event_type(), pb::SessionEventType::GameSessionTerminated);
    match &ended.subject {
        Some(pb::session_event::Subject::GameSession(g)) => {
            assert_eq!(
                (g.game_session_id.as_str(), g.location.as_str()),
                (id.as_str(), "local")
            );
        }
        other => panic!("the end of a game session: {other:?}"),
    }
    // Once the event is past the events' retention, both go.
    expired(&stack, &id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_filters_sorts_and_pages_active_sessions() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 20, "local").await;
    let mut ids = Vec::new();
    for n in 0..12u32 {
        let mode = if n % 2 == 0 { "ranked" } else { "casual" };
        let request = pb::CreateGameSessionRequest {
            name: format!("match-{n}"),
            game_properties: vec![KeyValue {
                key: "mode".into(),
                value: mode.into(),
            }],
            ..create(10)
        };
        ids.push(active_session(&stack, &server, &mut events, request).await);
    }
    let mut players = stack.players().await;
    for (n, id) in ids.iter().enumerate() {
        for p in 0..n.min(10) {
            players.create_player_session(join(id, &format!("p{p}"))).await.unwrap();
        }
    }
    let search = |filter: &str, sort: &str, page_size: u32, page_token: String| pb::SearchGameSessionsRequest {
        fleet_id: FLEET.into(),
        location: String::new(),
        filter_expression: filter.into(),
        sort_expression: sort.into(),
        page_size,
        page_token,
    };
    let mut games = stack.games().await;
    let found = games
        .search_game_sessions(search(
            "gameSessionProperties.mode = 'ranked' AND playerSessionCount >= 4",
            "playerSessionCount DESC",
            3,
            String::new(),
        ))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = found.game_sessions.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["match-10", "match-8", "match-6"]);
    let rest = games
        .search_game_sessions(search(
            "gameSessionProperties.mode = 'ranked' AND playerSessionCount >= 4",
            "playerSessionCount DESC",
            3,
            found.next_page_token,
        ))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = rest.game_sessions.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["match-4"]);
    assert!(rest.next_page_token.is_empty());

    // Read in sort order and stopped early; ties (two full sessions) come by id, across pages.
    let mut tied = Vec::new();
    let mut token = String::new();
    for _ in 0..3 {
        let page = games
            .search_game_sessions(search("", "playerSessionCount DESC", 1, token))
            .await
            .unwrap()
            .into_inner();
        tied.extend(page.game_sessions.into_iter().map(|s| s.name));
        token = page.next_page_token;
    }
    assert_eq!(tied, ["match-10", "match-11", "match-9"]);

    let open = games
        .search_game_sessions(search("hasAvailablePlayerSessions = false", "", 20, String::new()))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = open.game_sessions.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["match-10", "match-11"]);

    let err = games
        .search_game_sessions(search("playerSessionCount >= 'x'", "", 20, String::new()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("filter_expression"), "{}", err.message());
    let err = games
        .search_game_sessions(pb::SearchGameSessionsRequest {
            fleet_id: "nowhere".into(),
            ..search("", "", 20, String::new())
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // Listing pages newest first; a page token only continues the listing it came from.
    let list = |statuses: Vec<i32>, page_token: String| pb::ListGameSessionsRequest {
        fleet_id: FLEET.into(),
        location: "local".into(),
        statuses,
        page_size: 5,
        page_token,
    };
    let active = vec![pb::GameSessionStatus::Active as i32];
    let mut names = Vec::new();
    let mut token = String::new();
    loop {
        let page = games
            .list_game_sessions(list(active.clone(), token))
            .await
            .unwrap()
            .into_inner();
        names.extend(page.game_sessions.into_iter().map(|s| s.name));
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    let newest_first: Vec<String> = (0..12).rev().map(|n| format!("match-{n}")).collect();
    assert_eq!(names, newest_first);
    let first = games
        .list_game_sessions(list(active, String::new()))
        .await
        .unwrap()
        .into_inner();
    let ended = vec![pb::GameSessionStatus::Terminated as i32];
    let err = games
        .list_game_sessions(list(ended, first.next_page_token))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

async fn next_event(stream: &mut tonic::Streaming<pb::WatchSessionEventsResponse>) -> pb::SessionEvent {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("an event in time")
            .unwrap()
            .expect("the watch goes on");
        if let Some(pb::watch_session_events_response::Kind::Event(event)) = message.kind {
            return event;
        }
    }
}

fn watch_from(fleet: &str, after_cursor: &str) -> pb::WatchSessionEventsRequest {
    pb::WatchSessionEventsRequest {
        fleet_ids: vec![fleet.into()],
        after_cursor: after_cursor.into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transitions_a_watcher_acts_on_are_streamed_in_order_and_a_watch_resumes_from_its_cursor() {
    use pb::SessionEventType as T;
    let stack = Stack::start(TestRedis::cluster(), &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let mut watch = stack
        .games()
        .await
        .watch_session_events(watch_from(FLEET, ""))
        .await
        .unwrap()
        .into_inner();

    let session = active_session(&stack, &server, &mut events, create(3)).await;
    let mut players = stack.players().await;
    let mut reserve = async |name: &str| {
        let created = players.create_player_session(join(&session, name)).await.unwrap();
        created.into_inner().player_session.unwrap().player_session_id
    };
    let (left, stayed, waiting) = (reserve("alice").await, reserve("bob").await, reserve("carol").await);
    for accepted in [&left, &stayed] {
        server
            .accept_player_session(session.clone(), accepted.clone())
            .await
            .unwrap();
    }
    server
        .remove_player_session(session.clone(), left.clone())
        .await
        .unwrap();
    let rename = pb::UpdateGameSessionRequest {
        game_session_id: session.clone(),
        name: Some("renamed".into()),
        ..Default::default()
    };
    stack.games().await.update_game_session(rename).await.unwrap();
    server.end_game_session(session.clone()).await.unwrap();

    // What the callers did themselves (reserving, accepting, removing players) is no event of its own: the
    // watcher sees the activation, the update and the end, which carries the players that ended with it.
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(next_event(&mut watch).await);
    }
    let types: Vec<T> = seen.iter().map(|event| event.event_type()).collect();
    assert_eq!(
        types,
        [T::GameSessionActivated, T::GameSessionUpdated, T::GameSessionTerminated]
    );
    assert!(seen[0].player_sessions.is_empty());
    match &seen[2].subject {
        Some(pb::session_event::Subject::GameSession(g)) => {
            assert_eq!(g.game_session_id, session);
            assert_eq!(g.status_reason(), pb::GameSessionStatusReason::EndedByServer);
        }
        other => panic!("expected a game session, got {other:?}"),
    }
    let mut ended: Vec<(&str, pb::PlayerSessionStatus, &str, &str)> = seen[2]
        .player_sessions
        .iter()
        .map(|p| {
            let ip = p.endpoint.as_ref().map_or("", |e| e.ip_address.as_str());
            (p.player_session_id.as_str(), p.status(), p.game_session_id.as_str(), ip)
        })
        .collect();
    let completed = pb::PlayerSessionStatus::Completed;
    let mut expected = vec![
        (stayed.as_str(), completed, session.as_str(), "10.0.0.7"),
        (waiting.as_str(), completed, session.as_str(), "10.0.0.7"),
    ];
    ended.sort();
    expected.sort();
    assert_eq!(
        ended, expected,
        "the players still in the session end with it, and only they"
    );
    assert!(seen[2].player_sessions.iter().all(|p| p.termination_time.is_some()));

    // A watcher that saw the first resumes from its cursor and gets the rest, perhaps with repeats.
    let mut resumed = stack
        .games()
        .await
        .watch_session_events(watch_from(FLEET, &seen[0].cursor))
        .await
        .unwrap()
        .into_inner();
    let mut again = Vec::new();
    while again.len() < 2 {
        let event = next_event(&mut resumed).await;
        if seen[1..].iter().any(|missed| missed.event_id == event.event_id) && !again.contains(&event.event_id) {
            again.push(event.event_id);
        }
    }
    let err = stack
        .games()
        .await
        .watch_session_events(pb::WatchSessionEventsRequest {
            after_cursor: "yesterday".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

/// The next UpdateGameSession a server is told of: (session id, reason).
async fn updated(events: &mut Events) -> (String, berth_proto::health::v1::GameSessionUpdateReason) {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
            Ok(Some(Event::UpdateGameSession {
                game_session, reason, ..
            })) => {
                return (game_session.game_session_id, reason);
            }
            Ok(Some(_)) => continue,
            other => panic!("expected update_game_session, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_hosting_several_sessions_is_told_to_end_the_one_terminated() {
    use berth_proto::health::v1::GameSessionUpdateReason as Reason;
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server_of("gs-1", 3, "local", 10).await;
    let a = active_session(&stack, &server, &mut events, create(4)).await;
    let b = active_session(&stack, &server, &mut events, create(4)).await;
    let mut games = stack.games().await;

    // The maximum may not exceed what the server takes.
    let err = games
        .update_game_session(pb::UpdateGameSessionRequest {
            game_session_id: a.clone(),
            maximum_player_session_count: Some(11),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);

    // Asked to end A: the server is told, ends it, and goes on hosting B.
    let terminate = |id: &str, mode: pb::TerminationMode| pb::TerminateGameSessionRequest {
        game_session_id: id.into(),
        termination_mode: mode as i32,
    };
    games
        .terminate_game_session(terminate(&a, pb::TerminationMode::TriggerOnProcessTerminate))
        .await
        .unwrap();
    assert_eq!(updated(&mut events).await, (a.clone(), Reason::TerminationRequested));
    server.end_game_session(a.clone()).await.unwrap();
    let ended = describe(&stack, &a).await;
    assert_eq!(
        ended.status_reason(),
        pb::GameSessionStatusReason::TriggeredOnProcessTerminate
    );
    assert_eq!(describe(&stack, &b).await.status(), pb::GameSessionStatus::Active);

    // B forced: the server is told to stop hosting it.
    games
        .terminate_game_session(terminate(&b, pb::TerminationMode::ForceTerminate))
        .await
        .unwrap();
    assert_eq!(updated(&mut events).await, (b.clone(), Reason::ForceTerminated));
    assert_eq!(
        describe(&stack, &b).await.status_reason(),
        pb::GameSessionStatusReason::ForceTerminated
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_created_only_in_fleets_that_exist_and_locations_deployed() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let mut games = stack.games().await;
    let nowhere = pb::CreateGameSessionRequest {
        fleet_id: "nowhere".into(),
        ..create(2)
    };
    let err = games.create_game_session(nowhere).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    // No server has been ready yet: the fleet is not ACTIVE.
    let err = games.create_game_session(create(2)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("NEW"), "{}", err.message());

    let (_server, _events) = stack.server("gs-1", 1, "local").await;
    let at = |location: &str| pb::CreateGameSessionRequest {
        location: location.into(),
        ..create(2)
    };
    // The fleet is ACTIVE, but its other location has had no server ready: it is not DEPLOYED.
    let err = games.create_game_session(at("other")).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("INITIALIZED"), "{}", err.message());
    let err = games.create_game_session(at("far")).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    games.create_game_session(at("local")).await.unwrap();
}

/// Readies a process of the fleet in `location` straight through the store, as its health replica would.
async fn ready_in_store(store: &Store, id: String, location: &str) {
    use berth_store::processes::{self, Attach, Attached, ProcessRef, Timings};
    let registration_id = format!("reg-{id}");
    let registration = berth_domain::process::Registration {
        location: location.to_owned(),
        max_sessions: 1,
        max_players: 10,
        ..Default::default()
    };
    let introduction = processes::Introduction {
        registration: &registration,
        data: "",
        labels: &[],
        ports: &[],
    };
    let attach = Attach {
        fleet_id: FLEET,
        game_server_id: &id,
        instance_id: &format!("i-{id}"),
        registration_id: &registration_id,
        resume: None,
        replica: "replica-absent",
        attempt: 0,
        introduction,
    };
    let timings = Timings {
        initial_delay_ms: 600_000,
        retention_ms: 600_000,
    };
    let attached = processes::attach(store, &attach, &timings).await.unwrap();
    assert!(matches!(attached, Attached::Registered(..)), "{attached:?}");
    let process = ProcessRef {
        fleet_id: FLEET,
        game_server_id: &id,
        registration_id: &registration_id,
    };
    assert!(processes::ready(store, &process, None).await.unwrap().is_some());
}

/// A session asked for in a location is placed there however many ready processes the fleet has elsewhere, ahead of
/// them in the fleet's pool: more than a scan of it would look at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_with_one_ready_process_behind_many_elsewhere_is_served() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    // Processes readied through the store send no heartbeat: the fleet's window outlasts the test.
    stack.settings(|settings| settings.heartbeat_ms = 600_000).await;
    let mut readying = JoinSet::new();
    for n in 0..600 {
        let store = stack.store.clone();
        readying.spawn(async move { ready_in_store(&store, format!("gs-local-{n:03}"), "local").await });
    }
    while let Some(done) = readying.join_next().await {
        done.unwrap();
    }
    ready_in_store(&stack.store, "gs-far".into(), "other").await;

    let mut games = stack.games().await;
    let far = pb::CreateGameSessionRequest {
        location: "other".into(),
        ..create(2)
    };
    let session = games
        .create_game_session(far)
        .await
        .unwrap()
        .into_inner()
        .game_session
        .unwrap();
    assert_eq!(
        (session.game_server_id.as_str(), session.location.as_str()),
        ("gs-far", "other")
    );
    let err = games
        .create_game_session(pb::CreateGameSessionRequest {
            location: "other".into(),
            ..create(2)
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Code::ResourceExhausted,
        "its only process hosts one session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_creation_returns_the_first_session_and_creators_are_limited() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    stack
        .settings(|settings| {
            settings.creator_limit = 2;
            settings.creator_period_ms = 60_000;
        })
        .await;
    let (_server, _events) = stack.server("gs-1", 10, "local").await;
    let mut games = stack.games().await;
    let request = |token: &str, name: &str| pb::CreateGameSessionRequest {
        idempotency_token: token.into(),
        creator_id: "matchmaker-7".into(),
        name: name.into(),
        ..create(4)
    };
    let first = games
        .create_game_session(request("t-1", "a"))
        .await
        .unwrap()
        .into_inner();
    let again = games
        .create_game_session(request("t-1", "a"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        first.game_session.unwrap().game_session_id,
        again.game_session.unwrap().game_session_id
    );
    let err = games.create_game_session(request("t-1", "b")).await.unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    games.create_game_session(request("t-2", "b")).await.unwrap();
    let err = games.create_game_session(request("t-3", "c")).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(err.message().contains("matchmaker-7"), "{}", err.message());
    // Another creator is not held back.
    let other = pb::CreateGameSessionRequest {
        creator_id: "matchmaker-8".into(),
        ..request("t-4", "d")
    };
    games.create_game_session(other).await.unwrap();
}

/// The ids of every ACTIVE session of the fleet a search without a filter or a location finds, page by page.
async fn search_every_page(stack: &Stack, sort: &str, page_size: u32) -> Vec<String> {
    let mut games = stack.games().await;
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = games
            .search_game_sessions(pb::SearchGameSessionsRequest {
                fleet_id: FLEET.into(),
                sort_expression: sort.into(),
                page_size,
                page_token: token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        seen.extend(page.game_sessions.into_iter().map(|s| s.game_session_id));
        token = page.next_page_token;
        if token.is_empty() {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_pages_through_long_runs_of_ties_in_either_direction() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 100, "local").await;
    let (other, mut other_events) = stack.server("gs-2", 100, "local").await;
    let mut ids = Vec::new();
    for n in 0..130 {
        let (host, host_events) = if n < 100 {
            (&server, &mut events)
        } else {
            (&other, &mut other_events)
        };
        ids.push(active_session(&stack, host, host_events, create(4)).await);
    }
    ids.sort();
    for sort in ["playerSessionCount DESC", "playerSessionCount ASC"] {
        let seen = search_every_page(&stack, sort, 50).await;
        // Every session has 0 players: all tie, and ties come by id whichever way the sort goes.
        assert_eq!(seen, ids, "{sort}");
    }
}

/// A search of every location merges each location's index, a chunk at a time, into one order across pages: here
/// most of the first pages lie in one location, so that it is read on while the other waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_of_every_location_pages_through_them_in_one_order() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (local, mut local_events) = stack.server("gs-1", 40, "local").await;
    let (other, mut other_events) = stack.server("gs-2", 40, "other").await;
    let mut created = Vec::new();
    for n in 0..45 {
        let (host, events, location) = if (25..35).contains(&n) {
            (&other, &mut other_events, "other")
        } else {
            (&local, &mut local_events, "local")
        };
        let request = pb::CreateGameSessionRequest {
            location: location.into(),
            ..create(4)
        };
        let id = active_session(&stack, host, events, request).await;
        let time = describe(&stack, &id).await.creation_time.unwrap();
        created.push(((time.seconds, time.nanos), id));
    }
    // Ties (sessions created in the same ms) come by id whichever way the sort goes.
    created.sort();
    let ascending: Vec<String> = created.iter().map(|(_, id)| id.clone()).collect();
    created.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let descending: Vec<String> = created.iter().map(|(_, id)| id.clone()).collect();
    for (sort, expected) in [
        ("creationTimeMillis ASC", ascending),
        ("creationTimeMillis DESC", descending),
    ] {
        let seen = search_every_page(&stack, sort, 6).await;
        assert_eq!(seen, expected, "{sort}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_a_server_told_to_end_take_no_new_players_and_leave_search() {
    use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
    use berth_proto::health::v1::{TerminateGameServerRequest, TerminationReason};
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(4)).await;
    let mut games = stack.games().await;
    let search = pb::SearchGameSessionsRequest {
        fleet_id: FLEET.into(),
        ..Default::default()
    };
    let found = games.search_game_sessions(search.clone()).await.unwrap().into_inner();
    assert_eq!(found.game_sessions.len(), 1);

    // Scale-in: the operator tells the server to end.
    let operator = berth_sdk::connect(&stack.health.endpoint(), &token(Role::Operator, None))
        .await
        .unwrap();
    GameServerServiceClient::new(operator)
        .terminate_game_server(TerminateGameServerRequest {
            fleet_id: FLEET.into(),
            game_server_id: "gs-1".into(),
            reason: TerminationReason::ScaleIn as i32,
        })
        .await
        .unwrap();
    let found = games.search_game_sessions(search).await.unwrap().into_inner();
    assert!(found.game_sessions.is_empty(), "{:?}", found.game_sessions);
    let err = stack
        .players()
        .await
        .create_player_session(join(&session, "late"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("ending"), "{}", err.message());
}
