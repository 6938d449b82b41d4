//! The pool: a fleet's game servers, their claims and the instance tiers claims take them in. Register, update,
//! deregister, read, claim and expire claims; each is one function, so one round trip, and each reply is decoded
//! here in one place. Processes build on it (an SDK process is a game server too).

use berth_domain::game_server::{ClaimTiers, GameServerRecord, InstanceStatus, UtilizationChange};
use berth_domain::process::{COUNTERS_MAX, LABELS_MAX};
use berth_domain::stored::Utilization;

use crate::codec::{field, unexpected};
use crate::fleets;
use crate::keys::FleetKeys;
use crate::scripts::{Area, scripts};
use crate::{Store, StoreError};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "pool",
    helpers: &[include_str!("pool/lib.lua")],
    functions: &[
        ("register_game_server", include_str!("pool/register.lua"), false),
        ("update_game_server", include_str!("pool/update.lua"), false),
        ("deregister_game_server", include_str!("pool/deregister.lua"), false),
        ("describe_game_server", include_str!("pool/describe.lua"), true),
        ("list_game_servers", include_str!("pool/list.lua"), true),
        (
            "set_instance_status",
            include_str!("pool/set_instance_status.lua"),
            false,
        ),
        ("claim_game_server", include_str!("pool/claim.lua"), false),
        ("allocate_game_server", include_str!("pool/allocate.lua"), false),
        ("expire_claims", include_str!("pool/expire_claims.lua"), false),
        ("release_claim", include_str!("pool/release.lua"), false),
    ],
};

/// What a single-server script answered: its outcome word and the server as it stands after the script.
pub(crate) struct Reply {
    pub(crate) outcome: String,
    server: Option<GameServerRecord>,
    /// The server's hash as field/value pairs, for the process details the registry record leaves out.
    pub(crate) fields: Vec<String>,
}

fn decode_fields(fleet_id: &str, now_ms: i64, fields: &[String]) -> Result<GameServerRecord, StoreError> {
    let pairs = fields.chunks_exact(2).map(|pair| (pair[0].as_str(), pair[1].as_str()));
    GameServerRecord::from_fields(fleet_id, now_ms, pairs).map_err(|err| StoreError::Unexpected(err.to_string()))
}

pub(crate) fn decode_reply(fleet_id: &str, raw: Vec<String>) -> Result<Reply, StoreError> {
    let [outcome, now, fields @ ..] = raw.as_slice() else {
        return Err(StoreError::Unexpected("script reply too short".into()));
    };
    let now_ms: i64 = now
        .parse()
        .map_err(|_| StoreError::Unexpected(format!("script clock {now:?} is not a number")))?;
    let server = if fields.is_empty() {
        None
    } else {
        Some(decode_fields(fleet_id, now_ms, fields)?)
    };
    Ok(Reply {
        outcome: outcome.clone(),
        server,
        fields: fields.to_vec(),
    })
}

/// How a yes/no argument travels to a script.
fn flag(on: bool) -> &'static str {
    if on { "1" } else { "0" }
}

pub(crate) fn present(reply: Reply, script: &str) -> Result<GameServerRecord, StoreError> {
    reply
        .server
        .ok_or_else(|| unexpected(script, format!("{} without the server", reply.outcome)))
}

/// A server to register.
#[derive(Clone, Debug)]
pub struct Registration<'a> {
    /// Fleet to join.
    pub fleet_id: &'a str,
    /// Id within the fleet.
    pub game_server_id: &'a str,
    /// Instance it runs on.
    pub instance_id: &'a str,
    /// How clients reach it.
    pub connection_info: &'a str,
    /// Free-form game data.
    pub game_server_data: &'a str,
}

/// The outcome of a registration.
#[derive(Debug)]
pub enum Registered {
    /// Registered now (or registered exactly so before, and still untouched).
    New(Box<GameServerRecord>),
    /// The id is taken by a server registered otherwise, or already in use.
    AlreadyExists,
    /// The fleet does not exist: why.
    NoFleet(String),
    /// The fleet is being deleted, or was: why.
    Deleting(String),
}

