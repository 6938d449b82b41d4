//! The reconciler: for every location of every MANAGED fleet, makes the running instances follow the desired count
//! through the fleet's provisioner. Any number of fleet replicas run it; for each location only the holder of its
//! lease acts, renewing it every pass, and every change it records carries that lease, so that a replica that
//! stalled and lost it changes nothing (see `berth_store::instances`). What to do is decided by
//! `berth_domain::fleet::reconcile::plan` from what the store and the provisioner report; this module only gathers
//! those reports and carries the plan out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use berth_domain::fleet::FleetRecord;
use berth_domain::fleet::reconcile::{
    Action, Deadlines, InstanceView, LocationView, ServerState, ServerView, StopReason, launch_type, not_viable, plan,
};
use berth_domain::stored::{FleetEventCode, FleetStatus, LocationStatus, ProcessState};
use berth_proto::fleet::v1 as pb;
use berth_runtime::auth::{Role, TokenKey};
use berth_runtime::sync::lock;
use berth_store::instances::{self, Acted, InstanceRecord, Lease, Leased, Removal, ServerRecord, Stop};
use berth_store::processes::{self, Routing};
use berth_store::{Store, StoreError, fleets};

use crate::autoscaler::{Autoscaler, Scaled};
use crate::provisioner::{Instance, LaunchSpec, ProcessSpec, Provisioner};

/// Launches of one location under way at once.
const LAUNCHES_AT_ONCE: usize = 16;
/// Longest wait between failed launches, ms.
const MAX_BACKOFF_MS: i64 = 60_000;

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

/// Failed launches of a location, for the backoff.
#[derive(Clone, Copy, Debug, Default)]
struct Failures {
    count: u32,
    until_ms: i64,
    /// When the last one was counted, ms (Redis' clock): a location whose status changed since (an UNHEALTHY one
    /// given new launch settings or capacity) starts afresh.
    at_ms: i64,
}

