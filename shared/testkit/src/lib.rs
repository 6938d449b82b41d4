//! The test harness: throwaway `redis-server` processes (one node, or a 3-master Redis Cluster) on free ports,
//! killed when the test ends even on panic, Berth services served in-process on ephemeral ports, and Berth's own
//! binaries as real processes for tests that kill them.

mod binary;
mod expiry;
mod fleets;
mod launched;
mod ports;
mod process;
mod raw_call;
pub mod recount;
mod redis_server;
mod scan;
mod service;
mod sessions;

pub use binary::{BinaryProcess, ExampleGameServer, binary};
pub use expiry::keys_without_expiry;
pub use fleets::{anywhere_fleet, anywhere_fleet_with, fast_settings, process_events, set_fleet_settings};
pub use launched::Reaper;
pub use ports::free_port;
pub use process::{assert_serves, health_within, wait_for_health};
pub use raw_call::unary_without_timer;
pub use redis_server::{RedisCluster, RedisServer, TestRedis};
pub use scan::scan_page;
pub use service::{RunningService, TEST_KEY, game_server_config, spawn_service, spawn_service_at, token};
pub use sessions::{SESSION_TIMINGS, game_session_status, place_game_session};
