//! Deleting a fleet: it reads the fleet's sessions and tells its processes to end, so it lives in the top area.

use berth_domain::stored::FleetStatus;
use redis::Value;

use crate::codec::unexpected;
use crate::keys::FleetKeys;
use crate::processes::Routing;
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
    /// Game sessions are live and deletion was not forced: how many.
    Live(u64),
}

/// Deletes a fleet: refused while game sessions are live unless `force`; then DELETING, its processes told to
/// terminate within `grace_ms`. `expected_revision` 0 skips the revision check.
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
    let text = |value: &Value| {
        redis::from_redis_value_ref::<String>(value).map_err(|_| unexpected(SCRIPT, "a malformed reply"))
    };
    let [outcome, _now, detail, told @ ..] = raw.as_slice() else {
        return Err(unexpected(SCRIPT, raw.len()));
    };
    let (outcome, detail) = (text(outcome)?, text(detail)?);
    let number = |detail: &str| detail.parse().map_err(|_| unexpected(SCRIPT, detail));
    Ok(match outcome.as_str() {
        "DELETING" => Deleted::Deleting(
            told.iter()
                .map(|process| {
                    let [id, replica, version] = redis::from_redis_value_ref::<[String; 3]>(process)
                        .map_err(|_| unexpected(SCRIPT, "a malformed process"))?;
                    let version = number(&version)?;
                    Ok((id, Routing { replica, version }))
                })
                .collect::<Result<_, StoreError>>()?,
        ),
        "NOT_FOUND" => Deleted::NotFound,
        "GONE" => Deleted::Gone(FleetStatus::parse(&detail).ok_or_else(|| unexpected(SCRIPT, &detail))?),
        "CONFLICT" => Deleted::Conflict(number(&detail)?),
        "LIVE" => Deleted::Live(number(&detail)?),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// Turns a DELETING fleet with no process left TERMINATED, its record and events kept for `retention_ms`; `true`
/// when it did.
pub async fn finish_fleet_deletion(store: &Store, fleet_id: &str, retention_ms: u64) -> Result<bool, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().finish_fleet_deletion.for_fleet(&keys);
    call.arg(retention_ms);
    let (outcome, _now): (String, String) = store.invoke(&call).await?;
    Ok(outcome == "TERMINATED")
}
