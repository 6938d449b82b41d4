//! Fleets whose instances the fleet service launches with the `docker` provisioner, on a real Docker engine: the
//! example game server, in an image built here from its binary and the libraries `ldd` lists (no registry is
//! reachable from a test), two server processes per container, registering with a real health replica, on a single
//! node and on the cluster. When no engine answers, each test says it is skipped and why (`make deps` installs
//! docker.io and starts dockerd). Each test removes the containers its fleets made when it ends, failed or not.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use berth_fleet::provisioner::docker::{DockerProvisioner, FLEET_LABEL, container_name};
use berth_fleet::provisioner::{Instance, Provisioner};
use berth_proto::fleet::v1 as pb;
use berth_store::instances::InstanceRecord;
use berth_testkit::{TestRedis, binary};
use bollard::Docker;
use bollard::models::ContainerSummaryStateEnum;
use bollard::query_parameters::{
    CreateImageOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures::StreamExt;
use prost_types::value::Kind;
use prost_types::{Struct, Value};
use tokio::sync::OnceCell;

use super::provisioning::{
    Client, all_ready, client, count, events, fleet_id, ids, instances_when, location, managed, set_desired,
    stack_over, when,
};

/// The image of the example game server, as the tests build it.
const IMAGE: &str = "berth-test/example-game-server:latest";
/// Where the game server is in it: the fleet's launch path.
const LAUNCH_PATH: &str = "/berth-example-game-server";

/// Built once per run of the test binary, by whichever test gets there first.
static IMAGE_BUILT: OnceCell<()> = OnceCell::const_new();

/// The local engine, or `None` when none answers, having said so.
async fn engine(test: &str) -> Option<Docker> {
    let answered = match Docker::connect_with_defaults() {
        Ok(docker) => match docker.negotiate_version().await {
            Ok(docker) => docker.ping().await.map(|_| docker),
            Err(err) => Err(err),
        },
        Err(err) => Err(err),
    };
    match answered {
        Ok(docker) => Some(docker),
        Err(err) => {
            // Straight to stderr, past the test harness's capture of `eprintln!`: a skip is shown even when the
            // test passes.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: no Docker engine answers ({err}); `make deps` installs docker.io and starts dockerd"
            );
            None
        }
    }
}

/// Imports a root filesystem holding the example game server and the shared libraries it loads, as `IMAGE`.
async fn build_image(docker: &Docker) {
    IMAGE_BUILT
        .get_or_init(|| async {
            let server = binary("berth-example-game-server");
            let mut rootfs = tar::Builder::new(Vec::new());
            rootfs.follow_symlinks(true);
            // The engine's importer reads no GNU sparse entries, and a debug binary may be stored as one.
            rootfs.sparse(false);
            rootfs
                .append_path_with_name(&server, LAUNCH_PATH.trim_start_matches('/'))
                .unwrap();
            for library in libraries(&server) {
                rootfs
                    .append_path_with_name(&library, library.trim_start_matches('/'))
                    .unwrap();
            }
            let rootfs = rootfs.into_inner().unwrap();
            let (repo, tag) = IMAGE.split_once(':').unwrap();
            let import = CreateImageOptionsBuilder::new()
                .from_src("-")
                .repo(repo)
                .tag(tag)
                .build();
            let mut progress = docker.create_image(Some(import), Some(bollard::body_full(rootfs.into())), None);
            while let Some(step) = progress.next().await {
                step.expect("the engine imports the example game server's image");
            }
        })
        .await;
}

/// The files of the shared libraries `ldd` says a binary loads (the dynamic loader among them).
fn libraries(binary: &Path) -> Vec<String> {
    let ldd = std::process::Command::new("ldd")
        .arg(binary)
        .output()
        .expect("ldd runs");
    assert!(ldd.status.success(), "ldd {}: {ldd:?}", binary.display());
    String::from_utf8(ldd.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| path.to_owned())
        })
        .collect()
}

/// Removes every container of its fleets when dropped, so that a failed test leaves none behind.
struct Containers(Vec<String>);

impl Drop for Containers {
    fn drop(&mut self) {
        let fleets = self.0.clone();
        // Its own runtime on its own thread: a test's runtime may be shutting down, or panicking, when this runs.
        let removal = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let docker = Docker::connect_with_defaults().ok()?.negotiate_version().await.ok()?;
                for fleet in &fleets {
                    for container in containers(&docker, fleet).await {
                        let force = RemoveContainerOptionsBuilder::new().force(true).build();
                        let _ = docker.remove_container(&container.id, Some(force)).await;
                    }
                }
                Some(())
            })
        });
        let _ = removal.join();
    }
}

