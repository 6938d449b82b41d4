use berth_proto::common::v1::KeyValue;
use prost_types::{Struct, Timestamp, Value};
use tonic::Code;
use tonic_types::StatusExt;

use super::*;

const PROVISIONERS: &[&str] = &["process", "docker"];

fn managed() -> pb::CreateFleetRequest {
    pb::CreateFleetRequest {
        fleet_id: "arena".into(),
        provisioner: "process".into(),
        launch_configuration: Some(pb::ServerLaunchConfiguration {
            launch_path: "/opt/game/server".into(),
            ..Default::default()
        }),
        instance_definitions: vec![pb::InstanceDefinition {
            instance_type: "c5.large".into(),
            ..Default::default()
        }],
        locations: vec![pb::LocationConfiguration {
            location: "eu-west-1".into(),
            capacity: Some(pb::FleetCapacity {
                minimum_instances: 0,
                maximum_instances: 10,
                desired_instances: 3,
            }),
            standby: None,
        }],
        ..Default::default()
    }
}

/// The fields a refused request names, in order.
fn refused(status: Status) -> Vec<String> {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let bad = status.get_details_bad_request().expect("field violations attached");
    bad.field_violations.into_iter().map(|f| f.field).collect()
}

fn window(start: i64, end: i64, weekly: bool) -> pb::ScheduledStandbyWindow {
    pb::ScheduledStandbyWindow {
        start_time: Some(Timestamp {
            seconds: start,
            nanos: 0,
        }),
        end_time: Some(Timestamp { seconds: end, nanos: 0 }),
        recurring_weekly: weekly,
        standby_servers: 5,
        ..Default::default()
    }
}

#[test]
fn a_valid_request_gets_every_default_its_zero_values_stand_for() {
    let created = check_create(&managed(), PROVISIONERS).unwrap();
    let config = created.config;
    assert_eq!(config.compute_type(), pb::ComputeType::Managed);
    assert_eq!(config.balancing_strategy(), pb::BalancingStrategy::OnDemandOnly);
    assert_eq!(config.server_processes_per_instance, 1);
    assert_eq!(config.game_session_activation_timeout_seconds, 300);
    assert_eq!(config.player_session_reservation_timeout_seconds, 60);
    assert_eq!(
        config.new_game_session_protection_policy(),
        pb::ProtectionPolicy::NoProtection
    );
    let timeouts = config.process_timeouts.unwrap();
    assert_eq!(
        (
            timeouts.register_timeout_seconds,
            timeouts.ready_timeout_seconds,
            timeouts.heartbeat_interval_ms,
            timeouts.unhealthy_after_missed_heartbeats,
            timeouts.termination_grace_seconds,
            timeouts.exit_timeout_seconds,
            timeouts.location_first_heartbeat_timeout_seconds,
            timeouts.location_ready_timeout_seconds,
        ),
        (300, 300, 5000, 3, 300, 30, 600, 5400)
    );
    assert_eq!(created.locations.len(), 1);
}

#[test]
fn given_values_are_kept() {
    let req = pb::CreateFleetRequest {
        server_processes_per_instance: 4,
        game_session_activation_timeout_seconds: 30,
        process_timeouts: Some(pb::ProcessTimeouts {
            heartbeat_interval_ms: 1000,
            ..Default::default()
        }),
        ..managed()
    };
    let config = check_create(&req, PROVISIONERS).unwrap().config;
    assert_eq!(config.server_processes_per_instance, 4);
    assert_eq!(config.game_session_activation_timeout_seconds, 30);
    assert_eq!(config.process_timeouts.unwrap().heartbeat_interval_ms, 1000);
}

