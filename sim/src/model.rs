//! A simulated fleet location: instances that come up a start-up time after their launch, one game session per
//! server process, sessions that end after their length, and placements that wait in order for a free server until
//! their queue's timeout. Its utilization reads as GetFleetUtilization reports it, so that the policies see what
//! they would see in production; it keeps what a studio pays (instance-hours) and what its players wait.

use std::collections::VecDeque;

use berth_proto::fleet::v1 as pb;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How the simulated location behaves.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub servers_per_instance: u32,
    /// From an instance's launch to its servers being ready, ms.
    pub startup_ms: i64,
    /// A session's mean length, ms; each lasts between half and one and a half of it.
    pub session_ms: i64,
    /// How long a placement waits for a server before it times out, ms.
    pub timeout_ms: i64,
}

struct Instance {
    ready_ms: i64,
    /// Per server process: when its session ends, while it hosts one.
    hosting: Vec<Option<i64>>,
}

impl Instance {
    fn busy(&self) -> usize {
        self.hosting.iter().filter(|h| h.is_some()).count()
    }
}

/// What a location's day came to.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Waits of the placements fulfilled, ms.
    pub waits_ms: Vec<i64>,
    pub timed_out: u64,
    /// Instance time paid for, ms, starting instances included.
    pub instance_ms: f64,
    /// Ready, idle server time, ms: the standby left over the day.
    pub idle_server_ms: f64,
}

/// The simulated location.
pub struct Location {
    settings: Settings,
    instances: Vec<Instance>,
    /// Arrival times of the placements waiting, oldest first.
    waiting: VecDeque<i64>,
    /// Sessions asked for but not yet whole.
    owed: f64,
    rng: StdRng,
    pub outcome: Outcome,
}

impl Location {
    pub fn new(settings: Settings, seed: u64) -> Location {
        Location {
            settings,
            instances: Vec::new(),
            waiting: VecDeque::new(),
            owed: 0.0,
            rng: StdRng::seed_from_u64(seed),
            outcome: Outcome::default(),
        }
    }

    /// Instances running or starting.
    pub fn instances(&self) -> usize {
        self.instances.len()
    }

    /// Advances `step_ms` to `now_ms`, with players asking for `per_minute` sessions a minute meanwhile.
    pub fn step(&mut self, now_ms: i64, step_ms: i64, per_minute: f64) {
        let idle: usize = self
            .instances
            .iter()
            .filter(|i| i.ready_ms <= now_ms)
            .map(|i| i.hosting.len() - i.busy())
            .sum();
        self.outcome.instance_ms += (self.instances.len() as i64 * step_ms) as f64;
        self.outcome.idle_server_ms += (idle as i64 * step_ms) as f64;
        for instance in &mut self.instances {
            for hosting in &mut instance.hosting {
                if hosting.is_some_and(|end| end <= now_ms) {
                    *hosting = None;
                }
            }
        }
        self.owed += per_minute * step_ms as f64 / 60_000.0;
        while self.owed >= 1.0 {
            self.waiting.push_back(now_ms);
            self.owed -= 1.0;
        }
        while self
            .waiting
            .front()
            .is_some_and(|arrived| arrived + self.settings.timeout_ms <= now_ms)
        {
            self.waiting.pop_front();
            self.outcome.timed_out += 1;
        }
        // Busy instances first, as Berth packs sessions, so that whole instances empty out for scale-in.
        let mut order: Vec<usize> = (0..self.instances.len())
            .filter(|at| self.instances[*at].ready_ms <= now_ms)
            .collect();
        order.sort_by_key(|at| std::cmp::Reverse(self.instances[*at].busy()));
        for at in order {
            for server in 0..self.instances[at].hosting.len() {
                if self.instances[at].hosting[server].is_some() {
                    continue;
                }
                let Some(arrived) = self.waiting.pop_front() else {
                    return;
                };
                self.outcome.waits_ms.push(now_ms - arrived);
                let length = self.settings.session_ms as f64 * self.rng.random_range(0.5..1.5);
                self.instances[at].hosting[server] = Some(now_ms + length as i64);
            }
        }
    }

