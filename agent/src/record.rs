//! Berth's record of a process in Agones' shape: the state from the process and what it hosts, the metadata from its
//! labels and the agent's annotations, the health spec from the fleet's heartbeat settings.

use std::collections::HashMap;

use berth_proto::agones::sdk::game_server::{ObjectMeta, Spec, Status, spec, status};
use berth_proto::agones::sdk::{self as agones};
use berth_proto::health::v1::{ClaimStatus, GameState, ProcessHealth, ServerDescription, UtilizationStatus};
use berth_proto::session::v1::GameSession;
use berth_sdk::game_server::HeartbeatSettings;

use crate::view::AgentState;

/// Prefix Agones gives the keys of labels and annotations set through the SDK.
pub const SDK_PREFIX: &str = "agones.dev/sdk-";

/// Annotation keys of the game session a server hosts.
pub const SESSION_ID: &str = "berth.dev/game-session-id";
pub const SESSION_NAME: &str = "berth.dev/game-session-name";
pub const SESSION_DATA: &str = "berth.dev/game-session-data";
pub const MATCHMAKER_DATA: &str = "berth.dev/matchmaker-data";
pub const PROPERTY_PREFIX: &str = "berth.dev/property-";

/// The Agones state of a server: Shutdown once it ends, Unhealthy when it last reported so, Reserved while it holds
/// itself out, Allocated when it hosts a game session, was claimed or marked itself utilized, Ready once it said
/// ready, else Scheduled.
fn state(description: &ServerDescription, agent: &AgentState) -> &'static str {
    let server = description.game_server.clone().unwrap_or_default();
    // Redis' clock judged the reservation when the record was read; the agent's own clock is not asked.
    let reserved = description.reserved_until_time.is_some();
    if agent.shutdown || description.game_state() >= GameState::Terminating {
        "Shutdown"
    } else if description.health() == ProcessHealth::Unhealthy {
        "Unhealthy"
    } else if reserved {
        "Reserved"
    } else if !description.game_session_ids.is_empty()
        || server.utilization_status() == UtilizationStatus::Utilized
        || server.claim_status() == ClaimStatus::Claimed
    {
        "Allocated"
    } else if agent.ready || description.game_state() >= GameState::StandingBy {
        "Ready"
    } else {
        "Scheduled"
    }
}

/// The annotations that show a game session to the server hosting it.
pub fn session_annotations(session: &GameSession) -> std::collections::BTreeMap<String, String> {
    let mut annotations = std::collections::BTreeMap::from([
        (SESSION_ID.to_owned(), session.game_session_id.clone()),
        (SESSION_NAME.to_owned(), session.name.clone()),
        (SESSION_DATA.to_owned(), session.game_session_data.clone()),
        (MATCHMAKER_DATA.to_owned(), session.matchmaker_data.clone()),
    ]);
    for property in &session.game_properties {
        annotations.insert(format!("{PROPERTY_PREFIX}{}", property.key), property.value.clone());
    }
    annotations
}

/// Seconds since the Unix epoch of a protobuf time; 0 when unset.
fn epoch_seconds(time: Option<prost_types::Timestamp>) -> i64 {
    time.map_or(0, |time| time.seconds)
}

/// The server as Agones shows it.
pub fn game_server(
    description: &ServerDescription,
    agent: &AgentState,
    version: u64,
    heartbeats: HeartbeatSettings,
) -> agones::GameServer {
    let server = description.game_server.clone().unwrap_or_default();
    let endpoint = description.endpoint.clone().unwrap_or_default();
    let mut addresses = Vec::new();
    if !endpoint.ip_address.is_empty() {
        addresses.push(status::Address {
            r#type: "ExternalIP".into(),
            address: endpoint.ip_address.clone(),
        });
    }
    if !endpoint.dns_name.is_empty() {
        addresses.push(status::Address {
            r#type: "ExternalDNS".into(),
            address: endpoint.dns_name.clone(),
        });
    }
    let mut ports = vec![status::Port {
        name: "default".into(),
        port: endpoint.port as i32,
    }];
    ports.extend(description.ports.iter().map(|port| status::Port {
        name: port.name.clone(),
        port: port.port as i32,
    }));
    let mut annotations: HashMap<String, String> = description
        .annotations
        .iter()
        .map(|annotation| (annotation.key.clone(), annotation.value.clone()))
        .collect();
    annotations.extend(agent.session.clone());
    let counters = description
        .counters
        .iter()
        .map(|counter| {
            let status = status::CounterStatus {
                count: counter.count,
                capacity: counter.capacity,
            };
            (counter.name.clone(), status)
        })
        .collect();
    agones::GameServer {
        object_meta: Some(ObjectMeta {
            name: server.game_server_id.clone(),
            namespace: server.fleet_id.clone(),
            uid: description.registration_id.clone(),
            resource_version: version.to_string(),
            generation: version as i64,
            creation_timestamp: epoch_seconds(server.registration_time),
            deletion_timestamp: agent.ending_since,
            annotations,
            labels: description
                .labels
                .iter()
                .map(|label| (label.key.clone(), label.value.clone()))
                .collect(),
        }),
        spec: Some(Spec {
            health: Some(spec::Health {
                disabled: false,
                period_seconds: heartbeats.interval.as_secs().max(1) as i32,
                failure_threshold: heartbeats.unhealthy_after as i32,
                initial_delay_seconds: 0,
            }),
        }),
        status: Some(Status {
            state: state(description, agent).into(),
            address: if endpoint.ip_address.is_empty() {
                endpoint.dns_name.clone()
            } else {
                endpoint.ip_address.clone()
            },
            addresses,
            ports,
            players: Some(status::PlayerStatus {
                count: agent.players.len() as i64,
                capacity: agent.capacity,
                ids: agent.players.iter().map(|player| player.id.clone()).collect(),
            }),
            counters,
            lists: description
                .lists
                .iter()
                .map(|list| {
                    let status = status::ListStatus {
                        capacity: list.capacity,
                        values: list.values.clone(),
                    };
                    (list.name.clone(), status)
                })
                .collect(),
        }),
    }
}