/// A container of a fleet, as the engine lists it.
#[derive(Clone, Debug)]
struct Container {
    id: String,
    name: String,
    running: bool,
}

async fn containers(docker: &Docker, fleet: &str) -> Vec<Container> {
    let filters = HashMap::from([("label", vec![format!("{FLEET_LABEL}={fleet}")])]);
    let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .map(|c| Container {
            id: c.id.unwrap_or_default(),
            name: c
                .names
                .unwrap_or_default()
                .first()
                .map(|n| n.trim_start_matches('/').to_owned())
                .unwrap_or_default(),
            running: c.state == Some(ContainerSummaryStateEnum::RUNNING),
        })
        .collect()
}

/// A MANAGED fleet of the example game server's image on the docker provisioner, two servers per instance. Its
/// processes have the default 300 s to register and become ready: on a loaded host a container can take longer than
/// the shortest deadlines, and an instance replaced for being late would add a container the tests do not expect.
fn in_containers(fleet: &str, image: &str, desired: u32) -> pb::CreateFleetRequest {
    let text = |t: &str| Value {
        kind: Some(Kind::StringValue(t.into())),
    };
    let mut request = managed(fleet, LAUNCH_PATH, desired);
    request.provisioner = "docker".into();
    request.server_processes_per_instance = 2;
    let timeouts = request.process_timeouts.as_mut().unwrap();
    timeouts.register_timeout_seconds = 0;
    timeouts.ready_timeout_seconds = 0;
    let launch = request.launch_configuration.as_mut().unwrap();
    launch.provisioner_parameters = Some(Struct {
        fields: [
            ("image".to_owned(), text(image)),
            (
                "memory_mb".to_owned(),
                Value {
                    kind: Some(Kind::NumberValue(256.0)),
                },
            ),
        ]
        .into(),
    });
    request
}

/// An instance as the reconciler hands it to its provisioner.
fn as_recorded<'a>(fleet_id: &'a str, record: &'a InstanceRecord) -> Instance<'a> {
    Instance {
        fleet_id,
        instance_id: &record.id,
        handle: &record.handle,
    }
}

/// Whether every launch's handle is recorded: its servers may be ready a moment before.
fn recorded(found: &[InstanceRecord]) -> bool {
    found.iter().all(|i| !i.handle.is_empty())
}

fn running_ids(found: &[Container]) -> BTreeSet<String> {
    found.iter().filter(|c| c.running).map(|c| c.id.clone()).collect()
}

/// Fleet replicas that run the `docker` provisioner on the local engine.
fn docker_args() -> berth_fleet::FleetArgs {
    berth_fleet::FleetArgs {
        provisioners: vec!["docker".into()],
        ..Default::default()
    }
}