/// Registers a server as AVAILABLE.
pub async fn register(store: &Store, reg: &Registration<'_>) -> Result<Registered, StoreError> {
    let keys = FleetKeys::new(reg.fleet_id);
    let mut call = scripts().register_game_server.for_fleet(&keys);
    call.arg(reg.game_server_id)
        .arg(reg.instance_id)
        .arg(reg.connection_info)
        .arg(reg.game_server_data);
    let reply = fleets::listed_beside(store, reg.fleet_id, store.invoke(&call)).await?;
    let reply = decode_reply(reg.fleet_id, reply)?;
    match reply.outcome.as_str() {
        "REGISTERED" => Ok(Registered::New(Box::new(present(reply, "register")?))),
        "EXISTS" => Ok(Registered::AlreadyExists),
        "NO_FLEET" => Ok(Registered::NoFleet(field(&reply.fields, "detail"))),
        // The home location's status stands for a FleetIQ fleet's: it has no location of its own.
        "NO_LOCATION" | "DELETING" => Ok(Registered::Deleting(field(&reply.fields, "detail"))),
        other => Err(unexpected("register", other)),
    }
}

/// What an update asks for.
#[derive(Clone, Debug)]
pub struct Update<'a> {
    /// Fleet of the server.
    pub fleet_id: &'a str,
    /// Id of the server.
    pub game_server_id: &'a str,
    /// New data, when set.
    pub game_server_data: Option<&'a str>,
    /// Utilization asked for.
    pub utilization: UtilizationChange,
    /// Whether to record a HEALTHY check.
    pub healthy: bool,
    /// The caller's claim id, if it gave one.
    pub claim_id: Option<&'a str>,
    /// Whether the caller may act only as the holder of the server's claim.
    pub claimant_only: bool,
}

/// The outcome of an update.
#[derive(Debug)]
pub enum Updated<T = Box<GameServerRecord>> {
    /// Done; the server after it.
    Done(T),
    /// No such server.
    NotFound,
    /// The caller does not hold the server's claim; nothing changed.
    NotClaimant,
    /// UTILIZED was asked after its claim lapsed; nothing changed.
    ClaimLapsed,
    /// AVAILABLE was asked of a UTILIZED server; nothing changed.
    AlreadyUtilized,
}

/// Reports utilization, health or data.
pub async fn update(store: &Store, update: &Update<'_>) -> Result<Updated, StoreError> {
    let reply = update_call(store, update, &Metadata::default()).await?;
    updated(reply, |reply| Ok(Box::new(present(reply, "update")?)))
}

/// Decodes the outcome of the update script, the server after it by `done`.
pub(crate) fn updated<T>(
    reply: Reply,
    done: impl FnOnce(Reply) -> Result<T, StoreError>,
) -> Result<Updated<T>, StoreError> {
    match reply.outcome.as_str() {
        "NOT_FOUND" => Ok(Updated::NotFound),
        "UPDATED" => Ok(Updated::Done(done(reply)?)),
        "NOT_CLAIMANT" => Ok(Updated::NotClaimant),
        "LAPSED" => Ok(Updated::ClaimLapsed),
        "UTILIZED" => Ok(Updated::AlreadyUtilized),
        other => Err(unexpected("update", other)),
    }
}

/// What an update writes beside data and utilization, as JSON.
#[derive(Default)]
pub(crate) struct Metadata<'a> {
    /// Replaces the labels when given (`[[key, value], ...]`).
    pub(crate) labels: Option<&'a str>,
    /// Replaces the annotations when given, likewise.
    pub(crate) annotations: Option<&'a str>,
    /// Merged into the counters (`[[name, count, capacity], ...]`, numbers as strings); empty for none.
    pub(crate) counters: &'a str,
    /// Merged into the lists (`[[name, capacity, [value, ...]], ...]`); empty for none.
    pub(crate) lists: &'a str,
    /// Changes to counters (`[[name, capacity, count, difference], ...]`, -1 for unset); empty for none.
    pub(crate) counter_changes: &'a str,
    /// Changes to lists (`[[name, capacity, replace, values, add, remove], ...]`); empty for none.
    pub(crate) list_changes: &'a str,
    /// Labels set by key after `labels` (`[[key, value], ...]`); empty for none.
    pub(crate) set_labels: &'a str,
    /// Annotations set by key after `annotations`, likewise.
    pub(crate) set_annotations: &'a str,
}

/// A JSON list of changes, `[]` when none was given.
fn none_if_empty(json: &str) -> &str {
    if json.is_empty() { "[]" } else { json }
}

