//! The placement service's metrics, each declared once with its help text. Their names are part of the product:
//! dashboards and alerts read them.

use metrics::{counter, describe_counter, describe_gauge, gauge};

const CLAIMS: &str = "berth_claims_total";
const CLAIMS_LAPSED: &str = "berth_claims_lapsed_total";
const AVAILABLE: &str = "berth_available_game_servers";
const CLAIMED: &str = "berth_claimed_game_servers";

/// Gives each metric its help text (once a recorder is installed).
pub(crate) fn describe() {
    describe_counter!(CLAIMS, "ClaimGameServer calls, by outcome");
    describe_counter!(CLAIMS_LAPSED, "Claims that lapsed and were handed back to the pool");
    describe_gauge!(AVAILABLE, "Game servers in the pool, claimable now, by fleet");
    describe_gauge!(CLAIMED, "Game servers claimed now, by fleet");
}

/// A claim answered with `outcome`.
pub(crate) fn claim(outcome: &'static str) {
    counter!(CLAIMS, "outcome" => outcome).increment(1);
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
