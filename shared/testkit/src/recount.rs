//! A recount of a fleet's live counts from its raw records, for tests that check GetFleetUtilization.
//!
//! The Lua scripts keep each location's counts as states change (`fleets/tally.lua`) rather than count on read, so
//! a transition that tallies wrongly leaves a count silently wrong from then on. The only independent check is to
//! count again from the records themselves, with plain Redis commands and by the rules tally.lua's header states.
//! It lives here, not in one test, so that the fleet service's random-transition test and the load tests' soak
//! compare the same recount with what a read shows.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_domain::game_server::InstanceStatus;
use berth_domain::stored::{GameSessionStatus, InstanceState, ProcessHealth, ProcessState, Utilization};
use berth_store::Store;
use berth_store::keys::FleetKeys;
use berth_store::keys::counts::counts_in;
use berth_store::utilization::Tally;

/// Counts the player sessions of a game session (its hash, KEYS[1], holds them as p<n> beside its record's fields)
/// that hold a slot, from their statuses, and the seats of its players (l:<player id>): {holding, seated}.
const HOLDING_SLOTS: &str = "local holding, seated = 0, 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 2) == 'l:' then
    if fields[i + 1] ~= '' then seated = seated + 1 end
  elseif string.find(fields[i], '^p%d') then
    local status = cmsgpack.unpack(fields[i + 1])[3]
    if status == 'RESERVED' or status == 'ACTIVE' then holding = holding + 1 end
  end
end
return {holding, seated}";

/// The fields of a game session's record the recount counts by.
const SESSION_COUNTED: [&str; 6] = ["status", "loc", "inst", "max", "accept", "srv_end"];

/// A reply of Redis, as the recount reads it.
#[derive(Debug)]
pub enum Reply {
    Nil,
    Int(i64),
    Text(String),
    Array(Vec<Reply>),
}

impl Reply {
    pub fn text(self) -> Option<String> {
        match self {
            Reply::Text(text) => Some(text),
            Reply::Nil => None,
            other => panic!("expected a string, got {other:?}"),
        }
    }

