//! Game session queues, as the placement service's QueueService keeps them. A queue is one hash in a hash slot of
//! its own (`{q:<name>}`, where its placements live beside it, see [`placements`]): its configuration as the
//! contract's `Queue` message, its revision and times, and the few settings of it its scripts read. A sorted set lists every queue's name, for listing in name order; a name is
//! listed before its record is written and unlisted after it is deleted, so that readers skip a listed name with no
//! record and no record is ever unlisted. A change is computed from a record read and written only if that record's
//! revision still stands, so that two changes never undo each other.

use std::collections::HashMap;

use berth_domain::game_server::timestamp;
use berth_proto::placement::v1 as pb;
use prost::Message;
use redis::Value;

use crate::codec::{binary_fields, outcome_detail, unexpected};
use crate::keys::{DRAINING_QUEUES, QUEUES, QUEUES_CHANNEL, QueueKeys};
use crate::scripts::{Area, FunctionCall, LuaScript, scripts};
use crate::{Store, StoreError};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "queues",
    helpers: &[include_str!("queues/lib.lua")],
    functions: &[
        ("create_queue", include_str!("queues/create.lua"), false),
        ("write_queue", include_str!("queues/write.lua"), false),
        ("delete_queue", include_str!("queues/delete.lua"), false),
        ("release_placement_id", include_str!("queues/release_id.lua"), false),
        ("start_placement", include_str!("queues/start.lua"), false),
        ("record_attempt", include_str!("queues/attempt.lua"), false),
        ("finish_placement", include_str!("queues/finish.lua"), false),
        ("placement_done", include_str!("queues/done.lua"), false),
        ("touch_requests", include_str!("queues/touch.lua"), false),
        ("sweep_queue", include_str!("queues/sweep.lua"), false),
        ("queue_metrics", include_str!("queues/metrics.lua"), true),
        ("queues_now", include_str!("queues/now.lua"), true),
        ("read_placement", include_str!("queues/read.lua"), true),
        ("list_pending_placements", include_str!("queues/list_pending.lua"), true),
        ("read_placement_events", include_str!("queues/read_events.lua"), true),
    ],
};

pub mod placements;

/// A queue script's call with the queue's keys.
fn queue_call<'a>(script: &'a LuaScript, name: &str) -> FunctionCall<'a> {
    let mut call = script.prepare();
    for key in QueueKeys::new(name).fixed() {
        call.key(key);
    }
    call
}

/// What the scripts read of a queue's configuration beside the encoded message: its timeout in ms, its limit of
/// PENDING placements and its custom event data.
fn settings(config: &pb::Queue, call: &mut FunctionCall<'_>) {
    call.arg(u64::from(config.timeout_seconds) * 1000)
        .arg(config.maximum_pending_placements)
        .arg(&config.custom_event_data);
}

/// The outcome of creating a queue.
#[derive(Debug)]
pub enum QueueCreated {
    /// The queue as created, at revision 1.
    Created(Box<pb::Queue>),
    /// A queue of that name exists; nothing was changed.
    Exists,
}

/// Creates a queue from its checked configuration (`berth_domain::queue::check_create`).
pub async fn create_queue(store: &Store, config: &pb::Queue) -> Result<QueueCreated, StoreError> {
    const SCRIPT: &str = "create_queue";
    let _: i64 = store
        .query(redis::cmd("ZADD").arg(QUEUES).arg(0).arg(&config.name))
        .await?;
    let mut call = queue_call(&scripts().create_queue, &config.name);
    call.arg(stored(config));
    settings(config, &mut call);
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, _, record) = outcome_detail(SCRIPT, &raw)?;
    match outcome.as_str() {
        "CREATED" => {
            let created = decode(SCRIPT, record)?;
            // Best effort: a replica that misses it works the queue at its next listing.
            if let Err(err) = store.publish(QUEUES_CHANNEL, &config.name).await {
                tracing::debug!(queue = %config.name, error = %err, "a new queue was not announced");
            }
            Ok(QueueCreated::Created(Box::new(created)))
        }
        "EXISTS" => Ok(QueueCreated::Exists),
        other => Err(unexpected(SCRIPT, other)),
    }
}

/// A queue by name; `None` when there is none.
pub async fn read_queue(store: &Store, name: &str) -> Result<Option<pb::Queue>, StoreError> {
    let fields: HashMap<String, Vec<u8>> = store
        .query(redis::cmd("HGETALL").arg(QueueKeys::new(name).record()))
        .await?;
    if fields.is_empty() {
        return Ok(None);
    }
    from_fields("read_queue", &fields).map(Some)
}

/// The outcome of writing a change of a queue.
#[derive(Debug)]
pub enum QueueWritten {
    /// The queue after the change.
    Written(Box<pb::Queue>),
    NotFound,
    /// The queue is at another revision than the change was computed from: compute it again.
    Conflict(u64),
}

