//! The Agones side of the demo: a fleet of game servers written against Agones' SDK alone
//! (`agent/examples/agones_game_server.rs`), each launched by berth-fleet's `process` provisioner under
//! `berth-agent`, and a matchmaker that, as one built on Agones' allocator would, asks the placement service's
//! Agones allocation API for a server by label for each match, with the match's id and players as annotations.
//! The server sees itself Allocated, plays the match, and shuts down; the fleet starts another in its place.

use std::collections::HashMap;

use berth_proto::agones::allocation::allocation_service_client::AllocationServiceClient;
use berth_proto::agones::allocation::{AllocationRequest, GameServerSelector, MetaPatch};
use berth_proto::fleet::v1::fleet_service_client::FleetServiceClient;
use berth_sdk::AuthedChannel;
use rand::Rng;

use super::{create_or_resize_fleet, process_fleet};

/// The fleet's id.
pub const FLEET: &str = "demo-agones";

/// Creates the fleet (or gives an earlier run's this checkout's programs): `agent` runs `server`, with a `matches`
/// counter declared, on each of `instances` instances.
pub async fn create_fleet(
    fleets: &mut FleetServiceClient<AuthedChannel>,
    agent: &str,
    server: &str,
    instances: u32,
) -> Result<(), tonic::Status> {
    let mut request = process_fleet(
        FLEET,
        "make run: Agones game servers under berth-agent",
        agent,
        "local",
        instances,
    );
    if let Some(launch) = request.launch_configuration.as_mut() {
        launch.parameters = format!("--counter matches=0/0 -- {server}");
    }
    create_or_resize_fleet(fleets, request).await
}

/// Allocates a server for each match through Agones' allocation API.
#[derive(Clone)]
pub struct AllocatingMatchmaker {
    pub allocator: AllocationServiceClient<AuthedChannel>,
}

impl AllocatingMatchmaker {
    /// Allocates a server labelled `mode: demo` (the label the example server sets through the SDK) for match
    /// `number`, and prints where it is, or why there is none.
    pub async fn allocate(mut self, number: u64) {
        let players: Vec<String> = (0..rand::rng().random_range(2..=4))
            .map(|i| format!("agones-m{number}-p{i}"))
            .collect();
        let request = AllocationRequest {
            namespace: "default".into(),
            game_server_selectors: vec![GameServerSelector {
                match_labels: HashMap::from([
                    ("agones.dev/fleet".to_owned(), FLEET.to_owned()),
                    ("agones.dev/sdk-mode".to_owned(), "demo".to_owned()),
                ]),
                ..Default::default()
            }],
            metadata: Some(MetaPatch {
                labels: HashMap::new(),
                annotations: HashMap::from([
                    ("match".to_owned(), format!("m-{number}")),
                    ("players".to_owned(), players.join(",")),
                ]),
            }),
            ..Default::default()
        };
        match self.allocator.allocate(request).await {
            Ok(answer) => {
                let answer = answer.into_inner();
                let port = answer.ports.first().map_or(0, |port| port.port);
                println!(
                    "  {FLEET}: Agones Allocate → match m-{number} on {} at {}:{port} ({} players)",
                    answer.game_server_name,
                    answer.address,
                    players.len()
                );
            }
            Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                println!("  {FLEET}: Agones Allocate → no Ready server for match m-{number} yet");
            }
            Err(status) => println!("  {FLEET}: Agones Allocate failed: {status}"),
        }
    }
}
