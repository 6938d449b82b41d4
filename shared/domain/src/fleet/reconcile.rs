//! What the reconciler of one fleet location does next: from the instances it finds (as recorded, as their servers
//! report, as the provisioner sees them run), the location's desired count and the fleet's deadlines, the steps
//! that make the running instances follow the desired count. Pure, so that every rule of the contract's scale-in
//! order, of draining and of the deadlines is tested without a process or a clock.

pub mod backoff;

use berth_proto::fleet::v1 as pb;

use crate::stored::{InstanceState, LocationStatus, TerminationReason};

/// The deadlines a plan applies, in ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// From launch to the registration of each of an instance's processes.
    pub register_ms: i64,
    /// From being told to end to ProcessEnding.
    pub termination_grace_ms: i64,
    /// From ProcessEnding (or a stop) to exit.
    pub exit_ms: i64,
    /// From a DEPLOYING location's first launch to its first registration.
    pub first_heartbeat_ms: i64,
    /// From a DEPLOYING location's first launch to its first ready server.
    pub location_ready_ms: i64,
}

impl Deadlines {
    /// The deadlines of a fleet's process timeouts (defaults resolved).
    pub fn of(timeouts: &pb::ProcessTimeouts) -> Deadlines {
        let ms = |seconds: u32| i64::from(seconds) * 1000;
        Deadlines {
            register_ms: ms(timeouts.register_timeout_seconds),
            termination_grace_ms: ms(timeouts.termination_grace_seconds),
            exit_ms: ms(timeouts.exit_timeout_seconds),
            first_heartbeat_ms: ms(timeouts.location_first_heartbeat_timeout_seconds),
            location_ready_ms: ms(timeouts.location_ready_timeout_seconds),
        }
    }
}

/// The instance types judged not viable in a location.
pub fn not_viable(viabilities: &[pb::InstanceTypeViability]) -> Vec<String> {
    viabilities
        .iter()
        .filter(|v| !v.viable)
        .map(|v| v.instance_type.clone())
        .collect()
}

/// The instance type a location launches: the fleet's first viable type in preference order; when none is viable,
/// the first type On-Demand, unless the fleet is SPOT_ONLY, which then launches nothing.
pub fn launch_type<'a>(fleet: &'a pb::Fleet, not_viable: &[String]) -> Option<&'a str> {
    let types = &fleet.instance_definitions;
    types
        .iter()
        .find(|d| !not_viable.contains(&d.instance_type))
        .or_else(|| (fleet.balancing_strategy() != pb::BalancingStrategy::SpotOnly).then(|| types.first())?)
        .map(|d| d.instance_type.as_str())
}

/// A fleet location as its reconciler sees it.
#[derive(Clone, Debug)]
pub struct LocationView<'a> {
    /// Now, ms since the epoch (Redis' clock).
    pub now_ms: i64,
    /// Instances wanted.
    pub desired: u32,
    pub status: LocationStatus,
    /// The first launch since the location last became DEPLOYING, ms; `None` before it.
    pub first_launch_ms: Option<i64>,
    /// When a server of the location last registered, ms.
    pub registered_ms: Option<i64>,
    /// Whether the fleet or the location is being deleted: every instance goes.
    pub deleting: bool,
    /// The instance type to launch (the first viable one the balancing strategy allows); `None` when none may be.
    pub launch_type: Option<&'a str>,
    /// Instance types judged not viable here.
    pub not_viable: &'a [String],
    /// Whether a claimed or UTILIZED server protects its instance (FULL_PROTECTION game-server protection).
    pub protect_held_servers: bool,
    /// No launch before this time, ms (the backoff after failed launches).
    pub launch_after_ms: i64,
    pub deadlines: Deadlines,
}

/// One instance of the location.
#[derive(Clone, Debug)]
pub struct InstanceView {
    pub id: String,
    pub instance_type: String,
    pub state: InstanceState,
    /// When its launch was recorded, ms.
    pub launch_ms: i64,
    /// While TERMINATING: when it is killed if it still runs, ms.
    pub kill_ms: Option<i64>,
    /// Its processes' servers.
    pub servers: Vec<ServerView>,
    /// How many of its processes the provisioner sees running; `None` when it could not tell, and then nothing is
    /// decided about the instance but that it counts.
    pub running: Option<u32>,
}

