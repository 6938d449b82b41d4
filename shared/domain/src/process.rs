//! An SDK process: a game server that holds a stream to Berth. What it must tell about itself when it registers,
//! and the limits that registration is checked against.

use std::collections::HashSet;

use berth_proto::common::v1::Endpoint;
use berth_proto::health::v1 as pb;
use tonic::Status;

use crate::game_server::{
    CONNECTION_INFO_MAX, GAME_SERVER_DATA_MAX, INSTANCE_ID_LEN, check_fleet_id, check_game_server_id,
};
use crate::validate::{Violations, check_labels, check_pairs};

/// Locations: 1 to 64 characters.
pub const LOCATION_LEN: (usize, usize) = (1, 64);
/// Most extra ports.
pub const PORTS_MAX: usize = 16;
/// Most game sessions a process hosts at once.
pub const SESSIONS_MAX: u32 = 100;
/// Most players per game session.
pub const PLAYERS_MAX: u32 = 1000;
/// Most labels.
pub const LABELS_MAX: usize = 64;
/// Longest annotation value, in characters (Agones' SetAnnotation through berth-agent); at most LABELS_MAX of them.
pub const ANNOTATION_VALUE_MAX: usize = 1024;
/// Most log paths.
pub const LOG_PATHS_MAX: usize = 16;

/// A registration as stored: the defaults filled in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registration {
    /// Location of its instance.
    pub location: String,
    /// Address players connect to.
    pub ip_address: String,
    /// DNS name players connect to.
    pub dns_name: String,
    /// Main game port.
    pub port: u32,
    /// Most game sessions at once.
    pub max_sessions: u32,
    /// Most players per session.
    pub max_players: u32,
    /// SDK name/version.
    pub sdk_version: String,
}

impl Registration {
    /// The connection info FleetIQ-style callers see: `host:port`.
    pub fn connection_info(&self) -> String {
        let host = if self.dns_name.is_empty() {
            &self.ip_address
        } else {
            &self.dns_name
        };
        format!("{host}:{}", self.port)
    }
}

/// Checks a RegisterProcess message and fills in its defaults.
pub fn check_register(req: &pb::RegisterProcess) -> Result<Registration, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    check_game_server_id(&mut v, "game_server_id", &req.game_server_id);
    v.id("instance_id", &req.instance_id, INSTANCE_ID_LEN.0, INSTANCE_ID_LEN.1);
    v.id("location", &req.location, LOCATION_LEN.0, LOCATION_LEN.1);
    let endpoint = req.endpoint.clone().unwrap_or_default();
    check_endpoint(&mut v, "endpoint", &endpoint);
    if req.ports.len() > PORTS_MAX {
        v.add(
            "ports",
            format!("must have at most {PORTS_MAX} entries, got {}", req.ports.len()),
        );
    }
    let mut names = HashSet::new();
    for (i, port) in req.ports.iter().enumerate() {
        let valid_name = (1..=32).contains(&port.name.len())
            && port
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid_name {
            v.add(&format!("ports[{i}].name"), "must be 1 to 32 characters of a-z 0-9 -");
        } else if !names.insert(port.name.as_str()) {
            v.add(&format!("ports[{i}].name"), format!("{:?} is named twice", port.name));
        }
        if !(1..=65535).contains(&port.port) {
            v.add(
                &format!("ports[{i}].port"),
                format!("must be 1 to 65535, got {}", port.port),
            );
        }
    }
    if req.max_concurrent_game_sessions > SESSIONS_MAX {
        let got = req.max_concurrent_game_sessions;
        v.add(
            "max_concurrent_game_sessions",
            format!("must be at most {SESSIONS_MAX}, got {got}"),
        );
    }
    if req.max_players > PLAYERS_MAX {
        v.add(
            "max_players",
            format!("must be at most {PLAYERS_MAX}, got {}", req.max_players),
        );
    }
    check_labels(&mut v, "labels", &req.labels, LABELS_MAX);
    let sdk_len = req.sdk_version.chars().count();
    if !(1..=64).contains(&sdk_len) {
        v.add("sdk_version", format!("must be 1 to 64 characters long, got {sdk_len}"));
    }
    check_log_paths(&mut v, "log_paths", &req.log_paths);
    v.text("game_server_data", &req.game_server_data, GAME_SERVER_DATA_MAX);
    v.text("resume_registration_id", &req.resume_registration_id, 64);
    v.into_result()?;
    let registration = Registration {
        location: req.location.clone(),
        ip_address: endpoint.ip_address,
        dns_name: endpoint.dns_name,
        port: endpoint.port,
        max_sessions: req.max_concurrent_game_sessions.max(1),
        max_players: if req.max_players == 0 {
            PLAYERS_MAX
        } else {
            req.max_players
        },
        sdk_version: req.sdk_version.clone(),
    };
    let mut v = Violations::new();
    v.text("endpoint", &registration.connection_info(), CONNECTION_INFO_MAX);
    v.into_result().map(|()| registration)
}

