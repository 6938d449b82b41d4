//! The fleet service's metrics, each declared once with its help text. Their names are part of the product:
//! dashboards and alerts read them. Labels are bounded by what operators create (fleets and their locations) and
//! by fixed sets (states, outcomes).

use std::time::Duration;

use berth_domain::stored::{InstanceState, LocationStatus};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

const LAUNCHES: &str = "berth_instance_launches_total";
const INSTANCES: &str = "berth_instances";
const LOCATION_STATUS: &str = "berth_location_status";
const LEASES_HELD: &str = "berth_location_leases_held";
const LEASES_TAKEN: &str = "berth_location_leases_taken_total";
const LEASES_LOST: &str = "berth_location_leases_lost_total";
const PASS: &str = "berth_reconcile_pass_seconds";
const SCALING_ACTIONS: &str = "berth_scaling_actions_total";
const WEBHOOK_CALLS: &str = "berth_scaling_webhook_calls_total";
const WEBHOOK_SECONDS: &str = "berth_scaling_webhook_seconds";

/// Gives each metric its help text (once a recorder is installed).
pub(crate) fn describe() {
    describe_counter!(
        LAUNCHES,
        "Instance launches asked of the provisioner, by fleet, location and outcome (launched, failed)"
    );
    describe_gauge!(
        INSTANCES,
        "Instances of a location by state, as its lease holder last reconciled it (by fleet, location, state)"
    );
    describe_gauge!(
        LEASES_HELD,
        "Fleet locations whose lease this replica holds: the locations it reconciles"
    );
    describe_counter!(
        LEASES_TAKEN,
        "Location leases this replica started to hold (a new location, or one whose holder stopped renewing)"
    );
    describe_counter!(
        LEASES_LOST,
        "Location leases this replica found held by another replica"
    );
    describe_histogram!(PASS, "Time of one reconcile pass over every location, in seconds");
    describe_counter!(
        SCALING_ACTIONS,
        "Scaling actions applied, by fleet, location and direction (out, in)"
    );
    describe_counter!(
        WEBHOOK_CALLS,
        "Calls of scaling webhooks, by outcome (answered, failed: unreachable, refused or malformed)"
    );
    describe_histogram!(WEBHOOK_SECONDS, "Time a scaling webhook took to answer, in seconds");
}

/// A launch of an instance of `fleet` in `location`, `launched` or not.
pub(crate) fn launch(fleet: &str, location: &str, launched: bool) {
    let outcome = if launched { "launched" } else { "failed" };
    counter!(LAUNCHES, "fleet" => fleet.to_owned(), "location" => location.to_owned(), "outcome" => outcome)
        .increment(1);
}

/// A location's instances by state, as a pass found them.
pub(crate) fn instances(fleet: &str, location: &str, states: impl Iterator<Item = InstanceState> + Clone) {
    for state in InstanceState::ALL {
        let count = states.clone().filter(|found| found == state).count();
        gauge!(INSTANCES, "fleet" => fleet.to_owned(), "location" => location.to_owned(), "state" => state.as_str())
            .set(count as f64);
    }
}

/// A location's status, as its lease holder last read it.
pub(crate) fn location_status(fleet: &str, location: &str, status: LocationStatus) {
    for each in LocationStatus::ALL {
        let value = if *each == status { 1.0 } else { 0.0 };
        gauge!(LOCATION_STATUS, "fleet" => fleet.to_owned(), "location" => location.to_owned(), "status" => each.as_str())
            .set(value);
    }
}

/// The leases this replica holds now.
pub(crate) fn leases_held(count: usize) {
    gauge!(LEASES_HELD).set(count as f64);
}

/// A lease this replica started to hold.
pub(crate) fn lease_taken() {
    counter!(LEASES_TAKEN).increment(1);
}

/// A lease this replica held and found another holding.
pub(crate) fn lease_lost() {
    counter!(LEASES_LOST).increment(1);
}

/// One reconcile pass took `took`.
pub(crate) fn reconcile_pass(took: Duration) {
    histogram!(PASS).record(took.as_secs_f64());
}

/// A scaling action applied to `fleet`'s `location`.
pub(crate) fn scaling_action(fleet: &str, location: &str, out: bool) {
    counter!(SCALING_ACTIONS, "fleet" => fleet.to_owned(), "location" => location.to_owned(),
        "direction" => if out { "out" } else { "in" })
    .increment(1);
}

/// A scaling webhook answered (or not) after `took`.
pub(crate) fn webhook_call(answered: bool, took: Duration) {
    counter!(WEBHOOK_CALLS, "outcome" => if answered { "answered" } else { "failed" }).increment(1);
    histogram!(WEBHOOK_SECONDS).record(took.as_secs_f64());
}
