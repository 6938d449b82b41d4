//! The `docker` provisioner: an instance is one container of the fleet's image, run through the Docker Engine API,
//! as a studio runs its build on its own hosts without handing them to a hosting API. The fleet's launch path (and
//! its parameters) is the program the container runs; its resources, environment, network and user are the fleet's
//! `provisioner_parameters` (`berth_domain::fleet::parameters::DockerParameters`).
//!
//! Several server processes per instance share the container: the first is the container's own process (under
//! Docker's init, which passes it signals as a host would), the others are started in it by `exec`. So when the
//! first ends the container stops and takes the others with it, as an instance whose machine went down would.
//!
//! A container stopped once its processes ended is kept, labelled with its fleet and location, and the next launch
//! of that fleet and location starts it again rather than creating a new one (seed 003: "start stopped servers
//! before creating new ones"), keeping its writable layer (caches, downloaded content) warm. A container's
//! environment is fixed when it is created, while every launch brings new server ids and tokens: so the container's
//! environment holds only what the fleet sets, and each process reads its identity from a file uploaded into the
//! container before every start (`/berth/<n>.env`, named by `BERTH_SDK_ENV_FILE`, which the SDK reads). Only
//! stopped containers made from the fleet's current settings are reused; those of an earlier image or launch
//! configuration are removed when found.
//!
//! An instance owns the container that bears its name (`berth-<instance id>`): the handle is the container's id,
//! and when the launching replica died before recording it, the name finds it. Labels cannot change once a
//! container is created, while a name can; a reused container is renamed after its new instance, so that the
//! instance it served before, if still recorded, counts no process in it.
//!
//! Game ports (and each process's pair of Agones SDK ports) are picked free on this replica's host, and the network
//! is the host's unless the fleet names another: right when the engine runs on the replica's host, as in the tests
//! and a single-host deployment.

use std::collections::HashMap;

use berth_domain::fleet::parameters::{BadParameter, DockerParameters};
use bollard::Docker;
use bollard::errors::Error as DockerError;
use bollard::exec::StartExecOptions;
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerSummaryStateEnum, ExecConfig, HostConfig,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, KillContainerOptionsBuilder,
    ListContainersOptionsBuilder, RemoveContainerOptionsBuilder, RenameContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, OnceCell};

use super::{Instance, LaunchSpec, ProvisionError, Provisioner, process_ports};

/// Label of a container's fleet.
pub const FLEET_LABEL: &str = "berth.fleet_id";
/// Label of a container's location.
pub const LOCATION_LABEL: &str = "berth.location";
/// Label of the fingerprint of the settings a container was created with.
pub const SETTINGS_LABEL: &str = "berth.settings";
/// Where a container's processes find their identity files, `<n>.env`.
const IDENTITY_DIR: &str = "berth";

/// Launches instances as containers of one Docker engine.
pub struct DockerProvisioner {
    /// The engine's address (`unix://…`, `tcp://…`, `http://…`); Docker's own default (`DOCKER_HOST`, else the
    /// local socket) when unset.
    host: Option<String>,
    /// Connected on first use, so that a replica starts while its engine is still coming up.
    docker: OnceCell<Docker>,
    /// Held from choosing a stopped container to reuse until it runs: two launches never take the same one.
    reusing: Mutex<()>,
}

/// What went wrong with the engine; its message becomes the fleet event's as it is.
#[derive(Debug, thiserror::Error)]
enum DockerFailure {
    #[error("{0}")]
    Parameters(#[from] BadParameter),
    #[error("cannot reach the Docker engine at {at}: {source}")]
    Connect { at: String, source: DockerError },
    #[error("docker could not {doing}: {source}")]
    Engine { doing: String, source: DockerError },
    #[error("cannot hand the identity of {game_server_id} to its container: {problem}")]
    Identity { game_server_id: String, problem: String },
}

impl From<DockerFailure> for ProvisionError {
    fn from(failure: DockerFailure) -> ProvisionError {
        ProvisionError(failure.to_string())
    }
}

/// Names what the engine was asked, for its error.
fn engine(doing: impl Into<String>) -> impl FnOnce(DockerError) -> DockerFailure {
    let doing = doing.into();
    move |source| DockerFailure::Engine { doing, source }
}

fn status_is(err: &DockerError, status: u16) -> bool {
    matches!(err, DockerError::DockerResponseServerError { status_code, .. } if *status_code == status)
}

/// The container an instance owns is the one named after it.
pub fn container_name(instance_id: &str) -> String {
    format!("berth-{instance_id}")
}

impl DockerProvisioner {
    pub fn new(host: Option<String>) -> DockerProvisioner {
        DockerProvisioner {
            host,
            docker: OnceCell::new(),
            reusing: Mutex::new(()),
        }
    }

