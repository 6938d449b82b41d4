//! What a process reads and changes of its own server record over its stream: DescribeServer (its record, what it
//! registered and last reported, its open sessions) and UpdateServer (data, utilization, labels, counters).

use berth_domain::game_server::UtilizationChange;
use berth_domain::process::check_update_server;
use berth_domain::stored::GameState;
use berth_domain::validate::invalid;
use berth_proto::common::v1::{Endpoint, KeyValue};
use berth_proto::health::v1 as pb;
use berth_store::pool::{Update, Updated};
use berth_store::processes::{
    self as store, ChangeRefused, CounterChange, Described, ListChange, ProcessUpdated, RecordChanges, Reservation,
};
use tonic::{Code, Status};

use super::{ProcessStream, refusal, reply};

/// Longest reservation (ReserveServer.duration_seconds): a day.
const RESERVATION_MAX_SECONDS: u32 = 86_400;

impl ProcessStream {
    /// The server as it describes itself: its record, what it registered and last reported, its open sessions.
    async fn description(&self, server: Described) -> Result<pb::ServerDescription, Status> {
        let desired = self.desired().await?;
        let Described { record, details } = server;
        let reserved_until_time = record.reserved_until_ms.map(berth_domain::game_server::timestamp);
        let (healthy, game_state, players) = match &self.reported {
            Some(reported) => (reported.healthy, reported.game_state, reported.players.clone()),
            None => {
                let state = details
                    .game_state
                    .map_or(pb::GameState::Unspecified, GameState::to_proto);
                (details.healthy, state as i32, Vec::new())
            }
        };
        let health = if healthy {
            pb::ProcessHealth::Healthy
        } else {
            pb::ProcessHealth::Unhealthy
        };
        Ok(pb::ServerDescription {
            game_server: Some(record.into()),
            registration_id: self.registration_id.to_string(),
            game_state,
            health: health as i32,
            labels: details
                .labels
                .into_iter()
                .map(|(key, value)| KeyValue { key, value })
                .collect(),
            annotations: details
                .annotations
                .into_iter()
                .map(|(key, value)| KeyValue { key, value })
                .collect(),
            counters: details
                .counters
                .into_iter()
                .map(|(name, count, capacity)| pb::ServerCounter { name, count, capacity })
                .collect(),
            lists: details
                .lists
                .into_iter()
                .map(|(name, capacity, values)| pb::ServerList { name, capacity, values })
                .collect(),
            reserved_until_time,
            game_session_ids: desired
                .map(|desired| {
                    desired
                        .sessions
                        .into_iter()
                        .map(|hosted| hosted.session.game_session_id)
                        .collect()
                })
                .unwrap_or_default(),
            connected_player_ids: players,
            max_concurrent_game_sessions: details.registration.max_sessions,
            max_players: details.registration.max_players,
            location: details.registration.location,
            endpoint: Some(Endpoint {
                ip_address: details.registration.ip_address,
                dns_name: details.registration.dns_name,
                port: details.registration.port,
            }),
            ports: details
                .ports
                .into_iter()
                .map(|(name, port, protocol)| pb::ServerPort { name, port, protocol })
                .collect(),
        })
    }

    /// The reply carrying the server's description.
    async fn described(&self, id: &str, server: Described) -> pb::AttachResponse {
        match self.description(server).await {
            Ok(description) => reply(id, Code::Ok, "", Some(pb::reply::Result::Server(description))),
            Err(status) => refusal(id, &status),
        }
    }

    /// The push telling the process that its record was changed from outside its stream; none when the record
    /// cannot be read now (the process reads it itself once its stream resumes).
    pub(super) async fn changed(&self) -> Option<pb::ServerChanged> {
        let server = store::describe(&self.context.store, &self.fleet_id, &self.game_server_id)
            .await
            .ok()??;
        let description = self.description(server).await.ok()?;
        Some(pb::ServerChanged {
            server: Some(description),
        })
    }

    pub(super) async fn describe(&self, id: &str) -> pb::AttachResponse {
        match store::describe(&self.context.store, &self.fleet_id, &self.game_server_id).await {
            Ok(Some(server)) => self.described(id, server).await,
            Ok(None) => reply(id, Code::NotFound, "this process is no longer registered", None),
            Err(err) => reply(id, Code::Unavailable, err.to_string(), None),
        }
    }

    pub(super) async fn reserve(&self, id: &str, reserve: pb::ReserveServer) -> pb::AttachResponse {
        let seconds = reserve.duration_seconds;
        if seconds > RESERVATION_MAX_SECONDS {
            return refusal(
                id,
                &invalid(
                    "reserve.duration_seconds",
                    format!("must be 0 to {RESERVATION_MAX_SECONDS}, got {seconds}"),
                ),
            );
        }
        match store::reserve(&self.context.store, &self.process(), u64::from(seconds) * 1000).await {
            Ok(Reservation::Done(server)) => self.described(id, *server).await,
            Ok(Reservation::Busy) => reply(
                id,
                Code::FailedPrecondition,
                "only a ready server that hosts no game session and is neither claimed nor UTILIZED can be reserved",
                None,
            ),
            Ok(Reservation::Lost) => reply(id, Code::NotFound, "this process is no longer registered", None),
            Err(err) => reply(id, Code::Unavailable, err.to_string(), None),
        }
    }

