//! GetFleetUtilization's live counts against a full recount, on a single node and on the cluster.
//!
//! The Lua scripts keep each location's counts as they change states (`utilization/tally.lua`), so that reading
//! them costs a few hashes however large the fleet. The price is that a transition which forgets to tally, or
//! tallies wrongly, leaves a count silently wrong from then on. This test drives one fleet through a few thousand
//! random transitions of every area that moves a count — FleetIQ servers, SDK processes, game and player sessions,
//! reconciler instances and the fleet's limit of concurrent activations — straight through the store, refused
//! transitions included (they must change nothing). Every few steps, and at the end, it recounts each location
//! from the raw records with plain Redis commands, by the rules tally.lua's header states, and compares the
//! recount with `read_utilization` field by field; the history of the last hour (processes ready, sessions
//! created, servers interrupted) is compared with what the steps did. At the end it checks that the population
//! went through the states the counts tell apart, so that the comparisons were not of zeros.
//!
//! The seed is printed; `BERTH_TALLY_SEED=<seed>` replays the same choices (deadlines are real time, so a replay
//! meets them about as the first run did), and `BERTH_TALLY_STEPS` runs longer.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use berth_domain::fleet::check::check_create;
use berth_domain::fleet::settings::FleetSettings;
use berth_domain::game_server::{ClaimTiers, InstanceStatus, UtilizationChange};
use berth_domain::stored::{FleetEventCode, ProcessState, TerminationReason};
use berth_proto::fleet::v1 as pb;
use berth_store::instances::{self, Acted, Leased, Stop};
use berth_store::keys::FleetKeys;
use berth_store::processes::{self, Attach, Attached, Heartbeat, ProcessRef, Timings};
use berth_store::sessions::{self, Created, EventRetention, GameSessionChange, NewGameSession, SessionTimings};
use berth_store::utilization::{Tally, UtilizationRead, read_utilization};
use berth_store::{RedisConfig, Store, endings, fleets, pool};
use berth_testkit::recount::{Raw, Reply, command, fields, fleet_key, raw_counts, recount};
use berth_testkit::{TestRedis, set_fleet_settings};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng};