    async fn docker(&self) -> Result<&Docker, DockerFailure> {
        let at = self.host.clone().unwrap_or_else(|| "its default address".into());
        self.docker
            .get_or_try_init(|| async {
                let connected = match &self.host {
                    Some(host) => Docker::connect_with_host(host),
                    None => Docker::connect_with_defaults(),
                };
                // Speaks the engine's API version when it is older than the client's.
                let connected = connected.map_err(|source| DockerFailure::Connect { at: at.clone(), source })?;
                connected
                    .negotiate_version()
                    .await
                    .map_err(|source| DockerFailure::Connect { at: at.clone(), source })
            })
            .await
    }

    async fn launch_now(&self, spec: &LaunchSpec) -> Result<String, DockerFailure> {
        let settings = DockerParameters::of(&spec.launch)?;
        let docker = self.docker().await?;
        let body = container_body(spec, &settings);
        let identities = identity_archive(spec)?;
        let id = match self.reuse(docker, spec, &body, &identities).await? {
            Some(id) => id,
            None => {
                let id = create(docker, &body, &container_name(&spec.instance_id), &settings.image).await?;
                start(docker, &id, &identities).await?;
                id
            }
        };
        for n in 1..spec.processes.len() {
            if let Err(err) = exec(docker, &id, spec, &settings, n).await {
                discard(docker, &id).await;
                return Err(err);
            }
        }
        Ok(id)
    }

    /// Starts a stopped container of the fleet and location again, renamed after the instance; `None` when there is
    /// none. Stopped containers made from other settings are removed on the way.
    async fn reuse(
        &self,
        docker: &Docker,
        spec: &LaunchSpec,
        body: &ContainerCreateBody,
        identities: &[u8],
    ) -> Result<Option<String>, DockerFailure> {
        let fingerprint = body.labels.as_ref().and_then(|labels| labels.get(SETTINGS_LABEL));
        let filters = HashMap::from([
            (
                "label",
                vec![
                    format!("{FLEET_LABEL}={}", spec.fleet_id),
                    format!("{LOCATION_LABEL}={}", spec.location),
                ],
            ),
            ("status", vec!["exited".to_owned()]),
        ]);
        let _reusing = self.reusing.lock().await;
        let options = ListContainersOptionsBuilder::new().all(true).filters(&filters).build();
        let stopped = docker
            .list_containers(Some(options))
            .await
            .map_err(engine("list the fleet's stopped containers"))?;
        for container in stopped {
            let Some(id) = container.id else { continue };
            if container.state != Some(ContainerSummaryStateEnum::EXITED) {
                continue;
            }
            if container.labels.as_ref().and_then(|labels| labels.get(SETTINGS_LABEL)) != fingerprint {
                tracing::info!(fleet = %spec.fleet_id, container = %id, "removing a stopped container of earlier settings");
                discard(docker, &id).await;
                continue;
            }
            let name = container_name(&spec.instance_id);
            docker
                .rename_container(&id, RenameContainerOptionsBuilder::new().name(&name).build())
                .await
                .map_err(engine(format!("rename container {id} to {name}")))?;
            start(docker, &id, identities).await?;
            tracing::info!(fleet = %spec.fleet_id, instance = %spec.instance_id, container = %id,
                "started a stopped container again");
            return Ok(Some(id));
        }
        Ok(None)
    }

    /// The container an instance owns, when it still exists and still bears the instance's name.
    async fn owned(
        &self,
        docker: &Docker,
        instance: Instance<'_>,
    ) -> Result<Option<ContainerInspectResponse>, DockerFailure> {
        let name = container_name(instance.instance_id);
        let target = if instance.handle.is_empty() {
            name.as_str()
        } else {
            instance.handle
        };
        match docker.inspect_container(target, None).await {
            Ok(container) => {
                let named = container.name.as_deref().map(|n| n.trim_start_matches('/')) == Some(name.as_str());
                let labels = container.config.as_ref().and_then(|c| c.labels.as_ref());
                let of_fleet = labels.and_then(|l| l.get(FLEET_LABEL)).map(String::as_str) == Some(instance.fleet_id);
                Ok((named && of_fleet).then_some(container))
            }
            Err(err) if status_is(&err, 404) => Ok(None),
            Err(err) => Err(engine(format!("inspect container {target}"))(err)),
        }
    }

