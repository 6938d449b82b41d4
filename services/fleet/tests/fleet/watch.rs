//! WatchFleetEvents as a client written from the proto uses it, on a single node and on the cluster: fleet events
//! streamed in order (merged over fleets by position, then fleet), each cursor resuming just after its event, the
//! filters, the oldest retained event as a start, fleets created after the watch opened, OUT_OF_RANGE for a cursor
//! whose following events were trimmed (by a deployment's short retention) but never for a watcher that missed
//! nothing, UNAVAILABLE when the replica shuts down, and INVALID_ARGUMENT naming each field broken.

use std::time::Duration;

use berth_proto::fleet::v1 as pb;
use berth_proto::fleet::v1::watch_fleet_events_response::Kind;
use berth_testkit::TestRedis;
use tonic::{Code, Status, Streaming};
use tonic_types::StatusExt;

use super::records::{Client, client, create, events, fleet_service_with};

type Watch = Streaming<pb::WatchFleetEventsResponse>;

/// How long a test waits for the next event of a watch.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long a test waits for a keepalive: the contract sends one after 15 s without an event.
const KEEPALIVE_PATIENCE: Duration = Duration::from_secs(30);

fn watch_of(fleet_ids: &[&str], after_cursor: &str) -> pb::WatchFleetEventsRequest {
    pb::WatchFleetEventsRequest {
        fleet_ids: fleet_ids.iter().map(|id| id.to_string()).collect(),
        after_cursor: after_cursor.into(),
        ..Default::default()
    }
}

fn from_oldest(fleet_ids: &[&str]) -> pb::WatchFleetEventsRequest {
    pb::WatchFleetEventsRequest {
        from_oldest: true,
        ..watch_of(fleet_ids, "")
    }
}

async fn open(fleets: &mut Client, request: pb::WatchFleetEventsRequest) -> Watch {
    fleets.watch_fleet_events(request).await.unwrap().into_inner()
}

/// The next message of a watch within `patience`: an event or a keepalive, or how the watch ended.
async fn next_message(watch: &mut Watch, patience: Duration) -> Result<Kind, Status> {
    let message = tokio::time::timeout(patience, watch.message()).await;
    let message = message.expect("a message in time")?.expect("the watch goes on");
    Ok(message.kind.expect("an event or a keepalive"))
}

/// The next event of a watch, past keepalives.
async fn next_event(watch: &mut Watch) -> pb::FleetEvent {
    loop {
        if let Kind::Event(event) = next_message(watch, PATIENCE).await.unwrap() {
            return event;
        }
    }
}

async fn next_events(watch: &mut Watch, count: usize) -> Vec<pb::FleetEvent> {
    let mut events = Vec::new();
    while events.len() < count {
        events.push(next_event(watch).await);
    }
    events
}

fn codes(events: &[pb::FleetEvent]) -> Vec<(String, pb::FleetEventCode, String)> {
    events
        .iter()
        .map(|e| (e.fleet_id.clone(), e.code(), e.location.clone()))
        .collect()
}

fn ids(events: &[pb::FleetEvent]) -> Vec<&str> {
    events.iter().map(|event| event.event_id.as_str()).collect()
}

/// An event's stream position, from its id (`<fleet>/<ms>-<seq>`), and its fleet: the order a watch delivers in.
fn place(event: &pb::FleetEvent) -> ((u64, u64), String) {
    let (fleet, position) = event.event_id.split_once('/').expect("<fleet>/<position>");
    assert_eq!(fleet, event.fleet_id);
    (berth_store::parse_position(position).unwrap(), fleet.to_owned())
}

fn desired(fleet_id: &str, location: &str, desired: u32) -> pb::UpdateFleetCapacityRequest {
    pb::UpdateFleetCapacityRequest {
        fleet_id: fleet_id.into(),
        location: location.into(),
        desired_instances: Some(desired),
        ..Default::default()
    }
}

fn suspend(fleet_id: &str, location: &str) -> pb::SuspendAutoscalingRequest {
    pb::SuspendAutoscalingRequest {
        fleet_id: fleet_id.into(),
        locations: vec![location.into()],
    }
}

/// The events creating `create(fleet_id)` records, in order.
fn created(fleet_id: &str) -> Vec<(String, pb::FleetEventCode, String)> {
    use pb::FleetEventCode as C;
    [
        (C::FleetCreated, ""),
        (C::LocationAdded, "home"),
        (C::LocationDeploying, "home"),
        (C::LocationAdded, "away"),
    ]
    .into_iter()
    .map(|(code, location)| (fleet_id.to_owned(), code, location.to_owned()))
    .collect()
}

