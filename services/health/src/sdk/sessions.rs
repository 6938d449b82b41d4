//! What a process does to its game sessions and player sessions over its stream: activate, reject and end a game
//! session, open or close it to players, let players in and out, and read its player sessions. A process acts
//! only on sessions it hosts: a session of another fleet is unknown to it, one of another server of its fleet is
//! refused.

use std::collections::HashSet;

use berth_domain::game_session::check::{
    check_describe_player_sessions, check_game_session_id, check_player_session_id,
};
use berth_domain::game_session::{GameSessionRecord, PlayerSessionRecord, PlayerSessionStatus, fleet_of};
use berth_domain::page_token::{digest, issue, redeem};
use berth_domain::process::check_creation_policy;
use berth_domain::validate::{Violations, invalid};
use berth_proto::health::v1::{self as pb, reply::Result as Answer};
use berth_proto::session::v1 as session;
use berth_store::sessions::{
    self as store, Accepted, Activated, GameSessionChange, Page, PlayerSource, Removed, ServerEnded, Updated,
};
use tonic::{Code, Status};

use super::{ProcessStream, refusal, refusal_of, reply};

type Reply = pb::AttachResponse;

fn failed(id: &str, code: Code, message: impl Into<String>) -> Reply {
    reply(id, code, message, None)
}

fn unavailable(id: &str, err: impl std::fmt::Display) -> Reply {
    failed(id, Code::Unavailable, err.to_string())
}

/// A player session this process named that is not in the game session it named.
fn not_in_session(id: &str, game_session_id: &str, player_session_id: &str) -> Reply {
    failed(
        id,
        Code::NotFound,
        format!("no player session {player_session_id:?} in game session {game_session_id:?}"),
    )
}

/// A player session of a game session another server hosts: this one must not let that player in or out.
fn not_yours(id: &str, player_session_id: &str) -> Reply {
    failed(
        id,
        Code::PermissionDenied,
        format!("player session {player_session_id:?} is for a game session another server hosts"),
    )
}

fn game_session(id: &str, record: GameSessionRecord) -> Reply {
    reply(id, Code::Ok, "", Some(Answer::GameSession(record.into())))
}

impl ProcessStream {
    /// Checks ids a process names: well formed (INVALID_ARGUMENT), and of its own fleet (else NOT_FOUND: another
    /// fleet's sessions do not exist for it).
    /// `kind` names the request, the first part of a field's path.
    fn own_ids(
        &self,
        id: &str,
        kind: &str,
        game_session_id: &str,
        player_session_id: Option<&str>,
    ) -> Result<(), Box<Reply>> {
        let mut v = Violations::new();
        check_game_session_id(&mut v, "game_session_id", game_session_id);
        if let Some(player_session_id) = player_session_id {
            check_player_session_id(&mut v, "player_session_id", player_session_id);
        }
        if let Err(status) = v.into_result() {
            return Err(Box::new(refusal_of(id, kind, &status)));
        }
        let foreign = [Some(game_session_id), player_session_id]
            .into_iter()
            .flatten()
            .find(|session_id| fleet_of(session_id) != Some(&*self.fleet_id));
        match foreign {
            Some(session_id) => Err(Box::new(failed(
                id,
                Code::NotFound,
                format!("no session {session_id:?}"),
            ))),
            None => Ok(()),
        }
    }

    pub(super) async fn activate(&mut self, id: &str, game_session_id: &str) -> Reply {
        if let Err(answer) = self.own_ids(id, "activate_game_session", game_session_id, None) {
            return *answer;
        }
        let activated = store::activate_game_session(
            &self.context.store,
            &self.fleet_id,
            &self.game_server_id,
            game_session_id,
        )
        .await;
        match activated {
            Ok(Activated::Active(record)) => game_session(id, *record),
            // Another server's session is, to this one, no session at all.
            Ok(Activated::NotFound | Activated::NotYours) => {
                failed(id, Code::NotFound, format!("no game session {game_session_id:?}"))
            }
            Ok(Activated::Ended(record)) => failed(
                id,
                Code::FailedPrecondition,
                format!(
                    "game session {game_session_id:?} is {} ({}), not ACTIVATING",
                    record.status.map_or("unknown", |status| status.as_str()),
                    record.status_reason
                ),
            ),
            Err(err) => unavailable(id, err),
        }
    }

