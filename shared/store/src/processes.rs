//! Typed calls over SDK processes — game servers that hold a stream to the health service: attach (register or
//! resume), ready, batched heartbeats, the monitor's sweep, termination, ProcessEnding, and the game sessions
//! placed on them. Each is one script over one fleet's slot; replies are decoded here in one place.

use std::sync::Arc;

use berth_domain::fleet::settings::FleetSettings;
use berth_domain::game_server::GameServerRecord;
use berth_domain::game_session::{GameSessionRecord, PlayerSessionRecord};
use berth_domain::process::Registration;
use berth_domain::stored::{GameState, PlayerSessionStatus, ProcessHealth, ProcessState};
use redis::Value;

use crate::codec::{field, game_session, stored_player, stored_player_values, strings, unexpected};
use crate::fleets;
use crate::keys::{FleetKeys, push_channel};
use crate::pool::{Metadata, Reply, Update, Updated, decode_reply, describe_reply, present, update_call, updated};
use crate::scripts::{Area, scripts};
use crate::{Store, StoreError};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "processes",
    helpers: &[include_str!("processes/lib.lua")],
    functions: &[
        ("attach_process", include_str!("processes/attach.lua"), false),
        ("detach_process", include_str!("processes/detach.lua"), false),
        ("process_ready", include_str!("processes/ready.lua"), false),
        ("reserve_process", include_str!("processes/reserve.lua"), false),
    ],
};

/// The health monitor's timings, in ms, as the scripts need them: the deployment's, where every fleet's own
/// (heartbeat period and window, unhealthy threshold, ready and termination deadlines) are read from its record by
/// the scripts themselves.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    /// How long after registering, beyond the fleet's heartbeat window, the first heartbeat may take.
    pub initial_delay_ms: u64,
    /// How long the record of a lost process stays readable.
    pub retention_ms: u64,
}

/// What an SDK process said of itself and last reported, beside its registry record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessDetails {
    /// What it registered (with the endpoint ready may have moved).
    pub registration: Registration,
    /// Game state last reported; `None` before any.
    pub game_state: Option<GameState>,
    /// Whether the last heartbeat said HEALTHY.
    pub healthy: bool,
    /// Labels, in the order given.
    pub labels: Vec<(String, String)>,
    /// Annotations, in the order given.
    pub annotations: Vec<(String, String)>,
    /// Other ports: name, number, transport (the contract's enum value).
    pub ports: Vec<(String, u32, i32)>,
    /// Counters: name, count, capacity.
    pub counters: Vec<(String, i64, i64)>,
    /// Lists: name, capacity, values in the order they were added.
    pub lists: Vec<(String, i64, Vec<String>)>,
}

impl ProcessDetails {
    /// Reads the details from a server hash's field/value pairs.
    fn from_fields(fields: &[String]) -> Result<ProcessDetails, StoreError> {
        let mut details = ProcessDetails {
            healthy: true,
            ..ProcessDetails::default()
        };
        let bad = |field: &str, value: &str| unexpected("process record", format!("{field} = {value:?}"));
        for pair in fields.chunks_exact(2) {
            let (field, value) = (pair[0].as_str(), pair[1].as_str());
            let number = || value.parse::<u32>().map_err(|_| bad(field, value));
            match field {
                "loc" => details.registration.location = value.to_owned(),
                "ip" => details.registration.ip_address = value.to_owned(),
                "dns" => details.registration.dns_name = value.to_owned(),
                "port" => details.registration.port = number()?,
                "max_sess" => details.registration.max_sessions = number()?,
                "max_players" => details.registration.max_players = number()?,
                "sdkv" => details.registration.sdk_version = value.to_owned(),
                "gstate" => details.game_state = GameState::parse(value),
                "health" => details.healthy = ProcessHealth::parse(value) != Some(ProcessHealth::Unhealthy),
                "labels" => details.labels = serde_json::from_str(value).map_err(|_| bad(field, value))?,
                "annotations" => details.annotations = serde_json::from_str(value).map_err(|_| bad(field, value))?,
                "ports" => details.ports = serde_json::from_str(value).map_err(|_| bad(field, value))?,
                "lists" => details.lists = serde_json::from_str(value).map_err(|_| bad(field, value))?,
                "counters" => {
                    let stored: Vec<(String, String, String)> =
                        serde_json::from_str(value).map_err(|_| bad(field, value))?;
                    details.counters = stored
                        .into_iter()
                        .map(|(name, count, capacity)| {
                            Ok((
                                name,
                                count.parse().map_err(|_| bad(field, value))?,
                                capacity.parse().map_err(|_| bad(field, value))?,
                            ))
                        })
                        .collect::<Result<_, StoreError>>()?;
                }
                _ => {}
            }
        }
        Ok(details)
    }
}

/// A process as it describes itself: its registry record and its details.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub record: GameServerRecord,
    pub details: ProcessDetails,
}

