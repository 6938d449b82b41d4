//! A demo fleet and matchmaker for `make run`: checks that every service is SERVING and lists its services by
//! reflection, registers game servers each with its own scoped token, then plays matchmaker — claims a server,
//! starts a match on it (UTILIZED), and when the match ends the server process "restarts" (deregisters and
//! registers again). Some claims are abandoned on purpose to show them lapse back to the pool, and one
//! instance is draining so its servers are claimed last. A status line every second shows the pool, and that of
//! the SDK processes (the example game servers `make run` starts), one of which is told to terminate now and then.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use berth_proto::health::v1::game_server_service_client::GameServerServiceClient;
use berth_proto::health::v1::{
    self as hpb, DeregisterGameServerRequest, ListGameServersRequest, RegisterGameServerRequest,
    SetInstanceStatusRequest, TerminateGameServerRequest, TerminationReason, UpdateGameServerRequest,
};
use berth_proto::placement::v1::ClaimGameServerRequest;
use berth_proto::placement::v1::claim_service_client::ClaimServiceClient;
use berth_runtime::auth::{Role, TokenKey};
use berth_sdk::{AuthedChannel, probe};
use clap::Parser;
use rand::Rng;

/// Runs a demo fleet against local Berth services.
#[derive(Parser, Debug)]
struct Cli {
    /// The services to check, as name=endpoint.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "placement=http://127.0.0.1:7101,session=http://127.0.0.1:7102,fleet=http://127.0.0.1:7103,health=http://127.0.0.1:7104"
    )]
    services: Vec<String>,
    /// Signing secret of the deployment, to mint the demo's tokens.
    #[arg(long, env = "BERTH_AUTH_KEY_FILE")]
    auth_key_file: PathBuf,
    /// Fleet to fill.
    #[arg(long, default_value = "demo")]
    fleet: String,
    /// Game servers to register.
    #[arg(long, default_value_t = 24)]
    servers: usize,
    /// How often the matchmaker asks for a server, in ms.
    #[arg(long, default_value_t = 400)]
    claim_every_ms: u64,
    /// Fleet of SDK game-server processes to watch (the example game servers `make run` starts); one of them is
    /// told to terminate every `--terminate-every-seconds`, to show a process honouring it.
    #[arg(long, default_value = "demo-sdk")]
    sdk_fleet: String,
    /// How often one SDK process is told to terminate, in seconds (0: never).
    #[arg(long, default_value_t = 20)]
    terminate_every_seconds: u64,
    /// Stop after this many seconds (0: run until interrupted).
    #[arg(long, default_value_t = 0)]
    duration_seconds: u64,
}

fn mint(key: &TokenKey, role: Role, scope: Option<(&str, &str)>) -> String {
    key.mint("berth-demo", role, scope, 86_400)
}

fn endpoint_of<'a>(services: &'a [(String, String)], name: &str) -> &'a str {
    services
        .iter()
        .find(|(service, _)| service == name)
        .map(|(_, endpoint)| endpoint.as_str())
        .unwrap_or_else(|| panic!("--services names no {name}"))
}

async fn check_services(services: &[(String, String)]) -> Result<(), Box<dyn std::error::Error>> {
    for (name, endpoint) in services {
        let channel = tonic::transport::Endpoint::from_shared(endpoint.clone())?
            .connect()
            .await?;
        let status = probe::serving_status(channel.clone(), "").await?;
        let listed = probe::list_services(channel).await?;
        let berth: Vec<_> = listed.iter().filter(|name| name.starts_with("berth.")).collect();
        println!("  berth-{name:<10} {endpoint:<24} {status:?}  {berth:?}");
    }
    Ok(())
}

/// One game-server process of the demo, with its own scoped token.
struct Server {
    id: String,
    instance: String,
    client: GameServerServiceClient<AuthedChannel>,
}

