//! Turns what Berth says a process should be doing into events the game sees exactly once. Delivery is
//! level-triggered: the same game session or termination may arrive as a push, in the desired state of a
//! registration, and again in every heartbeat ack until the process reports that version as applied — in any
//! order, since pushes and acks are produced independently. This is the pure part, with no I/O, so that every
//! ordering can be tested.
//!
//! Rules:
//! - Only a whole desired state advances the applied version. A push is a single change; reporting its version
//!   as applied could hide an earlier change whose push was lost.
//! - A desired state older than the applied one is stale and ignored. A start push no newer than the applied
//!   version is ignored too: the desired state of that version either listed the session (so it was surfaced)
//!   or no longer did (so it is over).
//! - A session surfaced by a push newer than a desired state is kept even though that state does not list it.
//! - Sessions a desired state no longer lists are over: the game is told to stop hosting them (FORCE_TERMINATED,
//!   unless it was told so already or ended the session itself) and they are forgotten, so memory follows the sessions hosted now, not every
//!   session the process ever hosted. Property changes surface from pushes only (the SDK keeps no copy of the
//!   sessions to compare against); starts, termination requests and the process's termination are level-triggered.

use std::collections::HashMap;

use berth_proto::health::v1::{
    DesiredState, GameSessionUpdateReason, StartGameSession, TerminateProcess, TerminationReason, UpdateGameSession,
};
use berth_proto::session::v1::{GameSession, GameSessionStatus};

use super::{Event, system_time};

/// What the game has been told so far.
#[derive(Default)]
pub(super) struct Reconciler {
    applied_version: u64,
    hosted: HashMap<String, Hosted>,
    terminated: bool,
}

/// A game session the game has been told to start.
struct Hosted {
    /// Version of the push or desired state that surfaced it: an older desired state may not list it yet.
    since_version: u64,
    /// Newest version of a change surfaced for it, so that a repeated update push surfaces once.
    last_update_version: u64,
    ending: Ending,
}

/// How far the end of a hosted session has been surfaced; it only moves forward.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ending {
    None,
    Requested,
    Forced,
}

impl Hosted {
    fn new(version: u64) -> Hosted {
        Hosted {
            since_version: version,
            last_update_version: version,
            ending: Ending::None,
        }
    }

    /// Moves the ending forward; false when the game already knows.
    fn escalate(&mut self, to: Ending) -> bool {
        let news = self.ending < to;
        self.ending = self.ending.max(to);
        news
    }
}

fn termination_requested(game_session: GameSession) -> Event {
    Event::UpdateGameSession {
        game_session,
        reason: GameSessionUpdateReason::TerminationRequested,
        termination_deadline: None,
    }
}

impl Reconciler {
    /// The version to report as applied_state_version.
    pub(super) fn applied_version(&self) -> u64 {
        self.applied_version
    }

    /// A whole desired state, from registered or a heartbeat ack.
    pub(super) fn desired_state(&mut self, state: DesiredState) -> Vec<Event> {
        if state.version < self.applied_version {
            return Vec::new();
        }
        let version = state.version;
        let listed = |id: &str| {
            state.game_sessions.iter().any(|assignment| {
                assignment
                    .game_session
                    .as_ref()
                    .is_some_and(|s| s.game_session_id == id)
            })
        };
        // A session no longer listed is over for Berth (forced, timed out, or ended by the game itself): a game still
        // hosting it must stop, or it would run a match on a slot Berth hands to the next session.
        let dropped: Vec<String> = self
            .hosted
            .iter()
            .filter(|(id, hosted)| hosted.since_version <= version && !listed(id))
            .map(|(id, _)| id.clone())
            .collect();
        let mut events = Vec::new();
        for id in dropped {
            if self
                .hosted
                .remove(&id)
                .is_some_and(|hosted| hosted.ending < Ending::Forced)
            {
                events.push(Event::UpdateGameSession {
                    game_session: GameSession {
                        game_session_id: id,
                        status: GameSessionStatus::Terminated as i32,
                        ..GameSession::default()
                    },
                    reason: GameSessionUpdateReason::ForceTerminated,
                    termination_deadline: None,
                });
            }
        }
        for assignment in state.game_sessions {
            let Some(game_session) = assignment.game_session else {
                continue;
            };
            let terminating = game_session.status == GameSessionStatus::Terminating as i32;
            match self.hosted.get_mut(&game_session.game_session_id) {
                Some(hosted) => {
                    // Its termination_requested push was lost: the game must still end it gracefully.
                    if terminating && hosted.escalate(Ending::Requested) {
                        events.push(termination_requested(game_session));
                    }
                }
                None => {
                    let mut hosted = Hosted::new(version);
                    if terminating {
                        hosted.ending = Ending::Requested;
                    }
                    self.hosted.insert(game_session.game_session_id.clone(), hosted);
                    // Asked to end before its start reached the game: start it so that the game can end it.
                    let ending = terminating.then(|| termination_requested(game_session.clone()));
                    events.push(Event::StartGameSession {
                        game_session,
                        player_sessions: assignment.player_sessions,
                    });
                    events.extend(ending);
                }
            }
        }
        if let Some(termination) = state.termination {
            events.extend(self.terminate_process(termination));
        }
        self.applied_version = version;
        events
    }

