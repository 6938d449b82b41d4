//! The key schema. Every key of a fleet carries the hash tag `{f:<fleet id>}`, so all of a fleet's keys sit in
//! one cluster slot and any script over them runs unchanged on a Redis Cluster. Fleet ids may not contain
//! braces (validation allows only `[A-Za-z0-9_.-]`), so the tag is always the whole id.
//!
//! Scripts that pick a server as they go (a claim takes whichever is first in the pool) build that server's key
//! from a prefix instead of receiving it in KEYS. Redis Cluster allows this because the key shares the declared
//! keys' slot; proxies that route by declared keys alone (some managed offerings) do not, and are not supported.

/// Set of the fleets that have registered game servers, for sweeps that visit every fleet. It has a slot of its
/// own and is only ever added to beside a fleet's script, never inside one.
pub const FLEETS: &str = "berth:fleets";

/// The channel on which the health replica `replica` hears that one of its streams has a command waiting. It
/// carries its own hash tag, so on a cluster it is a sharded channel served by one node.
pub fn push_channel(replica: &str) -> String {
    format!("berth:{{r:{replica}}}:push")
}

/// The keys of one fleet.
#[derive(Clone, Debug)]
pub struct FleetKeys {
    tag: String,
}

impl FleetKeys {
    /// Keys of `fleet_id`.
    pub fn new(fleet_id: &str) -> FleetKeys {
        FleetKeys {
            tag: format!("berth:{{f:{fleet_id}}}"),
        }
    }

    /// Hash of one game server (fields are listed in `pool/lib.lua`).
    pub fn game_server(&self, game_server_id: &str) -> String {
        format!("{}{game_server_id}", self.game_server_prefix())
    }

    /// What precedes a game-server id in its hash's key, for scripts that find servers as they go.
    pub fn game_server_prefix(&self) -> String {
        format!("{}:gs:", self.tag)
    }

    /// Sorted set of claimable servers: the pool.
    pub fn pool(&self) -> String {
        format!("{}:pool", self.tag)
    }

    /// Sorted set of claimed servers, scored by when the claim lapses (ms).
    pub fn claims(&self) -> String {
        format!("{}:claims", self.tag)
    }

    /// Sorted set of every registered server id (all scored 0, so it pages in id order).
    pub fn game_servers(&self) -> String {
        format!("{}:servers", self.tag)
    }

    /// Set of the server ids on one instance.
    pub fn instance(&self, instance_id: &str) -> String {
        format!("{}{instance_id}", self.instance_prefix())
    }

    /// What precedes an instance id in its set's key.
    pub fn instance_prefix(&self) -> String {
        format!("{}:inst:", self.tag)
    }

    /// Sorted set of SDK processes by when their next heartbeat is due (ms).
    pub fn heartbeat_deadlines(&self) -> String {
        format!("{}:hb", self.tag)
    }

    /// Sorted set of SDK processes not yet ready, by when ready is due (ms).
    pub fn ready_deadlines(&self) -> String {
        format!("{}:ready", self.tag)
    }

    /// Sorted set of terminating SDK processes, by when ProcessEnding is due (ms).
    pub fn termination_deadlines(&self) -> String {
        format!("{}:term", self.tag)
    }

    /// Set of SDK processes now reporting UNHEALTHY.
    pub fn unhealthy(&self) -> String {
        format!("{}:unhealthy", self.tag)
    }

    /// Stream of the fleet's events (process crashed, terminated unhealthy, force terminated, …).
    pub fn events(&self) -> String {
        format!("{}:events", self.tag)
    }

    /// Stream of the fleet's session events (see `sessions/lib.lua`).
    pub fn session_events(&self) -> String {
        format!("{}:sevents", self.tag)
    }

    /// Position of the last session event trimmed.
    pub fn session_events_gone(&self) -> String {
        format!("{}:sevents-gone", self.tag)
    }

    /// Search index `index` (created, players, max or free) of the ACTIVE sessions of `location` ('*': every one).
    pub fn search_index(&self, location: &str, index: &str) -> String {
        format!("{}:idx:{location}:{index}", self.tag)
    }

    /// What precedes a game-session id in its hash's key.
    pub fn game_session_prefix(&self) -> String {
        format!("{}:gsess:", self.tag)
    }

    /// Hash of instance id → instance status, for instances not ACTIVE.
    pub fn instance_statuses(&self) -> String {
        format!("{}:inst-status", self.tag)
    }
}
