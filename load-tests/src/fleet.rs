//! The synthetic game servers scenarios register. Server `i` is always the same record, so that a line through
//! gRPC and its raw-script floor store identical data and compare like for like.

/// The location of every bench fleet, which creates it before its servers register.
pub const LOCATION: &str = "local";

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
