//! Fleets as the fleet service keeps them: the configuration an operator gave (defaults resolved), the status of
//! the fleet and of each of its locations, and the conversions to the contract (`berth/fleet/v1/fleets.proto`).
//!
//! The configuration is kept as the contract's own `Fleet` message holding only configuration fields, so a field
//! added to the contract is kept without a conversion to write; statuses, capacity and times are kept beside it,
//! where the store's scripts read and change them atomically.

pub mod check;
pub mod parameters;
pub mod reconcile;
pub mod settings;
pub mod utilization;

use berth_proto::fleet::v1 as pb;

use crate::game_server::timestamp;
use crate::stored::{FleetStatus, LocationStatus};

/// Defaults of a fleet's settings, where the contract gives them.
pub mod defaults {
    /// Activation timeout, s.
    pub const ACTIVATION_TIMEOUT_S: u32 = 300;
    /// Player-session reservation timeout, s.
    pub const RESERVATION_TIMEOUT_S: u32 = 60;
    /// Register deadline after launch, s.
    pub const REGISTER_TIMEOUT_S: u32 = 300;
    /// Ready deadline after registering, s.
    pub const READY_TIMEOUT_S: u32 = 300;
    /// Heartbeat period, ms.
    pub const HEARTBEAT_INTERVAL_MS: u32 = 5000;
    /// Heartbeat periods UNHEALTHY or silent before a process is terminated.
    pub const UNHEALTHY_AFTER: u32 = 3;
    /// From TerminateProcess to ProcessEnding, s.
    pub const TERMINATION_GRACE_S: u32 = 300;
    /// From ProcessEnding to exit, s.
    pub const EXIT_TIMEOUT_S: u32 = 30;
    /// A DEPLOYING location's first heartbeat deadline, s.
    pub const FIRST_HEARTBEAT_TIMEOUT_S: u32 = 600;
    /// A DEPLOYING location's first ready deadline, s.
    pub const LOCATION_READY_TIMEOUT_S: u32 = 5400;
}

/// One location of a fleet.
#[derive(Clone, Debug, PartialEq)]
pub struct LocationRecord {
    pub location: String,
    pub status: LocationStatus,
    pub status_message: String,
    /// When the status last changed, ms since the epoch.
    pub status_change_ms: i64,
    pub capacity: pb::FleetCapacity,
    pub standby: Option<pb::StandbyConfiguration>,
    pub autoscaling_suspended: bool,
    pub viabilities: Vec<pb::InstanceTypeViability>,
    /// When it was added, ms since the epoch.
    pub create_ms: i64,
    /// Version of its standby, viabilities and suspension, raised by every change of them and never given twice
    /// in a fleet: a change computed from an older version is refused.
    pub version: u64,
}

/// A fleet: its configuration, statuses and locations (home first).
#[derive(Clone, Debug, PartialEq)]
pub struct FleetRecord {
    /// The configuration fields of the contract's `Fleet`; the others are left unset.
    pub config: pb::Fleet,
    pub status: FleetStatus,
    pub status_message: String,
    /// Raised by every change of configuration.
    pub revision: u64,
    /// When it was created and last reconfigured, ms since the epoch.
    pub create_ms: i64,
    pub update_ms: i64,
    pub locations: Vec<LocationRecord>,
}

impl FleetRecord {
    /// The fleet as the record holds it. Instance and game-server counts, but the desired ones, are left at zero:
    /// they live in the locations' tallies, from which the fleet service fills them in.
    pub fn to_proto(&self) -> pb::Fleet {
        pb::Fleet {
            status: self.status.to_proto() as i32,
            status_message: self.status_message.clone(),
            revision: self.revision,
            create_time: Some(timestamp(self.create_ms)),
            update_time: Some(timestamp(self.update_ms)),
            locations: self.locations.iter().map(LocationRecord::to_proto).collect(),
            instance_counts: Some(pb::InstanceCounts {
                desired: self.locations.iter().map(|l| l.capacity.desired_instances).sum(),
                ..Default::default()
            }),
            game_server_counts: Some(pb::GameServerCounts::default()),
            ..self.config.clone()
        }
    }

    /// Its location named `location`, or its home location for an empty name.
    pub fn location(&self, location: &str) -> Option<&LocationRecord> {
        if location.is_empty() {
            self.locations.first()
        } else {
            self.locations.iter().find(|l| l.location == location)
        }
    }
}

impl LocationRecord {
    /// The location as the contract shows it.
    pub fn to_proto(&self) -> pb::FleetLocation {
        pb::FleetLocation {
            location: self.location.clone(),
            status: self.status.to_proto() as i32,
            status_message: self.status_message.clone(),
            status_change_time: Some(timestamp(self.status_change_ms)),
            capacity: Some(self.capacity),
            instance_counts: Some(pb::InstanceCounts {
                desired: self.capacity.desired_instances,
                ..Default::default()
            }),
            game_server_counts: Some(pb::GameServerCounts::default()),
            standby: self.standby.clone(),
            autoscaling_suspended: self.autoscaling_suspended,
            instance_type_viabilities: self.viabilities.clone(),
            create_time: Some(timestamp(self.create_ms)),
        }
    }
}
