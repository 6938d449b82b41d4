use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

fn location(name: &str, cost: u64) -> LocationView {
    LocationView {
        location: name.into(),
        deployed: true,
        viable: true,
        hourly_cost_micros: cost,
    }
}

fn fleet(locations: Vec<LocationView>) -> Option<FleetView> {
    Some(FleetView {
        active: true,
        locations,
    })
}

fn queue(destinations: &[&str]) -> pb::Queue {
    pb::Queue {
        name: "q".into(),
        destinations: destinations
            .iter()
            .map(|id| pb::QueueDestination { fleet_id: (*id).into() })
            .collect(),
        timeout_seconds: 600,
        ..Default::default()
    }
}

fn latency(player: &str, location: &str, ms: u32) -> pb::PlayerLatency {
    pb::PlayerLatency {
        player_id: player.into(),
        location: location.into(),
        latency_ms: ms,
    }
}

fn names(order: &Order) -> Vec<String> {
    order
        .candidates
        .iter()
        .map(|c| format!("{}/{}", c.fleet_id, c.location))
        .collect()
}

/// The first attempt's order after `waited_ms`, with no override.
fn after(
    queue: &pb::Queue,
    fleets: &HashMap<String, Option<FleetView>>,
    latencies: &[pb::PlayerLatency],
    waited_ms: u64,
) -> Order {
    order(&Candidates {
        queue,
        fleets,
        player_latencies: latencies,
        priority_override: None,
        waited_ms,
        attempt: 0,
    })
}

fn run(queue: &pb::Queue, fleets: &HashMap<String, Option<FleetView>>, latencies: &[pb::PlayerLatency]) -> Order {
    after(queue, fleets, latencies, 0)
}

fn two_fleets() -> HashMap<String, Option<FleetView>> {
    [
        (
            "cheap".to_owned(),
            fleet(vec![location("us", 100), location("eu", 300)]),
        ),
        ("fast".to_owned(), fleet(vec![location("eu", 500), location("ap", 200)])),
    ]
    .into()
}

#[test]
fn without_latencies_destinations_come_first_then_locations_alphabetically() {
    let order = run(&queue(&["fast", "cheap"]), &two_fleets(), &[]);
    assert_eq!(names(&order), ["fast/ap", "fast/eu", "cheap/eu", "cheap/us"]);
    assert_eq!(order.lowest_latency, None);
    assert_eq!(order.lowest_price.unwrap().location, "us");
}

#[test]
fn latencies_filter_and_order_and_relax_over_time() {
    let latencies = [
        latency("p1", "eu", 40),
        latency("p2", "eu", 90),
        latency("p1", "us", 20),
        latency("p2", "us", 30),
        latency("p1", "ap", 10),
    ];
    // ap: p2 reported nothing there, so it is never used.
    let mut q = queue(&["cheap", "fast"]);
    let open = run(&q, &two_fleets(), &latencies);
    assert_eq!(
        names(&open),
        ["cheap/us", "cheap/eu", "fast/eu"],
        "lowest average latency first"
    );
    assert_eq!(open.lowest_latency.as_ref().unwrap().location, "us");

    q.player_latency_policies = vec![
        pb::PlayerLatencyPolicy {
            maximum_individual_player_latency_ms: 50,
            policy_duration_seconds: 10,
        },
        pb::PlayerLatencyPolicy {
            maximum_individual_player_latency_ms: 100,
            policy_duration_seconds: 0,
        },
    ];
    let fleets = two_fleets();
    let at = |waited_ms| after(&q, &fleets, &latencies, waited_ms);
    assert_eq!(
        names(&at(0)),
        ["cheap/us"],
        "p2's 90 ms to eu is over the first 50 ms cap"
    );
    assert_eq!(names(&at(9_999)), ["cheap/us"]);
    assert_eq!(names(&at(10_000)), ["cheap/us", "cheap/eu", "fast/eu"], "then 100 ms");
    assert_eq!(latency_cap(&q.player_latency_policies, 3_600_000), Some(100));
    assert_eq!(latency_cap(&[], 0), None);
}

