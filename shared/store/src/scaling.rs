//! Autoscaling's records, all in the fleet's slot: its scaling policies (each the contract's message, encoded here and
//! never read by a script), each policy's evaluations per location, and each location's autoscaling state (the
//! winning values of its stabilisation window and its standby rule's state). An autoscaling pass writes what it
//! evaluated and decided in one script, under the location's reconciler lease, so that two replicas never both act
//! for one location. The layout is in the scripts beside this file.

use std::collections::HashMap;

use berth_domain::game_server::timestamp;
use berth_domain::scaling::decide::Won;
use berth_domain::scaling::pass::LocationState;
use berth_domain::scaling::policy::PolicyState;
use berth_domain::scaling::standby::StandbyState;
use berth_proto::fleet::v1 as pb;
use prost::Message;
use redis::Value;

use crate::codec::{binary_fields, outcome_detail, strings, text_field, unexpected};
use crate::instances::{Acted, Leased};
use crate::keys::FleetKeys;
use crate::scripts::{Area, scripts};
use crate::{Store, StoreError};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "scaling",
    helpers: &[],
    functions: &[
        ("put_scaling_policy", include_str!("scaling/put.lua"), false),
        ("delete_scaling_policy", include_str!("scaling/delete.lua"), false),
        ("read_scaling_policies", include_str!("scaling/read.lua"), true),
        ("record_scaling_pass", include_str!("scaling/decide.lua"), false),
    ],
};

/// A policy as stored, with its evaluations by location.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredPolicy {
    /// The policy as put, with its revision and times; its status and last evaluation are the reader's to fill.
    pub policy: pb::ScalingPolicy,
    pub evaluations: Vec<(String, PolicyState)>,
}

/// The outcome of putting a policy.
#[derive(Debug, PartialEq)]
pub enum PolicyPut {
    Put(Box<StoredPolicy>),
    NotFound,
    NoLocation,
    /// The fleet is DELETING or TERMINATED.
    Deleting,
    /// The fleet has as many policies as it may.
    TooMany,
    /// The policy's revision is another (0: it does not exist).
    Revision(u64),
}

/// Creates or replaces `policy` (checked, its output fields unset) when its revision is `expected` (`None`: any);
/// a fleet holds at most `most` policies.
pub async fn put_policy(
    store: &Store,
    policy: &pb::ScalingPolicy,
    expected: Option<u64>,
    most: usize,
) -> Result<PolicyPut, StoreError> {
    const SCRIPT: &str = "put_scaling_policy";
    let mut call = scripts()
        .put_scaling_policy
        .for_fleet(&FleetKeys::new(&policy.fleet_id));
    call.arg(&policy.name)
        .arg(&policy.location)
        .arg(policy.encode_to_vec())
        .arg(expected.map(|rev| rev.to_string()).unwrap_or_default())
        .arg(most);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, detail, rest) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "PUT" => PolicyPut::Put(Box::new(StoredPolicy {
            policy: decode_policy(SCRIPT, &binary_fields(SCRIPT, rest)?)?,
            evaluations: Vec::new(),
        })),
        "NOT_FOUND" => PolicyPut::NotFound,
        "NO_LOCATION" => PolicyPut::NoLocation,
        "DELETING" => PolicyPut::Deleting,
        "TOO_MANY" => PolicyPut::TooMany,
        "REVISION" => PolicyPut::Revision(detail.parse().map_err(|_| unexpected(SCRIPT, &detail))?),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// The outcome of deleting a policy.
#[derive(Debug, PartialEq, Eq)]
pub enum PolicyDeleted {
    Deleted,
    NotFound,
    /// The policy's revision is another.
    Revision(u64),
}

/// Deletes a policy when its revision is `expected` (0: any).
pub async fn delete_policy(
    store: &Store,
    fleet_id: &str,
    name: &str,
    expected: u64,
) -> Result<PolicyDeleted, StoreError> {
    const SCRIPT: &str = "delete_scaling_policy";
    let mut call = scripts().delete_scaling_policy.for_fleet(&FleetKeys::new(fleet_id));
    call.arg(name).arg(expected);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, detail, _) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "DELETED" => PolicyDeleted::Deleted,
        "NOT_FOUND" => PolicyDeleted::NotFound,
        "REVISION" => PolicyDeleted::Revision(detail.parse().map_err(|_| unexpected(SCRIPT, &detail))?),
        other => return Err(unexpected(SCRIPT, other)),
    })
}

