//! Launching a location's instances: each recorded LAUNCHING before the provisioner is asked, so that a reconciler
//! that dies mid-way leaves nothing unknown behind, then recorded with what the provisioner answered (its handle, or
//! an INSTANCE_LAUNCH_FAILED event and one more failure for the launch backoff). Each process gets the SDK's
//! environment with a token scoped to its fleet and id.

use berth_domain::fleet::FleetRecord;
use berth_runtime::auth::Role;
use berth_store::StoreError;
use berth_store::instances::{self, Acted, Leased};

use super::Reconciler;
use crate::provisioner::{Instance, LaunchSpec, ProcessSpec, Provisioner};

/// Launches of one location under way at once.
const LAUNCHES_AT_ONCE: usize = 16;

/// Instances to launch in one pass.
pub(super) struct Launches<'a> {
    pub count: u32,
    pub instance_type: &'a str,
    /// The pass's Redis clock, ms.
    pub now_ms: i64,
}

/// What came of one launch.
enum LaunchOutcome {
    Running,
    Failed,
    Fenced,
}

impl Reconciler {
    /// Launches instances; `false` when the lease was lost meanwhile.
    pub(super) async fn launch(
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
                LaunchOutcome::Failed => {
                    let mut backoffs = self.backoffs();
                    let backoff = backoffs.entry(key.clone()).or_default();
                    *backoff = backoff.failed(launches.now_ms);
                }
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
        crate::metrics::launch(leased.fleet_id, leased.location, launched.is_ok());
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
            // Nothing is recorded of it any more, so a failure to stop it can only be logged.
            (Acted::Fenced | Acted::Gone, _) => {
                if let Err(err) = provisioner.stop(instance, true).await {
                    tracing::warn!(fleet = %leased.fleet_id, location = %leased.location, instance = %instance_id,
                        error = %err, "cannot kill an instance launched after the lease was lost");
                }
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
}
