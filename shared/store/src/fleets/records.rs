//! Fleet records: created whole by one script, read in one call, their capacity changed atomically against the
//! current bounds. The layout is in `lib.lua`; the configuration is the contract's `Fleet` message, encoded here and
//! never read by a script.

use std::collections::HashMap;

pub use berth_domain::fleet::check::CapacityChange;
use berth_domain::fleet::check::NewFleet;
use berth_domain::fleet::settings::FleetSettings;
use berth_domain::fleet::{FleetRecord, LocationRecord};
use berth_domain::stored::{FleetEventCode, FleetStatus, LocationStatus};
use berth_proto::fleet::v1 as pb;
use prost::Message;
use redis::Value;

use super::enlist;
use crate::codec::{binary_fields, outcome_detail, text_field, unexpected};
use crate::keys::FleetKeys;
use crate::scripts::{FunctionCall, scripts};
use crate::{Store, StoreError};

/// A fleet's stored fields by name; values are bytes, since the configurations are encoded messages.
type Fields = HashMap<String, Vec<u8>>;

/// The outcome of creating a fleet.
#[derive(Debug, PartialEq)]
pub enum Created {
    /// The fleet as created.
    Created(Box<FleetRecord>),
    /// A fleet with that id exists; nothing was changed.
    Exists,
}

/// Creates a fleet with its locations, NEW; its events are kept for `retention_ms`.
pub async fn create_fleet(store: &Store, fleet: &NewFleet, retention_ms: u64) -> Result<Created, StoreError> {
    const SCRIPT: &str = "create_fleet";
    let fleet_id = &fleet.config.fleet_id;
    // Listed first: a listed fleet without a record is skipped by readers, a record nobody lists is never swept.
    enlist(store, fleet_id).await?;
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().create_fleet.for_fleet(&keys);
    call.arg(fleet.config.encode_to_vec())
        .arg(retention_ms)
        .arg(fleet.config.max_concurrent_game_session_activations)
        .arg(FleetSettings::of(&fleet.config).encode());
    new_locations(&mut call, &fleet.locations);
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, _, record) = outcome_detail(SCRIPT, &raw)?;
    // And again once written: a sweep forgetting a gone fleet of this id may have taken it off meanwhile (forget).
    enlist(store, fleet_id).await?;
    match outcome.as_str() {
        "CREATED" => Ok(Created::Created(Box::new(decode(SCRIPT, record)?))),
        "EXISTS" => Ok(Created::Exists),
        other => Err(unexpected(SCRIPT, other)),
    }
}

/// A fleet by id; `None` when there is none.
pub async fn read_fleet(store: &Store, fleet_id: &str) -> Result<Option<FleetRecord>, StoreError> {
    let fields: Fields = store
        .query(redis::cmd("HGETALL").arg(FleetKeys::new(fleet_id).fleet()))
        .await?;
    if fields.is_empty() {
        return Ok(None);
    }
    from_fields("read_fleet", &fields).map(Some)
}

/// The outcome of changing a location's capacity.
#[derive(Debug, PartialEq)]
pub enum CapacityUpdated {
    /// The fleet after the change.
    Changed(Box<FleetRecord>),
    NotFound,
    /// The fleet has no such location.
    NoLocation,
    /// The fleet (`true`) or the location is being deleted.
    Deleting {
        fleet: bool,
    },
    /// The bounds, merged with the current ones, are out of order: the merged minimum, maximum and desired.
    OutOfOrder {
        minimum: u32,
        maximum: u32,
        desired: u32,
    },
}

