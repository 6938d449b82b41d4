//! Berth's only state lives in Redis; this crate is the one way the services reach it.
//!
//! It hides whether Redis is a single node or a cluster ([`Store`]), names every key ([`keys`]), runs the Lua
//! functions that make each state change atomic ([`scripts`]), and turns Redis failures into gRPC statuses that a
//! client can act on ([`StoreError`]). The typed calls of each data area live in their own module, each using only
//! the areas before it: [`fleets`], then the [`pool`] of game servers, then [`processes`], then [`sessions`], then
//! the [`instances`] that provisioners run, and the live counts of [`utilization`] that all of them keep.

mod codec;
mod connection;
mod error;
pub mod fleets;
pub mod instances;
pub mod keys;
pub mod pool;
pub mod processes;
mod pubsub;
pub mod queues;
pub mod scaling;
pub mod scripts;
pub mod sessions;
pub mod utilization;

pub use codec::{EventsRead, parse_position};
pub use connection::{RedisConfig, RedisMode, Store};
pub use error::StoreError;
pub use pubsub::Subscription;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The store's areas, each allowed to use only those before it: the kernel first, then the fleet registry, the
    /// pool of game servers, processes, sessions, instances, and utilization.
    const LAYERS: [&[&str]; 9] = [
        &["codec", "connection", "error", "keys", "pubsub", "scripts"],
        &["fleets"],
        &["pool"],
        &["processes"],
        &["sessions"],
        &["instances"],
        &["utilization"],
        &["queues"],
        &["scaling"],
    ];

    fn layer(module: &str) -> usize {
        LAYERS
            .iter()
            .position(|modules| modules.contains(&module))
            .unwrap_or_else(|| panic!("module {module} belongs to no layer"))
    }

    /// The Rust source of a top-level module: its file and the files of its submodules.
    fn sources(module: &str) -> String {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut text = std::fs::read_to_string(src.join(format!("{module}.rs"))).unwrap();
        if let Ok(entries) = std::fs::read_dir(src.join(module)) {
            for entry in entries.flatten() {
                if entry.path().extension().is_some_and(|ext| ext == "rs") {
                    text.push_str(&std::fs::read_to_string(entry.path()).unwrap());
                }
            }
        }
        text
    }

    #[test]
    fn areas_depend_only_on_the_areas_below_them() {
        for module in LAYERS.iter().flat_map(|modules| modules.iter()) {
            let text = sources(module);
            for used in LAYERS.iter().flat_map(|modules| modules.iter()) {
                let named = text.contains(&format!("crate::{used}::"))
                    || text.contains(&format!("crate::{used};"))
                    || text.contains(&format!("crate::{{{used}"))
                    || text.contains(&format!("use crate::{used}"));
                if named && used != module {
                    assert!(
                        layer(used) <= layer(module),
                        "{module} uses {used}, an area above it: moves across areas go downwards only"
                    );
                }
            }
        }
    }
}