    async fn count(&self, instance: Instance<'_>) -> Result<u32, DockerFailure> {
        let docker = self.docker().await?;
        let Some(container) = self.owned(docker, instance).await? else {
            return Ok(0);
        };
        if !container.state.and_then(|s| s.running).unwrap_or(false) {
            return Ok(0);
        }
        // The container's own process, and those started by exec: the engine lists an exec until it ends.
        let mut running = 1;
        for exec in container.exec_ids.unwrap_or_default() {
            match docker.inspect_exec(&exec).await {
                Ok(found) if found.running == Some(true) => running += 1,
                Ok(_) => {}
                Err(err) if status_is(&err, 404) => {}
                Err(err) => return Err(engine(format!("inspect exec {exec}"))(err)),
            }
        }
        Ok(running)
    }

    /// How the container of an instance exited, when it has.
    async fn exited(&self, instance: Instance<'_>) -> Result<Option<String>, DockerFailure> {
        let docker = self.docker().await?;
        let Some(container) = self.owned(docker, instance).await? else {
            return Ok(None);
        };
        let state = container.state.unwrap_or_default();
        if state.running == Some(true) {
            return Ok(None);
        }
        Ok(state.exit_code.map(|code| {
            let killed = if state.oom_killed == Some(true) {
                ", out of memory"
            } else {
                ""
            };
            format!("exit status: {code}{killed}")
        }))
    }

    async fn signal(&self, instance: Instance<'_>, kill: bool) -> Result<(), DockerFailure> {
        let docker = self.docker().await?;
        let Some(container) = self.owned(docker, instance).await? else {
            return Ok(());
        };
        let Some(id) = container.id else { return Ok(()) };
        let signal = if kill { "SIGKILL" } else { "SIGTERM" };
        match docker
            .kill_container(&id, Some(KillContainerOptionsBuilder::new().signal(signal).build()))
            .await
        {
            // 409: it stopped meanwhile.
            Err(err) if status_is(&err, 404) || status_is(&err, 409) => Ok(()),
            done => done.map_err(engine(format!("send {signal} to container {id}"))),
        }
    }
}

impl Provisioner for DockerProvisioner {
    fn launch<'a>(&'a self, spec: &'a LaunchSpec) -> BoxFuture<'a, Result<String, ProvisionError>> {
        async move { Ok(self.launch_now(spec).await?) }.boxed()
    }

    fn running<'a>(&'a self, instance: Instance<'a>) -> BoxFuture<'a, Result<u32, ProvisionError>> {
        async move { Ok(self.count(instance).await?) }.boxed()
    }

    fn exits<'a>(&'a self, instance: Instance<'a>) -> BoxFuture<'a, Vec<String>> {
        async move {
            match self.exited(instance).await {
                Ok(exited) => exited.into_iter().collect(),
                Err(err) => {
                    tracing::debug!(instance = instance.instance_id, error = %err, "cannot tell how it exited");
                    Vec::new()
                }
            }
        }
        .boxed()
    }