#[test]
fn each_broken_limit_is_named_by_its_field() {
    type Breaks = fn(&mut pb::CreateFleetRequest);
    let cases: &[(&[&str], Breaks)] = &[
        (&["fleet_id"], |r| r.fleet_id = "a{b}".into()),
        (&["name"], |r| r.name = "n".repeat(1025)),
        (&["compute_type"], |r| r.compute_type = 9),
        (&["provisioner"], |r| r.provisioner.clear()),
        (&["provisioner"], |r| r.provisioner = "Process".into()),
        (&["provisioner"], |r| r.provisioner = "kubernetes".into()),
        (&["launch_configuration"], |r| r.launch_configuration = None),
        (&["launch_configuration.launch_path"], |r| {
            r.launch_configuration.as_mut().unwrap().launch_path.clear()
        }),
        (&["launch_configuration.provisioner_parameters"], |r| {
            let big = Value {
                kind: Some(Kind::StringValue("x".repeat(PROVISIONER_PARAMETERS_MAX))),
            };
            r.launch_configuration.as_mut().unwrap().provisioner_parameters = Some(Struct {
                fields: [("working_directory".to_owned(), big)].into(),
            });
        }),
        (&["launch_configuration.provisioner_parameters.image"], |r| {
            let image = Value {
                kind: Some(Kind::StringValue("game:1".into())),
            };
            r.launch_configuration.as_mut().unwrap().provisioner_parameters = Some(Struct {
                fields: [("image".to_owned(), image)].into(),
            });
        }),
        (&["instance_definitions"], |r| r.instance_definitions.clear()),
        (&["instance_definitions[1].instance_type"], |r| {
            r.instance_definitions.push(r.instance_definitions[0].clone())
        }),
        (&["instance_definitions[0].spot_hourly_cost_micros"], |r| {
            r.instance_definitions[0].spot_hourly_cost_micros = HOURLY_COST_MAX + 1
        }),
        (&["balancing_strategy"], |r| r.balancing_strategy = 7),
        (&["server_processes_per_instance"], |r| {
            r.server_processes_per_instance = 257
        }),
        (&["max_concurrent_game_session_activations"], |r| {
            r.max_concurrent_game_session_activations = 1001
        }),
        (&["game_session_activation_timeout_seconds"], |r| {
            r.game_session_activation_timeout_seconds = 601
        }),
        (&["game_server_protection_policy"], |r| {
            r.game_server_protection_policy = 3
        }),
        (&["resource_creation_limit_policy.policy_period_minutes"], |r| {
            r.resource_creation_limit_policy = Some(pb::ResourceCreationLimitPolicy {
                new_game_sessions_per_creator: 3,
                policy_period_minutes: 0,
            })
        }),
        (&["process_timeouts.heartbeat_interval_ms"], |r| {
            r.process_timeouts = Some(pb::ProcessTimeouts {
                heartbeat_interval_ms: 999,
                ..Default::default()
            })
        }),
        (&["process_timeouts.location_ready_timeout_seconds"], |r| {
            r.process_timeouts = Some(pb::ProcessTimeouts {
                location_ready_timeout_seconds: 59,
                ..Default::default()
            })
        }),
        (&["player_session_reservation_timeout_seconds"], |r| {
            r.player_session_reservation_timeout_seconds = 9
        }),
        (&["locations"], |r| r.locations.clear()),
        (&["locations[1].location"], |r| r.locations.push(r.locations[0].clone())),
        (&["locations[0].capacity.desired_instances"], |r| {
            r.locations[0].capacity.as_mut().unwrap().desired_instances = 11
        }),
        (&["locations[0].capacity.maximum_instances"], |r| {
            r.locations[0].capacity = Some(pb::FleetCapacity {
                minimum_instances: 5,
                maximum_instances: 4,
                desired_instances: 4,
            })
        }),
        (&["locations[0].capacity.maximum_instances"], |r| {
            r.locations[0].capacity.as_mut().unwrap().maximum_instances = INSTANCES_MAX + 1
        }),
        (
            &["locations[0].standby.dynamic_standby.thresholds[1].trigger_percent"],
            |r| {
                let threshold = pb::DynamicStandbyThreshold {
                    trigger_percent: 50,
                    multiplier_percent: 150,
                };
                r.locations[0].standby = Some(pb::StandbyConfiguration {
                    dynamic_standby: Some(pb::DynamicStandby {
                        enabled: true,
                        thresholds: vec![threshold, threshold],
                        ramp_down_seconds: 0,
                    }),
                    ..Default::default()
                })
            },
        ),
        (&["locations[0].standby.scheduled_windows[1]"], |r| {
            r.locations[0].standby = Some(pb::StandbyConfiguration {
                scheduled_windows: vec![window(1000, 5000, false), window(4000, 9000, false)],
                ..Default::default()
            })
        }),
        (&["labels[1].key"], |r| {
            r.labels = vec![
                KeyValue {
                    key: "team".into(),
                    value: "a".into(),
                },
                KeyValue {
                    key: "team".into(),
                    value: "b".into(),
                },
            ]
        }),
    ];
    for (fields, breaks) in cases {
        let mut req = managed();
        breaks(&mut req);
        let status = check_create(&req, PROVISIONERS).expect_err("a broken request is refused");
        assert_eq!(refused(status), *fields);
    }
}