pub(crate) fn described(reply: Reply, script: &str) -> Result<Described, StoreError> {
    let details = ProcessDetails::from_fields(&reply.fields)?;
    Ok(Described {
        record: present(reply, script)?,
        details,
    })
}

/// Reads a process with its details; `None` when it is not registered.
pub async fn describe(store: &Store, fleet_id: &str, game_server_id: &str) -> Result<Option<Described>, StoreError> {
    describe_reply(store, fleet_id, game_server_id)
        .await?
        .map(|reply| described(reply, "describe"))
        .transpose()
}

/// The outcome of a process changing its own record.
#[derive(Debug)]
pub enum ProcessUpdated {
    /// As an update of the registry goes.
    Updated(Updated<Box<Described>>),
    /// The counters would be more than a process may keep; nothing changed.
    TooManyCounters,
    /// Likewise the lists.
    TooManyLists,
    /// Likewise the labels.
    TooManyLabels,
    /// Likewise the annotations.
    TooManyAnnotations,
    /// A counter or list change could not be made; nothing changed.
    Refused(ChangeRefused),
}

/// What a process changes of its own record beside its data and utilization.
#[derive(Clone, Debug, Default)]
pub struct RecordChanges {
    /// Replace the labels.
    pub labels: Option<Vec<(String, String)>>,
    /// Replace the annotations.
    pub annotations: Option<Vec<(String, String)>>,
    /// Labels to set by key, after `labels`, made where they are stored.
    pub set_labels: Vec<(String, String)>,
    /// Annotations to set by key, likewise.
    pub set_annotations: Vec<(String, String)>,
    /// Counters to set whole: name, count, capacity (count and capacity 0 remove one).
    pub counters: Vec<(String, i64, i64)>,
    /// Lists to set whole: name, capacity, values (capacity 0 and no values remove one).
    pub lists: Vec<(String, i64, Vec<String>)>,
    /// Changes to counters it has, made where they are stored.
    pub counter_changes: Vec<CounterChange>,
    /// Changes to lists it has, likewise.
    pub list_changes: Vec<ListChange>,
}

/// A change to one counter: its capacity set, then its count, then `diff` added.
#[derive(Clone, Debug, Default)]
pub struct CounterChange {
    pub name: String,
    pub capacity: Option<i64>,
    pub count: Option<i64>,
    pub diff: i64,
}

/// A change to one list: its capacity set, its values replaced, values added, then values removed.
#[derive(Clone, Debug, Default)]
pub struct ListChange {
    pub name: String,
    pub capacity: Option<i64>,
    pub values: Option<Vec<String>>,
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// Why a counter or list change could not be made (nothing changed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeRefused {
    /// The process has no counter of this name.
    NoCounter(String),
    /// It has no list of this name.
    NoList(String),
    /// The counter's count would leave its range, or the list is full: its name.
    OutOfRange(String),
    /// The value to add is in the list already: the list's name and the value.
    ValueExists(String, String),
    /// The value to remove is not in the list: the list's name and the value.
    NoValue(String, String),
}

/// Changes a process's own record (UpdateServer): data and utilization as [`crate::pool::update`] does, the rest
/// as `changes` says, all or nothing.
pub async fn update(store: &Store, update: &Update<'_>, changes: &RecordChanges) -> Result<ProcessUpdated, StoreError> {
    let labels = changes
        .labels
        .as_ref()
        .map(|labels| serde_json::json!(labels).to_string());
    let annotations = changes
        .annotations
        .as_ref()
        .map(|annotations| serde_json::json!(annotations).to_string());
    let counters: Vec<(&str, String, String)> = changes
        .counters
        .iter()
        .map(|(name, count, capacity)| (name.as_str(), count.to_string(), capacity.to_string()))
        .collect();
    let counter_changes: Vec<_> = changes
        .counter_changes
        .iter()
        .map(|c| serde_json::json!([c.name, c.capacity.unwrap_or(-1), c.count.unwrap_or(-1), c.diff]))
        .collect();
    let list_changes: Vec<_> = changes
        .list_changes
        .iter()
        .map(|l| {
            let values = l.values.clone().unwrap_or_default();
            serde_json::json!([
                l.name,
                l.capacity.unwrap_or(-1),
                l.values.is_some(),
                values,
                l.add,
                l.remove
            ])
        })
        .collect();
    let (counters, lists) = (
        serde_json::json!(counters).to_string(),
        serde_json::json!(changes.lists).to_string(),
    );
    let (counter_changes, list_changes) = (
        serde_json::json!(counter_changes).to_string(),
        serde_json::json!(list_changes).to_string(),
    );
    let (set_labels, set_annotations) = (
        serde_json::json!(changes.set_labels).to_string(),
        serde_json::json!(changes.set_annotations).to_string(),
    );
    let metadata = Metadata {
        labels: labels.as_deref(),
        annotations: annotations.as_deref(),
        counters: &counters,
        lists: &lists,
        counter_changes: &counter_changes,
        list_changes: &list_changes,
        set_labels: &set_labels,
        set_annotations: &set_annotations,
    };
    let reply = update_call(store, update, &metadata).await?;
    let detail = || {
        let detail = field(&reply.fields, "detail");
        match detail.split_once('\n') {
            Some((name, value)) => (name.to_owned(), value.to_owned()),
            None => (detail, String::new()),
        }
    };
    let refused = match reply.outcome.as_str() {
        "TOO_MANY_COUNTERS" => return Ok(ProcessUpdated::TooManyCounters),
        "TOO_MANY_LISTS" => return Ok(ProcessUpdated::TooManyLists),
        "TOO_MANY_LABELS" => return Ok(ProcessUpdated::TooManyLabels),
        "TOO_MANY_ANNOTATIONS" => return Ok(ProcessUpdated::TooManyAnnotations),
        "NO_COUNTER" => ChangeRefused::NoCounter(detail().0),
        "NO_LIST" => ChangeRefused::NoList(detail().0),
        "OUT_OF_RANGE" => ChangeRefused::OutOfRange(detail().0),
        "VALUE_EXISTS" => {
            let (name, value) = detail();
            ChangeRefused::ValueExists(name, value)
        }
        "NO_VALUE" => {
            let (name, value) = detail();
            ChangeRefused::NoValue(name, value)
        }
        _ => return updated(reply, |reply| described(reply, "update").map(Box::new)).map(ProcessUpdated::Updated),
    };
    Ok(ProcessUpdated::Refused(refused))
}

