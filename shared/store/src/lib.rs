//! Berth's only state lives in Redis; this crate is the one way the services reach it.
//!
//! It hides whether Redis is a single node or a cluster ([`Store`]), names every key ([`keys`]), runs the Lua
//! scripts that make each state change atomic ([`scripts`]), and turns Redis failures into gRPC statuses that a
//! client can act on ([`StoreError`]). The typed calls of each domain area live in their own module.

mod connection;
mod error;
pub mod game_servers;
pub mod keys;
pub mod processes;
mod pubsub;
pub mod scripts;
pub mod sessions;

pub use connection::{RedisConfig, RedisMode, Store};
pub use error::StoreError;
pub use pubsub::Subscription;
