//! Acting on a location's decision: the autoscaler's pass recorded first (its change decides which plan the
//! instances follow), then each step of the plan made through the store, under the lease, and the provisioner. A
//! step fenced (the lease lost) ends the pass, and so does a store error (the next pass reads afresh). A
//! provisioner's failure to stop or kill an instance ends only its step: it is logged and recorded as the
//! instance's INSTANCE_STOP_FAILED event (once per instance and request), and the next pass asks again.

use berth_domain::fleet::reconcile::backoff::LaunchBackoff;
use berth_domain::fleet::reconcile::{Action, Deadlines, StopReason};
use berth_domain::stored::FleetEventCode;
use berth_store::StoreError;
use berth_store::instances::{self, Acted, InstanceRecord, Leased, Removal, Stop, StopRequest};
use berth_store::processes::Routing;

use super::Reconciler;
use super::decide::Decision;
use super::gather::{Instances, Survey, instance_of};
use super::launch::Launches;
use crate::autoscaler::Scaled;
use crate::provisioner::{ProvisionError, Provisioner};

/// Why a step of a pass failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ActError {
    /// Redis failed, or answered what it should not: the pass ends.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The provisioner failed: the step ends, and the pass goes on.
    #[error(transparent)]
    Provisioner(#[from] StopFailed),
}

/// The provisioner could not stop or kill an instance.
#[derive(Debug, thiserror::Error)]
#[error("cannot {} the instance: {source}", request.as_str())]
pub(crate) struct StopFailed {
    instance: String,
    request: StopRequest,
    #[source]
    source: ProvisionError,
}

impl StopFailed {
    fn of(record: &InstanceRecord, request: StopRequest, source: ProvisionError) -> StopFailed {
        StopFailed {
            instance: record.id.clone(),
            request,
            source,
        }
    }
}

impl Reconciler {
    /// Records and carries out what was decided for the location `survey` found.
    pub(super) async fn act(
        &self,
        survey: &Survey<'_>,
        decision: Decision,
        provisioner: Option<&dyn Provisioner>,
    ) -> Result<(), ActError> {
        let leased = Leased {
            fleet_id: &survey.fleet.config.fleet_id,
            location: &survey.record.location,
            lease: &survey.lease,
        };
        self.keep_backoff(&leased, decision.backoff);
        let mut plan = decision.plan;
        if let (Some(decided), Some(reading)) = (&decision.scaling, &survey.scaling) {
            match self.autoscaler.record(&leased, reading, decided).await {
                Ok(Scaled::Applied) => {}
                Ok(Scaled::Kept) => plan = decision.unscaled.unwrap_or(plan),
                Ok(Scaled::Fenced) => {
                    self.lost_lease(&leased, "autoscaling");
                    return Ok(());
                }
                Err(err) => {
                    tracing::warn!(fleet = %leased.fleet_id, location = %leased.location, error = %err,
                        "autoscaling failed");
                    plan = decision.unscaled.unwrap_or(plan);
                }
            }
        }
        let (Some(provisioner), Some(instances)) = (provisioner, &survey.instances) else {
            return Ok(());
        };
        for action in &plan {
            let done = match self
                .step(survey, &leased, provisioner, instances, action, &decision.deadlines)
                .await
            {
                Ok(done) => done,
                Err(ActError::Provisioner(failed)) => self.stop_failed(&leased, &failed).await?,
                Err(err) => return Err(err),
            };
            if !done {
                self.lost_lease(&leased, "reconciling");
                return Ok(());
            }
        }
        Ok(())
    }

    /// Keeps the location's launch backoff for its next pass.
    fn keep_backoff(&self, leased: &Leased<'_>, backoff: LaunchBackoff) {
        let key = (leased.fleet_id.to_owned(), leased.location.to_owned());
        if backoff == LaunchBackoff::default() {
            self.backoffs().remove(&key);
        } else {
            self.backoffs().insert(key, backoff);
        }
    }