pub(crate) fn number<T: std::str::FromStr>(script: &str, text: &str) -> Result<T, StoreError> {
    text.parse()
        .map_err(|_| unexpected(script, format!("{text:?} where a number belongs")))
}

/// What a health replica is told about a process whose stream it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Announcement {
    /// Its desired state moved to this version.
    Version(u64),
    /// Its desired state moved to this one, which the announcement carries whole.
    State(Box<Desired>),
    /// A stream with this attach number resumed its registration: an older stream must end.
    Superseded(u64),
    /// Its record was changed from outside its stream (claimed, allocated, its metadata or counters written).
    Changed,
}

/// Tells the health replica holding a process's stream, through its channel, that the process's desired state
/// moved to `routing.version`, with that state when the script that moved it knew it whole, and the trace context
/// of what moved it (W3C traceparent) for the push to continue. Best effort: a lost announcement is carried by the
/// process's next heartbeat ack.
pub async fn announce(
    store: &Store,
    routing: &Routing,
    fleet_id: &str,
    game_server_id: &str,
    traceparent: Option<&str>,
) {
    publish(
        store,
        &routing.replica,
        fleet_id,
        game_server_id,
        &announced_state_move(routing, traceparent),
    )
    .await;
}

/// What [`announce`] sends after the process's ids (see [`Announced`]).
fn announced_state_move(routing: &Routing, traceparent: Option<&str>) -> String {
    let mut what = routing.version.to_string();
    if routing.desired.is_some() || traceparent.is_some() {
        what = format!("{what}\n{}", routing.desired.as_deref().unwrap_or_default());
    }
    if let Some(traceparent) = traceparent {
        what = format!("{what}\n{traceparent}");
    }
    what
}

/// Tells `replica` that a stream with attach number `attach` resumed the registration of a process whose stream it
/// holds. Best effort: a superseded stream learns it from its next heartbeat.
pub async fn supersede(store: &Store, replica: &str, fleet_id: &str, game_server_id: &str, attach: u64) {
    publish(
        store,
        replica,
        fleet_id,
        game_server_id,
        &format!("superseded {attach}"),
    )
    .await;
}

/// Tells `replica`, which holds the stream of a process, that its record was changed from outside the stream (a
/// claim or an allocation), so that the process hears of it at once; in the background, so that the caller who
/// changed it is answered without waiting. Best effort: a process that missed it reads its record again when its
/// stream resumes.
pub fn announce_change(store: &Store, replica: String, fleet_id: &str, game_server_id: &str) {
    if replica.is_empty() {
        return;
    }
    let (store, fleet_id, game_server_id) = (store.clone(), fleet_id.to_owned(), game_server_id.to_owned());
    tokio::spawn(async move { publish(&store, &replica, &fleet_id, &game_server_id, "changed").await });
}

async fn publish(store: &Store, replica: &str, fleet_id: &str, game_server_id: &str, what: &str) {
    if replica.is_empty() {
        return;
    }
    let payload = format!("{fleet_id}\n{game_server_id}\n{what}");
    if let Err(err) = store.publish(&push_channel(replica), &payload).await {
        tracing::debug!(error = %err, "announcement lost; the next heartbeat carries it");
    }
}

