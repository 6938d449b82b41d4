//! What a stream has told its process of the desired state, so that each game session's start, each termination
//! request and the process's termination are pushed once, and each change of a session once with its reason. It
//! holds the sessions the process hosts now and forgets one as it leaves the desired state: a process hosting
//! session after session for weeks over one stream would otherwise hold every id it ever hosted on the replica.

use std::collections::{HashMap, HashSet};

use berth_domain::game_session::GameSessionStatus;
use berth_proto::health::v1 as pb;
use berth_store::processes::Desired;

use super::shape::Shape;

/// The record of one stream.
#[derive(Default)]
pub(super) struct Told {
    /// Each hosted session as the process was last told of it, by id.
    shapes: HashMap<String, Shape>,
    /// Sessions whose start was told.
    started: HashSet<String>,
    /// Sessions whose termination request was told.
    ending: HashSet<String>,
    /// Whether a termination was told, and whether it was forced: a forced one is told even after a graceful one.
    termination: Option<bool>,
    /// The newest desired state version told.
    version: u64,
}

impl Told {
    /// The newest desired state version told.
    pub(super) fn version(&self) -> u64 {
        self.version
    }

    /// UpdateGameSession pushes for the hosted sessions that changed since the process was last told of them
    /// (a termination request is told apart), remembering them as told.
    pub(super) fn changes(&mut self, desired: &Desired) -> Vec<pb::UpdateGameSession> {
        let mut updates = Vec::new();
        for hosted in &desired.sessions {
            let now = Shape::of(&hosted.session);
            let Some(before) = self.shapes.insert(hosted.session.game_session_id.clone(), now) else {
                continue;
            };
            if let Some(reason) = before.change(now) {
                updates.push(pb::UpdateGameSession {
                    game_session: Some(hosted.session.clone().into()),
                    reason: reason as i32,
                    termination_deadline: None,
                    state_version: desired.version,
                });
            }
        }
        updates
    }

    /// Whether session `id`'s start is news to the process; it is told from now on.
    pub(super) fn start(&mut self, id: &str) -> bool {
        !self.started.contains(id) && self.started.insert(id.to_owned())
    }

    /// Whether the request to end session `id` is news to the process; it is told from now on.
    pub(super) fn end(&mut self, id: &str) -> bool {
        !self.ending.contains(id) && self.ending.insert(id.to_owned())
    }

    /// Whether a termination (`force`d or not) is news to the process; it is told from now on.
    pub(super) fn terminate(&mut self, force: bool) -> bool {
        let news = self.termination.is_none_or(|forced| force && !forced);
        if news {
            self.termination = Some(force);
        }
        news
    }

    /// The process set session `id`'s player session creation policy itself: it is not told of that change.
    pub(super) fn set_policy(&mut self, id: &str, accepts_players: bool) {
        if let Some(shape) = self.shapes.get_mut(id) {
            shape.accepts_players = accepts_players;
        }
    }

    /// The whole of `desired` was told (in an ack or at registration): every session in it, its ending and the
    /// termination are told. Returns the changes to push after it. One older than a state told before (only a Redis
    /// restart that lost writes makes one) records nothing: the SDK passes a stale state over, and its older shapes
    /// would be told as changes.
    pub(super) fn whole(&mut self, desired: &Desired) -> Vec<pb::UpdateGameSession> {
        if desired.version < self.version {
            return Vec::new();
        }
        let updates = self.changes(desired);
        for hosted in &desired.sessions {
            let id = &hosted.session.game_session_id;
            self.start(id);
            if hosted.session.status == Some(GameSessionStatus::Terminating) {
                self.end(id);
            }
        }
        if let Some(termination) = &desired.termination {
            self.terminate(termination.force);
        }
        self.settle(desired);
        updates
    }

    /// `desired` was told, whole or as pushes: its version is told, and the sessions it no longer lists are
    /// over (an ended session never opens again) and forgotten. An older state than one told before forgets
    /// nothing, since a session a newer push started may be missing from it. Only a Redis restart that lost
    /// writes can list a forgotten session again; it is then told as new, as the SDK would surface it from the
    /// state anyway.
    pub(super) fn settle(&mut self, desired: &Desired) {
        if desired.version >= self.version {
            // A process hosts a handful of sessions: a scan of them costs less than a set built for it.
            let open = |id: &String| {
                desired
                    .sessions
                    .iter()
                    .any(|hosted| hosted.session.game_session_id == *id)
            };
            self.shapes.retain(|id, _| open(id));
            self.started.retain(open);
            self.ending.retain(open);
        }
        self.version = self.version.max(desired.version);
    }

    /// How many sessions it holds anything for.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.shapes.len() + self.started.len() + self.ending.len()
    }
}

#[cfg(test)]
mod tests {
    use berth_domain::game_session::GameSessionRecord;
    use berth_store::processes::{Desired, Hosted};

    use super::*;

    fn desired(version: u64, sessions: &[(&str, GameSessionStatus)]) -> Desired {
        Desired {
            version,
            process_state: berth_domain::stored::ProcessState::Active,
            termination: None,
            sessions: sessions
                .iter()
                .map(|(id, status)| Hosted {
                    session: GameSessionRecord {
                        game_session_id: (*id).to_owned(),
                        status: Some(*status),
                        ..Default::default()
                    },
                    players: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_process_hosting_session_after_session_holds_only_the_open_ones() {
        let mut told = Told::default();
        let lasting = ("lasting", GameSessionStatus::Active);
        assert!(told.start("lasting"));
        for index in 0..1_000u64 {
            let id = format!("session-{index}");
            let version = index * 3;
            assert!(told.start(&id), "a new session's start is news");
            told.settle(&desired(version + 1, &[lasting, (&id, GameSessionStatus::Active)]));
            told.whole(&desired(version + 2, &[lasting, (&id, GameSessionStatus::Terminating)]));
            told.settle(&desired(version + 3, &[lasting]));
        }
        assert_eq!(told.held(), 2, "only the open session's shape and start are held");
        assert!(
            !told.start("lasting"),
            "the open session's start was told and is not told again"
        );
    }

    #[test]
    fn an_older_state_forgets_no_session_a_newer_push_started() {
        let mut told = Told::default();
        told.whole(&desired(4, &[("a", GameSessionStatus::Active)]));
        assert!(told.start("b"));
        told.settle(&desired(
            5,
            &[("a", GameSessionStatus::Active), ("b", GameSessionStatus::Active)],
        ));
        let mut stale = desired(4, &[("a", GameSessionStatus::Active)]);
        stale.sessions[0].session.maximum_players = 8;
        assert!(
            told.whole(&stale).is_empty(),
            "a stale state's older shape is no change to tell"
        );
        assert!(!told.start("b"), "b's start was told and must not be told twice");
        told.whole(&desired(6, &[("b", GameSessionStatus::Terminating)]));
        assert!(!told.end("b"), "b's ending was told with version 6");
        assert!(told.start("a"), "a ended with version 6 and is forgotten");
    }

    #[test]
    fn a_forced_termination_is_told_after_a_graceful_one_and_not_again() {
        let mut told = Told::default();
        assert!(told.terminate(false));
        assert!(!told.terminate(false));
        assert!(told.terminate(true));
        assert!(!told.terminate(false));
        assert!(!told.terminate(true));
    }
}
