//! Game session placements (`berth/placement/v1/placements.proto`): every limit of PlacementService's requests,
//! checked whole so that a refusal names each field it breaks and changes nothing. A game session's own limits
//! (players, properties, name, data) are the session service's, shared from `game_session::check`.

use std::collections::HashSet;

use berth_proto::placement::v1 as pb;
use tonic::Status;

use crate::game_server::{PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX};
use crate::game_session::check::{
    NAME_MAX, PLAYER_DATA_MAX, check_data, check_game_properties, check_maximum_players, check_player_id,
};
use crate::process::LOCATION_LEN;
use crate::queue::check_name;
use crate::validate::{Violations, check_count, check_page_size, checked_entries};
use crate::watch::{check_event_types, check_watch_start};

pub mod metrics;

/// Placement ids: 1 to 48 characters of `[A-Za-z0-9_-]`.
pub const PLACEMENT_ID_LEN: (usize, usize) = (1, 48);
/// Player latencies of a request.
pub const LATENCIES_MAX: usize = 1000;
/// A reported latency, ms.
pub const LATENCY_MAX_MS: u32 = 60_000;
/// Players reserved with the game session.
pub const DESIRED_PLAYERS_MAX: usize = 100;
/// Locations of a request's override.
pub const OVERRIDE_LOCATIONS_MAX: usize = 10;

/// Queues or placements a watch may name.
pub const WATCH_NAMES_MAX: usize = 100;
/// Event types a watch may name.
pub const WATCH_TYPES_MAX: usize = 5;
/// A metrics window, s: (least, most, when unset).
pub const METRICS_WINDOW_S: (u32, u32, u32) = (60, 86_400, 300);

/// Checks a placement id, in `field`.
pub fn check_placement_id(v: &mut Violations, field: &str, id: &str) {
    v.name(field, id, PLACEMENT_ID_LEN.0, PLACEMENT_ID_LEN.1);
}

/// Checks a StartGameSessionPlacementRequest.
pub fn check_start(req: &pb::StartGameSessionPlacementRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_placement_id(&mut v, "placement_id", &req.placement_id);
    check_name(&mut v, "queue_name", &req.queue_name);
    check_maximum_players(&mut v, req.maximum_player_session_count);
    check_game_properties(&mut v, &req.game_properties);
    v.text("game_session_name", &req.game_session_name, NAME_MAX);
    check_data(&mut v, "game_session_data", &req.game_session_data);
    check_data(&mut v, "matchmaker_data", &req.matchmaker_data);
    check_latencies(&mut v, &req.player_latencies);
    check_desired_players(&mut v, &req.desired_player_sessions, req.maximum_player_session_count);
    if let Some(preference) = &req.priority_configuration_override {
        check_override(&mut v, preference);
    }
    v.into_result()
}

/// Checks a StopGameSessionPlacementRequest.
pub fn check_stop(req: &pb::StopGameSessionPlacementRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_placement_id(&mut v, "placement_id", &req.placement_id);
    v.into_result()
}

/// Checks a ListGameSessionPlacementsRequest; the page size to serve (the token is checked where it is redeemed).
pub fn check_list(req: &pb::ListGameSessionPlacementsRequest) -> Result<usize, Status> {
    let mut v = Violations::new();
    check_name(&mut v, "queue_name", &req.queue_name);
    let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
    v.into_result().map(|()| size)
}

/// Checks a DescribeGameSessionPlacementRequest.
pub fn check_describe(req: &pb::DescribeGameSessionPlacementRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_placement_id(&mut v, "placement_id", &req.placement_id);
    v.into_result()
}

