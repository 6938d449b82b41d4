//! Where a placement may go, in what order: the FleetIQ algorithm of `queues.proto`'s package comment, steps 1 to
//! 5, as a pure function of the queue, the state of its destination fleets, the request and how long it has
//! waited. Step 6 (take the first candidate with a server able to host the session) is the store's, which tries the
//! candidates in this order.

use std::collections::{BTreeMap, HashMap};

use berth_proto::fleet::v1 as fleet_pb;
use berth_proto::placement::v1 as pb;

use crate::fleet::FleetRecord;
use crate::fleet::reconcile::{launch_type, not_viable};
use crate::stored::{FirstChoiceOutcome, FleetStatus, LocationStatus};

/// One location of a destination fleet, as the placement sees it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationView {
    pub location: String,
    /// DEPLOYED: sessions may be placed there.
    pub deployed: bool,
    /// The fleet can launch on a viable instance type there (a Spot-only fleet whose types are all judged not
    /// viable cannot).
    pub viable: bool,
    /// Hourly cost of an instance of the fleet there, as it currently launches, in millionths of the currency.
    pub hourly_cost_micros: u64,
}

/// A destination fleet as the placement sees it now; `None` in [`Candidates::fleets`] when it does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetView {
    /// ACTIVE: sessions may be placed in it.
    pub active: bool,
    pub locations: Vec<LocationView>,
}

impl FleetView {
    /// A fleet as its record stands. A location is viable when the fleet may launch there (a fleet that launches no
    /// instances of its own, as an Anywhere fleet, always is); its cost is that of the type it launches, at the
    /// Spot price when it launches Spot.
    pub fn of(record: &FleetRecord) -> FleetView {
        let config = &record.config;
        let locations = record
            .locations
            .iter()
            .map(|location| {
                let excluded = not_viable(&location.viabilities);
                let launching = launch_type(config, &excluded);
                let hourly_cost_micros = launching
                    .and_then(|name| config.instance_definitions.iter().find(|d| d.instance_type == name))
                    .map_or(0, |definition| {
                        let spot = config.balancing_strategy() != fleet_pb::BalancingStrategy::OnDemandOnly
                            && !excluded.contains(&definition.instance_type)
                            && definition.spot_hourly_cost_micros > 0;
                        if spot {
                            definition.spot_hourly_cost_micros
                        } else {
                            definition.on_demand_hourly_cost_micros
                        }
                    });
                LocationView {
                    location: location.location.clone(),
                    deployed: location.status == LocationStatus::Deployed,
                    viable: config.instance_definitions.is_empty() || launching.is_some(),
                    hourly_cost_micros,
                }
            })
            .collect();
        FleetView {
            active: record.status == FleetStatus::Active,
            locations,
        }
    }
}

/// A candidate: a location of a destination fleet.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Candidate {
    pub fleet_id: String,
    pub location: String,
}

/// What one attempt of a placement works from.
#[derive(Clone, Debug)]
pub struct Candidates<'a> {
    pub queue: &'a pb::Queue,
    /// The queue's destination fleets by id, as they stand.
    pub fleets: &'a HashMap<String, Option<FleetView>>,
    pub player_latencies: &'a [pb::PlayerLatency],
    pub priority_override: Option<&'a pb::PriorityConfigurationOverride>,
    /// How long the placement has waited, ms: which latency policy is in force.
    pub waited_ms: u64,
    /// Attempts made before this one: a location override without fallback keeps to its locations, with the default
    /// fallback only on the first.
    pub attempt: u32,
}

/// The candidates of one attempt, in the order to try them, and what the queue's metrics record of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Order {
    /// Candidates to try, first first.
    pub candidates: Vec<Candidate>,
    /// The first candidate of the order before non-viable ones were dropped (GameLift's first choice).
    pub first_choice: Option<Candidate>,
    /// Whether the first choice was dropped as not viable.
    pub first_choice_not_viable: bool,
    /// Among the candidates tried, the one with the lowest average player latency (none without latencies).
    pub lowest_latency: Option<Candidate>,
    /// Among the candidates tried, the cheapest.
    pub lowest_price: Option<Candidate>,
}

