//! A simulated fleet location: instances that come up a start-up time after their launch, one game session per
//! server process, sessions that end after their length, and placements that wait in order for a free server until
//! their queue's timeout. Its utilization reads as GetFleetUtilization reports it, so that the policies see what
//! they would see in production; it keeps what a studio pays (instance-hours) and what its players wait.

use std::collections::VecDeque;

use berth_domain::fleet::utilization::{Tally, location_utilization};
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

    /// The location's utilization now, as GetFleetUtilization reports it: the fleet service's own formulas over
    /// the counts of [`Location::tally`].
    pub fn utilization(&self, now_ms: i64) -> pb::LocationUtilization {
        location_utilization("sim", &self.tally(now_ms), now_ms as u64)
    }

    /// What the store's tally would hold for the location now: an instance is pending until its start-up time has
    /// passed and active after; a ready server hosting a session is utilized, one without is available with a free
    /// slot; no server is ever unhealthy, draining or stopping here.
    pub fn tally(&self, now_ms: i64) -> Tally {
        let (ready, starting): (Vec<&Instance>, Vec<&Instance>) =
            self.instances.iter().partition(|i| i.ready_ms <= now_ms);
        let busy: usize = ready.iter().map(|i| i.busy()).sum();
        let servers: usize = ready.iter().map(|i| i.hosting.len()).sum();
        let available = (servers - busy) as u64;
        Tally {
            desired_instances: self.instances.len() as u64,
            pending_instances: starting.len() as u64,
            active_instances: ready.len() as u64,
            idle_instances: ready.iter().filter(|i| i.busy() == 0).count() as u64,
            launching: starting.iter().map(|i| i.hosting.len() as u64).sum(),
            available,
            utilized: busy as u64,
            free_slots: available,
            activatable_sessions: available,
            active_sessions: busy as u64,
            waiting: self.waiting.len() as u64,
            waited_ms: self.waiting.iter().map(|arrived| (now_ms - arrived) as u64).sum(),
            ..Tally::default()
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

    /// The counts the fleet service's store would hold for the model's state, and the utilization the service
    /// reports from them: a simulator that counted or computed a figure its own way would fail here.
    #[test]
    fn utilization_reads_as_the_fleet_service_reports_it_from_the_same_counts() {
        let mut location = Location::new(settings(), 1);
        location.follow(4, 0);
        // Five placements while the instances start: they wait, then fill the first instances in order.
        location.step(50_000, 10_000, 30.0);
        location.step(60_000, 10_000, 0.0);
        location.follow(5, 60_000);
        let packed = Tally {
            desired_instances: 5,
            pending_instances: 1,
            active_instances: 4,
            idle_instances: 1,
            launching: 2,
            available: 3,
            utilized: 5,
            free_slots: 3,
            activatable_sessions: 3,
            active_sessions: 5,
            ..Tally::default()
        };
        assert_eq!(location.tally(60_000), packed);
        let seen = location.utilization(60_000);
        assert_eq!(seen, location_utilization("sim", &packed, 60_000));
        assert_eq!(
            (
                seen.percent_available_game_sessions,
                seen.percent_utilized_game_servers,
                seen.percent_idle_instances
            ),
            (37.5, 62.5, 25.0)
        );
        // Five more than the three free servers take: two wait, 10 s each by 80 s.
        location.step(70_000, 10_000, 30.0);
        let full = Tally {
            idle_instances: 0,
            available: 0,
            utilized: 8,
            free_slots: 0,
            activatable_sessions: 0,
            active_sessions: 8,
            waiting: 2,
            waited_ms: 20_000,
            ..packed
        };
        assert_eq!(location.tally(80_000), full);
        let seen = location.utilization(80_000);
        assert_eq!(seen, location_utilization("sim", &full, 80_000));
        assert_eq!((seen.queue_depth, seen.wait_time_ms), (2, 10_000));
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