/// Runs the update script.
pub(crate) async fn update_call(
    store: &Store,
    update: &Update<'_>,
    metadata: &Metadata<'_>,
) -> Result<Reply, StoreError> {
    let keys = FleetKeys::new(update.fleet_id);
    let utilization = match update.utilization {
        UtilizationChange::Keep => "",
        UtilizationChange::Available => Utilization::Available.as_str(),
        UtilizationChange::Utilized => Utilization::Utilized.as_str(),
    };
    let mut call = scripts().update_game_server.prepare();
    call.key(keys.game_server(update.game_server_id))
        .key(keys.pool())
        .key(keys.claims())
        .key(keys.utilized())
        .arg(update.game_server_id)
        .arg(flag(update.game_server_data.is_some()))
        .arg(update.game_server_data.unwrap_or(""))
        .arg(utilization)
        .arg(flag(update.healthy))
        .arg(update.claim_id.unwrap_or(""))
        .arg(flag(update.claimant_only))
        .arg(flag(metadata.labels.is_some()))
        .arg(metadata.labels.unwrap_or(""))
        .arg(none_if_empty(metadata.counters))
        .arg(COUNTERS_MAX)
        .arg(flag(metadata.annotations.is_some()))
        .arg(metadata.annotations.unwrap_or(""))
        .arg(none_if_empty(metadata.lists))
        .arg(none_if_empty(metadata.counter_changes))
        .arg(none_if_empty(metadata.list_changes))
        .arg(none_if_empty(metadata.set_labels))
        .arg(none_if_empty(metadata.set_annotations))
        .arg(LABELS_MAX);
    decode_reply(update.fleet_id, store.invoke(&call).await?)
}

/// The outcome of a deregistration.
#[derive(Debug, PartialEq, Eq)]
pub enum Deregistered {
    /// Gone.
    Done,
    /// It was not registered.
    NotFound,
    /// It holds an SDK stream, and leaves by ProcessEnding instead.
    SdkProcess,
}

/// Removes a server.
pub async fn deregister(store: &Store, fleet_id: &str, game_server_id: &str) -> Result<Deregistered, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().deregister_game_server.prepare();
    call.key(keys.pool())
        .key(keys.claims())
        .key(keys.game_servers())
        .key(keys.utilized())
        .arg(game_server_id);
    let reply = decode_reply(fleet_id, store.invoke(&call).await?)?;
    match reply.outcome.as_str() {
        "DEREGISTERED" => Ok(Deregistered::Done),
        "NOT_FOUND" => Ok(Deregistered::NotFound),
        "SDK_PROCESS" => Ok(Deregistered::SdkProcess),
        other => Err(unexpected("deregister", other)),
    }
}

/// Reads one server; `None` when it is not registered.
pub async fn describe(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
) -> Result<Option<GameServerRecord>, StoreError> {
    describe_reply(store, fleet_id, game_server_id)
        .await?
        .map(|reply| present(reply, "describe"))
        .transpose()
}

/// The describe script's reply for one server; `None` when it is not registered.
pub(crate) async fn describe_reply(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
) -> Result<Option<Reply>, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().describe_game_server.prepare();
    call.key(keys.game_server(game_server_id));
    let reply = decode_reply(fleet_id, store.invoke(&call).await?)?;
    match reply.outcome.as_str() {
        "FOUND" => Ok(Some(reply)),
        "NOT_FOUND" => Ok(None),
        other => Err(unexpected("describe", other)),
    }
}

/// A page of a fleet's servers.
#[derive(Debug)]
pub struct Page {
    /// The servers, in id order.
    pub game_servers: Vec<GameServerRecord>,
    /// The id to start the next page after; `None` on the last page.
    pub next_after: Option<String>,
}

/// Reads up to `size` servers of a fleet whose ids come after `after`.
pub async fn list(store: &Store, fleet_id: &str, after: &str, size: u32) -> Result<Page, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().list_game_servers.prepare();
    call.key(keys.game_servers())
        .arg(keys.game_server_prefix())
        .arg(after)
        .arg(size);
    let (now, next_after, servers): (i64, String, Vec<Vec<String>>) = store.invoke(&call).await?;
    let game_servers = servers
        .iter()
        .filter(|fields| !fields.is_empty())
        .map(|fields| decode_fields(fleet_id, now, fields))
        .collect::<Result<_, _>>()?;
    Ok(Page {
        game_servers,
        next_after: Some(next_after).filter(|after| !after.is_empty()),
    })
}

