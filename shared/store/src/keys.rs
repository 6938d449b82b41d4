//! The key schema. Every key of a fleet carries the hash tag `{f:<fleet id>}`, so all of a fleet's keys sit in
//! one cluster slot and any script over them runs unchanged on a Redis Cluster. Fleet ids may not contain
//! braces (validation allows only `[A-Za-z0-9_.-]`), so the tag is always the whole id.
//!
//! Scripts that pick a server as they go (a claim takes whichever is first in the pool) build that server's key
//! from a prefix instead of receiving it in KEYS. Redis Cluster allows this because the key shares the declared
//! keys' slot; proxies that route by declared keys alone (some managed offerings) do not, and are not supported.

pub mod counts;

use berth_domain::search::IndexedOperand;

/// Set of the fleets that have a record, for sweeps that visit every fleet; one leaves it once nothing of it is left
/// (`fleets::forget`). It has a slot of its own and is only ever changed beside a fleet's script, never inside one.
pub const FLEETS: &str = "berth:fleets";

/// Sorted set of every queue's name (all scored 0, so in name order), for listing. It has a slot of its own and is
/// only ever changed beside a queue's script, never inside one.
pub const QUEUES: &str = "berth:queues";

/// The channel on which a new queue is announced (its name), so that every placement replica starts working it at
/// once rather than at its next listing of the queues. It carries its own hash tag, so on a cluster it is a sharded
/// channel served by one node.
pub const QUEUES_CHANNEL: &str = "berth:{queues}:created";

/// Sorted set of the names of deleted queues whose requests stream still holds entries (all scored 0), so that
/// workers finish what they hold of them. It has a slot of its own, like [`QUEUES`].
pub const DRAINING_QUEUES: &str = "berth:queues-draining";

/// The keys of one queue and its placements. Each queue has a hash slot of its own (`{q:<name>}`; queue names hold
/// no braces); its scripts receive its fixed keys in the order `queues/lib.lua` reads them.
#[derive(Clone, Debug)]
pub struct QueueKeys {
    tag: String,
}

impl QueueKeys {
    /// Keys of queue `name`.
    pub fn new(name: &str) -> QueueKeys {
        QueueKeys {
            tag: format!("berth:{{q:{name}}}"),
        }
    }

    /// The queue's record.
    pub fn record(&self) -> String {
        format!("{}:queue", self.tag)
    }

    /// Its fixed keys, in the order its scripts receive them: record, PENDING placements, requests stream, events
    /// stream, position of the last event trimmed.
    pub fn fixed(&self) -> [String; 5] {
        [
            self.record(),
            format!("{}:pending", self.tag),
            self.requests(),
            self.events(),
            self.events_gone(),
        ]
    }

    /// Stream of placements for the workers to take.
    pub fn requests(&self) -> String {
        format!("{}:requests", self.tag)
    }

    /// Stream of the queue's placement events.
    pub fn events(&self) -> String {
        format!("{}:events", self.tag)
    }

    /// Position of the last placement event trimmed.
    pub fn events_gone(&self) -> String {
        format!("{}:events-gone", self.tag)
    }
}

/// Who holds placement id `placement_id` (its queue and the digest of its request), in a slot of its own
/// (`{p:<id>}`), so that a placement is found from its id alone.
pub fn placement_id(placement_id: &str) -> String {
    format!("berth:{{p:{placement_id}}}:id")
}

/// The channel on which the health replica `replica` hears that one of its streams has a command waiting. It
/// carries its own hash tag, so on a cluster it is a sharded channel served by one node.
pub fn push_channel(replica: &str) -> String {
    format!("berth:{{r:{replica}}}:push")
}

/// The channel on which the placement replica `replica` hears that a game session one of its placements created
/// was activated. Like [`push_channel`], a sharded channel on a cluster.
pub fn placed_channel(replica: &str) -> String {
    format!("berth:{{r:{replica}}}:placed")
}

/// The channel on which a location announces that it has a server for a placement that found none there (see
/// `place` in `pool/lib.lua`). Plain pub/sub even on a cluster, where a script's PUBLISH reaches every node: the
/// scripts that free a server run in the fleet's slot, not the channel's. The payload is `<fleet id>\n<location>`.
pub const CAPACITY_CHANNEL: &str = "berth:capacity";