/// Checks a WatchGameSessionPlacementsRequest.
pub fn check_watch(req: &pb::WatchGameSessionPlacementsRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_count(&mut v, "queue_names", req.queue_names.len(), 0, WATCH_NAMES_MAX);
    for (i, name) in checked_entries(&req.queue_names, WATCH_NAMES_MAX) {
        check_name(&mut v, &format!("queue_names[{i}]"), name);
    }
    check_count(&mut v, "placement_ids", req.placement_ids.len(), 0, WATCH_NAMES_MAX);
    for (i, id) in checked_entries(&req.placement_ids, WATCH_NAMES_MAX) {
        check_placement_id(&mut v, &format!("placement_ids[{i}]"), id);
    }
    check_event_types(
        &mut v,
        &req.event_types,
        WATCH_TYPES_MAX,
        |t| matches!(pb::PlacementEventType::try_from(t), Ok(t) if t != pb::PlacementEventType::Unspecified),
    );
    check_watch_start(&mut v, &req.after_cursor, req.from_oldest);
    v.into_result()
}

/// Checks a GetQueueMetricsRequest; the window it asks for, in whole minutes.
pub fn check_metrics(req: &pb::GetQueueMetricsRequest) -> Result<u32, Status> {
    let mut v = Violations::new();
    check_name(&mut v, "queue_name", &req.queue_name);
    let (least, most, unset) = METRICS_WINDOW_S;
    let seconds = if req.window_seconds == 0 {
        unset
    } else {
        req.window_seconds
    };
    if !(least..=most).contains(&seconds) {
        v.add(
            "window_seconds",
            format!("must be {least} to {most} s (0 for {unset}), got {seconds}"),
        );
    }
    v.into_result()?;
    Ok(seconds.div_ceil(60))
}

fn check_latencies(v: &mut Violations, latencies: &[pb::PlayerLatency]) {
    check_count(v, "player_latencies", latencies.len(), 0, LATENCIES_MAX);
    let mut seen = HashSet::new();
    for (i, latency) in checked_entries(latencies, LATENCIES_MAX) {
        check_player_id(v, &format!("player_latencies[{i}].player_id"), &latency.player_id);
        let location = format!("player_latencies[{i}].location");
        v.id(&location, &latency.location, LOCATION_LEN.0, LOCATION_LEN.1);
        if !seen.insert((latency.player_id.as_str(), latency.location.as_str())) {
            v.add(&location, "repeats a player's latency to this location");
        }
        if latency.latency_ms > LATENCY_MAX_MS {
            v.add(
                &format!("player_latencies[{i}].latency_ms"),
                format!("must be at most {LATENCY_MAX_MS} ms, got {}", latency.latency_ms),
            );
        }
    }
}

fn check_desired_players(v: &mut Violations, players: &[pb::DesiredPlayerSession], maximum: u32) {
    let field = "desired_player_sessions";
    check_count(v, field, players.len(), 0, DESIRED_PLAYERS_MAX);
    if players.len() <= DESIRED_PLAYERS_MAX && players.len() > maximum as usize {
        v.add(
            field,
            format!(
                "holds {} players, more than maximum_player_session_count {maximum}",
                players.len()
            ),
        );
    }
    let mut seen = HashSet::new();
    for (i, player) in checked_entries(players, DESIRED_PLAYERS_MAX) {
        let id = format!("{field}[{i}].player_id");
        check_player_id(v, &id, &player.player_id);
        if !seen.insert(player.player_id.as_str()) {
            v.add(&id, "lists a player a second time");
        }
        v.text(
            &format!("{field}[{i}].player_data"),
            &player.player_data,
            PLAYER_DATA_MAX,
        );
    }
}

