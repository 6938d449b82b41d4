//! What the session contracts promise beyond the flow, as a client written from the protos reads them: a watch
//! cursor is the position just after its event, a server is told of an UpdateGameSession with its reason, every
//! refused page token names its field, the event cap is a setting a watcher behind it learns of, and whether a
//! session takes players reads the same in replies as in the script that takes them.

use berth_proto::health::v1::GameSessionUpdateReason as Reason;
use berth_proto::session::v1::{self as pb, describe_player_sessions_request::Selector};
use berth_session::SessionArgs;
use berth_testkit::TestRedis;
use tonic::{Code, Status};
use tonic_types::StatusExt;

use crate::{FLEET, Stack, active_session, create, fast_sessions, join, next_event, updated, watch_from};

/// Renames a session `count` times; each is an event (GAME_SESSION_UPDATED).
async fn rename(stack: &Stack, game_session_id: &str, count: usize) {
    let mut games = stack.games().await;
    for n in 0..count {
        let update = pb::UpdateGameSessionRequest {
            game_session_id: game_session_id.into(),
            name: Some(format!("renamed-{n}")),
            ..Default::default()
        };
        games.update_game_session(update).await.unwrap();
    }
}

async fn cursors_resume_just_after_their_event(redis: TestRedis) {
    let stack = Stack::start(redis, &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(8)).await;
    rename(&stack, &session, 5).await;
    // Activated, renamed five times: six events, read from the oldest retained (a fleet named twice is watched
    // once).
    for fleet_ids in [
        vec![FLEET.to_owned()],
        Vec::new(),
        vec![FLEET.to_owned(), FLEET.to_owned()],
    ] {
        let oldest = pb::WatchSessionEventsRequest {
            fleet_ids: fleet_ids.clone(),
            from_oldest: true,
            ..Default::default()
        };
        let mut games = stack.games().await;
        let mut watch = games.watch_session_events(oldest).await.unwrap().into_inner();
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(next_event(&mut watch).await);
        }
        let cursors: Vec<&str> = seen.iter().map(|event| event.cursor.as_str()).collect();
        let mut distinct = cursors.clone();
        distinct.dedup();
        assert_eq!(distinct, cursors, "each event has its own cursor");
        // Resuming after any event starts with the one after it.
        for at in 0..5 {
            let resume = pb::WatchSessionEventsRequest {
                fleet_ids: fleet_ids.clone(),
                after_cursor: seen[at].cursor.clone(),
                ..Default::default()
            };
            let mut resumed = games.watch_session_events(resume).await.unwrap().into_inner();
            for expected in &seen[at + 1..] {
                assert_eq!(next_event(&mut resumed).await.event_id, expected.event_id);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_just_after_the_event_whose_cursor_it_gives_on_a_single_node() {
    cursors_resume_just_after_their_event(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_just_after_the_event_whose_cursor_it_gives_on_a_cluster() {
    cursors_resume_just_after_their_event(TestRedis::cluster()).await;
}

async fn told_of_updates(redis: TestRedis) {
    let stack = Stack::start(redis, &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(4)).await;
    let mut games = stack.games().await;
    let update = pb::UpdateGameSessionRequest {
        game_session_id: session.clone(),
        maximum_player_session_count: Some(6),
        ..Default::default()
    };
    games.update_game_session(update).await.unwrap();
    assert_eq!(
        updated(&mut events).await,
        (session.clone(), Reason::MaximumPlayersUpdated)
    );
    let update = pb::UpdateGameSessionRequest {
        game_session_id: session.clone(),
        player_session_creation_policy: pb::PlayerSessionCreationPolicy::DenyAll as i32,
        ..Default::default()
    };
    games.update_game_session(update).await.unwrap();
    assert_eq!(
        updated(&mut events).await,
        (session.clone(), Reason::PlayerSessionCreationPolicyUpdated)
    );
    let update = pb::UpdateGameSessionRequest {
        game_session_id: session.clone(),
        matchmaker_data: Some("{\"backfill\":true}".into()),
        ..Default::default()
    };
    games.update_game_session(update).await.unwrap();
    assert_eq!(updated(&mut events).await, (session, Reason::MatchmakerDataUpdated));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_is_told_of_an_update_with_its_reason_on_a_single_node() {
    told_of_updates(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_is_told_of_an_update_with_its_reason_on_a_cluster() {
    told_of_updates(TestRedis::cluster()).await;
}

fn refused_page_token(status: Status) {
    assert_eq!(status.code(), Code::InvalidArgument);
    let bad = status.get_details_bad_request().expect("a field violation");
    let fields: Vec<&str> = bad.field_violations.iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["page_token"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_token_not_issued_by_the_call_is_refused_by_field() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(4)).await;
    let mut games = stack.games().await;
    let list = pb::ListGameSessionsRequest {
        fleet_id: FLEET.into(),
        page_token: "forged.1".into(),
        ..Default::default()
    };
    refused_page_token(games.list_game_sessions(list).await.unwrap_err());
    let search = pb::SearchGameSessionsRequest {
        fleet_id: FLEET.into(),
        page_token: "forged.1".into(),
        ..Default::default()
    };
    refused_page_token(games.search_game_sessions(search).await.unwrap_err());
    for selector in [Selector::GameSessionId(session), Selector::PlayerId("p".into())] {
        let describe = pb::DescribePlayerSessionsRequest {
            selector: Some(selector),
            page_token: "forged.1".into(),
            ..Default::default()
        };
        let err = stack
            .players()
            .await
            .describe_player_sessions(describe)
            .await
            .unwrap_err();
        refused_page_token(err);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_past_the_cap_are_trimmed_and_a_watcher_behind_them_is_told() {
    let args = SessionArgs {
        events_max: 50,
        ..fast_sessions()
    };
    let stack = Stack::start(TestRedis::single(), &args).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let mut games = stack.games().await;
    let mut watch = games
        .watch_session_events(watch_from(FLEET, ""))
        .await
        .unwrap()
        .into_inner();
    let session = active_session(&stack, &server, &mut events, create(300)).await;
    let first = next_event(&mut watch).await;
    drop(watch);
    rename(&stack, &session, 250).await;
    // The sweep trims the oldest (in whole blocks) down to about the cap: a watcher behind them is told.
    crate::eventually("the cap trims the oldest events", async || {
        let resume = watch_from(FLEET, &first.cursor);
        match stack.games().await.watch_session_events(resume).await {
            Err(err) if err.code() == Code::OutOfRange => Some(()),
            _ => None,
        }
    })
    .await;
    // One that is not behind them resumes.
    let mut watch = games
        .watch_session_events(watch_from(FLEET, ""))
        .await
        .unwrap()
        .into_inner();
    rename(&stack, &session, 1).await;
    let late = next_event(&mut watch).await;
    rename(&stack, &session, 1).await;
    let mut resumed = games
        .watch_session_events(watch_from(FLEET, &late.cursor))
        .await
        .unwrap()
        .into_inner();
    let next = next_event(&mut resumed).await;
    assert_eq!(next.event_type(), pb::SessionEventType::GameSessionUpdated);
    assert_ne!(next.event_id, late.event_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_that_missed_nothing_outlive_the_retention_of_old_events() {
    let args = SessionArgs {
        retention_ms: 300,
        ..fast_sessions()
    };
    let stack = Stack::start(TestRedis::single(), &args).await;
    let (server, mut events) = stack.server("gs-1", 1, "local").await;
    let mut games = stack.games().await;
    let mut live = games
        .watch_session_events(watch_from(FLEET, ""))
        .await
        .unwrap()
        .into_inner();
    let session = active_session(&stack, &server, &mut events, create(8)).await;
    let activated = next_event(&mut live).await;
    // The event ages out; the watcher had read it.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    rename(&stack, &session, 1).await;
    let renamed = next_event(&mut live).await;
    assert_eq!(renamed.event_type(), pb::SessionEventType::GameSessionUpdated);
    // A watcher resuming just after the last event it read (since trimmed) missed nothing either; one from the
    // oldest retained event starts after the trimmed ones.
    let mut resumed = games
        .watch_session_events(watch_from(FLEET, &activated.cursor))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(next_event(&mut resumed).await.event_id, renamed.event_id);
    let oldest = pb::WatchSessionEventsRequest {
        fleet_ids: vec![FLEET.into()],
        from_oldest: true,
        ..Default::default()
    };
    let mut oldest = games.watch_session_events(oldest).await.unwrap().into_inner();
    assert_eq!(next_event(&mut oldest).await.event_id, renamed.event_id);
}

/// Whether a session could take a player is decided atomically by the creation script and by the search index of
/// sessions with room (which the store keeps by the same rule), and on records by the domain
/// (`GameSessionRecord::has_available_player_sessions`, which replies and the search filter use). The same
/// sessions, one in each state that bears on it, are put to all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rule_for_taking_players_reads_the_same_in_the_store_and_in_replies() {
    use berth_domain::search::IndexedOperand;
    use berth_store::sessions::{IndexScan, read_game_sessions, search_chunk};
    use pb::PlayerSessionCreationPolicy as Policy;
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 10, "local").await;
    let (ending_server, mut ending_events) = stack.server("gs-2", 10, "other").await;
    let at = |location: &str, max: u32| pb::CreateGameSessionRequest {
        location: location.into(),
        ..create(max)
    };
    let mut games = stack.games().await;
    let mut players = stack.players().await;
    let mut join_all = async |session: &str, names: &[&str]| {
        let mut ids = Vec::new();
        for name in names {
            let created = players.create_player_session(join(session, name)).await.unwrap();
            ids.push(created.into_inner().player_session.unwrap().player_session_id);
        }
        ids
    };
    let mut cases: Vec<(&str, String, bool)> = Vec::new();

    let open = active_session(&stack, &server, &mut events, at("local", 2)).await;
    join_all(&open, &["a"]).await;
    cases.push(("one slot left", open, true));
    let full = active_session(&stack, &server, &mut events, at("local", 2)).await;
    join_all(&full, &["a", "b"]).await;
    cases.push(("full", full, false));
    let refilled = active_session(&stack, &server, &mut events, at("local", 2)).await;
    let joined = join_all(&refilled, &["a", "b"]).await;
    server.remove_player_session(&refilled, &joined[0]).await.unwrap();
    cases.push(("full, then a player left", refilled, true));
    let closed = active_session(&stack, &server, &mut events, at("local", 2)).await;
    let deny = pb::UpdateGameSessionRequest {
        game_session_id: closed.clone(),
        player_session_creation_policy: Policy::DenyAll as i32,
        ..Default::default()
    };
    games.update_game_session(deny).await.unwrap();
    cases.push(("denying all", closed, false));
    let reopened = active_session(&stack, &server, &mut events, at("local", 2)).await;
    let joined = join_all(&reopened, &["a", "b"]).await;
    server
        .update_player_session_creation_policy(&reopened, Policy::DenyAll)
        .await
        .unwrap();
    server.remove_player_session(&reopened, &joined[0]).await.unwrap();
    server
        .update_player_session_creation_policy(&reopened, Policy::AcceptAll)
        .await
        .unwrap();
    cases.push((
        "full and denying all, then a player left and it accepts all",
        reopened,
        true,
    ));
    let ended = active_session(&stack, &server, &mut events, at("local", 2)).await;
    server.end_game_session(&ended).await.unwrap();
    cases.push(("ended", ended, false));
    let ending = active_session(&stack, &ending_server, &mut ending_events, at("other", 2)).await;
    let reason = berth_domain::stored::TerminationReason::ScaleIn;
    berth_store::endings::terminate(&stack.store, FLEET, "gs-2", reason)
        .await
        .unwrap();
    cases.push(("its server told to end", ending, false));
    let starting = games.create_game_session(at("local", 2)).await.unwrap().into_inner();
    cases.push(("activating", starting.game_session.unwrap().game_session_id, false));

    let with_room = games
        .search_game_sessions(pb::SearchGameSessionsRequest {
            fleet_id: FLEET.into(),
            filter_expression: "hasAvailablePlayerSessions = true".into(),
            page_size: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut indexed = Vec::new();
    for location in ["local", "other"] {
        let scan = IndexScan {
            location,
            order: IndexedOperand::AvailableSlots,
            range: (None, None),
            descending: false,
        };
        let chunk = search_chunk(&stack.store, FLEET, &scan, 0, 100).await.unwrap();
        indexed.extend(
            chunk
                .into_iter()
                .map(|(session, _)| (location, session.game_session_id)),
        );
    }
    for (case, id, takes) in &cases {
        let record = read_game_sessions(&stack.store, FLEET, &[id])
            .await
            .unwrap()
            .pop()
            .flatten()
            .unwrap();
        assert_eq!(
            record.has_available_player_sessions(),
            *takes,
            "the domain's rule: {case}"
        );
        let location = record.location.as_str();
        let listed = indexed.contains(&(location, id.clone()));
        assert_eq!(
            listed, *takes,
            "the index of sessions with room in '{location}': {case}"
        );
        let found = with_room
            .game_sessions
            .iter()
            .any(|session| &session.game_session_id == id);
        assert_eq!(found, *takes, "a search for sessions with room: {case}");
        let created = stack.players().await.create_player_session(join(id, "probe")).await;
        assert_eq!(created.is_ok(), *takes, "the creation script: {case}: {created:?}");
    }
}
