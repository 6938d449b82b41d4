//! What the agent can be told. Its identity on Berth comes from the environment the provisioners set
//! (`BERTH_SDK_ENDPOINT`, `BERTH_SDK_TOKEN`, `BERTH_FLEET_ID`, … — see the Berth SDK's `GameServerConfig`); the ports
//! are the variables Agones' SDKs read, so the child finds the SDK where it would on Agones.

use std::net::IpAddr;

use berth_proto::health::v1::{ServerCounter, ServerList, UpdateServer};
use clap::Parser;

/// Runs a game server built on Agones' SDK on Berth: `berth-agent [flags] -- ./MyServer args…`.
#[derive(Debug, Parser)]
#[command(name = "berth-agent", version)]
pub struct Args {
    /// Port of the Agones SDK over gRPC; the child gets it in AGONES_SDK_GRPC_PORT.
    #[arg(long, env = "AGONES_SDK_GRPC_PORT", default_value_t = 9357)]
    pub grpc_port: u16,
    /// Port of the Agones SDK over HTTP/JSON; the child gets it in AGONES_SDK_HTTP_PORT.
    #[arg(long, env = "AGONES_SDK_HTTP_PORT", default_value_t = 9358)]
    pub http_port: u16,
    /// Address the SDK is served on. Loopback unless told otherwise: the SDK is the game server's own and carries
    /// no authentication of its own.
    #[arg(long, env = "BERTH_AGENT_BIND", default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Seconds the game server has to exit after SIGTERM before it is killed (SIGKILL), as a Kubernetes pod's
    /// termination grace period (30 s by default there too).
    #[arg(long, env = "BERTH_AGENT_KILL_AFTER_SECONDS", default_value_t = 30)]
    pub kill_after_seconds: u64,
    /// A counter the server has from the start, as NAME=COUNT/CAPACITY (capacity 0: no limit), as an Agones
    /// GameServer's spec.counters declares it. Repeat the flag, or separate them with commas.
    #[arg(long = "counter", env = "BERTH_AGENT_COUNTERS", value_delimiter = ',', value_parser = counter)]
    pub counters: Vec<ServerCounter>,
    /// A list the server has from the start, as NAME=CAPACITY or NAME=CAPACITY:VALUE|VALUE…, as spec.lists declares
    /// it. Repeat the flag, or separate them with commas.
    #[arg(long = "list", env = "BERTH_AGENT_LISTS", value_delimiter = ',', value_parser = list)]
    pub lists: Vec<ServerList>,
    /// The game server and its arguments.
    #[arg(required = true, last = true)]
    pub command: Vec<String>,
}

impl Args {
    /// The counters and lists the server declares, as the update that sets them.
    pub fn declared(&self) -> UpdateServer {
        UpdateServer {
            counters: self.counters.clone(),
            lists: self.lists.clone(),
            ..Default::default()
        }
    }
}

/// NAME=COUNT/CAPACITY.
fn counter(text: &str) -> Result<ServerCounter, String> {
    let bad = || format!("{text:?} is not NAME=COUNT/CAPACITY");
    let (name, numbers) = text.split_once('=').ok_or_else(bad)?;
    let (count, capacity) = numbers.split_once('/').ok_or_else(bad)?;
    Ok(ServerCounter {
        name: name.to_owned(),
        count: count.parse().map_err(|_| bad())?,
        capacity: capacity.parse().map_err(|_| bad())?,
    })
}

/// NAME=CAPACITY or NAME=CAPACITY:VALUE|VALUE….
fn list(text: &str) -> Result<ServerList, String> {
    let bad = || format!("{text:?} is not NAME=CAPACITY or NAME=CAPACITY:VALUE|VALUE…");
    let (name, rest) = text.split_once('=').ok_or_else(bad)?;
    let (capacity, values) = rest.split_once(':').unwrap_or((rest, ""));
    Ok(ServerList {
        name: name.to_owned(),
        capacity: capacity.parse().map_err(|_| bad())?,
        values: values
            .split('|')
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_lists_read_as_agones_declares_them() {
        let args = Args::parse_from([
            "berth-agent",
            "--counter",
            "rooms=1/4,score=0/0",
            "--list",
            "players=8:a|b",
            "--",
            "./server",
        ]);
        assert_eq!(
            args.counters[0],
            ServerCounter {
                name: "rooms".into(),
                count: 1,
                capacity: 4
            }
        );
        assert_eq!(args.counters[1].name, "score");
        assert_eq!(args.lists[0].values, ["a", "b"]);
        assert_eq!(args.lists[0].capacity, 8);
        assert!(counter("rooms=1").is_err());
        assert!(list("players=x").is_err());
    }
}