impl Order {
    /// What the queue's metrics record of a placement fulfilled on `taken`: how its first choice fared, whether
    /// `taken` is in the lowest-latency location, and whether it is the cheapest candidate.
    pub fn outcome(&self, taken: &Candidate) -> (FirstChoiceOutcome, bool, bool) {
        let first_choice = if self.first_choice.as_ref() == Some(taken) {
            FirstChoiceOutcome::Taken
        } else if self.first_choice_not_viable {
            FirstChoiceOutcome::NotViable
        } else {
            FirstChoiceOutcome::OutOfCapacity
        };
        let lowest_latency = self
            .lowest_latency
            .as_ref()
            .is_some_and(|lowest| lowest.location == taken.location);
        (first_choice, lowest_latency, self.lowest_price.as_ref() == Some(taken))
    }
}

/// The latency cap in force after `waited_ms` of waiting, ms; `None` when the queue caps nothing. Policies apply
/// from the lowest maximum up, each for its duration; the last stays in force.
pub fn latency_cap(policies: &[pb::PlayerLatencyPolicy], waited_ms: u64) -> Option<u32> {
    let mut sorted: Vec<_> = policies.iter().collect();
    sorted.sort_by_key(|p| p.maximum_individual_player_latency_ms);
    let mut until_ms = 0u64;
    for policy in &sorted {
        until_ms += u64::from(policy.policy_duration_seconds) * 1000;
        if policy.policy_duration_seconds == 0 || waited_ms < until_ms {
            return Some(policy.maximum_individual_player_latency_ms);
        }
    }
    sorted.last().map(|p| p.maximum_individual_player_latency_ms)
}

/// The default order of the criteria: every one with player latencies, DESTINATION and LOCATION without.
const DEFAULT_ORDER: [pb::PriorityType; 4] = [
    pb::PriorityType::Latency,
    pb::PriorityType::Cost,
    pb::PriorityType::Destination,
    pb::PriorityType::Location,
];

/// Most criteria an order ranks by: each priority type at most once.
const CRITERIA: usize = 5;

