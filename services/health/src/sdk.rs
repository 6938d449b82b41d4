//! SdkService: the one long-lived stream of each game-server process. The first message registers (or resumes)
//! the process; then each request gets exactly one answer with its request id, heartbeats go to the batched
//! writer, and commands for the process are pushed as they are announced. A failed request is answered with a
//! code and leaves the stream open; only protocol violations and a lost registration end it.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_domain::game_session::GameSessionStatus;
use berth_domain::process::{check_heartbeat, check_ready, check_register, check_request_id};
use berth_domain::stored::GameState;
use berth_domain::validate::invalid;
use berth_proto::health::v1::sdk_service_server::SdkService;
use berth_proto::health::v1::{self as pb, attach_request::Kind as Ask, attach_response::Kind as Tell};
use berth_runtime::auth::Caller;
use berth_store::processes::{
    self as store, Attach, Attached, Desired, HeartbeatSettings, Introduction, LateEndpoint, ProcessRef,
};
use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status, Streaming};
use tracing::Instrument;

use crate::Context;
use berth_domain::game_server::timestamp;

use crate::desired::{assignments, desired_state, terminate_process};
use crate::heartbeats::Beat;
use crate::streams::Command;

mod budget;
mod server;
mod sessions;
mod shape;
mod told;

use budget::{Budget, MESSAGES_PER_SECOND};
use told::Told;

/// Messages a stream may have waiting to go out, and commands waiting for its task.
const QUEUE: usize = 16;

/// Most changes to what a process hosts answered together (ProcessStream::hosted_run): no more than the answers that
/// fit in the outbound queue.
const RUN: usize = QUEUE;

/// What reading the process's side of its stream gave.
type Read = Result<Option<pb::AttachRequest>, Status>;

/// Where a stream's answers and pushes queue to go out. Boxed: a channel allocates its slots 32 at a time, and a
/// slot the size of a message would cost each connected server ~20 KiB before it sends anything.
pub(crate) type Outbound = mpsc::Sender<Box<Result<pb::AttachResponse, Status>>>;

/// The handler.
pub struct Sdk {
    context: Arc<Context>,
}

impl Sdk {
    pub(crate) fn new(context: Arc<Context>) -> Sdk {
        Sdk { context }
    }
}

fn response(request_id: &str, kind: Tell) -> pb::AttachResponse {
    pb::AttachResponse {
        request_id: request_id.to_owned(),
        kind: Some(kind),
    }
}

/// The answer to a heartbeat. The request id moves into it: an ack is sent per heartbeat, so no copy is made.
pub(crate) fn heartbeat_ack(
    request_id: String,
    sequence: u64,
    state_version: u64,
    desired_state: Option<pb::DesiredState>,
) -> pb::AttachResponse {
    let ack = pb::HeartbeatAck {
        sequence,
        state_version,
        desired_state,
        next_maintenance_time: None,
    };
    pb::AttachResponse {
        request_id,
        kind: Some(Tell::HeartbeatAck(ack)),
    }
}

pub(crate) fn reply(
    request_id: &str,
    code: Code,
    message: impl Into<String>,
    result: Option<pb::reply::Result>,
) -> pb::AttachResponse {
    response(
        request_id,
        Tell::Reply(pb::Reply {
            code: code as i32,
            message: message.into(),
            field_violations: Vec::new(),
            result,
        }),
    )
}

/// The reply for a refused request, with the field violations its status carries.
pub(crate) fn refusal(request_id: &str, status: &Status) -> pb::AttachResponse {
    use tonic_types::StatusExt;
    let field_violations = status
        .get_details_bad_request()
        .map(|bad| {
            bad.field_violations
                .into_iter()
                .map(|violation| pb::ReplyFieldViolation {
                    field: violation.field,
                    description: violation.description,
                })
                .collect()
        })
        .unwrap_or_default();
    response(
        request_id,
        Tell::Reply(pb::Reply {
            code: status.code() as i32,
            message: status.message().to_owned(),
            field_violations,
            result: None,
        }),
    )
}

/// A refusal whose field violations the shared checks name bare, as fields of the request `kind` (the path from
/// the AttachRequest, e.g. `describe_player_sessions.page_token`).
pub(crate) fn refusal_of(request_id: &str, kind: &str, status: &Status) -> pb::AttachResponse {
    let mut answer = refusal(request_id, status);
    if let Some(Tell::Reply(reply)) = &mut answer.kind {
        for violation in &mut reply.field_violations {
            violation.field = format!("{kind}.{}", violation.field);
        }
    }
    answer
}

