//! A game session written by the earlier release, whose player sessions were a hash each with the session's lists
//! of them beside its record: this release reads it as it is and moves its player sessions into its record at the
//! first change, losing none of them.

use berth_proto::session::v1::{self as pb, describe_player_sessions_request::Selector};
use berth_store::keys::FleetKeys;
use berth_testkit::TestRedis;

use crate::{FLEET, Stack, active_session, create, fast_sessions, join};

async fn command(stack: &Stack, args: &[&str]) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    stack.store.query(&cmd).await.unwrap()
}

async fn players_of(stack: &Stack, game_session_id: &str) -> Vec<(String, pb::PlayerSessionStatus)> {
    let found = stack
        .players()
        .await
        .describe_player_sessions(pb::DescribePlayerSessionsRequest {
            selector: Some(Selector::GameSessionId(game_session_id.into())),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .player_sessions;
    found
        .into_iter()
        .map(|player| (player.player_id.clone(), player.status()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_the_earlier_release_keeps_its_player_sessions_through_changes_and_its_end() {
    use pb::PlayerSessionStatus::{Active, Completed, Reserved};
    let stack = Stack::start(TestRedis::single(), &fast_sessions()).await;
    let (server, mut events) = stack.server("gs-1", 10, "local").await;
    let session = active_session(&stack, &server, &mut events, create(4)).await;
    let mut players = stack.players().await;
    let mut ids = Vec::new();
    for name in ["alice", "bob"] {
        let created = players.create_player_session(join(&session, name)).await.unwrap();
        ids.push(created.into_inner().player_session.unwrap().player_session_id);
    }
    server
        .accept_player_session(session.clone(), ids[0].clone())
        .await
        .unwrap();

    // Rewritten as the earlier release kept it.
    let keys = FleetKeys::new(FLEET);
    let record = keys.game_session(&session);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    for ((name, status), id) in [("alice", "ACTIVE"), ("bob", "RESERVED")].into_iter().zip(&ids) {
        let hash = keys.player_session(id);
        let mut fields: Vec<&str> = vec![
            "HSET", &hash, "id", id, "player", name, "gs", &session, "status", status,
        ];
        fields.extend(["data", "", "c_ms", &now]);
        if status == "ACTIVE" {
            fields.extend(["act_ms", &now]);
        }
        command(&stack, &fields).await;
        command(&stack, &["ZADD", &keys.players_of_session(&session), &now, id]).await;
        command(&stack, &["HSET", &format!("{record}:live"), name, id]).await;
    }
    command(&stack, &["HDEL", &record, "@", "@1", "@2", "#alice", "#bob"]).await;
    let listed = players_of(&stack, &session).await;
    assert_eq!(listed, [("alice".into(), Active), ("bob".into(), Reserved)]);

    let removed = server
        .remove_player_session(session.clone(), ids[0].clone())
        .await
        .unwrap();
    assert_eq!(removed.status(), Completed);
    assert_eq!(
        command(
            &stack,
            &[
                "EXISTS",
                &keys.players_of_session(&session),
                &keys.player_session(&ids[1])
            ]
        )
        .await,
        redis::Value::Int(0),
        "the player sessions moved into the record"
    );
    let created = players.create_player_session(join(&session, "carol")).await.unwrap();
    let carol = created.into_inner().player_session.unwrap().player_session_id;
    assert!(carol.ends_with("-3"), "numbered on from the earlier ones: {carol}");
    let listed = players_of(&stack, &session).await;
    let expected = [
        ("alice".into(), Completed),
        ("bob".into(), Reserved),
        ("carol".into(), Reserved),
    ];
    assert_eq!(listed, expected);
    let again = players.create_player_session(join(&session, "bob")).await.unwrap();
    assert_eq!(
        again.into_inner().player_session.unwrap().player_session_id,
        ids[1],
        "bob's own, back"
    );

    server.end_game_session(session.clone()).await.unwrap();
    let listed = players_of(&stack, &session).await;
    let expected = [
        ("alice".into(), Completed),
        ("bob".into(), Completed),
        ("carol".into(), Completed),
    ];
    assert_eq!(listed, expected);
}
