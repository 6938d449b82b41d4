//! FleetService: each request checked whole in `berth_domain::fleet::check`, then one store call.

use std::sync::Arc;

use berth_domain::fleet::FleetRecord;
use berth_domain::fleet::check::{self, capacity_out_of_order};
use berth_domain::game_server::{PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, check_fleet_id, timestamp};
use berth_domain::page_token::{digest, issue, redeem};
use berth_domain::stored::FleetStatus;
use berth_domain::validate::{Violations, check_count, check_page_size, invalid};
use berth_proto::fleet::v1 as pb;
use berth_proto::fleet::v1::fleet_service_server::FleetService;
use berth_store::fleets::{self as store, CapacityUpdated, Created, FleetEventEntry};
use tonic::codegen::tokio_stream::Empty;
use tonic::{Request, Response, Status};

use crate::Context;

/// The FleetService handlers.
pub struct Fleets {
    context: Arc<Context>,
}

impl Fleets {
    pub(crate) fn new(context: Arc<Context>) -> Fleets {
        Fleets { context }
    }

    async fn fleet(&self, fleet_id: &str) -> Result<FleetRecord, Status> {
        store::read_fleet(&self.context.store, fleet_id)
            .await?
            .ok_or_else(|| not_found(fleet_id))
    }
}

fn not_found(fleet_id: &str) -> Status {
    Status::not_found(format!("no fleet {fleet_id:?}"))
}

/// What a request that is not served yet is answered: the issue that builds it is still open.
fn not_built(rpc: &str) -> Status {
    Status::unimplemented(format!("{rpc} is not built yet"))
}

/// Most statuses in a ListFleets filter.
const STATUSES_MAX: usize = 6;
/// Most codes in a ListFleetEvents filter.
const CODES_MAX: usize = 32;
/// Events read per round trip while a page of filtered events fills.
const EVENTS_CHUNK: usize = 500;

#[tonic::async_trait]
impl FleetService for Fleets {
    async fn create_fleet(
        &self,
        request: Request<pb::CreateFleetRequest>,
    ) -> Result<Response<pb::CreateFleetResponse>, Status> {
        let req = request.into_inner();
        let provisioners: Vec<&str> = self.context.args.provisioners.iter().map(String::as_str).collect();
        let fleet = check::check_create(&req, &provisioners)?;
        match store::create_fleet(&self.context.store, &fleet).await? {
            Created::Created(record) => Ok(Response::new(pb::CreateFleetResponse {
                fleet: Some(record.to_proto()),
            })),
            Created::Exists => Err(Status::already_exists(format!(
                "a fleet {:?} exists; nothing was changed",
                req.fleet_id
            ))),
        }
    }

    async fn update_fleet(
        &self,
        _request: Request<pb::UpdateFleetRequest>,
    ) -> Result<Response<pb::UpdateFleetResponse>, Status> {
        Err(not_built("UpdateFleet"))
    }

    async fn delete_fleet(
        &self,
        _request: Request<pb::DeleteFleetRequest>,
    ) -> Result<Response<pb::DeleteFleetResponse>, Status> {
        Err(not_built("DeleteFleet"))
    }

    async fn describe_fleet(
        &self,
        request: Request<pb::DescribeFleetRequest>,
    ) -> Result<Response<pb::DescribeFleetResponse>, Status> {
        let req = request.into_inner();
        check::check_describe(&req)?;
        let fleet = self.fleet(&req.fleet_id).await?;
        Ok(Response::new(pb::DescribeFleetResponse {
            fleet: Some(fleet.to_proto()),
        }))
    }

