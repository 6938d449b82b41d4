//! The SDK stream, spoken by hand as the health service's stream tests speak it, so that a scenario measures the
//! protocol and not an SDK: opening a game-server process's stream with its own token, registering and saying
//! ready, then whatever the scenario's processes say and hear. Scenarios that simulate thousands of processes
//! (heartbeats, placements) share this, and the way they spread the streams over a few HTTP/2 connections.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use berth_proto::common::v1::Endpoint as GameEndpoint;
use berth_proto::health::v1::sdk_service_client::SdkServiceClient;
use berth_proto::health::v1::{
    self as pb, AttachRequest, AttachResponse, attach_request::Kind as Ask, attach_response::Kind as Tell,
};
use berth_runtime::auth::Role;
use berth_testkit::token;
use tokio::sync::{Notify, Semaphore, mpsc};
// tonic's own re-export, so that the bench needs no stream crate of its own to build a request stream.
use tonic::codegen::tokio_stream::{self, StreamExt, wrappers::ReceiverStream};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Streaming};

use crate::driver::{CALL_DEADLINE, Outcome};
use crate::report::{Line, Shards};
use crate::{Failure, fleet};

/// What the bench's processes say they are, in their registration and in what the floors store for them.
pub const SDK_VERSION: &str = "berth-bench/0.1";

/// Most streams the bench puts on one HTTP/2 connection. h2 budgets the small DATA frames a connection may hold
/// unread (half its window: some 2,300 heartbeats on the replica's 1 MiB) and closes the connection with
/// ENHANCE_YOUR_CALM past that. A real process has a connection of its own and never comes near; thousands of
/// processes on one connection reach it in the first hiccup. With one message in flight per stream, 1,000 streams
/// stay under half the budget.
const STREAMS_PER_CONNECTION: u64 = 1_000;

/// The connections `servers` streams need: `at_least`, raised to one per [`STREAMS_PER_CONNECTION`].
pub fn connections(servers: u64, at_least: u16) -> u16 {
    let needed = u16::try_from(servers.div_ceil(STREAMS_PER_CONNECTION)).unwrap_or(u16::MAX);
    at_least.max(needed)
}

/// Opens `connections` connections to the health replica at `endpoint`, a client for each.
pub async fn connect(endpoint: &str, connections: u16) -> Result<Vec<SdkServiceClient<Channel>>, Failure> {
    let endpoint = Endpoint::from_shared(endpoint.to_owned())?.tcp_nodelay(true);
    let mut clients = Vec::with_capacity(usize::from(connections));
    for _ in 0..connections {
        clients.push(SdkServiceClient::new(endpoint.connect().await?));
    }
    Ok(clients)
}

/// Where in a period of `period` server `index` acts: spread evenly over it, as processes started at unrelated
/// moments are, and the same from run to run (a multiplicative hash rather than a random number).
pub fn phase(index: u64, period: Duration) -> Duration {
    let fraction = (index.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1_u64 << 53) as f64;
    period.mul_f64(fraction)
}

/// What a process says on its stream after registering. Kept small because every stream's queue holds a block of
/// them; the request is built as it goes out.
pub enum Say {
    Ready,
    /// The heartbeat numbered `sequence`, reporting the desired-state version acted on.
    Heartbeat {
        sequence: u64,
        applied_state_version: u64,
    },
    /// ActivateGameSession of the process's `number`th game session.
    Activate {
        number: u64,
        game_session_id: String,
    },
    /// EndGameSession of the process's `number`th game session.
    End {
        number: u64,
        game_session_id: String,
    },
    /// AcceptPlayerSession of the `player`th player of the process's `number`th game session.
    Accept {
        number: u64,
        player: usize,
        game_session_id: String,
        player_session_id: String,
    },
    /// RemovePlayerSession of the same.
    Remove {
        number: u64,
        player: usize,
        game_session_id: String,
        player_session_id: String,
    },
}

impl Say {
    /// Its request id: unique within a registration, and telling the kind of request its reply answers.
    pub fn request_id(&self) -> String {
        match self {
            Say::Ready => "ready".to_owned(),
            Say::Heartbeat { sequence, .. } => format!("hb-{sequence}"),
            Say::Activate { number, .. } => format!("activate-{number}"),
            Say::End { number, .. } => format!("end-{number}"),
            Say::Accept { number, player, .. } => format!("accept-{number}-{player}"),
            Say::Remove { number, player, .. } => format!("remove-{number}-{player}"),
        }
    }