async fn events_stream_in_order_and_resume_from_their_cursors(redis: TestRedis) {
    use pb::FleetEventCode as C;
    let service = fleet_service_with(&redis, Default::default()).await;
    let mut fleets = client(&service).await;
    // Both open before the fleet exists: the one of every fleet picks it up as it appears.
    let mut one = open(&mut fleets, watch_of(&["arena"], "")).await;
    let mut every = open(&mut fleets, watch_of(&[], "")).await;

    fleets.create_fleet(create("arena")).await.unwrap();
    fleets.update_fleet_capacity(desired("arena", "home", 5)).await.unwrap();
    fleets.suspend_autoscaling(suspend("arena", "away")).await.unwrap();
    let seen = next_events(&mut one, 6).await;
    let mut expected = created("arena");
    expected.push(("arena".into(), C::CapacityChanged, "home".into()));
    expected.push(("arena".into(), C::AutoscalingSuspended, "away".into()));
    assert_eq!(codes(&seen), expected);
    let change = seen[4].capacity_change.clone().expect("a capacity change says how");
    assert_eq!(
        (change.previous_desired_instances, change.new_desired_instances),
        (3, 5)
    );
    // The same events as the listing shows them, each with one id in both, unique across fleets.
    let listed = events(&mut fleets, "arena").await;
    assert_eq!(codes(&listed), expected);
    for (watched, listed) in seen.iter().zip(&listed) {
        assert_eq!(watched.event_id, listed.event_id);
        assert_eq!(
            (&watched.message, &watched.event_time),
            (&listed.message, &listed.event_time)
        );
    }
    assert_eq!(ids(&next_events(&mut every, 6).await), ids(&seen));
    // A listed event's cursor resumes a watch of its fleet just after it too.
    let mut after_listed = open(&mut fleets, watch_of(&["arena"], &listed[2].cursor)).await;
    assert_eq!(next_event(&mut after_listed).await.event_id, seen[3].event_id);

    // A second fleet: a watch of every fleet merges both by position, then fleet.
    fleets.create_fleet(create("brawl")).await.unwrap();
    fleets.update_fleet_capacity(desired("arena", "home", 4)).await.unwrap();
    fleets.update_fleet_capacity(desired("brawl", "home", 6)).await.unwrap();
    let both = next_events(&mut every, 6).await;
    let places: Vec<_> = both.iter().map(place).collect();
    let mut sorted = places.clone();
    sorted.sort();
    assert_eq!(places, sorted, "delivered by position, then fleet");
    let mut cursors: Vec<&str> = both.iter().map(|event| event.cursor.as_str()).collect();
    cursors.dedup();
    assert_eq!(cursors.len(), 6, "each event has its own cursor");
    assert_eq!(
        both.iter().filter(|event| event.fleet_id == "brawl").count(),
        5,
        "brawl: created, and its capacity changed"
    );
    let seen: Vec<_> = seen
        .into_iter()
        .chain(both.iter().filter(|e| e.fleet_id == "arena").cloned())
        .collect();
    assert_eq!(next_event(&mut one).await.event_id, seen[6].event_id);

    // From the oldest retained event, and resumed just after any event: exactly the events after it, then the
    // next that happens (a marker, that nothing else came between).
    let mut resumed = Vec::new();
    for fleet_ids in [vec!["arena"], Vec::new()] {
        let mut oldest = open(&mut fleets, from_oldest(&fleet_ids)).await;
        let all = next_events(&mut oldest, if fleet_ids.is_empty() { 12 } else { 7 }).await;
        let arena: Vec<_> = all.into_iter().filter(|event| event.fleet_id == "arena").collect();
        assert_eq!(ids(&arena), ids(&seen));
        resumed.push((oldest, fleet_ids.clone(), seen.len()));
        for (at, event) in seen.iter().enumerate() {
            let watch = open(&mut fleets, watch_of(&fleet_ids, &event.cursor)).await;
            resumed.push((watch, fleet_ids.clone(), at));
        }
    }
    fleets.update_fleet_capacity(desired("arena", "home", 2)).await.unwrap();
    let marker = next_event(&mut one).await;
    assert_eq!(marker.code(), C::CapacityChanged);
    let brawl: Vec<_> = both.iter().filter(|event| event.fleet_id == "brawl").collect();
    for (mut watch, fleet_ids, at) in resumed {
        let mut expected: Vec<&str> = ids(&seen).split_off((at + 1).min(seen.len()));
        expected.push(&marker.event_id);
        // A watch of every fleet resumes just after the arena event in brawl too (the oldest-first ones have read
        // all of brawl already).
        let expected_brawl: Vec<&str> = brawl
            .iter()
            .filter(|event| fleet_ids.is_empty() && at < seen.len() && place(event) > place(&seen[at]))
            .map(|event| event.event_id.as_str())
            .collect();
        let (mut got, mut got_brawl) = (Vec::new(), Vec::new());
        while got.last() != Some(&marker.event_id) {
            let event = next_event(&mut watch).await;
            match event.fleet_id.as_str() {
                "arena" => got.push(event.event_id),
                _ => got_brawl.push(event.event_id),
            }
        }
        assert_eq!(got, expected, "resumed after event {at} of {fleet_ids:?}");
        assert_eq!(got_brawl, expected_brawl, "resumed after event {at} of {fleet_ids:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_events_stream_in_order_and_resume_from_their_cursors_on_a_single_node() {
    events_stream_in_order_and_resume_from_their_cursors(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_events_stream_in_order_and_resume_from_their_cursors_on_a_cluster() {
    events_stream_in_order_and_resume_from_their_cursors(TestRedis::cluster()).await;
}

async fn filters_and_keepalives(redis: TestRedis) {
    use pb::FleetEventCode as C;
    let service = fleet_service_with(&redis, Default::default()).await;
    let mut fleets = client(&service).await;
    let changes = pb::WatchFleetEventsRequest {
        fleet_ids: vec!["brawl".into(), "brawl".into()],
        codes: vec![C::CapacityChanged as i32, C::FleetDeleting as i32],
        ..Default::default()
    };
    let mut changes = open(&mut fleets, changes).await;
    let suspensions = pb::WatchFleetEventsRequest {
        codes: vec![C::AutoscalingSuspended as i32],
        ..Default::default()
    };
    let mut suspensions = open(&mut fleets, suspensions).await;
    for fleet_id in ["arena", "brawl"] {
        fleets.create_fleet(create(fleet_id)).await.unwrap();
        fleets
            .update_fleet_capacity(desired(fleet_id, "home", 5))
            .await
            .unwrap();
        fleets.suspend_autoscaling(suspend(fleet_id, "away")).await.unwrap();
    }
    let change = next_event(&mut changes).await;
    assert_eq!(codes(&[change]), [("brawl".into(), C::CapacityChanged, "home".into())]);
    let suspended = next_events(&mut suspensions, 2).await;
    assert_eq!(
        codes(&suspended),
        [
            ("arena".into(), C::AutoscalingSuspended, "away".into()),
            ("brawl".into(), C::AutoscalingSuspended, "away".into()),
        ]
    );
    // Nothing more matches: a keepalive comes in its stead, its cursor past the events left out.
    let keepalive = match next_message(&mut changes, KEEPALIVE_PATIENCE).await.unwrap() {
        Kind::Keepalive(keepalive) => keepalive,
        Kind::Event(event) => panic!("nothing else matches, got {event:?}"),
    };
    assert!(keepalive.server_time.is_some());
    let mut resumed = open(&mut fleets, watch_of(&["brawl"], &keepalive.cursor)).await;
    fleets.update_fleet_capacity(desired("brawl", "home", 6)).await.unwrap();
    let next = next_event(&mut resumed).await;
    let change = next.capacity_change.as_ref().expect("a capacity change says how");
    assert_eq!((next.code(), change.new_desired_instances), (C::CapacityChanged, 6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sends_only_the_fleets_and_codes_it_asks_for_and_keepalives_meanwhile_on_a_single_node() {
    filters_and_keepalives(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sends_only_the_fleets_and_codes_it_asks_for_and_keepalives_meanwhile_on_a_cluster() {
    filters_and_keepalives(TestRedis::cluster()).await;
}

async fn trimmed_events(redis: TestRedis) {
    use pb::FleetEventCode as C;
    const RETENTION_MS: u64 = 500;
    let args = berth_fleet::FleetArgs {
        retention_ms: RETENTION_MS,
        ..Default::default()
    };
    let service = fleet_service_with(&redis, args).await;
    let mut fleets = client(&service).await;
    let mut live = open(&mut fleets, watch_of(&["arena"], "")).await;
    fleets.create_fleet(create("arena")).await.unwrap();
    let seen = next_events(&mut live, 4).await;
    // Every event ages out of the retention; the next one trims them. The watcher had read them all.
    tokio::time::sleep(Duration::from_millis(3 * RETENTION_MS)).await;
    fleets.update_fleet_capacity(desired("arena", "home", 5)).await.unwrap();
    let changed = next_event(&mut live).await;
    assert_eq!(changed.code(), C::CapacityChanged);
    assert_eq!(
        codes(&events(&mut fleets, "arena").await),
        codes(std::slice::from_ref(&changed))
    );
    // Events that trim nothing still tell what was trimmed before them.
    fleets.suspend_autoscaling(suspend("arena", "away")).await.unwrap();
    assert_eq!(next_event(&mut live).await.code(), C::AutoscalingSuspended);

    // Resuming just after the last event trimmed missed nothing; from the oldest retained starts after them.
    for fleet_ids in [vec!["arena"], Vec::new()] {
        let mut resumed = open(&mut fleets, watch_of(&fleet_ids, &seen[3].cursor)).await;
        assert_eq!(next_event(&mut resumed).await.event_id, changed.event_id);
        let mut oldest = open(&mut fleets, from_oldest(&fleet_ids)).await;
        assert_eq!(next_event(&mut oldest).await.event_id, changed.event_id);
        // Before it, events the watcher never got are gone: it is told, and told which fleet.
        for cursor in [seen[0].cursor.as_str(), "1-0"] {
            let err = fleets
                .watch_fleet_events(watch_of(&fleet_ids, cursor))
                .await
                .unwrap_err();
            assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
            assert!(err.message().contains("\"arena\""), "{}", err.message());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_whose_following_events_were_trimmed_is_out_of_range_on_a_single_node() {
    trimmed_events(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_whose_following_events_were_trimmed_is_out_of_range_on_a_cluster() {
    trimmed_events(TestRedis::cluster()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_ends_unavailable_when_its_replica_shuts_down() {
    let redis = TestRedis::single();
    let service = fleet_service_with(&redis, Default::default()).await;
    let mut fleets = client(&service).await;
    let mut watch = open(&mut fleets, watch_of(&[], "")).await;
    fleets.create_fleet(create("arena")).await.unwrap();
    let first = next_event(&mut watch).await;
    let shutdown = tokio::spawn(service.shutdown());
    let ended = loop {
        match next_message(&mut watch, PATIENCE).await {
            Ok(_) => continue,
            Err(status) => break status,
        }
    };
    assert_eq!(ended.code(), Code::Unavailable, "{ended:?}");
    assert!(ended.message().contains("resume"), "{}", ended.message());
    shutdown.await.unwrap();
    // Another replica takes the watch over from the last cursor.
    let other = fleet_service_with(&redis, Default::default()).await;
    let mut fleets = client(&other).await;
    let mut resumed = open(&mut fleets, watch_of(&[], &first.cursor)).await;
    assert_eq!(codes(&next_events(&mut resumed, 3).await), created("arena")[1..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_watch_names_each_field_it_breaks() {
    let redis = TestRedis::single();
    let service = fleet_service_with(&redis, Default::default()).await;
    let mut fleets = client(&service).await;
    let refused = async |fleets: &mut Client, request: pb::WatchFleetEventsRequest| {
        let err = fleets.watch_fleet_events(request).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        let violations = err
            .get_details_bad_request()
            .expect("field violations")
            .field_violations;
        let fields: Vec<String> = violations.iter().map(|v| v.field.clone()).collect();
        (fields, err.message().to_owned())
    };
    let many: Vec<String> = (0..101).map(|n| format!("fleet-{n}")).collect();
    let (fields, message) = refused(
        &mut fleets,
        pb::WatchFleetEventsRequest {
            fleet_ids: many,
            codes: vec![pb::FleetEventCode::FleetCreated as i32; 33],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(fields, ["fleet_ids", "codes"]);
    assert!(
        message.contains("at most 100") && message.contains("at most 32"),
        "{message}"
    );
    let (fields, _) = refused(
        &mut fleets,
        pb::WatchFleetEventsRequest {
            fleet_ids: vec!["arena".into(), "not/a-fleet".into(), String::new()],
            codes: vec![pb::FleetEventCode::Unspecified as i32, 4711],
            after_cursor: "12-0/arena".into(),
            from_oldest: true,
        },
    )
    .await;
    assert_eq!(
        fields,
        ["fleet_ids[1]", "fleet_ids[2]", "codes[0]", "codes[1]", "from_oldest"]
    );
    for cursor in ["yesterday", "12-3/", "12/arena", &"1".repeat(1025)] {
        let (fields, _) = refused(&mut fleets, watch_of(&["arena"], cursor)).await;
        assert_eq!(fields, ["after_cursor"], "{cursor}");
    }
    // Nothing was watched into being.
    let listed = fleets.list_fleets(pb::ListFleetsRequest::default()).await.unwrap();
    assert!(listed.into_inner().fleets.is_empty());
}