    /// A start_game_session push.
    pub(super) fn start_game_session(&mut self, push: StartGameSession) -> Vec<Event> {
        let Some(game_session) = push.game_session else {
            return Vec::new();
        };
        if push.state_version <= self.applied_version || self.hosted.contains_key(&game_session.game_session_id) {
            return Vec::new();
        }
        self.hosted
            .insert(game_session.game_session_id.clone(), Hosted::new(push.state_version));
        vec![Event::StartGameSession {
            game_session,
            player_sessions: push.initial_player_sessions,
        }]
    }

    /// An update_game_session push. Updates of a session the game was never told to start are dropped: if it is
    /// still current, the next desired state starts it with its latest content.
    pub(super) fn update_game_session(&mut self, push: UpdateGameSession) -> Vec<Event> {
        let Some(game_session) = push.game_session else {
            return Vec::new();
        };
        let Some(hosted) = self.hosted.get_mut(&game_session.game_session_id) else {
            return Vec::new();
        };
        let reason = GameSessionUpdateReason::try_from(push.reason).unwrap_or_default();
        let news = match reason {
            GameSessionUpdateReason::TerminationRequested => hosted.escalate(Ending::Requested),
            GameSessionUpdateReason::ForceTerminated => hosted.escalate(Ending::Forced),
            _ => push.state_version > hosted.last_update_version,
        };
        hosted.last_update_version = hosted.last_update_version.max(push.state_version);
        if !news {
            return Vec::new();
        }
        vec![Event::UpdateGameSession {
            game_session,
            reason,
            termination_deadline: system_time(push.termination_deadline),
        }]
    }

    /// The game ended or refused a session itself: it is not to be told to stop hosting it.
    pub(super) fn ended_by_game(&mut self, game_session_id: &str) {
        if let Some(hosted) = self.hosted.get_mut(game_session_id) {
            hosted.escalate(Ending::Forced);
        }
    }

    /// A terminate_process push, or the termination of a desired state.
    pub(super) fn terminate_process(&mut self, push: TerminateProcess) -> Vec<Event> {
        if std::mem::replace(&mut self.terminated, true) {
            return Vec::new();
        }
        vec![Event::Terminate {
            reason: TerminationReason::try_from(push.reason).unwrap_or_default(),
            deadline: system_time(push.termination_deadline),
            force: push.force,
        }]
    }
}

#[cfg(test)]
mod tests {
    use berth_proto::health::v1::GameSessionAssignment;

    use super::*;

    #[derive(Clone)]
    enum Input {
        State(DesiredState),
        Start(StartGameSession),
        Update(UpdateGameSession),
        Terminate(TerminateProcess),
    }

    fn feed(reconciler: &mut Reconciler, input: Input) -> Vec<Event> {
        match input {
            Input::State(state) => reconciler.desired_state(state),
            Input::Start(push) => reconciler.start_game_session(push),
            Input::Update(push) => reconciler.update_game_session(push),
            Input::Terminate(push) => reconciler.terminate_process(push),
        }
    }

    fn session(id: &str, status: GameSessionStatus) -> GameSession {
        GameSession {
            game_session_id: id.to_owned(),
            status: status as i32,
            ..GameSession::default()
        }
    }

    fn termination(version: u64) -> TerminateProcess {
        TerminateProcess {
            reason: TerminationReason::ScaleIn as i32,
            state_version: version,
            ..TerminateProcess::default()
        }
    }