    pub(super) async fn update(&self, id: &str, update: pb::UpdateServer) -> pb::AttachResponse {
        if let Err(status) = check_update_server(&update) {
            return refusal(id, &status);
        }
        let change = Update {
            fleet_id: &self.fleet_id,
            game_server_id: &self.game_server_id,
            game_server_data: update.game_server_data.as_deref(),
            utilization: if update.mark_utilized {
                UtilizationChange::Utilized
            } else {
                UtilizationChange::Keep
            },
            healthy: false,
            claim_id: None,
            claimant_only: false,
        };
        let pairs = |pairs: Vec<KeyValue>| -> Vec<(String, String)> {
            pairs.into_iter().map(|pair| (pair.key, pair.value)).collect()
        };
        let changes = RecordChanges {
            labels: update.labels.map(|labels| pairs(labels.labels)),
            annotations: update.annotations.map(|annotations| pairs(annotations.annotations)),
            set_labels: pairs(update.set_labels),
            set_annotations: pairs(update.set_annotations),
            counters: update
                .counters
                .into_iter()
                .map(|counter| (counter.name, counter.count, counter.capacity))
                .collect(),
            lists: update
                .lists
                .into_iter()
                .map(|list| (list.name, list.capacity, list.values))
                .collect(),
            counter_changes: update
                .counter_changes
                .into_iter()
                .map(|change| CounterChange {
                    name: change.name,
                    capacity: change.capacity,
                    count: change.count,
                    diff: change.count_diff,
                })
                .collect(),
            list_changes: update
                .list_changes
                .into_iter()
                .map(|change| ListChange {
                    name: change.name,
                    capacity: change.capacity,
                    values: change.replace_values.then_some(change.values),
                    add: change.add_values,
                    remove: change.remove_values,
                })
                .collect(),
        };
        let updated = store::update(&self.context.store, &change, &changes);
        match updated.await {
            Ok(ProcessUpdated::Updated(Updated::Done(server))) => self.described(id, *server).await,
            Ok(ProcessUpdated::Updated(Updated::NotFound)) => {
                reply(id, Code::NotFound, "this process is no longer registered", None)
            }
            Ok(ProcessUpdated::Updated(Updated::ClaimLapsed)) => reply(
                id,
                Code::FailedPrecondition,
                "its claim lapsed; it is in the pool again",
                None,
            ),
            Ok(ProcessUpdated::Updated(Updated::AlreadyUtilized | Updated::NotClaimant)) => {
                reply(id, Code::FailedPrecondition, "it is UTILIZED already", None)
            }
            Ok(ProcessUpdated::TooManyCounters) => refusal(
                id,
                &invalid(
                    "update_server.counters",
                    format!(
                        "would leave the server more than {} counters; remove some (count and capacity 0)",
                        berth_domain::process::COUNTERS_MAX
                    ),
                ),
            ),
            Ok(ProcessUpdated::TooManyLists) => refusal(
                id,
                &invalid(
                    "update_server.lists",
                    format!(
                        "would leave the server more than {} lists; remove some (capacity 0 and no values)",
                        berth_domain::process::COUNTERS_MAX
                    ),
                ),
            ),
            Ok(ProcessUpdated::TooManyLabels) => refusal(
                id,
                &invalid(
                    "update_server.set_labels",
                    format!(
                        "would leave the server more than {} labels",
                        berth_domain::process::LABELS_MAX
                    ),
                ),
            ),
            Ok(ProcessUpdated::TooManyAnnotations) => refusal(
                id,
                &invalid(
                    "update_server.set_annotations",
                    format!(
                        "would leave the server more than {} annotations",
                        berth_domain::process::LABELS_MAX
                    ),
                ),
            ),
            Ok(ProcessUpdated::Refused(refused)) => {
                let (code, message) = match refused {
                    ChangeRefused::NoCounter(name) => (Code::NotFound, format!("this process has no counter {name:?}")),
                    ChangeRefused::NoList(name) => (Code::NotFound, format!("this process has no list {name:?}")),
                    ChangeRefused::OutOfRange(name) => (
                        Code::OutOfRange,
                        format!(
                            "{name:?} would leave its range: a count within 0 and the capacity, a list within its capacity"
                        ),
                    ),
                    ChangeRefused::ValueExists(name, value) => {
                        (Code::AlreadyExists, format!("list {name:?} holds {value:?} already"))
                    }
                    ChangeRefused::NoValue(name, value) => {
                        (Code::NotFound, format!("list {name:?} does not hold {value:?}"))
                    }
                };
                reply(id, code, message, None)
            }
            Err(err) => reply(id, Code::Unavailable, err.to_string(), None),
        }
    }
}
