//! The desired state a script hands on with its routing, for the announcement to carry to the process's health
//! replica instead of that replica reading it back: it must be exactly what the replica would read, or the process
//! is told something else than the store holds. A script knows it whole only when the process hosts nothing but the
//! session it just created, or nothing at all once its session ended; otherwise it hands on none.

use berth_domain::game_session::new_game_session_id;
use berth_store::processes::{Routing, desired_state};
use berth_store::sessions::placements::{Attempt, PlacementAttempt};
use berth_store::sessions::{self, Created, NewGameSession, ServerEnded, SessionTimings};
use berth_testkit::TestRedis;

use crate::{FLEET, Stack, fast_sessions};

const TIMINGS: SessionTimings = SessionTimings { retention_ms: 60_000 };

/// Creates a game session on `server` as a placement's attempt does, with two players reserved in it.
async fn created(stack: &Stack, server: &str) -> (String, Routing) {
    let placement_id = format!("p-{}", new_game_session_id(FLEET));
    let attempt = Attempt {
        placement_id: &placement_id,
        number: 1,
        location: "local",
        deadline_ms: i64::MAX / 2,
    };
    let game_session_id = attempt.game_session_id(FLEET);
    let attempt = PlacementAttempt {
        attempt,
        notify: "",
        players: &[("ana", "{\"rank\":3}"), ("bo", "")],
        avoid: &[],
        first_here: false,
    };
    let new = NewGameSession {
        game_server_id: Some(server),
        location: "local",
        attempt: Some(attempt),
        ..NewGameSession::new(&game_session_id, FLEET, 8)
    };
    match sessions::create_game_session(&stack.store, &new, &TIMINGS)
        .await
        .unwrap()
    {
        Created::Created(_, routing) => (game_session_id, routing),
        other => panic!("the session was not created: {other:?}"),
    }
}

/// Asserts that `routing` hands on the desired state that `server` reads now.
async fn hands_on_what_is_read(stack: &Stack, server: &str, routing: &Routing) {
    let read = desired_state(&stack.store, FLEET, server).await.unwrap().unwrap();
    assert_eq!(read.version, routing.version);
    assert_eq!(routing.desired_state(), Some(read));
}

async fn the_desired_state_handed_on_is_the_one_read(redis: TestRedis) {
    let stack = Stack::start(redis, &fast_sessions()).await;
    let (_alone, _events) = stack.server("alone", 1, "local").await;
    let (_shared, _shared_events) = stack.server("shared", 2, "local").await;

    let (session, routing) = created(&stack, "alone").await;
    hands_on_what_is_read(&stack, "alone", &routing).await;
    let read = desired_state(&stack.store, FLEET, "alone").await.unwrap().unwrap();
    assert_eq!(read.sessions.len(), 1);
    assert_eq!(
        read.sessions[0].players.len(),
        2,
        "the players reserved with it are in it"
    );

    let ended = sessions::end_game_session(&stack.store, FLEET, "alone", &session, false);
    let ServerEnded::Ended(_, routing) = ended.await.unwrap() else {
        panic!("the session did not end")
    };
    hands_on_what_is_read(&stack, "alone", &routing).await;

    // A process hosting another session: the script does not read that one, so it hands on nothing.
    let (first, routing) = created(&stack, "shared").await;
    hands_on_what_is_read(&stack, "shared", &routing).await;
    let (_second, routing) = created(&stack, "shared").await;
    assert_eq!(routing.desired, None);
    let ended = sessions::end_game_session(&stack.store, FLEET, "shared", &first, false);
    let ServerEnded::Ended(_, routing) = ended.await.unwrap() else {
        panic!("the session did not end")
    };
    assert_eq!(routing.desired, None, "the other session is still hosted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_desired_state_a_script_hands_on_is_the_one_read_on_a_single_node() {
    the_desired_state_handed_on_is_the_one_read(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_desired_state_a_script_hands_on_is_the_one_read_on_a_cluster() {
    the_desired_state_handed_on_is_the_one_read(TestRedis::cluster()).await;
}
