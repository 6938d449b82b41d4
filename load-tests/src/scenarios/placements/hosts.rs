//! The game servers placements land on: SDK processes on hand-spoken streams to the health replica, each hosting
//! one game session at a time. A process activates each session it is given (the StartGameSession push, or a
//! desired state that lists it ACTIVATING, whichever comes first), lets each player reserved with it in
//! (AcceptPlayerSession, one call a player, as a server does when the player connects), plays a short match, lets
//! each player go (RemovePlayerSession) and ends the session (EndGameSession), which frees it for the next one, and
//! heartbeats at its fleet's period meanwhile, reporting the desired-state version it has acted on.
//!
//! Matches last [`MATCH_LENGTH`], far shorter than real ones, so that a fleet of thousands can carry thousands of
//! placements a second: what a placement costs the control plane does not depend on how long its match lasts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_proto::health::v1::attach_response::Kind as Tell;
use berth_proto::health::v1::sdk_service_client::SdkServiceClient;
use berth_proto::health::v1::{self as pb, AttachResponse};
use berth_proto::session::v1::{GameSession, GameSessionStatus, PlayerSession};
use tokio::time::MissedTickBehavior;
use tonic::Code;
use tonic::transport::Channel;

use super::ledger::{Ledger, Load};
use crate::driver::Outcome;
use crate::fleet;
use crate::report::Tally;
use crate::sdk_stream::{self, Attaching, Conversation, Say};

/// How long a process hosts a session between its activation and its end.
pub const MATCH_LENGTH: Duration = Duration::from_millis(250);

/// What the processes share with the run.
pub struct Hosts {
    pub attaching: Attaching,
    ledger: Arc<Ledger>,
    /// Requests of the processes that were refused, and streams that broke: none should be.
    failures: Mutex<Tally>,
    /// Game sessions activated, in all.
    activated: AtomicU64,
    /// Game sessions ended by the processes, in all.
    ended: AtomicU64,
}

impl Hosts {
    /// `servers` processes, `concurrency` of them attaching at once, timing their sessions against `ledger`.
    pub fn new(servers: u64, concurrency: u16, ledger: Arc<Ledger>) -> Hosts {
        Hosts {
            attaching: Attaching::new(servers, concurrency),
            ledger,
            failures: Mutex::default(),
            activated: AtomicU64::new(0),
            ended: AtomicU64::new(0),
        }
    }

    fn failed(&self, code: Code) {
        self.failures
            .lock()
            .expect("failures lock")
            .record(Duration::ZERO, Err(code));
    }

    /// What went wrong on the processes' streams, by code, if anything did.
    pub fn failures(&self) -> Option<String> {
        let errors = self.failures.lock().expect("failures lock").errors();
        (!errors.is_empty()).then(|| format!("the SDK processes were refused or cut off: {errors:?}"))
    }

    /// Game sessions the processes have activated so far.
    pub fn activated(&self) -> u64 {
        self.activated.load(Ordering::Relaxed)
    }

    /// Game sessions the processes have ended so far (the end answered), their players let go first.
    pub fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }
}

/// Where process `index` runs: its fleet and location, taken in turn so that every fleet has as many processes
/// in each location.
pub fn fleet_and_location(index: u64) -> (String, &'static str) {
    let locations = fleet::LOCATIONS.len() as u64;
    let location = fleet::LOCATIONS[((index / super::FLEETS) % locations) as usize];
    (super::fleet_id(index % super::FLEETS), location)
}

/// A game session a process hosts.
struct Hosting {
    /// Which of the process's sessions it is, from 1: its requests' ids.
    number: u64,
    game_session_id: String,
    /// The player sessions reserved with it.
    players: Vec<String>,
    /// The open-loop placement it was made for, and when that placement's start was due.
    timed: Option<(Arc<Load>, u64, Instant)>,
    /// When its match ends, once it is ACTIVE.
    ends_at: Option<tokio::time::Instant>,
}

/// What a process knows of its sessions.
struct Host {
    hosts: Arc<Hosts>,
    hosting: Option<Hosting>,
    /// The session it ended last: a push of it repeated late is not a new session.
    ended: Option<String>,
    sessions: u64,
    /// The desired-state version acted on, reported with each heartbeat.
    applied: u64,
}

impl Host {
    /// Takes on `session`, with the player sessions reserved with it, unless it is one already hosted or ended: the
    /// process activates it.
    async fn offered(
        &mut self,
        conversation: &Conversation,
        session: GameSession,
        players: &[PlayerSession],
    ) -> Outcome {
        let id = session.game_session_id;
        let known = self
            .hosting
            .as_ref()
            .is_some_and(|hosting| hosting.game_session_id == id);
        if known || self.ended.as_deref() == Some(id.as_str()) {
            return Ok(());
        }
        let timed = self
            .hosts
            .ledger
            .placement(&session.placement_id)
            .filter(|(load, _)| load.stages.is_some())
            .and_then(|(load, index)| Some((load.clone(), index, load.due(index)?)));
        if let Some((load, index, due)) = &timed
            && let Some(stages) = &load.stages
        {
            stages.pushed.record(*index, due.elapsed(), Ok(()));
        }
        self.sessions += 1;
        self.hosting = Some(Hosting {
            number: self.sessions,
            game_session_id: id.clone(),
            players: players.iter().map(|p| p.player_session_id.clone()).collect(),
            timed,
            ends_at: None,
        });
        let activate = Say::Activate {
            number: self.sessions,
            game_session_id: id,
        };
        conversation.say(activate).await
    }

