//! berth-agent: the Agones game-server SDK on Berth. A game server written against any of Agones' official SDKs
//! talks to the agent on loopback exactly as it would to Agones' SDK sidecar; the agent holds the Berth SDK stream
//! to the health service for it and maps each call onto Berth (see the mapping in the README). The binary wraps one
//! game-server process: it starts the child with the ports in its environment, reports the child's exit at once,
//! and passes termination on to it.

mod agent;
pub mod args;
pub mod child;
mod counters;
mod events;
mod http;
mod link;
mod players;
pub mod record;
mod sdk;
mod view;

pub use agent::{Agent, AgentError};
