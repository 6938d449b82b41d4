//! Autoscaling with no I/O: what each scaling policy proposes for a fleet location from its utilization, its
//! capacity and the time; the location's standby target; and the decision that turns the proposals into a desired
//! instance count, as `berth/fleet/v1/scaling.proto`'s package comment states it. The fleet service reads the
//! inputs and writes the decision; the policy simulator replays a demand trace through the same functions.

pub mod check;
pub mod decide;
pub mod pass;
pub mod policy;
pub mod standby;
pub mod window;

use berth_proto::fleet::v1 as pb;

use crate::fleet::check::INSTANCES_MAX;

/// A location's instance bounds and desired count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capacity {
    pub minimum: u32,
    pub maximum: u32,
    pub desired: u32,
}

/// What a policy reads of its location now.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// ms since the epoch, on Redis's clock.
    pub now_ms: i64,
    pub utilization: &'a pb::LocationUtilization,
    pub capacity: Capacity,
    /// Server processes per instance, at least 1.
    pub servers_per_instance: u32,
}

impl Inputs<'_> {
    /// The instances that hold `servers` server processes: rounded up, at most the most a location may have.
    pub fn instances(&self, servers: u64) -> u32 {
        let per = u64::from(self.servers_per_instance.max(1));
        u32::try_from(servers.div_ceil(per)).map_or(INSTANCES_MAX, |n| n.min(INSTANCES_MAX))
    }

    /// Game servers hosting games: utilized, on active or draining instances.
    pub fn busy_servers(&self) -> u64 {
        self.utilization
            .game_server_counts
            .as_ref()
            .map_or(0, |g| u64::from(g.utilized) + u64::from(g.draining_utilized))
    }

    /// Placements waiting for a server here.
    pub fn waiting(&self) -> u64 {
        u64::from(self.utilization.queue_depth)
    }

    /// The value of a rule-based policy's metric; `None` when the utilization lacks what it is read from.
    pub fn metric(&self, metric: pb::ScalingMetric) -> Option<f64> {
        use pb::ScalingMetric as M;
        let u = self.utilization;
        let servers = u.game_server_counts.as_ref();
        let instances = u.instance_counts.as_ref();
        let value = match metric {
            M::Unspecified => return None,
            M::ActivatingGameSessions => u.activating_game_sessions.into(),
            M::ActiveGameSessions => u.active_game_sessions.into(),
            M::ActiveInstances => instances?.active.into(),
            M::AvailableGameSessions => u.available_game_sessions.into(),
            M::AvailablePlayerSessions => u.available_player_sessions.into(),
            M::CurrentPlayerSessions => u.current_player_sessions.into(),
            M::IdleInstances => instances?.idle.into(),
            M::PercentAvailableGameSessions => u.percent_available_game_sessions,
            M::PercentIdleInstances => u.percent_idle_instances,
            M::QueueDepth => u.queue_depth.into(),
            M::WaitTime => u.wait_time_ms as f64 / 1000.0,
            M::ConcurrentActivatableGameSessions => u.concurrent_activatable_game_sessions.into(),
            M::AvailableGameServers => servers.map(|g| f64::from(g.available) + f64::from(g.draining_available))?,
            M::UtilizedGameServers => servers.map(|g| f64::from(g.utilized) + f64::from(g.draining_utilized))?,
            M::PercentUtilizedGameServers => u.percent_utilized_game_servers,
        };
        Some(value)
    }
}

/// The name standby proposals carry, in place of a policy's.
pub const STANDBY: &str = "standby";
