//! The Lua of the store as one Redis Functions library. Each function is a `.lua` file beside the Rust that calls
//! it, compiled into the binary with the helpers they share, loaded once (`FUNCTION LOAD`) on every primary at
//! start-up and again by the store itself whenever Redis answers that a function is missing (after a restart, a
//! failover or on a new node), and called with FCALL, or FCALL_RO when it only reads. The library's name carries a
//! digest of its source, so that replicas of two releases side by side during a rolling upgrade each call their
//! own functions. Redis 7 is needed.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use berth_domain::page_token::digest;
use redis::{Cmd, ToRedisArgs};

use crate::keys::{CAPACITY_CHANNEL, FLEET_KEYS, FleetKeys, search_layout};
use crate::{Store, StoreError};

/// Every script of the store.
pub struct Scripts {
    /// Creates a fleet with its locations.
    pub create_fleet: LuaScript,
    /// Adds locations to a fleet.
    pub add_fleet_locations: LuaScript,
    /// Writes a change of a fleet's configuration made at a known revision.
    pub write_fleet: LuaScript,
    /// Changes a location's capacity.
    pub update_fleet_capacity: LuaScript,
    /// Registers a game server as AVAILABLE.
    pub register_game_server: LuaScript,
    /// Updates a game server's utilization, health or data.
    pub update_game_server: LuaScript,
    /// Removes a game server.
    pub deregister_game_server: LuaScript,
    /// Reads one game server and Redis' clock.
    pub describe_game_server: LuaScript,
    /// Reads a page of a fleet's game servers.
    pub list_game_servers: LuaScript,
    /// Sets an instance's status and its servers' places in the pool.
    pub set_instance_status: LuaScript,
    /// Claims one game server.
    pub claim_game_server: LuaScript,
    /// Allocates one game server by selector (Agones' allocation API).
    pub allocate_game_server: LuaScript,
    /// Hands lapsed claims back to the pool.
    pub expire_claims: LuaScript,
    /// Registers or resumes an SDK process.
    pub attach_process: LuaScript,
    /// Unlinks a process whose stream closed.
    pub detach_process: LuaScript,
    /// Marks a process ready.
    pub process_ready: LuaScript,
    /// Records a batch of heartbeats.
    pub heartbeats: LuaScript,
    /// Declares late processes lost.
    pub sweep_processes: LuaScript,
    /// Tells a process to end.
    pub terminate_process: LuaScript,
    /// Ends a process on its own ProcessEnding.
    pub process_ending: LuaScript,
    /// Reserves a process (Agones Reserve), or ends its reservation.
    pub reserve_process: LuaScript,
    /// Reads a process's desired state.
    pub desired_state: LuaScript,
    /// Creates a game session on a process.
    pub create_game_session: LuaScript,
    /// Activates a game session.
    pub activate_game_session: LuaScript,
    /// Changes a game session.
    pub update_game_session: LuaScript,
    /// Ends a game session on request.
    pub terminate_game_session: LuaScript,
    /// Ends a game session on its server's word.
    pub end_game_session: LuaScript,
    /// Reserves player sessions.
    pub create_player_sessions: LuaScript,
    /// Lets a player in.
    pub accept_player_session: LuaScript,
    /// Lets a player go.
    pub remove_player_session: LuaScript,
    /// Times out, forces and expires sessions.
    pub sweep_sessions: LuaScript,
    /// Deletes a fleet: DELETING, its processes told to terminate.
    pub delete_fleet: LuaScript,
    /// Removes locations from a fleet: DELETING, their processes told to terminate.
    pub delete_fleet_locations: LuaScript,
    /// Removes DELETING locations and turns a DELETING fleet TERMINATED where no process is left.
    pub finish_fleet_deletion: LuaScript,
    /// Reads sessions by id.
    pub read_sessions: LuaScript,
    /// Reads a page of a session listing.
    pub page_sessions: LuaScript,
    /// Reads a chunk of a search index.
    pub search_sessions: LuaScript,
    /// Reads a fleet's session events with its node's clock.
    pub read_events: LuaScript,
    /// Reads the fleets with their node's clock.
    pub fleets_now: LuaScript,
    /// Reads a fleet's events with its node's clock and its last event trimmed.
    pub poll_fleet_events: LuaScript,
    /// Takes, renews or gives up a location reconciler's lease.
    pub take_lease: LuaScript,
    /// Reads a location's instances and what their servers do.
    pub read_instances: LuaScript,
    /// Records an instance before its launch.
    pub record_launch: LuaScript,
    /// Records what a launch gave.
    pub record_launched: LuaScript,
    /// Drains an instance.
    pub drain_instance: LuaScript,
    /// Stops an instance.
    pub stop_instance: LuaScript,
    /// Forgets an instance nothing of which runs.
    pub remove_instance: LuaScript,
    /// Records the kill of a stopping instance.
    pub kill_instance: LuaScript,
    /// Records that the provisioner could not stop an instance.
    pub instance_stop_failed: LuaScript,
    /// Marks a location UNHEALTHY.
    pub location_unhealthy: LuaScript,
    /// Reads the live counts of a fleet's locations.
    pub read_utilization: LuaScript,
    /// Hands back a claim whose caller gave up.
    pub release_claim: LuaScript,
    /// Looks up or gives up a placement's attempt in a fleet.
    pub placement_attempt: LuaScript,
    /// Creates a queue.
    pub create_queue: LuaScript,
    /// Writes a queue's configuration changed at a known revision.
    pub write_queue: LuaScript,
    /// Deletes a queue.
    pub delete_queue: LuaScript,
    /// Lets go of a placement id held for a request that did not start.
    pub release_placement_id: LuaScript,
    /// Starts a placement.
    pub start_placement: LuaScript,
    /// Records a placement's next attempt.
    pub record_attempt: LuaScript,
    /// Ends a PENDING placement.
    pub finish_placement: LuaScript,
    /// Removes a placement's request from its stream.
    pub placement_done: LuaScript,
    /// Touches the requests a worker still holds.
    pub touch_requests: LuaScript,
    /// Trims a queue's events.
    pub sweep_queue: LuaScript,
    /// Reads a queue's metrics.
    pub queue_metrics: LuaScript,
    /// Reads the queues with their node's clock.
    pub queues_now: LuaScript,
    /// Reads a placement with its node's clock.
    pub read_placement: LuaScript,
    /// Lists a queue's PENDING placements, a page at a time.
    pub list_pending_placements: LuaScript,
    /// Reads a queue's placement events, each joined with its placement, with the node's clock.
    pub read_placement_events: LuaScript,
    /// Creates or replaces a scaling policy.
    pub put_scaling_policy: LuaScript,
    /// Deletes a scaling policy.
    pub delete_scaling_policy: LuaScript,
    /// Reads a fleet's scaling policies and a location's autoscaling state.
    pub read_scaling_policies: LuaScript,
    /// Records an autoscaling pass of a location.
    pub record_scaling_pass: LuaScript,
}