    fn state(version: u64, sessions: &[(&str, GameSessionStatus)], terminate: bool) -> Input {
        Input::State(DesiredState {
            version,
            game_sessions: sessions
                .iter()
                .map(|(id, status)| GameSessionAssignment {
                    game_session: Some(session(id, *status)),
                    player_sessions: Vec::new(),
                })
                .collect(),
            termination: terminate.then(|| termination(version)),
            ..DesiredState::default()
        })
    }

    fn start(id: &str, version: u64) -> Input {
        Input::Start(StartGameSession {
            game_session: Some(session(id, GameSessionStatus::Activating)),
            initial_player_sessions: Vec::new(),
            state_version: version,
        })
    }

    fn update(id: &str, reason: GameSessionUpdateReason, version: u64) -> Input {
        Input::Update(UpdateGameSession {
            game_session: Some(session(id, GameSessionStatus::Active)),
            reason: reason as i32,
            termination_deadline: None,
            state_version: version,
        })
    }

    /// One line per event, for comparing and counting.
    fn describe(event: &Event) -> String {
        match event {
            Event::StartGameSession { game_session, .. } => format!("start {}", game_session.game_session_id),
            Event::UpdateGameSession {
                game_session, reason, ..
            } => format!("update {} {}", game_session.game_session_id, reason.as_str_name()),
            Event::Terminate { .. } => "terminate".to_owned(),
            Event::ServerChanged { .. } => "changed".to_owned(),
            Event::Lost { .. } => "lost".to_owned(),
        }
    }

