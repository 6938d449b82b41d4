//! Berth services in-process, each on an ephemeral port of 127.0.0.1, with real gRPC between test and service.

use std::net::SocketAddr;
use std::time::Duration;

use berth_runtime::auth::{AuthMode, Role, TokenKey};
use berth_runtime::server::{ServeOptions, ServiceDef, serve};
use berth_store::Store;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The signing secret test services use.
pub const TEST_KEY: &[u8; 32] = b"berth-test-signing-key-32-bytes!";

/// A bearer token for `role` signed with [`TEST_KEY`]; for a game server, scoped to `fleet` and `server`. Valid for a
/// day, so that no run outlives it: the soak's hour, with its set-up and checks, outlived an hour's token.
pub fn token(role: Role, scope: Option<(&str, &str)>) -> String {
    let key = TokenKey::new(TEST_KEY.to_vec()).expect("test key is long enough");
    key.mint("test", role, scope, 86_400)
}

/// A service serving in the background. Dropping it shuts it down.
pub struct RunningService {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl RunningService {
    /// Its `http://` endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Shuts it down gracefully and waits until it has stopped.
    pub async fn shutdown(mut self) {
        self.stop().await;
    }

    /// Stops it as [`RunningService::shutdown`] does, leaving the value (for a replica started again in its place).
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningService {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Serves `def` on an ephemeral port with token auth ([`TEST_KEY`]), probing Redis every 100 ms.
pub async fn spawn_service(def: ServiceDef, store: Store) -> RunningService {
    spawn_service_at(def, store, "127.0.0.1:0".parse().expect("an address")).await
}

/// As [`spawn_service`], on `addr`: a replica started again where its clients already connect.
pub async fn spawn_service_at(def: ServiceDef, store: Store, addr: std::net::SocketAddr) -> RunningService {
    let listener = tokio::net::TcpListener::bind(addr).await.expect("binding the address");
    let addr = listener.local_addr().expect("local address");
    let options = ServeOptions {
        auth: AuthMode::Tokens(TokenKey::new(TEST_KEY.to_vec()).expect("test key is long enough")),
        tls: None,
        health_probe: Duration::from_millis(100),
        shutdown_grace: Duration::from_secs(5),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        if let Err(err) = serve(def, store, options, listener, shutdown).await {
            panic!("test service failed: {err}");
        }
    });
    RunningService {
        addr,
        stop: Some(stop),
        task: Some(task),
    }
}

/// How an SDK game server of the tests connects: to `health` (a health replica's endpoint) as `id` of `fleet_id`
/// in `location`, with its own scoped token, hosting up to `sessions` game sessions of up to `max_players` (0: the
/// fleet's default) players.
pub fn game_server_config(
    health: &str,
    fleet_id: &str,
    id: &str,
    location: &str,
    sessions: u32,
    max_players: u32,
) -> berth_sdk::game_server::GameServerConfig {
    berth_sdk::game_server::GameServerConfig {
        sdk_endpoint: health.to_owned(),
        token: token(Role::GameServer, Some((fleet_id, id))),
        fleet_id: fleet_id.into(),
        game_server_id: id.into(),
        instance_id: format!("i-{id}"),
        location: location.into(),
        endpoint: berth_proto::common::v1::Endpoint {
            ip_address: "10.0.0.7".into(),
            dns_name: String::new(),
            port: 7777,
        },
        ports: Vec::new(),
        max_concurrent_game_sessions: sessions,
        max_players,
        labels: Vec::new(),
        sdk_version: "berth-tests/1".into(),
        log_paths: Vec::new(),
        game_server_data: String::new(),
    }
}