#[test]
fn fleets_and_locations_that_cannot_host_are_skipped() {
    let mut fleets = two_fleets();
    fleets.insert("gone".into(), None);
    if let Some(Some(fleet)) = fleets.get_mut("fast") {
        fleet.locations[1].deployed = false;
    }
    if let Some(Some(fleet)) = fleets.get_mut("cheap") {
        fleet.active = false;
    }
    let order = run(&queue(&["gone", "cheap", "fast"]), &fleets, &[]);
    assert_eq!(names(&order), ["fast/eu"]);

    let mut q = queue(&["cheap", "fast"]);
    q.filter_configuration = Some(pb::FilterConfiguration {
        allowed_locations: vec!["eu".into()],
    });
    assert_eq!(names(&run(&q, &two_fleets(), &[])), ["cheap/eu", "fast/eu"]);
}

#[test]
fn a_first_choice_not_viable_is_recorded_and_dropped() {
    let mut fleets = two_fleets();
    if let Some(Some(fleet)) = fleets.get_mut("fast") {
        fleet.locations[1].viable = false;
    }
    let order = run(&queue(&["fast", "cheap"]), &fleets, &[]);
    assert_eq!(
        order.first_choice,
        Some(Candidate {
            fleet_id: "fast".into(),
            location: "ap".into()
        })
    );
    assert!(order.first_choice_not_viable);
    assert_eq!(names(&order), ["fast/eu", "cheap/eu", "cheap/us"]);
}

#[test]
fn a_priority_order_is_followed_and_completed_by_the_default() {
    let mut q = queue(&["fast", "cheap"]);
    q.priority_configuration = Some(pb::PriorityConfiguration {
        priority_order: vec![pb::PriorityType::Cost as i32],
        location_order: Vec::new(),
    });
    assert_eq!(
        names(&run(&q, &two_fleets(), &[])),
        ["cheap/us", "fast/ap", "cheap/eu", "fast/eu"]
    );
    q.priority_configuration = Some(pb::PriorityConfiguration {
        priority_order: vec![pb::PriorityType::Location as i32],
        location_order: vec!["eu".into(), "us".into()],
    });
    assert_eq!(
        names(&run(&q, &two_fleets(), &[])),
        ["cheap/eu", "fast/eu", "cheap/us", "fast/ap"],
        "listed locations first, then the cost among equals"
    );
}

#[test]
fn an_override_keeps_to_its_locations_for_a_pass_or_for_good() {
    let q = queue(&["cheap", "fast"]);
    let fleets = two_fleets();
    let mut preference = pb::PriorityConfigurationOverride {
        location_order: vec!["ap".into(), "eu".into()],
        placement_fallback_strategy: pb::PlacementFallbackStrategy::DefaultAfterSinglePass as i32,
    };
    let at = |preference: &pb::PriorityConfigurationOverride, attempt| {
        names(&order(&Candidates {
            queue: &q,
            fleets: &fleets,
            player_latencies: &[],
            priority_override: Some(preference),
            waited_ms: 0,
            attempt,
        }))
    };
    assert_eq!(at(&preference, 0), ["fast/ap", "cheap/eu", "fast/eu"]);
    assert_eq!(
        at(&preference, 1),
        ["cheap/eu", "cheap/us", "fast/ap", "fast/eu"],
        "the queue's own order after"
    );
    preference.placement_fallback_strategy = pb::PlacementFallbackStrategy::None as i32;
    assert_eq!(at(&preference, 5), ["fast/ap", "cheap/eu", "fast/eu"]);
}