/// The reconciler of one replica.
pub struct Reconciler {
    store: Store,
    settings: Settings,
    provisioners: HashMap<String, Arc<dyn Provisioner>>,
    tokens: Option<TokenKey>,
    leases: Mutex<HashMap<(String, String), String>>,
    failures: Mutex<HashMap<(String, String), Failures>>,
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
            failures: Mutex::default(),
            stopping: AtomicBool::new(false),
        }
    }

    /// One pass over every location of every fleet this replica can provision.
    pub async fn pass(&self) -> Result<(), StoreError> {
        if self.stopping.load(Ordering::Relaxed) {
            return Ok(());
        }
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
        Ok(())
    }

    async fn reconcile_logged(&self, fleet: &FleetRecord, location: &str, provisioner: Option<Arc<dyn Provisioner>>) {
        if let Err(err) = self.reconcile(fleet, location, provisioner.as_deref()).await {
            tracing::warn!(fleet = %fleet.config.fleet_id, %location, error = %err, "reconcile failed");
        }
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
                }
                self.leases().insert(key, lease.clone());
                Ok(Some(lease))
            }
            Lease::Taken(_) | Lease::NoLocation => {
                if self.leases().remove(&key).is_some() {
                    tracing::warn!(fleet = %fleet_id, %location, "lost the location's lease");
                }
                Ok(None)
            }
        }
    }

    /// Counts a failed launch of a location: its next launch waits 2, 4, 8… s, at most a minute.
    fn launch_failed(&self, key: &(String, String), now_ms: i64) {
        let mut failures = self.failures();
        let entry = failures.entry(key.clone()).or_default();
        entry.count += 1;
        entry.until_ms = now_ms + (1000_i64 << entry.count.min(16)).min(MAX_BACKOFF_MS);
        entry.at_ms = now_ms;
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), String>> {
        lock(&self.leases)
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Failures>> {
        lock(&self.failures)
    }

    async fn reconcile(
        &self,
        fleet: &FleetRecord,
        location: &str,
        provisioner: Option<&dyn Provisioner>,
    ) -> Result<(), StoreError> {
        let fleet_id = fleet.config.fleet_id.as_str();
        let Some(record) = fleet.location(location) else {
            return Ok(());
        };
        let Some(lease) = self.lease(fleet_id, location).await? else {
            return Ok(());
        };
        let leased = Leased {
            fleet_id,
            location,
            lease: &lease,
        };
        let key = (fleet_id.to_owned(), location.to_owned());
        let desired = match self.autoscaler.pass(fleet, record, &leased).await {
            Ok(Scaled::Desired(desired)) => desired,
            Ok(Scaled::Fenced) => {
                tracing::warn!(fleet = %fleet_id, %location, "lease lost while autoscaling; the new holder carries on");
                self.leases().remove(&key);
                return Ok(());
            }
            // Instances still follow the desired count as it stands.
            Err(err) => {
                tracing::warn!(fleet = %fleet_id, %location, error = %err, "autoscaling failed");
                record.capacity.desired_instances
            }
        };
        let Some(provisioner) = provisioner else {
            return Ok(());
        };
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
        // A ready server shows the build runs here, and a location redeployed since the last failure starts
        // afresh: launches stop backing off.
        let redeployed = self
            .failures()
            .get(&key)
            .is_some_and(|f| record.status_change_ms > f.at_ms);
        if redeployed
            || views
                .iter()
                .any(|i| i.servers.iter().any(|s| matches!(s.state, ServerState::Ready { .. })))
        {
            self.failures().remove(&key);
        }
        let config = &fleet.config;
        let excluded = not_viable(&record.viabilities);
        let launch_after_ms = self.failures().get(&key).map_or(0, |f| f.until_ms);
        let deadlines = Deadlines::of(&config.process_timeouts.unwrap_or_default());
        let view = LocationView {
            now_ms: found.now_ms,
            desired,
            status: record.status,
            first_launch_ms: found.first_launch_ms,
            registered_ms: found.registered_ms,
            deleting: matches!(fleet.status, FleetStatus::Deleting) || record.status == LocationStatus::Deleting,
            launch_type: launch_type(config, &excluded).filter(|_| fleet.status != FleetStatus::Error),
            not_viable: &excluded,
            protect_held_servers: config.game_server_protection_policy() == pb::ProtectionPolicy::FullProtection,
            launch_after_ms,
            deadlines,
        };
        for action in plan(&view, &views) {
            let by_id = |id: &str| found.instances.iter().find(|i| i.id == id);
            let done = match &action {
                Action::Launch { count, instance_type } => {
                    let launches = Launches {
                        count: *count,
                        instance_type,
                        now_ms: found.now_ms,
                    };
                    self.launch(fleet, &leased, provisioner, &launches).await
                }
                Action::Drain { instance } => instances::drain_instance(&self.store, &leased, instance)
                    .await
                    .map(|acted| acted != Acted::Fenced),
                Action::Stop { instance, why } => {
                    let Some(record) = by_id(instance) else { continue };
                    self.stop(&leased, provisioner, record, *why, &deadlines).await
                }
                Action::Kill { instance } => {
                    let Some(record) = by_id(instance) else { continue };
                    tracing::warn!(fleet = %fleet_id, %location, %instance, "killed: it did not exit in time");
                    let message = format!(
                        "sent ProcessEnding but did not exit in time (exit timeout {} s); killed",
                        deadlines.exit_ms / 1000
                    );
                    let acted = instances::kill_instance(&self.store, &leased, instance, &message).await?;
                    if let Err(err) = provisioner.stop(instance_of(fleet_id, record), true).await {
                        tracing::warn!(fleet = %fleet_id, %location, %instance, error = %err, "cannot kill it");
                    }
                    Ok(acted != Acted::Fenced)
                }
                Action::Remove { instance, asked } => {
                    // An instance that ended before any of its processes registered is a launch that failed: the
                    // next ones back off, so that a build that cannot start is not restarted in a tight loop.
                    let never_ran =
                        by_id(instance).is_some_and(|i| i.servers.iter().all(|s| s.registered_ms.is_none()));
                    if !asked && never_ran {
                        self.launch_failed(&key, found.now_ms);
                    }
                    let mut exits = match by_id(instance) {
                        Some(record) => provisioner.exits(instance_of(fleet_id, record)).await,
                        None => Vec::new(),
                    };
                    exits.dedup();
                    let removal = Removal {
                        instance_id: instance,
                        asked: *asked,
                        retention_ms: self.settings.lost_retention_ms,
                        exited: &exits.join(", "),
                    };
                    let acted = instances::remove_instance(&self.store, &leased, &removal).await?;
                    Ok(self.told(fleet_id, acted).await)
                }
                Action::Unhealthy { message } => {
                    tracing::warn!(fleet = %fleet_id, %location, %message, "location UNHEALTHY");
                    instances::location_unhealthy(&self.store, &leased, message)
                        .await
                        .map(|acted| acted != Acted::Fenced)
                }
            }?;
            if !done {
                tracing::warn!(fleet = %fleet_id, %location, "lease lost mid-pass; the new holder carries on");
                self.leases().remove(&key);
                return Ok(());
            }
        }
        Ok(())
    }

    /// Tells the health replicas of processes whose desired state a change moved; `false` when it was fenced.
    async fn told(&self, fleet_id: &str, acted: Acted<Vec<(String, Routing)>>) -> bool {
        match acted {
            Acted::Done(told) => {
                for (game_server_id, routing) in &told {
                    processes::announce(&self.store, routing, fleet_id, game_server_id).await;
                }
                true
            }
            Acted::Gone => true,
            Acted::Fenced => false,
        }
    }

    async fn stop(
        &self,
        leased: &Leased<'_>,
        provisioner: &dyn Provisioner,
        record: &InstanceRecord,
        why: StopReason,
        deadlines: &Deadlines,
    ) -> Result<bool, StoreError> {
        let message = format!(
            "did not register within {} s of its launch",
            deadlines.register_ms / 1000
        );
        let stop = Stop {
            termination: why.termination(),
            grace_ms: deadlines.termination_grace_ms as u64,
            kill_after_ms: why.kill_after_ms(deadlines) as u64,
            unregistered: (why == StopReason::RegisterTimeout)
                .then_some((FleetEventCode::ServerProcessRegisterTimeout, message.as_str())),
        };
        tracing::info!(fleet = %leased.fleet_id, location = %leased.location, instance = %record.id,
            reason = why.message(), "stopping instance");
        let acted = instances::stop_instance(&self.store, leased, &record.id, &stop).await?;
        let nobody_told = matches!(&acted, Acted::Done(told) if told.is_empty());
        if !self.told(leased.fleet_id, acted).await {
            return Ok(false);
        }
        // With no process to tell through the SDK, the provisioner asks the instance itself to exit.
        if nobody_told {
            let _ = provisioner.stop(instance_of(leased.fleet_id, record), false).await;
        }
        Ok(true)
    }

    /// Launches instances; `false` when the lease was lost meanwhile.
    async fn launch(
        &self,
        fleet: &FleetRecord,
        leased: &Leased<'_>,
        provisioner: &dyn Provisioner,
        launches: &Launches<'_>,
    ) -> Result<bool, StoreError> {
        let mut outcomes = Vec::with_capacity(launches.count as usize);
        let mut left = launches.count as usize;
        while left > 0 {
            let batch = left.min(LAUNCHES_AT_ONCE);
            let launches = (0..batch).map(|_| self.launch_one(fleet, leased, provisioner, launches.instance_type));
            outcomes.extend(futures::future::join_all(launches).await);
            left -= batch;
        }
        let mut fenced = false;
        let key = (leased.fleet_id.to_owned(), leased.location.to_owned());
        for outcome in outcomes {
            match outcome? {
                LaunchOutcome::Running => {}
                // Backs off from the pass's Redis clock, which the plan compares the backoff with.
                LaunchOutcome::Failed => self.launch_failed(&key, launches.now_ms),
                LaunchOutcome::Fenced => fenced = true,
            }
        }
        Ok(!fenced)
    }

    async fn launch_one(
        &self,
        fleet: &FleetRecord,
        leased: &Leased<'_>,
        provisioner: &dyn Provisioner,
        instance_type: &str,
    ) -> Result<LaunchOutcome, StoreError> {
        let config = &fleet.config;
        let instance_id = format!("i-{}", uuid::Uuid::now_v7().simple());
        let server_ids: Vec<String> = (0..config.server_processes_per_instance.max(1))
            .map(|n| format!("{instance_id}-{n}"))
            .collect();
        match instances::record_launch(&self.store, leased, &instance_id, instance_type, &server_ids).await? {
            Acted::Done(()) => {}
            Acted::Fenced | Acted::Gone => return Ok(LaunchOutcome::Fenced),
        }
        let spec = LaunchSpec {
            fleet_id: config.fleet_id.clone(),
            location: leased.location.to_owned(),
            instance_id: instance_id.clone(),
            instance_type: instance_type.to_owned(),
            launch: config.launch_configuration.clone().unwrap_or_default(),
            processes: server_ids
                .iter()
                .map(|id| self.process_spec(leased, &instance_id, id))
                .collect(),
        };
        let launched = provisioner.launch(&spec).await;
        let answer = match &launched {
            Ok(handle) => Ok(handle.as_str()),
            Err(err) => Err(err.0.as_str()),
        };
        let acted = instances::record_launched(&self.store, leased, &instance_id, answer).await?;
        let instance = Instance {
            fleet_id: leased.fleet_id,
            instance_id: &instance_id,
            handle: launched.as_deref().unwrap_or(""),
        };
        match (acted, &launched) {
            (Acted::Done(()), Ok(_)) => {
                tracing::info!(fleet = %leased.fleet_id, location = %leased.location, instance = %instance_id,
                    "instance launched");
                Ok(LaunchOutcome::Running)
            }
            (Acted::Done(()), Err(err)) => {
                tracing::warn!(fleet = %leased.fleet_id, location = %leased.location, error = %err, "launch failed");
                Ok(LaunchOutcome::Failed)
            }
            // The lease moved on while the provisioner worked: what was launched is not this replica's to keep.
            (Acted::Fenced | Acted::Gone, _) => {
                let _ = provisioner.stop(instance, true).await;
                Ok(LaunchOutcome::Fenced)
            }
        }
    }

    /// A process's environment: the SDK's variables, with a token scoped to its fleet and id.
    fn process_spec(&self, leased: &Leased<'_>, instance_id: &str, game_server_id: &str) -> ProcessSpec {
        let fleet_id = leased.fleet_id;
        let token = match &self.tokens {
            Some(key) => key.mint(
                game_server_id,
                Role::GameServer,
                Some((fleet_id, game_server_id)),
                self.settings.token_ttl_s,
            ),
            // Insecure deployments accept any token.
            None => "insecure".to_owned(),
        };
        let env = [
            ("BERTH_SDK_ENDPOINT", self.settings.sdk_endpoint.as_str()),
            ("BERTH_SDK_TOKEN", &token),
            ("BERTH_FLEET_ID", fleet_id),
            ("BERTH_LOCATION", leased.location),
            ("BERTH_INSTANCE_ID", instance_id),
            ("BERTH_GAME_SERVER_ID", game_server_id),
        ];
        ProcessSpec {
            game_server_id: game_server_id.to_owned(),
            env: env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        }
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

/// Instances to launch in one pass.
struct Launches<'a> {
    count: u32,
    instance_type: &'a str,
    /// The pass's Redis clock, ms.
    now_ms: i64,
}

/// What came of one launch.
enum LaunchOutcome {
    Running,
    Failed,
    Fenced,
}

fn instance_of<'a>(fleet_id: &'a str, record: &'a InstanceRecord) -> Instance<'a> {
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