/// One function of the library.
pub struct LuaScript {
    name: String,
    read_only: bool,
    /// The fleet keys it declares, in the order it receives them.
    keys: Vec<&'static str>,
}

impl LuaScript {
    /// Starts a call: add keys and arguments, then hand it to [`Store::invoke`].
    pub fn prepare(&self) -> FunctionCall<'_> {
        FunctionCall {
            function: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// Starts a call of a function over one fleet with the fleet's keys it declares; add its arguments.
    pub(crate) fn for_fleet(&self, fleet: &FleetKeys) -> FunctionCall<'_> {
        let mut call = self.prepare();
        for name in &self.keys {
            call.key(fleet.named(name));
        }
        call
    }
}

/// A call of one function, its keys and arguments gathered in any order.
pub struct FunctionCall<'a> {
    function: &'a LuaScript,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl FunctionCall<'_> {
    /// Adds a key.
    pub fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Adds an argument.
    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// The FCALL (FCALL_RO for a function that only reads) that runs it.
    pub(crate) fn command(&self) -> Cmd {
        let mut cmd = redis::cmd(if self.function.read_only { "FCALL_RO" } else { "FCALL" });
        cmd.arg(&self.function.name)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }
}

/// The library: its name, which carries a digest of its source, and the source to load.
pub(crate) struct Library {
    pub(crate) name: String,
    pub(crate) source: String,
}