/// Every key of a fleet: the name its Lua reads it by (`k.<name>`, see `scripts.rs`) and what follows the fleet's
/// tag. A suffix ending in ':' starts the keys of a kind of record, each followed by its record's id; the others are
/// the fleet's fixed keys, which a function declares at its top (`-- KEYS: k.pool, …`) and receives in KEYS.
pub(crate) const FLEET_KEYS: [(&str, &str); 48] = [
    // The fleet (fleets/lib.lua): its record, and its event stream, which every area appends to.
    ("fleet", ":fleet"),
    ("events", ":events"),
    // Instances its reconcilers run (instances/lib.lua): each one's record, each location's instances, and each
    // location's reconciler lease.
    ("vm", ":vm:"),
    ("vms", ":vms:"),
    ("lease", ":lease:"),
    // Live counts (fleets/tally.lua): each location's (its counts string, keys/counts.rs, and its hash of what an
    // earlier release counted with the location's settings), and each instance's.
    ("counts", ":counts:"),
    ("tally", ":tally:"),
    ("itally", ":itally:"),
    // Game servers (pool/lib.lua, processes/lib.lua): each one's hash, all by id, the claimable, the claimed by when
    // their claim lapses, the UTILIZED by when they became so, each instance's server ids, and the instances not
    // ACTIVE.
    ("gs", ":gs:"),
    ("servers", ":servers"),
    ("pool", ":pool"),
    // Each location's mirror of the pool and of the hosting processes (pool/lib.lua), so that a session asked for in
    // a location is found among that location's servers however many the fleet has elsewhere.
    ("lpool", ":lpool:"),
    ("lhosting", ":lhosting:"),
    // Each location's placements waiting for a server there, by when the mark lapses unless renewed, and since when
    // each has waited (sessions/create.lua): the demand the autoscaler reads.
    ("wanting", ":wanting:"),
    ("wanted", ":wanted:"),
    // The locations where each waiting placement is marked so, until its deadline: the attempt that places it
    // clears those marks and no others.
    ("waits", ":waits:"),
    ("claims", ":claims"),
    // Each claim made under a caller's idempotency token: the server and claim it made, while the claim lasts.
    ("ctok", ":ctok:"),
    ("utilized", ":utilized"),
    ("inst", ":inst:"),
    ("inst_status", ":inst-status"),
    // SDK processes: deadlines of their next heartbeat, of ready and of ProcessEnding (ms), those reporting
    // UNHEALTHY, and those hosting sessions with room for another.
    ("hb", ":hb"),
    ("ready", ":ready"),
    ("term", ":term"),
    ("unhealthy", ":unhealthy"),
    ("hosting", ":hosting"),
    // Each health replica's heartbeat writer for the fleet (endings/heartbeats.lua): replica id → '<since ms>,<last
    // ms>', since when it has written every heartbeat it received on time and when it last wrote; the sweep reads it
    // before it calls a process whose stream that replica holds silent.
    ("writers", ":writers"),
    // Sessions (sessions/lib.lua): game sessions and their player sessions, ended game sessions, the fleet's player
    // sessions by player (and each player's, as an earlier release listed them), idempotency tokens, a creator's
    // sessions, the search index of each location (and the four per location that an earlier release kept, which
    // the sweep moves into it), the fleet's sessions, the sessions by their next deadline of activation or
    // reservation (and the two sets an earlier release kept them in apart, which the sweep drains), by forced
    // termination, ended sessions by expiry, the session event stream and its last trimmed position.
    ("gsess", ":gsess:"),
    // An earlier release's player sessions, one hash each: adopted into their game session's hash when it is
    // first read (sessions/lib.lua: adopt_players).
    ("psess", ":psess:"),
    ("gend", ":gend:"),
    ("player", ":player:"),
    ("players", ":players"),
    ("idem", ":idem:"),
    ("creator", ":creator:"),
    ("idx", ":idx:"),
    ("search", ":search:"),
    ("sessions", ":sessions"),
    ("due", ":due"),
    ("act_due", ":act_due"),
    ("res_due", ":res_due"),
    ("term_due", ":term_due"),
    ("ended", ":ended"),
    ("sevents", ":sevents"),
    ("sevents_gone", ":sevents-gone"),
    // Autoscaling (scaling/*.lua): the scaling policies' names, each policy, each policy's evaluations by location,
    // and each location's autoscaling state.
    ("policies", ":policies"),
    ("policy", ":policy:"),
    ("peval", ":peval:"),
    ("scale", ":scale:"),
];

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

    /// The key `name` of [`FLEET_KEYS`] (for a kind of record, the start of its keys).
    pub(crate) fn named(&self, name: &str) -> String {
        let (_, suffix) = FLEET_KEYS
            .iter()
            .find(|(known, _)| *known == name)
            .unwrap_or_else(|| panic!("{name} is not a key of FLEET_KEYS"));
        [self.tag.as_str(), suffix].concat()
    }

    /// Hash of one game server (fields are listed in `pool/lib.lua`).
    pub fn game_server(&self, game_server_id: &str) -> String {
        format!("{}{game_server_id}", self.game_server_prefix())
    }

    /// What precedes a game-server id in its hash's key, for scripts that find servers as they go.
    pub fn game_server_prefix(&self) -> String {
        self.named("gs")
    }

    /// Sorted set of claimable servers: the pool.
    pub fn pool(&self) -> String {
        self.named("pool")
    }

    /// Sorted set of processes hosting sessions with a slot to spare, scored by when they last took one (ms).
    pub fn hosting(&self) -> String {
        self.named("hosting")
    }

    /// A location's mirror of the pool.
    pub fn location_pool(&self, location: &str) -> String {
        format!("{}{location}", self.named("lpool"))
    }

    /// A location's mirror of the hosting processes.
    pub fn location_hosting(&self, location: &str) -> String {
        format!("{}{location}", self.named("lhosting"))
    }

    /// Sorted set of claimed servers, scored by when the claim lapses (ms).
    pub fn claims(&self) -> String {
        self.named("claims")
    }

    /// Sorted set of UTILIZED servers, scored by when they became so (ms).
    pub fn utilized(&self) -> String {
        self.named("utilized")
    }

    /// Sorted set of every registered server id (all scored 0, so it pages in id order).
    pub fn game_servers(&self) -> String {
        self.named("servers")
    }

    /// Set of the server ids on one instance.
    pub fn instance(&self, instance_id: &str) -> String {
        format!("{}{instance_id}", self.named("inst"))
    }

    /// Hash of instance id → instance status, for instances not ACTIVE.
    pub fn instance_statuses(&self) -> String {
        self.named("inst_status")
    }

    /// Sorted set of SDK processes by when their next heartbeat is due (ms).
    pub fn heartbeat_deadlines(&self) -> String {
        self.named("hb")
    }

    /// Set of SDK processes now reporting UNHEALTHY.
    pub fn unhealthy(&self) -> String {
        self.named("unhealthy")
    }

    /// A location's reconciler lease, `<holder> <token>` while held (see `instances/lib.lua`).
    pub fn lease(&self, location: &str) -> String {
        format!("{}{location}", self.named("lease"))
    }

    /// The fleet's record (see `fleets/lib.lua`).
    pub fn fleet(&self) -> String {
        self.named("fleet")
    }

    /// Stream of the fleet's events (process crashed, terminated unhealthy, force terminated, …).
    pub fn events(&self) -> String {
        self.named("events")
    }

    /// Stream of the fleet's session events (see `sessions/lib.lua`).
    pub fn session_events(&self) -> String {
        self.named("sevents")
    }

    /// Position of the last session event trimmed.
    pub fn session_events_gone(&self) -> String {
        self.named("sevents_gone")
    }

    /// Hash of one game session.
    pub fn game_session(&self, game_session_id: &str) -> String {
        format!("{}{game_session_id}", self.named("gsess"))
    }

    /// Sorted set of the fleet's game session ids by creation (ms).
    pub fn game_sessions(&self) -> String {
        self.named("sessions")
    }

    /// Hash of one game session's player sessions, by number, as the release before kept them apart from its record
    /// (sessions/lib.lua: players_apart).
    pub fn players_of_session(&self, game_session_id: &str) -> String {
        format!("{}:p", self.game_session(game_session_id))
    }

    /// Sorted set of the fleet's player sessions by player, then creation (sessions/lib.lua: player_entry).
    pub fn players(&self) -> String {
        self.named("players")
    }

    /// The search index of the ACTIVE sessions of `location` (see `sessions::IndexScan`).
    pub fn search_index(&self, location: &str) -> String {
        format!("{}{location}", self.named("search"))
    }
}