/// Writes `config` as the queue's configuration, only if the queue is still at `from_revision`.
pub async fn write_queue(store: &Store, config: &pb::Queue, from_revision: u64) -> Result<QueueWritten, StoreError> {
    const SCRIPT: &str = "write_queue";
    let mut call = queue_call(&scripts().write_queue, &config.name);
    call.arg(from_revision).arg(stored(config));
    settings(config, &mut call);
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, detail, record) = outcome_detail(SCRIPT, &raw)?;
    match outcome.as_str() {
        "WRITTEN" => Ok(QueueWritten::Written(Box::new(decode(SCRIPT, record)?))),
        "NOT_FOUND" => Ok(QueueWritten::NotFound),
        "CONFLICT" => Ok(QueueWritten::Conflict(revision(SCRIPT, &detail)?)),
        other => Err(unexpected(SCRIPT, other)),
    }
}

/// The outcome of deleting a queue.
#[derive(Debug, PartialEq, Eq)]
pub enum QueueDeleted {
    /// Deleted, after cancelling this many PENDING placements.
    Deleted(u32),
    NotFound,
    /// The queue is at this revision, not the one asked for; nothing was changed.
    Conflict(u64),
    /// This many placements are PENDING and the deletion was not forced; nothing was changed.
    Pending(u32),
}

/// Deletes a queue, only at `expected_revision` unless it is 0; with PENDING placements only when `force`d, which
/// cancels them. Its name stays among the queues the workers visit until they are done with its requests.
pub async fn delete_queue(
    store: &Store,
    name: &str,
    expected_revision: u64,
    force: bool,
    retention_ms: u64,
) -> Result<QueueDeleted, StoreError> {
    const SCRIPT: &str = "delete_queue";
    let mut call = queue_call(&scripts().delete_queue, name);
    call.arg(expected_revision)
        .arg(if force { "1" } else { "0" })
        .arg(retention_ms);
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, detail, rest) = outcome_detail(SCRIPT, &raw)?;
    let count = |text: &str| text.parse::<u32>().map_err(|_| unexpected(SCRIPT, text));
    let deleted = match outcome.as_str() {
        "DELETED" => QueueDeleted::Deleted(count(&detail)?),
        "NOT_FOUND" => QueueDeleted::NotFound,
        "CONFLICT" => return Ok(QueueDeleted::Conflict(revision(SCRIPT, &detail)?)),
        "HAS_PENDING" => return Ok(QueueDeleted::Pending(count(&detail)?)),
        other => return Err(unexpected(SCRIPT, other)),
    };
    let requests_left: i64 = match rest.first() {
        Some(value) => redis::from_redis_value_ref(value).map_err(|_| unexpected(SCRIPT, "a malformed count"))?,
        None => 0,
    };
    if requests_left > 0 {
        let _: i64 = store
            .query(redis::cmd("ZADD").arg(DRAINING_QUEUES).arg(0).arg(name))
            .await?;
    }
    let _: i64 = store.query(redis::cmd("ZREM").arg(QUEUES).arg(name)).await?;
    Ok(deleted)
}

/// Up to `count` queues in name order, after `after` (from the first when `None`), and the name to page on from
/// when more may follow. Listed names whose record is gone (being created or deleted right now) are skipped.
pub async fn list_queues(
    store: &Store,
    after: Option<&str>,
    count: usize,
) -> Result<(Vec<pb::Queue>, Option<String>), StoreError> {
    let start = after.map_or_else(|| "-".to_owned(), |name| format!("({name}"));
    let names: Vec<String> = store
        .query(
            redis::cmd("ZRANGEBYLEX")
                .arg(QUEUES)
                .arg(start)
                .arg("+")
                .arg("LIMIT")
                .arg(0)
                .arg(count),
        )
        .await?;
    let reads = names.iter().map(|name| read_queue(store, name));
    let queues: Vec<pb::Queue> = futures::future::try_join_all(reads)
        .await?
        .into_iter()
        .flatten()
        .collect();
    let next = (names.len() == count).then(|| names.last().cloned()).flatten();
    Ok((queues, next))
}

/// A queue's configuration as stored: the contract's message without what the record keeps beside it.
fn stored(config: &pb::Queue) -> Vec<u8> {
    pb::Queue {
        revision: 0,
        create_time: None,
        update_time: None,
        ..config.clone()
    }
    .encode_to_vec()
}

fn revision(script: &str, detail: &str) -> Result<u64, StoreError> {
    detail.parse().map_err(|_| unexpected(script, detail))
}

fn decode(script: &str, raw: &[Value]) -> Result<pb::Queue, StoreError> {
    from_fields(script, &binary_fields(script, raw)?)
}

/// A queue from its stored fields: cfg, rev, c_ms and u_ms.
fn from_fields(script: &str, fields: &HashMap<String, Vec<u8>>) -> Result<pb::Queue, StoreError> {
    let bad = |what: &str| unexpected(script, format!("a queue with {what}"));
    let number = |name: &str| {
        fields
            .get(name)
            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok())
            .ok_or_else(|| bad(name))
    };
    let config = pb::Queue::decode(fields.get("cfg").map(Vec::as_slice).unwrap_or_default())
        .map_err(|_| bad("a configuration that does not decode"))?;
    Ok(pb::Queue {
        revision: u64::try_from(number("rev")?).map_err(|_| bad("rev"))?,
        create_time: Some(timestamp(number("c_ms")?)),
        update_time: Some(timestamp(number("u_ms")?)),
        ..config
    })
}
