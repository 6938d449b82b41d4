//! What the agent knows of its server beyond Berth's record: the Agones-only state (the hosted game session's
//! annotations, Ready and Reserve answered, Shutdown asked, the players connected), the last health ping, and a
//! version that rises with every change, which WatchGameServer follows.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::watch;

/// The agent-side state of the server, shared by the SDK calls and the event loop.
pub struct View {
    state: Mutex<AgentState>,
    version: watch::Sender<u64>,
}

/// The agent-side state as of one moment.
#[derive(Clone, Default)]
pub struct AgentState {
    /// Annotations of the game session the server hosts (empty when none).
    pub session: BTreeMap<String, String>,
    /// Ready was answered OK (heartbeats report it a moment later).
    pub ready: bool,
    /// Reserve was answered OK for a while, which Ready ends.
    pub reserved: bool,
    /// Shutdown was asked, or Berth told the process to end.
    pub shutdown: bool,
    /// When Berth told the process to end, seconds since the Unix epoch.
    pub ending_since: i64,
    /// When the last health ping came; None before the first.
    pub last_ping: Option<Instant>,
    /// Players connected (PlayerConnect), in the order they connected.
    pub players: Vec<Player>,
    /// Most players that may be connected (SetPlayerCapacity; the process's max_players at first).
    pub capacity: i64,
}

/// A connected player.
#[derive(Clone)]
pub struct Player {
    /// The player's id.
    pub id: String,
    /// The game session and player session it was accepted into, when it held a reservation.
    pub session: Option<(String, String)>,
}

/// The locks guard plain values that every writer leaves consistent, so a panic elsewhere while one was held does
/// not make them unusable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl View {
    /// A view of a server that starts able to take `capacity` players.
    pub fn new(capacity: i64) -> View {
        View {
            state: Mutex::new(AgentState {
                capacity,
                ..AgentState::default()
            }),
            version: watch::channel(1).0,
        }
    }

    /// The state now, with its version.
    pub fn snapshot(&self) -> (AgentState, u64) {
        let state = lock(&self.state).clone();
        (state, *self.version.borrow())
    }

    /// Reads the state without copying it: for a field or two, as the health check at every heartbeat asks.
    pub fn read<R>(&self, look: impl FnOnce(&AgentState) -> R) -> R {
        look(&lock(&self.state))
    }

    /// Changes the state and tells the watchers.
    pub fn change(&self, apply: impl FnOnce(&mut AgentState)) {
        apply(&mut lock(&self.state));
        self.touch();
    }

    /// Tells the watchers that the server changed (in Berth's record, or here).
    pub fn touch(&self) {
        self.version.send_modify(|version| *version += 1);
    }

    /// Records a health ping; no watcher is told (pings change nothing they see).
    pub fn ping(&self) {
        lock(&self.state).last_ping = Some(Instant::now());
    }

    /// A receiver that wakes at every change.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}