#[test]
fn an_anywhere_fleet_takes_no_provisioner_and_needs_no_launch_settings() {
    let req = pb::CreateFleetRequest {
        compute_type: pb::ComputeType::Anywhere as i32,
        provisioner: String::new(),
        launch_configuration: None,
        instance_definitions: Vec::new(),
        ..managed()
    };
    assert!(check_create(&req, PROVISIONERS).is_ok());
    let named = pb::CreateFleetRequest {
        provisioner: "process".into(),
        ..req
    };
    assert_eq!(
        refused(check_create(&named, PROVISIONERS).unwrap_err()),
        ["provisioner"]
    );
}

#[test]
fn windows_overlap_when_ever_in_force_at_once() {
    const DAY: i64 = 24 * 3600;
    // One-off windows meet only where their times cross.
    assert!(overlap((0, 10, false), (5, 20, false)));
    assert!(!overlap((0, 10, false), (10, 20, false)));
    // A weekly window meets a one-off one in a later week, but not before its first start.
    assert!(overlap((0, DAY, true), (7 * DAY + 100, 7 * DAY + 200, false)));
    assert!(!overlap((0, DAY, true), (2 * DAY, 3 * DAY, false)));
    assert!(!overlap((14 * DAY, 15 * DAY, true), (100, 200, false)));
    // Two weekly windows meet when their places in the week do, whatever the week they start in.
    assert!(overlap((0, DAY, true), (21 * DAY + 100, 21 * DAY + 200, true)));
    assert!(overlap(
        (6 * DAY, 8 * DAY, true),
        (14 * DAY + 100, 14 * DAY + 200, true)
    ));
    assert!(!overlap((0, DAY, true), (2 * DAY, 3 * DAY, true)));
    // Disabled windows are ignored.
    let mut v = Violations::new();
    let mut disabled = window(4000, 9000, false);
    disabled.disabled = true;
    let standby = pb::StandbyConfiguration {
        scheduled_windows: vec![window(1000, 5000, false), disabled],
        ..Default::default()
    };
    check_standby(&mut v, "standby", &standby);
    assert!(v.into_result().is_ok());
}

#[test]
fn the_json_size_of_provisioner_parameters_is_exact() {
    let value = |kind| Value { kind: Some(kind) };
    let parameters = Kind::StructValue(Struct {
        fields: [
            ("image".to_owned(), value(Kind::StringValue("game:1 \"x\"".into()))),
            ("cpus".to_owned(), value(Kind::NumberValue(2.5))),
            (
                "ports".to_owned(),
                value(Kind::ListValue(prost_types::ListValue {
                    values: vec![value(Kind::NumberValue(7777.0)), value(Kind::BoolValue(true))],
                })),
            ),
        ]
        .into(),
    });
    // {"cpus":2.5,"image":"game:1 \"x\"","ports":[7777,true]}
    assert_eq!(
        json_size(&parameters),
        r#"{"cpus":2.5,"image":"game:1 \"x\"","ports":[7777,true]}"#.len()
    );
}

