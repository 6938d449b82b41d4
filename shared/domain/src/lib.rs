//! Berth's domain with no I/O: the records the services keep, the limits every request is checked against, and
//! the conversions between records and the v1 contracts. Everything here is plain Rust, testable without Redis.

pub mod agones;
pub mod allocation;
pub mod fleet;
pub mod game_server;
pub mod game_session;
pub mod page_token;
pub mod placement;
pub mod process;
pub mod queue;
pub mod scaling;
pub mod search;
pub mod stored;
pub mod validate;
pub mod watch;