/// The candidates of an attempt, filtered and ordered (steps 1 to 5).
pub fn order(input: &Candidates<'_>) -> Order {
    let queue = input.queue;
    let latencies = average_latencies(input.player_latencies);
    let players = players(input.player_latencies);
    let cap = latency_cap(&queue.player_latency_policies, input.waited_ms);
    let reachable = reachable(input.player_latencies, cap);
    let allowed = queue
        .filter_configuration
        .as_ref()
        .map(|f| &f.allowed_locations)
        .filter(|locations| !locations.is_empty());
    let mut eligible = Vec::new();
    for (index, destination) in queue.destinations.iter().enumerate() {
        let Some(Some(fleet)) = input.fleets.get(&destination.fleet_id) else {
            continue;
        };
        if !fleet.active {
            continue;
        }
        for location in fleet.locations.iter().filter(|l| l.deployed) {
            if allowed.is_some_and(|allowed| !allowed.contains(&location.location)) {
                continue;
            }
            if !players.is_empty() && reachable.get(location.location.as_str()) != Some(&players.len()) {
                continue;
            }
            eligible.push((index, location));
        }
    }
    let override_locations = input
        .priority_override
        .map(|o| o.location_order.as_slice())
        .filter(|locations| !locations.is_empty());
    let keep_to_override = override_locations.is_some()
        && (input.attempt == 0
            || input
                .priority_override
                .is_some_and(|o| o.placement_fallback_strategy() == pb::PlacementFallbackStrategy::None));
    let location_order: &[String] = match (keep_to_override, override_locations) {
        (true, Some(locations)) => {
            eligible.retain(|(_, location)| locations.contains(&location.location));
            locations
        }
        _ => queue
            .priority_configuration
            .as_ref()
            .map_or(&[], |p| p.location_order.as_slice()),
    };
    let criteria = criteria(queue, !players.is_empty(), keep_to_override);
    debug_assert!(criteria.len() <= CRITERIA, "a criterion the keys have no room for");
    // A location no order names comes after those it names, by name: its rank among the candidates' locations.
    let mut names: Vec<&str> = eligible.iter().map(|(_, l)| l.location.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let key = |index: usize, location: &LocationView, criterion: pb::PriorityType| -> u64 {
        match criterion {
            pb::PriorityType::Latency => latencies.get(location.location.as_str()).copied().unwrap_or(0),
            pb::PriorityType::Cost => location.hourly_cost_micros,
            pb::PriorityType::Destination => index as u64,
            pb::PriorityType::Location => match location_order.iter().position(|l| *l == location.location) {
                Some(at) => at as u64,
                None => (location_order.len() + names.binary_search(&location.location.as_str()).unwrap_or(0)) as u64,
            },
            pb::PriorityType::Unspecified => 0,
        }
    };
    // Each candidate's keys, criterion by criterion, compared as a list: the first that differs decides, as the
    // criteria rank. Numbers computed once per candidate: comparing names or looking locations up at each of the
    // sort's comparisons took a placement worker ~30 µs per attempt over 40 candidates, most of it in memcmp.
    eligible.sort_by_cached_key(|(index, location)| {
        let mut keys = [0; CRITERIA];
        for (slot, criterion) in keys.iter_mut().zip(&criteria) {
            *slot = key(*index, location, *criterion);
        }
        keys
    });
    let candidate = |index: usize, location: &LocationView| Candidate {
        fleet_id: queue.destinations[index].fleet_id.clone(),
        location: location.location.clone(),
    };
    let first_choice = eligible.first().map(|(index, location)| candidate(*index, location));
    let first_choice_not_viable = eligible.first().is_some_and(|(_, location)| !location.viable);
    eligible.retain(|(_, location)| location.viable);
    let lowest_latency = (!players.is_empty())
        .then(|| {
            eligible
                .iter()
                .min_by_key(|(_, l)| latencies.get(l.location.as_str()).copied().unwrap_or(u64::MAX))
        })
        .flatten()
        .map(|(index, location)| candidate(*index, location));
    let lowest_price = eligible
        .iter()
        .min_by_key(|(_, l)| l.hourly_cost_micros)
        .map(|(index, location)| candidate(*index, location));
    Order {
        candidates: eligible
            .iter()
            .map(|(index, location)| candidate(*index, location))
            .collect(),
        first_choice,
        first_choice_not_viable,
        lowest_latency,
        lowest_price,
    }
}

/// The criteria in force: an override's location list comes first while it is kept to; then the queue's order,
/// with the criteria it leaves out appended in the default order; without a priority configuration, the default
/// order (LATENCY and COST only for a request with player latencies).
fn criteria(queue: &pb::Queue, with_latencies: bool, by_override: bool) -> Vec<pb::PriorityType> {
    let mut criteria = Vec::new();
    if by_override {
        criteria.push(pb::PriorityType::Location);
    }
    match &queue.priority_configuration {
        Some(priority) => {
            let given = priority
                .priority_order
                .iter()
                .filter_map(|c| pb::PriorityType::try_from(*c).ok());
            for criterion in given.chain(DEFAULT_ORDER) {
                if !criteria.contains(&criterion) {
                    criteria.push(criterion);
                }
            }
        }
        None => {
            let defaults = DEFAULT_ORDER
                .into_iter()
                .filter(|c| with_latencies || !matches!(c, pb::PriorityType::Latency | pb::PriorityType::Cost));
            for criterion in defaults {
                if !criteria.contains(&criterion) {
                    criteria.push(criterion);
                }
            }
        }
    }
    criteria
}

/// The players that reported latencies.
fn players(latencies: &[pb::PlayerLatency]) -> Vec<&str> {
    let mut players: Vec<&str> = latencies.iter().map(|l| l.player_id.as_str()).collect();
    players.sort_unstable();
    players.dedup();
    players
}

/// How many players reported a latency of at most `cap` to each location (a player's first report to a location is
/// the one that counts): every player can be placed where this is all of them. Counted once per attempt rather than
/// by looking each player up for each candidate, which compared player ids over and over.
fn reachable(latencies: &[pb::PlayerLatency], cap: Option<u32>) -> BTreeMap<&str, usize> {
    let mut first: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for latency in latencies {
        first
            .entry((latency.location.as_str(), latency.player_id.as_str()))
            .or_insert(latency.latency_ms);
    }
    let mut reachable = BTreeMap::new();
    for ((location, _), ms) in first {
        if cap.is_none_or(|cap| ms <= cap) {
            *reachable.entry(location).or_default() += 1;
        }
    }
    reachable
}

/// The players' average latency to each location they reported, ms.
fn average_latencies(latencies: &[pb::PlayerLatency]) -> BTreeMap<&str, u64> {
    let mut sums: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for latency in latencies {
        let sum = sums.entry(latency.location.as_str()).or_default();
        sum.0 += u64::from(latency.latency_ms);
        sum.1 += 1;
    }
    sums.into_iter()
        .map(|(location, (sum, n))| (location, sum / n))
        .collect()
}

#[cfg(test)]
mod tests;
