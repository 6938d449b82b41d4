//! The system under test, wired as a deployment would wire it but inside this process: a throwaway Redis (never
//! a developer's own on 6379, which the bench would fill), the health and placement services on loopback ports
//! with token auth, and real HTTP/2 channels to them. Only the network hop between machines is missing.

use std::time::Duration;

use berth_placement::PlacementArgs;
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_store::{RedisConfig, Store};
use berth_testkit::{RunningService, TestRedis, spawn_service, token};

use crate::Failure;

/// How long a claim holds its server: longer than any run, so that no claim lapses back into the pool while it
/// is measured and the claim after the last server must find the fleet exhausted.
pub const CLAIM_TIMEOUT_MS: u64 = 3_600_000;

/// The running services and their Redis.
pub struct Stack {
    /// A handle on the services' Redis, for floors and checks that bypass gRPC.
    pub store: Store,
    /// The registry of game servers.
    pub health: RunningService,
    /// Claims.
    pub placement: RunningService,
    connections: u16,
    // Declared last so that it is dropped last: the services stop before their Redis does.
    _redis: TestRedis,
}

impl Stack {
    /// Starts the services over `redis`, which the stack then owns; channels will number `connections`.
    pub async fn start(redis: TestRedis, connections: u16) -> Result<Stack, Failure> {
        // The services' own defaults (BERTH_REDIS_CONNECTIONS, BERTH_REDIS_TIMEOUT_MS) rather than the testkit's
        // leaner ones, so the figures are those of a service as deployed.
        let config = RedisConfig {
            connections: 4,
            response_timeout: Duration::from_secs(1),
            ..redis.config()
        };
        let store = Store::connect(&config).await?;
        // As a service binary does at start-up, so that the first calls of a line do not pay for loading.
        berth_store::scripts::preload(&store).await?;
        let health = spawn_service(
            berth_health::service(store.clone(), &berth_health::HealthArgs::default()),
            store.clone(),
        )
        .await;
        let placement_args = PlacementArgs {
            claim_timeout_ms: CLAIM_TIMEOUT_MS,
            // The service's default: the sweeper's own Redis traffic is part of what a deployment carries.
            claim_sweep_ms: 1_000,
        };
        let placement = spawn_service(berth_placement::service(store.clone(), &placement_args), store.clone()).await;
        Ok(Stack {
            store,
            health,
            placement,
            connections,
            _redis: redis,
        })
    }

    /// Opens the configured number of connections to `service`, each presenting a token for `role`.
    pub async fn channels(&self, service: &RunningService, role: Role) -> Result<Vec<AuthedChannel>, Failure> {
        let token = token(role, None);
        let mut channels = Vec::with_capacity(usize::from(self.connections));
        for _ in 0..self.connections {
            channels.push(berth_sdk::connect(&service.endpoint(), &token).await?);
        }
        Ok(channels)
    }
}