/// An announcement as [`announce`], [`supersede`] and [`announce_change`] send it:
/// `fleet id \n game-server id \n what [\n desired state [\n traceparent]]`, where what is a version, `superseded
/// <attach>` or `changed`. The desired state is JSON, which holds no line break; one that does not read is
/// announced as its version alone, which the replica reads.
#[derive(Debug, PartialEq, Eq)]
pub struct Announced<'a> {
    pub fleet_id: &'a str,
    pub game_server_id: &'a str,
    pub what: Announcement,
    /// The trace context of what moved the desired state, for the push to continue.
    pub traceparent: Option<&'a str>,
}

/// Reads an announcement (see [`Announced`]); `None` when it does not read.
pub fn parse_announcement(payload: &str) -> Option<Announced<'_>> {
    let mut parts = payload.splitn(4, '\n');
    let (fleet_id, game_server_id, what) = (parts.next()?, parts.next()?, parts.next()?);
    let (desired, traceparent) = match parts.next() {
        None => (None, None),
        Some(rest) => match rest.split_once('\n') {
            Some((desired, traceparent)) => (Some(desired), Some(traceparent)),
            None => (Some(rest), None),
        },
    };
    let what = if what == "changed" {
        Announcement::Changed
    } else if let Some(attach) = what.strip_prefix("superseded ") {
        Announcement::Superseded(attach.parse().ok()?)
    } else {
        match desired.and_then(announced_state) {
            Some(desired) => Announcement::State(Box::new(desired)),
            None => Announcement::Version(what.parse().ok()?),
        }
    };
    Some(Announced {
        fleet_id,
        game_server_id,
        what,
        traceparent,
    })
}

/// Where a process's stream is held and how far its desired state has moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routing {
    /// The health replica holding its stream.
    pub replica: String,
    /// Version of its desired state.
    pub version: u64,
    /// That desired state whole, as the script that moved it knew it (`desired_text` in `processes/lib.lua`; a
    /// create's, built from its reply by `hosting_only`), for the announcement to carry; `None` when the replica
    /// must read it.
    pub desired: Option<String>,
}

impl Routing {
    /// The desired state it carries, when it carries one that reads.
    pub fn desired_state(&self) -> Option<Desired> {
        self.desired.as_deref().and_then(announced_state)
    }
}

/// The desired state of a process whose one game session was just created, with `players` (id, data) reserved in
/// it at `now_ms`: what `desired_text` in `processes/lib.lua` writes, built from the create's reply (`session`, the
/// record's fields by pair) rather than by Redis encoding the record a second time.
pub(crate) fn hosting_only(version: u64, session: &[String], players: &[(&str, &str)], now_ms: u64) -> String {
    let mut hosted = vec![serde_json::Value::from(session)];
    for (n, (player, data)) in (1u32..).zip(players) {
        let reserved = PlayerSessionStatus::Reserved.as_str();
        hosted.push(serde_json::json!([n, player, reserved, data, now_ms, false, false]));
    }
    serde_json::json!([version, ProcessState::Active.as_str(), "", "0", "0", hosted]).to_string()
}

/// Decodes `{outcome, now_ms, replica, version}`.
pub(crate) fn routed(script: &str, raw: Vec<String>) -> Result<(String, Routing), StoreError> {
    let [outcome, _now, replica, version] =
        <[String; 4]>::try_from(raw).map_err(|raw| unexpected(script, raw.len()))?;
    Ok((
        outcome,
        Routing {
            replica,
            version: number(script, &version)?,
            desired: None,
        },
    ))
}

/// The processes a script told something (to terminate, that they are lost): `{id, replica, version}` each, for
/// their health replicas to be told in turn.
pub(crate) fn processes_told(script: &str, told: &[Value]) -> Result<Vec<(String, Routing)>, StoreError> {
    told.iter()
        .map(|process| {
            let [id, replica, version] = redis::from_redis_value_ref::<[String; 3]>(process)
                .map_err(|_| unexpected(script, "a malformed process"))?;
            let version = version.parse().map_err(|_| unexpected(script, &version))?;
            Ok((
                id,
                Routing {
                    replica,
                    version,
                    desired: None,
                },
            ))
        })
        .collect()
}

/// What a process says of itself as it registers: its registration (defaults filled in) and what it gives beside.
#[derive(Clone, Copy, Debug)]
pub struct Introduction<'a> {
    pub registration: &'a Registration,
    /// Its game-server data.
    pub data: &'a str,
    /// Its labels: key, value.
    pub labels: &'a [(&'a str, &'a str)],
    /// Its ports: name, number, protocol (the contract's value).
    pub ports: &'a [(&'a str, u32, i32)],
}