/// One server process of an instance.
#[derive(Clone, Debug)]
pub struct ServerView {
    /// It registered at least once.
    pub registered: bool,
    pub state: ServerState,
}

/// What a server is doing, as the registry says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerState {
    /// Not in the registry: not registered yet, or ended by its own ProcessEnding.
    Absent,
    /// Registered, not ready.
    Starting,
    /// Ready: hosting `sessions` game sessions; `held` when claimed or UTILIZED; `protected` when one of its game
    /// sessions has FULL_PROTECTION.
    Ready { sessions: u32, held: bool, protected: bool },
    /// Told to end.
    Ending,
    /// Declared lost.
    Lost,
}

/// Why an instance is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// More instances run than are desired.
    ScaleIn,
    /// Its instance type is not viable and its replacements run.
    Drained,
    /// Its fleet or location is being deleted.
    Deleted,
    /// A process did not register in time (event SERVER_PROCESS_REGISTER_TIMEOUT).
    RegisterTimeout,
    /// Every one of its processes has ended or was declared lost, yet some still run.
    ProcessesEnded,
}

impl StopReason {
    /// What its live processes are told through the SDK before they are stopped; `None` when nothing of them is
    /// left to tell, and the provisioner stops them at once.
    pub fn termination(self) -> Option<TerminationReason> {
        match self {
            StopReason::ScaleIn => Some(TerminationReason::ScaleIn),
            StopReason::Drained => Some(TerminationReason::InstanceDrained),
            StopReason::Deleted => Some(TerminationReason::FleetDeleted),
            StopReason::RegisterTimeout | StopReason::ProcessesEnded => None,
        }
    }

    /// How long after the stop the instance is killed if it still runs, ms: the termination grace and the exit
    /// timeout when its processes are asked to end, the exit timeout alone otherwise.
    pub fn kill_after_ms(self, deadlines: &Deadlines) -> i64 {
        match self.termination() {
            Some(_) => deadlines.termination_grace_ms + deadlines.exit_ms,
            None => deadlines.exit_ms,
        }
    }

    /// The detail of its event.
    pub fn message(self) -> &'static str {
        match self {
            StopReason::ScaleIn => "scale-in",
            StopReason::Drained => "drained: its instance type is not viable",
            StopReason::Deleted => "its fleet or location is being deleted",
            StopReason::RegisterTimeout => "a process did not register within the register timeout",
            StopReason::ProcessesEnded => "its processes ended",
        }
    }
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Launch `count` instances of `instance_type`.
    Launch { count: u32, instance_type: String },
    /// Drain an instance: its servers are used last.
    Drain { instance: String },
    /// Stop an instance.
    Stop { instance: String, why: StopReason },
    /// Kill a stopping instance whose deadline passed.
    Kill { instance: String },
    /// Forget an instance nothing of which runs; `asked` when it was being stopped.
    Remove { instance: String, asked: bool },
    /// The location failed to deploy.
    Unhealthy { message: String },
}

impl InstanceView {
    fn ready(&self) -> bool {
        self.servers
            .iter()
            .any(|s| matches!(s.state, ServerState::Ready { .. }))
    }

    /// Servers hosting sessions, claimed or UTILIZED.
    fn busy(&self) -> usize {
        let busy =
            |s: &ServerView| matches!(s.state, ServerState::Ready { sessions, held, .. } if sessions > 0 || held);
        self.servers.iter().filter(|s| busy(s)).count()
    }

    fn protected(&self, protect_held: bool) -> bool {
        self.servers.iter().any(|s| match s.state {
            ServerState::Ready { protected, held, .. } => protected || (protect_held && held),
            _ => false,
        })
    }

    /// Every process registered and has since ended or been declared lost.
    fn spent(&self) -> bool {
        !self.servers.is_empty()
            && self
                .servers
                .iter()
                .all(|s| s.registered && matches!(s.state, ServerState::Absent | ServerState::Lost))
    }

