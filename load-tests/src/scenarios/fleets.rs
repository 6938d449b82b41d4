//! The fleet service under load, in two parts.
//!
//! Reads that scaling leans on: GetFleetUtilization of a fleet of 20 game servers and of one with `--servers` of
//! them over four locations, at `--concurrency` in flight. The counts are kept by the scripts that change states, so
//! the two lines should cost the same; the target is a p99 of at most 2 ms with 20,000 servers at 64 in
//! flight. The servers are SDK processes registered and made ready through the store's scripts (the health
//! service's path, without streams: nothing here sweeps them).
//!
//! Provisioning: a `berth-fleet` replica of its own (so that its CPU time can be read apart) scales a fleet of real
//! example game servers, one OS process per instance through the `process` provisioner, from 0 to
//! `--instances` and back: how long until all are ready, until all are gone, and the replica's CPU time per
//! instance launched.

use std::time::{Duration, Instant};

use berth_fleet::FleetArgs;
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_proto::fleet::v1::{self as pb, GetFleetUtilizationRequest};
use berth_runtime::auth::Role;
use berth_store::processes::{self, Attach, Attached, ProcessRef, Timings};
use berth_testkit::{Reaper, spawn_service};

use crate::Failure;
use crate::args::Args;
use crate::connections::Rotation;
use crate::driver::{self, outcome};
use crate::fleet::LOCATIONS;
use crate::procfs::{cpu_seconds, rss_kib};
use crate::replica::{Replica, beside_the_bench};
use crate::report::{Figure, Findings, Line, Ratio, Target};
use crate::stack::Stack;
use crate::{fleet, floors};

/// The ceiling the issue sets on GetFleetUtilization's p99 with 20,000 servers at 64 in flight, in µs.
const TARGET_P99_US: f64 = 2_000.0;
/// Long enough that no registration is due anything while the run lasts.
const HOUR_MS: u64 = 3_600_000;
/// How long the provisioning part waits for a scale-up or a scale-in to finish before calling it failed.
const SCALE_TIMEOUT: Duration = Duration::from_secs(300);
/// The fleet the provisioning part scales.
const SCALED: &str = "bench-fleet-scaled";

