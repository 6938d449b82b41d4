//! The one background task of a game server: it owns the stream, so that requests from any clone of the handle,
//! heartbeats, pushes and reconnects are serialised in one place without locks around the stream. It correlates
//! replies with requests by request id, keeps requests without a reply to re-send them after a resume (the
//! service treats them idempotently), reconciles desired states into events, and resumes a broken stream with
//! exponential backoff and full jitter until it is back or the service says the server is lost.
//!
//! A task and a few small maps per server, and no thread, so a load generator can run thousands in a process.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use berth_proto::health::v1::GameState;
use berth_proto::health::v1::attach_request::Kind as RequestKind;
use berth_proto::health::v1::attach_response::Kind as ResponseKind;
use berth_proto::health::v1::sdk_service_client::SdkServiceClient;
use berth_proto::health::v1::{
    AttachRequest, AttachResponse, EndGameSession, Heartbeat, ProcessRegistered, RegisterProcess, RejectGameSession,
    Reply,
};
use rand::Rng;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::codec::Streaming;
use tonic::{Code, Status};
use tracing::{debug, error, info, warn};

use super::reconcile::Reconciler;
use super::{Event, Shared};
use crate::AuthedChannel;

/// How long register_process may go unanswered before the attempt counts as failed.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_CAP: Duration = Duration::from_secs(5);
/// The contract's bounds for heartbeat_interval_ms; a zero period would make the ticker panic.
const HEARTBEAT_PERIOD_MIN: Duration = Duration::from_millis(100);
const HEARTBEAT_PERIOD_MAX: Duration = Duration::from_secs(60);
/// A heartbeat carries at most this many connected players.
const MAX_CONNECTED_PLAYERS: usize = 1000;

/// A request from a handle, answered through `reply` (dropped unanswered when the stream is over).
pub(super) struct Command {
    pub(super) kind: RequestKind,
    pub(super) reply: oneshot::Sender<Reply>,
}

/// One attach stream.
pub(super) struct Link {
    requests: mpsc::UnboundedSender<AttachRequest>,
    responses: Streaming<AttachResponse>,
}

impl Link {
    fn send(&self, request_id: String, kind: RequestKind) {
        // A closed request side means the call is over; the response side reports why.
        let _ = self.requests.send(AttachRequest {
            request_id,
            kind: Some(kind),
        });
    }
}

/// How a stream ended.
enum Ended {
    /// Nothing more to do: process_ending was answered, every handle is gone, or the server is lost.
    Finished,
    /// Broken in a way a resume may mend.
    Broken(Status),
}

pub(super) struct Driver {
    client: SdkServiceClient<AuthedChannel>,
    /// Sent on every (re)registration; carries resume_registration_id once registered.
    register: RegisterProcess,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<Event>,
    reconciler: Reconciler,
    /// Requests without a reply yet, by the number in their request id, re-sent in order after a resume.
    pending: BTreeMap<u64, Command>,
    /// Numbers request ids across the registration, resumes included, so that none is reused.
    last_request: u64,
    heartbeat_sequence: u64,
    heartbeat_period: Duration,
    ticker: Interval,
    /// process_ending was answered OK: the stream may end, and is not resumed.
    ending: bool,
}

impl Driver {
    pub(super) fn new(
        client: SdkServiceClient<AuthedChannel>,
        register: RegisterProcess,
        shared: Arc<Shared>,
        commands: mpsc::UnboundedReceiver<Command>,
        events: mpsc::UnboundedSender<Event>,
    ) -> Driver {
        Driver {
            client,
            register,
            shared,
            commands,
            events,
            reconciler: Reconciler::default(),
            pending: BTreeMap::new(),
            last_request: 0,
            heartbeat_sequence: 0,
            heartbeat_period: HEARTBEAT_PERIOD_MIN,
            ticker: tokio::time::interval(HEARTBEAT_PERIOD_MIN),
            ending: false,
        }
    }

    /// Opens a stream and registers (or resumes), applying what registered says.
    pub(super) async fn register(&mut self) -> Result<Link, Status> {
        let (requests, outbound) = mpsc::unbounded_channel();
        let request_id = self.next_request_id();
        // Every try counts, the failed ones too: one that timed out may still reach the store after this one.
        self.register.attempt = self.register.attempt.saturating_add(1);
        // Cannot fail: the receiving end is right here.
        let _ = requests.send(AttachRequest {
            request_id,
            kind: Some(RequestKind::RegisterProcess(self.register.clone())),
        });
        let client = &mut self.client;
        let attach = async move {
            let mut responses = client
                .attach(UnboundedReceiverStream::new(outbound))
                .await?
                .into_inner();
            match responses.message().await? {
                Some(AttachResponse {
                    kind: Some(ResponseKind::Registered(registered)),
                    ..
                }) => Ok((responses, registered)),
                Some(_) => Err(Status::internal(
                    "the service answered register_process with something other than registered",
                )),
                None => Err(Status::unavailable(
                    "the service ended the stream before answering register_process",
                )),
            }
        };
        let (responses, registered) = tokio::time::timeout(REGISTER_TIMEOUT, attach)
            .await
            .map_err(|_| Status::unavailable("register_process got no answer in time"))??;
        self.on_registered(registered);
        Ok(Link { requests, responses })
    }