    /// EndGameSession (`reject` false) or RejectGameSession.
    pub(super) async fn end_game_session(&mut self, id: &str, game_session_id: &str, reject: bool) -> Reply {
        let kind = if reject {
            "reject_game_session"
        } else {
            "end_game_session"
        };
        if let Err(answer) = self.own_ids(id, kind, game_session_id, None) {
            return *answer;
        }
        let context = &self.context;
        let ended = store::end_game_session(
            &context.store,
            &self.fleet_id,
            &self.game_server_id,
            game_session_id,
            reject,
        )
        .await;
        match ended {
            Ok(ServerEnded::Ended(record, _)) => game_session(id, *record),
            Ok(ServerEnded::NotFound | ServerEnded::NotYours) => {
                failed(id, Code::NotFound, format!("no game session {game_session_id:?}"))
            }
            Ok(ServerEnded::WrongState(status)) => failed(
                id,
                Code::FailedPrecondition,
                format!(
                    "game session {game_session_id:?} is {status}, not ACTIVATING: only a session being started can be rejected"
                ),
            ),
            Err(err) => unavailable(id, err),
        }
    }

    async fn read(&self, game_session_id: &str) -> Result<Option<GameSessionRecord>, berth_store::StoreError> {
        let mut records = store::read_game_sessions(&self.context.store, &self.fleet_id, &[game_session_id]).await?;
        Ok(records.pop().flatten())
    }

    pub(super) async fn update_policy(&mut self, id: &str, update: pb::UpdatePlayerSessionCreationPolicy) -> Reply {
        if let Err(answer) = self.own_ids(
            id,
            "update_player_session_creation_policy",
            &update.game_session_id,
            None,
        ) {
            return *answer;
        }
        let accepts = match check_creation_policy(&update) {
            Ok(accepts) => accepts,
            Err(status) => return refusal(id, &status),
        };
        // The server a session is placed on never changes, so reading it first is as good as checking it inside.
        match self.read(&update.game_session_id).await {
            Ok(Some(record)) if record.game_server_id == *self.game_server_id => {}
            Ok(_) => {
                return failed(
                    id,
                    Code::NotFound,
                    format!("no game session {:?}", update.game_session_id),
                );
            }
            Err(err) => return unavailable(id, err),
        }
        let change = GameSessionChange {
            game_session_id: &update.game_session_id,
            accepts_players: Some(accepts),
            properties_max: berth_domain::game_session::check::PROPERTIES_MAX,
            ..Default::default()
        };
        match store::update_game_session(&self.context.store, &self.fleet_id, &change).await {
            Ok(Updated::Updated(record, _)) => {
                // The process asked for this policy: it is not told of it again. Other changes the record shows
                // (an operator's, announced but not pushed yet) it still is.
                if let Some(shape) = self.shapes.get_mut(&record.game_session_id) {
                    shape.accepts_players = record.accepts_players;
                }
                game_session(id, *record)
            }
            Ok(Updated::Ended(status)) => failed(
                id,
                Code::FailedPrecondition,
                format!("game session {:?} is {status}", update.game_session_id),
            ),
            Ok(Updated::NotFound) => failed(
                id,
                Code::NotFound,
                format!("no game session {:?}", update.game_session_id),
            ),
            Ok(other) => failed(id, Code::Internal, format!("a policy change was answered {other:?}")),
            Err(err) => unavailable(id, err),
        }
    }

    pub(super) async fn accept(&mut self, id: &str, accept: pb::AcceptPlayerSession) -> Reply {
        let (game_session_id, player_session_id) = (&accept.game_session_id, &accept.player_session_id);
        if let Err(answer) = self.own_ids(id, "accept_player_session", game_session_id, Some(player_session_id)) {
            return *answer;
        }
        let context = &self.context;
        let accepted = store::accept_player_session(
            &context.store,
            &self.fleet_id,
            &self.game_server_id,
            game_session_id,
            player_session_id,
        )
        .await;
        match accepted {
            Ok(Accepted::Accepted(record)) => reply(id, Code::Ok, "", Some(Answer::PlayerSession((*record).into()))),
            Ok(Accepted::NotFound) => not_in_session(id, game_session_id, player_session_id),
            Ok(Accepted::NotYours) => not_yours(id, player_session_id),
            Ok(Accepted::NotActive(status)) => failed(
                id,
                Code::FailedPrecondition,
                format!("game session {game_session_id:?} is {status}, not ACTIVE"),
            ),
            Ok(Accepted::Ended(status)) => failed(
                id,
                Code::FailedPrecondition,
                format!("player session {player_session_id:?} is {status}"),
            ),
            Err(err) => unavailable(id, err),
        }
    }

    pub(super) async fn remove(&mut self, id: &str, remove: pb::RemovePlayerSession) -> Reply {
        let (game_session_id, player_session_id) = (&remove.game_session_id, &remove.player_session_id);
        if let Err(answer) = self.own_ids(id, "remove_player_session", game_session_id, Some(player_session_id)) {
            return *answer;
        }
        let context = &self.context;
        let removed = store::remove_player_session(
            &context.store,
            &self.fleet_id,
            &self.game_server_id,
            game_session_id,
            player_session_id,
        )
        .await;
        match removed {
            Ok(Removed::Removed(record)) => reply(id, Code::Ok, "", Some(Answer::PlayerSession((*record).into()))),
            Ok(Removed::NotFound) => not_in_session(id, game_session_id, player_session_id),
            Ok(Removed::NotYours) => not_yours(id, player_session_id),
            Err(err) => unavailable(id, err),
        }
    }