    fn request(self) -> AttachRequest {
        let request_id = self.request_id();
        let kind = match self {
            Say::Ready => Ask::Ready(pb::ProcessReady::default()),
            Say::Heartbeat {
                sequence,
                applied_state_version,
            } => Ask::Heartbeat(pb::Heartbeat {
                sequence,
                health: pb::ProcessHealth::Healthy as i32,
                game_state: pb::GameState::StandingBy as i32,
                connected_player_ids: Vec::new(),
                applied_state_version,
            }),
            Say::Activate { game_session_id, .. } => {
                Ask::ActivateGameSession(pb::ActivateGameSession { game_session_id })
            }
            Say::End { game_session_id, .. } => Ask::EndGameSession(pb::EndGameSession { game_session_id }),
            Say::Accept {
                game_session_id,
                player_session_id,
                ..
            } => Ask::AcceptPlayerSession(pb::AcceptPlayerSession {
                game_session_id,
                player_session_id,
            }),
            Say::Remove {
                game_session_id,
                player_session_id,
                ..
            } => Ask::RemovePlayerSession(pb::RemovePlayerSession {
                game_session_id,
                player_session_id,
            }),
        };
        AttachRequest {
            request_id,
            kind: Some(kind),
        }
    }
}

/// The register_process of `server` in `fleet_id`, at `location`, hosting one game session at a time; resuming
/// registration `resume` unless it is empty, as the process's try number `attempt`.
fn registration(
    server: &fleet::Server,
    fleet_id: &str,
    location: &str,
    resume: &str,
    attempt: u32,
) -> pb::RegisterProcess {
    pb::RegisterProcess {
        fleet_id: fleet_id.into(),
        game_server_id: server.id.clone(),
        instance_id: server.instance.clone(),
        location: location.into(),
        endpoint: Some(GameEndpoint {
            ip_address: server.ip.clone(),
            dns_name: String::new(),
            port: server.port,
        }),
        max_concurrent_game_sessions: 1,
        sdk_version: SDK_VERSION.into(),
        resume_registration_id: resume.into(),
        attempt,
        ..Default::default()
    }
}

/// The `authorization` value of a game server's stream: its own token, scoped to its fleet and id, as the
/// provisioner hands one to each process. Many streams share a connection here, so it travels per stream.
fn bearer(fleet_id: &str, game_server_id: &str) -> MetadataValue<Ascii> {
    format!("Bearer {}", token(Role::GameServer, Some((fleet_id, game_server_id))))
        .parse()
        .expect("a signed token is ASCII")
}

/// One process's stream.
pub struct Conversation {
    says: mpsc::Sender<Say>,
    hears: Streaming<AttachResponse>,
    sequence: u64,
    registration_id: String,
    /// Whether the stream broke (or ended): a refused request leaves it open.
    broken: bool,
}

impl Conversation {
    /// Opens the stream of server `index` of `fleet_id` at `location`: register_process, then ready, each
    /// answered.
    pub async fn open(
        client: SdkServiceClient<Channel>,
        fleet_id: &str,
        location: &str,
        index: u64,
    ) -> Result<Conversation, Code> {
        let mut conversation = Conversation::register(client, fleet_id, location, index, "", 1).await?;
        match conversation.ask(Say::Ready).await? {
            Tell::Reply(reply) if reply.code == Code::Ok as i32 => Ok(conversation),
            Tell::Reply(reply) => Err(Code::from(reply.code)),
            _ => Err(Code::Internal),
        }
    }

    /// Resumes registration `registration_id` of server `index` over a new stream, as the SDK does when its stream
    /// broke: register_process naming it, answered as a resume (the process stays ready), as the process's try
    /// number `attempt` (its first stream was 1). A registration made afresh instead is `FAILED_PRECONDITION`: the
    /// old one was lost.
    pub async fn resume(
        client: SdkServiceClient<Channel>,
        fleet_id: &str,
        location: &str,
        index: u64,
        registration_id: &str,
        attempt: u32,
    ) -> Result<Conversation, Code> {
        Conversation::register(client, fleet_id, location, index, registration_id, attempt).await
    }

    async fn register(
        mut client: SdkServiceClient<Channel>,
        fleet_id: &str,
        location: &str,
        index: u64,
        resume: &str,
        attempt: u32,
    ) -> Result<Conversation, Code> {
        let server = fleet::server(index);
        // One message waits at most: a process says little before it hears the answer.
        let (says, said) = mpsc::channel(1);
        let register = AttachRequest {
            request_id: "register".into(),
            kind: Some(Ask::RegisterProcess(registration(
                &server, fleet_id, location, resume, attempt,
            ))),
        };
        let outbound = tokio_stream::once(register).chain(ReceiverStream::new(said).map(Say::request));
        let mut request = Request::new(outbound);
        request
            .metadata_mut()
            .insert("authorization", bearer(fleet_id, &server.id));
        let hears = client
            .attach(request)
            .await
            .map_err(|status| status.code())?
            .into_inner();
        let mut conversation = Conversation {
            says,
            hears,
            sequence: 0,
            registration_id: String::new(),
            broken: false,
        };
        match conversation.answer("register").await? {
            Tell::Registered(registered) if registered.resumed || resume.is_empty() => {
                conversation.registration_id = registered.registration_id;
                Ok(conversation)
            }
            Tell::Registered(_) => Err(Code::FailedPrecondition),
            _ => Err(Code::Internal),
        }
    }