/// A random world: up to 4 fleets over locations l0..l4, each location maybe undeployed or not viable, fleets
/// maybe inactive or gone; up to 3 players' latencies; up to 3 latency policies.
fn world() -> impl Strategy<Value = (pb::Queue, HashMap<String, Option<FleetView>>, Vec<pb::PlayerLatency>)> {
    let location =
        (0u8..5, any::<bool>(), any::<bool>(), 0u64..1000).prop_map(|(n, deployed, viable, cost)| LocationView {
            location: format!("l{n}"),
            deployed,
            viable,
            hourly_cost_micros: cost,
        });
    let fleet = (any::<bool>(), any::<bool>(), proptest::collection::vec(location, 0..5)).prop_map(
        |(exists, active, mut locations)| {
            let mut seen = HashSet::new();
            locations.retain(|l| seen.insert(l.location.clone()));
            exists.then_some(FleetView { active, locations })
        },
    );
    let latencies = proptest::collection::vec((0u8..3, 0u8..5, 0u32..300), 0..12).prop_map(|entries| {
        let mut seen = HashSet::new();
        entries
            .into_iter()
            .filter(|(p, l, _)| seen.insert((*p, *l)))
            .map(|(p, l, ms)| latency(&format!("p{p}"), &format!("l{l}"), ms))
            .collect::<Vec<_>>()
    });
    let policies = proptest::collection::btree_set(1u32..300, 0..4).prop_flat_map(|maxima| {
        let count = maxima.len();
        (Just(maxima), proptest::collection::vec(1u32..20, count))
    });
    (proptest::collection::vec(fleet, 1..5), latencies, policies).prop_map(
        |(fleets, latencies, (maxima, durations))| {
            let ids: Vec<String> = (0..fleets.len()).map(|n| format!("f{n}")).collect();
            let mut q = queue(&ids.iter().map(String::as_str).collect::<Vec<_>>());
            let count = maxima.len();
            q.player_latency_policies = maxima
                .into_iter()
                .zip(durations)
                .enumerate()
                .map(|(i, (maximum, seconds))| pb::PlayerLatencyPolicy {
                    maximum_individual_player_latency_ms: maximum,
                    policy_duration_seconds: if i + 1 == count { 0 } else { seconds },
                })
                .collect();
            (q, ids.into_iter().zip(fleets).collect(), latencies)
        },
    )
}

proptest! {
    /// The candidates are exactly those that can host: their fleet exists and is ACTIVE, their location DEPLOYED
    /// and viable, every player reported a latency to it within the cap in force; none is listed twice; and they
    /// follow the first criterion of the order in force.
    #[test]
    fn candidates_are_eligible_distinct_and_ordered((q, fleets, latencies) in world(), waited_ms in 0u64..100_000) {
        let found = after(&q, &fleets, &latencies, waited_ms);
        let players = players(&latencies);
        let cap = latency_cap(&q.player_latency_policies, waited_ms);
        let reached = |location: &str| {
            players.iter().all(|player| {
                latencies
                    .iter()
                    .find(|l| l.player_id == *player && l.location == location)
                    .is_some_and(|l| cap.is_none_or(|cap| l.latency_ms <= cap))
            })
        };
        let eligible: HashSet<Candidate> = fleets
            .iter()
            .filter_map(|(id, fleet)| Some((id, fleet.as_ref().filter(|fleet| fleet.active)?)))
            .flat_map(|(id, fleet)| {
                fleet
                    .locations
                    .iter()
                    .filter(|l| l.deployed && l.viable && reached(&l.location))
                    .map(move |l| Candidate { fleet_id: id.clone(), location: l.location.clone() })
            })
            .collect();
        let mut seen = HashSet::new();
        for candidate in &found.candidates {
            prop_assert!(seen.insert(candidate.clone()), "{candidate:?} twice");
        }
        prop_assert_eq!(seen, eligible);
        let averages = average_latencies(&latencies);
        let first_key = |c: &Candidate| {
            if players.is_empty() {
                q.destinations.iter().position(|d| d.fleet_id == c.fleet_id).unwrap() as u64
            } else {
                averages[c.location.as_str()]
            }
        };
        let keys: Vec<u64> = found.candidates.iter().map(first_key).collect();
        prop_assert!(keys.windows(2).all(|pair| pair[0] <= pair[1]), "{keys:?}");
    }

    /// Latency policies only relax: whatever may be tried after a wait may be tried after any longer one.
    #[test]
    fn waiting_longer_never_loses_a_candidate((q, fleets, latencies) in world(), a in 0u64..100_000, b in 0u64..100_000) {
        let (early, late) = (a.min(b), a.max(b));
        let at = |waited_ms| {
            after(&q, &fleets, &latencies, waited_ms)
                .candidates
                .into_iter()
            .collect::<HashSet<_>>()
        };
        prop_assert!(at(early).is_subset(&at(late)));
    }
}
