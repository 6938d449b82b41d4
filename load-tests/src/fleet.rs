//! The synthetic game servers scenarios register. Server `i` is always the same record, so that a line through
//! gRPC and its raw-script floor store identical data and compare like for like.

use berth_domain::process::Registration;
use berth_proto::fleet::v1 as pb;
use berth_store::Store;

/// The location of every bench fleet, which creates it before its servers register.
pub const LOCATION: &str = "local";

/// The locations of the scenarios whose fleets span several.
pub const LOCATIONS: [&str; 4] = ["loc-a", "loc-b", "loc-c", "loc-d"];

/// Heartbeat settings (period ms, periods missed) under which processes a scenario never beats for stay alive
/// through any run: the contract's longest, a 10-minute window.
pub const QUIET: (u32, u32) = (60_000, 10);

/// The process timeouts of a bench fleet whose heartbeats are `heartbeat` (period ms, periods missed); every other
/// deadline the contract's longest, so that none passes during a run unless a scenario means it to.
pub fn timeouts((period_ms, missed): (u32, u32)) -> pb::ProcessTimeouts {
    pb::ProcessTimeouts {
        register_timeout_seconds: 3600,
        ready_timeout_seconds: 3600,
        heartbeat_interval_ms: period_ms,
        unhealthy_after_missed_heartbeats: missed,
        termination_grace_seconds: 3600,
        ..Default::default()
    }
}

/// Creates bench fleet `fleet_id` (ANYWHERE, in [`LOCATION`]) with heartbeats `heartbeat` (see [`timeouts`]), and
/// game and player sessions given the contract's longest to activate and to be joined.
pub async fn create(store: &Store, fleet_id: &str, heartbeat: (u32, u32)) {
    create_in(store, fleet_id, &[LOCATION], heartbeat).await;
}

/// As [`create`], in `locations` (the first its home).
pub async fn create_in(store: &Store, fleet_id: &str, locations: &[&str], heartbeat: (u32, u32)) {
    berth_testkit::anywhere_fleet_with(store, fleet_id, locations, |req| {
        req.process_timeouts = Some(timeouts(heartbeat));
        req.game_session_activation_timeout_seconds = 600;
        req.player_session_reservation_timeout_seconds = 600;
    })
    .await;
}

/// Game-server processes per instance: a host runs several, as in practice, so instance sets have a real size.
const SERVERS_PER_INSTANCE: u64 = 8;

/// One game server's registration fields.
pub struct Server {
    pub id: String,
    pub instance: String,
    pub ip: String,
    pub port: u32,
    /// `ip:port`, as a registration through GameServerService carries it.
    pub connection_info: String,
}

/// The `index`th server of a fleet.
pub fn server(index: u64) -> Server {
    let host = index / SERVERS_PER_INSTANCE;
    let ip = format!("10.{}.{}.{}", (host >> 16) & 0xff, (host >> 8) & 0xff, host & 0xff);
    let port = 7000 + (index % SERVERS_PER_INSTANCE) as u32;
    Server {
        id: format!("gs-{index:07}"),
        instance: format!("i-{host:06}"),
        connection_info: format!("{ip}:{port}"),
        ip,
        port,
    }
}

/// A server's registration as an SDK process of it gives it, in `location`, hosting `max_sessions` sessions of up
/// to `max_players` players.
pub fn registration(server: &Server, location: &str, max_sessions: u64, max_players: u32) -> Registration {
    Registration {
        location: location.to_owned(),
        ip_address: server.ip.clone(),
        port: server.port,
        max_sessions: u32::try_from(max_sessions).unwrap_or(u32::MAX),
        max_players,
        sdk_version: crate::sdk_stream::SDK_VERSION.to_owned(),
        ..Default::default()
    }
}