    /// The registration this stream carries, for a resume.
    pub fn registration_id(&self) -> &str {
        &self.registration_id
    }

    /// The number of the next heartbeat, counting it as sent.
    pub fn next_sequence(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence
    }

    /// Sends the next heartbeat and waits for its ack, passing over anything else.
    pub async fn heartbeat(&mut self) -> Outcome {
        let sequence = self.next_sequence();
        let heartbeat = Say::Heartbeat {
            sequence,
            applied_state_version: 0,
        };
        match self.ask(heartbeat).await? {
            Tell::HeartbeatAck(_) => Ok(()),
            Tell::Reply(reply) if reply.code != Code::Ok as i32 => Err(Code::from(reply.code)),
            _ => Err(Code::Internal),
        }
    }

    /// Sends `say` without waiting for its answer.
    pub async fn say(&self, say: Say) -> Outcome {
        self.says.send(say).await.map_err(|_| Code::Unavailable)
    }

    /// The next message from the service: an answer or a push.
    pub async fn hear(&mut self) -> Result<AttachResponse, Code> {
        let heard = match self.hears.message().await {
            Ok(Some(message)) => Ok(message),
            // The stream ended without a status: for a process, as good as a broken connection.
            Ok(None) => Err(Code::Unavailable),
            Err(status) => Err(status.code()),
        };
        self.broken = heard.is_err();
        heard
    }

    /// Whether the stream broke, so that the process must open another; after a refused request it goes on, as
    /// the SDK's does.
    pub fn broken(&self) -> bool {
        self.broken
    }

    async fn ask(&mut self, say: Say) -> Result<Tell, Code> {
        let request_id = say.request_id();
        self.say(say).await?;
        self.answer(&request_id).await
    }

    /// Waits for the answer to `request_id`, passing over pushes (a process that asks this way is never given
    /// work).
    async fn answer(&mut self, request_id: &str) -> Result<Tell, Code> {
        loop {
            let message = self.hear().await?;
            if message.request_id == request_id {
                return message.kind.ok_or(Code::Internal);
            }
        }
    }
}

/// A fleet of processes coming up: a few opening their streams at a time, as a fleet comes up over time and not
/// in one instant, each timed from opening its stream to the answer to its ready.
pub struct Attaching {
    servers: u64,
    turns: Semaphore,
    tally: Shards,
    /// Servers done attaching, well or not; the last one notifies `all_attached`.
    attached: AtomicU64,
    all_attached: Notify,
    started: Instant,
}

impl Attaching {
    /// `servers` processes, `concurrency` of them opening at once.
    pub fn new(servers: u64, concurrency: u16) -> Attaching {
        Attaching {
            servers,
            turns: Semaphore::new(usize::from(concurrency)),
            tally: Shards::default(),
            attached: AtomicU64::new(0),
            all_attached: Notify::new(),
            started: Instant::now(),
        }
    }

    /// Opens the stream of server `index` of `fleet_id` at `location` when its turn comes (see
    /// [`Conversation::open`]), and counts it.
    pub async fn open(
        &self,
        client: SdkServiceClient<Channel>,
        fleet_id: &str,
        location: &str,
        index: u64,
    ) -> Result<Conversation, Code> {
        let opened = {
            let _turn = self.turns.acquire().await.expect("the semaphore is never closed");
            let sent = Instant::now();
            let opened = tokio::time::timeout(CALL_DEADLINE, Conversation::open(client, fleet_id, location, index))
                .await
                .unwrap_or(Err(Code::DeadlineExceeded));
            let outcome = opened.as_ref().map(drop).map_err(|code| *code);
            self.tally.record(index, sent.elapsed(), outcome);
            opened
        };
        if self.attached.fetch_add(1, Ordering::AcqRel) + 1 == self.servers {
            self.all_attached.notify_one();
        }
        opened
    }

    /// Once every server has attached or failed to: the line `name` of their attaches.
    pub async fn done(&self, name: &str) -> Line {
        self.all_attached.notified().await;
        Line::new(name, &self.tally.merged(), self.started.elapsed())
    }
}