    /// Takes one step of the plan; `false` when the lease was lost.
    async fn step(
        &self,
        survey: &Survey<'_>,
        leased: &Leased<'_>,
        provisioner: &dyn Provisioner,
        instances: &Instances,
        action: &Action,
        deadlines: &Deadlines,
    ) -> Result<bool, ActError> {
        let store = &self.store;
        match action {
            Action::Launch { count, instance_type } => {
                let launches = Launches {
                    count: *count,
                    instance_type,
                    now_ms: instances.found.now_ms,
                };
                Ok(self.launch(survey.fleet, leased, provisioner, &launches).await?)
            }
            Action::Drain { instance } => {
                Ok(instances::drain_instance(store, leased, instance).await? != Acted::Fenced)
            }
            Action::Stop { instance, why } => match instances.record(instance) {
                Some(record) => self.stop(leased, provisioner, record, *why, deadlines).await,
                None => Ok(true),
            },
            Action::Kill { instance } => match instances.record(instance) {
                Some(record) => self.kill(leased, provisioner, record, deadlines).await,
                None => Ok(true),
            },
            Action::Remove { instance, asked } => {
                // How its processes exited tells only of an instance that stopped unasked.
                let mut exits = match instances.record(instance).filter(|_| !*asked) {
                    Some(record) => provisioner.exits(instance_of(leased.fleet_id, record)).await,
                    None => Vec::new(),
                };
                exits.dedup();
                let removal = Removal {
                    instance_id: instance,
                    asked: *asked,
                    retention_ms: self.settings.lost_retention_ms,
                    exited: &exits.join(", "),
                };
                let acted = instances::remove_instance(store, leased, &removal).await?;
                Ok(self.told(leased.fleet_id, acted).await)
            }
            Action::Unhealthy { message } => {
                tracing::warn!(fleet = %leased.fleet_id, location = %leased.location, %message, "location UNHEALTHY");
                Ok(instances::location_unhealthy(store, leased, message).await? != Acted::Fenced)
            }
        }
    }

    /// Stops an instance: its live processes are told to end through the SDK, or, with none to tell, the
    /// provisioner asks the instance itself to exit.
    async fn stop(
        &self,
        leased: &Leased<'_>,
        provisioner: &dyn Provisioner,
        record: &InstanceRecord,
        why: StopReason,
        deadlines: &Deadlines,
    ) -> Result<bool, ActError> {
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
        if nobody_told {
            let stopped = provisioner.stop(instance_of(leased.fleet_id, record), false).await;
            stopped.map_err(|source| StopFailed::of(record, StopRequest::Stop, source))?;
        }
        Ok(true)
    }

    /// Kills a stopping instance whose kill time passed.
    async fn kill(
        &self,
        leased: &Leased<'_>,
        provisioner: &dyn Provisioner,
        record: &InstanceRecord,
        deadlines: &Deadlines,
    ) -> Result<bool, ActError> {
        tracing::warn!(fleet = %leased.fleet_id, location = %leased.location, instance = %record.id,
            "killed: it did not exit in time");
        let message = format!(
            "sent ProcessEnding but did not exit in time (exit timeout {} s); killed",
            deadlines.exit_ms / 1000
        );
        let acted = instances::kill_instance(&self.store, leased, &record.id, &message).await?;
        let killed = provisioner.stop(instance_of(leased.fleet_id, record), true).await;
        killed.map_err(|source| StopFailed::of(record, StopRequest::Kill, source))?;
        Ok(acted != Acted::Fenced)
    }

    /// Logs a provisioner's failure to stop an instance and records it as the instance's event; `false` when the
    /// lease was lost.
    async fn stop_failed(&self, leased: &Leased<'_>, failed: &StopFailed) -> Result<bool, StoreError> {
        tracing::warn!(fleet = %leased.fleet_id, location = %leased.location, instance = %failed.instance,
            error = %failed, "provisioner failed");
        let message = failed.to_string();
        let acted = instances::instance_stop_failed(&self.store, leased, &failed.instance, failed.request, &message);
        Ok(acted.await? != Acted::Fenced)
    }

    /// Tells the health replicas of processes whose desired state a change moved; `false` when it was fenced.
    async fn told(&self, fleet_id: &str, acted: Acted<Vec<(String, Routing)>>) -> bool {
        match acted {
            Acted::Done(told) => {
                for (game_server_id, routing) in &told {
                    berth_runtime::telemetry::announce(&self.store, routing, fleet_id, game_server_id).await;
                }
                true
            }
            Acted::Gone => true,
            Acted::Fenced => false,
        }
    }
}