/// The refusal of a new stream by a replica too far behind writing its heartbeats: RESOURCE_EXHAUSTED, which the SDK
/// retries after its backoff, through whatever balances the replicas, with a hint of when to.
fn full(behind: Duration) -> Status {
    use tonic_types::StatusExt;
    let retry = tonic_types::ErrorDetails::with_retry_info(Some(Duration::from_secs(1)));
    Status::with_error_details(
        Code::ResourceExhausted,
        format!(
            "this health replica is {} ms behind writing heartbeats and takes no new stream; attach through another \
             replica, or retry in a second",
            behind.as_millis()
        ),
        retry,
    )
}

#[tonic::async_trait]
impl SdkService for Sdk {
    type AttachStream = Pin<Box<dyn Stream<Item = Result<pb::AttachResponse, Status>> + Send>>;

    async fn attach(
        &self,
        request: Request<Streaming<pb::AttachRequest>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let caller = Caller::of(&request)?.clone();
        let mut inbound = request.into_inner();
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| invalid("register_process", "the stream ended before it was sent"))?;
        check_request_id(&first.request_id)?;
        let Some(Ask::RegisterProcess(mut register)) = first.kind else {
            return Err(Status::failed_precondition(
                "the first message of a stream must be register_process",
            ));
        };
        if register.game_server_id.is_empty() {
            register.game_server_id = caller.claims.game_server.clone().unwrap_or_default();
        }
        // Whose stream it is comes before what it says: a stranger learns nothing from validation errors.
        caller.check_game_server(&register.fleet_id, &register.game_server_id)?;
        let registration = check_register(&register)?;

        let context = &self.context;
        let registration_id = uuid::Uuid::now_v7().to_string();
        let resume = Some(register.resume_registration_id.as_str()).filter(|id| !id.is_empty());
        let now = Instant::now();
        if resume.is_none() && context.keeping_up.full(now) {
            return Err(full(context.keeping_up.behind(now)));
        }
        let labels: Vec<(&str, &str)> = register
            .labels
            .iter()
            .map(|label| (label.key.as_str(), label.value.as_str()))
            .collect();
        let ports: Vec<(&str, u32, i32)> = register
            .ports
            .iter()
            .map(|port| (port.name.as_str(), port.port, port.protocol))
            .collect();
        let introduction = Introduction {
            registration: &registration,
            data: &register.game_server_data,
            labels: &labels,
            ports: &ports,
        };
        let attach = Attach {
            fleet_id: &register.fleet_id,
            game_server_id: &register.game_server_id,
            instance_id: &register.instance_id,
            registration_id: &registration_id,
            resume,
            replica: &context.replica,
            attempt: register.attempt,
            introduction,
        };
        let (joined, resumed) = match store::attach(&context.store, &attach, &context.timings).await? {
            Attached::Registered(joined) => (joined, false),
            Attached::Resumed(joined, superseded) => {
                // The stream this one replaces ends with ABORTED: here when this replica holds it (see
                // Streams::insert), else through the replica that does.
                if superseded != context.replica {
                    let (fleet_id, game_server_id) = (&register.fleet_id, &register.game_server_id);
                    store::supersede(&context.store, &superseded, fleet_id, game_server_id, joined.attach).await;
                }
                (joined, true)
            }
            Attached::Stale => {
                crate::metrics::stale_resume();
                return Err(Status::aborted(format!(
                    "attempt {} of this process is below one that already resumed its registration: this stream \
                     came too late and is closed",
                    register.attempt
                )));
            }
            Attached::Exists => {
                return Err(Status::already_exists(format!(
                    "game server {:?} has a live registration; resume it with resume_registration_id, or wait until \
                     it is declared lost",
                    register.game_server_id
                )));
            }
            Attached::Lost => {
                return Err(Status::failed_precondition(
                    "this registration was declared lost (or ended); the process must exit",
                ));
            }
            Attached::Unknown => {
                return Err(Status::failed_precondition(
                    "no such registration to resume (it ended or never was); the process must exit",
                ));
            }
            Attached::NotFound(why) => {
                return Err(Status::not_found(format!("{why}; the process must exit")));
            }
            Attached::Deleting(why) => {
                return Err(Status::failed_precondition(format!("{why}; the process must exit")));
            }
        };
        let registration_id = resume.map(str::to_owned).unwrap_or(registration_id);
        let store::Joined {
            settings,
            attach,
            record,
            desired,
        } = *joined;
        crate::metrics::attached(resumed);