impl Introduction<'_> {
    /// As the process's hash keeps it (`processes/lib.lua`).
    fn fields(&self) -> [(&'static str, String); 11] {
        let registration = self.registration;
        // Tuples of strings and numbers always encode.
        let json = |value: serde_json::Result<String>| value.unwrap_or_else(|_| "[]".to_owned());
        [
            ("conn", registration.connection_info()),
            ("data", self.data.to_owned()),
            ("loc", registration.location.clone()),
            ("ip", registration.ip_address.clone()),
            ("dns", registration.dns_name.clone()),
            ("port", registration.port.to_string()),
            ("max_sess", registration.max_sessions.to_string()),
            ("max_players", registration.max_players.to_string()),
            ("sdkv", registration.sdk_version.clone()),
            ("labels", json(serde_json::to_string(self.labels))),
            ("ports", json(serde_json::to_string(self.ports))),
        ]
    }
}

/// A process opening its stream.
#[derive(Clone, Debug)]
pub struct Attach<'a> {
    /// Fleet it joins.
    pub fleet_id: &'a str,
    /// Its id in the fleet.
    pub game_server_id: &'a str,
    /// Instance it runs on.
    pub instance_id: &'a str,
    /// The id this registration gets when it is new.
    pub registration_id: &'a str,
    /// The registration to resume, after a broken stream.
    pub resume: Option<&'a str>,
    /// The health replica holding the stream.
    pub replica: &'a str,
    /// The process's number for this try (RegisterProcess.attempt); 0 when it does not count them.
    pub attempt: u32,
    /// What it says of itself.
    pub introduction: Introduction<'a>,
}

/// A stream that registered its process or resumed its registration: what the process is told first.
#[derive(Debug)]
pub struct Joined {
    /// The fleet's settings.
    pub settings: FleetSettings,
    /// The stream's attach number.
    pub attach: u64,
    /// The process's record (its state).
    pub record: GameServerRecord,
    /// What the process should be doing as the stream opened; `None` when it went away meanwhile.
    pub desired: Option<Desired>,
}

/// The outcome of opening a stream.
#[derive(Debug)]
pub enum Attached {
    /// A new registration.
    Registered(Box<Joined>),
    /// The registration resumed, and the replica that held the stream it supersedes.
    Resumed(Box<Joined>, String),
    /// The registration took a higher attempt already: this try came too late, and changed nothing.
    Stale,
    /// The id has a live registration.
    Exists,
    /// The registration to resume was declared lost.
    Lost,
    /// No such registration to resume.
    Unknown,
    /// The fleet does not exist, or has no such location: why, for the process.
    NotFound(String),
    /// The fleet, or the location, is being deleted or was: why, for the process.
    Deleting(String),
}

/// Registers or resumes a process.
pub async fn attach(store: &Store, attach: &Attach<'_>, timings: &Timings) -> Result<Attached, StoreError> {
    let keys = FleetKeys::new(attach.fleet_id);
    let mut call = scripts().attach_process.for_fleet(&keys);
    call.arg(attach.game_server_id)
        .arg(attach.instance_id)
        .arg(attach.registration_id)
        .arg(attach.resume.unwrap_or(""))
        .arg(attach.replica)
        .arg(timings.initial_delay_ms)
        .arg(attach.attempt);
    for (field, value) in attach.introduction.fields() {
        call.arg(field).arg(value);
    }
    let script = fleets::listed_beside(store, attach.fleet_id, store.invoke(&call));
    // A new registration's desired state is the one the script wrote: version 0, INITIALIZING, hosting nothing. A
    // resume leaves the process's desired state as it was, so it is read beside the script, not after it: one round
    // trip per attach either way, which is what a storm of re-attaches waits on.
    let (reply, desired) = match attach.resume {
        Some(_) => {
            let (reply, desired) = tokio::join!(script, desired_state(store, attach.fleet_id, attach.game_server_id));
            (reply?, desired)
        }
        None => (script.await?, Ok(Some(Desired::registered()))),
    };
    let reply = decode_reply(attach.fleet_id, reply)?;
    let (number, superseded) = (field(&reply.fields, "attach"), field(&reply.fields, "superseded"));
    let joined = |reply: Reply, desired: Result<Option<Desired>, StoreError>| -> Result<Box<Joined>, StoreError> {
        let text = field(&reply.fields, "settings");
        Ok(Box::new(Joined {
            settings: FleetSettings::decode(&text)
                .ok_or_else(|| unexpected("attach", format!("fleet settings {text:?}")))?,
            attach: self::number("attach", &number)?,
            record: present(reply, "attach")?,
            desired: desired?,
        }))
    };
    match reply.outcome.as_str() {
        "REGISTERED" => Ok(Attached::Registered(joined(reply, desired)?)),
        "RESUMED" => Ok(Attached::Resumed(joined(reply, desired)?, superseded)),
        "STALE" => Ok(Attached::Stale),
        "EXISTS" => Ok(Attached::Exists),
        "LOST" => Ok(Attached::Lost),
        "UNKNOWN" => Ok(Attached::Unknown),
        "NO_FLEET" | "NO_LOCATION" => Ok(Attached::NotFound(field(&reply.fields, "detail"))),
        "DELETING" => Ok(Attached::Deleting(field(&reply.fields, "detail"))),
        other => Err(unexpected("attach", other)),
    }
}

