//! The streams this replica holds, by process, so that an announcement or a heartbeat's result reaches the task
//! serving that process's stream. A process that reconnects replaces its old entry; the old task's removal then
//! leaves the new one in place.

use std::collections::HashMap;
use std::collections::hash_map::Entry as Slot;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use berth_runtime::sync::lock;
use berth_store::processes::{Desired, HeartbeatSettings};
use tokio::sync::mpsc;

/// What a stream's task is told from outside the stream.
#[derive(Debug)]
pub(crate) enum Command {
    /// The process's desired state reached this version: push what is new, in the span given.
    Announce(u64, tracing::Span),
    /// The process's desired state reached this one, carried whole: push what is new, in the span given.
    State(Box<Desired>, tracing::Span),
    /// A heartbeat was recorded while the process is behind its desired state: ack it with the whole state.
    Behind {
        request_id: String,
        sequence: u64,
        version: u64,
    },
    /// A heartbeat found the process declared lost: tell it what it missed and end the stream.
    Lost,
    /// A stream with this attach number resumed the registration: a stream with a lower one ends with ABORTED.
    Superseded(u64),
    /// The process's record was changed from outside its stream (a claim, an allocation): tell it.
    Changed,
    /// A heartbeat found the fleet's heartbeat settings other than the process was told: tell it these.
    HeartbeatSettings(HeartbeatSettings),
}

/// Fleet id and game-server id, joined with a NUL (which ids cannot contain).
fn key(fleet_id: &str, game_server_id: &str) -> String {
    format!("{fleet_id}\0{game_server_id}")
}

struct Entry {
    generation: u64,
    /// The stream's attach number: a higher one supersedes it.
    attach: u64,
    commands: mpsc::Sender<Command>,
}

/// The registry.
#[derive(Default)]
pub(crate) struct Streams {
    entries: Mutex<HashMap<String, Entry>>,
    generations: AtomicU64,
}

impl Streams {
    /// Records the stream of a process, attached as number `attach`; returns its generation, for
    /// [`Streams::remove`]. Of two streams of a process held here, the one attached later stays and the other is
    /// told it was superseded, whichever of them came here first.
    pub(crate) fn insert(
        &self,
        fleet_id: &str,
        game_server_id: &str,
        attach: u64,
        commands: mpsc::Sender<Command>,
    ) -> u64 {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let mut entries = lock(&self.entries);
        let entry = Entry {
            generation,
            attach,
            commands,
        };
        let superseded = match entries.entry(key(fleet_id, game_server_id)) {
            Slot::Occupied(held) if held.get().attach > attach => Some((entry.commands, held.get().attach)),
            Slot::Occupied(mut held) => {
                let old = std::mem::replace(held.get_mut(), entry);
                Some((old.commands, attach))
            }
            Slot::Vacant(vacant) => {
                vacant.insert(entry);
                None
            }
        };
        drop(entries);
        if let Some((commands, by)) = superseded {
            let _ = commands.try_send(Command::Superseded(by));
        }
        crate::metrics::sdk_streams(1.0);
        generation
    }

    /// Forgets a stream, unless a newer one of the same process replaced it.
    pub(crate) fn remove(&self, fleet_id: &str, game_server_id: &str, generation: u64) {
        let mut entries = lock(&self.entries);
        let key = key(fleet_id, game_server_id);
        if entries.get(&key).is_some_and(|entry| entry.generation == generation) {
            entries.remove(&key);
        }
        crate::metrics::sdk_streams(-1.0);
    }

    /// Tells the process's stream task, if this replica holds it. A full queue drops the command: announcements
    /// are repeated by the next heartbeat's ack, so none is lost for long.
    pub(crate) fn tell(&self, fleet_id: &str, game_server_id: &str, command: Command) -> bool {
        let entries = lock(&self.entries);
        match entries.get(&key(fleet_id, game_server_id)) {
            Some(entry) => entry.commands.try_send(command).is_ok(),
            None => false,
        }
    }
}