    /// Launches or removes instances towards `desired`: removes starting ones first, then ready idle ones, never one
    /// hosting a game.
    pub fn follow(&mut self, desired: u32, now_ms: i64) {
        let desired = desired as usize;
        while self.instances.len() < desired {
            self.instances.push(Instance {
                ready_ms: now_ms + self.settings.startup_ms,
                hosting: vec![None; self.settings.servers_per_instance.max(1) as usize],
            });
        }
        while self.instances.len() > desired {
            let starting = self.instances.iter().rposition(|i| i.ready_ms > now_ms);
            let idle = || self.instances.iter().rposition(|i| i.busy() == 0);
            match starting.or_else(idle) {
                Some(at) => {
                    self.instances.remove(at);
                }
                None => break,
            }
        }
    }

    /// The location's utilization now, as GetFleetUtilization reports it.
    pub fn utilization(&self, now_ms: i64) -> pb::LocationUtilization {
        let (ready, starting): (Vec<&Instance>, Vec<&Instance>) =
            self.instances.iter().partition(|i| i.ready_ms <= now_ms);
        let busy: u32 = ready.iter().map(|i| i.busy() as u32).sum();
        let servers: u32 = ready.iter().map(|i| i.hosting.len() as u32).sum();
        let available = servers - busy;
        let idle = ready.iter().filter(|i| i.busy() == 0).count() as u32;
        let percent = |part: u32, whole: u32| {
            if whole == 0 {
                0.0
            } else {
                f64::from(part) * 100.0 / f64::from(whole)
            }
        };
        let waited: i64 = self.waiting.iter().map(|arrived| now_ms - arrived).sum();
        pb::LocationUtilization {
            location: "sim".into(),
            instance_counts: Some(pb::InstanceCounts {
                desired: self.instances.len() as u32,
                pending: starting.len() as u32,
                active: ready.len() as u32,
                idle,
                ..Default::default()
            }),
            game_server_counts: Some(pb::GameServerCounts {
                launching: starting.iter().map(|i| i.hosting.len() as u32).sum(),
                available,
                utilized: busy,
                ..Default::default()
            }),
            active_server_processes: servers,
            active_game_sessions: busy,
            available_game_sessions: available,
            percent_available_game_sessions: percent(available, servers),
            concurrent_activatable_game_sessions: available,
            percent_idle_instances: percent(idle, ready.len() as u32),
            percent_utilized_game_servers: percent(busy, servers),
            queue_depth: self.waiting.len() as u32,
            wait_time_ms: u64::try_from(waited / (self.waiting.len().max(1) as i64)).unwrap_or(0),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            servers_per_instance: 2,
            startup_ms: 60_000,
            session_ms: 600_000,
            timeout_ms: 120_000,
        }
    }

    #[test]
    fn placements_wait_for_instances_to_start_and_time_out_without_them() {
        let mut location = Location::new(settings(), 1);
        location.follow(1, 0);
        // One placement in each of the first two steps: both wait for the instance starting.
        for now in (10_000..=60_000).step_by(10_000) {
            location.step(now, 10_000, if now <= 20_000 { 6.0 } else { 0.0 });
        }
        let seen = location.utilization(60_000);
        assert_eq!(
            seen.game_server_counts.unwrap().utilized,
            2,
            "both placed once it is ready"
        );
        assert_eq!(location.outcome.waits_ms.len(), 2);
        assert!(location.outcome.waits_ms.iter().all(|w| *w > 0 && *w <= 60_000));
        // More than it holds: the third waits, and times out.
        for now in (70_000..=200_000).step_by(10_000) {
            location.step(now, 10_000, if now == 70_000 { 6.0 } else { 0.0 });
        }
        assert_eq!(location.outcome.timed_out, 1);
        assert_eq!(location.utilization(200_000).queue_depth, 0);
    }

    #[test]
    fn scale_in_spares_instances_hosting_games() {
        let mut location = Location::new(settings(), 1);
        location.follow(3, 0);
        location.step(60_000, 10_000, 6.0);
        assert_eq!(location.utilization(60_000).game_server_counts.unwrap().utilized, 1);
        location.follow(0, 60_000);
        assert_eq!(location.instances(), 1, "the instance hosting a game stays");
    }
}
