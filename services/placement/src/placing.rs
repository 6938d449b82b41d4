//! One placement's life on a worker, from the request it took to the end of the placement's record. Every step is
//! decided by the record in the queue's slot or by a token in a fleet's slot, never by what the worker remembers, so
//! that a worker may die between any two steps and another, taking the request over, carries on:
//!
//! 1. An attempt is recorded (its number and candidates) before anything is created for it.
//! 2. Its game session is created, with the placement's players, in the first candidate that has a server for it,
//!    under a token naming the attempt and the location. A candidate that has none spends the token there.
//! 3. When the server activates the session the placement is FULFILLED, in the step that also acknowledges the
//!    request. A session that ends first (activation timeout, crash) sends the placement to its next attempt.
//! 4. A placement that ends otherwise (stopped, timed out, its queue deleted) has its last attempt given up: a
//!    session it created is ended, and a token it did not use is spent, so that no create still on its way lands.
//!
//! A worker that takes a request over looks the recorded attempt up by its tokens first (which spends those not
//! used), so it never makes a second session for one attempt.

use std::sync::Arc;
use std::time::Duration;

use berth_domain::game_session::{GameSessionRecord, player_session_id};
use berth_domain::queue::order::{Candidate, Candidates, Order, order};
use berth_domain::stored::{GameSessionStatus, PlacementStatus, PlacementStatusReason};
use berth_runtime::watch::Tails;
use berth_store::queues::placements::{
    self as store, AttemptRecorded, Done, Finish, Finished, Fulfilment, PlacementEventEntry, PlacementRecord, Request,
};
use berth_store::sessions::placements::{Attempt, AttemptSession, PlacementAttempt, placement_attempt};
use berth_store::sessions::{self, Created, NewGameSession, SessionTimings};
use berth_store::{Store, StoreError};
use tokio::sync::broadcast;
use tracing::Instrument;

use crate::activations::{Activations, Waiting};
use crate::capacity::Capacity;
use crate::views::Views;

/// What every placement of a replica works with.
pub(crate) struct Placer {
    pub(crate) store: Store,
    /// This replica: its workers' consumer name, and the channel it hears activations on.
    pub(crate) replica: String,
    pub(crate) activations: Activations,
    /// Word of fleets that got a server where a placement found none.
    pub(crate) capacity: Capacity,
    /// How long ended placements and their sessions stay readable.
    pub(crate) retention_ms: u64,
    /// How often a placement with no server tries its candidates again, and looks at a session it waits on.
    pub(crate) retry: Duration,
    /// The followers of the queues' event streams that this replica's watches cover: told where a placement's end
    /// went, so that a matchmaker watching here hears of it at once rather than at the next poll.
    pub(crate) events: Tails<PlacementEventEntry>,
}

/// How long a worker waits before it starts over after Redis failed it, or leaves another worker that took its
/// placement over to make its attempt.
const AFTER_FAILURE: Duration = Duration::from_millis(250);

/// Works `request` of `queue_name` until its placement has ended and nothing it started is left behind.
/// Its span continues the trace of the call that started the placement, which the request carried.
pub(crate) async fn run(placer: Arc<Placer>, queue_name: String, views: Views, mut request: Request) {
    let span = tracing::info_span!(
        "placement",
        otel.name = "placement.work",
        placement = %request.placement_id,
        queue = %queue_name
    );
    if let Some(traceparent) = &request.traceparent {
        berth_runtime::telemetry::continue_trace(&span, traceparent);
    }
    let mut started = request.started.take();
    let placement = Placement {
        placer: &placer,
        queue_name: &queue_name,
        views: &views,
        request: &request,
    };
    async {
        loop {
            match placement.work(started.take()).await {
                Ok(()) => return,
                Err(err) => {
                    tracing::debug!(error = %err, "placement step failed; starting over");
                    tokio::time::sleep(AFTER_FAILURE).await;
                }
            }
        }
    }
    .instrument(span)
    .await
}