impl Server {
    async fn register(&mut self, fleet: &str) -> Result<(), tonic::Status> {
        let request = RegisterGameServerRequest {
            fleet_id: fleet.into(),
            game_server_id: self.id.clone(),
            instance_id: self.instance.clone(),
            connection_info: format!(
                "127.0.0.1:{}",
                7000 + self.id.len() * 10 + self.id.as_bytes()[self.id.len() - 1] as usize
            ),
            game_server_data: String::new(),
        };
        self.client.register_game_server(request).await.map(drop)
    }
}

async fn play_match(mut server: Server, fleet: String, seconds: u64) {
    let request = UpdateGameServerRequest {
        fleet_id: fleet.clone(),
        game_server_id: server.id.clone(),
        utilization_status: hpb::UtilizationStatus::Utilized as i32,
        ..Default::default()
    };
    if let Err(status) = server.client.update_game_server(request).await {
        println!("  {} could not start its match: {}", server.id, status.message());
        return;
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let leave = DeregisterGameServerRequest {
        fleet_id: fleet.clone(),
        game_server_id: server.id.clone(),
    };
    if let Err(status) = server.client.deregister_game_server(leave).await {
        println!("  {} could not deregister: {}", server.id, status.message());
    }
    if let Err(status) = server.register(&fleet).await {
        println!("  {} could not register again: {}", server.id, status.message());
    }
}

async fn pool_line(operator: &mut GameServerServiceClient<AuthedChannel>, fleet: &str) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut page_token = String::new();
    loop {
        let request = ListGameServersRequest {
            fleet_id: fleet.into(),
            page_size: 1000,
            page_token: page_token.clone(),
        };
        let page = match operator.list_game_servers(request).await {
            Ok(page) => page.into_inner(),
            Err(status) => return format!("pool unreadable: {}", status.message()),
        };
        for server in &page.game_servers {
            let state = match (
                server.utilization_status(),
                server.claim_status(),
                server.instance_status(),
            ) {
                (hpb::UtilizationStatus::Utilized, _, _) => "utilized",
                (_, hpb::ClaimStatus::Claimed, _) => "claimed",
                (_, _, hpb::InstanceStatus::Draining) => "available (draining)",
                _ => "available",
            };
            *counts.entry(state).or_default() += 1;
        }
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    counts
        .iter()
        .map(|(state, n)| format!("{state} {n}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Tells the first SDK process of the fleet to terminate; the example game server ends and its supervisor
/// starts a fresh one.
async fn terminate_one(operator: &mut GameServerServiceClient<AuthedChannel>, fleet: &str) {
    let request = ListGameServersRequest {
        fleet_id: fleet.into(),
        page_size: 1,
        page_token: String::new(),
    };
    let Ok(page) = operator.list_game_servers(request).await else {
        return;
    };
    let Some(server) = page.into_inner().game_servers.into_iter().next() else {
        return;
    };
    let request = TerminateGameServerRequest {
        fleet_id: fleet.into(),
        game_server_id: server.game_server_id.clone(),
        reason: TerminationReason::ScaleIn as i32,
    };
    match operator.terminate_game_server(request).await {
        Ok(_) => println!(
            "  told {} to terminate (scale-in): it sends ProcessEnding and exits",
            server.game_server_id
        ),
        Err(status) => println!("  could not terminate {}: {}", server.game_server_id, status.message()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let services: Vec<(String, String)> = cli
        .services
        .iter()
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, endpoint)| (name.to_owned(), endpoint.to_owned()))
        .collect();
    println!("Services (grpc.health.v1 status, services listed by reflection):");
    check_services(&services).await?;

    let key = TokenKey::new(std::fs::read(&cli.auth_key_file)?.trim_ascii().to_vec())?;
    let health = endpoint_of(&services, "health");
    let mut operator =
        GameServerServiceClient::new(berth_sdk::connect(health, &mint(&key, Role::Operator, None)).await?);
    let placement = endpoint_of(&services, "placement");
    let mut matchmaker = ClaimServiceClient::new(berth_sdk::connect(placement, &mint(&key, Role::Client, None)).await?);

    let fleet = cli.fleet.clone();
    let mut servers: BTreeMap<String, Server> = BTreeMap::new();
    for i in 0..cli.servers {
        let id = format!("{fleet}-gs-{i:03}");
        let token = mint(&key, Role::GameServer, Some((&fleet, &id)));
        let mut server = Server {
            id: id.clone(),
            instance: format!("{fleet}-instance-{}", i % 4),
            client: GameServerServiceClient::new(berth_sdk::connect(health, &token).await?),
        };
        if let Err(status) = server.register(&fleet).await {
            if status.code() != tonic::Code::AlreadyExists {
                return Err(status.into());
            }
            // Left over from an earlier run, perhaps mid-match: start it afresh.
            let leave = DeregisterGameServerRequest {
                fleet_id: fleet.clone(),
                game_server_id: id.clone(),
            };
            server.client.deregister_game_server(leave).await?;
            server.register(&fleet).await?;
        }
        servers.insert(id, server);
    }
    operator
        .set_instance_status(SetInstanceStatusRequest {
            fleet_id: fleet.clone(),
            instance_id: format!("{fleet}-instance-3"),
            instance_status: hpb::InstanceStatus::Draining as i32,
        })
        .await?;
    println!(
        "Registered {} game servers in fleet {fleet:?} over 4 instances; {fleet}-instance-3 is DRAINING. \
         Matchmaking (Ctrl-C to stop):",
        cli.servers
    );

    let started = Instant::now();
    let mut claim_tick = tokio::time::interval(Duration::from_millis(cli.claim_every_ms));
    let mut status_tick = tokio::time::interval(Duration::from_secs(1));
    let (mut matches, mut abandoned, mut refused) = (0u64, 0u64, 0u64);
    loop {
        if cli.duration_seconds > 0 && started.elapsed().as_secs() >= cli.duration_seconds {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = status_tick.tick() => {
                let pool = pool_line(&mut operator, &fleet).await;
                let sdk_pool = pool_line(&mut operator, &cli.sdk_fleet).await;
                let elapsed = started.elapsed().as_secs();
                println!(
                    "  t={elapsed:>4}s  {pool}  | matches started {matches}, claims abandoned {abandoned}, no server \
                     free {refused}  || {}: {sdk_pool}",
                    cli.sdk_fleet
                );
                if cli.terminate_every_seconds > 0 && elapsed > 0 && elapsed.is_multiple_of(cli.terminate_every_seconds) {
                    terminate_one(&mut operator, &cli.sdk_fleet).await;
                }
            }
            _ = claim_tick.tick() => {
                let request = ClaimGameServerRequest { fleet_id: fleet.clone(), ..Default::default() };
                match matchmaker.claim_game_server(request).await {
                    Ok(claimed) => {
                        let id = claimed.into_inner().game_server.map(|server| server.game_server_id).unwrap_or_default();
                        let (abandon, seconds) = {
                            let mut rng = rand::rng();
                            (rng.random_bool(0.15), rng.random_range(4..15))
                        };
                        if abandon {
                            abandoned += 1;
                        } else if let Some(server) = servers.remove(&id) {
                            matches += 1;
                            let token = mint(&key, Role::GameServer, Some((&fleet, &id)));
                            let replacement = Server {
                                id: id.clone(),
                                instance: server.instance.clone(),
                                client: GameServerServiceClient::new(berth_sdk::connect(health, &token).await?),
                            };
                            servers.insert(id, replacement);
                            tokio::spawn(play_match(server, fleet.clone(), seconds));
                        }
                    }
                    Err(status) if status.code() == tonic::Code::ResourceExhausted => refused += 1,
                    Err(status) => println!("  claim failed: {status}"),
                }
            }
        }
    }
}
