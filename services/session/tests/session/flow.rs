//! GameLift's whole session flow (seed 000) against the example game server as a real process: create a game
//! session, the server activates it, a player session is created, the player connects and is accepted, leaves and
//! is removed (the match is over), a second session is created and terminated, and the server ends with
//! ProcessEnding.

use berth_proto::session::v1::{self as pb, describe_player_sessions_request::Selector};
use berth_store::fleets::recent_fleet_events;
use berth_testkit::{ExampleGameServer, TestRedis};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::{FLEET, Stack, create, describe, eventually, fast_sessions, join};

/// Sends `JOIN` for a player and returns the server's answer line, with the connection (the player's presence).
async fn connect(port: u16, game_session_id: &str, player_session_id: &str) -> (String, TcpStream) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream
        .write_all(format!("JOIN {game_session_id} {player_session_id}\n").as_bytes())
        .await
        .unwrap();
    let mut line = String::new();
    let mut reader = BufReader::new(&mut stream);
    reader.read_line(&mut line).await.unwrap();
    (line.trim().to_owned(), stream)
}

async fn active(stack: &Stack, id: &str) -> pb::GameSession {
    eventually("ACTIVE", async || {
        let session = describe(stack, id).await;
        (session.status() == pb::GameSessionStatus::Active).then_some(session)
    })
    .await
}

async fn player_status(stack: &Stack, id: &str) -> pb::PlayerSessionStatus {
    let found = stack
        .players()
        .await
        .describe_player_sessions(pb::DescribePlayerSessionsRequest {
            selector: Some(Selector::PlayerSessionId(id.into())),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    found.player_sessions[0].status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_session_flow_runs_against_the_example_game_server() {
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let mut process = ExampleGameServer::spawn(&stack.health.endpoint(), FLEET, "gs-1");
    let port = process.port;
    let mut games = stack.games().await;
    let mut players = stack.players().await;

    // CreateGameSession waits for a ready server; the example server activates what it is given.
    let session = eventually("a ready server", async || {
        games.create_game_session(create(4)).await.ok()
    })
    .await
    .into_inner()
    .game_session
    .unwrap();
    assert_eq!(session.game_server_id, "gs-1");
    let session = active(&stack, &session.game_session_id).await;
    assert_eq!(session.endpoint.as_ref().unwrap().port, u32::from(port));

    // A player session; the player connects with it and is let in.
    let player = players
        .create_player_session(join(&session.game_session_id, "alice"))
        .await
        .unwrap()
        .into_inner()
        .player_session
        .unwrap();
    assert_eq!(player.status(), pb::PlayerSessionStatus::Reserved);
    let (answer, presence) = connect(port, &session.game_session_id, &player.player_session_id).await;
    assert_eq!(answer, "WELCOME");
    assert_eq!(
        player_status(&stack, &player.player_session_id).await,
        pb::PlayerSessionStatus::Active
    );
    // A made-up player session is refused at the door.
    let made_up = format!("{FLEET}/psess-00000000-0000-0000-0000-000000000000");
    let (answer, _) = connect(port, &session.game_session_id, &made_up).await;
    assert!(answer.starts_with("REFUSED"), "{answer}");

    // The player leaves: removed, and the match (its last player gone) ends.
    drop(presence);
    eventually("COMPLETED", async || {
        (player_status(&stack, &player.player_session_id).await == pb::PlayerSessionStatus::Completed).then_some(())
    })
    .await;
    let ended = eventually("TERMINATED", async || {
        let found = describe(&stack, &session.game_session_id).await;
        (found.status() == pb::GameSessionStatus::Terminated).then_some(found)
    })
    .await;
    assert_eq!(ended.status_reason(), pb::GameSessionStatusReason::EndedByServer);

    // The server hosts the next match; terminating it asks the server to end, which ends with ProcessEnding.
    let next = eventually("the server ready again", async || {
        games.create_game_session(create(4)).await.ok()
    })
    .await
    .into_inner()
    .game_session
    .unwrap();
    active(&stack, &next.game_session_id).await;
    let terminating = games
        .terminate_game_session(pb::TerminateGameSessionRequest {
            game_session_id: next.game_session_id.clone(),
            termination_mode: pb::TerminationMode::TriggerOnProcessTerminate as i32,
        })
        .await
        .unwrap()
        .into_inner()
        .game_session
        .unwrap();
    assert_eq!(terminating.status(), pb::GameSessionStatus::Terminating);
    let done = eventually("TERMINATED", async || {
        let found = describe(&stack, &next.game_session_id).await;
        (found.status() == pb::GameSessionStatus::Terminated).then_some(found)
    })
    .await;
    assert_eq!(
        done.status_reason(),
        pb::GameSessionStatusReason::TriggeredOnProcessTerminate
    );
    let status = eventually("the process exits", async || process.child.try_wait().unwrap()).await;
    assert!(status.success(), "{status:?}");
    let events = recent_fleet_events(&stack.store, FLEET, 20).await.unwrap();
    assert!(
        events
            .iter()
            .any(|event| event.code_name() == "SERVER_PROCESS_TERMINATED"),
        "{events:?}"
    );
}
