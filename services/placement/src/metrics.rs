//! The placement service's metrics, each declared once with its help text. Their names are part of the product:
//! dashboards and alerts read them.

use metrics::{counter, describe_counter, describe_gauge, gauge};

const CLAIMS: &str = "berth_claims_total";
const ALLOCATIONS: &str = "berth_allocations_total";
const CLAIMS_LAPSED: &str = "berth_claims_lapsed_total";
const AVAILABLE: &str = "berth_available_game_servers";
const CLAIMED: &str = "berth_claimed_game_servers";
const STARTED: &str = "berth_placements_started_total";
const ENDED: &str = "berth_placements_ended_total";
const FULFILLED: &str = "berth_placements_fulfilled_total";
const LOWEST_LATENCY: &str = "berth_placements_lowest_latency_total";
const LOWEST_PRICE: &str = "berth_placements_lowest_price_total";
const DEPTH: &str = "berth_queue_depth";
const AVERAGE_WAIT: &str = "berth_queue_average_wait_seconds";

/// Gives each metric its help text (once a recorder is installed).
pub(crate) fn describe() {
    describe_counter!(CLAIMS, "ClaimGameServer calls, by outcome");
    describe_counter!(ALLOCATIONS, "Allocate calls of Agones' allocation API, by outcome");
    describe_counter!(CLAIMS_LAPSED, "Claims that lapsed and were handed back to the pool");
    describe_gauge!(AVAILABLE, "Game servers in the pool, claimable now, by fleet");
    describe_gauge!(CLAIMED, "Game servers claimed now, by fleet");
    describe_counter!(STARTED, "Placements started, by queue (GameLift PlacementsStarted)");
    describe_counter!(
        ENDED,
        "Placements ended, by queue and status: FULFILLED, CANCELLED, TIMED_OUT, FAILED (GameLift PlacementsSucceeded, \
         PlacementsCanceled, PlacementsTimedOut, PlacementsFailed)"
    );
    describe_counter!(
        FULFILLED,
        "Placements fulfilled, by queue, location and how the first choice fared: TAKEN, OUT_OF_CAPACITY, NOT_VIABLE \
         (GameLift FirstChoiceOutOfCapacity, FirstChoiceNotViable)"
    );
    describe_counter!(
        LOWEST_LATENCY,
        "Placements fulfilled in the lowest-latency location, by queue (GameLift LowestLatencyPlacement)"
    );
    describe_counter!(
        LOWEST_PRICE,
        "Placements fulfilled on the cheapest candidate, by queue (GameLift LowestPricePlacement)"
    );
    describe_gauge!(DEPTH, "Placements PENDING now, by queue (GameLift QueueDepth)");
    describe_gauge!(
        AVERAGE_WAIT,
        "Average time the placements PENDING now have waited, by queue (GameLift AverageWaitTime)"
    );
}

/// A placement started in `queue`.
pub(crate) fn placement_started(queue: &str) {
    counter!(STARTED, "queue" => queue.to_owned()).increment(1);
}

/// `count` placements of `queue` ended with `status`.
pub(crate) fn placements_ended(queue: &str, status: &'static str, count: u64) {
    if count > 0 {
        counter!(ENDED, "queue" => queue.to_owned(), "status" => status).increment(count);
    }
}

/// A placement of `queue` fulfilled in `location`.
pub(crate) fn placement_fulfilled(queue: &str, location: &str, first_choice: &'static str, lowest: (bool, bool)) {
    placements_ended(queue, "FULFILLED", 1);
    counter!(FULFILLED, "queue" => queue.to_owned(), "location" => location.to_owned(), "first_choice" => first_choice)
        .increment(1);
    if lowest.0 {
        counter!(LOWEST_LATENCY, "queue" => queue.to_owned()).increment(1);
    }
    if lowest.1 {
        counter!(LOWEST_PRICE, "queue" => queue.to_owned()).increment(1);
    }
}

/// A queue's PENDING placements as a sweep found them.
pub(crate) fn queue_depth(queue: &str, pending: u64, average_wait_ms: u64) {
    gauge!(DEPTH, "queue" => queue.to_owned()).set(pending as f64);
    gauge!(AVERAGE_WAIT, "queue" => queue.to_owned()).set(average_wait_ms as f64 / 1000.0);
}

/// A claim answered with `outcome`.
pub(crate) fn claim(outcome: &'static str) {
    counter!(CLAIMS, "outcome" => outcome).increment(1);
}

/// An Agones allocation's outcome.
pub(crate) fn allocation(outcome: &'static str) {
    counter!(ALLOCATIONS, "outcome" => outcome).increment(1);
}

/// Claims handed back to a pool.
pub(crate) fn claims_lapsed(count: u32) {
    if count > 0 {
        counter!(CLAIMS_LAPSED).increment(u64::from(count));
    }
}

/// A fleet's pool as a sweep found it.
pub(crate) fn pool(fleet: &str, available: u64, claimed: u64) {
    gauge!(AVAILABLE, "fleet" => fleet.to_owned()).set(available as f64);
    gauge!(CLAIMED, "fleet" => fleet.to_owned()).set(claimed as f64);
}
