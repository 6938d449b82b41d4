//! Agones' allocation request (package `allocation`) as Berth takes it: checked whole against the limits its proto
//! states, and turned into the selectors that are tried in order, each against the fleets it names, by
//! `pool/allocate.lua`. The Lua is the one statement of how a server matches and in what order matches are taken;
//! this module says what it is asked.

use std::collections::HashMap;

use berth_proto::agones::allocation::{self as pb, allocation_request, game_server_selector, priority};
use berth_proto::common::v1::KeyValue;
use serde_json::{Value, json};
use tonic::Status;

use crate::game_server::FLEET_ID_LEN;
use crate::process::{ANNOTATION_VALUE_MAX, LABELS_MAX, LIST_CAPACITY_MAX, LIST_VALUE_MAX, NAME_LEN};
use crate::validate::{Violations, check_count, check_labels, check_pairs, is_id_char};

/// The label every server has, naming its fleet, as Agones' fleets label their game servers.
pub const FLEET_LABEL: &str = "agones.dev/fleet";
/// Most selectors in one request.
pub const SELECTORS_MAX: usize = 16;
/// Most match expressions, counter selectors, list selectors, counter actions or list actions.
pub const ENTRIES_MAX: usize = 16;
/// Most values of an In or NotIn expression.
pub const EXPRESSION_VALUES_MAX: usize = 64;
/// Most priorities.
pub const PRIORITIES_MAX: usize = 8;
/// Largest count, capacity or amount an allocation may write: counts are changed in Redis' Lua, whose numbers are
/// exact integers up to 2^53.
pub const AMOUNT_MAX: i64 = 1 << 53;
/// Longest namespace, in characters (Kubernetes' limit).
pub const NAMESPACE_MAX: usize = 253;

/// One selector, as the Lua reads it, and the fleet it names (`None`: every fleet).
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    pub fleet: Option<String>,
    lua: Value,
}

/// A checked request: its selectors in order, and what an allocation does, as the Lua reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    pub selectors: Vec<Selector>,
    /// Whether the request asked for Distributed (else Packed).
    pub distributed: bool,
    common: Value,
}

impl Allocation {
    /// The JSON `pool/allocate.lua` takes for `selector`: the selector's fields beside the request's order, patch
    /// and actions.
    pub fn to_lua(&self, selector: &Selector) -> String {
        let mut whole = self.common.clone();
        if let (Value::Object(into), Value::Object(from)) = (&mut whole, &selector.lua) {
            into.extend(from.clone());
        }
        whole.to_string()
    }
}

/// Map entries in key order, so that checks and the Lua see them the same way every time.
fn sorted<T>(map: &HashMap<String, T>) -> Vec<(&String, &T)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