        let (out, out_rx) = mpsc::channel(QUEUE);
        let (commands, commands_rx) = mpsc::channel(QUEUE);
        let mut stream = ProcessStream {
            context: context.clone(),
            fleet_id: register.fleet_id.clone().into(),
            game_server_id: register.game_server_id.as_str().into(),
            registration_id: registration_id.as_str().into(),
            attach,
            out,
            commands: commands.clone(),
            budget: Budget::new(),
            reported: None,
            told: Told::default(),
            settled: None,
            told_settings: HeartbeatSettings::of(&settings),
        };
        let registered = pb::ProcessRegistered {
            game_server_id: register.game_server_id.clone(),
            registration_id,
            resumed,
            heartbeat_interval_ms: stream.told_settings.interval_ms,
            unhealthy_after_missed_heartbeats: stream.told_settings.unhealthy_after,
            ready_deadline: Some(timestamp(record.registered_ms + settings.ready_ms as i64)),
            termination_grace_seconds: u32::try_from(settings.termination_grace_ms / 1000).unwrap_or(u32::MAX),
            exit_timeout_seconds: u32::try_from(settings.exit_ms / 1000).unwrap_or(u32::MAX),
            desired_state: desired.as_ref().map(|desired| stream.mark_sent(desired).0),
        };
        stream
            .send(response(&first.request_id, Tell::Registered(registered)))
            .await;
        let generation = context
            .streams
            .insert(&register.fleet_id, &register.game_server_id, attach, commands);
        tokio::spawn(async move {
            stream.serve(inbound, commands_rx).await;
            stream
                .context
                .streams
                .remove(&stream.fleet_id, &stream.game_server_id, generation);
            // Gone without ProcessEnding (which removed the record, so this then changes nothing): should the
            // process stay away past its deadline, it crashed rather than hung.
            if let Err(err) = store::detach(&stream.context.store, &stream.process(), stream.attach).await {
                tracing::debug!(error = %err, "a closed stream could not be recorded");
            }
        });
        Ok(Response::new(Box::pin(
            ReceiverStream::new(out_rx).map(|message| *message),
        )))
    }
}

/// Whether a stream goes on after a message.
enum Flow {
    Continue,
    /// End it: with OK (`None`) or an error status.
    End(Option<Status>),
}

/// What the last heartbeat of this stream reported, for DescribeServer (the store has it only after the writer's
/// next batch).
struct Reported {
    healthy: bool,
    game_state: i32,
    players: Vec<String>,
}

/// The task serving one process's stream.
struct ProcessStream {
    context: Arc<Context>,
    fleet_id: Arc<str>,
    game_server_id: Arc<str>,
    registration_id: Arc<str>,
    /// This stream's attach number: a resume through a newer stream supersedes it.
    attach: u64,
    out: Outbound,
    commands: mpsc::Sender<Command>,
    budget: Budget,
    reported: Option<Reported>,
    /// What the process was told of its desired state.
    told: Told,
    /// The desired state the process's own last call left it in, when the store knew it whole (an EndGameSession that
    /// left it hosting nothing): the heartbeat that finds the process behind it is answered with it, not a read.
    settled: Option<Desired>,
    /// The heartbeat settings the process was last told: at registration, then as its fleet's change.
    told_settings: HeartbeatSettings,
}