    pub fn int(self) -> i64 {
        match self {
            Reply::Int(n) => n,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    fn items(self) -> Vec<Reply> {
        match self {
            Reply::Array(items) => items,
            other => panic!("expected an array, got {other:?}"),
        }
    }

    pub fn strings(self) -> Vec<String> {
        self.items()
            .into_iter()
            .map(|item| item.text().expect("no nil in the array"))
            .collect()
    }

    /// An HMGET's values, in the order asked.
    pub fn values<const N: usize>(self) -> [Option<String>; N] {
        let values: Vec<_> = self.items().into_iter().map(Reply::text).collect();
        values.try_into().expect("as many values as fields asked")
    }

    /// An HGETALL's fields by name (empty when the hash does not exist).
    pub fn hash(self) -> HashMap<String, String> {
        let flat = self.strings();
        flat.chunks_exact(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect()
    }

    /// A TIME's ms since the epoch, as the scripts compute theirs.
    pub fn ms(self) -> u64 {
        let [seconds, micros] = <[String; 2]>::try_from(self.strings()).expect("TIME answers two numbers");
        seconds.parse::<u64>().unwrap() * 1000 + micros.parse::<u64>().unwrap() / 1000
    }
}

/// A command's words, as [`Raw::pipeline`] takes them.
pub fn command(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

/// The recount's reads: plain commands over the store's connection (routed to the fleet's slot on a cluster),
/// apart from the scripts whose counts it checks.
pub struct Raw {
    store: Store,
}

impl Raw {
    pub fn new(store: &Store) -> Raw {
        Raw { store: store.clone() }
    }

    pub async fn one(&mut self, args: &[&str]) -> Reply {
        self.pipeline(&[command(args)]).await.remove(0)
    }

    /// Sends the commands at once and reads their replies in order.
    pub async fn pipeline(&mut self, commands: &[Vec<String>]) -> Vec<Reply> {
        if commands.is_empty() {
            return Vec::new();
        }
        let mut pipe = redis::pipe();
        for args in commands {
            let mut cmd = redis::cmd(&args[0]);
            cmd.arg(&args[1..]);
            pipe.add_command(cmd);
        }
        let replies: Vec<redis::Value> = self.store.query_pipeline(&pipe).await.unwrap();
        replies.into_iter().map(Reply::from).collect()
    }
}

impl From<redis::Value> for Reply {
    fn from(value: redis::Value) -> Reply {
        match value {
            redis::Value::Nil => Reply::Nil,
            redis::Value::Int(n) => Reply::Int(n),
            redis::Value::BulkString(bytes) => Reply::Text(String::from_utf8(bytes).unwrap()),
            redis::Value::SimpleString(text) => Reply::Text(text),
            redis::Value::Okay => Reply::Text("OK".into()),
            redis::Value::Array(items) => Reply::Array(items.into_iter().map(Reply::from).collect()),
            other => panic!("unexpected reply {other:?}"),
        }
    }
}

/// A location's numeric counts as Redis holds them, not clamped at 0 as a read shows them: each the field of the
/// location's tally hash (where an earlier release counted, and where `mca` is kept) plus its slot in the counts
/// string (`berth_store::keys::counts`).
pub async fn raw_counts(store: &Store, fleet_id: &str, loc: &str) -> BTreeMap<String, i64> {
    let hash: HashMap<String, String> = store
        .query(redis::cmd("HGETALL").arg(fleet_key(fleet_id, &format!("tally:{loc}"))))
        .await
        .unwrap();
    let slots: Option<Vec<u8>> = store
        .query(redis::cmd("GET").arg(fleet_key(fleet_id, &format!("counts:{loc}"))))
        .await
        .unwrap();
    let mut sums = BTreeMap::new();
    for (field, value) in hash.into_iter().chain(counts_in(&slots.unwrap_or_default())) {
        // Windows ('<minute>|<sums…>') are no counts.
        if let Ok(n) = value.parse::<i64>() {
            *sums.entry(field).or_default() += n;
        }
    }
    sums
}

/// The keys of `fleet_id` the recount reads that `FleetKeys` does not name publicly, spelled as keys.rs defines
/// them.
pub fn fleet_key(fleet_id: &str, suffix: &str) -> String {
    format!("berth:{{f:{fleet_id}}}:{suffix}")
}

/// An instance's share of its location's counts, gathered from its servers and sessions.
#[derive(Default)]
struct InstanceCounts {
    loc: Option<String>,
    servers: u64,
    ready: u64,
    busy: u64,
    /// Healthy free game-session slots.
    free: u64,
    activating: u64,
    draining: u64,
    spot: u64,
    /// Servers told to terminate (or on an interrupted instance).
    ending: u64,
}

/// Each location's counts, recounted from the raw records by the rules of tally.lua's header: `limit` is the
/// fleet's most concurrent activations per instance (0: none). The FleetIQ servers, which have no location, are
/// counted under '' and added to `home_location`, as a read does. The instances a reconciler recorded are read in
/// each of `locations`.
pub async fn recount(
    store: &Store,
    fleet_id: &str,
    home_location: &str,
    locations: &[&str],
    limit: u64,
) -> BTreeMap<String, Tally> {
    let raw = &mut Raw::new(store);
    let keys = FleetKeys::new(fleet_id);
    let mut counts: BTreeMap<String, Tally> = BTreeMap::new();
    let mut instances: BTreeMap<String, InstanceCounts> = BTreeMap::new();

    // Game servers: every one the fleet lists (a lost one leaves the list, and counts nowhere).
    let ids = raw.one(&["ZRANGE", &keys.game_servers(), "0", "-1"]).await.strings();
    let mut reads = Vec::new();
    for id in &ids {
        let key = keys.game_server(id);
        reads.push(command(&["HGETALL", &key]));
        reads.push(command(&["SCARD", &format!("{key}:sessions")]));
    }
    let mut replies = raw.pipeline(&reads).await.into_iter();
    for id in &ids {
        let server = replies.next().unwrap().hash();
        let open = replies.next().unwrap().int();
        let pstate = server.get("pstate").map(|state| ProcessState::parse(state).unwrap());
        if pstate == Some(ProcessState::Lost) {
            continue;
        }
        let field = |name: &str| server.get(name).map(String::as_str);
        let instance = field("instance").unwrap_or_else(|| panic!("server {id} is listed without its record"));
        let loc = field("loc").unwrap_or_default().to_owned();
        let istatus = InstanceStatus::parse(field("istatus").unwrap()).unwrap();
        let unhealthy = field("health") == Some(ProcessHealth::Unhealthy.as_str());
        // A claim holds a server until it lapses back (claim_exp_ms goes then), whether or not its time passed.
        let claimed = field("util") == Some(Utilization::Utilized.as_str()) || server.contains_key("claim_exp_ms");
        let of_instance = instances.entry(instance.to_owned()).or_default();
        let known = of_instance.loc.get_or_insert_with(|| loc.clone());
        assert_eq!(*known, loc, "the servers of instance {instance} are in one location");
        of_instance.servers += 1;
        of_instance.draining += u64::from(istatus == InstanceStatus::Draining);
        of_instance.spot += u64::from(istatus == InstanceStatus::SpotTerminating);
        let tally = counts.entry(loc).or_default();
        let mut free = 0;
        if pstate == Some(ProcessState::Initializing) {
            tally.launching += 1;
        } else if pstate == Some(ProcessState::Terminating) || istatus == InstanceStatus::SpotTerminating {
            tally.terminating += 1;
            of_instance.ending += 1;
        } else {
            let busy = claimed || pstate == Some(ProcessState::Active);
            if let (Some(max), false) = (field("max_sess"), claimed) {
                free = u64::try_from(max.parse::<i64>().unwrap() - open)
                    .unwrap_or_else(|_| panic!("server {id} hosts more sessions than it takes"));
            }
            of_instance.ready += 1;
            of_instance.busy += u64::from(busy);
            *match (istatus == InstanceStatus::Draining, busy) {
                (false, false) => &mut tally.available,
                (false, true) => &mut tally.utilized,
                (true, false) => &mut tally.draining_available,
                (true, true) => &mut tally.draining_utilized,
            } += 1;
        }
        if unhealthy {
            tally.unhealthy += 1;
            tally.unhealthy_slots += free;
        } else {
            tally.free_slots += free;
            of_instance.free += free;
        }
    }

    // Game sessions, with their player sessions holding a slot (RESERVED or ACTIVE), counted from their statuses in
    // the session's players hash (msgpack, which Redis' Lua reads), and their players' seats (l:<player id>), which
    // must agree.
    let sids = raw.one(&["ZRANGE", &keys.game_sessions(), "0", "-1"]).await.strings();
    let mut reads = Vec::new();
    for sid in &sids {
        // Its record's fields by name: its hash holds its players too, packed.
        let game = keys.game_session(sid);
        reads.push(command(&[&["HMGET", game.as_str()][..], &SESSION_COUNTED[..]].concat()));
        reads.push(command(&["EVAL", HOLDING_SLOTS, "1", &keys.game_session(sid)]));
    }
    let mut replies = raw.pipeline(&reads).await.into_iter();
    for sid in &sids {
        let game: HashMap<&str, String> = SESSION_COUNTED
            .iter()
            .zip(replies.next().unwrap().items())
            .filter_map(|(name, value)| match value {
                Reply::Text(text) => Some((*name, text)),
                _ => None,
            })
            .collect();
        let [holding, seated] = <[Reply; 2]>::try_from(replies.next().unwrap().items())
            .unwrap()
            .map(Reply::int);
        assert_eq!(
            holding, seated,
            "game session {sid}: {holding} player sessions hold a slot, {seated} players are seated"
        );
        let live = holding as u64;
        // An ended session is kept packed, with no hash: it counts nothing.
        let Some(status) = game.get("status") else {
            continue;
        };
        let tally = counts.entry(game["loc"].clone()).or_default();
        tally.player_sessions += live;
        match GameSessionStatus::parse(status).unwrap() {
            GameSessionStatus::Activating => {
                tally.activating_sessions += 1;
                instances.entry(game["inst"].clone()).or_default().activating += 1;
            }
            GameSessionStatus::Active => {
                tally.active_sessions += 1;
                let max: u64 = game["max"].parse().unwrap();
                let server_ending = game.get("srv_end").map(String::as_str) == Some("1");
                if game["accept"] == "1" && !server_ending && live < max {
                    tally.free_player_slots += max - live;
                }
            }
            _ => {}
        }
    }

    // Instances: those a reconciler recorded, and those servers run on.
    let mut vm_ids = BTreeSet::new();
    for loc in locations {
        vm_ids.extend(
            raw.one(&["ZRANGE", &fleet_key(fleet_id, &format!("vms:{loc}")), "0", "-1"])
                .await
                .strings(),
        );
    }
    let ids: Vec<String> = vm_ids.into_iter().chain(instances.keys().cloned()).collect();
    let reads: Vec<_> = ids
        .iter()
        .map(|id| command(&["HGETALL", &fleet_key(fleet_id, &format!("vm:{id}"))]))
        .collect();
    let vms: BTreeMap<String, HashMap<String, String>> = ids
        .iter()
        .cloned()
        .zip(raw.pipeline(&reads).await.into_iter().map(Reply::hash))
        .collect();
    let none = InstanceCounts::default();
    for (id, vm) in &vms {
        let counted = instances.get(id).unwrap_or(&none);
        if vm.is_empty() && counted.servers == 0 {
            continue;
        }
        let loc = vm.get("loc").or(counted.loc.as_ref()).unwrap().clone();
        let state = vm.get("state").map(|state| InstanceState::parse(state).unwrap());
        let tally = counts.entry(loc).or_default();
        let all_ending = counted.servers > 0 && counted.ending == counted.servers;
        if state == Some(InstanceState::Terminating) || counted.spot > 0 || all_ending {
            tally.terminating_instances += 1;
        } else if counted.ready > 0 {
            tally.active_instances += 1;
            tally.idle_instances += u64::from(counted.busy == 0);
            tally.draining_instances += u64::from(state == Some(InstanceState::Draining) || counted.draining > 0);
            // FleetIQ servers take no game sessions (no free slots), so the limit never matters for location ''.
            tally.activatable_sessions += match limit {
                0 => counted.free,
                limit => counted.free.min(limit.saturating_sub(counted.activating)),
            };
        } else {
            tally.pending_instances += 1;
        }
        if state.is_some() && state != Some(InstanceState::Terminating) {
            let servers = vm.get("servers").map(String::as_str).unwrap_or_default();
            let unregistered = servers
                .split_whitespace()
                .filter(|server| !vm.contains_key(&format!("r:{server}")))
                .count();
            tally.launching += unregistered as u64;
        }
    }

    if let Some(fleetiq) = counts.remove("") {
        counts.entry(home_location.to_owned()).or_default().add(&fleetiq);
    }
    counts
}

/// A tally's counts by name, to compare field by field.
pub fn fields(tally: &Tally) -> [(&'static str, u64); 20] {
    [
        ("desired_instances", tally.desired_instances),
        ("pending_instances", tally.pending_instances),
        ("active_instances", tally.active_instances),
        ("idle_instances", tally.idle_instances),
        ("draining_instances", tally.draining_instances),
        ("terminating_instances", tally.terminating_instances),
        ("launching", tally.launching),
        ("available", tally.available),
        ("utilized", tally.utilized),
        ("draining_available", tally.draining_available),
        ("draining_utilized", tally.draining_utilized),
        ("terminating", tally.terminating),
        ("unhealthy", tally.unhealthy),
        ("free_slots", tally.free_slots),
        ("unhealthy_slots", tally.unhealthy_slots),
        ("activatable_sessions", tally.activatable_sessions),
        ("activating_sessions", tally.activating_sessions),
        ("active_sessions", tally.active_sessions),
        ("player_sessions", tally.player_sessions),
        ("free_player_slots", tally.free_player_slots),
    ]
}