/// One area's Lua: its helpers, which its own functions and those of the areas above it may call, and its
/// functions: (its field in [`Scripts`], its body, which sees its keys and arguments as KEYS and ARGV, whether it
/// only reads). Each area of the store lists its own (`LUA` in its module); the crate lists the areas in their
/// order ([`crate::AREAS`]), which is the order their helpers load in.
pub(crate) struct Area {
    pub(crate) name: &'static str,
    pub(crate) helpers: &'static [&'static str],
    pub(crate) functions: &'static [(&'static str, &'static str, bool)],
}

/// The kernel's Lua: how a function reaches its fleet's keys, Redis's clock, replies and event trimming.
pub(crate) const KERNEL: Area = Area {
    name: "kernel",
    helpers: &[include_str!("keys.lua")],
    functions: &[],
};

/// Every function of the library, area by area.
fn functions() -> impl Iterator<Item = &'static (&'static str, &'static str, bool)> {
    crate::AREAS.iter().flat_map(|area| area.functions.iter())
}

/// The helpers as the library holds them: area by area, each area's headed by its name.
fn helpers_source() -> String {
    crate::AREAS
        .iter()
        .filter(|area| !area.helpers.is_empty())
        .map(|area| format!("-- The {} area.\n{}", area.name, area.helpers.join("\n")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fleet keys a function declares at its top, `-- KEYS: k.pool, k.claims.` (the list may go on over the next
/// comment lines, and ends with the sentence); none for a function that names its own KEYS.
fn declared_keys(source: &str) -> Vec<&'static str> {
    let Some(start) = source.find("-- KEYS: k.") else {
        return Vec::new();
    };
    let list = &source[start + "-- KEYS: ".len()..];
    let end = [". ", ".\n"]
        .iter()
        .filter_map(|stop| list.find(stop))
        .min()
        .expect("a KEYS declaration ends with its sentence");
    list[..end]
        .split(',')
        .map(|name| {
            let name = name.trim().trim_start_matches("--").trim();
            let name = name.strip_prefix("k.").expect("every declared key is k.<name>");
            FLEET_KEYS
                .iter()
                .find(|(known, suffix)| *known == name && !suffix.ends_with(':'))
                .map(|(known, _)| *known)
                .unwrap_or_else(|| panic!("k.{name} is not a fixed key of FLEET_KEYS"))
        })
        .collect()
}

/// KEY, the suffix of every fleet key by name, as `keys.lua` reads it.
fn key_table() -> String {
    let entries: Vec<String> = FLEET_KEYS
        .iter()
        .map(|(name, suffix)| format!("{name} = '{suffix}'"))
        .collect();
    format!(
        "local KEY = {{{}}}\nlocal CAPACITY_CHANNEL = '{CAPACITY_CHANNEL}'\n",
        entries.join(", ")
    )
}

/// S, every stored state by name (`S.STANDING_BY`), from the domain's enums, so that the Lua spells no state of its
/// own. (A library cannot set a metatable while it loads; the test beside this checks every `S.<NAME>` instead.)
fn state_table() -> String {
    let names: BTreeSet<&str> = berth_domain::stored::stored_names().into_iter().collect();
    let entries: Vec<String> = names.iter().map(|name| format!("{name} = '{name}'")).collect();
    format!("local S = {{{}}}\n", entries.join(", "))
}

/// The rule of where a session goes, as the Lua reads it (`berth_domain::allocation`): the process states that take
/// a session, each instance status's tier in the pool and how many tiers there are, the pool's tier span, and how
/// many candidates are looked at.
fn allocation_table() -> String {
    use berth_domain::allocation::{CANDIDATES_BATCH, CANDIDATES_LOOKED, HOSTING_STATES, TIER_SPAN, tier};
    use berth_domain::game_server::RESERVATION;
    use berth_domain::stored::InstanceStatus;
    let hosting: Vec<String> = HOSTING_STATES
        .iter()
        .map(|state| format!("{} = true", state.as_str()))
        .collect();
    let tiers: Vec<String> = InstanceStatus::ALL
        .iter()
        .filter_map(|status| Some(format!("{} = {}", status.as_str(), tier(*status)?)))
        .collect();
    format!(
        "local HOSTING_STATE = {{{}}}\nlocal TIER, TIERS = {{{}}}, {}\nlocal TIER_SPAN = {TIER_SPAN}\n\
         local CANDIDATES_LOOKED, CANDIDATES_BATCH = {CANDIDATES_LOOKED}, {CANDIDATES_BATCH}\n\
         local RESERVATION = '{RESERVATION}'\n",
        hosting.join(", "),
        tiers.join(", "),
        tiers.len()
    )
}

static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let mut body = key_table();
    body.push_str(&state_table());
    body.push_str(&allocation_table());
    body.push_str(&search_layout());
    body.push_str(&crate::keys::counts::counts_layout());
    body.push_str(&helpers_source());
    for &(field, source, read_only) in functions() {
        let flags = if read_only { "{'no-writes'}" } else { "{}" };
        let names: Vec<String> = declared_keys(source).iter().map(|name| format!("'{name}'")).collect();
        // Prefixed, so that no function shadows a helper of the same name (end_game_session calls one), and in a
        // block of its own, so that it holds none of the chunk's 200 locals. The counts it moved are written once it
        // returns (flush_counts).
        body.push_str(&format!(
            "\ndo\nlocal function fn_{field}(KEYS, ARGV)\nlocal k = fleet_keys(KEYS, {{{}}})\n{source}\nend\n\
             redis.register_function{{function_name = NAME .. '_{field}', flags = {flags}, \
             callback = function(KEYS, ARGV)\nlocal out = fn_{field}(KEYS, ARGV)\nflush_counts()\nreturn out\nend}}\n\
             end\n",
            names.join(", ")
        ));
    }
    // A digest stable across builds and replicas: the same name on every replica of a release, another for any
    // change to the Lua.
    let name = format!("berth_{}", digest(&[body.as_bytes()]));
    Library {
        source: format!("#!lua name={name}\nlocal NAME = '{name}'\n{body}"),
        name,
    }
});

/// The library as this release defines it.
pub(crate) fn library() -> &'static Library {
    &LIBRARY
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let function = |field: &str| {
        let (_, source, read_only) = functions()
            .find(|(name, _, _)| *name == field)
            .expect("every script is a function of the library");
        LuaScript {
            name: format!("{}_{field}", library().name),
            read_only: *read_only,
            keys: declared_keys(source),
        }
    };
    Scripts {
        create_fleet: function("create_fleet"),
        add_fleet_locations: function("add_fleet_locations"),
        write_fleet: function("write_fleet"),
        update_fleet_capacity: function("update_fleet_capacity"),
        register_game_server: function("register_game_server"),
        update_game_server: function("update_game_server"),
        deregister_game_server: function("deregister_game_server"),
        describe_game_server: function("describe_game_server"),
        list_game_servers: function("list_game_servers"),
        set_instance_status: function("set_instance_status"),
        claim_game_server: function("claim_game_server"),
        allocate_game_server: function("allocate_game_server"),
        expire_claims: function("expire_claims"),
        attach_process: function("attach_process"),
        detach_process: function("detach_process"),
        process_ready: function("process_ready"),
        reserve_process: function("reserve_process"),
        heartbeats: function("heartbeats"),
        sweep_processes: function("sweep_processes"),
        terminate_process: function("terminate_process"),
        process_ending: function("process_ending"),
        desired_state: function("desired_state"),
        create_game_session: function("create_game_session"),
        activate_game_session: function("activate_game_session"),
        update_game_session: function("update_game_session"),
        terminate_game_session: function("terminate_game_session"),
        end_game_session: function("end_game_session"),
        create_player_sessions: function("create_player_sessions"),
        accept_player_session: function("accept_player_session"),
        remove_player_session: function("remove_player_session"),
        sweep_sessions: function("sweep_sessions"),
        read_sessions: function("read_sessions"),
        page_sessions: function("page_sessions"),
        search_sessions: function("search_sessions"),
        read_events: function("read_events"),
        delete_fleet: function("delete_fleet"),
        delete_fleet_locations: function("delete_fleet_locations"),
        finish_fleet_deletion: function("finish_fleet_deletion"),
        fleets_now: function("fleets_now"),
        poll_fleet_events: function("poll_fleet_events"),
        take_lease: function("take_lease"),
        read_instances: function("read_instances"),
        record_launch: function("record_launch"),
        record_launched: function("record_launched"),
        drain_instance: function("drain_instance"),
        stop_instance: function("stop_instance"),
        remove_instance: function("remove_instance"),
        kill_instance: function("kill_instance"),
        instance_stop_failed: function("instance_stop_failed"),
        location_unhealthy: function("location_unhealthy"),
        read_utilization: function("read_utilization"),
        release_claim: function("release_claim"),
        placement_attempt: function("placement_attempt"),
        create_queue: function("create_queue"),
        write_queue: function("write_queue"),
        delete_queue: function("delete_queue"),
        release_placement_id: function("release_placement_id"),
        start_placement: function("start_placement"),
        record_attempt: function("record_attempt"),
        finish_placement: function("finish_placement"),
        placement_done: function("placement_done"),
        touch_requests: function("touch_requests"),
        sweep_queue: function("sweep_queue"),
        queue_metrics: function("queue_metrics"),
        queues_now: function("queues_now"),
        read_placement: function("read_placement"),
        list_pending_placements: function("list_pending_placements"),
        read_placement_events: function("read_placement_events"),
        put_scaling_policy: function("put_scaling_policy"),
        delete_scaling_policy: function("delete_scaling_policy"),
        read_scaling_policies: function("read_scaling_policies"),
        record_scaling_pass: function("record_scaling_pass"),
    }
});