/// Changes the capacity of `location` (empty: the home location), against its current bounds.
pub async fn update_capacity(
    store: &Store,
    fleet_id: &str,
    location: &str,
    change: CapacityChange,
) -> Result<CapacityUpdated, StoreError> {
    const SCRIPT: &str = "update_fleet_capacity";
    let keys = FleetKeys::new(fleet_id);
    let given = |value: Option<u32>| value.map(|v| v.to_string()).unwrap_or_default();
    let mut call = scripts().update_fleet_capacity.for_fleet(&keys);
    call.arg(location)
        .arg(given(change.minimum))
        .arg(given(change.maximum))
        .arg(given(change.desired));
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, detail, record) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "CHANGED" => CapacityUpdated::Changed(Box::new(decode(SCRIPT, record)?)),
        "NOT_FOUND" => CapacityUpdated::NotFound,
        "NO_LOCATION" => CapacityUpdated::NoLocation,
        "DELETING" => CapacityUpdated::Deleting {
            fleet: detail == "fleet",
        },
        "OUT_OF_ORDER" => {
            let bounds: Vec<u32> = detail.split(' ').filter_map(|n| n.parse().ok()).collect();
            let [minimum, maximum, desired] = bounds[..] else {
                return Err(unexpected(SCRIPT, &detail));
            };
            CapacityUpdated::OutOfOrder {
                minimum,
                maximum,
                desired,
            }
        }
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// A change of a fleet computed from its record.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetChange {
    /// The new configuration, with the revision of the record it was computed from; `None` when it is left.
    pub config: Option<(u64, pb::Fleet)>,
    /// The locations whose standby, viabilities or suspension changed, with all three as they are to be and the
    /// version they were computed from (their status is the store's: an INITIALIZED one given standby servers
    /// starts DEPLOYING).
    pub locations: Vec<LocationRecord>,
    /// Its events: code, location (empty for the fleet), message.
    pub events: Vec<(FleetEventCode, String, String)>,
    /// The launch settings changed: every UNHEALTHY location starts DEPLOYING again.
    pub redeploy: bool,
}

/// The outcome of writing a change.
#[derive(Debug, PartialEq)]
pub enum Written {
    /// The fleet after the change.
    Written(Box<FleetRecord>),
    NotFound,
    /// The fleet is being deleted or was: its status.
    Deleting(FleetStatus),
    /// The fleet changed since the record the change was computed from (its revision, or a location's version or
    /// status): what changed.
    Conflict(String),
}

/// Writes a change of a fleet, if nothing it was computed from has changed since.
pub async fn write_fleet(store: &Store, fleet_id: &str, change: &FleetChange) -> Result<Written, StoreError> {
    const SCRIPT: &str = "write_fleet";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().write_fleet.for_fleet(&keys);
    match &change.config {
        Some((revision, config)) => call
            .arg(revision)
            .arg(config.encode_to_vec())
            .arg(config.max_concurrent_game_session_activations)
            .arg(FleetSettings::of(config).encode()),
        None => call.arg("").arg("").arg("").arg(""),
    };
    call.arg(change.locations.len()).arg(u8::from(change.redeploy));
    for location in &change.locations {
        let has_standby = location.standby.as_ref().is_some_and(|s| s.standby_servers > 0);
        call.arg(&location.location)
            .arg(location.version)
            .arg(location_config(location.standby.clone(), location.viabilities.clone()))
            .arg(u8::from(location.autoscaling_suspended))
            .arg(u8::from(has_standby));
    }
    for (code, location, message) in &change.events {
        call.arg(code.as_str()).arg(location).arg(message);
    }
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, detail, record) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "WRITTEN" => Written::Written(Box::new(decode(SCRIPT, record)?)),
        "NOT_FOUND" => Written::NotFound,
        "DELETING" => Written::Deleting(FleetStatus::parse(&detail).ok_or_else(|| unexpected(SCRIPT, &detail))?),
        "CONFLICT" => Written::Conflict(detail),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// The arguments that describe new locations to the scripts that add them (`add_location` in `lib.lua`).
fn new_locations(call: &mut FunctionCall<'_>, locations: &[pb::LocationConfiguration]) {
    for location in locations {
        let capacity = location.capacity.unwrap_or_default();
        let has_standby = location.standby.as_ref().is_some_and(|s| s.standby_servers > 0);
        call.arg(&location.location)
            .arg(capacity.minimum_instances)
            .arg(capacity.maximum_instances)
            .arg(capacity.desired_instances)
            .arg(location_config(location.standby.clone(), Vec::new()))
            .arg(u8::from(has_standby));
    }
}