/// The span of one order's scores in a location's search index. A location keeps one sorted set, in which a session
/// has a member per order (see [`member_prefix`]), scored the order's base (a multiple of this, see [`order_base`])
/// plus its value there: a creation time in ms (below 2^44 until the year 2527) or a count. So a session entering or
/// leaving the index is one write, and an order's range is a range of the set. sessions/lib.lua (index_session)
/// writes by this layout, given it by [`search_layout`]; `sessions::IndexScan` reads by it.
pub(crate) const SEARCH_SPAN: i64 = 1 << 44;

/// Where an order's scores start in a location's search index.
pub(crate) fn order_base(order: IndexedOperand) -> i64 {
    let place = match order {
        IndexedOperand::CreationTimeMillis => 0,
        IndexedOperand::PlayerSessionCount => 1,
        IndexedOperand::MaximumSessions => 2,
        IndexedOperand::AvailableSlots => 3,
    };
    place * SEARCH_SPAN
}

/// What a session's member in an order holds before its id. The creation order, which a search reads most (it is
/// the default sort, and the order of a search with no numeric bound), holds the bare id, so that reading it takes
/// no id apart; the others mark theirs with a prefix no id starts with ('#': ids start with their fleet's).
pub(crate) fn member_prefix(order: IndexedOperand) -> &'static str {
    match order {
        IndexedOperand::CreationTimeMillis => "",
        IndexedOperand::PlayerSessionCount => "#p",
        IndexedOperand::MaximumSessions => "#m",
        IndexedOperand::AvailableSlots => "#f",
    }
}

/// The layout of a search index as the Lua writes it: SEARCH_BASES and SEARCH_PREFIXES, each order's base and member
/// prefix, by the order's letter.
pub(crate) fn search_layout() -> String {
    let orders = [
        ('c', IndexedOperand::CreationTimeMillis),
        ('p', IndexedOperand::PlayerSessionCount),
        ('m', IndexedOperand::MaximumSessions),
        ('f', IndexedOperand::AvailableSlots),
    ];
    let bases = orders.map(|(letter, order)| format!("{letter} = {}", order_base(order)));
    let prefixes = orders.map(|(letter, order)| format!("{letter} = '{}'", member_prefix(order)));
    format!(
        "local SEARCH_BASES = {{{}}}\nlocal SEARCH_PREFIXES = {{{}}}\n",
        bases.join(", "),
        prefixes.join(", ")
    )
}