async fn containers_scale_out_in_and_are_started_again(redis: TestRedis, test: &str) {
    let Some(docker) = engine(test).await else { return };
    build_image(&docker).await;
    let fleet = &fleet_id("arena-docker");
    // Declared before the stack, so dropped after it: no replica is left to launch again once they are removed.
    let _containers = Containers(vec![fleet.into()]);
    let stack = stack_over(&redis, 1, docker_args()).await;
    let mut fleets: Client = client(&stack.fleet[0]).await;
    fleets.create_fleet(in_containers(fleet, IMAGE, 3)).await.unwrap();

    // Three containers, each with two servers that register and become ready; the location is DEPLOYED.
    let first = instances_when(&stack.store, fleet, "3 ready", |found| {
        all_ready(3)(found) && recorded(found)
    })
    .await;
    assert_eq!(
        location(&mut fleets, fleet).await.status(),
        pb::LocationStatus::Deployed
    );
    let listed = || containers(&docker, fleet);
    let up = when("3 running containers", listed, |c| running_ids(c).len() == 3).await;
    assert_eq!(up.len(), 3, "{up:#?} after {:#?}", events(&mut fleets, fleet).await);
    let provisioner = DockerProvisioner::new(None);
    for instance in &first {
        assert_eq!(instance.servers.len(), 2);
        let container = up
            .iter()
            .find(|c| c.id == instance.handle)
            .expect("the handle is the container's id");
        assert_eq!(container.name, container_name(&instance.id));
        let recorded = as_recorded(fleet, instance);
        assert_eq!(
            provisioner.running(recorded).await.unwrap(),
            2,
            "both processes counted"
        );
        let unrecorded = Instance { handle: "", ..recorded };
        assert_eq!(
            provisioner.running(unrecorded).await.unwrap(),
            2,
            "found by its name without a handle"
        );
    }

    // Lowered: two instances go, their containers stop and stay.
    set_desired(&mut fleets, fleet, 1).await;
    let kept = instances_when(&stack.store, fleet, "scaled in to 1", |found| found.len() == 1).await;
    let stopped = when("2 stopped containers", listed, |c| running_ids(c).len() == 1).await;
    assert_eq!(stopped.len(), 3, "stopped containers are kept");
    assert_eq!(running_ids(&stopped), BTreeSet::from([kept[0].handle.clone()]));

    // Raised again: the stopped containers are started again, with new instances' identities; none is created.
    set_desired(&mut fleets, fleet, 3).await;
    let again = instances_when(&stack.store, fleet, "3 ready again", |found| {
        all_ready(3)(found) && recorded(found) && ids(found).intersection(&ids(&first)).count() == 1
    })
    .await;
    let restarted = when("3 running again", listed, |c| running_ids(c).len() == 3).await;
    assert_eq!(restarted.len(), 3, "no container was created: {restarted:#?}");
    assert_eq!(
        running_ids(&restarted),
        running_ids(&up),
        "the same containers run the new instances"
    );
    for instance in &again {
        let container = restarted
            .iter()
            .find(|c| c.id == instance.handle)
            .unwrap_or_else(|| panic!("{instance:#?} runs in one of {restarted:#?}"));
        assert_eq!(
            container.name,
            container_name(&instance.id),
            "renamed after its new instance"
        );
    }
    for gone in first.iter().filter(|i| !ids(&again).contains(&i.id)) {
        assert_eq!(
            provisioner.running(as_recorded(fleet, gone)).await.unwrap(),
            0,
            "a container reused by another instance runs nothing of the one it served"
        );
    }
    let seen = events(&mut fleets, fleet).await;
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceLaunched), 5);
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceLaunchFailed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn containers_scale_out_in_and_are_started_again_on_a_single_node() {
    containers_scale_out_in_and_are_started_again(TestRedis::single(), "docker single node").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn containers_scale_out_in_and_are_started_again_on_a_cluster() {
    containers_scale_out_in_and_are_started_again(TestRedis::cluster(), "docker cluster").await;
}

/// An image the engine cannot find or pull: each launch fails with Docker's message, retried with backoff, and the
/// fleet's capacity stays as asked.
async fn a_missing_image_fails_its_launches_with_dockers_message(redis: TestRedis, test: &str) {
    let Some(docker) = engine(test).await else { return };
    let fleet = &fleet_id("arena-noimage");
    let _containers = Containers(vec![fleet.into()]);
    let stack = stack_over(&redis, 1, docker_args()).await;
    let mut fleets = client(&stack.fleet[0]).await;
    let missing = "berth-test/no-such-image:never";
    fleets.create_fleet(in_containers(fleet, missing, 2)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let failed = loop {
        let seen = events(&mut fleets, fleet).await;
        let failed: Vec<_> = seen
            .into_iter()
            .filter(|e| e.code() == pb::FleetEventCode::InstanceLaunchFailed)
            .collect();
        if failed.len() >= 3 {
            break failed;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "launches never failed: {failed:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let message = &failed[0].message;
    assert!(
        message.starts_with(&format!(
            "docker could not pull image {missing}: Docker responded with status code"
        )),
        "{message}"
    );
    assert!(message.len() > 100, "Docker's own message follows: {message}");
    let described = location(&mut fleets, fleet).await;
    assert_eq!(described.capacity.unwrap().desired_instances, 2, "capacity unchanged");
    let seen = events(&mut fleets, fleet).await;
    assert_eq!(count(&seen, pb::FleetEventCode::InstanceLaunched), 0);
    assert!(containers(&docker, fleet).await.is_empty(), "no container was made");
    // Backoff: 2, 4, 8… s between attempts, not one per 100 ms pass.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = events(&mut fleets, fleet).await;
    assert!(
        count(&later, pb::FleetEventCode::InstanceLaunchFailed) < 12,
        "{later:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_image_fails_its_launches_with_dockers_message_on_a_single_node() {
    a_missing_image_fails_its_launches_with_dockers_message(TestRedis::single(), "docker missing image, single node")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_image_fails_its_launches_with_dockers_message_on_a_cluster() {
    a_missing_image_fails_its_launches_with_dockers_message(TestRedis::cluster(), "docker missing image, cluster")
        .await;
}
