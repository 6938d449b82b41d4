//! FleetService: each request checked whole in `berth_domain::fleet::check`, then one store call.

use std::sync::Arc;

use berth_domain::fleet::check::{self, capacity_out_of_order};
use berth_domain::fleet::defaults;
use berth_domain::fleet::utilization::fleet_utilization;
use berth_domain::fleet::{FleetRecord, LocationRecord};
use berth_domain::game_server::timestamp;
use berth_domain::page_token::{digest, issue, redeem};
use berth_domain::stored::{FleetEventCode, FleetStatus, LocationStatus, ProcessState};
use berth_domain::validate::invalid;
use berth_proto::fleet::v1 as pb;
use berth_proto::fleet::v1::fleet_service_server::FleetService;
use berth_store::endings::{self, Deleted, LocationsDeleted};
use berth_store::fleets::{
    self as store, CapacityUpdated, Created, FleetChange, FleetEventEntry, LocationsAdded, Written,
};
use berth_store::instances::{InstanceRecord, read_instances};
use berth_store::processes::Routing;
use berth_store::utilization::{UtilizationRead, read_utilization};
use tonic::{Request, Response, Status};

use crate::Context;
use crate::utilization::{location_with_counts, with_counts};

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

    /// A fleet as the contract shows it, with its live counts (a fleet deleted meanwhile keeps its record's).
    async fn shown(&self, fleet: FleetRecord) -> Result<pb::Fleet, Status> {
        let read = read_utilization(&self.context.store, &fleet.config.fleet_id, "").await?;
        let shown = fleet.to_proto();
        Ok(match read {
            UtilizationRead::Read(read) => with_counts(shown, &read),
            UtilizationRead::NotFound | UtilizationRead::NoLocation => shown,
        })
    }

    /// A fleet's location as the contract shows it, with its live counts; `None` when the fleet has no such location.
    async fn shown_location(&self, fleet: &FleetRecord, location: &str) -> Result<Option<pb::FleetLocation>, Status> {
        let Some(record) = fleet.location(location) else {
            return Ok(None);
        };
        let read = read_utilization(&self.context.store, &fleet.config.fleet_id, &record.location).await?;
        let shown = record.to_proto();
        Ok(Some(match read {
            UtilizationRead::Read(read) => match read.locations.first() {
                Some((_, tally)) => location_with_counts(shown, tally),
                None => shown,
            },
            UtilizationRead::NotFound | UtilizationRead::NoLocation => shown,
        }))
    }

    /// Tells the health replicas of the processes a deletion asked to end, and answers the fleet as it is now.
    async fn told_to_end(&self, fleet_id: &str, told: &[(String, Routing)]) -> Result<FleetRecord, Status> {
        for (game_server_id, routing) in told {
            berth_runtime::telemetry::announce(&self.context.store, routing, fleet_id, game_server_id).await;
        }
        self.fleet(fleet_id).await
    }

    /// Computes a change from the fleet's record and writes it if the fleet is still at that record's revision;
    /// when another change landed first, computes it again from the new record — unless the caller pinned a
    /// revision (`expected_revision`, 0 for none), which is then ABORTED. `compute` answers `None` when there is
    /// nothing to change.
    async fn change_fleet(
        &self,
        fleet_id: &str,
        expected_revision: u64,
        mut compute: impl FnMut(&FleetRecord) -> Result<Option<FleetChange>, Status>,
    ) -> Result<FleetRecord, Status> {
        for _ in 0..CHANGE_ATTEMPTS {
            let fleet = self.fleet(fleet_id).await?;
            if expected_revision != 0 && fleet.revision != expected_revision {
                return Err(not_at_revision(fleet_id, fleet.revision, expected_revision));
            }
            if matches!(fleet.status, FleetStatus::Deleting | FleetStatus::Terminated) {
                return Err(being_deleted(fleet_id, fleet.status));
            }
            let Some(change) = compute(&fleet)? else {
                return Ok(fleet);
            };
            match store::write_fleet(&self.context.store, fleet_id, &change).await? {
                Written::Written(fleet) => return Ok(*fleet),
                Written::NotFound => return Err(not_found(fleet_id)),
                Written::Deleting(status) => return Err(being_deleted(fleet_id, status)),
                // Computed again; a pinned revision that moved is refused at the top.
                Written::Conflict(_) => continue,
            }
        }
        Err(Status::aborted(format!(
            "fleet {fleet_id:?} kept changing while this change was made; try again"
        )))
    }

    /// Suspends (`suspended`) or resumes autoscaling in some locations (none: every one); a location already so
    /// changes nothing. Each change is an event.
    async fn set_autoscaling(&self, fleet_id: &str, names: &[String], suspended: bool) -> Result<FleetRecord, Status> {
        check::check_autoscaling(fleet_id, names)?;
        self.change_fleet(fleet_id, 0, |fleet| {
            let locations = changed_locations(fleet, names, |location| {
                let differs = location.autoscaling_suspended != suspended;
                location.autoscaling_suspended = suspended;
                differs
            })?;
            let code = if suspended {
                FleetEventCode::AutoscalingSuspended
            } else {
                FleetEventCode::AutoscalingResumed
            };
            let events = locations
                .iter()
                .map(|location| (code, location.location.clone(), String::new()))
                .collect();
            Ok(location_change(locations, events))
        })
        .await
    }
}

