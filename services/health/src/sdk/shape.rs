//! What a hosted game session looked like when its process was last told of it, so that a change (UpdateGameSession)
//! is pushed with its reason rather than left for the process to find in its next desired state.

use std::hash::{DefaultHasher, Hash, Hasher};

use berth_domain::game_session::GameSessionRecord;
use berth_proto::health::v1 as pb;

/// What a hosted game session looked like when the process was last told of it, to tell it what changed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    maximum_players: u32,
    pub(super) accepts_players: bool,
    /// Name and properties, hashed.
    properties: u64,
    /// Matchmaker data, hashed.
    matchmaker_data: u64,
}

impl Shape {
    pub(super) fn of(session: &GameSessionRecord) -> Shape {
        let hash = |value: &dyn Fn(&mut DefaultHasher)| {
            let mut hasher = DefaultHasher::new();
            value(&mut hasher);
            hasher.finish()
        };
        Shape {
            maximum_players: session.maximum_players,
            accepts_players: session.accepts_players,
            properties: hash(&|h| (&session.name, &session.properties).hash(h)),
            matchmaker_data: hash(&|h| session.matchmaker_data.hash(h)),
        }
    }

    /// The reason to tell of a change from `self` to `now`, if anything changed. One update carries the whole
    /// session; when one request changed several things, the first of these names it.
    pub(super) fn change(self, now: Shape) -> Option<pb::GameSessionUpdateReason> {
        use pb::GameSessionUpdateReason as Reason;
        [
            (
                self.maximum_players != now.maximum_players,
                Reason::MaximumPlayersUpdated,
            ),
            (
                self.accepts_players != now.accepts_players,
                Reason::PlayerSessionCreationPolicyUpdated,
            ),
            (
                self.matchmaker_data != now.matchmaker_data,
                Reason::MatchmakerDataUpdated,
            ),
            (self.properties != now.properties, Reason::PropertiesUpdated),
        ]
        .into_iter()
        .find_map(|(changed, reason)| changed.then_some(reason))
    }
}