    /// Serves the stream, resuming it whenever it breaks, until there is nothing more to do.
    pub(super) async fn run(mut self, mut link: Link) {
        loop {
            let cause = match self.converse(&mut link).await {
                Ended::Finished => return,
                Ended::Broken(cause) => cause,
            };
            match self.resume(cause).await {
                Some(resumed) => link = resumed,
                None => return,
            }
        }
    }

    fn next_request_id(&mut self) -> String {
        self.last_request += 1;
        format!("r{}", self.last_request)
    }

    fn on_registered(&mut self, registered: ProcessRegistered) {
        info!(
            game_server_id = %registered.game_server_id,
            registration_id = %registered.registration_id,
            resumed = registered.resumed,
            heartbeat_interval_ms = registered.heartbeat_interval_ms,
            "registered"
        );
        self.register.resume_registration_id = registered.registration_id.clone();
        self.shared
            .set_identity(registered.game_server_id, registered.registration_id);
        self.shared.set_heartbeats(
            registered.heartbeat_interval_ms,
            registered.unhealthy_after_missed_heartbeats,
        );
        self.heartbeat_period = heartbeat_period(registered.heartbeat_interval_ms);
        // The first tick is immediate: the service hears the process's state as soon as it is (re)registered.
        self.ticker = tokio::time::interval(self.heartbeat_period);
        self.ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        if let Some(state) = registered.desired_state {
            let events = self.reconciler.desired_state(state);
            self.emit(events);
        }
    }

    async fn converse(&mut self, link: &mut Link) -> Ended {
        let mut last_heard = Instant::now();
        loop {
            tokio::select! {
                message = link.responses.message() => match message {
                    Ok(Some(response)) => {
                        last_heard = Instant::now();
                        self.on_response(response);
                    }
                    Ok(None) | Err(_) if self.ending => return Ended::Finished,
                    Ok(None) => return Ended::Broken(Status::unavailable("the service ended the stream")),
                    Err(status) if is_transient(&status) => return Ended::Broken(status),
                    Err(status) => {
                        self.lose(status);
                        return Ended::Finished;
                    }
                },
                command = self.commands.recv() => match command {
                    Some(command) => self.send_command(link, command),
                    // Every handle is gone: nobody can act on this server any more.
                    None => return Ended::Finished,
                },
                _ = self.ticker.tick() => {
                    // The service closes the stream after answering process_ending; a period later nothing is
                    // left to wait for.
                    if self.ending {
                        return Ended::Finished;
                    }
                    // Each heartbeat is acked within ~100 ms; a period and a half of silence is a dead connection
                    // that TCP has not noticed yet, and resuming then, well inside the service's window of
                    // several periods, keeps the server from being declared lost.
                    if last_heard.elapsed() > self.heartbeat_period * 3 / 2 {
                        return Ended::Broken(Status::unavailable("the service stopped answering heartbeats"));
                    }
                    self.send_heartbeat(link);
                }
                () = self.shared.changed.notified() => self.send_heartbeat(link),
            }
        }
    }

    async fn resume(&mut self, cause: Status) -> Option<Link> {
        warn!(code = ?cause.code(), message = cause.message(), "SDK stream broke; resuming");
        let mut attempt = 0;
        loop {
            if self.commands.is_closed() && self.commands.is_empty() {
                return None;
            }
            tokio::time::sleep(resume_backoff(attempt, self.heartbeat_period)).await;
            attempt = attempt.saturating_add(1);
            match self.register().await {
                Ok(link) => {
                    for (number, command) in &self.pending {
                        link.send(format!("r{number}"), command.kind.clone());
                    }
                    return Some(link);
                }
                Err(status) if is_transient(&status) => {
                    debug!(attempt, code = ?status.code(), message = status.message(), "resume failed; retrying");
                }
                Err(status) => {
                    self.lose(status);
                    return None;
                }
            }
        }
    }

    /// The server cannot go on: tell the game, which must exit. Requests in flight fail when `pending` drops.
    fn lose(&mut self, status: Status) {
        error!(code = ?status.code(), message = status.message(), "game server lost");
        // The game may have stopped listening; there is nobody else to tell.
        let _ = self.events.send(Event::Lost { status });
    }

    fn send_command(&mut self, link: &Link, command: Command) {
        // A session the game ends or refuses itself needs no word from Berth when it leaves the desired state.
        if let RequestKind::EndGameSession(EndGameSession { game_session_id })
        | RequestKind::RejectGameSession(RejectGameSession { game_session_id, .. }) = &command.kind
        {
            self.reconciler.ended_by_game(game_session_id);
        }
        let request_id = self.next_request_id();
        link.send(request_id, command.kind.clone());
        self.pending.insert(self.last_request, command);
    }