/// The scripts.
pub fn scripts() -> &'static Scripts {
    &SCRIPTS
}

/// Loads the library into Redis (on a cluster, into every primary), replacing one of the same name.
pub async fn preload(store: &Store) -> Result<(), StoreError> {
    store.load_library().await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every helper of the library, in the order they load.
    fn helpers() -> impl Iterator<Item = &'static &'static str> {
        crate::AREAS.iter().flat_map(|area| area.helpers.iter())
    }

    /// The names of the helpers `sources` define (`local function name(`).
    fn defined(sources: &[&str]) -> Vec<String> {
        sources
            .iter()
            .flat_map(|source| {
                format!("\n{}", code_of(source))
                    .split("\nlocal function ")
                    .skip(1)
                    .filter_map(|rest| rest.split_once('(').map(|(name, _)| name.trim().to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Each call from an area's Lua (its helpers and functions) to a helper of an area after it, as a sentence.
    fn up_calls(areas: &[&Area]) -> Vec<String> {
        let mut found = Vec::new();
        for (at, area) in areas.iter().enumerate() {
            let code = area
                .helpers
                .iter()
                .chain(area.functions.iter().map(|(_, source, _)| source))
                .map(|source| code_of(source))
                .collect::<Vec<_>>()
                .join("\n");
            for above in &areas[at + 1..] {
                for helper in defined(above.helpers) {
                    if calls(&code, &helper) {
                        found.push(format!(
                            "the {} area's Lua calls {helper}, a helper of the {} area above it",
                            area.name, above.name
                        ));
                    }
                }
            }
        }
        found
    }

    #[test]
    fn lua_calls_go_only_to_the_areas_below() {
        assert_eq!(up_calls(&crate::AREAS), Vec::<String>::new());
    }

    #[test]
    fn a_lua_call_up_a_layer_is_found() {
        let below = Area {
            name: "low",
            helpers: &["-- Helps.\nlocal function low_help(k)\n  return high_help(k)\nend\n"],
            functions: &[(
                "f",
                "-- high_help(k) in a comment is no call.\nreturn low_help(k)",
                true,
            )],
        };
        let above = Area {
            name: "high",
            helpers: &["local function high_help(k)\n  return 1\nend\n"],
            functions: &[("g", "return low_help(k) + high_help(k)", true)],
        };
        assert_eq!(
            up_calls(&[&below, &above]),
            ["the low area's Lua calls high_help, a helper of the high area above it"]
        );
    }

    /// Where `name` is called in `code` (not as a field or a longer name's end).
    fn calls(code: &str, name: &str) -> bool {
        code.match_indices(&format!("{name}(")).any(|(at, _)| {
            !code[..at]
                .chars()
                .next_back()
                .is_some_and(|before| before.is_alphanumeric() || before == '_' || before == '.')
        })
    }

    /// The names after `k.` in `code`.
    fn reached(code: &str) -> BTreeSet<&str> {
        code.match_indices("k.")
            .filter(|(at, _)| {
                !code[..*at]
                    .chars()
                    .next_back()
                    .is_some_and(|before| before.is_alphanumeric() || before == '_')
            })
            .map(|(at, _)| {
                let rest = &code[at + 2..];
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .collect()
    }

    /// `code` without its comments.
    fn code_of(source: &str) -> String {
        source
            .lines()
            .map(|line| line.split("--").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The fixed fleet keys a function reaches, itself or through the helpers it calls.
    #[test]
    fn every_function_declares_exactly_the_fleet_keys_it_reaches() {
        let helpers: Vec<(String, String)> = helpers()
            .flat_map(|file| {
                code_of(file)
                    .split("\nlocal function ")
                    .skip(1)
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .map(|helper| {
                let (name, body) = helper.split_once('(').expect("a helper has a parameter list");
                (name.to_owned(), body.to_owned())
            })
            .collect();
        let fixed: BTreeSet<&str> = FLEET_KEYS
            .iter()
            .filter(|(_, suffix)| !suffix.ends_with(':'))
            .map(|(name, _)| *name)
            .collect();
        for &(field, source, _) in functions() {
            let mut code = code_of(source);
            let mut seen = BTreeSet::new();
            while let Some((name, body)) = helpers
                .iter()
                .find(|(name, _)| !seen.contains(name.as_str()) && calls(&code, name))
            {
                seen.insert(name.as_str());
                code.push_str(body);
            }
            let reached: BTreeSet<&str> = reached(&code).intersection(&fixed).copied().collect();
            let declared: BTreeSet<&str> = declared_keys(source).into_iter().collect();
            assert_eq!(
                declared, reached,
                "{field} declares the keys on the left and reaches those on the right"
            );
        }
    }

    /// The Redis commands and arguments the functions spell in capitals.
    const REDIS_WORDS: &[&str] = &[
        "BITFIELD",
        "COUNT",
        "CREATE",
        "DEL",
        "EXISTS",
        "DESC",
        "GET",
        "HDEL",
        "HEXISTS",
        "HGET",
        "HGETALL",
        "HINCRBY",
        "HLEN",
        "HMGET",
        "HSET",
        "HSETNX",
        "HVALS",
        "INCRBY",
        "LIMIT",
        "LT",
        "MKSTREAM",
        "MAXLEN",
        "MINID",
        "NX",
        "PERSIST",
        "PEXPIRE",
        "PTTL",
        "PUBLISH",
        "PX",
        "SADD",
        "SCARD",
        "SET",
        "SMEMBERS",
        "SREM",
        "TIME",
        "WITHSCORES",
        "XACK",
        "XADD",
        "XCLAIM",
        "XDEL",
        "XGROUP",
        "JUSTID",
        "KEEPTTL",
        "XLEN",
        "XPENDING",
        "XRANGE",
        "XREVRANGE",
        "XTRIM",
        "XX",
        "ZADD",
        "ZCARD",
        "ZRANGE",
        "ZRANGEBYLEX",
        "ZRANGEBYSCORE",
        "ZREM",
        "ZREMRANGEBYSCORE",
        "ZREVRANGEBYSCORE",
        "ZSCORE",
    ];

    /// The outcome words of the functions' replies and the modes their callers pass, which the Rust beside each
    /// function decodes or sends; states are not among them, they come from the domain's enums.
    const REPLY_WORDS: &[&str] = &[
        "ABOVE_SERVER",
        "ALLOCATED",
        "ACCEPTED",
        "ADDED",
        "ABANDON",
        "ABANDONED",
        "ACTIVATED",
        "BELOW_COUNT",
        "BUSY",
        "CHANGED",
        "CLAIM",
        "CLAIMED",
        "CONFLICT",
        "CREATED",
        "CREATOR_LIMIT",
        "DELETED",
        "DENY_ALL",
        "DEREGISTERED",
        "ENDED",
        "EXHAUSTED",
        "EXISTING",
        "EXISTS",
        "LAUNCH_FAILED",
        "FENCED",
        "FINISHED",
        "FORCE",
        "FOUND",
        "FULL",
        "HOME",
        "GONE",
        "HAS_PENDING",
        "HELD",
        "KILLED",
        "LAPSED",
        "LAUNCHED",
        "LIVE",
        "LOOK",
        "NOT_ACTIVE",
        "NOT_CLAIMANT",
        "NOT_FOUND",
        "NOT_YOURS",
        "NO_FLEET",
        "NO_LOCATION",
        "NO_SERVER",
        "OUT_OF_ORDER",
        "PLAYER_CONFLICT",
        "PUT",
        "READY",
        "RECORDED",
        "RELEASE",
        "RELEASED",
        "REGISTERED",
        "REJECT",
        "REMOVED",
        "RESUMED",
        "REVISION",
        "SCALED",
        "SDK_PROCESS",
        "STALE",
        "STOPPING",
        "HELD_ELSEWHERE",
        "TAKEN_BY",
        "TOKEN_REUSED",
        "TOO_SMALL",
        "TOO_MANY_COUNTERS",
        "TOO_MANY_LABELS",
        "VALUE_EXISTS",
        "OUT_OF_RANGE",
        "NO_VALUE",
        "NO_LIST",
        "NO_COUNTER",
        "TOO_MANY_LISTS",
        "TOO_MANY_ANNOTATIONS",
        "TOO_MANY",
        "TOO_MANY_PROPERTIES",
        "UNCHANGED",
        "UNKNOWN",
        "UPDATED",
        "WAITING",
        "WRITTEN",
        "WRONG_STATE",
    ];

    /// The quoted words in capitals (`'STANDING_BY'`) of a Lua source.
    fn capital_literals(source: &str) -> Vec<&str> {
        source
            .split('\'')
            .skip(1)
            .step_by(2)
            .filter(|word| {
                word.starts_with(|c: char| c.is_ascii_uppercase())
                    && word
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            })
            .collect()
    }

    /// The states a Lua source reads from S (`S.STANDING_BY`).
    fn state_references(source: &str) -> Vec<&str> {
        source
            .match_indices("S.")
            .filter(|(at, _)| !source[..*at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .map(|(at, _)| {
                let name = &source[at + 2..];
                &name[..name
                    .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                    .unwrap_or(name.len())]
            })
            .collect()
    }

    #[test]
    fn every_state_a_function_names_comes_from_the_domain() {
        let states = berth_domain::stored::stored_names();
        let sources = helpers().chain(functions().map(|(_, source, _)| source));
        for source in sources {
            let code = code_of(source);
            for word in capital_literals(&code) {
                assert!(
                    !states.contains(&word),
                    "'{word}' is a state: the Lua reads it as S.{word}"
                );
                assert!(
                    REDIS_WORDS.contains(&word) || REPLY_WORDS.contains(&word),
                    "'{word}' is neither a Redis word nor a reply word"
                );
            }
            for name in state_references(&code) {
                assert!(
                    states.contains(&name),
                    "S.{name} is not a state of berth_domain::stored"
                );
            }
        }
        assert_eq!(
            capital_literals("if s == 'STANDNG_BY' then return 'x' end"),
            ["STANDNG_BY"]
        );
        assert_eq!(
            state_references("if s == S.STANDNG_BY then return KS.X, S.LOST end"),
            ["STANDNG_BY", "LOST"]
        );
    }

    #[test]
    fn a_declaration_may_go_on_over_comment_lines() {
        let source = "-- Does it.\n-- KEYS: k.pool, k.claims,\n-- k.hb. ARGV[1] an id.\nreturn 1";
        assert_eq!(declared_keys(source), ["pool", "claims", "hb"]);
        assert!(declared_keys("-- KEYS[1] the pool.\nreturn 1").is_empty());
    }
}