    fn late_to_register(&self, now_ms: i64, deadlines: &Deadlines) -> bool {
        now_ms >= self.launch_ms + deadlines.register_ms && self.servers.iter().any(|s| !s.registered)
    }
}

/// The steps that bring the location's instances to its desired count, in the order to take them.
pub fn plan(location: &LocationView<'_>, instances: &[InstanceView]) -> Vec<Action> {
    let now = location.now_ms;
    let deadlines = &location.deadlines;
    let mut actions = Vec::new();
    let mut live = Vec::new();
    let mut draining = Vec::new();
    for instance in instances {
        let id = || instance.id.clone();
        let stop = |why| Action::Stop { instance: id(), why };
        if instance.running == Some(0) {
            let asked = instance.state == InstanceState::Terminating;
            actions.push(Action::Remove { instance: id(), asked });
        } else if instance.state == InstanceState::Terminating {
            if instance.kill_ms.is_some_and(|at| now >= at) {
                actions.push(Action::Kill { instance: id() });
            }
        } else if instance.running.is_none() {
            live.push(instance);
        } else if location.deleting {
            actions.push(stop(StopReason::Deleted));
        } else if instance.spent() {
            actions.push(stop(StopReason::ProcessesEnded));
        } else if instance.late_to_register(now, deadlines) {
            actions.push(stop(StopReason::RegisterTimeout));
        } else if instance.state == InstanceState::Draining {
            draining.push(instance);
        } else if location.not_viable.contains(&instance.instance_type) {
            actions.push(Action::Drain { instance: id() });
            draining.push(instance);
        } else {
            live.push(instance);
        }
    }
    if location.deleting {
        return actions;
    }
    let desired = location.desired as usize;
    let protect_held = location.protect_held_servers;
    // Replacements first: a draining instance goes only once enough others are ready to stand in for it.
    if live.iter().filter(|i| i.ready()).count() >= desired {
        for instance in draining.iter().filter(|i| !i.protected(protect_held)) {
            actions.push(Action::Stop {
                instance: instance.id.clone(),
                why: StopReason::Drained,
            });
        }
    }
    if live.len() > desired {
        // Not yet ready first (no gameplay, no warm server lost), then idle, then the least busy; the newest first
        // among equals, as the least likely to host anything long-lived.
        let mut candidates: Vec<_> = live.iter().filter(|i| !i.protected(protect_held)).collect();
        candidates.sort_by_key(|i| (i.ready(), i.busy(), std::cmp::Reverse(i.launch_ms), i.id.clone()));
        for instance in candidates.into_iter().take(live.len() - desired) {
            actions.push(Action::Stop {
                instance: instance.id.clone(),
                why: StopReason::ScaleIn,
            });
        }
    } else if live.len() < desired
        && may_launch(location)
        && let Some(instance_type) = location.launch_type
    {
        actions.push(Action::Launch {
            count: (desired - live.len()) as u32,
            instance_type: instance_type.to_owned(),
        });
    }
    if let Some(message) = deployment_failure(location) {
        actions.push(Action::Unhealthy { message });
    }
    actions
}

fn may_launch(location: &LocationView<'_>) -> bool {
    !matches!(location.status, LocationStatus::Unhealthy | LocationStatus::Deleting)
        && location.now_ms >= location.launch_after_ms
}

/// Why a DEPLOYING location has failed, if it has: no server registered within the first-heartbeat timeout of its
/// first launch, or none became ready within the ready timeout (a ready server makes it DEPLOYED).
fn deployment_failure(location: &LocationView<'_>) -> Option<String> {
    let first = location.first_launch_ms?;
    if location.status != LocationStatus::Deploying {
        return None;
    }
    let deadlines = &location.deadlines;
    let since = location.now_ms - first;
    let heard = location.registered_ms.is_some_and(|at| at >= first);
    if !heard && since >= deadlines.first_heartbeat_ms {
        return Some(format!(
            "no server sent a heartbeat within {} s of the first launch",
            deadlines.first_heartbeat_ms / 1000
        ));
    }
    if since >= deadlines.location_ready_ms {
        return Some(format!(
            "no server became ready within {} s of the first launch",
            deadlines.location_ready_ms / 1000
        ));
    }
    None
}

#[cfg(test)]
mod tests;