/// Checks where players connect: an address or a DNS name, and a port.
fn check_endpoint(v: &mut Violations, field: &str, endpoint: &Endpoint) {
    if endpoint.ip_address.is_empty() && endpoint.dns_name.is_empty() {
        v.add(field, "must have ip_address or dns_name");
    }
    v.text(&format!("{field}.ip_address"), &endpoint.ip_address, 64);
    v.text(&format!("{field}.dns_name"), &endpoint.dns_name, 256);
    if !(1..=65535).contains(&endpoint.port) {
        v.add(
            &format!("{field}.port"),
            format!("must be 1 to 65535, got {}", endpoint.port),
        );
    }
}

fn check_log_paths(v: &mut Violations, field: &str, paths: &[String]) {
    if paths.len() > LOG_PATHS_MAX {
        v.add(
            field,
            format!("must have at most {LOG_PATHS_MAX} entries, got {}", paths.len()),
        );
    }
    for (i, path) in paths.iter().enumerate() {
        v.text(&format!("{field}[{i}]"), path, 1024);
    }
}

/// Checks a ProcessReady message; the new endpoint, when it gives one, with the connection info FleetIQ-style
/// callers see.
pub fn check_ready(req: &pb::ProcessReady) -> Result<Option<(Endpoint, String)>, Status> {
    let mut v = Violations::new();
    if let Some(endpoint) = &req.endpoint {
        check_endpoint(&mut v, "ready.endpoint", endpoint);
    }
    check_log_paths(&mut v, "ready.log_paths", &req.log_paths);
    v.into_result()?;
    let Some(endpoint) = req.endpoint.clone() else {
        return Ok(None);
    };
    let registration = Registration {
        ip_address: endpoint.ip_address.clone(),
        dns_name: endpoint.dns_name.clone(),
        port: endpoint.port,
        ..Registration::default()
    };
    let connection_info = registration.connection_info();
    let mut v = Violations::new();
    v.text("ready.endpoint", &connection_info, CONNECTION_INFO_MAX);
    v.into_result().map(|()| Some((endpoint, connection_info)))
}

/// Longest request id of the SDK stream.
pub const REQUEST_ID_MAX: usize = 64;

/// Checks the request id of a message on the SDK stream: 1 to 64 printable ASCII characters.
pub fn check_request_id(request_id: &str) -> Result<(), Status> {
    let mut v = Violations::new();
    v.printable("request_id", request_id, 1, REQUEST_ID_MAX);
    v.into_result()
}

/// Longest reason a process gives for rejecting a game session.
pub const REJECT_REASON_MAX: usize = 1024;

/// Checks a RejectGameSession message's reason (its game session id is the session service's to check).
pub fn check_reject(reject: &pb::RejectGameSession) -> Result<(), Status> {
    let mut v = Violations::new();
    v.text("reason", &reject.reason, REJECT_REASON_MAX);
    v.into_result()
}

/// Checks a heartbeat: its health must be reported.
pub fn check_heartbeat(heartbeat: &pb::Heartbeat) -> Result<(), Status> {
    let mut v = Violations::new();
    if heartbeat.health() == pb::ProcessHealth::Unspecified {
        v.add("heartbeat.health", "must be HEALTHY or UNHEALTHY");
    }
    v.into_result()
}

/// Checks an UpdatePlayerSessionCreationPolicy message of the SDK stream; whether it opens the session to players.
pub fn check_creation_policy(req: &pb::UpdatePlayerSessionCreationPolicy) -> Result<bool, Status> {
    use berth_proto::session::v1::PlayerSessionCreationPolicy as Policy;
    let mut v = Violations::new();
    let accepts = match req.player_session_creation_policy() {
        Policy::AcceptAll => true,
        Policy::DenyAll => false,
        Policy::Unspecified => {
            v.add("player_session_creation_policy", "must be ACCEPT_ALL or DENY_ALL");
            false
        }
    };
    v.into_result().map(|()| accepts)
}

/// Most counters one process keeps, and one UpdateServer sets; likewise lists.
pub const COUNTERS_MAX: usize = 16;
/// Largest counter value or capacity: 2^62.
pub const COUNTER_MAX: i64 = 1 << 62;