impl ProcessStream {
    fn process(&self) -> ProcessRef<'_> {
        ProcessRef {
            fleet_id: &self.fleet_id,
            game_server_id: &self.game_server_id,
            registration_id: &self.registration_id,
        }
    }

    async fn send(&self, message: pb::AttachResponse) {
        // The process went away when this fails; its inbound side ends the task.
        let _ = self.out.send(Box::new(Ok(message))).await;
    }

    async fn serve(&mut self, mut inbound: Streaming<pb::AttachRequest>, mut commands: mpsc::Receiver<Command>) {
        let mut closing = self.context.closing.subscribe();
        // One wait for the whole stream: a wait made anew at every message would join and leave the shutdown
        // signal's lists of waiters each time, a few locks shared by every stream of the replica.
        let closed = closing.changed();
        tokio::pin!(closed);
        // What a run of changes read past its end (hosted_run): the next thing to take, before anything else.
        let mut held = None;
        loop {
            let flow = match held.take() {
                Some(read) => self.take(read, &mut inbound, &mut held).await,
                // Commands first: they carry heartbeat acks (a process behind its desired state) that are due within
                // 500 ms, and a process sending faster than its requests are answered would otherwise hold them back
                // until their queue overflowed. Commands come at most one or two a heartbeat, so they cannot hold
                // the process's messages back.
                None => tokio::select! {
                    biased;
                    // Boxed, as the requests other than heartbeats are (see handle).
                    Some(command) = commands.recv() => Box::pin(self.command(command)).await,
                    read = inbound.message() => self.take(read, &mut inbound, &mut held).await,
                    _ = &mut closed => Flow::End(Some(Status::unavailable(
                        "this health replica is shutting down; resume through another",
                    ))),
                },
            };
            if let Flow::End(status) = flow {
                if let Some(status) = status {
                    let _ = self.out.send(Box::new(Err(status))).await;
                }
                return;
            }
        }
    }

    /// Acts on what was read from the process: a message, the end of its side (`None`), or why nothing more can be
    /// read (a message that does not decode, a transport that broke: said, if anyone still listens).
    async fn take(&mut self, read: Read, inbound: &mut Streaming<pb::AttachRequest>, held: &mut Option<Read>) -> Flow {
        match read {
            Ok(Some(_)) if !self.budget.spend() => Flow::End(Some(Status::resource_exhausted(format!(
                "more than {MESSAGES_PER_SECOND} messages in a second: slow down, then resume"
            )))),
            Ok(Some(message)) if sessions::hosted_change(&message).is_some() => {
                let run = self.hosted_run(message, inbound, held);
                Box::pin(self.change(run)).await
            }
            Ok(Some(message)) => self.handle(message).await,
            Ok(None) => Flow::End(None),
            Err(status) => Flow::End(Some(status)),
        }
    }

    /// A change to what the process hosts (an accept, a removal, an end or a reject), and those the process sent right
    /// behind it that have arrived already (up to [`RUN`]): answered together, they cost one round trip to Redis
    /// instead of one each. Whatever else was read behind them is `held` for the stream to take next.
    fn hosted_run(
        &mut self,
        first: pb::AttachRequest,
        inbound: &mut Streaming<pb::AttachRequest>,
        held: &mut Option<Read>,
    ) -> Vec<pb::AttachRequest> {
        let mut run = vec![first];
        while run.len() < RUN {
            match inbound.message().now_or_never() {
                None => break,
                Some(Ok(Some(message))) if sessions::hosted_change(&message).is_some() && self.budget.spend() => {
                    run.push(message);
                }
                Some(read) => {
                    *held = Some(read);
                    break;
                }
            }
        }
        run
    }

    /// Records a desired state as told to the process; returns it as the contract speaks it, with the
    /// UpdateGameSession pushes for the sessions it changed (none on a new stream, which has told nothing yet).
    fn mark_sent(&mut self, desired: &Desired) -> (pb::DesiredState, Vec<pb::UpdateGameSession>) {
        let updates = self.told.whole(desired);
        (desired_state(desired), updates)
    }

    async fn desired(&self) -> Result<Option<Desired>, Status> {
        Ok(store::desired_state(&self.context.store, &self.fleet_id, &self.game_server_id).await?)
    }

    async fn command(&mut self, command: Command) -> Flow {
        match command {
            Command::Announce(version, span) if version > self.told.version() => {
                async {
                    match self.desired().await {
                        Ok(Some(desired)) => self.push(&desired).await,
                        Ok(None) | Err(_) => Flow::Continue,
                    }
                }
                .instrument(span)
                .await
            }
            Command::Announce(..) => Flow::Continue,
            Command::State(desired, span) if desired.version > self.told.version() => {
                self.push(&desired).instrument(span).await
            }
            Command::State(..) => Flow::Continue,
            Command::HeartbeatSettings(settings) if settings != self.told_settings => {
                self.told_settings = settings;
                let change = pb::HeartbeatIntervalChange {
                    heartbeat_interval_ms: settings.interval_ms,
                    unhealthy_after_missed_heartbeats: settings.unhealthy_after,
                };
                self.send(response("", Tell::HeartbeatIntervalChange(change))).await;
                Flow::Continue
            }
            Command::HeartbeatSettings(_) => Flow::Continue,
            Command::Changed => {
                if let Some(changed) = self.changed().await {
                    self.send(response("", Tell::ServerChanged(changed))).await;
                }
                Flow::Continue
            }
            Command::Behind {
                request_id,
                sequence,
                version,
            } => {
                // Never older than what was pushed since: a state pushed after it is newer than the one it holds.
                let settled = self
                    .settled
                    .take()
                    .filter(|settled| settled.version == version && settled.version >= self.told.version());
                let desired = match settled {
                    Some(settled) => Ok(Some(settled)),
                    None => self.desired().await,
                };
                let (desired_state, updates) = match desired {
                    Ok(Some(desired)) => {
                        let (state, updates) = self.mark_sent(&desired);
                        (Some(state), updates)
                    }
                    Ok(None) | Err(_) => (None, Vec::new()),
                };
                self.send(heartbeat_ack(request_id, sequence, version, desired_state))
                    .await;
                for update in updates {
                    self.send(response("", Tell::UpdateGameSession(update))).await;
                }
                Flow::Continue
            }
            Command::Superseded(by) if by > self.attach => Flow::End(Some(Status::aborted(
                "a newer stream resumed this registration; this one is closed",
            ))),
            Command::Superseded(_) => Flow::Continue,
            Command::Lost => {
                if let Ok(Some(desired)) = self.desired().await {
                    self.push(&desired).await;
                }
                Flow::End(Some(Status::failed_precondition(
                    "this process was declared lost; it must end now",
                )))
            }
        }
    }

    /// Pushes what is new in a desired state: game sessions not pushed before, changes to those pushed, and a
    /// termination.
    async fn push(&mut self, desired: &Desired) -> Flow {
        for update in self.told.changes(desired) {
            self.send(response("", Tell::UpdateGameSession(update))).await;
        }
        for ((id, assignment), hosted) in assignments(desired).into_iter().zip(&desired.sessions) {
            if self.told.start(&id) {
                let start = pb::StartGameSession {
                    game_session: assignment.game_session.clone(),
                    initial_player_sessions: assignment.player_sessions,
                    state_version: desired.version,
                };
                self.send(response("", Tell::StartGameSession(start))).await;
            }
            // Asked to end one of its sessions: the process must end it (EndGameSession) before the deadline.
            let terminating = hosted.session.status == Some(GameSessionStatus::Terminating);
            if terminating && self.told.end(&id) {
                let update = pb::UpdateGameSession {
                    game_session: assignment.game_session,
                    reason: pb::GameSessionUpdateReason::TerminationRequested as i32,
                    termination_deadline: hosted.session.termination_deadline_ms.map(timestamp),
                    state_version: desired.version,
                };
                self.send(response("", Tell::UpdateGameSession(update))).await;
            }
        }
        if let Some(terminate) = terminate_process(desired)
            && self.told.terminate(terminate.force)
        {
            self.send(response("", Tell::TerminateProcess(terminate))).await;
        }
        self.told.settle(desired);
        Flow::Continue
    }

    async fn handle(&mut self, message: pb::AttachRequest) -> Flow {
        let id = message.request_id;
        if let Err(status) = check_request_id(&id) {
            return Flow::End(Some(status));
        }
        let Some(kind) = message.kind else {
            return Flow::End(Some(invalid(
                "kind",
                format!("message {id:?} has none: set exactly one"),
            )));
        };
        match kind {
            Ask::Heartbeat(heartbeat) => self.heartbeat(id, heartbeat).await,
            // Any other request is rare beside heartbeats, and its future (a store call's) is large: boxed, as the
            // commands' are (serve), it takes room only while it runs rather than in every stream's task for the
            // stream's whole life. A stream's task measured 7,024 bytes with both inline, 3,832 with both boxed.
            kind => Box::pin(self.request(id, kind)).await,
        }
    }

    /// Answers a request other than a heartbeat (which `handle` serves itself; one here is served the same way).
    async fn request(&mut self, id: String, kind: Ask) -> Flow {
        let answer = match kind {
            Ask::RegisterProcess(_) => {
                return Flow::End(Some(Status::failed_precondition(
                    "register_process is only the first message of a stream; this one is registered",
                )));
            }
            Ask::Heartbeat(heartbeat) => return self.heartbeat(id, heartbeat).await,
            Ask::Ready(ready) => match check_ready(&ready) {
                Err(status) => refusal(&id, &status),
                Ok(endpoint) => {
                    let endpoint = endpoint.as_ref().map(|(endpoint, connection_info)| LateEndpoint {
                        ip_address: &endpoint.ip_address,
                        dns_name: &endpoint.dns_name,
                        port: endpoint.port,
                        connection_info,
                    });
                    match store::ready(&self.context.store, &self.process(), endpoint.as_ref()).await {
                        Ok(Some(_)) => reply(&id, Code::Ok, "", None),
                        Ok(None) => {
                            return Flow::End(Some(Status::failed_precondition("this process was declared lost")));
                        }
                        Err(err) => reply(&id, Code::Unavailable, err.to_string(), None),
                    }
                }
            },
            Ask::ActivateGameSession(activate) => self.activate(&id, &activate.game_session_id).await,
            Ask::ProcessEnding(ending) => {
                return match berth_store::endings::process_ending(&self.context.store, &self.process(), &ending.reason)
                    .await
                {
                    Ok(true) => {
                        self.send(reply(&id, Code::Ok, "", None)).await;
                        Flow::End(None)
                    }
                    Ok(false) => Flow::End(Some(Status::failed_precondition(
                        "this registration is not the live one of its game server",
                    ))),
                    Err(err) => {
                        self.send(reply(&id, Code::Unavailable, err.to_string(), None)).await;
                        Flow::Continue
                    }
                };
            }
            Ask::GetTerminationTime(_) => match self.desired().await {
                Ok(Some(Desired {
                    termination: Some(termination),
                    ..
                })) => {
                    let time = pb::TerminationTime {
                        termination_time: Some(timestamp(termination.deadline_ms)),
                    };
                    reply(&id, Code::Ok, "", Some(pb::reply::Result::TerminationTime(time)))
                }
                Ok(_) => {
                    let none = pb::TerminationTime { termination_time: None };
                    reply(&id, Code::Ok, "", Some(pb::reply::Result::TerminationTime(none)))
                }
                Err(status) => refusal(&id, &status),
            },
            Ask::DescribeServer(_) => self.describe(&id).await,
            Ask::UpdateServer(update) => self.update(&id, update).await,
            // The stream takes these in runs (take); one that reaches here is a run of its own.
            kind @ (Ask::AcceptPlayerSession(_)
            | Ask::RemovePlayerSession(_)
            | Ask::EndGameSession(_)
            | Ask::RejectGameSession(_)) => {
                let message = pb::AttachRequest {
                    request_id: id,
                    kind: Some(kind),
                };
                return self.change(vec![message]).await;
            }
            Ask::UpdatePlayerSessionCreationPolicy(update) => self.update_policy(&id, update).await,
            Ask::DescribePlayerSessions(describe) => self.describe_players(&id, describe).await,
            Ask::Reserve(reserve) => self.reserve(&id, reserve).await,
        };
        self.send(answer).await;
        Flow::Continue
    }

    async fn heartbeat(&mut self, request_id: String, heartbeat: pb::Heartbeat) -> Flow {
        let health = heartbeat.health();
        if let Err(status) = check_heartbeat(&heartbeat) {
            self.send(refusal(&request_id, &status)).await;
            return Flow::Continue;
        }
        let game_state = GameState::from_proto(heartbeat.game_state()).map_or("", GameState::as_str);
        let players = u32::try_from(heartbeat.connected_player_ids.len()).unwrap_or(u32::MAX);
        self.reported = Some(Reported {
            healthy: health == pb::ProcessHealth::Healthy,
            game_state: heartbeat.game_state,
            players: heartbeat.connected_player_ids,
        });
        let beat = Beat {
            fleet_id: self.fleet_id.clone(),
            heartbeat: store::Heartbeat {
                game_server_id: self.game_server_id.clone(),
                registration_id: self.registration_id.clone(),
                attach: self.attach,
                healthy: health == pb::ProcessHealth::Healthy,
                game_state,
                players,
            },
            request_id,
            sequence: heartbeat.sequence,
            applied: heartbeat.applied_state_version,
            told: self.told_settings,
            answers: self.out.clone(),
            commands: self.commands.clone(),
            received: Instant::now(),
            answered: false,
        };
        if self.context.heartbeats.send(beat).await.is_err() {
            return Flow::End(Some(Status::unavailable(
                "this replica is shutting down; reconnect and resume",
            )));
        }
        Flow::Continue
    }
}
