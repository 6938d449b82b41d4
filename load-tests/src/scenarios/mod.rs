//! The scenarios `berth-bench` can run, one module each. A scenario gets the running stack and the settings and
//! answers with [`Findings`]; the stack, the driver, the floors and the report are shared, so a new scenario
//! (player sessions, …) is a module and a variant here.

mod agones;
mod claim;
mod fleets;
mod heartbeats;
mod placements;
mod sessions;
mod soak;
mod storm;

use clap::ValueEnum;
use serde::Serialize;

use crate::Failure;
use crate::args::Args;
use crate::report::Findings;
use crate::stack::Stack;

/// A scenario.
#[derive(Clone, Copy, Debug, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Register a fleet through gRPC, then claim every server concurrently (FleetIQ's ClaimGameServer).
    Claim,
    /// Connect SDK processes to one health replica (a process of its own) and stream heartbeats: rate, ack
    /// latency, service memory per server, and how soon a silenced server is declared lost.
    Heartbeats,
    /// Create game sessions and player sessions through the session service, accept the players, and search
    /// 100,000 ACTIVE game sessions: rates, latency, and Redis memory per game session and per player session.
    Sessions,
    /// Read GetFleetUtilization of a fleet of 20 servers and of one of `--servers` over four locations: the live
    /// counts cost the same whatever the fleet's size.
    Fleet,
    /// Start game session placements through five queues onto SDK processes that activate what they are given,
    /// and time each from its start to its FULFILLED event: the rate sustained, and latency at a fixed offered
    /// rate, beside the direct claim.
    Placements,
    /// Agones' faces: Allocate beside ClaimGameServer, berth-agent's memory and CPU per ping and SetLabel beside a
    /// native heartbeat, and the time from a placed session to WatchGameServer showing Allocated.
    Agones,
    /// Attach SDK processes to one health replica, SIGKILL it, and time their resumes on a second: how long until
    /// every one is back, the survivor's peak CPU and memory, and that none is declared lost for its replica's death.
    Storm,
    /// Mixed traffic through two replicas of every service for `--minutes`, while replicas are SIGKILLed and Redis
    /// restarted and paused; then the invariants checked against every answer and against Redis.
    Soak,
}

impl Scenario {
    /// Its name on the command line.
    pub fn name(self) -> String {
        crate::args::flag_name(&self)
    }

    /// The HTTP/2 connections it opens per service: `--connections`, or more when the scenario needs them.
    pub fn connections(self, args: &Args) -> u16 {
        match self {
            Scenario::Claim
            | Scenario::Sessions
            | Scenario::Fleet
            | Scenario::Placements
            | Scenario::Agones
            | Scenario::Soak => args.connections,
            Scenario::Heartbeats | Scenario::Storm => crate::sdk_stream::connections(args.servers, args.connections),
        }
    }

    /// Runs it.
    pub async fn run(self, stack: &Stack, args: &Args) -> Result<Findings, Failure> {
        match self {
            Scenario::Claim => claim::run(stack, args).await,
            Scenario::Heartbeats => heartbeats::run(stack, args).await,
            Scenario::Sessions => sessions::run(stack, args).await,
            Scenario::Fleet => fleets::run(stack, args).await,
            Scenario::Placements => placements::run(stack, args).await,
            Scenario::Agones => agones::run(stack, args).await,
            Scenario::Storm => storm::run(stack, args).await,
            Scenario::Soak => soak::run(stack, args).await,
        }
    }
}
