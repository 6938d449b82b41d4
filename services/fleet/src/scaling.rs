//! ScalingService: a fleet's scaling policies, each request checked whole in `berth_domain::scaling::check`, then
//! one store call. A policy is shown with its state and last evaluation in the location asked about, or, for every
//! location, the latest of them.

use std::sync::Arc;

use berth_domain::fleet::FleetRecord;
use berth_domain::game_server::timestamp;
use berth_domain::page_token::{digest, issue, redeem};
use berth_domain::scaling::check::{self, POLICIES_MAX};
use berth_domain::scaling::policy::PolicyState;
use berth_proto::fleet::v1 as pb;
use berth_proto::fleet::v1::scaling_service_server::ScalingService;
use berth_store::fleets::read_fleet;
use berth_store::scaling::{self as store, PolicyDeleted, PolicyPut, StoredPolicy};
use tonic::{Request, Response, Status};

use crate::Context;
use crate::fleets::{no_location, not_found};

/// The ScalingService handlers.
pub struct Scaling {
    context: Arc<Context>,
}

impl Scaling {
    pub(crate) fn new(context: Arc<Context>) -> Scaling {
        Scaling { context }
    }

    async fn fleet(&self, fleet_id: &str) -> Result<FleetRecord, Status> {
        read_fleet(&self.context.store, fleet_id)
            .await?
            .ok_or_else(|| not_found(fleet_id))
    }
}

#[tonic::async_trait]
impl ScalingService for Scaling {
    async fn put_scaling_policy(
        &self,
        request: Request<pb::PutScalingPolicyRequest>,
    ) -> Result<Response<pb::PutScalingPolicyResponse>, Status> {
        let req = request.into_inner();
        let policy = check::check_put(&req)?;
        let fleet_id = &req.fleet_id;
        let put = store::put_policy(&self.context.store, &policy, req.expected_revision, POLICIES_MAX).await?;
        let stored = match put {
            PolicyPut::Put(stored) => stored,
            PolicyPut::NotFound => return Err(not_found(fleet_id)),
            PolicyPut::NoLocation => return Err(no_location(fleet_id, &req.location)),
            PolicyPut::Deleting => {
                return Err(Status::failed_precondition(format!(
                    "fleet {fleet_id:?} is being deleted: it takes no scaling policy"
                )));
            }
            PolicyPut::TooMany => {
                return Err(Status::resource_exhausted(format!(
                    "fleet {fleet_id:?} has {POLICIES_MAX} scaling policies, the most it may: delete one first"
                )));
            }
            PolicyPut::Revision(current) => return Err(revision_moved(&req.name, current)),
        };
        let fleet = self.fleet(fleet_id).await?;
        Ok(Response::new(pb::PutScalingPolicyResponse {
            policy: Some(shown(&fleet, *stored, "")),
        }))
    }

    async fn delete_scaling_policy(
        &self,
        request: Request<pb::DeleteScalingPolicyRequest>,
    ) -> Result<Response<pb::DeleteScalingPolicyResponse>, Status> {
        let req = request.into_inner();
        check::check_delete(&req)?;
        self.fleet(&req.fleet_id).await?;
        match store::delete_policy(&self.context.store, &req.fleet_id, &req.name, req.expected_revision).await? {
            PolicyDeleted::Deleted => Ok(Response::new(pb::DeleteScalingPolicyResponse {})),
            PolicyDeleted::NotFound => Err(Status::not_found(format!(
                "fleet {:?} has no scaling policy {:?}",
                req.fleet_id, req.name
            ))),
            PolicyDeleted::Revision(current) => Err(revision_moved(&req.name, current)),
        }
    }

    async fn describe_scaling_policies(
        &self,
        request: Request<pb::DescribeScalingPoliciesRequest>,
    ) -> Result<Response<pb::DescribeScalingPoliciesResponse>, Status> {
        let req = request.into_inner();
        let size = check::check_describe(&req)?;
        let selection = digest(&[req.location.as_bytes(), &req.status_filter.to_be_bytes()]);
        let after = redeem(&selection, &req.page_token)?;
        let fleet = self.fleet(&req.fleet_id).await?;
        if !req.location.is_empty() && fleet.location(&req.location).is_none() {
            return Err(no_location(&req.fleet_id, &req.location));
        }
        let read = store::read_policies(&self.context.store, &req.fleet_id, "")
            .await?
            .ok_or_else(|| not_found(&req.fleet_id))?;
        let wanted = req.status_filter();
        let mut policies: Vec<pb::ScalingPolicy> = read
            .policies
            .into_iter()
            .filter(|stored| after.is_none_or(|after| stored.policy.name.as_str() > after))
            .filter(|stored| {
                let applies = &stored.policy.location;
                req.location.is_empty() || applies.is_empty() || *applies == req.location
            })
            .map(|stored| shown(&fleet, stored, &req.location))
            .filter(|policy| wanted == pb::ScalingPolicyStatus::Unspecified || policy.status() == wanted)
            .take(size + 1)
            .collect();
        let next = (policies.len() > size).then(|| {
            policies.truncate(size);
            policies.last().map(|p| p.name.clone()).unwrap_or_default()
        });
        Ok(Response::new(pb::DescribeScalingPoliciesResponse {
            policies,
            next_page_token: issue(&selection, next),
        }))
    }
}

fn revision_moved(name: &str, current: u64) -> Status {
    if current == 0 {
        Status::aborted(format!("scaling policy {name:?} does not exist (revision 0)"))
    } else {
        Status::aborted(format!(
            "scaling policy {name:?} is at revision {current}: read it again and retry with that revision"
        ))
    }
}

/// A policy as the contract shows it: its state and last evaluation in `location` (empty: the latest of any
/// location), and no bearer token.
fn shown(fleet: &FleetRecord, stored: StoredPolicy, location: &str) -> pb::ScalingPolicy {
    let mut policy = check::shown(stored.policy);
    let last: Option<&PolicyState> = stored
        .evaluations
        .iter()
        .filter(|(at, _)| location.is_empty() || at == location)
        .map(|(_, state)| state)
        .max_by_key(|state| state.evaluated_ms);
    let mut applying = fleet
        .locations
        .iter()
        .filter(|l| policy.location.is_empty() || policy.location == l.location)
        .peekable();
    let suspended = applying.peek().is_some() && applying.all(|l| l.autoscaling_suspended);
    policy.status = if suspended {
        pb::ScalingPolicyStatus::Suspended
    } else if last.is_some_and(|state| state.failed) {
        pb::ScalingPolicyStatus::Error
    } else {
        pb::ScalingPolicyStatus::Active
    }
    .into();
    if let Some(state) = last {
        policy.status_message = state.message.chars().take(1024).collect();
        policy.last_evaluation_time = state.evaluated_ms.map(timestamp);
        policy.last_proposed_instances = state.proposal;
    }
    policy.last_scaling_action_time = stored
        .evaluations
        .iter()
        .filter(|(at, _)| location.is_empty() || at == location)
        .filter_map(|(_, state)| state.acted_ms)
        .max()
        .map(timestamp);
    policy
}
