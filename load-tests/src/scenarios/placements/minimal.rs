//! The floor a placement's cost is read against, measured in the same run: `placement_floor.lua`'s 13 function
//! calls — start, create with the players' slots, activate, fulfil, each player accepted and removed, end — called
//! one chain after another on servers of its own once everything else has stopped, so that what Redis counts
//! between two readings is theirs alone. The cost phase's commands, stream entries, time in functions and memory
//! kept per placement are each printed beside this floor's, and as a multiple of it: an absolute target measured on
//! another machine says less than how far the placement core sits from the least its work could cost here. Its
//! steps are metered as `floor::by_step` meters Berth's, under the same names, so that each step shows its gap.

use berth_store::Store;

use crate::Failure;
use crate::redis_stats::{RedisStats, memory_by_kind};

use super::floor::{METERED_CHAINS, Meter, StepCost, mark};

/// Chains run: enough that the readings around them and the allocator's steps vanish in the average.
pub const CHAINS: u64 = 2_000;
/// Servers in the floor's pool; the chains run one at a time, so one would do, as long as the pool never empties.
const SERVERS: u64 = 16;
/// The floor's own fleet and queue, apart from those the scenario measures.
const FLEET_TAG: &str = "berth:{f:bench-placement-floor}";
const QUEUE_TAG: &str = "berth:{q:bench-placement-floor}";
/// A ready server's record as the floor's create reads it: state, health, most players, replica, desired-state
/// version and endpoint.
const SERVER_FIELDS: [&str; 14] = [
    "state",
    "READY",
    "health",
    "HEALTHY",
    "maxp",
    "8",
    "replica",
    "bench-floor",
    "ver",
    "0",
    "ip",
    "10.0.0.1",
    "port",
    "7777",
];
/// The metered chains' first number, apart from those of [`lifecycles`].
const METERED_FIRST: u64 = 1_000_000_000;
/// The services' default retention and placement timeout.
const RETENTION_MS: u64 = 86_400_000;
const TIMEOUT_MS: u64 = 600_000;

/// Loads the floor's library and fills its pool. Called again between runs of chains, it writes the same: every
/// server is back in the pool, ready, once a chain has ended.
async fn prepare(store: &Store) -> Result<(), Failure> {
    let mut load = redis::cmd("FUNCTION");
    load.arg("LOAD")
        .arg("REPLACE")
        .arg(include_str!("../../placement_floor.lua"));
    store.query::<redis::Value>(&load).await?;
    for index in 0..SERVERS {
        let server = format!("floor-{index}");
        let mut record = redis::cmd("HSET");
        record.arg(format!("{FLEET_TAG}:gs:{server}")).arg(&SERVER_FIELDS);
        store.query::<i64>(&record).await?;
        let mut pooled = redis::cmd("ZADD");
        pooled.arg(pool_key()).arg(0).arg(&server);
        store.query::<i64>(&pooled).await?;
    }
    let mut group = redis::cmd("XGROUP");
    group
        .arg("CREATE")
        .arg(format!("{QUEUE_TAG}:requests"))
        .arg("workers")
        .arg("$")
        .arg("MKSTREAM");
    match store.query::<redis::Value>(&group).await {
        // There already when the floor ran before against the same Redis.
        Err(err) if err.to_string().contains("BUSYGROUP") => Ok(()),
        Err(err) => Err(err.into()),
        Ok(_) => Ok(()),
    }
}

/// What one chain cost Redis, per placement (from [`RedisStats::per`]): commands and their µs by name, memory kept.
pub async fn lifecycles(store: &Store, chains: u64, players: u64) -> Result<RedisStats, Failure> {
    prepare(store).await?;
    // Held first, so that the SCAN and MEMORY USAGE that count it are not counted as the chains' commands.
    let held_before = held(store).await?;
    let before = RedisStats::read(store).await?;
    for chain in 0..chains {
        lifecycle(store, chain, players, None).await?;
    }
    let after = RedisStats::read(store).await?;
    let mut per = after.per(&before, &RedisStats::default(), chains);
    // The readings' own INFO calls are no work of a placement's.
    per.commands.remove("info");
    if let (Some(before), Some(after)) = (held_before, held(store).await?) {
        per.used_memory = (after - before) / chains as f64;
    }
    Ok(per)
}

/// What each of the floor's steps costs Redis per chain, as `floor::by_step` tells it of Berth's, from chains run
/// one at a time with Redis's counts read between their steps.
pub async fn by_step(store: &Store, players: u64) -> Result<Vec<(&'static str, StepCost)>, Failure> {
    prepare(store).await?;
    let mut meter = Meter::new(store).await?;
    for chain in 0..METERED_CHAINS {
        lifecycle(store, METERED_FIRST + chain, players, Some(&mut meter)).await?;
    }
    Ok(meter.per_chain(METERED_CHAINS))
}

