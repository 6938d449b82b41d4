//! Berth's only state lives in Redis; this crate is the one way the services reach it.
//!
//! It hides whether Redis is a single node or a cluster ([`Store`]), names every key ([`keys`]), runs the Lua
//! functions that make each state change atomic ([`scripts`]), and turns Redis failures into gRPC statuses that a
//! client can act on ([`StoreError`]). The typed calls of each data area live in their own module with the Lua they
//! call, each using only the areas before it, in Rust and in Lua alike: [`fleets`] (with the live counts every
//! area keeps), then the [`pool`] of game servers, then [`processes`], then [`sessions`], then the [`endings`] of
//! processes (which end their sessions), then the [`instances`] that provisioners run, the reads of
//! [`utilization`], the placement [`queues`] and [`scaling`] policies.

pub mod allocations;
mod codec;
mod connection;
pub mod endings;
mod error;
pub mod fleets;
mod info;
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
pub use connection::{Durability, RedisConfig, RedisMode, Store};
pub use error::StoreError;
pub use pubsub::Subscription;

/// The store's areas in their order: each may use only those before it, and its helpers load after theirs.
pub(crate) const AREAS: [&scripts::Area; 10] = [
    &scripts::KERNEL,
    &fleets::LUA,
    &pool::LUA,
    &processes::LUA,
    &sessions::LUA,
    &endings::LUA,
    &instances::LUA,
    &utilization::LUA,
    &queues::LUA,
    &scaling::LUA,
];

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The kernel's modules: every other area is one module of its name.
    const KERNEL: [&str; 7] = ["codec", "connection", "error", "info", "keys", "pubsub", "scripts"];

    /// Every area's modules, the kernel's first.
    fn modules() -> impl Iterator<Item = &'static str> {
        let areas = crate::AREAS
            .iter()
            .map(|area| area.name)
            .filter(|name| *name != "kernel");
        KERNEL.into_iter().chain(areas)
    }

    /// The place of a module's area in [`crate::AREAS`].
    fn layer(module: &str) -> usize {
        if KERNEL.contains(&module) {
            return 0;
        }
        crate::AREAS
            .iter()
            .position(|area| area.name == module)
            .unwrap_or_else(|| panic!("module {module} belongs to no area"))
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
        for module in modules() {
            let text = sources(module);
            for used in modules() {
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