/// One live registration of a process.
#[derive(Clone, Copy, Debug)]
pub struct ProcessRef<'a> {
    /// Its fleet.
    pub fleet_id: &'a str,
    /// Its id.
    pub game_server_id: &'a str,
    /// Its registration.
    pub registration_id: &'a str,
}

/// Records that a process's stream closed without ProcessEnding (unless a newer stream took over, or the process
/// is gone).
pub async fn detach(store: &Store, process: &ProcessRef<'_>, attach: u64) -> Result<(), StoreError> {
    let keys = FleetKeys::new(process.fleet_id);
    let mut call = scripts().detach_process.prepare();
    call.key(keys.game_server(process.game_server_id))
        .arg(process.registration_id)
        .arg(attach);
    let _unlinked: i64 = store.invoke(&call).await?;
    Ok(())
}

/// Where players connect, as a process gives it late: address, DNS name, port, and the connection info
/// FleetIQ-style callers see.
#[derive(Clone, Debug)]
pub struct LateEndpoint<'a> {
    pub ip_address: &'a str,
    pub dns_name: &'a str,
    pub port: u32,
    pub connection_info: &'a str,
}

/// Marks a process ready, moving its endpoint first when it gives one; `None` when its registration is lost.
pub async fn ready(
    store: &Store,
    process: &ProcessRef<'_>,
    endpoint: Option<&LateEndpoint<'_>>,
) -> Result<Option<Routing>, StoreError> {
    let keys = FleetKeys::new(process.fleet_id);
    let mut call = scripts().process_ready.for_fleet(&keys);
    call.arg(process.game_server_id).arg(process.registration_id);
    match endpoint {
        Some(endpoint) => call
            .arg("1")
            .arg(endpoint.ip_address)
            .arg(endpoint.dns_name)
            .arg(endpoint.port)
            .arg(endpoint.connection_info),
        None => call.arg("0").arg("").arg("").arg(0).arg(""),
    };
    match routed("ready", store.invoke(&call).await?)? {
        (outcome, routing) if outcome == "READY" => Ok(Some(routing)),
        (outcome, _) if outcome == "LOST" => Ok(None),
        (outcome, _) => Err(unexpected("ready", outcome)),
    }
}

/// What a reservation came to.
#[derive(Debug)]
pub enum Reservation {
    /// Reserved until the time its record shows, or, for a duration of 0, no longer reserved.
    Done(Box<Described>),
    /// It may not be reserved: it is not ready, hosts a game session, or is claimed or UTILIZED.
    Busy,
    /// Its registration is gone.
    Lost,
}

/// Holds a process out of the pool, and so out of every placement, claim and scale-in, for `duration_ms` (Agones
/// Reserve); 0 ends a reservation, returning it to the pool.
pub async fn reserve(store: &Store, process: &ProcessRef<'_>, duration_ms: u64) -> Result<Reservation, StoreError> {
    const SCRIPT: &str = "reserve";
    let keys = FleetKeys::new(process.fleet_id);
    let mut call = scripts().reserve_process.for_fleet(&keys);
    call.arg(process.game_server_id)
        .arg(process.registration_id)
        .arg(duration_ms);
    let reply = decode_reply(process.fleet_id, store.invoke(&call).await?)?;
    match reply.outcome.as_str() {
        "HELD" => Ok(Reservation::Done(Box::new(described(reply, SCRIPT)?))),
        "BUSY" => Ok(Reservation::Busy),
        "LOST" => Ok(Reservation::Lost),
        other => Err(unexpected(SCRIPT, other)),
    }
}

/// One heartbeat, as the batch records it. Ids are shared, not copied: a replica builds one per heartbeat.
#[derive(Clone, Debug)]
pub struct Heartbeat {
    /// The process.
    pub game_server_id: Arc<str>,
    /// Its registration.
    pub registration_id: Arc<str>,
    /// The attach number of the stream it came over.
    pub attach: u64,
    /// Whether it reported itself healthy.
    pub healthy: bool,
    /// The game state it reported, by its contract name.
    pub game_state: &'static str,
    /// How many players it has connected.
    pub players: u32,
}

/// A fleet's heartbeat settings, as its processes are told them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeartbeatSettings {
    /// How often a process sends a heartbeat, ms.
    pub interval_ms: u32,
    /// Heartbeat periods a process may be silent or UNHEALTHY.
    pub unhealthy_after: u32,
}

impl HeartbeatSettings {
    /// The heartbeat settings among a fleet's.
    pub fn of(settings: &FleetSettings) -> HeartbeatSettings {
        HeartbeatSettings {
            interval_ms: u32::try_from(settings.heartbeat_ms).unwrap_or(u32::MAX),
            unhealthy_after: settings.unhealthy_after,
        }
    }
}

