//! A process's requests about the sessions it hosts, carried over its stream to the session service's rules
//! (`berth_session::hosted`): activate, reject and end a game session, open or close it to players, let players in
//! and out (ends, rejects, accepts and removals in runs: several sent together are answered from one round trip), and
//! read its player sessions. Only the stream's side lives here: which process asks, the reply each answer or refusal
//! becomes, and what the stream remembers of a policy the process set itself.

use berth_domain::process::{check_reject, check_request_id};
use berth_proto::health::v1::{self as pb, attach_request::Kind as Ask, reply::Result as Answer};
use berth_proto::session::v1 as session;
use berth_session::hosted::{Hosted, HostedAnswer};
use berth_store::sessions::HostedChange;
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

/// A message that changes what the process hosts — accepts or removes a player session, ends or rejects a game
/// session — under a well-formed request id: its id, the kind of request (for a refusal's fields), and the change.
pub(super) fn hosted_change(
    message: &pb::AttachRequest,
) -> Option<(&str, &'static str, Result<HostedChange<'_>, Status>)> {
    check_request_id(&message.request_id).ok()?;
    let (kind, change) = match message.kind.as_ref()? {
        Ask::AcceptPlayerSession(accept) => (
            "accept_player_session",
            Ok(HostedChange::Accept {
                game_session_id: &accept.game_session_id,
                player_session_id: &accept.player_session_id,
            }),
        ),
        Ask::RemovePlayerSession(remove) => (
            "remove_player_session",
            Ok(HostedChange::Remove {
                game_session_id: &remove.game_session_id,
                player_session_id: &remove.player_session_id,
            }),
        ),
        Ask::EndGameSession(end) => (
            "end_game_session",
            Ok(HostedChange::End {
                game_session_id: &end.game_session_id,
                reject: false,
            }),
        ),
        Ask::RejectGameSession(reject) => (
            "reject_game_session",
            check_reject(reject).map(|()| HostedChange::End {
                game_session_id: &reject.game_session_id,
                reject: true,
            }),
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

    pub(super) async fn update_policy(&mut self, id: &str, update: pb::UpdatePlayerSessionCreationPolicy) -> Reply {
        let updated = self.hosted().set_creation_policy(&update).await;
        if let Ok(record) = &updated {
            // The process asked for this policy: it is not told of it again. Other changes the record shows (an
            // operator's, announced but not pushed yet) it still is.
            self.told.set_policy(&record.game_session_id, record.accepts_players);
        }
        let updated = updated.map(|r| Answer::GameSession(r.into()));
        answered(id, "update_player_session_creation_policy", updated)
    }

    /// Answers a run of changes (ProcessStream::hosted_run), in order; an ended session's desired state is kept as
    /// the process's own last call left it.
    pub(super) async fn change(&mut self, run: Vec<pb::AttachRequest>) -> Flow {
        let changes: Vec<(&str, &'static str, Result<HostedChange, Status>)> =
            run.iter().filter_map(hosted_change).collect();
        let answers = self
            .hosted()
            .change(&changes.iter().map(|(_, _, change)| change.clone()).collect::<Vec<_>>())
            .await;
        for ((id, kind, _), answer) in changes.iter().zip(answers) {
            let answer = answer.map(|answer| match answer {
                HostedAnswer::Player(record) => Answer::PlayerSession((*record).into()),
                HostedAnswer::Ended(ended) => {
                    let (record, settled) = *ended;
                    self.settled = settled;
                    Answer::GameSession(record.into())
                }
            });
            self.send(answered(id, kind, answer)).await;
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
