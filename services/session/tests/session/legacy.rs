//! What an earlier release stored, taken over by the current one. Player sessions as it stored them — in a hash of
//! their own beside their game session's record (`:p`), or before that a hash each, listed in their game session's
//! `:ps` and, while they hold a slot, its `:live`, with RESERVED ones waiting in `res_due` by their own id — are taken
//! over the first time their game session's players are written: listed, reserved again, accepted, removed, timed
//! out and ended as the current release's, and the old keys go. A game session's
//! share of its location's counts as it kept it moves to the current counts at the session's next change.
//! Its search indexes, four sets per location, move into the location's one index at the next sweep.

use berth_domain::game_session::player_session_id;
use berth_proto::session::v1::{self as pb, describe_player_sessions_request::Selector};
use berth_sdk::game_server::{Events, GameServer};
use berth_session::SessionArgs;
use berth_store::keys::FleetKeys;
use berth_store::utilization::{UtilizationRead, read_utilization};
use berth_testkit::TestRedis;

use crate::{FLEET, Stack, active_session, create, fast_sessions, join};

/// Redis' reply to `args`, for the keys the store's API does not name.
async fn raw(stack: &Stack, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    cmd.arg(&args[1..]);
    stack.store.query(&cmd).await.unwrap()
}

async fn listed(stack: &Stack, session: &str) -> Vec<pb::PlayerSession> {
    let mut players = stack.players().await;
    players
        .describe_player_sessions(pb::DescribePlayerSessionsRequest {
            selector: Some(Selector::GameSessionId(session.into())),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .player_sessions
}

/// A single-node stack whose server `server_id` hosts an ACTIVE game session of at most 4 players, `players`
/// reserved in it in that order (their player sessions numbered 1, 2, ...): the stack, the server, its events and
/// the session's id.
async fn hosting(server_id: &str, players: &[&str]) -> (Stack, GameServer, Events, String) {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server(server_id, 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(4)).await;
    let mut client = stack.players().await;
    for player in players {
        client.create_player_session(join(&session, player)).await.unwrap();
    }
    (stack, server, events, session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn player_sessions_an_earlier_release_stored_are_taken_over() {
    let (stack, server, _events, session) = hosting("gs-legacy", &["alice", "bob"]).await;
    let mut players = stack.players().await;
    let (alice, bob) = (player_session_id(&session, 1), player_session_id(&session, 2));
    server
        .accept_player_session(session.clone(), bob.clone())
        .await
        .unwrap();
    let before = listed(&stack, &session).await;
    assert_eq!(before.len(), 2);

    // The same two, rewritten as the earlier release kept them.
    let keys = FleetKeys::new(FLEET);
    let game = keys.game_session(&session);
    let tag = keys.game_session("").trim_end_matches("gsess:").to_owned();
    let moved = players_of_record(&stack, &session).await;
    let mut forget = redis::cmd("HDEL");
    forget
        .arg(&game)
        .arg(moved.iter().map(|(field, _)| field).collect::<Vec<_>>());
    stack.store.query::<redis::Value>(&forget).await.unwrap();
    for p in &before {
        let key = format!("{tag}psess:{}", p.player_session_id);
        let status = p.status().as_str_name().trim_start_matches("PLAYER_SESSION_STATUS_");
        let ms = |t: &Option<prost_types::Timestamp>| {
            t.as_ref()
                .map(|t| (t.seconds * 1000 + i64::from(t.nanos) / 1_000_000).to_string())
        };
        let (created, activated) = (ms(&p.creation_time).unwrap(), ms(&p.activation_time));
        let mut fields = vec![
            "HSET",
            &key,
            "id",
            &p.player_session_id,
            "player",
            &p.player_id,
            "gs",
            &session,
            "status",
            status,
            "data",
            "",
            "c_ms",
            &created,
        ];
        if let Some(activated) = &activated {
            fields.extend(["act_ms", activated.as_str()]);
        }
        raw(&stack, &fields).await;
        raw(&stack, &["ZADD", &format!("{game}:ps"), &created, &p.player_session_id]).await;
        raw(
            &stack,
            &["HSET", &format!("{game}:live"), &p.player_id, &p.player_session_id],
        )
        .await;
    }
    let (res_due, due) = (format!("{tag}res_due"), format!("{tag}due"));
    raw(&stack, &["ZREM", &due, &session]).await;
    raw(&stack, &["ZADD", &res_due, "1", &alice]).await;

    // Read (which writes nothing), they are as they were.
    let after = listed(&stack, &session).await;
    let statuses = |list: &[pb::PlayerSession]| -> Vec<_> {
        list.iter().map(|p| (p.player_session_id.clone(), p.status())).collect()
    };
    assert_eq!(statuses(&after), statuses(&before));
    // The sweep looks at alice's game session in place of her old entry, takes its players over, and waits for her
    // real deadline; the old keys are gone.
    crate::eventually("the old reservation entry taken over", async || {
        let old = raw(&stack, &["ZSCORE", &res_due, &alice]).await;
        let new = raw(&stack, &["ZSCORE", &due, &session]).await;
        (old == redis::Value::Nil && new != redis::Value::Nil).then_some(())
    })
    .await;
    let old_keys = [
        format!("{tag}psess:{alice}"),
        format!("{tag}psess:{bob}"),
        format!("{game}:ps"),
        format!("{game}:live"),
    ];
    for old in old_keys {
        assert_eq!(raw(&stack, &["EXISTS", &old]).await, redis::Value::Int(0), "{old}");
    }
    assert_eq!(statuses(&listed(&stack, &session).await), statuses(&before));

    // Reserved again with the same data, alice keeps her player session and her slot; then she is let in and bob
    // leaves, each changing the count.
    let again = players
        .create_player_session(join(&session, "alice"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.player_session.unwrap().player_session_id, alice);
    assert_eq!(crate::describe(&stack, &session).await.current_player_session_count, 2);
    let_in_and_out(&stack, &server, &session, &alice, &bob, 1).await;
}

/// Lets `arriving` in and has `leaving` leave game session `session`, each answered as it now stands, which then
/// holds `left` players.
async fn let_in_and_out(stack: &Stack, server: &GameServer, session: &str, arriving: &str, leaving: &str, left: u32) {
    let accepted = server
        .accept_player_session(session.to_owned(), arriving.to_owned())
        .await
        .unwrap();
    assert_eq!(accepted.status(), pb::PlayerSessionStatus::Active);
    let removed = server
        .remove_player_session(session.to_owned(), leaving.to_owned())
        .await
        .unwrap();
    assert_eq!(removed.status(), pb::PlayerSessionStatus::Completed);
    assert_eq!(crate::describe(stack, session).await.current_player_session_count, left);
}

/// The player sessions game session `session`'s hash holds beside its record (p<n>, l:<player id>), as stored.
async fn players_of_record(stack: &Stack, session: &str) -> Vec<(String, Vec<u8>)> {
    let all = raw(stack, &["HGETALL", &FleetKeys::new(FLEET).game_session(session)]).await;
    let all: std::collections::HashMap<String, Vec<u8>> = redis::from_redis_value(all).unwrap();
    let players: Vec<_> = all
        .into_iter()
        .filter(|(field, _)| {
            field.starts_with("l:") || (field.starts_with('p') && field[1..].starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect();
    assert!(!players.is_empty(), "{session} holds no player session");
    players
}

/// Moves game session `session`'s player sessions out of its hash into a hash of their own beside it (`:p`), as the
/// release before kept them.
async fn keep_apart(stack: &Stack, session: &str) -> String {
    let keys = FleetKeys::new(FLEET);
    let (game, apart) = (keys.game_session(session), keys.players_of_session(session));
    let players = players_of_record(stack, session).await;
    let mut write = redis::cmd("HSET");
    write.arg(&apart);
    let mut forget = redis::cmd("HDEL");
    forget.arg(&game);
    for (field, value) in &players {
        write.arg(field).arg(value);
        forget.arg(field);
    }
    stack.store.query::<redis::Value>(&write).await.unwrap();
    stack.store.query::<redis::Value>(&forget).await.unwrap();
    apart
}

async fn exists(stack: &Stack, key: &str) -> bool {
    raw(stack, &["EXISTS", key]).await == redis::Value::Int(1)
}

/// Player sessions the release before kept in a hash beside their game session's record are read in place, taken
/// over by the first call that writes them (a reservation here), and then accepted, removed and ended as the current
/// release's; nothing of the old hash is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn player_sessions_the_release_before_kept_apart_are_taken_over() {
    let (stack, server, _events, session) = hosting("gs-apart", &["alice", "bob", "carol"]).await;
    let (alice, bob, carol) = (
        player_session_id(&session, 1),
        player_session_id(&session, 2),
        player_session_id(&session, 3),
    );
    server
        .accept_player_session(session.clone(), bob.clone())
        .await
        .unwrap();
    let before = listed(&stack, &session).await;
    let apart = keep_apart(&stack, &session).await;
    assert_eq!(listed(&stack, &session).await, before, "read in place");
    assert!(exists(&stack, &apart).await, "a read writes nothing");

    let again = stack
        .players()
        .await
        .create_player_session(join(&session, "carol"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        again.player_session.unwrap().player_session_id,
        carol,
        "carol keeps her seat"
    );
    assert!(!exists(&stack, &apart).await, "taken over");
    assert_eq!(crate::describe(&stack, &session).await.current_player_session_count, 3);
    let_in_and_out(&stack, &server, &session, &alice, &bob, 2).await;

    server.end_game_session(session.clone()).await.unwrap();
    let ended = listed(&stack, &session).await;
    let statuses: Vec<_> = ended
        .iter()
        .map(|p| (p.player_session_id.clone(), p.status()))
        .collect();
    assert_eq!(
        statuses,
        [
            (alice, pb::PlayerSessionStatus::Completed),
            (bob, pb::PlayerSessionStatus::Completed),
            (carol, pb::PlayerSessionStatus::Completed),
        ]
    );
}

/// A game session whose players the release before kept apart, ended before anything took them over, keeps them in
/// its ended record, each ended with it; the old hash goes with the live record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ended_with_its_players_kept_apart_keeps_them() {
    let (stack, server, _events, session) = hosting("gs-apart-end", &["alice", "bob"]).await;
    let apart = keep_apart(&stack, &session).await;
    server.end_game_session(session.clone()).await.unwrap();
    assert!(!exists(&stack, &apart).await);
    let ended = listed(&stack, &session).await;
    let statuses: Vec<_> = ended.iter().map(|p| (p.player_id.clone(), p.status())).collect();
    assert_eq!(
        statuses,
        [
            ("alice".to_owned(), pb::PlayerSessionStatus::Completed),
            ("bob".to_owned(), pb::PlayerSessionStatus::Completed),
        ]
    );
}

/// A player's player sessions by DescribePlayerSessions, one page of `page_size` after another: their ids.
async fn of_player(stack: &Stack, player: &str, page_size: u32) -> Vec<String> {
    let mut players = stack.players().await;
    let (mut ids, mut page_token) = (Vec::new(), String::new());
    loop {
        let page = players
            .describe_player_sessions(pb::DescribePlayerSessionsRequest {
                selector: Some(Selector::PlayerId(player.into())),
                page_size,
                page_token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ids.extend(page.player_sessions.into_iter().map(|p| p.player_session_id));
        if page.next_page_token.is_empty() {
            return ids;
        }
        page_token = page.next_page_token;
    }
}

/// A player's player sessions that an earlier release listed in a sorted set of the player's own are read beside
/// those of the fleet's player index, in one order, oldest first, page by page; when their game session expires,
/// both lists lose them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_players_sessions_an_earlier_release_listed_apart_are_read_with_the_others() {
    let args = SessionArgs {
        retention_ms: 400,
        ..fast_sessions()
    };
    let stack = Stack::start(TestRedis::single(), &args).await;
    let (server, mut events) = stack.server("gs-listed", 1, "local").await;
    let session = active_session(&stack, &server, &mut events, create(4)).await;
    // Dana joins three times, leaving in between: player sessions 1, 2 and 3 of the game session, in that order.
    let mut client = stack.players().await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let made = client
            .create_player_session(join(&session, "dana"))
            .await
            .unwrap()
            .into_inner()
            .player_session
            .unwrap();
        ids.push(made.player_session_id.clone());
        server
            .remove_player_session(session.clone(), made.player_session_id)
            .await
            .unwrap();
    }
    assert_eq!(of_player(&stack, "dana", 10).await, ids);

    // The first and the last, listed as the earlier release did: in dana's own set by creation ms, without the
    // fleet.
    let keys = FleetKeys::new(FLEET);
    let index = keys.players();
    let own = format!("{}player:dana", keys.game_session("").trim_end_matches("gsess:"));
    let entries: Vec<String> = redis::from_redis_value(raw(&stack, &["ZRANGE", &index, "0", "-1"]).await).unwrap();
    assert_eq!(entries.len(), 3, "{entries:?}");
    for entry in [&entries[0], &entries[2]] {
        let (ms, listed) = entry["0004dana".len()..].split_at(13);
        raw(&stack, &["ZREM", &index, entry]).await;
        raw(&stack, &["ZADD", &own, ms, listed]).await;
    }
    assert_eq!(of_player(&stack, "dana", 10).await, ids);
    assert_eq!(of_player(&stack, "dana", 1).await, ids, "one a page");

    server.end_game_session(session.clone()).await.unwrap();
    crate::expired(&stack, &session).await;
    assert!(!exists(&stack, &index).await, "the player index emptied");
    assert!(!exists(&stack, &own).await, "dana's own set emptied");
    assert!(of_player(&stack, "dana", 10).await.is_empty());
}

/// The deadlines an earlier release kept in two sets — activations in act_due, reservations in res_due — are
/// drained into the one set of deadlines, each session looked at as it now stands: one activated since is not ended
/// by the activation entry it left behind and waits on for its player's reservation; one still ACTIVATING past its
/// deadline ends ACTIVATION_TIMEOUT. A session that release created, activated now, leaves act_due at once, lest a
/// sweep of that release still running time the ACTIVE session out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_an_earlier_release_kept_apart_are_drained() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    // Named in the pool's order, so that each session goes to the server its role expects.
    let (server, mut events) = stack.server("gs-due-1", 1, "local").await;
    let (_idle, _idle_events) = stack.server("gs-due-2", 1, "local").await;
    let (older, _older_events) = stack.server("gs-due-3", 1, "local").await;
    let active = active_session(&stack, &server, &mut events, create(4)).await;
    stack
        .players()
        .await
        .create_player_session(join(&active, "erin"))
        .await
        .unwrap();
    let activating = crate::new_session(&stack, create(4)).await.game_session_id;
    let created_before = crate::new_session(&stack, create(4)).await.game_session_id;

    let keys = FleetKeys::new(FLEET);
    let tag = keys.game_session("").trim_end_matches("gsess:").to_owned();
    let (due, act_due, res_due) = (format!("{tag}due"), format!("{tag}act_due"), format!("{tag}res_due"));
    let waits = |sid: &str| {
        let (stack, set, sid) = (&stack, due.clone(), sid.to_owned());
        async move { raw(stack, &["ZSCORE", &set, &sid]).await }
    };
    let reservation = waits(&active).await;
    assert_ne!(reservation, redis::Value::Nil, "waits for erin's reservation");
    assert_ne!(waits(&activating).await, redis::Value::Nil);
    let activation = waits(&created_before).await;
    let activation = redis::from_redis_value::<String>(activation).unwrap();
    raw(&stack, &["ZREM", &due, &active, &activating, &created_before]).await;
    raw(
        &stack,
        &[
            "ZADD",
            &act_due,
            "1",
            &active,
            "1",
            &activating,
            &activation,
            &created_before,
        ],
    )
    .await;
    raw(&stack, &["ZADD", &res_due, "1", &active]).await;
    raw(&stack, &["HSET", &keys.game_session(&activating), "act_by_ms", "1"]).await;

    older.activate_game_session(created_before.clone()).await.unwrap();
    assert_eq!(
        raw(&stack, &["ZSCORE", &act_due, &created_before]).await,
        redis::Value::Nil
    );
    crate::eventually("the old sets drained", async || {
        let left = raw(&stack, &["EXISTS", &act_due, &res_due]).await;
        (left == redis::Value::Int(0)).then_some(())
    })
    .await;
    let timed_out = crate::describe(&stack, &activating).await;
    assert_eq!(timed_out.status(), pb::GameSessionStatus::Terminated);
    assert_eq!(
        timed_out.status_reason(),
        pb::GameSessionStatusReason::ActivationTimeout
    );
    let still = crate::describe(&stack, &active).await;
    assert_eq!(still.status(), pb::GameSessionStatus::Active);
    assert_eq!(still.current_player_session_count, 1, "erin's reservation stands");
    assert_eq!(waits(&active).await, reservation, "at its own deadline");
    assert_eq!(
        crate::describe(&stack, &created_before).await.status(),
        pb::GameSessionStatus::Active
    );
}

/// A fleet an earlier release made does not say whether a process of it hosts more than one session at a time
/// (sessions/create.lua reads that set only if one does): the sweep tells it, from its processes, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_an_earlier_release_made_is_told_whether_its_processes_host_several() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (_one, _one_events) = stack.server("gs-one", 1, "local").await;
    let (_several, _several_events) = stack.server("gs-several", 3, "local").await;
    let fleet = FleetKeys::new(FLEET).fleet();
    assert_eq!(
        raw(&stack, &["HGET", &fleet, "multi"]).await,
        redis::Value::BulkString(b"1".to_vec())
    );
    raw(&stack, &["HDEL", &fleet, "multi"]).await;
    crate::eventually("the fleet told", async || {
        let multi = raw(&stack, &["HGET", &fleet, "multi"]).await;
        (multi != redis::Value::Nil).then_some(multi)
    })
    .await;
    assert_eq!(
        raw(&stack, &["HGET", &fleet, "multi"]).await,
        redis::Value::BulkString(b"1".to_vec())
    );
}

/// A fleet whose processes each host one session at a time is told so: its creates leave the hosting set unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_an_earlier_release_made_of_one_session_processes_is_told_so() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (_one, _one_events) = stack.server("gs-one", 1, "local").await;
    let fleet = FleetKeys::new(FLEET).fleet();
    raw(&stack, &["HDEL", &fleet, "multi"]).await;
    let multi = crate::eventually("the fleet told", async || {
        let multi = raw(&stack, &["HGET", &fleet, "multi"]).await;
        (multi != redis::Value::Nil).then_some(multi)
    })
    .await;
    assert_eq!(multi, redis::Value::BulkString(b"0".to_vec()));
}

/// A process that hosts several sessions at a time, registered through an earlier release's replica (which does not
/// tell the fleet) after the fleet was told none does, takes its first session from the pool and then waits with room
/// for more: the sweep learns from that, and the next session packs onto it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_told_none_of_its_processes_hosts_several_learns_it_from_one_with_room() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (_several, _several_events) = stack.server("gs-a-several", 2, "local").await;
    let (_one, _one_events) = stack.server("gs-b-one", 1, "local").await;
    let fleet = FleetKeys::new(FLEET).fleet();
    raw(&stack, &["HSET", &fleet, "multi", "0"]).await;
    let first = crate::new_session(&stack, crate::create(4)).await;
    assert_eq!(first.game_server_id, "gs-a-several");
    crate::eventually("the fleet told", async || {
        (raw(&stack, &["HGET", &fleet, "multi"]).await == redis::Value::BulkString(b"1".to_vec())).then_some(())
    })
    .await;
    let second = crate::new_session(&stack, crate::create(4)).await;
    assert_eq!(
        second.game_server_id, "gs-a-several",
        "packed onto the process with room"
    );
}

/// The fleet's player counts as GetFleetUtilization reads them: (player sessions, free player slots).
async fn player_counts(stack: &Stack) -> (u64, u64) {
    let UtilizationRead::Read(read) = read_utilization(&stack.store, FLEET, "").await.unwrap() else {
        panic!("the fleet's counts do not read");
    };
    let tally = &read.locations[0].1;
    (tally.player_sessions, tally.free_player_slots)
}

/// A game session counted by an earlier release — its share of its location's counts holding its players and free
/// player slots, which the location's `players` and `players_free` sum — moves to the current counts (players in
/// sessions with seats, and those seats) at its next change, and reads the same throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_an_earlier_release_counted_moves_to_the_current_counts() {
    let (stack, server, _events, session) = hosting("gs-counted", &["alice", "bob", "carol"]).await;
    assert_eq!(player_counts(&stack).await, (3, 1));

    let keys = FleetKeys::new(FLEET);
    let game = keys.game_session(&session);
    let tally = format!("{}tally:local", keys.game_session("").trim_end_matches("gsess:"));
    let text = |value: redis::Value| redis::from_redis_value::<String>(value).unwrap();
    let share = text(raw(&stack, &["HGET", &game, "tly"]).await);
    let (place, what) = share.rsplit_once('|').unwrap();
    assert_eq!(what, "23;4", "ACTIVE, 3 players, 4 seats");
    raw(&stack, &["HSET", &game, "tly", &format!("{place}|23,1")]).await;
    for (field, by) in [
        ("p_open", "-3"),
        ("seats", "-4"),
        ("players", "3"),
        ("players_free", "1"),
    ] {
        raw(&stack, &["HINCRBY", &tally, field, by]).await;
    }
    assert_eq!(player_counts(&stack).await, (3, 1), "as the earlier release counted");

    server
        .remove_player_session(session.clone(), player_session_id(&session, 2))
        .await
        .unwrap();
    assert_eq!(player_counts(&stack).await, (2, 2));
    // Each count is its field in the hash, where the earlier release kept it, plus its slot in the counts string.
    let counts = berth_testkit::recount::raw_counts(&stack.store, FLEET, "local").await;
    let sums: Vec<i64> = ["players", "players_free", "p_open", "seats"]
        .iter()
        .map(|name| counts.get(*name).copied().unwrap_or(0))
        .collect();
    assert_eq!(sums, [0, 0, 2, 4], "the session's counts moved over whole");

    server.end_game_session(session.clone()).await.unwrap();
    assert_eq!(player_counts(&stack).await, (0, 0));
}

/// The ids of the game sessions a search of the fleet finds, in its order.
async fn searched(stack: &Stack, filter: &str, sort: &str) -> Vec<String> {
    let mut games = stack.games().await;
    let found = games
        .search_game_sessions(pb::SearchGameSessionsRequest {
            fleet_id: FLEET.into(),
            filter_expression: filter.into(),
            sort_expression: sort.into(),
            page_size: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    found
        .game_sessions
        .into_iter()
        .map(|session| session.game_session_id)
        .collect()
}

/// A game session an earlier release indexed — in four sets per location, by created, players, max and free, each
/// scored by its value — moves into its location's one search index at the next sweep, placed as its record stands;
/// a session those sets name that has gone since is left out. Searches by every order find it afterwards, and it
/// moves there as players leave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_an_earlier_release_indexed_moves_to_the_search_index() {
    let (stack, server, _events, session) = hosting("gs-indexed", &["alice", "bob"]).await;
    let searches = [
        ("", ""),
        ("playerSessionCount = 2", ""),
        ("maximumSessions = 4", "maximumSessions DESC"),
        ("hasAvailablePlayerSessions = true", "playerSessionCount ASC"),
    ];
    for (filter, sort) in searches {
        assert_eq!(
            searched(&stack, filter, sort).await,
            std::slice::from_ref(&session),
            "{filter}"
        );
    }

    // Rewritten as the earlier release kept it, beside a session it had indexed that is gone now.
    let keys = FleetKeys::new(FLEET);
    let index = keys.search_index("local");
    let tag = keys.game_session("").trim_end_matches("gsess:").to_owned();
    let created: String =
        redis::from_redis_value(raw(&stack, &["HGET", &keys.game_session(&session), "c_ms"]).await).unwrap();
    let gone = format!("{FLEET}/gsess-gone");
    raw(&stack, &["DEL", &index]).await;
    let old: Vec<String> = ["created", "players", "max", "free"]
        .iter()
        .map(|name| format!("{tag}idx:local:{name}"))
        .collect();
    for (key, score) in old.iter().zip([created.as_str(), "2", "4", created.as_str()]) {
        raw(&stack, &["ZADD", key, score, &session, score, &gone]).await;
    }

    crate::eventually("the sweep's adoption of the old sets", async || {
        let left: i64 =
            redis::from_redis_value(raw(&stack, &["EXISTS", &old[0], &old[1], &old[2], &old[3]]).await).unwrap();
        (left == 0).then_some(())
    })
    .await;
    for (filter, sort) in searches {
        assert_eq!(
            searched(&stack, filter, sort).await,
            std::slice::from_ref(&session),
            "{filter}, after the sweep"
        );
    }
    let members: Vec<String> = redis::from_redis_value(raw(&stack, &["ZRANGE", &index, "0", "-1"]).await).unwrap();
    assert_eq!(
        members.len(),
        4,
        "one member per order, none for the session gone: {members:?}"
    );

    server
        .remove_player_session(session.clone(), player_session_id(&session, 1))
        .await
        .unwrap();
    assert_eq!(
        searched(&stack, "playerSessionCount = 1", "").await,
        std::slice::from_ref(&session)
    );
    assert!(searched(&stack, "playerSessionCount = 2", "").await.is_empty());
}