/// The outcome of adding locations to a fleet.
#[derive(Debug, PartialEq)]
pub enum LocationsAdded {
    /// The fleet with them.
    Added(Box<FleetRecord>),
    NotFound,
    /// The fleet is being deleted or was: its status.
    Deleting(FleetStatus),
    /// The fleet has this location already; none was added.
    Exists(String),
    /// The fleet would have more than the most allowed; it has this many.
    TooMany(usize),
}

/// Adds locations to a fleet, all or none, up to `max` locations in all.
pub async fn add_locations(
    store: &Store,
    fleet_id: &str,
    locations: &[pb::LocationConfiguration],
    max: usize,
) -> Result<LocationsAdded, StoreError> {
    const SCRIPT: &str = "add_fleet_locations";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().add_fleet_locations.for_fleet(&keys);
    call.arg(max);
    new_locations(&mut call, locations);
    let raw: Vec<Value> = store.invoke_acknowledged(&call).await?;
    let (outcome, detail, record) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "ADDED" => LocationsAdded::Added(Box::new(decode(SCRIPT, record)?)),
        "NOT_FOUND" => LocationsAdded::NotFound,
        "DELETING" => LocationsAdded::Deleting(FleetStatus::parse(&detail).ok_or_else(|| unexpected(SCRIPT, &detail))?),
        "EXISTS" => LocationsAdded::Exists(detail),
        "TOO_MANY" => LocationsAdded::TooMany(detail.parse().map_err(|_| unexpected(SCRIPT, &detail))?),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// A location's stored configuration: its standby and viabilities, as the contract's `FleetLocation`.
fn location_config(standby: Option<pb::StandbyConfiguration>, viabilities: Vec<pb::InstanceTypeViability>) -> Vec<u8> {
    pb::FleetLocation {
        standby,
        instance_type_viabilities: viabilities,
        ..Default::default()
    }
    .encode_to_vec()
}

/// A fleet from a script's reply of its stored fields, as a flat name/value list.
fn decode(script: &str, raw: &[Value]) -> Result<FleetRecord, StoreError> {
    from_fields(script, &binary_fields(script, raw)?)
}

/// A fleet from its stored fields.
fn from_fields(script: &str, fields: &Fields) -> Result<FleetRecord, StoreError> {
    let bad = |what: &str| unexpected(script, format!("a fleet with {what}"));
    let text = |name: &str| text_field(fields, name);
    let number = |name: &str| text(name).parse::<i64>().map_err(|_| bad(name));
    let config = pb::Fleet::decode(fields.get("cfg").map(Vec::as_slice).unwrap_or_default())
        .map_err(|_| bad("a configuration that does not decode"))?;
    let locations = text("locs")
        .split(' ')
        .filter(|name| !name.is_empty())
        .map(|name| {
            let at = |field: &str| format!("l:{name}:{field}");
            let stored = pb::FleetLocation::decode(fields.get(&at("cfg")).map(Vec::as_slice).unwrap_or_default())
                .map_err(|_| bad("a location configuration that does not decode"))?;
            let count = |field: &str| text(&at(field)).parse::<u32>().map_err(|_| bad(&at(field)));
            Ok(LocationRecord {
                location: name.to_owned(),
                status: LocationStatus::parse(&text(&at("status"))).ok_or_else(|| bad(&at("status")))?,
                status_message: text(&at("msg")),
                status_change_ms: number(&at("st_ms"))?,
                capacity: pb::FleetCapacity {
                    minimum_instances: count("min")?,
                    maximum_instances: count("max")?,
                    desired_instances: count("desired")?,
                },
                standby: stored.standby,
                autoscaling_suspended: text(&at("susp")) == "1",
                viabilities: stored.instance_type_viabilities,
                create_ms: number(&at("c_ms"))?,
                version: number(&at("ver"))? as u64,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(FleetRecord {
        config,
        status: FleetStatus::parse(&text("status")).ok_or_else(|| bad("status"))?,
        status_message: text("msg"),
        revision: number("rev")? as u64,
        create_ms: number("c_ms")?,
        update_ms: number("u_ms")?,
        locations,
    })
}