#[test]
fn capacity_changes_are_checked_against_each_other_where_given() {
    let req = |min, max, desired| pb::UpdateFleetCapacityRequest {
        fleet_id: "arena".into(),
        location: String::new(),
        minimum_instances: min,
        maximum_instances: max,
        desired_instances: desired,
    };
    assert!(check_update_capacity(&req(None, None, Some(4))).is_ok());
    assert!(check_update_capacity(&req(Some(1), Some(5), Some(5))).is_ok());
    assert_eq!(
        refused(check_update_capacity(&req(Some(3), None, Some(2))).unwrap_err()),
        ["desired_instances"]
    );
    assert_eq!(
        refused(check_update_capacity(&req(None, Some(INSTANCES_MAX + 1), None)).unwrap_err()),
        ["maximum_instances"]
    );
    assert_eq!(
        refused(check_update_capacity(&req(None, None, None)).unwrap_err()),
        ["desired_instances"]
    );
}

#[test]
fn listings_name_the_filter_entries_they_refuse() {
    let list = pb::ListFleetsRequest {
        statuses: vec![pb::FleetStatus::Active as i32, 0, 42],
        page_size: 1001,
        page_token: String::new(),
    };
    assert_eq!(
        refused(check_list(&list).unwrap_err()),
        ["statuses[1]", "statuses[2]", "page_size"]
    );
    let at = |seconds| Some(Timestamp { seconds, nanos: 0 });
    let events = pb::ListFleetEventsRequest {
        fleet_id: "arena".into(),
        codes: vec![pb::FleetEventCode::CapacityChanged as i32, 0],
        start_time: at(20),
        end_time: at(10),
        ..Default::default()
    };
    assert_eq!(
        refused(check_list_events(&events).unwrap_err()),
        ["codes[1]", "end_time"]
    );
    let fine = pb::ListFleetEventsRequest {
        codes: vec![pb::FleetEventCode::CapacityChanged as i32],
        end_time: at(30),
        ..events
    };
    let query = check_list_events(&fine).unwrap();
    assert_eq!(
        (query.codes, query.start_ms, query.end_ms, query.size),
        (vec![FleetEventCode::CapacityChanged], Some(20_000), Some(30_000), 100)
    );
}

#[test]
fn a_watch_names_every_filter_entry_and_start_it_refuses() {
    let too_many: Vec<String> = (0..101).map(|n| format!("f{n}")).collect();
    let watch = pb::WatchFleetEventsRequest {
        fleet_ids: vec!["arena".into(), "no{braces}".into()],
        codes: vec![pb::FleetEventCode::CapacityChanged as i32, 0, 999],
        after_cursor: "x".repeat(1025),
        from_oldest: true,
    };
    assert_eq!(
        refused(check_watch_events(&watch).unwrap_err()),
        ["fleet_ids[1]", "codes[1]", "codes[2]", "after_cursor", "from_oldest"]
    );
    let crowded = pb::WatchFleetEventsRequest {
        fleet_ids: too_many,
        codes: vec![pb::FleetEventCode::CapacityChanged as i32; 33],
        ..Default::default()
    };
    assert_eq!(
        refused(check_watch_events(&crowded).unwrap_err()),
        ["fleet_ids", "codes"]
    );
    let fine = pb::WatchFleetEventsRequest {
        fleet_ids: vec!["arena".into()],
        codes: vec![pb::FleetEventCode::FleetCreated as i32],
        after_cursor: "12-0/arena".into(),
        from_oldest: false,
    };
    assert_eq!(check_watch_events(&fine).unwrap(), [FleetEventCode::FleetCreated]);
}