const FLEET: &str = "tally";
/// The fleet's locations, home first.
const LOCATIONS: [&str; 2] = ["home", "away"];
/// Transitions per run, unless BERTH_TALLY_STEPS says otherwise.
const STEPS: usize = 3000;
/// Steps between two recounts: few enough that a failure names a short list of suspects.
const CHECK_EVERY: usize = 10;
/// Consecutive UNHEALTHY heartbeats that lose a process: low, so that random heartbeats reach it.
const UNHEALTHY_THRESHOLD: u32 = 3;
/// Instances a reconciler keeps in a location at most, so that launches and removals balance.
const VMS_PER_LOCATION: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_counts_match_a_full_recount_after_random_transitions_on_a_single_node() {
    random_transitions(TestRedis::single()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_counts_match_a_full_recount_after_random_transitions_on_a_cluster() {
    random_transitions(TestRedis::cluster()).await;
}

async fn random_transitions(redis: TestRedis) {
    let seed = std::env::var("BERTH_TALLY_SEED")
        .map(|seed| seed.parse().expect("BERTH_TALLY_SEED is a u64"))
        .unwrap_or_else(|_| SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64);
    let steps = std::env::var("BERTH_TALLY_STEPS")
        .map(|steps| steps.parse().expect("BERTH_TALLY_STEPS is a number"))
        .unwrap_or(STEPS);
    let mode = redis.config().mode;
    println!("tally ({mode:?}): seed {seed} (BERTH_TALLY_SEED={seed} replays its choices), {steps} steps");
    let started = Instant::now();
    let mut run = Run::start(&redis.config(), seed).await;
    for step in 1..=steps {
        run.step = step;
        run.transition().await;
        if step % CHECK_EVERY == 0 || step == steps {
            run.check().await;
        }
    }
    run.assert_variety();
    println!(
        "tally ({mode:?}): {steps} steps, {} recounts agreed, in {:.1?}",
        steps.div_ceil(CHECK_EVERY),
        started.elapsed()
    );
}

/// A seeded generator, so that a failing run can be replayed.
struct Rng(StdRng);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0.random_range(0..n)
    }

    fn range(&mut self, low: u64, high: u64) -> u64 {
        self.0.random_range(low..=high)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// One of the last `window` items, for targets that are likely still alive.
    fn recent<T: Clone>(&mut self, items: &[T], window: usize) -> Option<T> {
        let window = window.min(items.len());
        (window > 0).then(|| items[items.len() - 1 - self.below(window)].clone())
    }

    /// A deadline: mostly far off, sometimes short enough to pass within a few steps.
    fn deadline(&mut self) -> u64 {
        if self.chance(15) { self.range(1, 40) } else { 600_000 }
    }
}

/// The outcome's variant name: enough to follow a run, where the records it carries would drown it.
fn variant(outcome: &impl Debug) -> String {
    let debug = format!("{outcome:?}");
    debug[..debug.find(['(', ' ', '{']).unwrap_or(debug.len())].to_owned()
}

/// What the steps did to a location's history of the last hour.
#[derive(Clone, Copy, Debug, Default)]
struct History {
    ready: u64,
    /// The launch-to-ready times summed lie between these: each is bounded by Redis's clock read just before and
    /// just after its step.
    ready_ms: (u64, u64),
    sessions_created: u64,
    interrupted: u64,
}

/// A reconciler instance the run launched.
#[derive(Clone)]
struct Vm {
    loc: &'static str,
    id: String,
    servers: Vec<String>,
}

/// An SDK process the run may attach: its instance, id, location and how many game sessions it takes.
struct Process {
    instance: String,
    id: String,
    loc: &'static str,
    max_sessions: u32,
}

#[derive(Clone, Copy, Debug)]
enum Action {
    Register,
    Deregister,
    Claim,
    Utilize,
    ExpireClaims,
    SetInstanceStatus,
    Attach,
    Detach,
    Ready,
    Heartbeats,
    TerminateProcess,
    ProcessEnding,
    SweepProcesses,
    CreateSession,
    Activate,
    CreatePlayers,
    AcceptPlayer,
    RemovePlayer,
    UpdateSession,
    TerminateSession,
    EndSession,
    SweepSessions,
    Launch,
    Launched,
    Drain,
    StopInstance,
    RemoveInstance,
    WriteFleet,
}

/// The transitions and how often each is picked: those that bring servers and sessions up weigh more than those
/// that end them, so that the population stays varied rather than dying out.
const ACTIONS: [(Action, usize); 28] = [
    (Action::Register, 4),
    (Action::Deregister, 2),
    (Action::Claim, 5),
    (Action::Utilize, 4),
    (Action::ExpireClaims, 2),
    (Action::SetInstanceStatus, 3),
    (Action::Attach, 8),
    (Action::Detach, 1),
    (Action::Ready, 7),
    (Action::Heartbeats, 6),
    (Action::TerminateProcess, 2),
    (Action::ProcessEnding, 2),
    (Action::SweepProcesses, 3),
    (Action::CreateSession, 8),
    (Action::Activate, 5),
    (Action::CreatePlayers, 5),
    (Action::AcceptPlayer, 3),
    (Action::RemovePlayer, 2),
    (Action::UpdateSession, 3),
    (Action::TerminateSession, 2),
    (Action::EndSession, 2),
    (Action::SweepSessions, 3),
    (Action::Launch, 3),
    (Action::Launched, 3),
    (Action::Drain, 1),
    (Action::StopInstance, 1),
    (Action::RemoveInstance, 2),
    (Action::WriteFleet, 1),
];

struct Run {
    store: Store,
    raw: Raw,
    rng: Rng,
    seed: u64,
    step: usize,
    /// The fleet's configuration and revision, to change its limit of activations as the fleet service does.
    fleet: pb::Fleet,
    revision: u64,
    leases: BTreeMap<&'static str, String>,
    /// The registrations the run made, as it last heard of them: server id → (registration id, attach number).
    registrations: BTreeMap<String, (String, u64)>,
    /// The last claim id each server was claimed with.
    claims: BTreeMap<String, String>,
    vms: Vec<Vm>,
    /// Game sessions created: (id, its server).
    sessions: Vec<(String, String)>,
    /// Player sessions created: (id, its game session, that session's server).
    players: Vec<(String, String, String)>,
    next_id: u64,
    history: BTreeMap<String, History>,
    /// The servers counted after the last step: id → (location, whether its instance is SPOT_TERMINATING).
    census: BTreeMap<String, (String, bool)>,
    /// The steps since the last recount, for a failure to show.
    since_check: Vec<String>,
    /// The most each count reached at a recount, over all locations.
    seen: BTreeMap<&'static str, u64>,
}

impl Run {
    /// A fleet with two locations and at most 2 concurrent activations per instance, and a reconciler's lease on
    /// each location.
    async fn start(config: &RedisConfig, seed: u64) -> Run {
        let store = Store::connect(config).await.unwrap();
        let location = |name: &str, desired| pb::LocationConfiguration {
            location: name.into(),
            capacity: Some(pb::FleetCapacity {
                minimum_instances: 0,
                maximum_instances: 4,
                desired_instances: desired,
            }),
            standby: None,
        };
        let request = pb::CreateFleetRequest {
            fleet_id: FLEET.into(),
            name: "Tally".into(),
            provisioner: "records-only".into(),
            launch_configuration: Some(pb::ServerLaunchConfiguration {
                launch_path: "/opt/tally/server".into(),
                ..Default::default()
            }),
            instance_definitions: vec![pb::InstanceDefinition {
                instance_type: "small".into(),
                ..Default::default()
            }],
            max_concurrent_game_session_activations: 2,
            locations: vec![location(LOCATIONS[0], 1), location(LOCATIONS[1], 0)],
            ..Default::default()
        };
        let new = check_create(&request, &["records-only"]).unwrap();
        let fleets::Created::Created(record) = fleets::create_fleet(&store, &new, 3_600_000).await.unwrap() else {
            panic!("the fleet exists already");
        };
        let mut leases = BTreeMap::new();
        for loc in LOCATIONS {
            let lease = instances::take_lease(&store, FLEET, loc, "tally-test", 3_600_000, None).await;
            let Ok(instances::Lease::Held(lease)) = lease else {
                panic!("no lease on {loc}: {lease:?}");
            };
            leases.insert(loc, lease);
        }
        let raw = Raw::new(&store);
        Run {
            store,
            raw,
            rng: Rng(StdRng::seed_from_u64(seed)),
            seed,
            step: 0,
            fleet: record.config.clone(),
            revision: record.revision,
            leases,
            registrations: BTreeMap::new(),
            claims: BTreeMap::new(),
            vms: Vec::new(),
            sessions: Vec::new(),
            players: Vec::new(),
            next_id: 0,
            history: BTreeMap::new(),
            census: BTreeMap::new(),
            since_check: Vec::new(),
            seen: BTreeMap::new(),
        }
    }

    fn fresh(&mut self, what: &str) -> String {
        self.next_id += 1;
        format!("{what}-{}", self.next_id)
    }

    /// The history of `loc`, FleetIQ servers' ('') in the home location's, as a read adds them.
    fn history(&mut self, loc: &str) -> &mut History {
        let loc = if loc.is_empty() { LOCATIONS[0] } else { loc };
        self.history.entry(loc.to_owned()).or_default()
    }

    /// Picks a transition by weight, applies it, and notes servers that left while their instance was interrupted.
    async fn transition(&mut self) {
        let total: usize = ACTIONS.iter().map(|(_, weight)| weight).sum();
        let mut at = self.rng.below(total);
        let action = ACTIONS
            .iter()
            .find(|(_, weight)| {
                let here = at < *weight;
                at = at.saturating_sub(*weight);
                here
            })
            .map(|(action, _)| *action)
            .unwrap();
        let what = self.apply(action).await;
        self.since_check.push(format!("step {}: {what}", self.step));
        let census = self.census().await;
        for (id, (loc, spot)) in std::mem::replace(&mut self.census, census) {
            if spot && !self.census.contains_key(&id) {
                self.history(&loc).interrupted += 1;
            }
        }
    }

    /// The servers that count: listed and not lost.
    async fn census(&mut self) -> BTreeMap<String, (String, bool)> {
        let keys = FleetKeys::new(FLEET);
        let ids = self
            .raw
            .one(&["ZRANGE", &keys.game_servers(), "0", "-1"])
            .await
            .strings();
        let reads: Vec<_> = ids
            .iter()
            .map(|id| command(&["HMGET", &keys.game_server(id), "loc", "pstate", "istatus"]))
            .collect();
        let replies = self.raw.pipeline(&reads).await;
        ids.into_iter()
            .zip(replies)
            .filter_map(|(id, reply)| {
                let [loc, pstate, istatus] = reply.values();
                (pstate.as_deref() != Some(ProcessState::Lost.as_str())).then(|| {
                    let spot = istatus.as_deref() == Some(InstanceStatus::SpotTerminating.as_str());
                    (id, (loc.unwrap_or_default(), spot))
                })
            })
            .collect()
    }

    fn fleetiq_server(&mut self) -> (String, String) {
        let (instance, server) = (self.rng.below(3), self.rng.below(3));
        (format!("fiq-{instance}"), format!("fiq-{instance}-{server}"))
    }

    /// A process of a plain SDK instance (3 per location, 2 processes each), or of a recent reconciler instance.
    fn process(&mut self) -> Process {
        if let Some(vm) = self.rng.recent(&self.vms, 6).filter(|_| self.rng.chance(50)) {
            return Process {
                instance: vm.id.clone(),
                id: self.rng.pick(&vm.servers),
                loc: vm.loc,
                max_sessions: 2,
            };
        }
        let loc = self.rng.pick(&LOCATIONS);
        let (instance, server) = (self.rng.below(3), self.rng.below(2));
        Process {
            instance: format!("sdk-{loc}-{instance}"),
            id: format!("sdk-{loc}-{instance}-{server}"),
            loc,
            max_sessions: server as u32 + 1,
        }
    }

    fn any_server(&mut self) -> String {
        if self.rng.chance(30) {
            self.fleetiq_server().1
        } else {
            self.process().id
        }
    }

    fn any_instance(&mut self) -> String {
        match self.rng.below(3) {
            0 => self.fleetiq_server().0,
            _ => self.process().instance,
        }
    }

    /// A registration the run knows, sometimes with a stale attach number.
    fn registration(&mut self) -> Option<(String, String, u64)> {
        if self.registrations.is_empty() {
            return None;
        }
        let at = self.rng.below(self.registrations.len());
        let (id, (registration, attach)) = self.registrations.iter().nth(at).unwrap();
        let attach = if self.rng.chance(5) { attach + 1 } else { *attach };
        Some((id.clone(), registration.clone(), attach))
    }

    /// A recent game session, most often one that takes players now (ACTIVE), so that player sessions are made on
    /// every run however many sessions end early or wait to be activated.
    async fn live_session(&mut self) -> Option<(String, String)> {
        let picked = self.rng.recent(&self.sessions, 12)?;
        if self.rng.chance(20) {
            return Some(picked);
        }
        let recent: Vec<_> = self.sessions.iter().rev().take(12).cloned().collect();
        for (sid, server) in recent {
            let status = self
                .raw
                .one(&["HGET", &FleetKeys::new(FLEET).game_session(&sid), "status"])
                .await
                .text();
            if status.as_deref() == Some("ACTIVE") {
                return Some((sid, server));
            }
        }
        Some(picked)
    }

    /// Gives the fleet random deadlines, mostly long and now and then a few ms, as its record keeps them, before a
    /// step that applies them; the settings written.
    async fn settings(&mut self, store: &Store) -> FleetSettings {
        let settings = FleetSettings {
            activation_ms: self.rng.deadline(),
            reservation_ms: self.rng.deadline(),
            heartbeat_ms: self.rng.deadline(),
            unhealthy_after: UNHEALTHY_THRESHOLD,
            ready_ms: self.rng.deadline(),
            termination_grace_ms: self.rng.deadline(),
            ..FleetSettings::of(&pb::Fleet::default())
        };
        set_fleet_settings(store, FLEET, &settings).await;
        settings
    }

    async fn timings(&mut self, store: &Store) -> Timings {
        self.settings(store).await;
        Timings {
            initial_delay_ms: self.rng.deadline(),
            retention_ms: self.rng.deadline(),
        }
    }

    async fn session_timings(&mut self, store: &Store) -> SessionTimings {
        self.settings(store).await;
        SessionTimings {
            // Mostly short: the sweep then deletes ended sessions, as the recount must see, and its reads stay few.
            retention_ms: if self.rng.chance(70) {
                self.rng.range(1, 40)
            } else {
                600_000
            },
        }
    }

    /// The lease a reconciler of `loc` acts under; now and then a stale one, whose changes are fenced off.
    fn lease(&mut self, loc: &'static str) -> String {
        if self.rng.chance(5) {
            "tally-test 0".to_owned()
        } else {
            self.leases[loc].clone()
        }
    }

    /// Applies one transition; answers what it did, for a failure to show.
    async fn apply(&mut self, action: Action) -> String {
        let store = self.store.clone();
        let store = &store;
        match action {
            Action::Register => {
                let (instance, id) = self.fleetiq_server();
                let registration = pool::Registration {
                    fleet_id: FLEET,
                    game_server_id: &id,
                    instance_id: &instance,
                    connection_info: "10.0.0.1:7000",
                    game_server_data: "",
                };
                let outcome = pool::register(store, &registration).await.unwrap();
                format!("register {id} on {instance}: {}", variant(&outcome))
            }
            Action::Deregister => {
                let id = if self.rng.chance(80) {
                    self.fleetiq_server().1
                } else {
                    self.any_server()
                };
                let outcome = pool::deregister(store, FLEET, &id).await.unwrap();
                format!("deregister {id}: {}", variant(&outcome))
            }
            Action::Claim => {
                let named = self.rng.chance(30).then(|| self.any_server());
                let tiers = self.rng.pick(&[(0, 0), (0, 1), (1, 1)]);
                let timeout_ms = if self.rng.chance(50) {
                    self.rng.range(1, 30)
                } else {
                    600_000
                };
                let claim_id = self.fresh("claim");
                let claim = pool::Claim {
                    fleet_id: FLEET,
                    game_server_id: named.as_deref(),
                    game_server_data: None,
                    tiers: ClaimTiers {
                        lowest: tiers.0,
                        highest: tiers.1,
                    },
                    timeout_ms,
                    claim_id: &claim_id,
                    token: "",
                };
                let outcome = pool::claim(store, &claim).await.unwrap();
                let claimed = match &outcome {
                    pool::Claimed::Claimed { server: record, .. } => {
                        self.claims.insert(record.game_server_id.clone(), claim_id);
                        record.game_server_id.clone()
                    }
                    _ => String::new(),
                };
                format!(
                    "claim {named:?} tiers {tiers:?} for {timeout_ms} ms: {} {claimed}",
                    variant(&outcome)
                )
            }
            Action::Utilize => {
                let claimed: Vec<String> = self.claims.keys().cloned().collect();
                let id = match self.rng.recent(&claimed, claimed.len()).filter(|_| self.rng.chance(70)) {
                    Some(id) => id,
                    None => self.any_server(),
                };
                let claim_id = self.claims.get(&id).cloned().filter(|_| self.rng.chance(80));
                let utilization = if self.rng.chance(85) {
                    UtilizationChange::Utilized
                } else {
                    UtilizationChange::Available
                };
                let update = pool::Update {
                    fleet_id: FLEET,
                    game_server_id: &id,
                    game_server_data: None,
                    utilization,
                    healthy: self.rng.chance(50),
                    claim_id: claim_id.as_deref(),
                    claimant_only: false,
                };
                let outcome = pool::update(store, &update).await.unwrap();
                format!("update {id} {utilization:?} claim {claim_id:?}: {}", variant(&outcome))
            }
            Action::ExpireClaims => {
                let outcome = pool::expire_claims(store, FLEET, 100).await.unwrap();
                format!("expire claims: {} lapsed", outcome.lapsed)
            }
            Action::SetInstanceStatus => {
                let instance = self.any_instance();
                let status = self.rng.pick(&[
                    InstanceStatus::Active,
                    InstanceStatus::Active,
                    InstanceStatus::Active,
                    InstanceStatus::Draining,
                    InstanceStatus::Draining,
                    InstanceStatus::SpotTerminating,
                ]);
                let servers = pool::set_instance_status(store, FLEET, &instance, status)
                    .await
                    .unwrap();
                format!("set instance {instance} {status:?}: {servers} servers")
            }
            Action::Attach => {
                let process = self.process();
                let loc = if self.rng.chance(3) { "nowhere" } else { process.loc };
                let resume = self
                    .registrations
                    .get(&process.id)
                    .map(|(registration, _)| registration.clone())
                    .filter(|_| self.rng.chance(20));
                let registration = self.fresh("reg");
                let registered = berth_domain::process::Registration {
                    location: loc.to_owned(),
                    ip_address: "10.0.0.2".to_owned(),
                    port: 7000,
                    max_sessions: process.max_sessions,
                    max_players: 4,
                    sdk_version: "5.0.0".to_owned(),
                    ..Default::default()
                };
                let introduction = processes::Introduction {
                    registration: &registered,
                    data: "",
                    labels: &[],
                    ports: &[],
                };
                let attach = Attach {
                    fleet_id: FLEET,
                    game_server_id: &process.id,
                    instance_id: &process.instance,
                    registration_id: &registration,
                    resume: resume.as_deref(),
                    replica: "replica-0",
                    attempt: 0,
                    introduction,
                };
                let timings = self.timings(store).await;
                let outcome = processes::attach(store, &attach, &timings).await.unwrap();
                match &outcome {
                    Attached::Registered(joined) => {
                        self.registrations
                            .insert(process.id.clone(), (registration, joined.attach));
                    }
                    Attached::Resumed(joined, _) => {
                        self.registrations.get_mut(&process.id).unwrap().1 = joined.attach;
                    }
                    _ => {}
                }
                format!(
                    "attach {} on {} in {loc} (resume {resume:?}): {}",
                    process.id,
                    process.instance,
                    variant(&outcome)
                )
            }
            Action::Detach => {
                let Some((id, registration, attach)) = self.registration() else {
                    return "detach: no registration".to_owned();
                };
                let process = ProcessRef {
                    fleet_id: FLEET,
                    game_server_id: &id,
                    registration_id: &registration,
                };
                processes::detach(store, &process, attach).await.unwrap();
                format!("detach {id} (attach {attach})")
            }
            Action::Ready => self.ready().await,
            Action::Heartbeats => {
                let mut beats = Vec::new();
                for _ in 0..self.rng.range(1, 3) {
                    if let Some((id, registration, attach)) = self.registration() {
                        beats.push(Heartbeat {
                            game_server_id: Arc::from(id),
                            registration_id: Arc::from(registration),
                            attach,
                            healthy: self.rng.chance(65),
                            game_state: "ACTIVE",
                            players: 0,
                        });
                    }
                }
                let timings = self.timings(store).await;
                let writer = endings::Writer {
                    replica: "tally",
                    kept_up: Duration::from_secs(3600),
                };
                let outcome = endings::record_heartbeats(store, FLEET, &beats, &timings, writer)
                    .await
                    .unwrap();
                let said: Vec<_> = beats
                    .iter()
                    .map(|beat| format!("{} healthy {}", beat.game_server_id, beat.healthy))
                    .collect();
                format!("heartbeats {said:?}: {outcome:?}")
            }
            Action::TerminateProcess => {
                let id = self.process().id;
                let reason = self.rng.pick(&[
                    TerminationReason::ScaleIn,
                    TerminationReason::Unhealthy,
                    TerminationReason::Maintenance,
                ]);
                let grace_ms = self.settings(store).await.termination_grace_ms;
                let outcome = endings::terminate(store, FLEET, &id, reason).await.unwrap();
                format!("terminate {id} {reason:?} within {grace_ms} ms: {}", variant(&outcome))
            }
            Action::ProcessEnding => {
                let Some((id, registration, _)) = self.registration() else {
                    return "process ending: no registration".to_owned();
                };
                let registration = if self.rng.chance(10) {
                    self.fresh("reg")
                } else {
                    registration
                };
                let process = ProcessRef {
                    fleet_id: FLEET,
                    game_server_id: &id,
                    registration_id: &registration,
                };
                let ended = endings::process_ending(store, &process, "done").await.unwrap();
                format!("process ending {id} ({registration}): {ended}")
            }
            Action::SweepProcesses => {
                let timings = self.timings(store).await;
                let heartbeats = self.rng.chance(80);
                let judge = endings::Judge {
                    replica: "monitor",
                    answered: if heartbeats { Duration::MAX } else { Duration::ZERO },
                    lag: Duration::ZERO,
                };
                let swept = endings::sweep(store, FLEET, 100, &timings, judge).await.unwrap();
                let lost: Vec<_> = swept.lost.iter().map(|lost| lost.game_server_id.as_str()).collect();
                format!("sweep processes (heartbeats {heartbeats}): lost {lost:?}")
            }
            Action::CreateSession => {
                let sid = format!("{FLEET}/gsess-{}", self.fresh("s"));
                let named = self.rng.chance(25).then(|| self.process().id);
                let location = self.rng.pick(&["", LOCATIONS[0], LOCATIONS[1]]);
                let new = NewGameSession {
                    game_server_id: named.as_deref(),
                    location,
                    accepts_players: self.rng.chance(80),
                    ..NewGameSession::new(&sid, FLEET, self.rng.range(1, 4) as u32)
                };
                let timings = self.session_timings(store).await;
                let outcome = sessions::create_game_session(store, &new, &timings).await.unwrap();
                if let Created::Created(record, _) = &outcome {
                    self.sessions.push((sid.clone(), record.game_server_id.clone()));
                    self.history(&record.location).sessions_created += 1;
                }
                format!("create {sid} on {named:?} in {location:?}: {}", variant(&outcome))
            }
            Action::Activate => {
                let Some((sid, server)) = self.rng.recent(&self.sessions, 12) else {
                    return "activate: no session".to_owned();
                };
                let server = if self.rng.chance(90) { server } else { self.process().id };
                let outcome = sessions::activate_game_session(store, FLEET, &server, &sid)
                    .await
                    .unwrap();
                format!("activate {sid} by {server}: {}", variant(&outcome))
            }
            Action::CreatePlayers => {
                let Some((sid, server)) = self.live_session().await else {
                    return "create players: no session".to_owned();
                };
                let mut players = Vec::new();
                for _ in 0..self.rng.range(1, 2) {
                    let player = format!("player-{}", self.rng.below(6));
                    let data = self.rng.pick(&["", "x"]);
                    players.push((player, data));
                }
                let asked: Vec<_> = players.iter().map(|(player, data)| (player.as_str(), *data)).collect();
                let outcome = sessions::create_player_sessions(store, FLEET, &sid, &asked)
                    .await
                    .unwrap();
                if let sessions::PlayersCreated::Created(records) = &outcome {
                    for record in records {
                        self.players
                            .push((record.player_session_id.clone(), sid.clone(), server.clone()));
                    }
                }
                format!("create players {players:?} in {sid}: {}", variant(&outcome))
            }
            Action::AcceptPlayer => {
                let Some((psid, sid, server)) = self.rng.recent(&self.players, 16) else {
                    return "accept player: no player session".to_owned();
                };
                let outcome = sessions::accept_player_session(store, FLEET, &server, &sid, &psid)
                    .await
                    .unwrap();
                format!("accept {psid}: {}", variant(&outcome))
            }
            Action::RemovePlayer => {
                let Some((psid, sid, server)) = self.rng.recent(&self.players, 16) else {
                    return "remove player: no player session".to_owned();
                };
                let outcome = sessions::remove_player_session(store, FLEET, &server, &sid, &psid)
                    .await
                    .unwrap();
                format!("remove {psid}: {}", variant(&outcome))
            }
            Action::UpdateSession => {
                let Some((sid, _)) = self.rng.recent(&self.sessions, 12) else {
                    return "update session: no session".to_owned();
                };
                let change = GameSessionChange {
                    game_session_id: &sid,
                    maximum_players: self.rng.chance(50).then(|| self.rng.range(0, 5) as u32),
                    accepts_players: self.rng.chance(50).then(|| self.rng.chance(50)),
                    properties_max: 10,
                    ..Default::default()
                };
                let outcome = sessions::update_game_session(store, FLEET, &change).await.unwrap();
                format!(
                    "update {sid} max {:?} accept {:?}: {}",
                    change.maximum_players,
                    change.accepts_players,
                    variant(&outcome)
                )
            }
            Action::TerminateSession => {
                let Some((sid, _)) = self.rng.recent(&self.sessions, 12) else {
                    return "terminate session: no session".to_owned();
                };
                let force = self.rng.chance(40);
                self.settings(store).await;
                let outcome = endings::terminate_game_session(store, FLEET, &sid, force)
                    .await
                    .unwrap();
                format!("terminate {sid} (force {force}): {}", variant(&outcome))
            }
            Action::EndSession => {
                let Some((sid, server)) = self.rng.recent(&self.sessions, 12) else {
                    return "end session: no session".to_owned();
                };
                let reject = self.rng.chance(30);
                let outcome = sessions::end_game_session(store, FLEET, &server, &sid, reject)
                    .await
                    .unwrap();
                format!("end {sid} (reject {reject}): {}", variant(&outcome))
            }
            Action::SweepSessions => {
                let retention = EventRetention {
                    retention_ms: 3_600_000,
                    max_events: 100_000,
                };
                let swept = sessions::sweep(store, FLEET, 100, retention).await.unwrap();
                format!(
                    "sweep sessions: {} activation timeouts, {} forced, {} player timeouts, {} deleted",
                    swept.activation_timeouts, swept.forced, swept.player_timeouts, swept.deleted
                )
            }
            Action::Launch => {
                let loc = self.rng.pick(&LOCATIONS);
                let recorded = self
                    .raw
                    .one(&["ZCARD", &fleet_key(FLEET, &format!("vms:{loc}"))])
                    .await
                    .int();
                if recorded as usize >= VMS_PER_LOCATION {
                    return format!("launch in {loc}: {recorded} instances already");
                }
                let id = format!("vm-{loc}-{}", self.fresh("i"));
                let servers: Vec<String> = (0..2).map(|n| format!("{id}-{n}")).collect();
                let lease = self.lease(loc);
                let leased = Leased {
                    fleet_id: FLEET,
                    location: loc,
                    lease: &lease,
                };
                let outcome = instances::record_launch(store, &leased, &id, "small", &servers)
                    .await
                    .unwrap();
                if outcome == Acted::Done(()) {
                    self.vms.push(Vm {
                        loc,
                        id: id.clone(),
                        servers,
                    });
                }
                format!("launch {id} under {lease:?}: {outcome:?}")
            }
            Action::Launched | Action::Drain | Action::StopInstance | Action::RemoveInstance => {
                let Some(vm) = self.rng.recent(&self.vms, 6) else {
                    return format!("{action:?}: no instance");
                };
                let lease = self.lease(vm.loc);
                let leased = Leased {
                    fleet_id: FLEET,
                    location: vm.loc,
                    lease: &lease,
                };
                let outcome = match action {
                    Action::Launched => {
                        let launched = if self.rng.chance(80) {
                            Ok("handle")
                        } else {
                            Err("no capacity")
                        };
                        let outcome = instances::record_launched(store, &leased, &vm.id, launched).await;
                        format!("{launched:?}: {:?}", outcome.unwrap())
                    }
                    Action::Drain => format!("{:?}", instances::drain_instance(store, &leased, &vm.id).await.unwrap()),
                    Action::StopInstance => {
                        let stop = Stop {
                            termination: self.rng.chance(70).then_some(TerminationReason::ScaleIn),
                            grace_ms: self.rng.deadline(),
                            kill_after_ms: 60_000,
                            unregistered: self
                                .rng
                                .chance(50)
                                .then_some((FleetEventCode::ServerProcessRegisterTimeout, "never registered")),
                        };
                        let outcome = instances::stop_instance(store, &leased, &vm.id, &stop).await.unwrap();
                        format!("told {:?}: {}", stop.termination, variant(&outcome))
                    }
                    _ => {
                        let asked = self.rng.chance(50);
                        let retention_ms = self.rng.deadline();
                        let removal = instances::Removal {
                            instance_id: &vm.id,
                            asked,
                            retention_ms,
                            exited: "",
                        };
                        let outcome = instances::remove_instance(store, &leased, &removal);
                        format!("asked {asked}: {}", variant(&outcome.await.unwrap()))
                    }
                };
                format!("{action:?} {} under {lease:?}: {outcome}", vm.id)
            }
            Action::WriteFleet => {
                let limit = self.rng.below(4) as u32;
                let revision = if self.rng.chance(10) {
                    self.revision - 1
                } else {
                    self.revision
                };
                let config = pb::Fleet {
                    max_concurrent_game_session_activations: limit,
                    ..self.fleet.clone()
                };
                let change = fleets::FleetChange {
                    config: Some((revision, config)),
                    locations: Vec::new(),
                    events: Vec::new(),
                    redeploy: false,
                };
                let outcome = fleets::write_fleet(store, FLEET, &change).await.unwrap();
                if let fleets::Written::Written(record) = &outcome {
                    self.fleet = record.config.clone();
                    self.revision = record.revision;
                }
                format!(
                    "write the fleet at revision {revision}, limit {limit}: {}",
                    variant(&outcome)
                )
            }
        }
    }

    /// A process says it is ready; the history gains it, with its launch-to-ready time, when it was INITIALIZING.
    async fn ready(&mut self) -> String {
        let Some((id, registration, _)) = self.registration() else {
            return "ready: no registration".to_owned();
        };
        let key = FleetKeys::new(FLEET).game_server(&id);
        let server = self
            .raw
            .one(&["HMGET", &key, "pstate", "reg_ms", "instance", "loc"])
            .await;
        let [pstate, registered, instance, loc] = server.values();
        let vm_key = fleet_key(FLEET, &format!("vm:{}", instance.unwrap_or_default()));
        let [launched, before] = <[Reply; 2]>::try_from(
            self.raw
                .pipeline(&[command(&["HGET", &vm_key, "launch_ms"]), command(&["TIME"])])
                .await,
        )
        .unwrap();
        let process = ProcessRef {
            fleet_id: FLEET,
            game_server_id: &id,
            registration_id: &registration,
        };
        let outcome = processes::ready(&self.store, &process, None).await.unwrap();
        let [now_state, after] = <[Reply; 2]>::try_from(
            self.raw
                .pipeline(&[command(&["HGET", &key, "pstate"]), command(&["TIME"])])
                .await,
        )
        .unwrap();
        let became_ready = pstate.as_deref() == Some(ProcessState::Initializing.as_str())
            && now_state.text().as_deref() == Some(ProcessState::StandingBy.as_str());
        if became_ready {
            // Timed from the instance's launch when a reconciler recorded it, else from the registration.
            let since: u64 = launched.text().or(registered).unwrap().parse().unwrap();
            let (before, after) = (before.ms() - since, after.ms() - since);
            let history = self.history(&loc.unwrap_or_default());
            history.ready += 1;
            history.ready_ms = (history.ready_ms.0 + before, history.ready_ms.1 + after);
        }
        format!("ready {id}: {} (became ready {became_ready})", variant(&outcome))
    }

    /// Recounts every location and compares it with what `read_utilization` reads, field by field, and the raw
    /// counts, which a read shows no lower than 0, with 0.
    async fn check(&mut self) {
        let limit = u64::from(self.fleet.max_concurrent_game_session_activations);
        let recounted = recount(&self.store, FLEET, LOCATIONS[0], &LOCATIONS, limit).await;
        let UtilizationRead::Read(read) = read_utilization(&self.store, FLEET, "").await.unwrap() else {
            panic!("the fleet has no record");
        };
        let mut wrong = Vec::new();
        let names: Vec<&str> = read.locations.iter().map(|(loc, _)| loc.as_str()).collect();
        assert_eq!(names, LOCATIONS, "read_utilization reads every location, home first");
        for extra in recounted.keys().filter(|loc| !LOCATIONS.contains(&loc.as_str())) {
            wrong.push(format!(
                "the recount found records in location {extra:?}, which the fleet has not"
            ));
        }
        for (index, (loc, maintained)) in read.locations.iter().enumerate() {
            let expected = Tally {
                desired_instances: [1, 0][index],
                ..recounted.get(loc).cloned().unwrap_or_default()
            };
            for ((field, kept), (_, counted)) in fields(maintained).into_iter().zip(fields(&expected)) {
                if kept != counted {
                    wrong.push(format!("{loc} {field}: maintained {kept}, recounted {counted}"));
                }
                let seen = self.seen.entry(field).or_default();
                *seen = (*seen).max(counted);
            }
            let history = *self.history(loc);
            let minutes = maintained.minutes.values();
            let (ready, ready_ms, created, interrupted) = minutes.fold((0, 0, 0, 0), |sum, minute| {
                (
                    sum.0 + minute.ready,
                    sum.1 + minute.ready_ms,
                    sum.2 + minute.sessions_created,
                    sum.3 + minute.interrupted,
                )
            });
            let kept = [
                ("ready", ready),
                ("sessions_created", created),
                ("interrupted", interrupted),
            ];
            let done = [history.ready, history.sessions_created, history.interrupted];
            for ((field, kept), done) in kept.into_iter().zip(done) {
                if kept != done {
                    wrong.push(format!(
                        "{loc} minutes' {field}: maintained {kept}, the steps did {done}"
                    ));
                }
            }
            if !(history.ready_ms.0..=history.ready_ms.1).contains(&ready_ms) {
                wrong.push(format!(
                    "{loc} minutes' ready_ms: maintained {ready_ms}, the steps took {:?}",
                    history.ready_ms
                ));
            }
        }
        self.check_mirrors(&mut wrong).await;
        // The raw counts: one below 0 (shown as 0 by a read) is a transition tallied twice or never added.
        for loc in ["", LOCATIONS[0], LOCATIONS[1]] {
            for (field, value) in raw_counts(&self.store, FLEET, loc).await {
                if field == "mca" {
                    if !loc.is_empty() && value != limit as i64 {
                        wrong.push(format!("{loc:?} mca: kept {value}, the fleet's limit is {limit}"));
                    }
                } else if value < 0 {
                    wrong.push(format!("{loc:?} {field} is {value} in the raw tally"));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "the live counts disagree with a recount after step {} (seed {}: BERTH_TALLY_SEED={} replays it):\n  \
             {}\nthe steps since the last recount:\n  {}",
            self.step,
            self.seed,
            self.seed,
            wrong.join("\n  "),
            self.since_check.join("\n  ")
        );
        self.since_check.clear();
    }

    /// Each location's mirrors of the pool and of the hosting processes hold exactly the fleet's members located
    /// there, at the same scores; FleetIQ servers, which have no location, are in no mirror.
    async fn check_mirrors(&mut self, wrong: &mut Vec<String>) {
        for (set, mirror) in [("pool", "lpool"), ("hosting", "lhosting")] {
            let members = self
                .raw
                .one(&["ZRANGE", &fleet_key(FLEET, set), "0", "-1", "WITHSCORES"])
                .await
                .strings();
            let reads: Vec<_> = members
                .chunks_exact(2)
                .map(|pair| command(&["HGET", &FleetKeys::new(FLEET).game_server(&pair[0]), "loc"]))
                .collect();
            let located = self.raw.pipeline(&reads).await.into_iter().map(Reply::text);
            let mut expected: BTreeMap<&str, Vec<String>> = LOCATIONS.iter().map(|loc| (*loc, Vec::new())).collect();
            for (pair, loc) in members.chunks_exact(2).zip(located) {
                if let Some(listed) = loc.as_deref().and_then(|loc| expected.get_mut(loc)) {
                    listed.extend(pair.iter().cloned());
                }
            }
            for (loc, listed) in expected {
                let mirrored = self
                    .raw
                    .one(&[
                        "ZRANGE",
                        &fleet_key(FLEET, &format!("{mirror}:{loc}")),
                        "0",
                        "-1",
                        "WITHSCORES",
                    ])
                    .await
                    .strings();
                if mirrored != listed {
                    wrong.push(format!(
                        "{mirror}:{loc} holds {mirrored:?}, the {set} has {listed:?} there"
                    ));
                }
            }
        }
    }

    /// The comparisons were of live counts, not zeros: every count was non-zero at some recount, and every kind
    /// of history was made.
    fn assert_variety(&self) {
        let never: Vec<&str> = self
            .seen
            .iter()
            .filter(|(_, most)| **most == 0)
            .map(|(field, _)| *field)
            .collect();
        assert!(
            never.is_empty(),
            "seed {}: the population never reached {never:?}: the recounts compared zeros",
            self.seed
        );
        let total = self.history.values().fold(History::default(), |sum, one| History {
            ready: sum.ready + one.ready,
            sessions_created: sum.sessions_created + one.sessions_created,
            interrupted: sum.interrupted + one.interrupted,
            ..sum
        });
        assert!(
            total.ready > 0 && total.sessions_created > 0 && total.interrupted > 0,
            "seed {}: some history was never made: {total:?}",
            self.seed
        );
    }
}
