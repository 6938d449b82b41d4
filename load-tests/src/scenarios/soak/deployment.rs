//! The soak's Berth: two replicas of each of the four services, each the real binary in a process of its own, as
//! a deployment runs them, so that the chaos loop can SIGKILL any one and start it again on its port while the
//! other carries its traffic. Every replica keeps records for [`RETENTION_MS`] only, so that Redis' memory
//! reaches its steady state within the soak rather than growing for a day.

use std::fmt;

use berth_store::RedisConfig;
use tokio::sync::Mutex;

use crate::Failure;
use crate::procfs;
use crate::replica::Replica;

/// How long ended records (sessions, placements, lost servers, deleted fleets) are kept, in ms.
pub const RETENTION_MS: u64 = 120_000;
/// How long a claim holds its server before it lapses back into the pool, in ms.
pub const CLAIM_TIMEOUT_MS: u64 = 4_000;
/// Replicas of each service.
pub const REPLICAS: usize = 2;

/// The four services.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Service {
    Placement,
    Session,
    Health,
    Fleet,
}

impl Service {
    pub const ALL: [Service; 4] = [Service::Placement, Service::Session, Service::Health, Service::Fleet];

    fn binary(self) -> &'static str {
        match self {
            Service::Placement => "berth-placement",
            Service::Session => "berth-session",
            Service::Health => "berth-health",
            Service::Fleet => "berth-fleet",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.binary())
    }
}

/// The replicas, by service.
pub struct Deployment {
    replicas: Vec<(Service, Mutex<Replica>)>,
    endpoints: Vec<(Service, String)>,
}

/// The replica id of health replica `index`; the watched one is `health_replica(0)`.
pub fn health_replica(index: usize) -> String {
    format!("health-{index}")
}

impl Deployment {
    /// Starts every replica over `redis`; the health replicas first, since the fleet replicas hand their address to
    /// the game servers they launch.
    pub async fn start(redis: &RedisConfig) -> Result<Deployment, Failure> {
        let retention = RETENTION_MS.to_string();
        let kept = [
            ("BERTH_SESSION_RETENTION_MS", retention.clone()),
            ("BERTH_PLACEMENT_RETENTION_MS", retention.clone()),
            ("BERTH_LOST_RETENTION_MS", retention.clone()),
            ("BERTH_FLEET_RETENTION_MS", retention),
            ("BERTH_CLAIM_TIMEOUT_MS", CLAIM_TIMEOUT_MS.to_string()),
            // Each fault makes every replica warn on every failed write until Redis is back: thousands of lines
            // that would bury the soak's table. Errors still show.
            ("BERTH_LOG", "error".to_owned()),
        ];
        let mut deployment = Deployment {
            replicas: Vec::new(),
            endpoints: Vec::new(),
        };
        for service in [Service::Health, Service::Placement, Service::Session, Service::Fleet] {
            let mut settings = kept.to_vec();
            if service == Service::Fleet {
                settings.push(("BERTH_SDK_ENDPOINT", deployment.endpoints(Service::Health)));
            }
            for index in 0..REPLICAS {
                let mut settings = settings.clone();
                // Named, so that the streams a health replica holds can be counted in Redis.
                if service == Service::Health {
                    settings.push(("BERTH_REPLICA_ID", health_replica(index)));
                }
                let replica = Replica::start(service.binary(), redis, &settings).await?;
                deployment.endpoints.push((service, replica.endpoint()));
                deployment.replicas.push((service, Mutex::new(replica)));
            }
        }
        Ok(deployment)
    }

    /// The endpoints of `service`'s replicas, comma-separated, as a client given them all balances over them.
    pub fn endpoints(&self, service: Service) -> String {
        self.endpoints
            .iter()
            .filter(|(of, _)| *of == service)
            .map(|(_, endpoint)| endpoint.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// How many replicas there are in all.
    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    /// Replica `index` (of [`Deployment::len`]) and its service.
    pub fn replica(&self, index: usize) -> (Service, &Mutex<Replica>) {
        let (service, replica) = &self.replicas[index];
        (*service, replica)
    }

    /// Whether replica `index` is its service's first, whose memory the soak watches: the chaos loop spares it in
    /// the run's last half, so that a leak grows there instead of being reset by a kill.
    pub fn watched(&self, index: usize) -> bool {
        index.is_multiple_of(REPLICAS)
    }

    /// The resident memory of each service's watched replica now, in MiB; one the chaos loop holds (it is down, or
    /// starting) is passed over rather than waited for.
    pub fn resident_mib(&self) -> Vec<(Service, f64)> {
        let mut by_service = Vec::new();
        for (index, (service, replica)) in self.replicas.iter().enumerate() {
            let Ok(replica) = replica.try_lock() else {
                continue;
            };
            if self.watched(index) {
                by_service.push((*service, procfs::rss_kib(replica.pid()).unwrap_or(0) as f64 / 1024.0));
            }
        }
        by_service
    }
}
