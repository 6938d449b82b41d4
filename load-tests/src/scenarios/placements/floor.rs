//! The floor of a placement: the Redis scripts one placement runs from start to fulfilment and back, called
//! straight on the store one after another, with nothing in front of them. Each chain holds its placement id,
//! starts the placement, records its attempt with the candidates the worker would order (the same function, over
//! the same queues and fleets), creates the game session with the players' slots under the attempt's token,
//! announces it to the server's replica, activates it as the server does, fulfils the placement, accepts and then
//! removes each player, and ends the session as the server does when its match is over. It runs once the services
//! are stopped, so that nothing else uses Redis. A few chains then run alone, one after another, with Redis's
//! command counts read between their steps: what each step costs (see [`Meter`]).
//!
//! Left out are the hops a worker batches or that cost Redis little per placement: the take of requests from the
//! queue's stream (up to 100 per call), the acknowledgement the fulfilling script makes of the request, and the
//! watches' reads of the events (up to 200 per call).

use std::collections::HashMap;
use std::sync::Arc;

use berth_domain::game_session::player_session_id;
use berth_domain::page_token::digest;
use berth_domain::queue::order::{Candidate, Candidates, FleetView, Order, order};
use berth_proto::placement::v1 as pb;
use berth_store::processes::announce;
use berth_store::queues::placements::{
    self as store, AttemptRecorded, Finish, Finished, Fulfilment, IdHold, PlacementRecord, Started,
};
use berth_store::sessions::placements::{Attempt, PlacementAttempt};
use berth_store::sessions::{self, Accepted, Activated, Created, NewGameSession, Removed, ServerEnded, SessionTimings};
use berth_store::{Store, StoreError, fleets, queues};
use tonic::{Code, Status};

use crate::Failure;
use crate::driver::{self, Outcome};
use crate::redis_stats::RedisStats;
use crate::report::Line;

/// The placement replica told of the floor's activations; none listens, but the publish is paid as deployed.
const RAW_REPLICA: &str = "bench-raw";
/// How long the service holds a placement id: the longest a placement may be PENDING, then its retention.
const ID_HELD_MS: u64 = 600_000 + RETENTION_MS;
/// The services' default retention of ended placements and sessions.
const RETENTION_MS: u64 = 86_400_000;

/// A queue and its destination fleets as a worker's view holds them.
struct View {
    queue: pb::Queue,
    fleets: HashMap<String, Option<FleetView>>,
}

async fn view(store: &Store, queue_name: &str) -> Result<View, Failure> {
    let queue = queues::read_queue(store, queue_name)
        .await?
        .ok_or_else(|| format!("queue {queue_name} is gone"))?;
    let mut fleets = HashMap::new();
    for destination in &queue.destinations {
        let record = fleets::read_fleet(store, &destination.fleet_id).await?;
        fleets.insert(destination.fleet_id.clone(), record.as_ref().map(FleetView::of));
    }
    Ok(View { queue, fleets })
}

/// `placements` placements of `players` players through the scripts alone, `concurrency` at once, spread over the
/// scenario's queues as the measured lines are.
pub async fn raw_placements(store: &Store, placements: u64, concurrency: u16, players: u64) -> Result<Line, Failure> {
    let mut views = Vec::new();
    for queue in 0..super::QUEUES {
        views.push(view(store, &super::queue_name(queue)).await?);
    }
    let (store, views) = (store.clone(), Arc::new(views));
    Ok(
        driver::run("raw placement scripts", placements, concurrency, move |index| {
            let (store, views) = (store.clone(), views.clone());
            async move { placed(&store, &views[(index % super::QUEUES) as usize], index, players, None).await }
        })
        .await,
    )
}

fn code(err: StoreError) -> Code {
    Status::from(err).code()
}

/// Chains [`by_step`] runs alone to cost each step (and `minimal::by_step` too).
pub(super) const METERED_CHAINS: u64 = 20;

/// Redis's command counts read between the steps of chains run one at a time: commands (those inside functions
/// included), function calls and µs in functions of each step, summed over the chains.
pub(super) struct Meter {
    last: RedisStats,
    /// Step name → what it cost, in the order first met.
    steps: Vec<(&'static str, StepCost)>,
}

/// What one step of a placement's chain cost Redis.
#[derive(Clone, Copy, Default)]
pub struct StepCost {
    /// Commands, those inside functions included.
    pub commands: f64,
    pub function_calls: f64,
    /// Time in functions, the commands they ran included.
    pub function_micros: f64,
}

impl Meter {
    pub(super) async fn new(store: &Store) -> Result<Meter, Failure> {
        Ok(Meter {
            last: RedisStats::read(store).await?,
            steps: Vec::new(),
        })
    }

