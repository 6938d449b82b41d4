//! What a game server does to the sessions it hosts, over its SDK stream: activate, reject and end a game session,
//! open or close it to players, let players in and out, and read its player sessions. The health service carries
//! the stream and calls these; their rules are the session service's, so that a session's life has one owner. A
//! process acts only on sessions it hosts: a session of another fleet is unknown to it, one of another server of
//! its fleet is refused. Refusals are statuses whose field violations name the request's fields bare
//! (`game_session_id`), for the stream to place under the request's own name.

use std::collections::HashSet;

use berth_domain::game_session::check::{
    check_describe_player_sessions, check_game_session_id, check_player_session_id,
};
use berth_domain::game_session::{GameSessionRecord, PlayerSessionRecord, PlayerSessionStatus, fleet_of};
use berth_domain::validate::{Violations, invalid};
use berth_proto::health::v1 as sdk;
use berth_proto::session::v1 as pb;
use berth_store::Store;
use berth_store::processes::Desired;
use berth_store::sessions::{
    self as store, Accepted, Activated, Changed, GameSessionChange, HostedChange, Page, PlayerSource, Removed,
    ServerEnded, Updated,
};
use tonic::Status;

use crate::player_sessions::{described, page_of, page_of_one};

/// The sessions one process hosts, as that process reaches them.
#[derive(Clone, Copy)]
pub struct Hosted<'a> {
    pub store: &'a Store,
    pub fleet_id: &'a str,
    pub game_server_id: &'a str,
}

fn no_game_session(game_session_id: &str) -> Status {
    Status::not_found(format!("no game session {game_session_id:?}"))
}

/// A player session this process named that is not in the game session it named.
fn not_in_session(game_session_id: &str, player_session_id: &str) -> Status {
    Status::not_found(format!(
        "no player session {player_session_id:?} in game session {game_session_id:?}"
    ))
}

/// A player session of a game session another server hosts: this one must not let that player in or out.
fn not_yours(player_session_id: &str) -> Status {
    Status::permission_denied(format!(
        "player session {player_session_id:?} is for a game session another server hosts"
    ))
}

/// What a process is answered for a change it made to what it hosts.
#[derive(Debug)]
pub enum HostedAnswer {
    /// The player session accepted or removed, as it now stands.
    Player(Box<PlayerSessionRecord>),
    /// The game session as it ended, and the process's desired state after it when the store knew it whole (it hosts
    /// nothing else).
    Ended(Box<(GameSessionRecord, Option<Desired>)>),
}

/// What a process is answered for a change, from what the store found.
fn answer(change: &HostedChange<'_>, changed: Changed) -> Result<HostedAnswer, Status> {
    let game_session_id = change.game_session_id();
    let player_session_id = change.player_session_id().unwrap_or_default();
    match changed {
        Changed::Accepted(Accepted::Accepted(record)) | Changed::Removed(Removed::Removed(record)) => {
            Ok(HostedAnswer::Player(record))
        }
        Changed::Accepted(Accepted::NotFound) | Changed::Removed(Removed::NotFound) => {
            Err(not_in_session(game_session_id, player_session_id))
        }
        Changed::Accepted(Accepted::NotYours) | Changed::Removed(Removed::NotYours) => {
            Err(not_yours(player_session_id))
        }
        Changed::Accepted(Accepted::NotActive(status)) => Err(Status::failed_precondition(format!(
            "game session {game_session_id:?} is {status}, not ACTIVE"
        ))),
        Changed::Accepted(Accepted::Ended(status)) => Err(Status::failed_precondition(format!(
            "player session {player_session_id:?} is {status}"
        ))),
        Changed::Ended(ServerEnded::Ended(record, process)) => {
            Ok(HostedAnswer::Ended(Box::new((*record, process.desired_state()))))
        }
        Changed::Ended(ServerEnded::NotFound | ServerEnded::NotYours) => Err(no_game_session(game_session_id)),
        Changed::Ended(ServerEnded::WrongState(status)) => Err(Status::failed_precondition(format!(
            "game session {game_session_id:?} is {status}, not ACTIVATING: only a session being started can be \
             rejected"
        ))),
    }
}