/// A termination asked of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Termination {
    /// Why: the reason it was asked with, or how it was lost; `None` for a reason this release does not know
    /// (written by a newer one during an upgrade), which does not keep the process from being told to end.
    pub reason: Option<berth_domain::stored::Termination>,
    /// When it must have ended, ms since the epoch.
    pub deadline_ms: i64,
    /// Whether it was declared lost (end at once) rather than asked to wind down.
    pub force: bool,
}

/// What a process should be doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// Version of this state.
    pub version: u64,
    /// Its process state.
    pub process_state: ProcessState,
    /// The termination asked of it, if any.
    pub termination: Option<Termination>,
    /// Its open game sessions.
    pub sessions: Vec<Hosted>,
}

impl Desired {
    /// The desired state of a process the attach script has just registered (`processes/attach.lua` writes it):
    /// version 0, INITIALIZING, told nothing.
    fn registered() -> Desired {
        Desired {
            version: 0,
            process_state: ProcessState::Initializing,
            termination: None,
            sessions: Vec::new(),
        }
    }
}

/// A game session a process hosts, with the player sessions reserved in it before it was activated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hosted {
    pub session: GameSessionRecord,
    pub players: Vec<PlayerSessionRecord>,
}

fn text(value: &Value) -> Option<String> {
    redis::from_redis_value_ref::<String>(value).ok()
}

/// Reads a process's desired state; `None` when the process is unknown.
pub async fn desired_state(store: &Store, fleet_id: &str, game_server_id: &str) -> Result<Option<Desired>, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().desired_state.prepare();
    call.key(keys.game_server(game_server_id));
    let raw: Vec<Value> = store.invoke(&call).await?;
    decode_desired(&raw)
}

/// A desired state an announcement carries: the reply of `desired_state` as JSON (`desired_text` in
/// `processes/lib.lua`), whose strings and numbers read as the reply's strings and `false` as its null.
fn announced_state(text: &str) -> Option<Desired> {
    let AnnouncedValue(raw) = serde_json::from_str(text).ok()?;
    let Value::Array(raw) = raw else { return None };
    decode_desired(&raw).ok().flatten()
}

/// A value of an announced desired state, read straight into the reply's form (a string or number as a bulk string,
/// `false` as null, a list as an array) rather than through a JSON tree: an announcement comes with every session a
/// placement makes.
struct AnnouncedValue(Value);