/// How often a change is computed again when other changes keep landing first.
const CHANGE_ATTEMPTS: usize = 10;

/// A change of the locations a request names (none: every one not being deleted) of a fleet, each as `change`
/// makes it; NOT_FOUND for a name the fleet does not have, FAILED_PRECONDITION for one being deleted.
fn changed_locations(
    fleet: &FleetRecord,
    names: &[String],
    mut change: impl FnMut(&mut LocationRecord) -> bool,
) -> Result<Vec<LocationRecord>, Status> {
    for name in names {
        match fleet.location(name) {
            None => return Err(no_location(&fleet.config.fleet_id, name)),
            Some(location) if location.status == LocationStatus::Deleting => {
                return Err(Status::failed_precondition(format!(
                    "location {name:?} is being deleted"
                )));
            }
            Some(_) => {}
        }
    }
    Ok(fleet
        .locations
        .iter()
        .filter(|location| location.status != LocationStatus::Deleting)
        .filter(|location| names.is_empty() || names.contains(&location.location))
        .filter_map(|location| {
            let mut location = location.clone();
            change(&mut location).then_some(location)
        })
        .collect())
}

/// The change of a fleet's locations, with its events; `None` when no location changed.
fn location_change(
    locations: Vec<LocationRecord>,
    events: Vec<(FleetEventCode, String, String)>,
) -> Option<FleetChange> {
    (!locations.is_empty()).then_some(FleetChange {
        config: None,
        locations,
        events,
        redeploy: false,
    })
}

/// How long a fleet's processes have to end once told to, ms.
fn termination_grace_ms(fleet: &FleetRecord) -> u64 {
    let seconds = fleet
        .config
        .process_timeouts
        .map_or(defaults::TERMINATION_GRACE_S, |t| t.termination_grace_seconds);
    u64::from(seconds) * 1000
}

pub(crate) fn no_location(fleet_id: &str, location: &str) -> Status {
    Status::not_found(format!("fleet {fleet_id:?} has no location {location:?}"))
}

/// ABORTED: the caller pinned a revision the fleet has moved past.
fn not_at_revision(fleet_id: &str, revision: u64, expected: u64) -> Status {
    Status::aborted(format!(
        "fleet {fleet_id:?} is at revision {revision}, not the expected {expected}"
    ))
}

fn being_deleted(fleet_id: &str, status: FleetStatus) -> Status {
    Status::failed_precondition(format!("fleet {fleet_id:?} is {}", status.as_str()))
}