    fn stop<'a>(&'a self, instance: Instance<'a>, kill: bool) -> BoxFuture<'a, Result<(), ProvisionError>> {
        async move { Ok(self.signal(instance, kill).await?) }.boxed()
    }
}

/// The container of an instance, labelled with its fleet, location and a fingerprint of everything else, so that
/// a stopped one is reused only by a launch that would create the same.
fn container_body(spec: &LaunchSpec, settings: &DockerParameters) -> ContainerCreateBody {
    let mut env: Vec<String> = settings
        .env
        .iter()
        .filter(|(name, _)| *name != "BERTH_SDK_ENV_FILE")
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    env.push(format!("BERTH_SDK_ENV_FILE={}", identity_path(0)));
    let mut body = ContainerCreateBody {
        image: Some(settings.image.clone()),
        entrypoint: Some(vec![spec.launch.launch_path.clone()]),
        cmd: Some(arguments(spec)),
        env: Some(env),
        user: settings.user.clone(),
        host_config: Some(HostConfig {
            init: Some(true),
            network_mode: Some(settings.network_mode.clone()),
            nano_cpus: settings.cpus.map(|cpus| (cpus * 1e9) as i64),
            memory: settings.memory_mb.map(|mb| (mb << 20) as i64),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    let fingerprint = serde_json::to_vec(&body)
        .map(|json| hex(&Sha256::digest(json)))
        .unwrap_or_default();
    body.labels = Some(HashMap::from([
        (FLEET_LABEL.to_owned(), spec.fleet_id.clone()),
        (LOCATION_LABEL.to_owned(), spec.location.clone()),
        (SETTINGS_LABEL.to_owned(), fingerprint),
    ]));
    body
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn arguments(spec: &LaunchSpec) -> Vec<String> {
    spec.launch.parameters.split_whitespace().map(str::to_owned).collect()
}

fn identity_path(n: usize) -> String {
    format!("/{IDENTITY_DIR}/{n}.env")
}

/// A tar archive of each process's identity file, its environment and a game port picked now, to upload at `/`.
fn identity_archive(spec: &LaunchSpec) -> Result<Vec<u8>, DockerFailure> {
    let mut archive = tar::Builder::new(Vec::new());
    let mut directory = tar::Header::new_gnu();
    directory.set_entry_type(tar::EntryType::Directory);
    directory.set_mode(0o755);
    directory.set_size(0);
    let failed = |game_server_id: &str, problem: String| DockerFailure::Identity {
        game_server_id: game_server_id.to_owned(),
        problem,
    };
    let first = spec.processes.first().map_or("", |p| p.game_server_id.as_str());
    archive
        .append_data(&mut directory, format!("{IDENTITY_DIR}/"), std::io::empty())
        .map_err(|err| failed(first, err.to_string()))?;
    for (n, process) in spec.processes.iter().enumerate() {
        let ports = process_ports().map_err(|err| failed(&process.game_server_id, err.0))?;
        let mut text = String::new();
        for (name, value) in process.env.iter().chain(&ports) {
            if name.contains(['=', '\n']) || value.contains('\n') {
                return Err(failed(
                    &process.game_server_id,
                    format!("{name} cannot be written as one NAME=value line"),
                ));
            }
            text.push_str(&format!("{name}={value}\n"));
        }
        let mut file = tar::Header::new_gnu();
        file.set_mode(0o644);
        file.set_size(text.len() as u64);
        archive
            .append_data(&mut file, format!("{IDENTITY_DIR}/{n}.env"), text.as_bytes())
            .map_err(|err| failed(&process.game_server_id, err.to_string()))?;
    }
    archive.into_inner().map_err(|err| failed(first, err.to_string()))
}

/// Creates an instance's container, pulling its image first when the engine does not hold it.
async fn create(docker: &Docker, body: &ContainerCreateBody, name: &str, image: &str) -> Result<String, DockerFailure> {
    let options = || Some(CreateContainerOptionsBuilder::new().name(name).build());
    let created = match docker.create_container(options(), body.clone()).await {
        Err(err) if status_is(&err, 404) => {
            let pull = CreateImageOptionsBuilder::new().from_image(image).build();
            let mut progress = docker.create_image(Some(pull), None, None);
            while let Some(step) = progress.next().await {
                step.map_err(engine(format!("pull image {image}")))?;
            }
            docker.create_container(options(), body.clone()).await
        }
        created => created,
    };
    Ok(created
        .map_err(engine(format!("create a container of image {image}")))?
        .id)
}

/// Uploads the processes' identities into a container and starts it; removes it when either fails, so that no
/// container is left half set up.
async fn start(docker: &Docker, id: &str, identities: &[u8]) -> Result<(), DockerFailure> {
    let upload = UploadToContainerOptionsBuilder::new().path("/").build();
    let started = match docker
        .upload_to_container(id, Some(upload), bollard::body_full(identities.to_vec().into()))
        .await
    {
        Ok(()) => docker
            .start_container(id, None)
            .await
            .map_err(engine(format!("start container {id}"))),
        Err(err) => Err(engine(format!("upload identities into container {id}"))(err)),
    };
    if started.is_err() {
        discard(docker, id).await;
    }
    started
}

/// Starts the instance's process `n` in its running container, with its own identity file.
async fn exec(
    docker: &Docker,
    id: &str,
    spec: &LaunchSpec,
    settings: &DockerParameters,
    n: usize,
) -> Result<(), DockerFailure> {
    let mut cmd = vec![spec.launch.launch_path.clone()];
    cmd.extend(arguments(spec));
    let config = ExecConfig {
        cmd: Some(cmd),
        env: Some(vec![format!("BERTH_SDK_ENV_FILE={}", identity_path(n))]),
        user: settings.user.clone(),
        attach_stdin: Some(false),
        attach_stdout: Some(false),
        attach_stderr: Some(false),
        ..ExecConfig::default()
    };
    let doing = || format!("start server process {n} in container {id}");
    let created = docker.create_exec(id, config).await.map_err(engine(doing()))?;
    let detached = StartExecOptions {
        detach: true,
        ..StartExecOptions::default()
    };
    docker
        .start_exec(&created.id, Some(detached))
        .await
        .map(drop)
        .map_err(engine(doing()))
}

/// Removes a container that cannot serve; what it cannot do was reported already, so its own failure is only logged.
async fn discard(docker: &Docker, id: &str) {
    let force = RemoveContainerOptionsBuilder::new().force(true).build();
    if let Err(err) = docker.remove_container(id, Some(force)).await {
        tracing::warn!(container = %id, error = %err, "cannot remove container");
    }
}

#[cfg(test)]
mod tests {
    use berth_proto::fleet::v1 as pb;

    use super::*;
    use crate::provisioner::ProcessSpec;

    fn spec(parameters: &str) -> LaunchSpec {
        LaunchSpec {
            fleet_id: "arena".into(),
            location: "local".into(),
            instance_id: "i-1".into(),
            instance_type: "small".into(),
            launch: pb::ServerLaunchConfiguration {
                launch_path: "/game".into(),
                parameters: parameters.into(),
                provisioner_parameters: None,
            },
            processes: (0..2)
                .map(|n| ProcessSpec {
                    game_server_id: format!("i-1-{n}"),
                    env: vec![("BERTH_GAME_SERVER_ID".into(), format!("i-1-{n}"))],
                })
                .collect(),
        }
    }

    fn settings(image: &str) -> DockerParameters {
        DockerParameters {
            image: image.into(),
            network_mode: "host".into(),
            ..DockerParameters::default()
        }
    }

    fn label<'a>(body: &'a ContainerCreateBody, name: &str) -> &'a str {
        body.labels.as_ref().unwrap()[name].as_str()
    }

    #[test]
    fn the_settings_fingerprint_changes_with_the_settings_only() {
        let body = container_body(&spec("-map dust"), &settings("arena:1"));
        assert_eq!(label(&body, FLEET_LABEL), "arena");
        assert_eq!(label(&body, LOCATION_LABEL), "local");
        assert_eq!(body.entrypoint, Some(vec!["/game".to_owned()]));
        assert_eq!(body.cmd, Some(vec!["-map".to_owned(), "dust".to_owned()]));
        let mut other_instance = spec("-map dust");
        other_instance.instance_id = "i-2".into();
        let same = container_body(&other_instance, &settings("arena:1"));
        assert_eq!(label(&same, SETTINGS_LABEL), label(&body, SETTINGS_LABEL));
        let image = container_body(&spec("-map dust"), &settings("arena:2"));
        assert_ne!(label(&image, SETTINGS_LABEL), label(&body, SETTINGS_LABEL));
        let arguments = container_body(&spec("-map mirage"), &settings("arena:1"));
        assert_ne!(label(&arguments, SETTINGS_LABEL), label(&body, SETTINGS_LABEL));
    }

    #[test]
    fn each_process_gets_an_identity_file_with_its_own_port() {
        let archive = identity_archive(&spec("")).unwrap();
        let mut read = tar::Archive::new(archive.as_slice());
        let mut files = Vec::new();
        for entry in read.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            files.push((path, text));
        }
        assert_eq!(files[0].0, "berth/");
        let ports: Vec<&str> = files[1..]
            .iter()
            .enumerate()
            .map(|(n, (path, text))| {
                assert_eq!(path, &format!("berth/{n}.env"));
                assert!(
                    text.starts_with(&format!("BERTH_GAME_SERVER_ID=i-1-{n}\nBERTH_SDK_PORT=")),
                    "{text}"
                );
                text.lines().last().unwrap()
            })
            .collect();
        assert_eq!(ports.len(), 2);
        assert_ne!(ports[0], ports[1]);

        let mut bad = spec("");
        bad.processes[1].env.push(("MOTD".into(), "two\nlines".into()));
        assert!(
            matches!(identity_archive(&bad), Err(DockerFailure::Identity { game_server_id, .. }) if game_server_id == "i-1-1")
        );
    }
}
