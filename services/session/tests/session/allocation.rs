//! The table of where a session goes (`berth_domain::allocation::cases`) run against the Lua that takes the server,
//! on a real Redis: each case's servers are written as the store keeps them (their records, the hosting list and
//! the pool with its tiers, each location's mirrors), in a fleet of its own, and a game session is created through
//! the store's function; it must land where the table says the pure rule sends it.

use berth_domain::allocation::{Case, Chosen, Server, TIER_SPAN, cases, tier};
use berth_domain::game_session::new_game_session_id;
use berth_store::Store;
use berth_store::keys::FleetKeys;
use berth_store::sessions::placements::{Attempt, PlacementAttempt};
use berth_store::sessions::{self, Created, NewGameSession, SessionTimings};
use berth_testkit::{TestRedis, anywhere_fleet};

const LOCATIONS: [&str; 2] = ["home", "away"];

/// Writes `server` into fleet `fleet_id` as the store keeps it, at position `at` of its list.
async fn write(store: &Store, fleet_id: &str, server: &Server, hosting: bool, at: usize) {
    let keys = FleetKeys::new(fleet_id);
    let key = keys.game_server(&server.id);
    let mut record = redis::cmd("HSET");
    record
        .arg(&key)
        .arg("id")
        .arg(&server.id)
        .arg("instance")
        .arg("i-1")
        .arg("loc")
        .arg(&server.location)
        .arg("max_players")
        .arg(server.max_players)
        .arg("max_sess")
        .arg(server.max_sessions)
        .arg("health")
        .arg(server.health.as_str())
        .arg("istatus")
        .arg(server.instance.as_str())
        .arg("util")
        .arg(server.utilization.as_str());
    if let Some(state) = server.state {
        record.arg("pstate").arg(state.as_str());
    }
    if server.claimed {
        record.arg("claim_exp_ms").arg(i64::MAX);
    }
    let _: i64 = store.query(&record).await.unwrap();
    // Registering a process that hosts more than one session at a time marks its fleet so (processes/attach.lua),
    // and only such a process is ever in the hosting set.
    if hosting || server.max_sessions > 1 {
        let _: i64 = store
            .query(redis::cmd("HSET").arg(keys.fleet()).arg("multi").arg(1))
            .await
            .unwrap();
    }
    for session in 0..server.sessions {
        let _: i64 = store
            .query(
                redis::cmd("SADD")
                    .arg(format!("{key}:sessions"))
                    .arg(format!("s-{session}")),
            )
            .await
            .unwrap();
    }
    // The hosting list by when each last took a session; the pool by tier, then by how long each has been idle.
    let (set, mirror, score) = if hosting {
        (keys.hosting(), keys.location_hosting(&server.location), at as u64)
    } else {
        let Some(tier) = tier(server.instance) else { return };
        (
            keys.pool(),
            keys.location_pool(&server.location),
            tier * TIER_SPAN + at as u64,
        )
    };
    for set in [set, mirror] {
        let _: i64 = store
            .query(redis::cmd("ZADD").arg(set).arg(score).arg(&server.id))
            .await
            .unwrap();
    }
}

/// Where the store's function puts a session of `case` in fleet `fleet_id`.
async fn chosen_by_the_lua(store: &Store, fleet_id: &str, case: &Case) -> Chosen {
    let location = case.location.unwrap_or("");
    let attempt = Attempt {
        placement_id: "p-1",
        number: 1,
        location,
        deadline_ms: i64::MAX / 2,
    };
    // Only a placement's attempt names servers to avoid, and its session by its token.
    let game_session_id = if case.avoid.is_empty() {
        new_game_session_id(fleet_id)
    } else {
        attempt.game_session_id(fleet_id)
    };
    let attempt = PlacementAttempt {
        attempt,
        notify: "",
        players: &[],
        avoid: &case.avoid,
        first_here: false,
    };
    let new = NewGameSession {
        location,
        attempt: (!case.avoid.is_empty()).then_some(attempt),
        ..NewGameSession::new(&game_session_id, fleet_id, case.players)
    };
    let timings = SessionTimings { retention_ms: 60_000 };
    match sessions::create_game_session(store, &new, &timings).await.unwrap() {
        Created::Created(session, _) => Chosen::Server(session.game_server_id),
        Created::NoServer => Chosen::NoServer,
        Created::TooSmall => Chosen::TooSmall,
        other => panic!("{}: the function answered {other:?}", case.name),
    }
}

async fn every_case_lands_where_the_rule_says(redis: TestRedis) {
    let store = Store::connect(&redis.config()).await.unwrap();
    for (index, case) in cases().iter().enumerate() {
        let fleet_id = format!("cases-{index}");
        anywhere_fleet(&store, &fleet_id, &LOCATIONS).await;
        // As a fleet is once a server of each location has been ready: ACTIVE, its locations DEPLOYED.
        let mut deployed = redis::cmd("HSET");
        deployed
            .arg(FleetKeys::new(&fleet_id).fleet())
            .arg("status")
            .arg("ACTIVE");
        for location in LOCATIONS {
            deployed.arg(format!("l:{location}:status")).arg("DEPLOYED");
        }
        let _: i64 = store.query(&deployed).await.unwrap();
        let (mut in_hosting, mut in_pool) = (0, 0);
        for (server, hosting) in &case.servers {
            let at = if *hosting { &mut in_hosting } else { &mut in_pool };
            *at += 1;
            write(&store, &fleet_id, server, *hosting, *at).await;
        }
        assert_eq!(
            chosen_by_the_lua(&store, &fleet_id, case).await,
            case.chosen,
            "{}",
            case.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_of_the_allocation_table_lands_where_the_rule_says_on_a_single_node() {
    every_case_lands_where_the_rule_says(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_of_the_allocation_table_lands_where_the_rule_says_on_a_cluster() {
    every_case_lands_where_the_rule_says(TestRedis::cluster()).await;
}