pub(crate) fn not_found(fleet_id: &str) -> Status {
    Status::not_found(format!("no fleet {fleet_id:?}"))
}

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
        match store::create_fleet(&self.context.store, &fleet, self.context.args.retention_ms).await? {
            Created::Created(record) => Ok(Response::new(pb::CreateFleetResponse {
                fleet: Some(self.shown(*record).await?),
            })),
            Created::Exists => Err(Status::already_exists(format!(
                "a fleet {:?} exists; nothing was changed",
                req.fleet_id
            ))),
        }
    }

    async fn update_fleet(
        &self,
        request: Request<pb::UpdateFleetRequest>,
    ) -> Result<Response<pb::UpdateFleetResponse>, Status> {
        let req = request.into_inner();
        check::check_update(&req)?;
        let fleet = self
            .change_fleet(&req.fleet_id, req.expected_revision, |fleet| {
                check::check_update_parameters(&fleet.config, &req)?;
                let mut config = fleet.config.clone();
                let changed = check::apply_update(&mut config, &req);
                Ok((!changed.is_empty()).then(|| FleetChange {
                    config: Some((fleet.revision, config)),
                    redeploy: changed.iter().any(|field| check::LAUNCH_SETTINGS.contains(field)),
                    locations: Vec::new(),
                    events: vec![(
                        FleetEventCode::FleetUpdated,
                        String::new(),
                        format!("changed: {}", changed.join(", ")),
                    )],
                }))
            })
            .await?;
        Ok(Response::new(pb::UpdateFleetResponse {
            fleet: Some(self.shown(fleet).await?),
        }))
    }

    async fn delete_fleet(
        &self,
        request: Request<pb::DeleteFleetRequest>,
    ) -> Result<Response<pb::DeleteFleetResponse>, Status> {
        let req = request.into_inner();
        check::check_delete(&req)?;
        let fleet = self.fleet(&req.fleet_id).await?;
        let store = &self.context.store;
        let grace_ms = termination_grace_ms(&fleet);
        let deleted = endings::delete_fleet(store, &req.fleet_id, req.force, req.expected_revision, grace_ms);
        match deleted.await? {
            Deleted::Deleting(told) => Ok(Response::new(pb::DeleteFleetResponse {
                fleet: Some(self.shown(self.told_to_end(&req.fleet_id, &told).await?).await?),
            })),
            Deleted::NotFound => Err(not_found(&req.fleet_id)),
            Deleted::Gone(status) => Err(being_deleted(&req.fleet_id, status)),
            Deleted::Conflict(revision) => Err(not_at_revision(&req.fleet_id, revision, req.expected_revision)),
            Deleted::Live { sessions, servers } => Err(Status::failed_precondition(format!(
                "fleet {:?} has {sessions} live game session(s) and {servers} game server(s) claimed or UTILIZED; \
                 end and release them, or delete with force",
                req.fleet_id
            ))),
        }
    }

    async fn describe_fleet(
        &self,
        request: Request<pb::DescribeFleetRequest>,
    ) -> Result<Response<pb::DescribeFleetResponse>, Status> {
        let req = request.into_inner();
        check::check_describe(&req)?;
        let fleet = self.fleet(&req.fleet_id).await?;
        Ok(Response::new(pb::DescribeFleetResponse {
            fleet: Some(self.shown(fleet).await?),
        }))
    }

    async fn list_fleets(
        &self,
        request: Request<pb::ListFleetsRequest>,
    ) -> Result<Response<pb::ListFleetsResponse>, Status> {
        let req = request.into_inner();
        let (wanted, size) = check::check_list(&req)?;
        let selection = digest(&[format!("{:?}", req.statuses).as_bytes()]);
        let after = redeem(&selection, &req.page_token)?;
        let mut ids = berth_store::fleets::fleets(&self.context.store).await?;
        ids.sort();
        ids.retain(|id| after.is_none_or(|after| id.as_str() > after));
        let mut records = Vec::new();
        let mut next = None;
        // Read a page's worth at a time, concurrently: a status filter may skip many.
        'pages: for batch in ids.chunks(size) {
            let reads = batch.iter().map(|id| store::read_fleet(&self.context.store, id));
            // A listed fleet without a record has servers that registered before fleets were records.
            for fleet in futures::future::try_join_all(reads).await?.into_iter().flatten() {
                if !wanted.is_empty() && !wanted.contains(&fleet.status) {
                    continue;
                }
                if records.len() == size {
                    next = records.last().map(|fleet: &FleetRecord| fleet.config.fleet_id.clone());
                    break 'pages;
                }
                records.push(fleet);
            }
        }
        let fleets = futures::future::try_join_all(records.into_iter().map(|fleet| self.shown(fleet))).await?;
        Ok(Response::new(pb::ListFleetsResponse {
            fleets,
            next_page_token: issue(&selection, next),
        }))
    }

    async fn create_fleet_locations(
        &self,
        request: Request<pb::CreateFleetLocationsRequest>,
    ) -> Result<Response<pb::CreateFleetLocationsResponse>, Status> {
        let req = request.into_inner();
        check::check_create_locations(&req)?;
        let added = store::add_locations(&self.context.store, &req.fleet_id, &req.locations, check::LOCATIONS_MAX);
        match added.await? {
            LocationsAdded::Added(fleet) => Ok(Response::new(pb::CreateFleetLocationsResponse {
                fleet: Some(self.shown(*fleet).await?),
            })),
            LocationsAdded::NotFound => Err(not_found(&req.fleet_id)),
            LocationsAdded::Deleting(status) => Err(being_deleted(&req.fleet_id, status)),
            LocationsAdded::Exists(location) => Err(Status::already_exists(format!(
                "fleet {:?} has location {location:?} already; none was added",
                req.fleet_id
            ))),
            LocationsAdded::TooMany(has) => Err(Status::resource_exhausted(format!(
                "fleet {:?} has {has} locations; it may have at most {}",
                req.fleet_id,
                check::LOCATIONS_MAX
            ))),
        }
    }

    async fn delete_fleet_locations(
        &self,
        request: Request<pb::DeleteFleetLocationsRequest>,
    ) -> Result<Response<pb::DeleteFleetLocationsResponse>, Status> {
        let req = request.into_inner();
        check::check_delete_locations(&req)?;
        let fleet = self.fleet(&req.fleet_id).await?;
        let store = &self.context.store;
        let deleted = endings::delete_locations(store, &req.fleet_id, &req.locations, termination_grace_ms(&fleet));
        match deleted.await? {
            LocationsDeleted::Deleting(told) => Ok(Response::new(pb::DeleteFleetLocationsResponse {
                fleet: Some(self.shown(self.told_to_end(&req.fleet_id, &told).await?).await?),
            })),
            LocationsDeleted::NotFound => Err(not_found(&req.fleet_id)),
            LocationsDeleted::Gone(status) => Err(being_deleted(&req.fleet_id, status)),
            LocationsDeleted::NoLocation(location) => Err(no_location(&req.fleet_id, &location)),
            LocationsDeleted::Home(location) => Err(Status::failed_precondition(format!(
                "{location:?} is the home location of fleet {:?}: delete the fleet instead",
                req.fleet_id
            ))),
        }
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
                location: self.shown_location(&fleet, &req.location).await?,
            })),
            CapacityUpdated::NotFound => Err(not_found(&req.fleet_id)),
            CapacityUpdated::NoLocation => Err(no_location(&req.fleet_id, &req.location)),
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
        request: Request<pb::UpdateFleetStandbyRequest>,
    ) -> Result<Response<pb::UpdateFleetStandbyResponse>, Status> {
        let req = request.into_inner();
        check::check_update_standby(&req)?;
        let fleet = self
            .change_fleet(&req.fleet_id, 0, |fleet| {
                let location = fleet
                    .location(&req.location)
                    .ok_or_else(|| no_location(&req.fleet_id, &req.location))?;
                let names = [location.location.clone()];
                let locations = changed_locations(fleet, &names, |location| {
                    let differs = location.standby != req.standby;
                    location.standby = req.standby.clone();
                    differs
                })?;
                Ok(location_change(locations, Vec::new()))
            })
            .await?;
        Ok(Response::new(pb::UpdateFleetStandbyResponse {
            location: self.shown_location(&fleet, &req.location).await?,
        }))
    }

    async fn set_instance_type_viability(
        &self,
        request: Request<pb::SetInstanceTypeViabilityRequest>,
    ) -> Result<Response<pb::SetInstanceTypeViabilityResponse>, Status> {
        let req = request.into_inner();
        check::check_viability(&req)?;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as i64);
        let fleet = self
            .change_fleet(&req.fleet_id, 0, |fleet| {
                let defined = fleet.config.instance_definitions.iter();
                if !defined.clone().any(|d| d.instance_type == req.instance_type) {
                    return Err(Status::not_found(format!(
                        "fleet {:?} defines no instance type {:?}",
                        req.fleet_id, req.instance_type
                    )));
                }
                let names: Vec<String> = if req.location.is_empty() {
                    Vec::new()
                } else {
                    vec![req.location.clone()]
                };
                let locations = changed_locations(fleet, &names, |location| {
                    let known = location
                        .viabilities
                        .iter()
                        .position(|v| v.instance_type == req.instance_type);
                    // A type never judged is viable: judging it viable changes nothing.
                    let was_viable = known.is_none_or(|at| location.viabilities[at].viable);
                    if was_viable == req.viable {
                        return false;
                    }
                    let judged = pb::InstanceTypeViability {
                        instance_type: req.instance_type.clone(),
                        viable: req.viable,
                        reason: req.reason.clone(),
                        update_time: Some(timestamp(now_ms)),
                    };
                    match known {
                        Some(at) => location.viabilities[at] = judged,
                        None => location.viabilities.push(judged),
                    }
                    true
                })?;
                let code = if req.viable {
                    FleetEventCode::InstanceTypeViable
                } else {
                    FleetEventCode::InstanceTypeNotViable
                };
                let events = locations
                    .iter()
                    .map(|location| {
                        let message = format!("{}: {}", req.instance_type, req.reason);
                        (code, location.location.clone(), message)
                    })
                    .collect();
                Ok(location_change(locations, events))
            })
            .await?;
        Ok(Response::new(pb::SetInstanceTypeViabilityResponse {
            fleet: Some(self.shown(fleet).await?),
        }))
    }

    async fn suspend_autoscaling(
        &self,
        request: Request<pb::SuspendAutoscalingRequest>,
    ) -> Result<Response<pb::SuspendAutoscalingResponse>, Status> {
        let req = request.into_inner();
        let fleet = self.set_autoscaling(&req.fleet_id, &req.locations, true).await?;
        Ok(Response::new(pb::SuspendAutoscalingResponse {
            fleet: Some(self.shown(fleet).await?),
        }))
    }

    async fn resume_autoscaling(
        &self,
        request: Request<pb::ResumeAutoscalingRequest>,
    ) -> Result<Response<pb::ResumeAutoscalingResponse>, Status> {
        let req = request.into_inner();
        let fleet = self.set_autoscaling(&req.fleet_id, &req.locations, false).await?;
        Ok(Response::new(pb::ResumeAutoscalingResponse {
            fleet: Some(self.shown(fleet).await?),
        }))
    }

    async fn list_fleet_events(
        &self,
        request: Request<pb::ListFleetEventsRequest>,
    ) -> Result<Response<pb::ListFleetEventsResponse>, Status> {
        let req = request.into_inner();
        let check::EventQuery {
            codes,
            start_ms,
            end_ms,
            size,
        } = check::check_list_events(&req)?;
        let selection = digest(&[
            req.fleet_id.as_bytes(),
            req.location.as_bytes(),
            format!("{:?} {start_ms:?} {end_ms:?}", req.codes).as_bytes(),
        ]);
        let after = redeem(&selection, &req.page_token)?;
        self.fleet(&req.fleet_id).await?;
        let mut start = match after {
            Some(position) => {
                // The digest binds a token to its filters, not to a position: one edited by hand is refused here.
                let parsed = berth_store::parse_position(position);
                if parsed.is_none_or(|at| at == (u64::MAX, u64::MAX)) {
                    return Err(invalid("page_token", "is not a token this call issued"));
                }
                format!("({position}")
            }
            None => start_ms.map_or_else(|| "-".to_owned(), |ms| ms.max(0).to_string()),
        };
        // XRANGE's end is inclusive; the request's is not: up to, and without, the first position of its ms.
        let end = end_ms.map_or_else(|| "+".to_owned(), |ms| format!("({}-0", ms.max(0)));
        let mut events = Vec::new();
        let mut next = None;
        'pages: loop {
            let chunk =
                store::read_fleet_events(&self.context.store, &req.fleet_id, &start, &end, EVENTS_CHUNK).await?;
            let read = chunk.len();
            for entry in chunk {
                start = format!("({}", entry.position);
                let wanted = (req.location.is_empty() || entry.location == req.location)
                    && (codes.is_empty() || entry.code.is_some_and(|code| codes.contains(&code)));
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

    type WatchFleetEventsStream = crate::watch::Events;

    async fn watch_fleet_events(
        &self,
        request: Request<pb::WatchFleetEventsRequest>,
    ) -> Result<Response<Self::WatchFleetEventsStream>, Status> {
        let req = request.into_inner();
        Ok(Response::new(crate::watch::open(self.context.clone(), req).await?))
    }

    async fn get_fleet_utilization(
        &self,
        request: Request<pb::GetFleetUtilizationRequest>,
    ) -> Result<Response<pb::GetFleetUtilizationResponse>, Status> {
        let req = request.into_inner();
        check::check_utilization(&req)?;
        match read_utilization(&self.context.store, &req.fleet_id, &req.location).await? {
            UtilizationRead::Read(read) => Ok(Response::new(pb::GetFleetUtilizationResponse {
                utilization: Some(fleet_utilization(&req.fleet_id, &read.locations, read.now_ms)),
            })),
            UtilizationRead::NotFound => Err(not_found(&req.fleet_id)),
            UtilizationRead::NoLocation => Err(no_location(&req.fleet_id, &req.location)),
        }
    }

    async fn describe_instances(
        &self,
        request: Request<pb::DescribeInstancesRequest>,
    ) -> Result<Response<pb::DescribeInstancesResponse>, Status> {
        let req = request.into_inner();
        check::check_describe_instances(&req)?;
        let fleet = self.fleet(&req.fleet_id).await?;
        if !fleet.locations.iter().any(|location| location.location == req.location) {
            return Err(no_location(&req.fleet_id, &req.location));
        }
        let read = read_instances(&self.context.store, &req.fleet_id, &req.location).await?;
        let instances: Vec<pb::Instance> = read
            .instances
            .into_iter()
            .filter(|instance| req.instance_id.is_empty() || instance.id == req.instance_id)
            .map(|instance| shown_instance(instance, &req.location))
            .collect();
        if instances.is_empty() && !req.instance_id.is_empty() {
            return Err(Status::not_found(format!(
                "location {:?} of fleet {:?} has no instance {:?}",
                req.location, req.fleet_id, req.instance_id
            )));
        }
        Ok(Response::new(pb::DescribeInstancesResponse { instances }))
    }
}

/// An instance as DescribeInstances shows it, its processes in id order.
fn shown_instance(instance: InstanceRecord, location: &str) -> pb::Instance {
    let mut processes: Vec<pb::InstanceProcess> = instance
        .servers
        .into_iter()
        .map(|server| pb::InstanceProcess {
            state: server
                .process
                .map_or(pb::ProcessState::Unspecified, ProcessState::to_proto) as i32,
            register_time: server.registered_ms.map(timestamp),
            game_sessions: server.sessions,
            claimed: server.held,
            protected: server.protected,
            game_server_id: server.id,
        })
        .collect();
    processes.sort_by(|a, b| a.game_server_id.cmp(&b.game_server_id));
    pb::Instance {
        instance_id: instance.id,
        location: location.to_owned(),
        instance_type: instance.instance_type,
        state: instance.state.to_proto() as i32,
        launch_time: Some(timestamp(instance.launch_ms)),
        kill_time: instance.kill_ms.map(timestamp),
        provisioner_handle: instance.handle,
        processes,
    }
}

/// A stored fleet event as the contract shows it. Its id is `<fleet>/<position>`, as a watch of many fleets gives it,
/// so one event has one id everywhere; its position is its cursor (a watch gives its own, of every fleet watched).
pub(crate) fn fleet_event(fleet_id: &str, entry: FleetEventEntry) -> pb::FleetEvent {
    pb::FleetEvent {
        event_id: berth_runtime::watch::event_id(fleet_id, &entry.position),
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