    /// What each step cost per chain, over `chains` chains, in the order the steps were first met.
    pub(super) fn per_chain(self, chains: u64) -> Vec<(&'static str, StepCost)> {
        let chains = chains as f64;
        self.steps
            .into_iter()
            .map(|(step, cost)| {
                let per_chain = StepCost {
                    commands: cost.commands / chains,
                    function_calls: cost.function_calls / chains,
                    function_micros: cost.function_micros / chains,
                };
                (step, per_chain)
            })
            .collect()
    }

    /// Charges what Redis did since the last reading to `step`.
    async fn step(&mut self, store: &Store, step: &'static str) -> Result<(), Code> {
        let now = RedisStats::read(store).await.map_err(|_| Code::Unavailable)?;
        let done = now.since(&self.last, 1.0);
        let index = match self.steps.iter().position(|(name, _)| *name == step) {
            Some(index) => index,
            None => {
                self.steps.push((step, StepCost::default()));
                self.steps.len() - 1
            }
        };
        let cost = &mut self.steps[index].1;
        // The INFO that read it is no work of the step's.
        cost.commands += done.commands_run() - done.calls("info");
        cost.function_calls += done.function_calls();
        cost.function_micros += done.function_micros();
        self.last = now;
        Ok(())
    }
}

/// Charges `step` to `meter` when there is one.
pub(super) async fn mark(meter: &mut Option<&mut Meter>, store: &Store, step: &'static str) -> Result<(), Code> {
    match meter {
        Some(meter) => meter.step(store, step).await,
        None => Ok(()),
    }
}

/// What each step of a placement's chain costs Redis, from [`METERED_CHAINS`] chains run alone after the floor, per
/// chain, in the chain's order. A step met twice in a chain (a player's accept) is summed.
pub async fn by_step(store: &Store, players: u64) -> Result<Vec<(&'static str, StepCost)>, Failure> {
    let (view, queue) = hosting_view(store, players).await?;
    let mut meter = Meter::new(store).await?;
    for chain in 0..METERED_CHAINS {
        let index = chain * super::QUEUES + queue;
        placed(store, &view, index + 1_000_000_000, players, Some(&mut meter))
            .await
            .map_err(|code| format!("a metered placement failed: {code:?}"))?;
    }
    Ok(meter.per_chain(METERED_CHAINS))
}

/// The first queue whose fleets have a server free, found by placing one chain unmetered in each in turn: after an
/// open loop past what the stack sustains, the sessions its backlog left on stopped processes can fill a queue's
/// servers. Its chains end their sessions, so a queue that hosts one hosts every metered chain after it.
async fn hosting_view(store: &Store, players: u64) -> Result<(View, u64), Failure> {
    for queue in 0..super::QUEUES {
        let view = view(store, &super::queue_name(queue)).await?;
        match placed(store, &view, 900_000_000 + queue, players, None).await {
            Ok(()) => return Ok((view, queue)),
            Err(Code::ResourceExhausted) => continue,
            Err(code) => return Err(format!("a placement before the metered ones failed: {code:?}").into()),
        }
    }
    Err("no queue has a server free for the metered placements".into())
}

/// One placement's chain, as its calls would go had the service made them, each step charged to `meter` if given.
async fn placed(store: &Store, view: &View, index: u64, players: u64, mut meter: Option<&mut Meter>) -> Outcome {
    let placement_id = format!("raw-{index:010}");
    let request = super::placement_request(&placement_id, index, players);
    let queue_name = request.queue_name.as_str();
    let digest = digest(&[placement_id.as_bytes()]);
    match store::claim_placement_id(store, &placement_id, queue_name, &digest, ID_HELD_MS).await {
        Ok(IdHold::Claimed) => {}
        Ok(_) => return Err(Code::AlreadyExists),
        Err(err) => return Err(code(err)),
    }
    mark(&mut meter, store, "hold the placement id").await?;
    let mut record = match store::start_placement(store, &request, &digest, None)
        .await
        .map_err(code)?
    {
        Started::Created(record) => record,
        _ => return Err(Code::AlreadyExists),
    };
    mark(&mut meter, store, "start the placement").await?;
    let order = order(&Candidates {
        queue: &view.queue,
        fleets: &view.fleets,
        player_latencies: &request.player_latencies,
        priority_override: None,
        waited_ms: 0,
        attempt: 0,
    });
    let recorded = store::record_attempt(
        store,
        queue_name,
        &placement_id,
        record.attempts,
        &order.candidates,
        None,
    )
    .await
    .map_err(code)?;
    let AttemptRecorded::Recorded { attempts, read } = recorded else {
        return Err(Code::Aborted);
    };
    record.attempted(attempts, &order.candidates, None, read);
    mark(&mut meter, store, "record the attempt").await?;
    for candidate in &order.candidates {
        if hosted(store, &record, &order, candidate, meter.as_deref_mut()).await? {
            return Ok(());
        }
    }
    Err(Code::ResourceExhausted)
}

/// Creates the attempt's session in `candidate` and, when it had a server for it, plays the session through to
/// its end, each step charged to `meter` if given; answers whether it had one.
async fn hosted(
    store: &Store,
    record: &PlacementRecord,
    order: &Order,
    candidate: &Candidate,
    mut meter: Option<&mut Meter>,
) -> Result<bool, Code> {
    let request = &record.request;
    let fleet_id = candidate.fleet_id.as_str();
    let attempt = Attempt {
        placement_id: &request.placement_id,
        number: record.attempts,
        location: &candidate.location,
        deadline_ms: record.deadline_ms,
    };
    let game_session_id = attempt.game_session_id(fleet_id);
    let players: Vec<sessions::NewPlayer<'_>> = request
        .desired_player_sessions
        .iter()
        .map(|p| (p.player_id.as_str(), p.player_data.as_str()))
        .collect();
    let new = NewGameSession {
        location: &candidate.location,
        name: &request.game_session_name,
        placement_id: &request.placement_id,
        attempt: Some(PlacementAttempt {
            attempt,
            notify: RAW_REPLICA,
            players: &players,
            avoid: &[],
            first_here: true,
        }),
        ..NewGameSession::new(&game_session_id, fleet_id, request.maximum_player_session_count)
    };
    let timings = SessionTimings {
        retention_ms: RETENTION_MS,
    };
    let (session, routing) = match sessions::create_game_session(store, &new, &timings)
        .await
        .map_err(code)?
    {
        Created::Created(session, routing) => (session, routing),
        Created::NoServer => return Ok(false),
        _ => return Err(Code::FailedPrecondition),
    };
    mark(&mut meter, store, "create the game session").await?;
    let server = session.game_server_id.as_str();
    announce(store, &routing, fleet_id, server, None).await;
    mark(&mut meter, store, "announce it").await?;
    match sessions::activate_game_session(store, fleet_id, server, &game_session_id).await {
        Ok(Activated::Active(_)) => {}
        Ok(_) => return Err(Code::FailedPrecondition),
        Err(err) => return Err(code(err)),
    }
    mark(&mut meter, store, "activate it").await?;
    let placed: Vec<(String, String)> = players
        .iter()
        .zip(1..)
        .map(|((player, _), n)| ((*player).to_owned(), player_session_id(&game_session_id, n)))
        .collect();
    let (first_choice, lowest_latency, lowest_price) = order.outcome(candidate);
    let fulfilment = Fulfilment {
        game_session_id: &game_session_id,
        fleet_id,
        location: &session.location,
        ip_address: &session.ip_address,
        dns_name: &session.dns_name,
        port: session.port,
        placed: &placed,
        desired: &request.desired_player_sessions,
        first_choice,
        lowest_latency,
        lowest_price,
    };
    let finish = Finish::fulfilled(record.attempts, fulfilment, RETENTION_MS);
    match store::finish_placement(store, &request.queue_name, &request.placement_id, &finish).await {
        Ok(Finished::Finished(..)) => {}
        Ok(_) => return Err(Code::Aborted),
        Err(err) => return Err(code(err)),
    }
    mark(&mut meter, store, "fulfil the placement").await?;
    for (_, player_session_id) in &placed {
        let accepted = sessions::accept_player_session(store, fleet_id, server, &game_session_id, player_session_id);
        if !matches!(accepted.await.map_err(code)?, Accepted::Accepted(_)) {
            return Err(Code::FailedPrecondition);
        }
        mark(&mut meter, store, "accept a player").await?;
    }
    for (_, player_session_id) in &placed {
        let removed = sessions::remove_player_session(store, fleet_id, server, &game_session_id, player_session_id);
        if !matches!(removed.await.map_err(code)?, Removed::Removed(_)) {
            return Err(Code::FailedPrecondition);
        }
        mark(&mut meter, store, "remove a player").await?;
    }
    match sessions::end_game_session(store, fleet_id, server, &game_session_id, false).await {
        Ok(ServerEnded::Ended(..)) => {}
        Ok(_) => return Err(Code::FailedPrecondition),
        Err(err) => return Err(code(err)),
    }
    mark(&mut meter, store, "end the game session").await?;
    Ok(true)
}
