//! An example game server written against Agones' SDK alone (the official `agones` crate), as a studio's server
//! built for Agones is: it runs on Berth unchanged under `berth-agent -- agones_game_server`. It labels itself, says
//! Ready, pings its health, and watches itself; once a matchmaker allocates it (Agones' allocation API on Berth's
//! placement service, or a game session placed on it) it plays the match: the players named in the allocation's
//! `players` annotation connect and later leave (alpha player tracking), a `matches` counter counts up (beta), and
//! when the match is over the server shuts down, as an Agones server does, and the fleet starts another.
//!
//! `AGONES_SDK_GRPC_PORT` (set by the agent) says where the SDK is; `DEMO_MATCH_SECONDS` how long a match lasts
//! (15 by default).

use std::time::Duration;

use agones::Sdk;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let match_seconds: u64 = std::env::var("DEMO_MATCH_SECONDS")
        .ok()
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or(15);
    let mut sdk = Sdk::new(None, None).await?;
    let pings = sdk.health_check();
    tokio::spawn(async move {
        while pings.send(()).await.is_ok() {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    });
    sdk.set_label("mode", "demo").await?;
    sdk.ready().await?;
    let me = sdk.get_gameserver().await?;
    let name = me.object_meta.map(|meta| meta.name).unwrap_or_default();
    println!("{name}: Ready, waiting to be allocated");

    let mut watch = sdk.watch_gameserver().await?;
    let annotations = loop {
        let Some(server) = watch.message().await? else {
            return Ok(());
        };
        let state = server.status.as_ref().map(|status| status.state.as_str()).unwrap_or("");
        if state == "Allocated" {
            break server.object_meta.map(|meta| meta.annotations).unwrap_or_default();
        }
    };
    let match_id = annotations.get("match").cloned().unwrap_or_default();
    let players: Vec<String> = annotations
        .get("players")
        .map(|players| players.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    println!("{name}: Allocated for match {match_id:?} with players {players:?}");

    let mut alpha = sdk.alpha().clone();
    for player in &players {
        alpha.player_connect(player).await?;
    }
    // A server started without the counter (no --counter matches=… to the agent) plays all the same.
    let mut beta = sdk.beta().clone();
    if beta.increment_counter("matches", 1).await.is_ok() {
        println!("{name}: matches played {}", beta.get_counter_count("matches").await?);
    }
    tokio::time::sleep(Duration::from_secs(match_seconds)).await;
    for player in &players {
        alpha.player_disconnect(player).await?;
    }
    println!("{name}: match {match_id:?} over after {match_seconds}s; shutting down");
    sdk.shutdown().await?;
    // The agent passes SIGTERM on once Berth has taken the server out; exit then, or now when it comes first.
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(())
}