    fn run(inputs: impl IntoIterator<Item = Input>) -> (Reconciler, Vec<String>) {
        let mut reconciler = Reconciler::default();
        let mut events = Vec::new();
        for input in inputs {
            events.extend(feed(&mut reconciler, input).iter().map(describe));
        }
        (reconciler, events)
    }

    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![Vec::new()];
        }
        let mut all = Vec::new();
        for shorter in permutations(n - 1) {
            for at in 0..=shorter.len() {
                let mut order = shorter.clone();
                order.insert(at, n - 1);
                all.push(order);
            }
        }
        all
    }

    /// A process's life: session A starts, B starts, A is asked to end and ends, then the process is
    /// terminated. Each change is pushed and is in the desired states from its version on.
    fn timeline() -> Vec<Input> {
        use GameSessionStatus::{Activating, Active, Terminating};
        vec![
            start("A", 1),
            state(1, &[("A", Activating)], false),
            start("B", 2),
            state(2, &[("A", Active), ("B", Activating)], false),
            update("A", GameSessionUpdateReason::TerminationRequested, 3),
            state(3, &[("A", Terminating), ("B", Active)], false),
            Input::Terminate(termination(4)),
            state(4, &[("B", Active)], true),
        ]
    }

    #[test]
    fn every_ordering_surfaces_each_session_and_the_termination_once() {
        let inputs = timeline();
        for order in permutations(inputs.len()) {
            let (reconciler, events) = run(order.iter().map(|&i| inputs[i].clone()));
            let count = |line: &str| events.iter().filter(|event| *event == line).count();
            // B is listed in the newest state: whatever the order, it starts exactly once.
            assert_eq!(count("start B"), 1, "{order:?}: {events:?}");
            // A is over by then: it may never reach the game, but never twice.
            assert!(count("start A") <= 1, "{order:?}: {events:?}");
            assert!(
                count("update A GAME_SESSION_UPDATE_REASON_TERMINATION_REQUESTED") <= 1,
                "{order:?}: {events:?}"
            );
            assert_eq!(count("terminate"), 1, "{order:?}: {events:?}");
            // Nothing is said about a session the game was not told to start.
            if let Some(ended) = events.iter().position(|event| event.starts_with("update A")) {
                assert!(events[..ended].contains(&"start A".to_owned()), "{order:?}: {events:?}");
            }
            assert_eq!(reconciler.applied_version(), 4, "{order:?}");
        }
    }

    #[test]
    fn every_input_twice_surfaces_the_same_as_once() {
        let inputs = timeline();
        let (_, once) = run(inputs.clone());
        let (_, twice) = run(inputs.iter().flat_map(|input| [input.clone(), input.clone()]));
        assert_eq!(once, twice);
        assert_eq!(
            once,
            [
                "start A",
                "start B",
                "update A GAME_SESSION_UPDATE_REASON_TERMINATION_REQUESTED",
                "terminate",
                "update A GAME_SESSION_UPDATE_REASON_FORCE_TERMINATED"
            ]
        );
    }

    #[test]
    fn pushes_do_not_advance_the_applied_version() {
        let (reconciler, events) = run([start("A", 5), Input::Terminate(termination(6))]);
        assert_eq!(events, ["start A", "terminate"]);
        assert_eq!(reconciler.applied_version(), 0);
    }

    #[test]
    fn a_stale_state_does_not_forget_a_session_started_by_a_newer_push() {
        use GameSessionStatus::Activating;
        let (reconciler, events) = run([
            start("A", 5),
            state(4, &[], false),
            state(5, &[("A", Activating)], false),
        ]);
        assert_eq!(events, ["start A"]);
        assert_eq!(reconciler.applied_version(), 5);
    }

    #[test]
    fn a_state_older_than_the_applied_one_is_ignored() {
        use GameSessionStatus::Activating;
        let (reconciler, events) = run([state(7, &[], false), state(6, &[("A", Activating)], true)]);
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(reconciler.applied_version(), 7);
    }

    #[test]
    fn a_start_push_older_than_the_applied_state_is_over() {
        let (_, events) = run([state(3, &[], false), start("A", 2)]);
        assert!(events.is_empty(), "{events:?}");
    }

    #[test]
    fn a_session_dropped_from_the_state_is_stopped_once_and_forgotten_and_its_late_pushes_ignored() {
        use GameSessionStatus::Active;
        let (reconciler, events) = run([
            state(1, &[("A", Active)], false),
            state(2, &[], false),
            state(3, &[], false),
            update("A", GameSessionUpdateReason::PropertiesUpdated, 3),
        ]);
        assert_eq!(
            events,
            ["start A", "update A GAME_SESSION_UPDATE_REASON_FORCE_TERMINATED"]
        );
        assert!(reconciler.hosted.is_empty());
    }

    #[test]
    fn a_session_the_game_ended_itself_leaves_without_a_word() {
        use GameSessionStatus::Active;
        let mut reconciler = Reconciler::default();
        let (mut events, ended) = (Vec::new(), "A");
        events.extend(feed(&mut reconciler, state(1, &[("A", Active), ("B", Active)], false)));
        reconciler.ended_by_game(ended);
        events.extend(feed(&mut reconciler, state(2, &[], false)));
        let events: Vec<String> = events.iter().map(describe).collect();
        assert_eq!(
            events,
            [
                "start A",
                "start B",
                "update B GAME_SESSION_UPDATE_REASON_FORCE_TERMINATED"
            ]
        );
    }

    #[test]
    fn property_updates_surface_once_per_version() {
        use GameSessionUpdateReason::PropertiesUpdated;
        let (_, events) = run([
            start("A", 1),
            update("A", PropertiesUpdated, 2),
            update("A", PropertiesUpdated, 2),
            update("A", PropertiesUpdated, 1),
            update("A", PropertiesUpdated, 3),
        ]);
        assert_eq!(
            events,
            [
                "start A",
                "update A GAME_SESSION_UPDATE_REASON_PROPERTIES_UPDATED",
                "update A GAME_SESSION_UPDATE_REASON_PROPERTIES_UPDATED"
            ]
        );
    }

    #[test]
    fn a_lost_termination_request_is_recovered_from_the_state_and_force_still_surfaces() {
        use GameSessionStatus::{Active, Terminating};
        use GameSessionUpdateReason::{ForceTerminated, TerminationRequested};
        let (_, events) = run([
            state(1, &[("A", Active)], false),
            state(2, &[("A", Terminating)], false),
            update("A", TerminationRequested, 2),
            update("A", ForceTerminated, 3),
            update("A", ForceTerminated, 3),
        ]);
        assert_eq!(
            events,
            [
                "start A",
                "update A GAME_SESSION_UPDATE_REASON_TERMINATION_REQUESTED",
                "update A GAME_SESSION_UPDATE_REASON_FORCE_TERMINATED"
            ]
        );
    }

    #[test]
    fn a_session_first_seen_terminating_is_started_then_asked_to_end() {
        let (_, events) = run([state(3, &[("A", GameSessionStatus::Terminating)], false)]);
        assert_eq!(
            events,
            ["start A", "update A GAME_SESSION_UPDATE_REASON_TERMINATION_REQUESTED"]
        );
    }
}
