//! Agones' allocation API over the pool: one selector tried against one fleet is one function call
//! (`pool/allocate.lua`), which claims the server it finds and writes the allocation's metadata and counter and list
//! actions on it in the same step.

use crate::codec::field;
use crate::keys::FleetKeys;
use crate::pool::decode_reply;
use crate::processes::{Described, described};
use crate::scripts::scripts;
use crate::{Store, StoreError};
use berth_domain::process::LABELS_MAX;

/// One selector's try at one fleet.
#[derive(Clone, Debug)]
pub struct Allocate<'a> {
    pub fleet_id: &'a str,
    /// The selector with the request's order, patch and actions (`berth_domain::agones::Allocation::to_lua`).
    pub selector: &'a str,
    /// How long a claim made on a READY server lasts.
    pub timeout_ms: u64,
    /// The id of that claim.
    pub claim_id: &'a str,
    /// Breaks ties at random for Distributed.
    pub seed: u32,
}

/// What the try found.
#[derive(Debug)]
pub enum Allocated {
    /// This server, after the allocation; `replica` holds its SDK stream ('' for a server without one).
    Allocated { server: Box<Described>, replica: String },
    /// No server of the fleet matches.
    Exhausted,
    /// The first match would keep more labels than a server may; nothing changed.
    TooManyLabels(String),
    /// Likewise for its annotations.
    TooManyAnnotations(String),
}

/// Tries one selector against one fleet.
pub async fn allocate(store: &Store, allocate: &Allocate<'_>) -> Result<Allocated, StoreError> {
    let keys = FleetKeys::new(allocate.fleet_id);
    let mut call = scripts().allocate_game_server.prepare();
    call.key(keys.pool())
        .key(keys.claims())
        .key(keys.utilized())
        .arg(allocate.timeout_ms)
        .arg(allocate.claim_id)
        .arg(allocate.selector)
        .arg(allocate.seed)
        .arg(LABELS_MAX)
        .arg(LABELS_MAX);
    let reply = decode_reply(allocate.fleet_id, store.invoke_acknowledged(&call).await?)?;
    let (replica, id) = (field(&reply.fields, "replica"), field(&reply.fields, "id"));
    match reply.outcome.clone().as_str() {
        "ALLOCATED" => Ok(Allocated::Allocated {
            server: Box::new(described(reply, "allocate")?),
            replica,
        }),
        "EXHAUSTED" => Ok(Allocated::Exhausted),
        "TOO_MANY_LABELS" => Ok(Allocated::TooManyLabels(id)),
        "TOO_MANY_ANNOTATIONS" => Ok(Allocated::TooManyAnnotations(id)),
        other => Err(crate::codec::unexpected("allocate", other)),
    }
}