    fn send_heartbeat(&mut self, link: &Link) {
        // The process is leaving the registry: a heartbeat now would only be refused.
        if self.ending {
            return;
        }
        self.heartbeat_sequence += 1;
        let (health, game_state, mut connected_player_ids) = self.shared.heartbeat_status();
        connected_player_ids.truncate(MAX_CONNECTED_PLAYERS);
        link.send(
            format!("h{}", self.heartbeat_sequence),
            RequestKind::Heartbeat(Heartbeat {
                sequence: self.heartbeat_sequence,
                health: health as i32,
                game_state: game_state as i32,
                connected_player_ids,
                applied_state_version: self.reconciler.applied_version(),
            }),
        );
    }

    fn on_response(&mut self, response: AttachResponse) {
        let events = match response.kind {
            Some(ResponseKind::Reply(reply)) => return self.on_reply(&response.request_id, reply),
            Some(ResponseKind::HeartbeatAck(ack)) => match ack.desired_state {
                Some(state) => self.reconciler.desired_state(state),
                None => return,
            },
            Some(ResponseKind::StartGameSession(push)) => self.reconciler.start_game_session(push),
            Some(ResponseKind::UpdateGameSession(push)) => self.reconciler.update_game_session(push),
            Some(ResponseKind::TerminateProcess(push)) => self.reconciler.terminate_process(push),
            Some(ResponseKind::ServerChanged(changed)) => match changed.server {
                Some(server) => vec![Event::ServerChanged {
                    server: Box::new(server),
                }],
                None => return,
            },
            Some(ResponseKind::HeartbeatIntervalChange(change)) => {
                info!(
                    heartbeat_interval_ms = change.heartbeat_interval_ms,
                    "heartbeat interval changed"
                );
                self.shared
                    .set_heartbeats(change.heartbeat_interval_ms, change.unhealthy_after_missed_heartbeats);
                self.heartbeat_period = heartbeat_period(change.heartbeat_interval_ms);
                self.ticker = tokio::time::interval_at(Instant::now() + self.heartbeat_period, self.heartbeat_period);
                self.ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
                return;
            }
            Some(ResponseKind::Registered(_)) | None => {
                debug!(request_id = %response.request_id, "ignored an unexpected message");
                return;
            }
        };
        self.emit(events);
    }

    fn on_reply(&mut self, request_id: &str, reply: Reply) {
        let number = request_id.strip_prefix('r').and_then(|number| number.parse().ok());
        let Some(command) = number.and_then(|number| self.pending.remove(&number)) else {
            debug!(request_id, "reply to no request in flight");
            return;
        };
        if reply.code == Code::Ok as i32 && matches!(command.kind, RequestKind::ProcessEnding(_)) {
            self.ending = true;
        }
        // The caller may have stopped waiting; the request is settled all the same.
        let _ = command.reply.send(reply);
    }

    fn emit(&self, events: Vec<Event>) {
        for event in events {
            if matches!(event, Event::Terminate { .. }) {
                self.shared.advance(GameState::Terminating);
            }
            // The game may have stopped listening; heartbeats still report its state.
            let _ = self.events.send(event);
        }
    }
}

fn heartbeat_period(interval_ms: u32) -> Duration {
    Duration::from_millis(interval_ms.into()).clamp(HEARTBEAT_PERIOD_MIN, HEARTBEAT_PERIOD_MAX)
}

/// Errors after which the same registration can be resumed on a new stream: the transport failed, the replica
/// is shutting down, or the service shed load. Anything else is the service's final word.
fn is_transient(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable
            | Code::Unknown
            | Code::Cancelled
            | Code::Internal
            | Code::DeadlineExceeded
            | Code::ResourceExhausted
    )
}

/// How long the SDK waits before its `attempt`th try (from 0) to resume a broken stream, for a server heartbeating
/// every `period`. Full jitter: uniform between zero and a ceiling that doubles from 100 ms to 5 s, so that servers
/// cut off together do not come back together; and never above one heartbeat period, so that a server whose first
/// tries meet a dead replica (a balanced address still routing some tries to it) keeps trying often enough to be
/// back within its health window, which is several periods long.
pub fn resume_backoff(attempt: u32, period: Duration) -> Duration {
    let ceiling = BACKOFF_START
        .saturating_mul(2u32.saturating_pow(attempt))
        .min(BACKOFF_CAP)
        .min(period.max(BACKOFF_START));
    let ceiling_ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::rng().random_range(0..=ceiling_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_from_100_ms_to_a_5_s_cap_and_never_past_a_heartbeat_period() {
        for period in [Duration::from_secs(1), Duration::from_secs(60)] {
            for attempt in 0..40 {
                let ceiling = Duration::from_millis(100 * 2u64.pow(attempt.min(20)))
                    .min(BACKOFF_CAP)
                    .min(period);
                for _ in 0..50 {
                    assert!(
                        resume_backoff(attempt, period) <= ceiling,
                        "attempt {attempt}, period {period:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn heartbeat_period_stays_within_the_contract() {
        assert_eq!(heartbeat_period(0), HEARTBEAT_PERIOD_MIN);
        assert_eq!(heartbeat_period(2_500), Duration::from_millis(2_500));
        assert_eq!(heartbeat_period(u32::MAX), HEARTBEAT_PERIOD_MAX);
    }
}