/// A game session an attempt created, as the placement needs it to be fulfilled.
struct Hosted {
    candidate: Candidate,
    session: GameSessionRecord,
    /// Word of its activation, heard from before the server could be told of it.
    waiting: Waiting,
    /// (player id, player session id) of each desired player, in request order.
    placed: Vec<(String, String)>,
    /// The attempt's order, for the queue's metrics.
    order: Order,
}

/// What became of an attempt's creates.
enum Tried {
    Hosted(Box<Hosted>),
    /// No candidate had a server for it.
    NoServer,
    /// Every candidate's servers take fewer players than it asks for: waiting would not help.
    Unsatisfiable,
    /// Another worker made or spent the attempt: it took the placement over.
    Moved,
}

/// What became of a wait on a session.
enum Waited {
    /// The placement ended (fulfilled, or otherwise): as it stands.
    Ended(Box<PlacementRecord>),
    /// The session ended before it was activated.
    SessionEnded,
}

struct Placement<'a> {
    placer: &'a Placer,
    queue_name: &'a str,
    views: &'a Views,
    request: &'a Request,
}

impl Placement<'_> {
    fn store(&self) -> &Store {
        &self.placer.store
    }

    fn id(&self) -> &str {
        &self.request.placement_id
    }

    fn attempt<'c>(&'c self, number: u32, candidate: &'c Candidate) -> Attempt<'c> {
        Attempt {
            placement_id: &self.request.placement_id,
            number,
            location: &candidate.location,
            deadline_ms: self.request.deadline_ms,
        }
    }

    /// From the record as it stands to the end; `started`, the placement as its request's entry carried it, spares
    /// the first pass its read.
    async fn work(&self, started: Option<Box<PlacementRecord>>) -> Result<(), StoreError> {
        let record = match started {
            Some(started) => Some(*started),
            None => store::read_placement(self.store(), self.queue_name, self.id()).await?,
        };
        let Some(mut record) = record else {
            // Gone with its retention: nothing of it can be left to do.
            return store::placement_done(self.store(), self.queue_name, self.id(), &self.request.entry).await;
        };
        let mut progress = Progress {
            furthest: record.furthest,
            failed_on: Vec::new(),
        };
        let mut hosted = None;
        // Heard from before the first attempt, so that no server that comes during it goes unnoticed.
        let mut capacity = self.placer.capacity.subscribe();
        if record.status == PlacementStatus::Pending && record.attempts > 0 {
            hosted = self.follow(&record, &mut progress).await?;
        }
        loop {
            if record.status != PlacementStatus::Pending {
                return self.wind_up(&record).await;
            }
            if let Some(session) = hosted.take() {
                let server = session.session.game_server_id.clone();
                match self.wait(&record, session).await? {
                    Waited::Ended(ended) => {
                        record = *ended;
                        continue;
                    }
                    Waited::SessionEnded => progress.failed_on(server),
                }
            }
            if record.read.now_ms() >= record.deadline_ms {
                record = self.time_out(progress.furthest).await?;
                continue;
            }
            // A pass that finds every candidate filtered out is an attempt too: the contract counts passes.
            let order = self.order(&record);
            if order.candidates.is_empty() {
                progress.reached(PlacementStatusReason::NoCandidate);
            }
            let recorded = store::record_attempt(
                self.store(),
                self.queue_name,
                self.id(),
                record.attempts,
                &order.candidates,
                progress.furthest,
            )
            .await?;
            match recorded {
                AttemptRecorded::Recorded { attempts, read } => {
                    record.attempted(attempts, &order.candidates, progress.furthest, read)
                }
                // Ended meanwhile (stopped before any worker took it, say): nothing to follow.
                AttemptRecorded::Moved(moved) if moved.status != PlacementStatus::Pending => {
                    record = *moved;
                    continue;
                }
                AttemptRecorded::Moved(_) => {
                    (record, hosted) = self.yield_to_another(&mut progress).await?;
                    continue;
                }
                AttemptRecorded::NotFound => {
                    return store::placement_done(self.store(), self.queue_name, self.id(), &self.request.entry).await;
                }
            };
            if order.candidates.is_empty() {
                record = self.pause(&record, &mut capacity).await?;
                continue;
            }
            match self.create(&record, order, &mut progress).await? {
                Tried::Hosted(session) => hosted = Some(*session),
                Tried::NoServer => record = self.pause(&record, &mut capacity).await?,
                Tried::Unsatisfiable => record = self.fail_unsatisfiable(&record).await?,
                Tried::Moved => (record, hosted) = self.yield_to_another(&mut progress).await?,
            }
        }
    }

    /// Another worker is making this placement's attempts (it took the placement over while this one was silent):
    /// this one leaves it time to make its creates, then follows what it did, until its next touch of the request
    /// tells it to stop (see `workers`). Following at once would spend the other's tokens before it used them.
    async fn yield_to_another(&self, progress: &mut Progress) -> Result<(PlacementRecord, Option<Hosted>), StoreError> {
        tokio::time::sleep(AFTER_FAILURE).await;
        let record = store::read_placement(self.store(), self.queue_name, self.id())
            .await?
            .ok_or_else(|| self.vanished())?;
        let hosted = if record.status == PlacementStatus::Pending {
            self.follow(&record, progress).await?
        } else {
            None
        };
        Ok((record, hosted))
    }

    /// The candidates of the next attempt, from the queue's latest view.
    fn order(&self, record: &PlacementRecord) -> Order {
        let view = self.views.borrow().clone();
        let Some(queue) = &view.queue else {
            return Order::default();
        };
        order(&Candidates {
            queue,
            fleets: &view.fleets,
            player_latencies: &record.request.player_latencies,
            priority_override: record.request.priority_configuration_override.as_ref(),
            waited_ms: u64::try_from(record.read.now_ms() - record.start_ms).unwrap_or(0),
            attempt: record.attempts,
        })
    }

    /// Creates the attempt's session in the first candidate with a server for it.
    async fn create(
        &self,
        record: &PlacementRecord,
        order: Order,
        progress: &mut Progress,
    ) -> Result<Tried, StoreError> {
        let request = &record.request;
        let properties: Vec<(String, String)> = request
            .game_properties
            .iter()
            .map(|p| (p.key.clone(), p.value.clone()))
            .collect();
        let mut too_small = 0;
        for (index, candidate) in order.candidates.iter().enumerate() {
            let attempt = self.attempt(record.attempts, candidate);
            let first_here = record.attempts == 1
                && !order.candidates[..index]
                    .iter()
                    .any(|earlier| earlier.fleet_id == candidate.fleet_id);
            let game_session_id = attempt.game_session_id(&candidate.fleet_id);
            // Heard from before the server is told of the session: its activation may come back at once.
            let waiting = self.placer.activations.wait_for(&game_session_id);
            let players: Vec<_> = request
                .desired_player_sessions
                .iter()
                .map(|p| (p.player_id.as_str(), p.player_data.as_str()))
                .collect();
            let new = NewGameSession {
                location: &candidate.location,
                name: &request.game_session_name,
                properties: &properties,
                game_session_data: &request.game_session_data,
                matchmaker_data: &request.matchmaker_data,
                placement_id: self.id(),
                attempt: Some(PlacementAttempt {
                    attempt,
                    notify: &self.placer.replica,
                    players: &players,
                    avoid: &progress.failed_on,
                    first_here,
                }),
                ..NewGameSession::new(
                    &game_session_id,
                    &candidate.fleet_id,
                    request.maximum_player_session_count,
                )
            };
            let timings = SessionTimings {
                retention_ms: self.placer.retention_ms,
            };
            match sessions::create_game_session(self.store(), &new, &timings).await? {
                Created::Created(session, routing) => {
                    berth_runtime::telemetry::announce(
                        self.store(),
                        &routing,
                        &candidate.fleet_id,
                        &session.game_server_id,
                    )
                    .await;
                    let placed = players
                        .iter()
                        .zip(1..)
                        .map(|((player, _), n)| ((*player).to_owned(), player_session_id(&game_session_id, n)))
                        .collect();
                    return Ok(Tried::Hosted(Box::new(Hosted {
                        candidate: candidate.clone(),
                        session: *session,
                        waiting,
                        placed,
                        order,
                    })));
                }
                Created::Existing(_) | Created::Abandoned => return Ok(Tried::Moved),
                Created::TooSmall => too_small += 1,
                Created::NoServer
                | Created::CreatorLimit(_)
                | Created::NotFound(_)
                | Created::FleetNotActive(_)
                | Created::TokenReused => {
                    progress.reached(PlacementStatusReason::NoCapacity);
                }
            }
        }
        if too_small == order.candidates.len() {
            return Ok(Tried::Unsatisfiable);
        }
        Ok(Tried::NoServer)
    }

    /// FAILED (UNSATISFIABLE): no destination's servers take as many players as it asks for; the placement as it
    /// then stands.
    async fn fail_unsatisfiable(&self, record: &PlacementRecord) -> Result<PlacementRecord, StoreError> {
        let message = format!(
            "maximum_player_session_count {} is more than every ready server of the queue's destinations takes",
            record.request.maximum_player_session_count
        );
        let finish = Finish {
            at_attempt: Some(record.attempts),
            ..Finish::new(
                PlacementStatus::Failed,
                Some(PlacementStatusReason::Unsatisfiable),
                &message,
                self.placer.retention_ms,
            )
        };
        self.end(&finish).await
    }

    /// Looks up the recorded attempt in each of its candidates, spending the tokens it did not use: the session it
    /// created, when it created one that is still live.
    async fn follow(&self, record: &PlacementRecord, progress: &mut Progress) -> Result<Option<Hosted>, StoreError> {
        for candidate in &record.candidates {
            let attempt = self.attempt(record.attempts, candidate);
            let AttemptSession::Found(session, live, _) =
                placement_attempt(self.store(), &candidate.fleet_id, &attempt, false).await?
            else {
                continue;
            };
            if session.status != Some(GameSessionStatus::Activating) && !activated(&session) {
                progress.failed_on(session.game_server_id);
                return Ok(None);
            }
            let placed = record
                .request
                .desired_player_sessions
                .iter()
                .filter_map(|p| {
                    live.iter()
                        .find(|(player, _)| *player == p.player_id)
                        .map(|(player, id)| (player.clone(), id.clone()))
                })
                .collect();
            return Ok(Some(Hosted {
                candidate: candidate.clone(),
                waiting: self.placer.activations.wait_for(&session.game_session_id),
                session: *session,
                placed,
                order: self.order(record),
            }));
        }
        Ok(None)
    }

    /// Waits for the hosting session to be activated, fulfilling the placement then; meanwhile looks at the
    /// session and the placement every retry period, and times the placement out at its deadline.
    async fn wait(&self, record: &PlacementRecord, hosted: Hosted) -> Result<Waited, StoreError> {
        let mut active = activated(&hosted.session);
        loop {
            if active {
                return self.fulfil(record, &hosted).await;
            }
            let deadline = left_until(record);
            tokio::select! {
                _ = hosted.waiting.activated() => {
                    active = true;
                    continue;
                }
                _ = tokio::time::sleep(self.placer.retry.min(deadline)) => {}
            }
            let fleet_id = &hosted.candidate.fleet_id;
            let session_id = hosted.session.game_session_id.as_str();
            let read = sessions::read_game_sessions(self.store(), fleet_id, &[session_id]).await?;
            let Some(session) = read.into_iter().flatten().next() else {
                return Ok(Waited::SessionEnded);
            };
            match session.status {
                _ if activated(&session) => active = true,
                Some(GameSessionStatus::Activating) => {
                    if record.read.now_ms() >= record.deadline_ms {
                        let reason = Some(PlacementStatusReason::ActivationFailed);
                        return Ok(Waited::Ended(Box::new(self.time_out(reason).await?)));
                    }
                    let current = store::read_placement(self.store(), self.queue_name, self.id()).await?;
                    match current {
                        Some(current) if current.status == PlacementStatus::Pending => {}
                        Some(current) => return Ok(Waited::Ended(Box::new(current))),
                        None => return Ok(Waited::Ended(Box::new(record.clone()))),
                    }
                }
                _ => return Ok(Waited::SessionEnded),
            }
        }
    }

    /// FULFILLED with the hosting session, acknowledging the request in the same step; the placement as it ended
    /// (a stop or timeout may have come first).
    async fn fulfil(&self, record: &PlacementRecord, hosted: &Hosted) -> Result<Waited, StoreError> {
        let session = &hosted.session;
        let (first_choice, lowest_latency, lowest_price) = hosted.order.outcome(&hosted.candidate);
        let fulfilment = Fulfilment {
            game_session_id: &session.game_session_id,
            fleet_id: &hosted.candidate.fleet_id,
            location: &session.location,
            ip_address: &session.ip_address,
            dns_name: &session.dns_name,
            port: session.port,
            placed: &hosted.placed,
            desired: &record.request.desired_player_sessions,
            first_choice,
            lowest_latency,
            lowest_price,
        };
        let finish = Finish::fulfilled(record.attempts, fulfilment, self.placer.retention_ms);
        let done =
            store::finish_request(self.store(), self.queue_name, self.id(), &finish, &self.request.entry).await?;
        Ok(Waited::Ended(match done {
            Done::Ended(position) => {
                self.placer.events.appended(self.queue_name, &position);
                crate::metrics::placement_fulfilled(
                    self.queue_name,
                    &session.location,
                    first_choice.as_str(),
                    (lowest_latency, lowest_price),
                );
                // All that is left to do with it reads its status.
                let mut ended = Box::new(record.clone());
                ended.status = PlacementStatus::Fulfilled;
                ended
            }
            Done::Moved(moved) => moved,
            Done::NotFound => Box::new(record.clone()),
        }))
    }

    /// TIMED_OUT at its deadline, with the furthest its attempts got; the placement as it then stands.
    async fn time_out(&self, furthest: Option<PlacementStatusReason>) -> Result<PlacementRecord, StoreError> {
        let reason = furthest.unwrap_or(PlacementStatusReason::NoCandidate);
        let message = match reason {
            PlacementStatusReason::NoCandidate => "no destination passed the queue's filters before the timeout",
            PlacementStatusReason::ActivationFailed => "no server activated the game session before the timeout",
            _ => "no destination had a free server process before the timeout",
        };
        let finish = Finish {
            after_deadline: true,
            ..Finish::new(
                PlacementStatus::TimedOut,
                Some(reason),
                message,
                self.placer.retention_ms,
            )
        };
        self.end(&finish).await
    }

    /// Ends the placement as `finish` says, unless something else ended it or moved it on first; the placement as
    /// it then stands.
    async fn end(&self, finish: &Finish<'_>) -> Result<PlacementRecord, StoreError> {
        loop {
            match store::finish_placement(self.store(), self.queue_name, self.id(), finish).await? {
                Finished::Finished(ended, position) => {
                    self.placer.events.appended(self.queue_name, &position);
                    crate::metrics::placements_ended(self.queue_name, finish.status.as_str(), 1);
                    return Ok(*ended);
                }
                Finished::Moved(moved) => return Ok(*moved),
                // This replica's clock runs ahead of Redis': wait for Redis'.
                Finished::Waiting(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                Finished::NotFound => return Err(self.vanished()),
            }
        }
    }

    /// The error of a placement whose record is gone while its request is worked: the next start over finds it
    /// gone and is done with the request.
    fn vanished(&self) -> StoreError {
        StoreError::Unexpected(format!("placement {} vanished", self.id()))
    }

    /// Waits before the next attempt: until word that one of the queue's fleets got a server where a placement
    /// found none, the retry period, or the deadline, whichever comes first; the placement as it then stands.
    async fn pause(
        &self,
        record: &PlacementRecord,
        capacity: &mut broadcast::Receiver<String>,
    ) -> Result<PlacementRecord, StoreError> {
        let left = left_until(record);
        let view = self.views.borrow().clone();
        let word = async {
            loop {
                match capacity.recv().await {
                    Ok(fleet_id) if view.fleets.contains_key(&fleet_id) => return,
                    Ok(_) => {}
                    // Words were missed: one of them may have been for this queue.
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        tokio::select! {
            _ = word => {}
            _ = tokio::time::sleep(self.placer.retry.min(left)) => {}
        }
        Ok(store::read_placement(self.store(), self.queue_name, self.id())
            .await?
            .unwrap_or_else(|| record.clone()))
    }

    /// The placement has ended: its last attempt is given up, then the request is done with. A FULFILLED
    /// placement's request was done with in the step that fulfilled it.
    async fn wind_up(&self, record: &PlacementRecord) -> Result<(), StoreError> {
        if record.status == PlacementStatus::Fulfilled {
            return Ok(());
        }
        for candidate in &record.candidates {
            let attempt = self.attempt(record.attempts, candidate);
            if let AttemptSession::Found(session, _, routing) =
                placement_attempt(self.store(), &candidate.fleet_id, &attempt, true).await?
            {
                berth_runtime::telemetry::announce(
                    self.store(),
                    &routing,
                    &candidate.fleet_id,
                    &session.game_server_id,
                )
                .await;
            }
        }
        store::placement_done(self.store(), self.queue_name, self.id(), &self.request.entry).await
    }
}

/// Whether a session was activated: ACTIVE, or ended since (a match may be over before its placement's worker
/// looks again). Its placement is fulfilled either way: the server took the session and its players.
fn activated(session: &GameSessionRecord) -> bool {
    session.status == Some(GameSessionStatus::Active) || session.activation_ms.is_some()
}

/// What a worker has learnt of a placement's attempts.
struct Progress {
    /// The furthest they got: the reason it times out with.
    furthest: Option<PlacementStatusReason>,
    /// Game servers that never activated its session: not tried again by this worker.
    failed_on: Vec<String>,
}

impl Progress {
    /// An attempt got as far as `reason` says: ACTIVATION_FAILED (a server was found) is beyond NO_CAPACITY (a
    /// candidate was), which is beyond NO_CANDIDATE.
    fn reached(&mut self, reason: PlacementStatusReason) {
        let rank = |reason: Option<PlacementStatusReason>| match reason {
            Some(PlacementStatusReason::ActivationFailed) => 3,
            Some(PlacementStatusReason::NoCapacity) => 2,
            Some(PlacementStatusReason::NoCandidate) => 1,
            _ => 0,
        };
        if rank(Some(reason)) > rank(self.furthest) {
            self.furthest = Some(reason);
        }
    }

    /// `game_server_id` was given the session and did not activate it.
    fn failed_on(&mut self, game_server_id: String) {
        self.reached(PlacementStatusReason::ActivationFailed);
        self.failed_on.push(game_server_id);
    }
}

/// How long until a placement's deadline by Redis's clock, which Redis set it by; zero once it has passed.
fn left_until(record: &PlacementRecord) -> Duration {
    Duration::from_millis(u64::try_from(record.deadline_ms - record.read.now_ms()).unwrap_or(0))
}
