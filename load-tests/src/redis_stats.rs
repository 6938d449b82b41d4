//! What Redis reports of the work it has done, read from INFO on every node (a cluster's client asks every master):
//! commands by name with their calls and time (`commandstats`, which counts the commands a function runs as well as
//! the function call itself) and the memory in use. Counts do not swing with the machine's load as rates do, so a
//! scenario states what an operation costs Redis as the difference of two readings divided by the operations done.

use std::collections::BTreeMap;

use berth_store::{RedisMode, Store};
use berth_testkit::scan_page;

use crate::Failure;

/// One reading: each command's calls and microseconds so far, summed over the nodes, and the memory in use.
#[derive(Clone, Debug, Default)]
pub struct RedisStats {
    /// Command name (lower case, as INFO names it: `fcall`, `hset`, …) → (calls, µs).
    pub commands: BTreeMap<String, (f64, f64)>,
    pub used_memory: f64,
}

impl RedisStats {
    pub async fn read(store: &Store) -> Result<RedisStats, Failure> {
        let mut commands: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for line in store.info("commandstats").await? {
            let Some((name, stats)) = line.strip_prefix("cmdstat_").and_then(|rest| rest.split_once(':')) else {
                continue;
            };
            let stat = |field: &str| {
                stats
                    .split(',')
                    .find_map(|stat| stat.strip_prefix(field)?.strip_prefix('=')?.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            let entry = commands.entry(name.to_owned()).or_default();
            entry.0 += stat("calls");
            entry.1 += stat("usec");
        }
        Ok(RedisStats {
            commands,
            used_memory: used_memory(store).await? as f64,
        })
    }

    /// What was done from `before` to this reading, less the commands of `background` (what Redis did meanwhile
    /// for others, already scaled to the same span), per one of `operations`; memory is what grew meanwhile.
    pub fn per(&self, before: &RedisStats, background: &RedisStats, operations: u64) -> RedisStats {
        let n = operations.max(1) as f64;
        let mut commands = BTreeMap::new();
        for (name, (calls, usec)) in &self.commands {
            let (was_calls, was_usec) = before.commands.get(name).copied().unwrap_or_default();
            let (bg_calls, bg_usec) = background.commands.get(name).copied().unwrap_or_default();
            let calls = (calls - was_calls - bg_calls) / n;
            let usec = (usec - was_usec - bg_usec) / n;
            if calls > 0.0 {
                commands.insert(name.clone(), (calls, usec));
            }
        }
        RedisStats {
            commands,
            used_memory: (self.used_memory - before.used_memory) / n,
        }
    }

    /// The commands run from `before` to this reading, scaled by `share` (the span to compare with over the span
    /// read).
    pub fn since(&self, before: &RedisStats, share: f64) -> RedisStats {
        let commands = self
            .commands
            .iter()
            .map(|(name, (calls, usec))| {
                let (was_calls, was_usec) = before.commands.get(name).copied().unwrap_or_default();
                (name.clone(), ((calls - was_calls) * share, (usec - was_usec) * share))
            })
            .collect();
        RedisStats {
            commands,
            used_memory: 0.0,
        }
    }

    /// Commands run, those inside functions included (the function calls themselves are not commands of the
    /// operation's own but its round trips, counted apart).
    pub fn commands_run(&self) -> f64 {
        self.commands
            .iter()
            .filter(|(name, _)| !is_function_call(name))
            .map(|(_, (calls, _))| calls)
            .sum()
    }

    /// Calls of the library's functions (FCALL, FCALL_RO).
    pub fn function_calls(&self) -> f64 {
        self.commands
            .iter()
            .filter(|(name, _)| is_function_call(name))
            .map(|(_, (calls, _))| calls)
            .sum()
    }

    /// Microseconds in the library's functions: their own time, the commands they run included, without reading
    /// requests and writing replies.
    pub fn function_micros(&self) -> f64 {
        self.commands
            .iter()
            .filter(|(name, _)| is_function_call(name))
            .map(|(_, (_, usec))| usec)
            .sum()
    }

    /// Calls of `name`.
    pub fn calls(&self, name: &str) -> f64 {
        self.commands.get(name).map_or(0.0, |(calls, _)| *calls)
    }

    /// The `most` commands run most, with their calls, most first.
    pub fn busiest(&self, most: usize) -> Vec<(String, f64)> {
        let mut run: Vec<(String, f64)> = self
            .commands
            .iter()
            .filter(|(name, _)| !is_function_call(name))
            .map(|(name, (calls, _))| (name.to_uppercase(), *calls))
            .collect();
        run.sort_by(|a, b| b.1.total_cmp(&a.1));
        run.truncate(most);
        run
    }
}

fn is_function_call(name: &str) -> bool {
    matches!(name, "fcall" | "fcall_ro")
}

/// Keys looked at per round trip when memory is counted by kind.
const KEYS_PER_READ: usize = 500;

/// Bytes held by each kind of key (see [`kind`]) of those matching `pattern` (a SCAN pattern, `*` for all), and how
/// many keys of it there are: every key's `MEMORY USAGE` (exact, every element counted). A single node only: `None`
/// on a cluster, whose keys a SCAN of one connection does not reach.
pub async fn memory_by_kind(store: &Store, pattern: &str) -> Result<Option<BTreeMap<String, (f64, f64)>>, Failure> {
    if store.mode() == RedisMode::Cluster {
        return Ok(None);
    }
    let mut kinds: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let mut cursor = 0_u64;
    loop {
        let (next, keys) = scan_page(store, cursor, pattern, KEYS_PER_READ).await?;
        // A page of a SCAN with a pattern is often empty, and Redis refuses an empty pipeline.
        if !keys.is_empty() {
            let mut usage = redis::pipe();
            for key in &keys {
                usage.cmd("MEMORY").arg("USAGE").arg(key).arg("SAMPLES").arg(0);
            }
            let bytes: Vec<Option<u64>> = store.query_pipeline(&usage).await?;
            for (key, bytes) in keys.iter().zip(bytes) {
                let entry = kinds.entry(kind(key)).or_default();
                entry.0 += 1.0;
                entry.1 += bytes.unwrap_or(0) as f64;
            }
        }
        if next == 0 {
            return Ok(Some(kinds));
        }
        cursor = next;
    }
}

/// The kind of a key: what follows its hash tag, with a record's id left out (`gsess:*`, `gsess:*:ps`, `sevents`,
/// `pl:*`, `id`).
fn kind(key: &str) -> String {
    let rest = key.find("}:").map_or(key, |at| &key[at + 2..]);
    let parts: Vec<&str> = rest.split(':').collect();
    match parts.as_slice() {
        [fixed] => (*fixed).to_owned(),
        [record, _] => format!("{record}:*"),
        [record, .., last] => format!("{record}:*:{last}"),
        [] => String::new(),
    }
}

/// Redis's `used_memory` (INFO memory), summed over every node.
pub async fn used_memory(store: &Store) -> Result<u64, Failure> {
    let sizes: Vec<u64> = store
        .info("memory")
        .await?
        .iter()
        .filter_map(|line| line.strip_prefix("used_memory:"))
        .filter_map(|value| value.parse().ok())
        .collect();
    if sizes.is_empty() {
        return Err("INFO memory answered no used_memory".into());
    }
    Ok(sizes.iter().sum())
}