impl<'de> serde::Deserialize<'de> for AnnouncedValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = AnnouncedValue;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a string, a number, false or a list of them")
            }
            fn visit_str<E>(self, text: &str) -> Result<AnnouncedValue, E> {
                Ok(AnnouncedValue(Value::BulkString(text.as_bytes().to_vec())))
            }
            fn visit_string<E>(self, text: String) -> Result<AnnouncedValue, E> {
                Ok(AnnouncedValue(Value::BulkString(text.into_bytes())))
            }
            fn visit_u64<E>(self, n: u64) -> Result<AnnouncedValue, E> {
                Ok(AnnouncedValue(Value::BulkString(n.to_string().into_bytes())))
            }
            fn visit_i64<E>(self, n: i64) -> Result<AnnouncedValue, E> {
                Ok(AnnouncedValue(Value::BulkString(n.to_string().into_bytes())))
            }
            fn visit_f64<E>(self, n: f64) -> Result<AnnouncedValue, E> {
                Ok(AnnouncedValue(Value::BulkString(n.to_string().into_bytes())))
            }
            fn visit_bool<E: serde::de::Error>(self, flag: bool) -> Result<AnnouncedValue, E> {
                if flag {
                    return Err(E::invalid_value(serde::de::Unexpected::Bool(true), &self));
                }
                Ok(AnnouncedValue(Value::Nil))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<AnnouncedValue, A::Error> {
                let mut out = Vec::with_capacity(items.size_hint().unwrap_or(0));
                while let Some(AnnouncedValue(item)) = items.next_element()? {
                    out.push(item);
                }
                Ok(AnnouncedValue(Value::Array(out)))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// Decodes `desired_state`'s reply: {version, pstate, term_reason, term_by_ms, term_force, {{session fields},
/// {player session values}...}...} (each player session's values by position, `codec::stored_player`), version -1
/// for an unknown process.
fn decode_desired(raw: &[Value]) -> Result<Option<Desired>, StoreError> {
    let bad = || unexpected("desired_state", "a malformed reply");
    let version: i64 = raw
        .first()
        .and_then(|v| redis::from_redis_value_ref(v).ok())
        .ok_or_else(bad)?;
    let Ok(version) = u64::try_from(version) else {
        return Ok(None);
    };
    let [_, state, reason, deadline, force, sessions @ ..] = raw else {
        return Err(bad());
    };
    let reason = text(reason).ok_or_else(bad)?;
    let termination = (!reason.is_empty())
        .then(|| -> Result<Termination, StoreError> {
            Ok(Termination {
                reason: berth_domain::stored::Termination::parse(&reason),
                deadline_ms: number("desired_state", &text(deadline).ok_or_else(bad)?)?,
                force: text(force).as_deref() == Some("1"),
            })
        })
        .transpose()?;
    let sessions = sessions
        .iter()
        .map(|hosted| {
            let Value::Array(parts) = hosted else {
                return Err(bad());
            };
            let [session, players @ ..] = parts.as_slice() else {
                return Err(bad());
            };
            let session = game_session(&strings("desired_state", session)?)?.ok_or_else(bad)?;
            let endpoint = [
                session.location.clone(),
                session.ip_address.clone(),
                session.dns_name.clone(),
                session.port.to_string(),
            ];
            let players = players
                .iter()
                .map(|values| {
                    let values = stored_player_values("desired_state", values)?;
                    Ok(stored_player(
                        &session.fleet_id,
                        &session.game_session_id,
                        &values,
                        &endpoint,
                    ))
                })
                .collect::<Result<_, StoreError>>()?;
            Ok(Hosted { session, players })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(Some(Desired {
        version,
        process_state: ProcessState::parse(&text(state).ok_or_else(bad)?)
            .ok_or_else(|| unexpected("desired_state", "an unknown process state"))?,
        termination,
        sessions,
    }))
}

/// Counts of one fleet's live SDK processes, for metrics: (alive, reporting UNHEALTHY).
pub async fn health_counts(store: &Store, fleet_id: &str) -> Result<(u64, u64), StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut pipe = redis::pipe();
    pipe.zcard(keys.heartbeat_deadlines()).scard(keys.unhealthy());
    store.query_pipeline(&pipe).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_reads_as_it_was_sent_and_a_state_that_does_not_read_as_its_version() {
        let parsed = |payload: &'static str| parse_announcement(payload).map(|announced| announced.what);
        assert_eq!(parsed("arena\ngs-1\n7"), Some(Announcement::Version(7)));
        assert_eq!(parsed("arena\ngs-1\nsuperseded 3"), Some(Announcement::Superseded(3)));
        assert_eq!(parsed("arena\ngs-1\nchanged"), Some(Announcement::Changed));
        let idle = Desired {
            version: 8,
            process_state: ProcessState::StandingBy,
            termination: None,
            sessions: Vec::new(),
        };
        assert_eq!(
            parse_announcement("arena\ngs-1\n8\n[8,\"STANDING_BY\",\"\",\"0\",\"0\"]"),
            Some(Announced {
                fleet_id: "arena",
                game_server_id: "gs-1",
                what: Announcement::State(Box::new(idle)),
                traceparent: None,
            })
        );
        assert_eq!(
            parsed("arena\ngs-1\n8\n[8,\"STANDING_BY\""),
            Some(Announcement::Version(8))
        );
        assert_eq!(parsed("arena\ngs-1\n8\n{}"), Some(Announcement::Version(8)));
        assert_eq!(parsed("arena\ngs-1\nlater"), None);
    }

    #[test]
    fn an_announced_state_reads_as_the_reply_it_stands_for() {
        let read = |json: &str| {
            serde_json::from_str::<AnnouncedValue>(json)
                .ok()
                .map(|AnnouncedValue(value)| value)
        };
        let bulk = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        assert_eq!(
            read(r#"[3,"RESERVED",false,[1764000000123,""]]"#),
            Some(Value::Array(vec![
                bulk("3"),
                bulk("RESERVED"),
                Value::Nil,
                Value::Array(vec![bulk("1764000000123"), bulk("")]),
            ]))
        );
        assert_eq!(read("[true]"), None, "no reply holds a true");
        assert_eq!(read("[null]"), None);
        assert_eq!(read(r#"{"a":1}"#), None);
    }

    #[test]
    fn an_announcement_carries_the_trace_of_what_moved_the_state_with_or_without_the_state() {
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let idle = "[8,\"STANDING_BY\",\"\",\"0\",\"0\"]";
        for (desired, traced) in [
            (None, None),
            (None, Some(traceparent)),
            (Some(idle), None),
            (Some(idle), Some(traceparent)),
        ] {
            let routing = Routing {
                replica: "r".into(),
                version: 8,
                desired: desired.map(str::to_owned),
            };
            let payload = format!("arena\ngs-1\n{}", announced_state_move(&routing, traced));
            let announced = parse_announcement(&payload).expect("it reads");
            assert_eq!(announced.traceparent, traced, "{payload:?}");
            assert_eq!(
                matches!(announced.what, Announcement::State(_)),
                desired.is_some(),
                "{payload:?}"
            );
            assert_eq!(announced.game_server_id, "gs-1");
        }
    }
}
