//! Instances: what the reconciler of a fleet location runs through a provisioner, recorded before each launch so
//! that a reconciler that dies mid-way leaves nothing behind unknown, and the lease that lets one reconciler act for
//! a location at a time. Every change is made under a lease and refused (`Acted::Fenced`) once that lease is no
//! longer the live one: a holder that stalled and lost it changes nothing. It stops and removes instances whose
//! processes may host sessions, so it sits above the endings of processes, through which it ends them.

use berth_domain::stored::{FleetEventCode, InstanceState, ProcessState, TerminationReason};
use redis::Value;

use crate::codec::{outcome_detail, unexpected};
use crate::keys::FleetKeys;
use crate::processes::{Routing, processes_told};
use crate::scripts::{Area, FunctionCall, LuaScript, scripts};
use crate::{Store, StoreError};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "instances",
    helpers: &[include_str!("instances/lib.lua")],
    functions: &[
        ("take_lease", include_str!("instances/lease.lua"), false),
        ("read_instances", include_str!("instances/read.lua"), true),
        ("record_launch", include_str!("instances/launch.lua"), false),
        ("record_launched", include_str!("instances/launched.lua"), false),
        ("drain_instance", include_str!("instances/drain.lua"), false),
        ("stop_instance", include_str!("instances/stop.lua"), false),
        ("remove_instance", include_str!("instances/remove.lua"), false),
        ("kill_instance", include_str!("instances/kill.lua"), false),
        ("instance_stop_failed", include_str!("instances/stop_failed.lua"), false),
        ("location_unhealthy", include_str!("instances/unhealthy.lua"), false),
    ],
};

/// The outcome of asking for a location's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lease {
    /// Held by the caller: the lease to act under and renew.
    Held(String),
    /// Another holder's live lease.
    Taken(String),
    /// The fleet has no such location (any more).
    NoLocation,
}

/// Takes the lease of `location`'s reconciler for `ttl_ms` (at least 1), or renews `held` while it is still the live
/// one. `holder` must be unique to the caller (a replica id).
pub async fn take_lease(
    store: &Store,
    fleet_id: &str,
    location: &str,
    holder: &str,
    ttl_ms: u64,
    held: Option<&str>,
) -> Result<Lease, StoreError> {
    let mut call = scripts().take_lease.for_fleet(&FleetKeys::new(fleet_id));
    call.arg(location).arg(holder).arg(ttl_ms).arg(held.unwrap_or(""));
    let [outcome, lease] = store.invoke::<[String; 2]>(&call).await?;
    match outcome.as_str() {
        "HELD" => Ok(Lease::Held(lease)),
        "HELD_ELSEWHERE" => Ok(Lease::Taken(lease)),
        "NO_LOCATION" | "GONE" => Ok(Lease::NoLocation),
        other => Err(unexpected("take_lease", other)),
    }
}

/// A reconciler's standing: the location it acts for and the lease it acts under.
#[derive(Clone, Copy, Debug)]
pub struct Leased<'a> {
    pub fleet_id: &'a str,
    pub location: &'a str,
    pub lease: &'a str,
}

impl Leased<'_> {
    pub(crate) fn call<'s>(&self, script: &'s LuaScript) -> FunctionCall<'s> {
        let mut call = script.for_fleet(&FleetKeys::new(self.fleet_id));
        call.arg(self.location).arg(self.lease);
        call
    }
}

/// Gives the lease up, so that another replica takes the location at once.
pub async fn release_lease(store: &Store, leased: &Leased<'_>) -> Result<(), StoreError> {
    let mut call = scripts().take_lease.for_fleet(&FleetKeys::new(leased.fleet_id));
    call.arg(leased.location).arg("").arg(0).arg(leased.lease);
    let _: [String; 2] = store.invoke(&call).await?;
    Ok(())
}

/// What came of a change made under a lease.
#[derive(Debug, PartialEq, Eq)]
pub enum Acted<T> {
    Done(T),
    /// The lease is no longer the live one: nothing was changed.
    Fenced,
    /// The instance is not recorded (any more).
    Gone,
}

/// One server process of an instance, as the registry has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRecord {
    pub id: String,
    /// When it first registered, ms; `None` when it never did.
    pub registered_ms: Option<i64>,
    /// Its process's state; `None` when it is not registered (not yet, or ended by ProcessEnding).
    pub process: Option<ProcessState>,
    /// Game sessions it hosts.
    pub sessions: u32,
    /// Claimed or UTILIZED.
    pub held: bool,
    /// One of its game sessions has FULL_PROTECTION.
    pub protected: bool,
}

/// One instance of a location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceRecord {
    pub id: String,
    pub instance_type: String,
    pub state: InstanceState,
    /// When its launch was recorded, ms.
    pub launch_ms: i64,
    /// While TERMINATING: when it is killed if it still runs, ms.
    pub kill_ms: Option<i64>,
    /// What the provisioner answered to its launch; empty before.
    pub handle: String,
    pub servers: Vec<ServerRecord>,
}