impl Hosted<'_> {
    /// Checks ids a process names: well formed (INVALID_ARGUMENT), and of its own fleet (else NOT_FOUND: another
    /// fleet's sessions do not exist for it).
    fn own_ids(&self, game_session_id: &str, player_session_id: Option<&str>) -> Result<(), Status> {
        let mut v = Violations::new();
        check_game_session_id(&mut v, "game_session_id", game_session_id);
        if let Some(player_session_id) = player_session_id {
            check_player_session_id(&mut v, "player_session_id", player_session_id);
        }
        v.into_result()?;
        let foreign = [Some(game_session_id), player_session_id]
            .into_iter()
            .flatten()
            .find(|session_id| fleet_of(session_id) != Some(self.fleet_id));
        match foreign {
            Some(session_id) => Err(Status::not_found(format!("no session {session_id:?}"))),
            None => Ok(()),
        }
    }

    /// ActivateGameSession: ACTIVATING → ACTIVE.
    pub async fn activate(&self, game_session_id: &str) -> Result<GameSessionRecord, Status> {
        self.own_ids(game_session_id, None)?;
        match store::activate_game_session(self.store, self.fleet_id, self.game_server_id, game_session_id).await? {
            Activated::Active(record) => Ok(*record),
            // Another server's session is, to this one, no session at all.
            Activated::NotFound | Activated::NotYours => Err(no_game_session(game_session_id)),
            Activated::Ended(record) => Err(Status::failed_precondition(format!(
                "game session {game_session_id:?} is {} ({}), not ACTIVATING",
                record.status.map_or("unknown", |status| status.as_str()),
                record.status_reason
            ))),
        }
    }

    /// UpdatePlayerSessionCreationPolicy: the session after the change.
    pub async fn set_creation_policy(
        &self,
        update: &sdk::UpdatePlayerSessionCreationPolicy,
    ) -> Result<GameSessionRecord, Status> {
        self.own_ids(&update.game_session_id, None)?;
        let accepts = berth_domain::process::check_creation_policy(update)?;
        let id = update.game_session_id.as_str();
        // The server a session is placed on never changes, so reading it first is as good as checking it inside.
        match self.read(id).await? {
            Some(record) if record.game_server_id == self.game_server_id => {}
            _ => return Err(no_game_session(id)),
        }
        let change = GameSessionChange {
            game_session_id: id,
            accepts_players: Some(accepts),
            properties_max: berth_domain::game_session::check::PROPERTIES_MAX,
            ..Default::default()
        };
        match store::update_game_session(self.store, self.fleet_id, &change).await? {
            Updated::Updated(record, _) => Ok(*record),
            Updated::Ended(status) => Err(Status::failed_precondition(format!("game session {id:?} is {status}"))),
            Updated::NotFound => Err(no_game_session(id)),
            other => Err(Status::internal(format!("a policy change was answered {other:?}"))),
        }
    }

    /// AcceptPlayerSession (RESERVED → ACTIVE), RemovePlayerSession (→ COMPLETED, its slot freed), EndGameSession and
    /// RejectGameSession, as many as the process sent together, each answered apart: those whose ids pass go to Redis
    /// in one round trip and run there in their order.
    /// A change the caller refused already (a field it checks) is answered with its refusal, in its place.
    pub async fn change(&self, changes: &[Result<HostedChange<'_>, Status>]) -> Vec<Result<HostedAnswer, Status>> {
        let checked: Vec<Result<HostedChange, Status>> = changes
            .iter()
            .map(|change| {
                let change = change.clone()?;
                self.own_ids(change.game_session_id(), change.player_session_id())?;
                Ok(change)
            })
            .collect();
        let passed: Vec<HostedChange> = checked
            .iter()
            .filter_map(|change| change.as_ref().ok().copied())
            .collect();
        let answers: Vec<Result<Changed, Status>> =
            match store::change_hosted(self.store, self.fleet_id, self.game_server_id, &passed).await {
                Ok(answers) => answers.into_iter().map(|answer| answer.map_err(Status::from)).collect(),
                Err(err) => {
                    let status = Status::from(err);
                    passed.iter().map(|_| Err(status.clone())).collect()
                }
            };
        let mut answers = answers.into_iter();
        checked
            .into_iter()
            .map(|change| {
                let change = change?;
                let changed = answers
                    .next()
                    .unwrap_or_else(|| Err(Status::internal("a change went unanswered")));
                answer(&change, changed?)
            })
            .collect()
    }

    async fn read(&self, game_session_id: &str) -> Result<Option<GameSessionRecord>, Status> {
        let mut records = store::read_game_sessions(self.store, self.fleet_id, &[game_session_id]).await?;
        Ok(records.pop().flatten())
    }

    /// DescribePlayerSessions, as PlayerSessionService answers it, over the player sessions of game sessions this
    /// process hosts or hosted: any other is, to it, no player session at all.
    pub async fn describe_players(
        &self,
        describe: &pb::DescribePlayerSessionsRequest,
    ) -> Result<pb::DescribePlayerSessionsResponse, Status> {
        use pb::describe_player_sessions_request::Selector;
        let size = check_describe_player_sessions(describe)?;
        let status = PlayerSessionStatus::from_proto(describe.status_filter()).map_or("", PlayerSessionStatus::as_str);
        let not_found = |what: &str, id: &str| Status::not_found(format!("no {what} {id:?}"));
        let token = describe.page_token.as_str();
        let page = match describe.selector.as_ref() {
            Some(Selector::PlayerSessionId(player_session_id)) => {
                let record = match fleet_of(player_session_id) {
                    Some(fleet) if fleet == self.fleet_id => {
                        store::read_player_sessions(self.store, self.fleet_id, &[player_session_id])
                            .await?
                            .pop()
                            .flatten()
                    }
                    _ => None,
                };
                let record = record.ok_or_else(|| not_found("player session", player_session_id))?;
                let record = self
                    .hosted(vec![record])
                    .await?
                    .pop()
                    .ok_or_else(|| not_found("player session", player_session_id))?;
                page_of_one(record, status)
            }
            Some(Selector::GameSessionId(game_session_id)) => {
                match self.read(game_session_id).await? {
                    Some(record)
                        if fleet_of(game_session_id) == Some(self.fleet_id)
                            && record.game_server_id == self.game_server_id => {}
                    _ => return Err(not_found("game session", game_session_id)),
                }
                let source = PlayerSource::GameSession(game_session_id);
                page_of(self.store, self.fleet_id, source, status, token, size).await?
            }
            Some(Selector::PlayerId(player_id)) => {
                let source = PlayerSource::Player(player_id);
                let page = page_of(self.store, self.fleet_id, source, status, token, size).await?;
                Page {
                    items: self.hosted(page.items).await?,
                    next: page.next,
                }
            }
            None => {
                return Err(invalid(
                    "selector",
                    "must be set: player_session_id, game_session_id or player_id",
                ));
            }
        };
        Ok(described(page))
    }

    /// The player sessions, of those given, whose game session this process hosts or hosted.
    async fn hosted(&self, records: Vec<PlayerSessionRecord>) -> Result<Vec<PlayerSessionRecord>, Status> {
        let mut ids: Vec<&str> = records.iter().map(|record| record.game_session_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let sessions = store::read_game_sessions(self.store, self.fleet_id, &ids).await?;
        let mine: HashSet<&str> = sessions
            .iter()
            .flatten()
            .filter(|session| session.game_server_id == self.game_server_id)
            .map(|session| session.game_session_id.as_str())
            .collect();
        Ok(records
            .into_iter()
            .filter(|record| mine.contains(record.game_session_id.as_str()))
            .collect())
    }
}
