//! The scenarios `berth-bench` can run, one module each. A scenario gets the running stack and the settings and
//! answers with [`Findings`]; the stack, the driver, the floors and the report are shared, so a new scenario
//! (heartbeats, player sessions) is a module and a variant here.

mod claim;

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
}

impl Scenario {
    /// Its name on the command line.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|value| value.get_name().to_owned())
            .unwrap_or_default()
    }

    /// Runs it.
    pub async fn run(self, stack: &Stack, args: &Args) -> Result<Findings, Failure> {
        match self {
            Scenario::Claim => claim::run(stack, args).await,
        }
    }
}
