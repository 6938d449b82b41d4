//! Gathering a location for one pass: the lease taken or renewed, what autoscaling reads, the instances as
//! recorded with what the provisioner says of each, and the launch backoff this replica keeps — everything the
//! decision is made from, read in one place before anything is decided.

use berth_domain::fleet::reconcile::backoff::LaunchBackoff;
use berth_domain::fleet::reconcile::{InstanceView, ServerState, ServerView};
use berth_domain::fleet::{FleetRecord, LocationRecord};
use berth_domain::stored::ProcessState;
use berth_store::StoreError;
use berth_store::instances::{self, InstanceRecord, LocationInstances, ServerRecord};

use super::Reconciler;
use crate::autoscaler::Reading;
use crate::provisioner::{Instance, Provisioner};

/// A location as one pass finds it.
pub(super) struct Survey<'a> {
    pub fleet: &'a FleetRecord,
    pub record: &'a LocationRecord,
    /// The lease this replica holds on it, to act under.
    pub lease: String,
    /// What autoscaling read; `None` when it is off here, has nothing to evaluate, or could not read (the
    /// instances then follow the desired count as it stands).
    pub scaling: Option<Reading>,
    /// Its instances; `None` when no provisioner runs them here (an ANYWHERE fleet's are only autoscaled).
    pub instances: Option<Instances>,
    pub backoff: LaunchBackoff,
}

/// A location's instances as recorded, and as the provisioner sees them.
pub(super) struct Instances {
    pub found: LocationInstances,
    /// Each of `found.instances`, in order, with how many of its processes the provisioner sees running.
    pub views: Vec<InstanceView>,
}

impl Instances {
    /// The record of instance `id`.
    pub(super) fn record(&self, id: &str) -> Option<&InstanceRecord> {
        self.found.instances.iter().find(|i| i.id == id)
    }
}

impl Reconciler {
    /// The location named `location` of `fleet` as it is now; `None` when the fleet has no such location or
    /// another replica holds its lease.
    pub(super) async fn gather<'a>(
        &self,
        fleet: &'a FleetRecord,
        location: &str,
        provisioner: Option<&dyn Provisioner>,
    ) -> Result<Option<Survey<'a>>, StoreError> {
        let fleet_id = fleet.config.fleet_id.as_str();
        let Some(record) = fleet.location(location) else {
            return Ok(None);
        };
        let Some(lease) = self.lease(fleet_id, location).await? else {
            return Ok(None);
        };
        let scaling = match self.autoscaler.read(fleet, record).await {
            Ok(reading) => reading,
            Err(err) => {
                tracing::warn!(fleet = %fleet_id, %location, error = %err, "autoscaling failed");
                None
            }
        };
        let instances = match provisioner {
            Some(provisioner) => Some(self.instances(fleet_id, location, provisioner).await?),
            None => None,
        };
        let key = (fleet_id.to_owned(), location.to_owned());
        let backoff = self.backoffs().get(&key).copied().unwrap_or_default();
        Ok(Some(Survey {
            fleet,
            record,
            lease,
            scaling,
            instances,
            backoff,
        }))
    }

    async fn instances(
        &self,
        fleet_id: &str,
        location: &str,
        provisioner: &dyn Provisioner,
    ) -> Result<Instances, StoreError> {
        let found = instances::read_instances(&self.store, fleet_id, location).await?;
        let mut views = Vec::with_capacity(found.instances.len());
        for instance in &found.instances {
            let running = match provisioner.running(instance_of(fleet_id, instance)).await {
                Ok(running) => Some(running),
                Err(err) => {
                    tracing::warn!(fleet = %fleet_id, instance = %instance.id, error = %err, "cannot tell whether it runs");
                    None
                }
            };
            views.push(view(instance, running));
        }
        Ok(Instances { found, views })
    }
}

/// An instance as the provisioner knows it.
pub(super) fn instance_of<'a>(fleet_id: &'a str, record: &'a InstanceRecord) -> Instance<'a> {
    Instance {
        fleet_id,
        instance_id: &record.id,
        handle: &record.handle,
    }
}

fn view(record: &InstanceRecord, running: Option<u32>) -> InstanceView {
    InstanceView {
        id: record.id.clone(),
        instance_type: record.instance_type.clone(),
        state: record.state,
        launch_ms: record.launch_ms,
        kill_ms: record.kill_ms,
        servers: record.servers.iter().map(server_view).collect(),
        running,
    }
}

fn server_view(server: &ServerRecord) -> ServerView {
    let state = match server.process {
        None => ServerState::Absent,
        Some(ProcessState::Initializing) => ServerState::Starting,
        Some(ProcessState::StandingBy | ProcessState::Active) => ServerState::Ready {
            sessions: server.sessions,
            held: server.held,
            protected: server.protected,
        },
        Some(ProcessState::Terminating) => ServerState::Ending,
        Some(ProcessState::Lost) => ServerState::Lost,
    };
    ServerView {
        registered: server.registered_ms.is_some(),
        state,
    }
}