/// A location's instances and deployment times, as its reconciler reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationInstances {
    /// Redis' clock, ms.
    pub now_ms: i64,
    /// The first launch since the location last became DEPLOYING, ms.
    pub first_launch_ms: Option<i64>,
    /// When a server last registered there while DEPLOYING, ms.
    pub registered_ms: Option<i64>,
    pub instances: Vec<InstanceRecord>,
}

type RawServer = (String, String, String, u32, u8, u8);
type RawInstance = (String, String, String, String, String, String, Vec<RawServer>);

/// Reads a location's instances with what their servers do.
pub async fn read_instances(store: &Store, fleet_id: &str, location: &str) -> Result<LocationInstances, StoreError> {
    const SCRIPT: &str = "read_instances";
    let mut call = scripts().read_instances.for_fleet(&FleetKeys::new(fleet_id));
    call.arg(location);
    let (now, first, seen, raw): (String, String, String, Vec<RawInstance>) = store.invoke(&call).await?;
    let number = |text: &str| text.parse::<i64>().map_err(|_| unexpected(SCRIPT, text));
    let optional = |text: &str| match text {
        "" => Ok(None),
        text => number(text).map(Some),
    };
    let server = |(id, registered, process, sessions, held, protected): RawServer| {
        Ok(ServerRecord {
            registered_ms: optional(&registered)?,
            process: match process.as_str() {
                "" => None,
                name => Some(ProcessState::parse(name).ok_or_else(|| unexpected(SCRIPT, name))?),
            },
            id,
            sessions,
            held: held == 1,
            protected: protected == 1,
        })
    };
    let instance = |(id, instance_type, state, launch, kill, handle, servers): RawInstance| {
        Ok(InstanceRecord {
            state: InstanceState::parse(&state).ok_or_else(|| unexpected(SCRIPT, &state))?,
            launch_ms: number(&launch)?,
            kill_ms: optional(&kill)?,
            servers: servers.into_iter().map(server).collect::<Result<_, StoreError>>()?,
            id,
            instance_type,
            handle,
        })
    };
    Ok(LocationInstances {
        now_ms: number(&now)?,
        first_launch_ms: optional(&first)?,
        registered_ms: optional(&seen)?,
        instances: raw.into_iter().map(instance).collect::<Result<_, StoreError>>()?,
    })
}

/// Decodes `{outcome, now_ms, ...}` of a change under a lease: `done` is the outcome of success.
async fn act(store: &Store, script: &str, call: &FunctionCall<'_>, done: &str) -> Result<Acted<()>, StoreError> {
    let raw: Vec<String> = store.invoke(call).await?;
    match raw.first().map(String::as_str) {
        Some(outcome) if outcome == done => Ok(Acted::Done(())),
        Some("FENCED") => Ok(Acted::Fenced),
        Some("GONE") => Ok(Acted::Gone),
        other => Err(unexpected(script, format!("{other:?}"))),
    }
}

/// Records instance `instance_id` of `instance_type` LAUNCHING, with the server ids its processes will have, before
/// the provisioner is asked to launch it.
pub async fn record_launch(
    store: &Store,
    leased: &Leased<'_>,
    instance_id: &str,
    instance_type: &str,
    server_ids: &[String],
) -> Result<Acted<()>, StoreError> {
    let mut call = leased.call(&scripts().record_launch);
    call.arg(instance_id).arg(instance_type).arg(server_ids.join(" "));
    act(store, "record_launch", &call, "RECORDED").await
}

/// Records what the provisioner answered to a launch: the instance's handle, or why the launch failed (the instance
/// is then forgotten).
pub async fn record_launched(
    store: &Store,
    leased: &Leased<'_>,
    instance_id: &str,
    launched: Result<&str, &str>,
) -> Result<Acted<()>, StoreError> {
    let mut call = leased.call(&scripts().record_launched);
    let (handle, failure) = match launched {
        Ok(handle) => (handle, ""),
        Err(failure) => ("", failure),
    };
    call.arg(instance_id).arg(handle).arg(failure);
    let done = if launched.is_ok() { "LAUNCHED" } else { "LAUNCH_FAILED" };
    act(store, "record_launched", &call, done).await
}

/// Drains an instance: its servers are claimed and placed on last.
pub async fn drain_instance(store: &Store, leased: &Leased<'_>, instance_id: &str) -> Result<Acted<()>, StoreError> {
    let mut call = leased.call(&scripts().drain_instance);
    call.arg(instance_id);
    act(store, "drain_instance", &call, "DRAINING").await
}

/// How an instance is stopped.
#[derive(Clone, Copy, Debug)]
pub struct Stop<'a> {
    /// What its live processes are told (ProcessEnding due within `grace_ms`); `None` to tell them nothing.
    pub termination: Option<TerminationReason>,
    pub grace_ms: u64,
    /// After how long it is killed if it still runs.
    pub kill_after_ms: u64,
    /// The event of each of its processes that never registered, with its message.
    pub unregistered: Option<(FleetEventCode, &'a str)>,
}