    /// The answer to one of the process's requests; once a session is activated, its players are let in.
    async fn answered(&mut self, conversation: &Conversation, request_id: &str, reply: &pb::Reply) -> Outcome {
        if reply.code != Code::Ok as i32 {
            self.hosts.failed(Code::from(reply.code));
        } else if request_id.starts_with("end-") {
            self.hosts.ended.fetch_add(1, Ordering::Relaxed);
        }
        let Some(number) = request_id
            .strip_prefix("activate-")
            .and_then(|number| number.parse::<u64>().ok())
        else {
            return Ok(());
        };
        let Some(hosting) = self.hosting.as_mut().filter(|hosting| hosting.number == number) else {
            return Ok(());
        };
        if reply.code != Code::Ok as i32 {
            self.hosting = None;
            return Ok(());
        }
        self.hosts.activated.fetch_add(1, Ordering::Relaxed);
        hosting.ends_at = Some(tokio::time::Instant::now() + MATCH_LENGTH);
        if let Some((load, index, due)) = &hosting.timed
            && let Some(stages) = &load.stages
        {
            stages.activated.record(*index, due.elapsed(), Ok(()));
        }
        for (player, player_session_id) in hosting.players.iter().enumerate() {
            let accept = Say::Accept {
                number,
                player,
                game_session_id: hosting.game_session_id.clone(),
                player_session_id: player_session_id.clone(),
            };
            conversation.say(accept).await?;
        }
        Ok(())
    }

    /// Acts on a message from the service.
    async fn heard(&mut self, conversation: &Conversation, message: AttachResponse) -> Outcome {
        match message.kind {
            Some(Tell::StartGameSession(start)) => {
                self.applied = self.applied.max(start.state_version);
                if let Some(session) = start.game_session {
                    self.offered(conversation, session, &start.initial_player_sessions)
                        .await?;
                }
            }
            Some(Tell::HeartbeatAck(ack)) => {
                if let Some(desired) = ack.desired_state {
                    self.applied = self.applied.max(desired.version);
                    let starting = desired.game_sessions.into_iter().filter_map(|assignment| {
                        let session = assignment.game_session?;
                        (session.status == GameSessionStatus::Activating as i32)
                            .then_some((session, assignment.player_sessions))
                    });
                    for (session, players) in starting {
                        self.offered(conversation, session, &players).await?;
                    }
                }
            }
            Some(Tell::Reply(reply)) => self.answered(conversation, &message.request_id, &reply).await?,
            _ => {}
        }
        Ok(())
    }

    /// Ends the match of the session hosted: each player leaves (RemovePlayerSession), then EndGameSession, and the
    /// process is free.
    async fn end_match(&mut self, conversation: &Conversation) -> Outcome {
        let Some(hosting) = self.hosting.take() else {
            return Ok(());
        };
        self.ended = Some(hosting.game_session_id.clone());
        for (player, player_session_id) in hosting.players.into_iter().enumerate() {
            let remove = Say::Remove {
                number: hosting.number,
                player,
                game_session_id: hosting.game_session_id.clone(),
                player_session_id,
            };
            conversation.say(remove).await?;
        }
        let end = Say::End {
            number: hosting.number,
            game_session_id: hosting.game_session_id,
        };
        conversation.say(end).await
    }

    fn match_ends_at(&self) -> Option<tokio::time::Instant> {
        self.hosting.as_ref().and_then(|hosting| hosting.ends_at)
    }
}

/// Process `index`, in fleet `fleet_id` at `location`: attaches through `client`, then hosts what it is given until
/// its task is aborted or its stream fails.
pub async fn game_server(
    index: u64,
    fleet_id: String,
    location: &'static str,
    client: SdkServiceClient<Channel>,
    hosts: Arc<Hosts>,
) {
    let Ok(mut conversation) = hosts.attaching.open(client, &fleet_id, location, index).await else {
        return;
    };
    let period = Duration::from_millis(u64::from(fleet::QUIET.0));
    let first = tokio::time::Instant::now() + sdk_stream::phase(index, period);
    let mut heartbeats = tokio::time::interval_at(first, period);
    heartbeats.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut host = Host {
        hosts: hosts.clone(),
        hosting: None,
        ended: None,
        sessions: 0,
        applied: 0,
    };
    loop {
        let match_over = async {
            match host.match_ends_at() {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let acted = tokio::select! {
            message = conversation.hear() => match message {
                Ok(message) => host.heard(&conversation, message).await,
                Err(code) => Err(code),
            },
            _ = heartbeats.tick() => {
                let heartbeat = Say::Heartbeat {
                    sequence: conversation.next_sequence(),
                    applied_state_version: host.applied,
                };
                conversation.say(heartbeat).await
            }
            () = match_over => host.end_match(&conversation).await,
        };
        if let Err(code) = acted {
            hosts.failed(code);
            return;
        }
    }
}