    async fn list_fleets(
        &self,
        request: Request<pb::ListFleetsRequest>,
    ) -> Result<Response<pb::ListFleetsResponse>, Status> {
        let req = request.into_inner();
        let mut v = Violations::new();
        check_count(&mut v, "statuses", req.statuses.len(), 0, STATUSES_MAX);
        let mut wanted = Vec::new();
        for (i, status) in req.statuses.iter().enumerate() {
            match pb::FleetStatus::try_from(*status)
                .ok()
                .and_then(FleetStatus::from_proto)
            {
                Some(status) => wanted.push(status),
                None => v.add(&format!("statuses[{i}]"), format!("{status} is not a fleet status")),
            }
        }
        let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
        v.into_result()?;
        let selection = digest(&[format!("{:?}", req.statuses).as_bytes()]);
        let after = redeem(&selection, &req.page_token)?;
        let mut ids = berth_store::fleets::fleets(&self.context.store).await?;
        ids.sort();
        let mut fleets = Vec::new();
        let mut next = None;
        for id in ids
            .into_iter()
            .filter(|id| after.is_none_or(|after| id.as_str() > after))
        {
            if fleets.len() == size {
                next = fleets.last().map(|fleet: &pb::Fleet| fleet.fleet_id.clone());
                break;
            }
            // A listed fleet without a record has servers that registered before fleets were records.
            let Some(fleet) = store::read_fleet(&self.context.store, &id).await? else {
                continue;
            };
            if wanted.is_empty() || wanted.contains(&fleet.status) {
                fleets.push(fleet.to_proto());
            }
        }
        Ok(Response::new(pb::ListFleetsResponse {
            fleets,
            next_page_token: issue(&selection, next),
        }))
    }

    async fn create_fleet_locations(
        &self,
        _request: Request<pb::CreateFleetLocationsRequest>,
    ) -> Result<Response<pb::CreateFleetLocationsResponse>, Status> {
        Err(not_built("CreateFleetLocations"))
    }

    async fn delete_fleet_locations(
        &self,
        _request: Request<pb::DeleteFleetLocationsRequest>,
    ) -> Result<Response<pb::DeleteFleetLocationsResponse>, Status> {
        Err(not_built("DeleteFleetLocations"))
    }

    async fn update_fleet_capacity(
        &self,
        request: Request<pb::UpdateFleetCapacityRequest>,
    ) -> Result<Response<pb::UpdateFleetCapacityResponse>, Status> {
        let req = request.into_inner();
        let change = check::check_update_capacity(&req)?;
        let updated = store::update_capacity(&self.context.store, &req.fleet_id, &req.location, change).await?;
        match updated {
            CapacityUpdated::Changed(fleet) => Ok(Response::new(pb::UpdateFleetCapacityResponse {
                location: fleet.location(&req.location).map(|location| location.to_proto()),
            })),
            CapacityUpdated::NotFound => Err(not_found(&req.fleet_id)),
            CapacityUpdated::NoLocation => Err(Status::not_found(format!(
                "fleet {:?} has no location {:?}",
                req.fleet_id, req.location
            ))),
            CapacityUpdated::Deleting { fleet: true } => Err(Status::failed_precondition(format!(
                "fleet {:?} is being deleted",
                req.fleet_id
            ))),
            CapacityUpdated::Deleting { fleet: false } => Err(Status::failed_precondition(format!(
                "location {:?} of fleet {:?} is being deleted",
                req.location, req.fleet_id
            ))),
            CapacityUpdated::OutOfOrder {
                minimum,
                maximum,
                desired,
            } => {
                let (field, why) = capacity_out_of_order(Some(minimum), Some(maximum), Some(desired))
                    .unwrap_or(("desired_instances", "is out of the location's bounds".to_owned()));
                Err(invalid(field, format!("{why} (with the location's other bounds)")))
            }
        }
    }

    async fn update_fleet_standby(
        &self,
        _request: Request<pb::UpdateFleetStandbyRequest>,
    ) -> Result<Response<pb::UpdateFleetStandbyResponse>, Status> {
        Err(not_built("UpdateFleetStandby"))
    }

    async fn set_instance_type_viability(
        &self,
        _request: Request<pb::SetInstanceTypeViabilityRequest>,
    ) -> Result<Response<pb::SetInstanceTypeViabilityResponse>, Status> {
        Err(not_built("SetInstanceTypeViability"))
    }

    async fn suspend_autoscaling(
        &self,
        _request: Request<pb::SuspendAutoscalingRequest>,
    ) -> Result<Response<pb::SuspendAutoscalingResponse>, Status> {
        Err(not_built("SuspendAutoscaling"))
    }

    async fn resume_autoscaling(
        &self,
        _request: Request<pb::ResumeAutoscalingRequest>,
    ) -> Result<Response<pb::ResumeAutoscalingResponse>, Status> {
        Err(not_built("ResumeAutoscaling"))
    }