/// Most values a list holds (its capacity at most), as on Agones.
pub const LIST_CAPACITY_MAX: i64 = 1000;
/// Longest list value, in characters.
pub const LIST_VALUE_MAX: usize = 128;
/// Counter and list names: 1 to 32 characters of `[A-Za-z0-9_.-]`.
pub const NAME_LEN: (usize, usize) = (1, 32);

/// Checks a list's values: at most `most`, unique, each 1 to [`LIST_VALUE_MAX`] characters.
pub fn check_list_values(v: &mut Violations, field: &str, values: &[String], most: usize) {
    if values.len() > most {
        v.add(field, format!("must have at most {most} entries, got {}", values.len()));
    }
    let mut seen = HashSet::new();
    for (i, value) in values.iter().enumerate().take(LIST_CAPACITY_MAX as usize) {
        let len = value.chars().count();
        if !(1..=LIST_VALUE_MAX).contains(&len) {
            v.add(
                &format!("{field}[{i}]"),
                format!("must be 1 to {LIST_VALUE_MAX} characters long, got {len}"),
            );
        } else if !seen.insert(value.as_str()) {
            v.add(&format!("{field}[{i}]"), format!("{value:?} is given twice"));
        }
    }
}

/// Checks an UpdateServer message against the contract's limits (the per-process counter limit is checked where
/// the counters are merged, atomically).
pub fn check_update_server(req: &pb::UpdateServer) -> Result<(), Status> {
    let mut v = Violations::new();
    if let Some(data) = &req.game_server_data {
        v.text("update_server.game_server_data", data, GAME_SERVER_DATA_MAX);
    }
    if let Some(labels) = &req.labels {
        check_labels(&mut v, "update_server.labels.labels", &labels.labels, LABELS_MAX);
    }
    if let Some(annotations) = &req.annotations {
        let field = "update_server.annotations.annotations";
        check_pairs(
            &mut v,
            field,
            &annotations.annotations,
            LABELS_MAX,
            ANNOTATION_VALUE_MAX,
        );
    }
    check_labels(&mut v, "update_server.set_labels", &req.set_labels, LABELS_MAX);
    check_pairs(
        &mut v,
        "update_server.set_annotations",
        &req.set_annotations,
        LABELS_MAX,
        ANNOTATION_VALUE_MAX,
    );
    if req.counters.len() > COUNTERS_MAX {
        v.add(
            "update_server.counters",
            format!("must have at most {COUNTERS_MAX} entries, got {}", req.counters.len()),
        );
    }
    let mut names = HashSet::new();
    for (i, counter) in req.counters.iter().enumerate() {
        let field = format!("update_server.counters[{i}]");
        v.id(&format!("{field}.name"), &counter.name, NAME_LEN.0, NAME_LEN.1);
        if !names.insert(counter.name.as_str()) {
            v.add(&format!("{field}.name"), format!("{:?} is given twice", counter.name));
        }
        if !(0..=COUNTER_MAX).contains(&counter.capacity) {
            v.add(
                &format!("{field}.capacity"),
                format!("must be 0 (no limit) to 2^62, got {}", counter.capacity),
            );
        }
        let most = if counter.capacity == 0 {
            COUNTER_MAX
        } else {
            counter.capacity
        };
        if !(0..=most).contains(&counter.count) {
            v.add(
                &format!("{field}.count"),
                format!(
                    "must be 0 to {most} (its capacity, or 2^62 without one), got {}",
                    counter.count
                ),
            );
        }
    }
    if req.lists.len() > COUNTERS_MAX {
        v.add(
            "update_server.lists",
            format!("must have at most {COUNTERS_MAX} entries, got {}", req.lists.len()),
        );
    }
    let mut names = HashSet::new();
    for (i, list) in req.lists.iter().enumerate().take(COUNTERS_MAX) {
        let field = format!("update_server.lists[{i}]");
        v.id(&format!("{field}.name"), &list.name, NAME_LEN.0, NAME_LEN.1);
        if !names.insert(list.name.as_str()) {
            v.add(&format!("{field}.name"), format!("{:?} is given twice", list.name));
        }
        if !(0..=LIST_CAPACITY_MAX).contains(&list.capacity) {
            v.add(
                &format!("{field}.capacity"),
                format!("must be 0 to {LIST_CAPACITY_MAX}, got {}", list.capacity),
            );
        }
        let most = list.capacity.clamp(0, LIST_CAPACITY_MAX) as usize;
        check_list_values(&mut v, &format!("{field}.values"), &list.values, most);
    }
    check_changes(&mut v, req);
    v.into_result()
}