fn create(fleet_id: &str) -> pb::CreateFleetRequest {
    pb::CreateFleetRequest {
        fleet_id: fleet_id.into(),
        compute_type: pb::ComputeType::Anywhere.into(),
        process_timeouts: Some(fleet::timeouts(fleet::QUIET)),
        locations: LOCATIONS
            .iter()
            .map(|location| pb::LocationConfiguration {
                location: (*location).into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Registers `servers` ready processes in `fleet_id`, spread over the locations; the lines of both steps.
async fn populate(stack: &Stack, fleet_id: &'static str, servers: u64, concurrency: u16) -> [Line; 2] {
    let timings = Timings {
        initial_delay_ms: HOUR_MS,
        retention_ms: HOUR_MS,
    };
    let store = stack.store.clone();
    let attach = driver::run(&format!("attach ({fleet_id})"), servers, concurrency, move |index| {
        let store = store.clone();
        async move {
            let server = fleet::server(index);
            let location = LOCATIONS[index as usize % LOCATIONS.len()];
            let registration = fleet::registration(&server, location, 1, 10);
            let introduction = processes::Introduction {
                registration: &registration,
                data: "",
                labels: &[],
                ports: &[],
            };
            let attach = Attach {
                fleet_id,
                game_server_id: &server.id,
                instance_id: &server.instance,
                registration_id: &server.id,
                resume: None,
                replica: "bench",
                attempt: 0,
                introduction,
            };
            match processes::attach(&store, &attach, &timings).await {
                Ok(Attached::Registered(..)) => Ok(()),
                _ => Err(tonic::Code::Internal),
            }
        }
    })
    .await;
    let store = stack.store.clone();
    let ready = driver::run(&format!("ready ({fleet_id})"), servers, concurrency, move |index| {
        let store = store.clone();
        async move {
            let server = fleet::server(index);
            let process = ProcessRef {
                fleet_id,
                game_server_id: &server.id,
                registration_id: &server.id,
            };
            match processes::ready(&store, &process, None).await {
                Ok(Some(_)) => Ok(()),
                _ => Err(tonic::Code::Internal),
            }
        }
    })
    .await;
    [attach, ready]
}

/// Runs the scenario.
pub async fn run(stack: &Stack, args: &Args) -> Result<Findings, Failure> {
    let (servers, concurrency) = (args.servers, args.concurrency);
    // A replica that serves the reads and provisions nothing: the provisioning part has a replica of its own.
    let reads_only = FleetArgs {
        provisioners: Vec::new(),
        ..FleetArgs::default()
    };
    let service = spawn_service(
        berth_fleet::service(stack.store.clone(), &reads_only, None),
        stack.store.clone(),
    )
    .await;
    let channels = stack.channels(&service, Role::Operator).await?;
    let mut operator = FleetServiceClient::new(channels[0].clone());
    let mut lines = Vec::new();
    let mut failed_checks = Vec::new();
    let mut reads = Vec::new();
    for (fleet_id, size) in [("bench-fleet-20", 20), ("bench-fleet-large", servers)] {
        operator.create_fleet(create(fleet_id)).await?;
        lines.extend(populate(stack, fleet_id, size, concurrency).await);
        let read = operator
            .get_fleet_utilization(GetFleetUtilizationRequest {
                fleet_id: fleet_id.into(),
                location: String::new(),
            })
            .await?
            .into_inner()
            .utilization
            .and_then(|u| u.total)
            .and_then(|total| total.game_server_counts);
        let available = read.map_or(0, |counts| u64::from(counts.available));
        if available != size {
            failed_checks.push(format!(
                "{fleet_id}: {available} servers available of {size} made ready"
            ));
        }
        // At the concurrency asked, then one at a time: the cost of a call without queueing behind others.
        for in_flight in [concurrency, 1] {
            let clients = Rotation::new(channels.iter().cloned().map(FleetServiceClient::new));
            let name = format!("GetFleetUtilization, {size} servers, {in_flight} in flight");
            let calls = if in_flight == 1 { servers / 10 } else { servers };
            let line = driver::run(&name, calls.max(1), in_flight, move |_| {
                let mut client = clients.next();
                async move {
                    outcome(
                        client
                            .get_fleet_utilization(GetFleetUtilizationRequest {
                                fleet_id: fleet_id.into(),
                                location: String::new(),
                            })
                            .await,
                    )
                }
            })
            .await;
            reads.push(line);
        }
    }
    let noop = floors::noop_grpc(&channels, servers, concurrency).await;
    let [small, small_alone, large, large_alone] =
        <[Line; 4]>::try_from(reads).expect("two fleets were read, each at two concurrencies");
    drop(service);
    let figures = match scale(stack, args.instances).await {
        Ok(figures) => figures,
        Err(err) => {
            failed_checks.push(format!("scaling {SCALED}: {err}"));
            Vec::new()
        }
    };
    let target = Target::at_most(
        &format!("GetFleetUtilization p99, {servers} servers, {concurrency} in flight"),
        large.latency_us.p99 as f64,
        TARGET_P99_US,
        "µs",
    );
    Ok(Findings {
        ratios: vec![Ratio::of(&large, &small), Ratio::of(&large, &noop)],
        targets: vec![target],
        lines: lines
            .into_iter()
            .chain([small, small_alone, large, large_alone, noop])
            .collect(),
        figures,
        failed_checks,
    })
}

/// A MANAGED fleet of the example game server at `launch_path` on the `process` provisioner, one server per
/// instance, with `capacity` in location `local`.
pub(super) fn process_fleet(
    fleet_id: &str,
    launch_path: String,
    capacity: pb::FleetCapacity,
) -> pb::CreateFleetRequest {
    pb::CreateFleetRequest {
        fleet_id: fleet_id.into(),
        provisioner: "process".into(),
        launch_configuration: Some(pb::ServerLaunchConfiguration {
            launch_path,
            ..Default::default()
        }),
        instance_definitions: vec![pb::InstanceDefinition {
            instance_type: "local".into(),
            ..Default::default()
        }],
        server_processes_per_instance: 1,
        locations: vec![pb::LocationConfiguration {
            location: fleet::LOCATION.into(),
            capacity: Some(capacity),
            standby: None,
        }],
        ..Default::default()
    }
}

type Fleets = FleetServiceClient<berth_sdk::AuthedChannel>;

async fn set_desired(client: &mut Fleets, desired: u32) -> Result<(), Failure> {
    client
        .update_fleet_capacity(pb::UpdateFleetCapacityRequest {
            fleet_id: SCALED.into(),
            location: "local".into(),
            desired_instances: Some(desired),
            ..Default::default()
        })
        .await?;
    Ok(())
}

/// Seconds until the fleet's utilization satisfies `done`, read every 100 ms.
async fn seconds_until(
    client: &mut Fleets,
    what: &str,
    done: impl Fn(&pb::InstanceCounts, &pb::GameServerCounts) -> bool,
) -> Result<f64, Failure> {
    let started = Instant::now();
    loop {
        let read = client
            .get_fleet_utilization(GetFleetUtilizationRequest {
                fleet_id: SCALED.into(),
                location: String::new(),
            })
            .await?
            .into_inner()
            .utilization
            .and_then(|u| u.total);
        if let Some(total) = &read
            && done(
                &total.instance_counts.unwrap_or_default(),
                &total.game_server_counts.unwrap_or_default(),
            )
        {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > SCALE_TIMEOUT {
            return Err(format!("{what} did not happen within {SCALE_TIMEOUT:?}: {read:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Scales a process-provisioned fleet from 0 to `instances` and back through a `berth-fleet` replica of its own.
async fn scale(stack: &Stack, instances: u32) -> Result<Vec<Figure>, Failure> {
    let health = spawn_service(
        berth_health::service(stack.store.clone(), &berth_health::HealthArgs::default()),
        stack.store.clone(),
    )
    .await;
    let settings = [
        ("BERTH_SDK_ENDPOINT", health.endpoint()),
        ("BERTH_RECONCILE_MS", "100".to_owned()),
    ];
    let replica = Replica::start("berth-fleet", stack.store.config(), &settings).await?;
    let _reaper = Reaper(vec![SCALED.into()]);
    let channel = berth_sdk::connect(&replica.endpoint(), &berth_testkit::token(Role::Operator, None)).await?;
    let mut client = FleetServiceClient::new(channel);
    let launch_path = beside_the_bench("berth-example-game-server")?.display().to_string();
    let empty = pb::FleetCapacity {
        minimum_instances: 0,
        maximum_instances: 100_000,
        desired_instances: 0,
    };
    client.create_fleet(process_fleet(SCALED, launch_path, empty)).await?;
    let cpu_before = cpu_seconds(replica.pid())?;
    set_desired(&mut client, instances).await?;
    let up = seconds_until(&mut client, "the scale-up", |i, g| {
        i.active == instances && g.available == instances
    })
    .await?;
    set_desired(&mut client, 0).await?;
    let down = seconds_until(&mut client, "the scale-in", |i, g| {
        i.pending + i.active + i.terminating == 0 && g.launching + g.available + g.terminating == 0
    })
    .await?;
    let cpu = cpu_seconds(replica.pid())? - cpu_before;
    Ok(vec![
        Figure::new(
            &format!("0 -> {instances} instances: until every server is ready"),
            up,
            "s",
        ),
        Figure::new(
            &format!("{instances} -> 0 instances: until every server is gone"),
            down,
            "s",
        ),
        Figure::new(
            "fleet replica CPU per instance launched and removed",
            cpu * 1000.0 / f64::from(instances.max(1)),
            "ms",
        ),
        Figure::new(
            "fleet replica resident memory, after the scale-in",
            rss_kib(replica.pid())? as f64 / 1024.0,
            "MiB",
        ),
    ])
}
