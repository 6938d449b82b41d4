//! Deleting a fleet or some of its locations: it reads the fleet's sessions and tells its processes to end.

use berth_domain::stored::FleetStatus;
use redis::Value;

use crate::codec::{outcome_detail, strings, unexpected};
use crate::keys::FleetKeys;
use crate::processes::{Routing, processes_told};
use crate::scripts::scripts;
use crate::{Store, StoreError};

/// The outcome of deleting a fleet.
#[derive(Debug, PartialEq, Eq)]
pub enum Deleted {
    /// DELETING: the processes told to terminate, each with the routing of its health replica.
    Deleting(Vec<(String, Routing)>),
    NotFound,
    /// Deleted already: DELETING or TERMINATED.
    Gone(FleetStatus),
    /// Its revision is not the expected one: its revision.
    Conflict(u64),
    /// Deletion was not forced and the fleet is in use: how many game sessions are live, and how many servers are
    /// claimed or UTILIZED.
    Live {
        sessions: u64,
        servers: u64,
    },
}

/// Deletes a fleet: refused while game sessions are live or servers claimed or UTILIZED unless `force`; then
/// DELETING, its processes told to terminate within `grace_ms`. `expected_revision` 0 skips the revision check.
pub async fn delete_fleet(
    store: &Store,
    fleet_id: &str,
    force: bool,
    expected_revision: u64,
    grace_ms: u64,
) -> Result<Deleted, StoreError> {
    const SCRIPT: &str = "delete_fleet";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().delete_fleet.for_fleet(&keys);
    call.arg(u8::from(force)).arg(expected_revision).arg(grace_ms);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, detail, told) = outcome_detail(SCRIPT, &raw)?;
    let number = |detail: &str| detail.parse().map_err(|_| unexpected(SCRIPT, detail));
    Ok(match outcome.as_str() {
        "DELETING" => Deleted::Deleting(processes_told(SCRIPT, told)?),
        "NOT_FOUND" => Deleted::NotFound,
        "GONE" => Deleted::Gone(FleetStatus::parse(&detail).ok_or_else(|| unexpected(SCRIPT, &detail))?),
        "CONFLICT" => Deleted::Conflict(number(&detail)?),
        "LIVE" => Deleted::Live {
            sessions: number(&detail)?,
            servers: number(
                strings(SCRIPT, &Value::Array(told.to_vec()))?
                    .first()
                    .map_or("", String::as_str),
            )?,
        },
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// The outcome of removing locations from a fleet.
#[derive(Debug, PartialEq, Eq)]
pub enum LocationsDeleted {
    /// The locations are DELETING: the processes told to terminate, each with the routing of its health replica.
    Deleting(Vec<(String, Routing)>),
    NotFound,
    /// The fleet is deleted already: DELETING or TERMINATED.
    Gone(FleetStatus),
    /// The fleet has no such location.
    NoLocation(String),
    /// The home location, which only deleting the fleet removes.
    Home(String),
}

/// Removes locations from a fleet: each DELETING, its processes told to terminate within `grace_ms`; none when one
/// of them is not the fleet's or is its home.
pub async fn delete_locations(
    store: &Store,
    fleet_id: &str,
    locations: &[String],
    grace_ms: u64,
) -> Result<LocationsDeleted, StoreError> {
    const SCRIPT: &str = "delete_fleet_locations";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().delete_fleet_locations.for_fleet(&keys);
    call.arg(grace_ms).arg(locations);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, detail, told) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "DELETING" => LocationsDeleted::Deleting(processes_told(SCRIPT, told)?),
        "NOT_FOUND" => LocationsDeleted::NotFound,
        "GONE" => LocationsDeleted::Gone(FleetStatus::parse(&detail).ok_or_else(|| unexpected(SCRIPT, &detail))?),
        "NO_LOCATION" => LocationsDeleted::NoLocation(detail),
        "HOME" => LocationsDeleted::Home(detail),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// What a sweep of a fleet's deletions finished.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DeletionsFinished {
    /// The fleet became TERMINATED.
    pub terminated: bool,
    /// These DELETING locations, with no process left, were removed.
    pub removed: Vec<String>,
    /// Nothing is left of the fleet, not even its record (its retention passed, or it never had one): it may leave
    /// the list of fleets (`fleets::forget`).
    pub gone: bool,
}

/// Finishes a fleet's deletions where no process is left: DELETING locations are removed, a DELETING fleet becomes
/// TERMINATED, its record and events kept for `retention_ms`; says when nothing is left of it.
pub async fn finish_fleet_deletion(
    store: &Store,
    fleet_id: &str,
    retention_ms: u64,
) -> Result<DeletionsFinished, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().finish_fleet_deletion.for_fleet(&keys);
    call.arg(retention_ms);
    let raw: Vec<String> = store.invoke(&call).await?;
    let [outcome, _now, removed @ ..] = raw.as_slice() else {
        return Err(unexpected("finish_fleet_deletion", raw.len()));
    };
    Ok(DeletionsFinished {
        terminated: outcome == "TERMINATED",
        removed: removed.to_vec(),
        gone: outcome == "GONE",
    })
}