/// Checks the counter and list changes of an UpdateServer; whether each can be made is known only where they are
/// stored.
fn check_changes(v: &mut Violations, req: &pb::UpdateServer) {
    for (field, count) in [
        ("update_server.counter_changes", req.counter_changes.len()),
        ("update_server.list_changes", req.list_changes.len()),
    ] {
        if count > COUNTERS_MAX {
            v.add(field, format!("must have at most {COUNTERS_MAX} entries, got {count}"));
        }
    }
    for (i, change) in req.counter_changes.iter().enumerate().take(COUNTERS_MAX) {
        let field = format!("update_server.counter_changes[{i}]");
        v.id(&format!("{field}.name"), &change.name, NAME_LEN.0, NAME_LEN.1);
        for (part, value) in [("capacity", change.capacity), ("count", change.count)] {
            if value.is_some_and(|value| !(0..=COUNTER_MAX).contains(&value)) {
                v.add(
                    &format!("{field}.{part}"),
                    format!("must be 0 to 2^62, got {}", value.unwrap_or_default()),
                );
            }
        }
        if !(-COUNTER_MAX..=COUNTER_MAX).contains(&change.count_diff) {
            v.add(
                &format!("{field}.count_diff"),
                format!("must be -2^62 to 2^62, got {}", change.count_diff),
            );
        }
    }
    let most = LIST_CAPACITY_MAX as usize;
    for (i, change) in req.list_changes.iter().enumerate().take(COUNTERS_MAX) {
        let field = format!("update_server.list_changes[{i}]");
        v.id(&format!("{field}.name"), &change.name, NAME_LEN.0, NAME_LEN.1);
        if change
            .capacity
            .is_some_and(|capacity| !(0..=LIST_CAPACITY_MAX).contains(&capacity))
        {
            v.add(
                &format!("{field}.capacity"),
                format!(
                    "must be 0 to {LIST_CAPACITY_MAX}, got {}",
                    change.capacity.unwrap_or_default()
                ),
            );
        }
        if !change.replace_values && !change.values.is_empty() {
            v.add(&format!("{field}.values"), "must be empty unless replace_values is set");
        }
        // Repeats are dropped when values replace a list, so only their count and length are checked.
        if change.values.len() > most {
            v.add(
                &format!("{field}.values"),
                format!("must have at most {most} entries, got {}", change.values.len()),
            );
        }
        for (i, value) in change.values.iter().enumerate().take(most) {
            let len = value.chars().count();
            if !(1..=LIST_VALUE_MAX).contains(&len) {
                v.add(
                    &format!("{field}.values[{i}]"),
                    format!("must be 1 to {LIST_VALUE_MAX} characters long, got {len}"),
                );
            }
        }
        check_list_values(v, &format!("{field}.add_values"), &change.add_values, most);
        check_list_values(v, &format!("{field}.remove_values"), &change.remove_values, most);
    }
}

#[cfg(test)]
mod tests {
    use berth_proto::common::v1::Endpoint;

    use super::*;

    fn valid() -> pb::RegisterProcess {
        pb::RegisterProcess {
            fleet_id: "arena".into(),
            game_server_id: "gs-1".into(),
            instance_id: "i-1".into(),
            location: "eu-west".into(),
            endpoint: Some(Endpoint {
                ip_address: "10.0.0.1".into(),
                dns_name: String::new(),
                port: 7777,
            }),
            sdk_version: "berth-rust/0.1.0".into(),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_fill_in() {
        let registration = check_register(&valid()).unwrap();
        assert_eq!(registration.max_sessions, 1);
        assert_eq!(registration.max_players, PLAYERS_MAX);
        assert_eq!(registration.connection_info(), "10.0.0.1:7777");
    }

    #[test]
    fn every_broken_rule_is_named() {
        let mut req = valid();
        req.endpoint = None;
        req.ports = vec![
            pb::ServerPort {
                name: "voice".into(),
                port: 9000,
                protocol: 0,
            },
            pb::ServerPort {
                name: "voice".into(),
                port: 0,
                protocol: 0,
            },
        ];
        req.max_players = 1001;
        let status = check_register(&req).unwrap_err();
        let details = tonic_types::StatusExt::get_details_bad_request(&status).unwrap();
        let fields: Vec<_> = details.field_violations.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "endpoint",
                "endpoint.port",
                "ports[1].name",
                "ports[1].port",
                "max_players"
            ]
        );
    }
}
