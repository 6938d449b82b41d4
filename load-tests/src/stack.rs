//! The system under test, wired as a deployment would wire it: a throwaway Redis (never a developer's own on 6379,
//! which the bench would fill) and the services over it with token auth and real HTTP/2 channels. A scenario
//! starts the services it measures: in this process on loopback ports ([`Stack::in_process`]), or as separate
//! processes (see `replica`). Only the network hop between machines is missing.

use std::sync::Mutex;
use std::time::Duration;

use berth_placement::PlacementArgs;
use berth_runtime::auth::Role;
use berth_sdk::AuthedChannel;
use berth_session::SessionArgs;
use berth_store::{RedisConfig, Store};
use berth_testkit::{RedisServer, RunningService, TestRedis, spawn_service, token};

use crate::Failure;
use crate::args::Args;

/// How long a claim holds its server: longer than any run, so that no claim lapses back into the pool while it
/// is measured and the claim after the last server must find the fleet exhausted.
pub const CLAIM_TIMEOUT_MS: u64 = 3_600_000;

/// Redis, and how to reach it.
pub struct Stack {
    /// A handle on the services' Redis, for floors and checks that bypass gRPC.
    pub store: Store,
    connections: u16,
    // Declared last so that they are dropped last: whatever uses Redis stops before it does.
    _replica: Option<RedisServer>,
    redis: Mutex<Option<TestRedis>>,
}

/// The health and placement services, in this process. Dropping them stops them.
pub struct InProcess {
    /// The registry of game servers.
    pub health: RunningService,
    /// Claims.
    pub placement: RunningService,
}

impl Stack {
    /// Connects to `redis` (and its `replica`, when the run's durability asks for one), which the stack then owns;
    /// channels will number the run's connections.
    pub async fn start(redis: TestRedis, replica: Option<RedisServer>, args: &Args) -> Result<Stack, Failure> {
        // The services' own defaults (BERTH_REDIS_CONNECTIONS, BERTH_REDIS_TIMEOUT_MS,
        // BERTH_REDIS_DURABILITY_TIMEOUT_MS) rather than the testkit's leaner ones, so the figures are those of a
        // service as deployed.
        let config = RedisConfig {
            connections: 4,
            response_timeout: Duration::from_secs(1),
            durability: args.durability,
            durability_timeout: Duration::from_millis(500),
            ..redis.config()
        };
        let store = Store::connect(&config).await?;
        // As a service binary does at start-up, so that the first calls of a line do not pay for loading.
        berth_store::scripts::preload(&store).await?;
        Ok(Stack {
            store,
            connections: args.connections,
            _replica: replica,
            redis: Mutex::new(Some(redis)),
        })
    }

    /// Hands the redis-server over to a scenario that must stop and start it (the soak); it is then the
    /// scenario's to keep alive. `None` once taken.
    pub fn take_redis(&self) -> Option<TestRedis> {
        self.redis.lock().map_or(None, |mut redis| redis.take())
    }

    /// Starts the health and placement services in this process, over the stack's store.
    pub async fn in_process(&self) -> InProcess {
        let store = &self.store;
        let health = spawn_service(
            berth_health::service(store.clone(), &berth_health::HealthArgs::default()),
            store.clone(),
        )
        .await;
        InProcess {
            health,
            placement: self.placement().await,
        }
    }

    /// Starts the placement service in this process, over the stack's store: claims that outlast the run, every
    /// other setting (the claim sweep, the placement workers) the service's default, as deployed.
    pub async fn placement(&self) -> RunningService {
        let args = PlacementArgs {
            claim_timeout_ms: CLAIM_TIMEOUT_MS,
            ..Default::default()
        };
        spawn_service(berth_placement::service(self.store.clone(), &args), self.store.clone()).await
    }

    /// Starts the session service in this process, over the stack's store, with `args`.
    pub async fn session(&self, args: &SessionArgs) -> RunningService {
        spawn_service(berth_session::service(self.store.clone(), args), self.store.clone()).await
    }

    /// Opens the configured number of connections to `service`, each presenting a token for `role`.
    pub async fn channels(&self, service: &RunningService, role: Role) -> Result<Vec<AuthedChannel>, Failure> {
        self.channels_at(&service.endpoint(), role).await
    }

    /// Opens the configured number of connections to the service at `endpoint` (a replica process, say).
    pub async fn channels_at(&self, endpoint: &str, role: Role) -> Result<Vec<AuthedChannel>, Failure> {
        let token = token(role, None);
        let mut channels = Vec::with_capacity(usize::from(self.connections));
        for _ in 0..self.connections {
            channels.push(berth_sdk::connect(endpoint, &token).await?);
        }
        Ok(channels)
    }
}