/// A fleet's policies, as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Policies {
    /// Redis's clock when they were read, ms since the epoch.
    pub now_ms: i64,
    /// In name order.
    pub policies: Vec<StoredPolicy>,
    /// The state of the location read (default when every location was).
    pub location: LocationState,
}

/// Reads a fleet's policies with their evaluations in `location`, and its autoscaling state; with an empty
/// location, their evaluations everywhere. `None` when the fleet does not exist.
pub async fn read_policies(store: &Store, fleet_id: &str, location: &str) -> Result<Option<Policies>, StoreError> {
    const SCRIPT: &str = "read_scaling_policies";
    let mut call = scripts().read_scaling_policies.for_fleet(&FleetKeys::new(fleet_id));
    call.arg(location);
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, _, mut rest) = outcome_detail(SCRIPT, &raw)?;
    match outcome.as_str() {
        "FOUND" => {}
        "NOT_FOUND" => return Ok(None),
        other => return Err(unexpected(SCRIPT, other)),
    }
    let now: String = redis::from_redis_value_ref(&raw[1]).map_err(|_| unexpected(SCRIPT, "a malformed reply"))?;
    let now_ms = now.parse().map_err(|_| unexpected(SCRIPT, &now))?;
    let mut read = Policies {
        now_ms,
        policies: Vec::new(),
        location: LocationState::default(),
    };
    if !location.is_empty() {
        let (last, policies) = rest
            .split_last()
            .ok_or_else(|| unexpected(SCRIPT, "no location state"))?;
        let state: HashMap<String, String> = pairs(&strings(SCRIPT, last)?);
        read.location = LocationState {
            history: decode_history(state.get("hist").map_or("", String::as_str)),
            standby: decode_standby(state.get("sb").map_or("", String::as_str)),
            lost: state.get("lost").and_then(|n| n.parse().ok()).unwrap_or(0),
        };
        rest = policies;
    }
    for entry in rest.chunks_exact(3) {
        let Value::Array(hash) = &entry[1] else {
            return Err(unexpected(SCRIPT, "a policy without its hash"));
        };
        let fields = binary_fields(SCRIPT, hash)?;
        let evaluations = pairs(&strings(SCRIPT, &entry[2])?);
        let mut by_location: Vec<(String, PolicyState)> = evaluations
            .iter()
            .filter_map(|(name, state)| {
                let location = name.strip_prefix("e:")?;
                let acted = evaluations.get(&format!("a:{location}")).and_then(|ms| ms.parse().ok());
                Some((location.to_owned(), decode_state(state, acted)))
            })
            .collect();
        by_location.sort_by(|a, b| a.0.cmp(&b.0));
        read.policies.push(StoredPolicy {
            policy: decode_policy(SCRIPT, &fields)?,
            evaluations: by_location,
        });
    }
    Ok(Some(read))
}

/// What one autoscaling pass of a location evaluated and decided.
#[derive(Clone, Debug)]
pub struct Pass<'a> {
    /// The desired count the pass read and decided from.
    pub decided_from: u32,
    /// The desired count it decided, when that is a change.
    pub desired: Option<u32>,
    /// The winning proposal's name.
    pub winner: &'a str,
    /// The change's message: what won, and the inputs it read.
    pub message: &'a str,
    pub state: &'a LocationState,
    /// The effective standby target, server processes.
    pub standby_target: u32,
    /// Each policy evaluated (its name and the revision evaluated), with why it failed when that is news.
    pub evaluated: Vec<(&'a str, u64, &'a PolicyState, Option<&'a str>)>,
}

