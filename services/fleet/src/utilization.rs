//! The live counts the store keeps per location, shown on the contract's fleet and location records (DescribeFleet
//! and every Fleet answer). GetFleetUtilization's figures come from the formulas of
//! `berth_domain::fleet::utilization`, which the policy simulator shares.

use berth_domain::fleet::utilization::{Tally, game_server_counts, instance_counts};
use berth_proto::fleet::v1 as pb;
use berth_store::utilization::Utilization;

/// A fleet as the contract shows it, each location and the fleet's sums with the counts of `read` (a location added
/// after the read keeps the record's).
pub(crate) fn with_counts(mut fleet: pb::Fleet, read: &Utilization) -> pb::Fleet {
    let mut total = Tally::default();
    for location in &mut fleet.locations {
        if let Some((_, tally)) = read.locations.iter().find(|(name, _)| *name == location.location) {
            count(location, tally);
            total.add(tally);
        }
    }
    fleet.instance_counts = Some(instance_counts(&total));
    fleet.game_server_counts = Some(game_server_counts(&total));
    fleet
}

/// A location as the contract shows it, with the counts of its tally.
pub(crate) fn location_with_counts(mut location: pb::FleetLocation, tally: &Tally) -> pb::FleetLocation {
    count(&mut location, tally);
    location
}

fn count(location: &mut pb::FleetLocation, tally: &Tally) {
    location.instance_counts = Some(instance_counts(tally));
    location.game_server_counts = Some(game_server_counts(tally));
}