fn key_values(map: &HashMap<String, String>) -> Vec<KeyValue> {
    sorted(map)
        .into_iter()
        .map(|(key, value)| KeyValue {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

fn check_name(v: &mut Violations, field: &str, name: &str) {
    v.id(field, name, NAME_LEN.0, NAME_LEN.1);
}

fn check_amount(v: &mut Violations, field: &str, amount: i64) {
    if !(0..=AMOUNT_MAX).contains(&amount) {
        v.add(field, format!("must be 0 to {AMOUNT_MAX}, got {amount}"));
    }
}

/// The selectors a request asks for: gameServerSelectors, else the deprecated preferred ones (each within the
/// required one) followed by the required one, else one that takes any READY server.
#[allow(deprecated)] // Agones' older fields are still sent by older allocator clients, and read as Agones reads them.
fn selectors_asked(req: &pb::AllocationRequest) -> Vec<(String, pb::GameServerSelector)> {
    if !req.game_server_selectors.is_empty() {
        return req
            .game_server_selectors
            .iter()
            .enumerate()
            .map(|(i, selector)| (format!("gameServerSelectors[{i}]"), selector.clone()))
            .collect();
    }
    let required = req.required_game_server_selector.clone().unwrap_or_default();
    let mut asked: Vec<_> = req
        .preferred_game_server_selectors
        .iter()
        .enumerate()
        .map(|(i, preferred)| {
            let mut within = preferred.clone();
            for (key, value) in &required.match_labels {
                within.match_labels.entry(key.clone()).or_insert_with(|| value.clone());
            }
            within
                .match_expressions
                .extend(required.match_expressions.iter().cloned());
            (format!("preferredGameServerSelectors[{i}]"), within)
        })
        .collect();
    asked.push(("requiredGameServerSelector".to_owned(), required));
    asked
}

fn check_selector(v: &mut Violations, field: &str, selector: &pb::GameServerSelector) -> Selector {
    let labels = key_values(&selector.match_labels);
    check_labels(v, &format!("{field}.matchLabels"), &labels, LABELS_MAX);
    let fleet = selector.match_labels.get(FLEET_LABEL).cloned();
    if let Some(fleet) = &fleet {
        let len = fleet.chars().count();
        if !(FLEET_ID_LEN.0..=FLEET_ID_LEN.1).contains(&len) || !fleet.chars().all(is_id_char) {
            v.add(
                &format!("{field}.matchLabels[{FLEET_LABEL}]"),
                format!(
                    "must be a fleet id ({} to {} characters of A-Z a-z 0-9 _ . -), got {fleet:?}",
                    FLEET_ID_LEN.0, FLEET_ID_LEN.1
                ),
            );
        }
    }
    let expressions_field = format!("{field}.matchExpressions");
    check_count(v, &expressions_field, selector.match_expressions.len(), 0, ENTRIES_MAX);
    let mut exprs = Vec::new();
    for (i, expression) in selector.match_expressions.iter().enumerate().take(ENTRIES_MAX) {
        let at = format!("{expressions_field}[{i}]");
        check_pairs(
            v,
            &at,
            &[KeyValue {
                key: expression.key.clone(),
                value: String::new(),
            }],
            1,
            0,
        );
        let values = expression.values.len();
        match expression.operator.as_str() {
            "In" | "NotIn" if !(1..=EXPRESSION_VALUES_MAX).contains(&values) => v.add(
                &format!("{at}.values"),
                format!("must have 1 to {EXPRESSION_VALUES_MAX} entries with In and NotIn, got {values}"),
            ),
            "Exists" | "DoesNotExist" if values > 0 => v.add(
                &format!("{at}.values"),
                format!("must be empty with Exists and DoesNotExist, got {values} entries"),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => v.add(
                &format!("{at}.operator"),
                format!("must be In, NotIn, Exists or DoesNotExist, got {other:?}"),
            ),
        }
        exprs.push(json!([expression.key, expression.operator, expression.values]));
    }
    let allocated = match game_server_selector::GameServerState::try_from(selector.game_server_state) {
        Ok(game_server_selector::GameServerState::Ready) => false,
        Ok(game_server_selector::GameServerState::Allocated) => true,
        Err(_) => {
            v.add(
                &format!("{field}.gameServerState"),
                format!("must be READY (0) or ALLOCATED (1), got {}", selector.game_server_state),
            );
            false
        }
    };
    // Agones reads the player bounds only when maxAvailable is set.
    let players = selector
        .players
        .as_ref()
        .filter(|players| players.max_available != 0)
        .map(|players| json!([players.min_available, players.max_available]));
    let counters_field = format!("{field}.counters");
    check_count(v, &counters_field, selector.counters.len(), 0, ENTRIES_MAX);
    let counters: Vec<Value> = sorted(&selector.counters)
        .into_iter()
        .map(|(name, bounds)| {
            check_name(v, &format!("{counters_field}[{name}]"), name);
            json!([
                name,
                bounds.min_count,
                bounds.max_count,
                bounds.min_available,
                bounds.max_available
            ])
        })
        .collect();
    let lists_field = format!("{field}.lists");
    check_count(v, &lists_field, selector.lists.len(), 0, ENTRIES_MAX);
    let lists: Vec<Value> = sorted(&selector.lists)
        .into_iter()
        .map(|(name, bounds)| {
            check_name(v, &format!("{lists_field}[{name}]"), name);
            json!([name, bounds.contains_value, bounds.min_available, bounds.max_available])
        })
        .collect();
    let labels: Vec<Value> = labels.iter().map(|label| json!([label.key, label.value])).collect();
    Selector {
        fleet,
        lua: json!({
            "allocated": allocated,
            "labels": labels,
            "exprs": exprs,
            "players": players,
            "counters": counters,
            "lists": lists,
        }),
    }
}

fn check_priorities(v: &mut Violations, priorities: &[pb::Priority]) -> Vec<Value> {
    check_count(v, "priorities", priorities.len(), 0, PRIORITIES_MAX);
    priorities
        .iter()
        .enumerate()
        .take(PRIORITIES_MAX)
        .map(|(i, p)| {
            check_name(v, &format!("priorities[{i}].key"), &p.key);
            let kind = match priority::Type::try_from(p.r#type) {
                Ok(priority::Type::Counter) => "counter",
                Ok(priority::Type::List) => "list",
                Err(_) => {
                    v.add(
                        &format!("priorities[{i}].type"),
                        format!("must be Counter (0) or List (1), got {}", p.r#type),
                    );
                    "counter"
                }
            };
            let descending = match priority::Order::try_from(p.order) {
                Ok(order) => order == priority::Order::Descending,
                Err(_) => {
                    v.add(
                        &format!("priorities[{i}].order"),
                        format!("must be Ascending (0) or Descending (1), got {}", p.order),
                    );
                    false
                }
            };
            json!([kind, p.key, descending])
        })
        .collect()
}

fn check_counter_actions(v: &mut Violations, actions: &HashMap<String, pb::CounterAction>) -> Vec<Value> {
    check_count(v, "counters", actions.len(), 0, ENTRIES_MAX);
    sorted(actions)
        .into_iter()
        .map(|(name, action)| {
            let at = format!("counters[{name}]");
            check_name(v, &at, name);
            let capacity = action.capacity.unwrap_or(-1);
            if action.capacity.is_some() {
                check_amount(v, &format!("{at}.capacity"), capacity);
            }
            let delta = match (action.action.as_deref(), action.amount) {
                (None, None) => 0,
                (Some(kind @ ("Increment" | "Decrement")), Some(amount)) => {
                    check_amount(v, &format!("{at}.amount"), amount);
                    if kind == "Increment" { amount } else { -amount }
                }
                (Some("Increment" | "Decrement"), None) | (None, Some(_)) => {
                    v.add(
                        &format!("{at}.amount"),
                        "action and amount are set together or not at all",
                    );
                    0
                }
                (Some(other), _) => {
                    v.add(
                        &format!("{at}.action"),
                        format!("must be Increment or Decrement, got {other:?}"),
                    );
                    0
                }
            };
            json!([name, delta, capacity])
        })
        .collect()
}

fn check_list_values(v: &mut Violations, field: &str, values: &[String]) {
    check_count(v, field, values.len(), 0, LIST_CAPACITY_MAX as usize);
    for (i, value) in values.iter().enumerate().take(LIST_CAPACITY_MAX as usize) {
        v.text(&format!("{field}[{i}]"), value, LIST_VALUE_MAX);
    }
}

fn check_list_actions(v: &mut Violations, actions: &HashMap<String, pb::ListAction>) -> Vec<Value> {
    check_count(v, "lists", actions.len(), 0, ENTRIES_MAX);
    sorted(actions)
        .into_iter()
        .map(|(name, action)| {
            let at = format!("lists[{name}]");
            check_name(v, &at, name);
            let capacity = action.capacity.unwrap_or(-1);
            if action.capacity.is_some() && !(0..=LIST_CAPACITY_MAX).contains(&capacity) {
                v.add(
                    &format!("{at}.capacity"),
                    format!("must be 0 to {LIST_CAPACITY_MAX}, got {capacity}"),
                );
            }
            check_list_values(v, &format!("{at}.addValues"), &action.add_values);
            check_list_values(v, &format!("{at}.deleteValues"), &action.delete_values);
            json!([name, action.add_values, action.delete_values, capacity])
        })
        .collect()
}

/// Checks an allocation request whole; INVALID_ARGUMENT naming every field that breaks a limit.
pub fn check_allocation(req: &pb::AllocationRequest) -> Result<Allocation, Status> {
    let mut v = Violations::new();
    v.text("namespace", &req.namespace, NAMESPACE_MAX);
    if req
        .multi_cluster_setting
        .as_ref()
        .is_some_and(|setting| setting.enabled)
    {
        v.add(
            "multiClusterSetting.enabled",
            "must be false: Berth is one cluster, and allocates from every fleet it runs",
        );
    }
    let asked = selectors_asked(req);
    check_count(&mut v, "gameServerSelectors", asked.len(), 1, SELECTORS_MAX);
    let selectors = asked
        .iter()
        .take(SELECTORS_MAX)
        .map(|(field, selector)| check_selector(&mut v, field, selector))
        .collect();
    let distributed = match allocation_request::SchedulingStrategy::try_from(req.scheduling) {
        Ok(strategy) => strategy == allocation_request::SchedulingStrategy::Distributed,
        Err(_) => {
            v.add(
                "scheduling",
                format!("must be Packed (0) or Distributed (1), got {}", req.scheduling),
            );
            false
        }
    };
    let priorities = check_priorities(&mut v, &req.priorities);
    let (patch, patch_field) = match (&req.metadata, &req.meta_patch) {
        (Some(metadata), _) => (metadata.clone(), "metadata"),
        (None, Some(patch)) => (patch.clone(), "metaPatch"),
        (None, None) => (pb::MetaPatch::default(), "metadata"),
    };
    let labels = key_values(&patch.labels);
    check_labels(&mut v, &format!("{patch_field}.labels"), &labels, LABELS_MAX);
    let annotations = key_values(&patch.annotations);
    check_pairs(
        &mut v,
        &format!("{patch_field}.annotations"),
        &annotations,
        LABELS_MAX,
        ANNOTATION_VALUE_MAX,
    );
    let counter_actions = check_counter_actions(&mut v, &req.counters);
    let list_actions = check_list_actions(&mut v, &req.lists);
    v.into_result()?;
    let pairs = |pairs: &[KeyValue]| -> Vec<Value> { pairs.iter().map(|p| json!([p.key, p.value])).collect() };
    Ok(Allocation {
        selectors,
        distributed,
        common: json!({
            "distributed": distributed,
            "priorities": priorities,
            "patch_labels": pairs(&labels),
            "patch_annotations": pairs(&annotations),
            "counter_actions": counter_actions,
            "list_actions": list_actions,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(labels: &[(&str, &str)]) -> pb::GameServerSelector {
        pb::GameServerSelector {
            match_labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn selectors_name_their_fleet_and_keep_their_order() {
        let req = pb::AllocationRequest {
            game_server_selectors: vec![
                selector(&[(FLEET_LABEL, "blue"), ("version", "2")]),
                selector(&[("version", "1")]),
            ],
            ..Default::default()
        };
        let allocation = check_allocation(&req).unwrap();
        let fleets: Vec<_> = allocation.selectors.iter().map(|s| s.fleet.clone()).collect();
        assert_eq!(fleets, [Some("blue".to_owned()), None]);
        let lua: Value = serde_json::from_str(&allocation.to_lua(&allocation.selectors[0])).unwrap();
        assert_eq!(lua["labels"], json!([[FLEET_LABEL, "blue"], ["version", "2"]]));
        assert_eq!(lua["allocated"], json!(false));
    }

    #[test]
    #[allow(deprecated)]
    fn the_deprecated_pair_is_read_when_selectors_are_absent() {
        let req = pb::AllocationRequest {
            required_game_server_selector: Some(selector(&[(FLEET_LABEL, "blue")])),
            preferred_game_server_selectors: vec![selector(&[("tier", "gold")])],
            ..Default::default()
        };
        let allocation = check_allocation(&req).unwrap();
        assert_eq!(allocation.selectors.len(), 2);
        assert_eq!(allocation.selectors[0].fleet.as_deref(), Some("blue"));
        let first: Value = serde_json::from_str(&allocation.to_lua(&allocation.selectors[0])).unwrap();
        assert_eq!(first["labels"], json!([[FLEET_LABEL, "blue"], ["tier", "gold"]]));
    }

    #[test]
    fn a_bad_request_names_each_field_and_its_limit() {
        let mut bad = selector(&[(FLEET_LABEL, "no{braces}")]);
        bad.game_server_state = 7;
        bad.match_expressions = vec![pb::LabelSelectorRequirement {
            key: "zone".into(),
            operator: "Near".into(),
            values: vec![],
        }];
        let req = pb::AllocationRequest {
            game_server_selectors: vec![bad],
            multi_cluster_setting: Some(pb::MultiClusterSetting {
                enabled: true,
                policy_selector: None,
            }),
            counters: HashMap::from([(
                "rooms".to_owned(),
                pb::CounterAction {
                    action: Some("Double".into()),
                    amount: Some(1),
                    capacity: None,
                },
            )]),
            lists: HashMap::from([(
                "players".to_owned(),
                pb::ListAction {
                    capacity: Some(1001),
                    ..Default::default()
                },
            )]),
            ..Default::default()
        };
        let status = check_allocation(&req).unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        for expected in [
            "multiClusterSetting.enabled",
            "gameServerSelectors[0].matchLabels[agones.dev/fleet]",
            "gameServerSelectors[0].gameServerState",
            "gameServerSelectors[0].matchExpressions[0].operator",
            "counters[rooms].action",
            "lists[players].capacity must be 0 to 1000",
        ] {
            assert!(
                status.message().contains(expected),
                "{expected} missing from {status:?}"
            );
        }
    }

    #[test]
    fn counter_actions_become_signed_changes() {
        let action = |kind: &str, amount| pb::CounterAction {
            action: Some(kind.into()),
            amount: Some(amount),
            capacity: None,
        };
        let req = pb::AllocationRequest {
            counters: HashMap::from([
                ("down".to_owned(), action("Decrement", 2)),
                ("up".to_owned(), action("Increment", 3)),
            ]),
            ..Default::default()
        };
        let allocation = check_allocation(&req).unwrap();
        let lua: Value = serde_json::from_str(&allocation.to_lua(&allocation.selectors[0])).unwrap();
        assert_eq!(lua["counter_actions"], json!([["down", -2, -1], ["up", 3, -1]]));
    }
}
