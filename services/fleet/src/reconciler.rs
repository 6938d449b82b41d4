//! The reconciler: for every location of every MANAGED fleet, makes the running instances follow the desired count
//! through the fleet's provisioner, and autoscales every location of MANAGED and ANYWHERE fleets. Any number of
//! fleet replicas run it; for each location only the holder of its lease acts, renewing it every pass, and every
//! change it records carries that lease, so that a replica that stalled and lost it changes nothing (see
//! `berth_store::instances`).
//!
//! Each pass over a location is gather → decide → act: [`gather`] reads the location as it is (the lease, the
//! autoscaling inputs, the instances as recorded and as the provisioner sees them), [`decide`] turns that into the
//! autoscaler's decision and the reconcile plan with no I/O (the domain's functions, which the policy simulator
//! also runs), and [`act`] records and carries them out.

mod act;
mod decide;
mod gather;
mod launch;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use berth_domain::fleet::FleetRecord;
use berth_domain::fleet::reconcile::backoff::LaunchBackoff;
use berth_domain::stored::FleetStatus;
use berth_proto::fleet::v1 as pb;
use berth_runtime::auth::TokenKey;
use berth_runtime::sync::lock;
use berth_store::instances::{self, Lease, Leased};
use berth_store::{Store, StoreError, fleets};

use crate::autoscaler::Autoscaler;
use crate::provisioner::Provisioner;
pub(crate) use act::ActError;

/// How the reconciler runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This replica's holder id, unique among replicas.
    pub holder: String,
    /// How long a lease lasts unless renewed, ms.
    pub lease_ms: u64,
    /// Where launched processes reach the health service.
    pub sdk_endpoint: String,
    /// How long a launched process's token is valid, s.
    pub token_ttl_s: u64,
    /// How long the record of a process declared lost stays readable, ms.
    pub lost_retention_ms: u64,
}

/// A location: its fleet and name.
type LocationKey = (String, String);

/// The reconciler of one replica.
pub struct Reconciler {
    store: Store,
    settings: Settings,
    provisioners: HashMap<String, Arc<dyn Provisioner>>,
    tokens: Option<TokenKey>,
    leases: Mutex<HashMap<LocationKey, String>>,
    /// The launch backoff of each location this replica reconciles, while it has failures.
    backoffs: Mutex<HashMap<LocationKey, LaunchBackoff>>,
    autoscaler: Autoscaler,
    /// Set once the replica stops: no lease is taken again.
    stopping: AtomicBool,
}

impl Reconciler {
    pub fn new(
        store: Store,
        settings: Settings,
        provisioners: HashMap<String, Arc<dyn Provisioner>>,
        tokens: Option<TokenKey>,
    ) -> Reconciler {
        Reconciler {
            autoscaler: Autoscaler::new(store.clone()),
            store,
            settings,
            provisioners,
            tokens,
            leases: Mutex::default(),
            backoffs: Mutex::default(),
            stopping: AtomicBool::new(false),
        }
    }

    /// One pass over every location of every fleet this replica can provision.
    pub async fn pass(&self) -> Result<(), StoreError> {
        if self.stopping.load(Ordering::Relaxed) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let mut work = Vec::new();
        for fleet_id in fleets::fleets(&self.store).await? {
            match fleets::read_fleet(&self.store, &fleet_id).await {
                Ok(Some(fleet)) => work.push(fleet),
                Ok(None) => {}
                Err(err) => tracing::warn!(fleet = %fleet_id, error = %err, "cannot read fleet"),
            }
        }
        let mut passes = Vec::new();
        for fleet in &work {
            let provisioner = self.provisioner_of(fleet);
            // Someone else runs an ANYWHERE fleet's instances: its locations are only autoscaled.
            let anywhere = fleet.config.compute_type() == pb::ComputeType::Anywhere;
            if provisioner.is_none() && !anywhere {
                continue;
            }
            for location in &fleet.locations {
                passes.push(self.reconcile_logged(fleet, &location.location, provisioner.clone()));
            }
        }
        futures::future::join_all(passes).await;
        crate::metrics::reconcile_pass(started.elapsed());
        crate::metrics::leases_held(self.leases().len());
        Ok(())
    }