/// Stops an instance (TERMINATING); answers the processes told to end, for their health replicas to be told.
pub async fn stop_instance(
    store: &Store,
    leased: &Leased<'_>,
    instance_id: &str,
    stop: &Stop<'_>,
) -> Result<Acted<Vec<(String, Routing)>>, StoreError> {
    let mut call = leased.call(&scripts().stop_instance);
    let (code, message) = stop
        .unregistered
        .map_or(("", ""), |(code, message)| (code.as_str(), message));
    call.arg(instance_id)
        .arg(stop.termination.map_or("", TerminationReason::as_str))
        .arg(stop.grace_ms)
        .arg(stop.kill_after_ms)
        .arg(code)
        .arg(message);
    told(store, "stop_instance", &call, "STOPPING").await
}

/// An instance nothing of which runs any more, as the reconciler forgets it.
#[derive(Clone, Copy, Debug)]
pub struct Removal<'a> {
    pub instance_id: &'a str,
    /// It was being stopped.
    pub asked: bool,
    /// How long the records of its processes declared lost stay readable, ms.
    pub retention_ms: u64,
    /// How its processes exited (`exit status: 3`), as the provisioner saw it; empty when it cannot tell.
    pub exited: &'a str,
}

/// Forgets an instance nothing of which runs; its processes still registered are declared lost. Answers the
/// processes declared lost, for their replicas.
pub async fn remove_instance(
    store: &Store,
    leased: &Leased<'_>,
    removal: &Removal<'_>,
) -> Result<Acted<Vec<(String, Routing)>>, StoreError> {
    let mut call = leased.call(&scripts().remove_instance);
    call.arg(removal.instance_id)
        .arg(if removal.asked { "1" } else { "0" })
        .arg(removal.retention_ms)
        .arg(removal.exited);
    told(store, "remove_instance", &call, "REMOVED").await
}

/// Records that a stopping instance is being killed: its processes that ended by themselves yet did not exit get
/// their SERVER_PROCESS_FORCE_TERMINATED event (`message`), once.
pub async fn kill_instance(
    store: &Store,
    leased: &Leased<'_>,
    instance_id: &str,
    message: &str,
) -> Result<Acted<()>, StoreError> {
    let mut call = leased.call(&scripts().kill_instance);
    call.arg(instance_id).arg(message);
    act(store, "kill_instance", &call, "KILLED").await
}

/// What the provisioner could not do to an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopRequest {
    /// Ask its processes to exit.
    Stop,
    /// Kill them, at the instance's kill time.
    Kill,
}

impl StopRequest {
    /// The request's name: `stop` or `kill`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopRequest::Stop => "stop",
            StopRequest::Kill => "kill",
        }
    }
}

/// Records that the provisioner could not carry out `request` for an instance: an INSTANCE_STOP_FAILED event with
/// `message`, the first time only for each instance and request (`Done(false)` after).
pub async fn instance_stop_failed(
    store: &Store,
    leased: &Leased<'_>,
    instance_id: &str,
    request: StopRequest,
    message: &str,
) -> Result<Acted<bool>, StoreError> {
    const SCRIPT: &str = "instance_stop_failed";
    let mut call = leased.call(&scripts().instance_stop_failed);
    call.arg(instance_id).arg(request.as_str()).arg(message);
    let raw: Vec<String> = store.invoke(&call).await?;
    match raw.first().map(String::as_str) {
        Some("RECORDED") => Ok(Acted::Done(true)),
        Some("UNCHANGED") => Ok(Acted::Done(false)),
        Some("FENCED") => Ok(Acted::Fenced),
        Some("GONE") => Ok(Acted::Gone),
        other => Err(unexpected(SCRIPT, format!("{other:?}"))),
    }
}

async fn told(
    store: &Store,
    script: &str,
    call: &FunctionCall<'_>,
    done: &str,
) -> Result<Acted<Vec<(String, Routing)>>, StoreError> {
    let raw: Vec<Value> = store.invoke(call).await?;
    let (outcome, _, told) = outcome_detail(script, &raw)?;
    match outcome.as_str() {
        "FENCED" => Ok(Acted::Fenced),
        "GONE" => Ok(Acted::Gone),
        outcome if outcome == done => Ok(Acted::Done(processes_told(script, told)?)),
        other => Err(unexpected(script, other)),
    }
}

/// Marks a DEPLOYING location UNHEALTHY for `message`; `Done(false)` when it was no longer DEPLOYING.
pub async fn location_unhealthy(store: &Store, leased: &Leased<'_>, message: &str) -> Result<Acted<bool>, StoreError> {
    let mut call = leased.call(&scripts().location_unhealthy);
    call.arg(message);
    let raw: Vec<String> = store.invoke(&call).await?;
    match raw.first().map(String::as_str) {
        Some("UNHEALTHY") => Ok(Acted::Done(true)),
        Some("UNCHANGED") => Ok(Acted::Done(false)),
        Some("FENCED") => Ok(Acted::Fenced),
        other => Err(unexpected("location_unhealthy", format!("{other:?}"))),
    }
}