    /// DescribePlayerSessions, as PlayerSessionService answers it, over the player sessions of game sessions this
    /// process hosts or hosted: any other is, to it, no player session at all.
    pub(super) async fn describe_players(
        &mut self,
        id: &str,
        describe: session::DescribePlayerSessionsRequest,
    ) -> Reply {
        match self.player_sessions(&describe).await {
            Ok(page) => {
                let answer = session::DescribePlayerSessionsResponse {
                    player_sessions: page.items.into_iter().map(Into::into).collect(),
                    next_page_token: page.next.unwrap_or_default(),
                };
                reply(id, Code::Ok, "", Some(Answer::PlayerSessions(answer)))
            }
            Err(status) => refusal_of(id, "describe_player_sessions", &status),
        }
    }

    async fn player_sessions(
        &self,
        describe: &session::DescribePlayerSessionsRequest,
    ) -> Result<Page<PlayerSessionRecord>, Status> {
        use session::describe_player_sessions_request::Selector;
        let size = check_describe_player_sessions(describe)?;
        let status = PlayerSessionStatus::from_proto(describe.status_filter()).map_or("", PlayerSessionStatus::as_str);
        let store = &self.context.store;
        let fleet_id = &*self.fleet_id;
        let not_found = |what: &str, id: &str| Status::not_found(format!("no {what} {id:?}"));
        match describe.selector.as_ref() {
            Some(Selector::PlayerSessionId(player_session_id)) => {
                let record = match fleet_of(player_session_id) {
                    Some(fleet) if fleet == fleet_id => {
                        store::read_player_sessions(store, fleet_id, &[player_session_id])
                            .await?
                            .pop()
                            .flatten()
                    }
                    _ => None,
                };
                let record = record.ok_or_else(|| not_found("player session", player_session_id))?;
                let mut mine = self.hosted(vec![record]).await?;
                let record = mine
                    .pop()
                    .ok_or_else(|| not_found("player session", player_session_id))?;
                let shown = status.is_empty() || record.status.map(PlayerSessionStatus::as_str) == Some(status);
                Ok(Page {
                    items: if shown { vec![record] } else { Vec::new() },
                    next: None,
                })
            }
            Some(Selector::GameSessionId(game_session_id)) => {
                match self.read(game_session_id).await? {
                    Some(record)
                        if fleet_of(game_session_id) == Some(fleet_id)
                            && record.game_server_id == *self.game_server_id => {}
                    _ => return Err(not_found("game session", game_session_id)),
                }
                let source = PlayerSource::GameSession(game_session_id);
                self.page(source, status, &describe.page_token, size).await
            }
            Some(Selector::PlayerId(player_id)) => {
                let page = self
                    .page(PlayerSource::Player(player_id), status, &describe.page_token, size)
                    .await?;
                Ok(Page {
                    items: self.hosted(page.items).await?,
                    next: page.next,
                })
            }
            None => Err(invalid(
                "selector",
                "must be set: player_session_id, game_session_id or player_id",
            )),
        }
    }

    /// A page of the fleet's player sessions from `source`, behind a page token bound to the selection.
    async fn page(
        &self,
        source: PlayerSource<'_>,
        status: &str,
        token: &str,
        size: usize,
    ) -> Result<Page<PlayerSessionRecord>, Status> {
        let (kind, id) = match source {
            PlayerSource::GameSession(id) => (b"g", id),
            PlayerSource::Player(id) => (b"p", id),
        };
        let selection = digest(&[kind, id.as_bytes(), status.as_bytes()]);
        let after = redeem(&selection, token)?;
        let page =
            store::list_player_sessions(&self.context.store, &self.fleet_id, source, status, after, size).await?;
        Ok(Page {
            next: page.next.map(|next| issue(&selection, Some(next))),
            items: page.items,
        })
    }

    /// The player sessions, of those given, whose game session this process hosts or hosted.
    async fn hosted(&self, records: Vec<PlayerSessionRecord>) -> Result<Vec<PlayerSessionRecord>, Status> {
        let mut ids: Vec<&str> = records.iter().map(|record| record.game_session_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let sessions = store::read_game_sessions(&self.context.store, &self.fleet_id, &ids).await?;
        let mine: HashSet<&str> = sessions
            .iter()
            .flatten()
            .filter(|session| session.game_server_id == *self.game_server_id)
            .map(|session| session.game_session_id.as_str())
            .collect();
        Ok(records
            .into_iter()
            .filter(|record| mine.contains(record.game_session_id.as_str()))
            .collect())
    }
}