    async fn reconcile_logged(&self, fleet: &FleetRecord, location: &str, provisioner: Option<Arc<dyn Provisioner>>) {
        if let Err(err) = self.reconcile(fleet, location, provisioner.as_deref()).await {
            tracing::warn!(fleet = %fleet.config.fleet_id, %location, error = %err, "reconcile failed");
        }
    }

    /// One pass over a location: gather, decide, act.
    async fn reconcile(
        &self,
        fleet: &FleetRecord,
        location: &str,
        provisioner: Option<&dyn Provisioner>,
    ) -> Result<(), ActError> {
        let Some(survey) = self.gather(fleet, location, provisioner).await? else {
            return Ok(());
        };
        crate::metrics::location_status(&fleet.config.fleet_id, location, survey.record.status);
        if let Some(instances) = &survey.instances {
            let states = instances.found.instances.iter().map(|instance| instance.state);
            crate::metrics::instances(&fleet.config.fleet_id, location, states);
        }
        let decision = decide::decide(&survey);
        self.act(&survey, decision, provisioner).await
    }

    fn provisioner_of(&self, fleet: &FleetRecord) -> Option<Arc<dyn Provisioner>> {
        let config = &fleet.config;
        if config.compute_type() != pb::ComputeType::Managed || fleet.status == FleetStatus::Terminated {
            return None;
        }
        let found = self.provisioners.get(&config.provisioner).cloned();
        if found.is_none() {
            tracing::debug!(fleet = %config.fleet_id, provisioner = %config.provisioner, "provisioner not run here");
        }
        found
    }

    /// Takes or renews the location's lease; `None` when another replica holds it.
    async fn lease(&self, fleet_id: &str, location: &str) -> Result<Option<String>, StoreError> {
        let key = (fleet_id.to_owned(), location.to_owned());
        let held = self.leases().get(&key).cloned();
        let (store, holder, ttl) = (&self.store, &self.settings.holder, self.settings.lease_ms);
        match instances::take_lease(store, fleet_id, location, holder, ttl, held.as_deref()).await? {
            Lease::Held(lease) => {
                if held.as_ref() != Some(&lease) {
                    tracing::info!(fleet = %fleet_id, %location, %lease, "took the location's lease");
                    crate::metrics::lease_taken();
                }
                self.leases().insert(key, lease.clone());
                Ok(Some(lease))
            }
            Lease::Taken(_) | Lease::NoLocation => {
                if self.leases().remove(&key).is_some() {
                    tracing::warn!(fleet = %fleet_id, %location, "lost the location's lease");
                    crate::metrics::lease_lost();
                }
                Ok(None)
            }
        }
    }

    /// Forgets a lease found lost while acting under it.
    fn lost_lease(&self, leased: &Leased<'_>, while_doing: &str) {
        tracing::warn!(fleet = %leased.fleet_id, location = %leased.location,
            "lease lost while {while_doing}; the new holder carries on");
        self.leases()
            .remove(&(leased.fleet_id.to_owned(), leased.location.to_owned()));
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<LocationKey, String>> {
        lock(&self.leases)
    }

    fn backoffs(&self) -> MutexGuard<'_, HashMap<LocationKey, LaunchBackoff>> {
        lock(&self.backoffs)
    }

    /// Stops reconciling and gives up every lease this replica holds, so that other replicas take its locations at
    /// once.
    pub async fn release(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let held: Vec<_> = self.leases().drain().collect();
        for ((fleet_id, location), lease) in held {
            let leased = Leased {
                fleet_id: &fleet_id,
                location: &location,
                lease: &lease,
            };
            if let Err(err) = instances::release_lease(&self.store, &leased).await {
                tracing::debug!(fleet = %fleet_id, %location, error = %err, "lease not released; it expires");
            }
        }
    }
}