    async fn list_fleet_events(
        &self,
        request: Request<pb::ListFleetEventsRequest>,
    ) -> Result<Response<pb::ListFleetEventsResponse>, Status> {
        let req = request.into_inner();
        let mut v = Violations::new();
        check_fleet_id(&mut v, &req.fleet_id);
        if !req.location.is_empty() {
            v.id("location", &req.location, 1, 64);
        }
        check_count(&mut v, "codes", req.codes.len(), 0, CODES_MAX);
        let mut codes = Vec::new();
        for (i, code) in req.codes.iter().enumerate() {
            match pb::FleetEventCode::try_from(*code) {
                Ok(code) if code != pb::FleetEventCode::Unspecified => codes.push(code),
                _ => v.add(&format!("codes[{i}]"), format!("{code} is not a fleet event code")),
            }
        }
        let start_ms = req
            .start_time
            .map(|t| t.seconds * 1000 + i64::from(t.nanos) / 1_000_000);
        let end_ms = req.end_time.map(|t| t.seconds * 1000 + i64::from(t.nanos) / 1_000_000);
        if let (Some(start), Some(end)) = (start_ms, end_ms)
            && end < start
        {
            v.add("end_time", "must not be before start_time");
        }
        let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
        v.into_result()?;
        let selection = digest(&[
            req.fleet_id.as_bytes(),
            req.location.as_bytes(),
            format!("{:?} {start_ms:?} {end_ms:?}", req.codes).as_bytes(),
        ]);
        let after = redeem(&selection, &req.page_token)?;
        self.fleet(&req.fleet_id).await?;
        let mut start = match after {
            Some(position) => format!("({position}"),
            None => start_ms.map_or_else(|| "-".to_owned(), |ms| ms.max(0).to_string()),
        };
        // XRANGE's end is inclusive; the request's is not.
        let end = end_ms.map_or_else(|| "+".to_owned(), |ms| format!("({}", ms.max(0)));
        let mut events = Vec::new();
        let mut next = None;
        'pages: loop {
            let chunk =
                store::read_fleet_events(&self.context.store, &req.fleet_id, &start, &end, EVENTS_CHUNK).await?;
            let read = chunk.len();
            for entry in chunk {
                start = format!("({}", entry.position);
                let wanted = (req.location.is_empty() || entry.location == req.location)
                    && (codes.is_empty() || entry.code.is_some_and(|code| codes.contains(&code.to_proto())));
                if wanted {
                    if events.len() == size {
                        next = events.last().map(|event: &pb::FleetEvent| event.cursor.clone());
                        break 'pages;
                    }
                    events.push(fleet_event(&req.fleet_id, entry));
                }
            }
            if read < EVENTS_CHUNK {
                break;
            }
        }
        Ok(Response::new(pb::ListFleetEventsResponse {
            events,
            next_page_token: issue(&selection, next),
        }))
    }

    type WatchFleetEventsStream = Empty<Result<pb::WatchFleetEventsResponse, Status>>;

    async fn watch_fleet_events(
        &self,
        _request: Request<pb::WatchFleetEventsRequest>,
    ) -> Result<Response<Self::WatchFleetEventsStream>, Status> {
        Err(not_built("WatchFleetEvents"))
    }

    async fn get_fleet_utilization(
        &self,
        _request: Request<pb::GetFleetUtilizationRequest>,
    ) -> Result<Response<pb::GetFleetUtilizationResponse>, Status> {
        Err(not_built("GetFleetUtilization"))
    }
}

/// A stored fleet event as the contract shows it; its position is its id and its cursor.
fn fleet_event(fleet_id: &str, entry: FleetEventEntry) -> pb::FleetEvent {
    pb::FleetEvent {
        event_id: entry.position.clone(),
        cursor: entry.position,
        fleet_id: fleet_id.to_owned(),
        location: entry.location,
        code: entry
            .code
            .map_or(pb::FleetEventCode::Unspecified, |code| code.to_proto()) as i32,
        message: entry.message,
        event_time: Some(timestamp(entry.time_ms)),
        instance_id: entry.instance_id,
        game_server_id: entry.game_server_id,
        game_session_id: entry.game_session_id,
        capacity_change: entry.capacity_change.map(|(previous, new, policy)| pb::CapacityChange {
            previous_desired_instances: previous,
            new_desired_instances: new,
            policy_name: policy,
        }),
    }
}