fn check_override(v: &mut Violations, preference: &pb::PriorityConfigurationOverride) {
    let field = "priority_configuration_override.location_order";
    check_count(v, field, preference.location_order.len(), 1, OVERRIDE_LOCATIONS_MAX);
    let mut seen = HashSet::new();
    for (i, location) in checked_entries(&preference.location_order, OVERRIDE_LOCATIONS_MAX) {
        v.id(&format!("{field}[{i}]"), location, LOCATION_LEN.0, LOCATION_LEN.1);
        if !seen.insert(location.as_str()) {
            v.add(
                &format!("{field}[{i}]"),
                format!("lists location {location:?} a second time"),
            );
        }
    }
    if pb::PlacementFallbackStrategy::try_from(preference.placement_fallback_strategy).is_err() {
        v.add(
            "priority_configuration_override.placement_fallback_strategy",
            format!("{} is not a fallback strategy", preference.placement_fallback_strategy),
        );
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;
    use tonic_types::StatusExt;

    use super::*;

    fn start() -> pb::StartGameSessionPlacementRequest {
        pb::StartGameSessionPlacementRequest {
            placement_id: "match-0042".into(),
            queue_name: "ranked-eu".into(),
            maximum_player_session_count: 4,
            player_latencies: vec![pb::PlayerLatency {
                player_id: "p1".into(),
                location: "eu-west-1".into(),
                latency_ms: 40,
            }],
            desired_player_sessions: vec![pb::DesiredPlayerSession {
                player_id: "p1".into(),
                player_data: "{\"team\":1}".into(),
            }],
            priority_configuration_override: Some(pb::PriorityConfigurationOverride {
                location_order: vec!["eu-west-1".into()],
                placement_fallback_strategy: pb::PlacementFallbackStrategy::None as i32,
            }),
            ..Default::default()
        }
    }

    fn refused(status: Status) -> Vec<String> {
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        let bad = status.get_details_bad_request().expect("field violations attached");
        bad.field_violations.into_iter().map(|f| f.field).collect()
    }

    #[test]
    fn each_broken_limit_is_named_by_its_field() {
        assert!(check_start(&start()).is_ok());
        type Breaks = fn(&mut pb::StartGameSessionPlacementRequest);
        let cases: &[(&[&str], Breaks)] = &[
            (&["placement_id"], |r| r.placement_id = "m".repeat(49)),
            (&["placement_id"], |r| r.placement_id = "match.1".into()),
            (&["queue_name"], |r| r.queue_name.clear()),
            (&["maximum_player_session_count"], |r| {
                r.maximum_player_session_count = 1001
            }),
            (&["game_session_name"], |r| r.game_session_name = "n".repeat(1025)),
            (&["matchmaker_data"], |r| r.matchmaker_data = "d".repeat(262_145)),
            (&["player_latencies[1].location"], |r| {
                r.player_latencies.push(r.player_latencies[0].clone())
            }),
            (&["player_latencies[0].latency_ms"], |r| {
                r.player_latencies[0].latency_ms = 60_001
            }),
            (&["player_latencies[0].player_id"], |r| {
                r.player_latencies[0].player_id.clear()
            }),
            (&["desired_player_sessions[1].player_id"], |r| {
                r.desired_player_sessions.push(r.desired_player_sessions[0].clone())
            }),
            (&["desired_player_sessions"], |r| {
                r.desired_player_sessions = (0..5)
                    .map(|n| pb::DesiredPlayerSession {
                        player_id: format!("p{n}"),
                        player_data: String::new(),
                    })
                    .collect()
            }),
            (&["desired_player_sessions[0].player_data"], |r| {
                r.desired_player_sessions[0].player_data = "x".repeat(2049)
            }),
            (&["priority_configuration_override.location_order"], |r| {
                r.priority_configuration_override
                    .as_mut()
                    .unwrap()
                    .location_order
                    .clear()
            }),
            (&["priority_configuration_override.placement_fallback_strategy"], |r| {
                r.priority_configuration_override
                    .as_mut()
                    .unwrap()
                    .placement_fallback_strategy = 7
            }),
        ];
        for (fields, breaks) in cases {
            let mut req = start();
            breaks(&mut req);
            assert_eq!(refused(check_start(&req).unwrap_err()), *fields);
        }
        let stop = pb::StopGameSessionPlacementRequest {
            placement_id: String::new(),
        };
        assert_eq!(refused(check_stop(&stop).unwrap_err()), ["placement_id"]);
        let describe = pb::DescribeGameSessionPlacementRequest {
            placement_id: "a b".into(),
        };
        assert_eq!(refused(check_describe(&describe).unwrap_err()), ["placement_id"]);
    }
}