/// Sets the status of an instance and its servers; returns how many servers it has.
pub async fn set_instance_status(
    store: &Store,
    fleet_id: &str,
    instance_id: &str,
    status: InstanceStatus,
) -> Result<u32, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().set_instance_status.prepare();
    call.key(keys.instance(instance_id))
        .key(keys.instance_statuses())
        .key(keys.pool())
        .arg(instance_id)
        .arg(status.as_str());
    store.invoke(&call).await
}

/// What a claim asks for.
#[derive(Clone, Debug)]
pub struct Claim<'a> {
    /// Fleet to claim from.
    pub fleet_id: &'a str,
    /// The server to claim, or `None` for any.
    pub game_server_id: Option<&'a str>,
    /// Data to store on the claimed server.
    pub game_server_data: Option<&'a str>,
    /// Instance tiers allowed.
    pub tiers: ClaimTiers,
    /// How long the claim lasts, in ms.
    pub timeout_ms: u64,
    /// Id of the new claim, which the claimer presents to act on the server.
    pub claim_id: &'a str,
    /// The caller's idempotency token ('' for none): a claim made under it that still holds is answered again.
    pub token: &'a str,
}

/// The outcome of a claim.
#[derive(Debug)]
pub enum Claimed {
    /// The server is the caller's until its claim lapses; `replica` holds its SDK stream ('' for a server without
    /// one), to be told of the claim.
    Claimed { server: GameServerRecord, replica: String },
    /// No server is free.
    Exhausted,
    /// The named server is not registered.
    NotFound,
    /// The named server cannot be claimed; this is why (claimed, UTILIZED, or filtered out by its instance).
    Conflict(GameServerRecord),
}

/// Claims a server.
pub async fn claim(store: &Store, claim: &Claim<'_>) -> Result<Claimed, StoreError> {
    let keys = FleetKeys::new(claim.fleet_id);
    let mut call = scripts().claim_game_server.prepare();
    call.key(keys.pool())
        .key(keys.claims())
        .arg(keys.game_server_prefix())
        .arg(claim.timeout_ms)
        .arg(claim.game_server_id.unwrap_or(""))
        .arg(claim.tiers.lowest)
        .arg(claim.tiers.highest)
        .arg(flag(claim.game_server_data.is_some()))
        .arg(claim.game_server_data.unwrap_or(""))
        .arg(claim.claim_id)
        .arg(claim.token);
    let reply = decode_reply(claim.fleet_id, store.invoke_acknowledged(&call).await?)?;
    match reply.outcome.as_str() {
        "CLAIMED" => {
            let replica = field(&reply.fields, "replica");
            Ok(Claimed::Claimed {
                server: present(reply, "claim")?,
                replica,
            })
        }
        "EXHAUSTED" => Ok(Claimed::Exhausted),
        "NOT_FOUND" => Ok(Claimed::NotFound),
        "CONFLICT" => Ok(Claimed::Conflict(present(reply, "claim")?)),
        other => Err(unexpected("claim", other)),
    }
}

/// Hands back claim `claim_id` of a server, made for a caller that gave up before it was answered: the server
/// returns to the pool. `false` when that claim no longer holds it.
pub async fn release_claim(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    claim_id: &str,
) -> Result<bool, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().release_claim.for_fleet(&keys);
    call.arg(game_server_id).arg(claim_id);
    let released: i64 = store.invoke(&call).await?;
    Ok(released == 1)
}

/// Hands up to `limit` lapsed claims of a fleet back to the pool; returns how many.
pub async fn expire_claims(store: &Store, fleet_id: &str, limit: u32) -> Result<Expired, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().expire_claims.prepare();
    call.key(keys.pool()).key(keys.claims()).arg(limit);
    let (lapsed, available, claimed) = store.invoke(&call).await?;
    Ok(Expired {
        lapsed,
        available,
        claimed,
    })
}

/// What a claim sweep of one fleet did, and the pool after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expired {
    /// Claims handed back.
    pub lapsed: u32,
    /// Servers claimable now.
    pub available: u64,
    /// Servers claimed now.
    pub claimed: u64,
}

/// Counts of one fleet's pool, for metrics: (claimable now, claimed now).
pub async fn pool_sizes(store: &Store, fleet_id: &str) -> Result<(u64, u64), StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut pipe = redis::pipe();
    pipe.zcard(keys.pool()).zcard(keys.claims());
    store.query_pipeline(&pipe).await
}
