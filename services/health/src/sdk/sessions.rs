//! A process's requests about the sessions it hosts, carried over its stream to the session service's rules
//! (`berth_session::hosted`): activate, reject and end a game session, open or close it to players, let players in
//! and out, and read its player sessions. Only the stream's side lives here: which process asks, the reply each
//! answer or refusal becomes, and what the stream remembers of a policy the process set itself.

use berth_domain::process::check_request_id;
use berth_proto::health::v1::{self as pb, attach_request::Kind as Ask, reply::Result as Answer};
use berth_proto::session::v1 as session;
use berth_session::hosted::Hosted;
use berth_store::sessions::PlayerChange;
use tonic::{Code, Status};

use super::{Flow, ProcessStream, refusal_of, reply};

type Reply = pb::AttachResponse;

/// The reply to request `id` of kind `kind`: the answer, or the refusal with its fields placed under `kind`.
fn answered(id: &str, kind: &str, answer: Result<Answer, Status>) -> Reply {
    match answer {
        Ok(answer) => reply(id, Code::Ok, "", Some(answer)),
        Err(status) => refusal_of(id, kind, &status),
    }
}

/// A message that accepts or removes a player session, under a well-formed request id: its id, the kind of
/// request (for a refusal's fields), and the change.
pub(super) fn player_change(message: &pb::AttachRequest) -> Option<(&str, &'static str, PlayerChange<'_>)> {
    check_request_id(&message.request_id).ok()?;
    let (kind, change) = match message.kind.as_ref()? {
        Ask::AcceptPlayerSession(accept) => (
            "accept_player_session",
            PlayerChange::Accept {
                game_session_id: &accept.game_session_id,
                player_session_id: &accept.player_session_id,
            },
        ),
        Ask::RemovePlayerSession(remove) => (
            "remove_player_session",
            PlayerChange::Remove {
                game_session_id: &remove.game_session_id,
                player_session_id: &remove.player_session_id,
            },
        ),
        _ => return None,
    };
    Some((&message.request_id, kind, change))
}

impl ProcessStream {
    fn hosted(&self) -> Hosted<'_> {
        Hosted {
            store: &self.context.store,
            fleet_id: &self.fleet_id,
            game_server_id: &self.game_server_id,
        }
    }

    pub(super) async fn activate(&mut self, id: &str, game_session_id: &str) -> Reply {
        let activated = self.hosted().activate(game_session_id).await;
        answered(
            id,
            "activate_game_session",
            activated.map(|r| Answer::GameSession(r.into())),
        )
    }

    /// EndGameSession (`reject` false) or RejectGameSession.
    pub(super) async fn end_game_session(&mut self, id: &str, game_session_id: &str, reject: bool) -> Reply {
        let kind = if reject {
            "reject_game_session"
        } else {
            "end_game_session"
        };
        let ended = self.hosted().end(game_session_id, reject).await;
        let ended = ended.map(|(record, settled)| {
            self.settled = settled;
            Answer::GameSession(record.into())
        });
        answered(id, kind, ended)
    }

    pub(super) async fn update_policy(&mut self, id: &str, update: pb::UpdatePlayerSessionCreationPolicy) -> Reply {
        let updated = self.hosted().set_creation_policy(&update).await;
        if let Ok(record) = &updated
            && let Some(shape) = self.shapes.get_mut(&record.game_session_id)
        {
            // The process asked for this policy: it is not told of it again. Other changes the record shows (an
            // operator's, announced but not pushed yet) it still is.
            shape.accepts_players = record.accepts_players;
        }
        let updated = updated.map(|r| Answer::GameSession(r.into()));
        answered(id, "update_player_session_creation_policy", updated)
    }

    /// Answers a run of accepts and removals (ProcessStream::player_run), in order.
    pub(super) async fn change_players(&mut self, run: Vec<pb::AttachRequest>) -> Flow {
        let changes: Vec<(&str, &'static str, PlayerChange)> = run.iter().filter_map(player_change).collect();
        let answers = self
            .hosted()
            .change_players(&changes.iter().map(|(_, _, change)| *change).collect::<Vec<_>>())
            .await;
        for ((id, kind, _), answer) in changes.iter().zip(answers) {
            self.send(answered(id, kind, answer.map(|r| Answer::PlayerSession(r.into()))))
                .await;
        }
        Flow::Continue
    }

    pub(super) async fn describe_players(
        &mut self,
        id: &str,
        describe: session::DescribePlayerSessionsRequest,
    ) -> Reply {
        let described = self.hosted().describe_players(&describe).await;
        answered(id, "describe_player_sessions", described.map(Answer::PlayerSessions))
    }
}