/// Bytes the floor's keys hold (`MEMORY USAGE` of each), exact where `used_memory` moves with whatever else Redis
/// frees or expires meanwhile; `None` on a cluster (see [`memory_by_kind`]).
async fn held(store: &Store) -> Result<Option<f64>, Failure> {
    let mut bytes = 0.0;
    for tag in [FLEET_TAG, QUEUE_TAG] {
        let Some(kinds) = memory_by_kind(store, &format!("{tag}:*")).await? else {
            return Ok(None);
        };
        bytes += kinds.values().map(|(_, held)| held).sum::<f64>();
    }
    Ok(Some(bytes))
}

fn pool_key() -> String {
    format!("{FLEET_TAG}:lpool:floor")
}

/// Calls `function` of the floor's library with `keys` and `args`, and checks its outcome; answers its reply.
async fn call(
    store: &Store,
    function: &str,
    keys: &[String],
    args: &[String],
    outcome: &str,
) -> Result<Vec<String>, Failure> {
    let mut fcall = redis::cmd("FCALL");
    fcall
        .arg(format!("berth_bench_floor_{function}"))
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    let reply: Vec<String> = store.query(&fcall).await?;
    if reply.first().map(String::as_str) != Some(outcome) {
        return Err(format!("the floor's {function} answered {reply:?}, not {outcome}").into());
    }
    Ok(reply)
}

/// One placement's whole life through the floor's functions, as the server and the worker would call them, each
/// step charged to `meter` if given, under the name `floor::by_step` gives Berth's.
async fn lifecycle(store: &Store, chain: u64, players: u64, mut meter: Option<&mut Meter>) -> Result<(), Failure> {
    let placement_id = format!("floor-{chain:010}");
    let placement = format!("{QUEUE_TAG}:pl:{placement_id}");
    let (requests, events) = (format!("{QUEUE_TAG}:requests"), format!("{QUEUE_TAG}:events"));
    // About the size of the scenario's encoded requests: a queue name, a session name and each player's latencies.
    let request = format!("{placement_id}|{}", "p".repeat(120 + 60 * players as usize));
    let started = call(
        store,
        "start",
        &[placement.clone(), requests.clone()],
        &[placement_id.clone(), request.clone(), TIMEOUT_MS.to_string()],
        "STARTED",
    )
    .await?;
    charge(&mut meter, store, "start the placement").await?;
    let entry = started.get(1).cloned().unwrap_or_default();
    let session_id = format!("bench-placement-floor/gsess-{chain:010}");
    let session = format!("{FLEET_TAG}:gsess:{session_id}");
    let tally = format!("{FLEET_TAG}:tally:floor");
    let mut create_args = vec![
        session_id.clone(),
        placement_id.clone(),
        "8".to_owned(),
        u64::MAX.to_string(),
    ];
    create_args.extend((1..=players).map(|n| format!("player-{chain:010}-{n}")));
    let created = call(
        store,
        "create",
        &[
            pool_key(),
            session.clone(),
            format!("{FLEET_TAG}:act_due"),
            tally.clone(),
        ],
        &create_args,
        "CREATED",
    )
    .await?;
    charge(&mut meter, store, "create the game session").await?;
    let server = created.get(1).cloned().unwrap_or_default();
    call(
        store,
        "activate",
        &[
            session.clone(),
            format!("{FLEET_TAG}:act_due"),
            format!("{FLEET_TAG}:res_due"),
            tally.clone(),
        ],
        &[session_id.clone(), server.clone()],
        "ACTIVATED",
    )
    .await?;
    charge(&mut meter, store, "activate it").await?;
    let placed = format!("{session_id}|{}", created[1..].join("|"));
    call(
        store,
        "fulfil",
        &[placement, requests, events],
        &[placement_id, entry, RETENTION_MS.to_string(), request, placed],
        "FULFILLED",
    )
    .await?;
    charge(&mut meter, store, "fulfil the placement").await?;
    for n in 1..=players {
        let args = [session_id.clone(), server.clone(), n.to_string()];
        call(store, "accept", std::slice::from_ref(&session), &args, "ACCEPTED").await?;
        charge(&mut meter, store, "accept a player").await?;
    }
    for n in 1..=players {
        let args = [session_id.clone(), server.clone(), n.to_string()];
        call(store, "remove", &[session.clone(), tally.clone()], &args, "REMOVED").await?;
        charge(&mut meter, store, "remove a player").await?;
    }
    call(
        store,
        "end",
        &[
            session,
            format!("{FLEET_TAG}:gend:{session_id}"),
            pool_key(),
            format!("{FLEET_TAG}:res_due"),
            tally,
        ],
        &[session_id, server, RETENTION_MS.to_string()],
        "ENDED",
    )
    .await?;
    charge(&mut meter, store, "end the game session").await?;
    Ok(())
}

/// Charges `step` to `meter` when there is one (`floor::mark`).
async fn charge(meter: &mut Option<&mut Meter>, store: &Store, step: &'static str) -> Result<(), Failure> {
    mark(meter, store, step)
        .await
        .map_err(|code| format!("reading Redis's counts after the floor's {step} failed: {code:?}").into())
}
