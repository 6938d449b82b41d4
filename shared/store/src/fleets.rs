//! Fleets: their records (see `records.rs`), and the registry of every fleet id — one set, written beside (never
//! inside) a fleet's own scripts, since the set has a slot of its own. A fleet is listed there once it has a record
//! and leaves it once nothing of it is left (`forget`): no record, as when a deleted fleet's retention passed, and
//! nothing for a sweep. Sweeps and watches of every fleet start here.

mod events;
mod records;

pub use events::{FleetEventEntry, poll_fleet_events, read_fleet_events, recent_fleet_events};
pub use records::{
    CapacityChange, CapacityUpdated, Created, FleetChange, LocationsAdded, Written, add_locations, create_fleet,
    read_fleet, update_capacity, write_fleet,
};

use crate::codec::unexpected;
use crate::keys::{FLEETS, FleetKeys};
use crate::scripts::{Area, scripts};
use crate::{Store, StoreError};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "fleets",
    helpers: &[include_str!("fleets/lib.lua"), include_str!("fleets/tally.lua")],
    functions: &[
        ("create_fleet", include_str!("fleets/create.lua"), false),
        ("add_fleet_locations", include_str!("fleets/add_locations.lua"), false),
        ("write_fleet", include_str!("fleets/write.lua"), false),
        ("update_fleet_capacity", include_str!("fleets/capacity.lua"), false),
        ("fleets_now", include_str!("fleets/now.lua"), true),
        ("poll_fleet_events", include_str!("fleets/poll_events.lua"), true),
    ],
};

/// The fleets that have registered servers, for sweeps.
pub async fn fleets(store: &Store) -> Result<Vec<String>, StoreError> {
    store.query(redis::cmd("SMEMBERS").arg(FLEETS)).await
}

/// Whether a fleet is known: one of its game servers registered (fleets have no records of their own until the
/// fleet service keeps them).
pub async fn fleet_exists(store: &Store, fleet_id: &str) -> Result<bool, StoreError> {
    store.query(redis::cmd("SISMEMBER").arg(FLEETS).arg(fleet_id)).await
}

/// A fleet's locations, its home location first (none when it has no record).
pub async fn fleet_locations(store: &Store, fleet_id: &str) -> Result<Vec<String>, StoreError> {
    let names: Option<String> = store
        .query(redis::cmd("HGET").arg(FleetKeys::new(fleet_id).fleet()).arg("locs"))
        .await?;
    Ok(names
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect())
}

/// Every fleet, and the time, ms since the epoch, on the node holding their list when it was
/// read: a fleet added later is added at or after it.
pub async fn fleets_now(store: &Store) -> Result<(u64, Vec<String>), StoreError> {
    let mut call = scripts().fleets_now.prepare();
    call.key(FLEETS);
    let (now, fleets): (String, Vec<String>) = store.invoke(&call).await?;
    Ok((now.parse().map_err(|_| unexpected("fleets_now", &now))?, fleets))
}

/// Takes a fleet that is gone (`DeletionsFinished::gone`) off the list. A create of the same id may run meanwhile:
/// it lists its fleet again once its record is written (`create_fleet`), and this lists it again when it finds a
/// record after taking it off; so in whichever order the two interleave, a fleet with a record stays listed.
pub async fn forget(store: &Store, fleet_id: &str) -> Result<(), StoreError> {
    let _: i64 = store.query(redis::cmd("SREM").arg(FLEETS).arg(fleet_id)).await?;
    let recreated: bool = store
        .query(redis::cmd("EXISTS").arg(FleetKeys::new(fleet_id).fleet()))
        .await?;
    if recreated {
        enlist(store, fleet_id).await?;
    }
    Ok(())
}

/// Lists a fleet: adding is idempotent, and a fleet listed without servers costs a sweep one empty look, while a
/// server whose fleet is not listed would never be swept.
pub(crate) async fn enlist(store: &Store, fleet_id: &str) -> Result<(), StoreError> {
    let _: i64 = store.query(redis::cmd("SADD").arg(FLEETS).arg(fleet_id)).await?;
    Ok(())
}

/// Runs `script`, one that gives the fleet a server, with the fleet listed again beside it. A server needs its
/// fleet's record, and the create that wrote the record listed the fleet; listing it again with every server mends
/// a list that lost it (as a failover of the list's node can) by the next server that comes. Sent together with the
/// script, it adds no wait; when it fails, the next server mends the list instead.
pub(crate) async fn listed_beside<T>(store: &Store, fleet_id: &str, script: impl Future<Output = T>) -> T {
    let (listed, done) = tokio::join!(enlist(store, fleet_id), script);
    if let Err(err) = listed {
        tracing::debug!(fleet = fleet_id, error = %err, "the fleet was not listed again beside a new server");
    }
    done
}
