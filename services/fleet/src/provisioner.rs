//! Provisioners: what starts and stops a fleet's instances, behind one trait so that the reconciler is the same
//! whatever runs them: local processes (`process`), Docker containers (`docker`), an operator's hosting API
//! (`http`), and Kubernetes pods alike.
//!
//! The reconciler asks for four things only, each by the instance's id and the handle its launch answered: launch
//! an instance with its processes' environment, count its processes still running, say how those that ended
//! exited, and stop it (gently, or kill it). A provisioner keeps no state the reconciler relies on: a handle, or the instance id itself when the
//! launching replica died before it recorded the handle, is enough for any replica to find the instance again.

pub mod docker;
pub mod http;
pub mod process;

use std::net::TcpListener;

use berth_proto::fleet::v1 as pb;
use futures::future::BoxFuture;

/// One instance to launch.
#[derive(Clone, Debug)]
pub struct LaunchSpec {
    pub fleet_id: String,
    pub location: String,
    pub instance_id: String,
    pub instance_type: String,
    /// The fleet's launch path, parameters and provisioner parameters.
    pub launch: pb::ServerLaunchConfiguration,
    /// Its server processes, one per server the fleet runs on an instance.
    pub processes: Vec<ProcessSpec>,
}

/// One server process of an instance: its id and the environment the SDK reads (`BERTH_SDK_ENDPOINT`,
/// `BERTH_SDK_TOKEN`, `BERTH_FLEET_ID`, `BERTH_GAME_SERVER_ID`, `BERTH_INSTANCE_ID`, `BERTH_LOCATION`); the
/// provisioner adds where players reach it (`BERTH_SDK_PORT`, and the address when it knows one).
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    pub game_server_id: String,
    pub env: Vec<(String, String)>,
}

/// An instance launched before, as the reconciler finds it recorded.
#[derive(Clone, Copy, Debug)]
pub struct Instance<'a> {
    pub fleet_id: &'a str,
    pub instance_id: &'a str,
    /// What its launch answered; empty when the replica that launched it died before recording it.
    pub handle: &'a str,
}

/// Why a provisioner could not do what it was asked; the message goes into the fleet's events as it is.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProvisionError(pub String);

/// Starts and stops instances.
pub trait Provisioner: Send + Sync {
    /// Launches an instance with its processes; answers its handle.
    fn launch<'a>(&'a self, spec: &'a LaunchSpec) -> BoxFuture<'a, Result<String, ProvisionError>>;
    /// How many of an instance's processes still run.
    fn running<'a>(&'a self, instance: Instance<'a>) -> BoxFuture<'a, Result<u32, ProvisionError>>;
    /// How the processes of an instance that no longer run exited (`exit status: 3`, `signal: 9 (SIGKILL)`), as far
    /// as this provisioner saw them; empty when it cannot tell.
    fn exits<'a>(&'a self, instance: Instance<'a>) -> BoxFuture<'a, Vec<String>>;
    /// Stops an instance: asks its processes to exit, or with `kill`, ends them at once.
    fn stop<'a>(&'a self, instance: Instance<'a>, kill: bool) -> BoxFuture<'a, Result<(), ProvisionError>>;
}

/// A port free on this host now, for a game server to listen on.
/// The ports a game-server process finds in its environment, each picked free on this host so that processes
/// sharing it never share one: its game port (`BERTH_SDK_PORT`), and the pair berth-agent serves Agones' SDK on and
/// passes to the server it runs (`AGONES_SDK_GRPC_PORT`, `AGONES_SDK_HTTP_PORT`).
fn process_ports() -> Result<[(String, String); 3], ProvisionError> {
    Ok([
        ("BERTH_SDK_PORT".to_owned(), free_port()?.to_string()),
        ("AGONES_SDK_GRPC_PORT".to_owned(), free_port()?.to_string()),
        ("AGONES_SDK_HTTP_PORT".to_owned(), free_port()?.to_string()),
    ])
}

fn free_port() -> Result<u16, ProvisionError> {
    TcpListener::bind("0.0.0.0:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|err| ProvisionError(format!("no free port for the game server: {err}")))
}