/// Records a pass under `leased`'s lease: `Done(true)` when the desired count changed, `Done(false)` when it did not
/// (nothing to change, or the desired count or bounds moved meanwhile).
pub async fn record_pass(store: &Store, leased: &Leased<'_>, pass: &Pass<'_>) -> Result<Acted<bool>, StoreError> {
    const SCRIPT: &str = "record_scaling_pass";
    let mut call = leased.call(&scripts().record_scaling_pass);
    call.arg(pass.decided_from)
        .arg(pass.desired.map(|n| n.to_string()).unwrap_or_default())
        .arg(pass.winner)
        .arg(pass.message)
        .arg(encode_history(&pass.state.history))
        .arg(encode_standby(&pass.state.standby))
        .arg(pass.standby_target)
        .arg(pass.state.lost);
    for (name, revision, state, failure) in &pass.evaluated {
        call.arg(*name)
            .arg(revision)
            .arg(encode_state(state))
            .arg(failure.unwrap_or(""));
    }
    let raw: Vec<Value> = store.invoke(&call).await?;
    let (outcome, _, _) = outcome_detail(SCRIPT, &raw)?;
    Ok(match outcome.as_str() {
        "SCALED" => Acted::Done(true),
        "UNCHANGED" => Acted::Done(false),
        "FENCED" => Acted::Fenced,
        other => return Err(unexpected(SCRIPT, other)),
    })
}

fn pairs(flat: &[String]) -> HashMap<String, String> {
    flat.chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
}

fn decode_policy(script: &str, fields: &HashMap<String, Vec<u8>>) -> Result<pb::ScalingPolicy, StoreError> {
    let mut policy = pb::ScalingPolicy::decode(fields.get("cfg").map_or(&[][..], Vec::as_slice))
        .map_err(|err| unexpected(script, err))?;
    let number = |name: &str| {
        let text = text_field(fields, name);
        text.parse::<i64>().map_err(|_| unexpected(script, text))
    };
    policy.revision = number("rev")? as u64;
    policy.create_time = Some(timestamp(number("c_ms")?));
    policy.update_time = Some(timestamp(number("u_ms")?));
    Ok(policy)
}

/// An evaluation's state as stored: `<evaluated ms>|<proposal>|<failed 0 | 1>|<held>|<message>`, the proposal
/// empty when there was none; when its proposal last won is kept apart (a:<location>), written by the script that
/// applies the change.
fn encode_state(state: &PolicyState) -> String {
    format!(
        "{}|{}|{}|{}|{}",
        state.evaluated_ms.unwrap_or(0),
        state.proposal.map(|n| n.to_string()).unwrap_or_default(),
        u8::from(state.failed),
        state.held,
        state.message
    )
}

fn decode_state(text: &str, acted_ms: Option<i64>) -> PolicyState {
    let mut parts = text.splitn(5, '|');
    let mut next = || parts.next().unwrap_or("");
    let evaluated = next().parse().ok().filter(|ms| *ms > 0);
    PolicyState {
        evaluated_ms: evaluated,
        proposal: next().parse().ok(),
        failed: next() == "1",
        held: next().parse().unwrap_or(0),
        message: next().to_owned(),
        acted_ms,
    }
}

fn encode_history(history: &[Won]) -> String {
    history
        .iter()
        .map(|(ms, n)| format!("{ms}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn decode_history(text: &str) -> Vec<Won> {
    text.split_whitespace()
        .filter_map(|won| {
            let (ms, n) = won.split_once(':')?;
            Some((ms.parse().ok()?, n.parse().ok()?))
        })
        .collect()
}

/// The standby rule's state as stored: `<raised percent>:<raised ms>:<filled 0 | 1>`.
fn encode_standby(state: &StandbyState) -> String {
    format!(
        "{}:{}:{}",
        state.raised_percent,
        state.raised_ms,
        u8::from(state.filled)
    )
}

fn decode_standby(text: &str) -> StandbyState {
    let mut parts = text.split(':');
    let mut next = || parts.next().unwrap_or("");
    StandbyState {
        raised_percent: next().parse().unwrap_or(0),
        raised_ms: next().parse().unwrap_or(0),
        filled: next() == "1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_back_as_written() {
        let state = PolicyState {
            evaluated_ms: Some(1_700_000_000_000),
            proposal: Some(12),
            failed: true,
            message: "answered 500 | twice".into(),
            held: 3,
            acted_ms: Some(5),
        };
        assert_eq!(decode_state(&encode_state(&state), Some(5)), state);
        let fresh = PolicyState::default();
        assert_eq!(decode_state(&encode_state(&fresh), None), fresh);
        let history = vec![(10, 9), (20, 4)];
        assert_eq!(decode_history(&encode_history(&history)), history);
        let standby = StandbyState {
            raised_percent: 300,
            raised_ms: 42,
            filled: true,
        };
        assert_eq!(decode_standby(&encode_standby(&standby)), standby);
    }
}
