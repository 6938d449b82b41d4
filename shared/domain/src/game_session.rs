//! Game sessions and player sessions as the session store keeps them, and as the v1 contracts speak them.
//!
//! Ids carry their fleet (`<fleet_id>/gsess-<uuid>`) so that any request naming a session can be routed to the
//! fleet's Redis hash slot without a lookup: every record of a fleet, with its indexes, lives in one slot and changes
//! in one script. A player session's id is its game session's with `psess-` for `gsess-` and its number in the game
//! session after it (`<fleet_id>/psess-<uuid>-<n>`), so that its game session, whose record keeps it once ended, is
//! known from the id alone.

use berth_proto::common::v1::{Endpoint, KeyValue};
use berth_proto::session::v1 as pb;

use crate::game_server::{FLEET_ID_LEN, timestamp};
use crate::stored::GameSessionStatusReason;
pub use crate::stored::{GameSessionStatus, PlayerSessionStatus};

pub mod check;

/// Longest game-session id: a fleet id, `/`, a 6-character kind and a 36-character UUID.
pub const GAME_SESSION_ID_MAX: usize = FLEET_ID_LEN.1 + 1 + 6 + 36;

/// Most player sessions one game session makes over its life: their number in it has at most 10 digits.
pub const PLAYER_SESSIONS_PER_GAME_SESSION_MAX: u64 = 9_999_999_999;

/// Longest player-session id: a game-session id, `-` and its number in the game session.
pub const PLAYER_SESSION_ID_MAX: usize = GAME_SESSION_ID_MAX + 1 + 10;

/// The fleet a game-session or player-session id belongs to, when the id is well formed.
pub fn fleet_of(session_id: &str) -> Option<&str> {
    let (fleet_id, rest) = session_id.split_once('/')?;
    let well_formed = !fleet_id.is_empty()
        && fleet_id.len() <= FLEET_ID_LEN.1
        && ((rest.starts_with("gsess-") && rest.len() <= 42) || (rest.starts_with("psess-") && rest.len() <= 53));
    well_formed.then_some(fleet_id)
}

/// A new game-session id in `fleet_id`.
pub fn new_game_session_id(fleet_id: &str) -> String {
    format!("{fleet_id}/gsess-{}", uuid::Uuid::now_v7())
}

/// The namespace of the name-based ids of [`named_game_session_id`].
const NAMED_SESSIONS: uuid::Uuid = uuid::Uuid::from_u128(0x6b1f_3c2e_8d4a_4f0b_9e57_2a61_c0d8_13f4);

/// The game-session id in `fleet_id` that `name` stands for (a UUID made from the name, version 5): the same name
/// always gives the same id, so the id itself finds the session a request made, with no key mapping one to the
/// other. A placement's attempt names its session by its idempotency token.
pub fn named_game_session_id(fleet_id: &str, name: &str) -> String {
    let uuid = uuid::Uuid::new_v5(&NAMED_SESSIONS, format!("{fleet_id}\n{name}").as_bytes());
    format!("{fleet_id}/gsess-{uuid}")
}

/// The id of the `n`-th player session (from 1) of game session `game_session_id`. The session store numbers them
/// as it makes them (`player_session_id` in `sessions/lib.lua`): a new game session's reserved players 1, 2, … in
/// the order its request gives them.
pub fn player_session_id(game_session_id: &str, n: u64) -> String {
    let mut id = String::with_capacity(game_session_id.len() + 12);
    match game_session_id.split_once("/gsess-") {
        Some((fleet, rest)) => {
            id.push_str(fleet);
            id.push_str("/psess-");
            id.push_str(rest);
        }
        None => id.push_str(game_session_id),
    }
    id.push('-');
    id.push_str(&n.to_string());
    id
}

/// The number of player session `id` in game session `game_session_id`, when it is that session's
/// (as [`player_session_id`] makes them). Called for every player a game server accepts or removes, so it compares
/// the id's parts in place rather than building the id it should be.
pub fn player_session_number(game_session_id: &str, id: &str) -> Option<u64> {
    let (session, number) = id.rsplit_once('-')?;
    // Written as player_session_id writes it: digits only, no leading zero.
    let canonical = number.bytes().all(|b| b.is_ascii_digit()) && (number == "0" || !number.starts_with('0'));
    if !canonical {
        return None;
    }
    let n: u64 = number.parse().ok()?;
    let same_session = match game_session_id.split_once("/gsess-") {
        Some((fleet, rest)) => session
            .strip_prefix(fleet)
            .and_then(|tail| tail.strip_prefix("/psess-"))
            .is_some_and(|tail| tail == rest),
        None => session == game_session_id,
    };
    same_session.then_some(n)
}

/// The game session a player-session id belongs to, when the id is well formed.
pub fn game_session_of(player_session_id: &str) -> Option<String> {
    let (session, n) = player_session_id.rsplit_once('-')?;
    let numbered = !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit());
    (numbered && session.contains("/psess-")).then(|| session.replacen("/psess-", "/gsess-", 1))
}

/// A game session as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GameSessionRecord {
    /// Its id.
    pub game_session_id: String,
    /// Fleet, location, hosting process and instance.
    pub fleet_id: String,
    pub location: String,
    pub game_server_id: String,
    pub instance_id: String,
    /// Where players connect.
    pub ip_address: String,
    pub dns_name: String,
    pub port: u32,
    /// Its status, and why (a GameSessionStatusReason name without the prefix, or empty).
    pub status: Option<GameSessionStatus>,
    pub status_reason: String,
    /// Times, in ms since the epoch.
    pub creation_ms: i64,
    pub activation_deadline_ms: Option<i64>,
    pub activation_ms: Option<i64>,
    pub termination_ms: Option<i64>,
    /// While TERMINATING on request: when it is forced to end unless its server ends it first.
    pub termination_deadline_ms: Option<i64>,
    /// Player sessions holding a slot (RESERVED and ACTIVE), and the most allowed.
    pub current_players: u32,
    pub maximum_players: u32,
    /// Whether new player sessions are taken (ACCEPT_ALL), and whether it survives scale-in.
    pub accepts_players: bool,
    pub protected: bool,
    /// Whether its server was told to end: it takes no new players, though it runs until its server ends it.
    pub server_ending: bool,
    pub name: String,
    /// Game properties, in the order they were given.
    pub properties: Vec<(String, String)>,
    pub game_session_data: String,
    pub matchmaker_data: String,
    pub creator_id: String,
    pub placement_id: String,
}

impl GameSessionRecord {
    /// Whether a player session could be created now (the rule `create_players.lua` applies atomically).
    pub fn has_available_player_sessions(&self) -> bool {
        self.status == Some(GameSessionStatus::Active)
            && self.accepts_players
            && !self.server_ending
            && self.current_players < self.maximum_players
    }
}

impl crate::search::SessionView for GameSessionRecord {
    fn game_session_name(&self) -> &str {
        &self.name
    }

    fn game_session_id(&self) -> &str {
        &self.game_session_id
    }

    fn game_session_property(&self, key: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    fn maximum_sessions(&self) -> i64 {
        i64::from(self.maximum_players)
    }

    fn player_session_count(&self) -> i64 {
        i64::from(self.current_players)
    }

    fn creation_time_millis(&self) -> i64 {
        self.creation_ms
    }

    fn has_available_player_sessions(&self) -> bool {
        GameSessionRecord::has_available_player_sessions(self)
    }
}

fn endpoint(ip_address: String, dns_name: String, port: u32) -> Option<Endpoint> {
    Some(Endpoint {
        ip_address,
        dns_name,
        port,
    })
}

impl From<GameSessionRecord> for pb::GameSession {
    fn from(record: GameSessionRecord) -> pb::GameSession {
        let status_reason = GameSessionStatusReason::parse(&record.status_reason).map_or(
            pb::GameSessionStatusReason::Unspecified,
            GameSessionStatusReason::to_proto,
        );
        let policy = if record.accepts_players {
            pb::PlayerSessionCreationPolicy::AcceptAll
        } else {
            pb::PlayerSessionCreationPolicy::DenyAll
        };
        let protection = if record.protected {
            pb::ProtectionPolicy::FullProtection
        } else {
            pb::ProtectionPolicy::NoProtection
        };
        pb::GameSession {
            game_session_id: record.game_session_id,
            name: record.name,
            fleet_id: record.fleet_id,
            location: record.location,
            game_server_id: record.game_server_id,
            instance_id: record.instance_id,
            endpoint: endpoint(record.ip_address, record.dns_name, record.port),
            status: record
                .status
                .map_or(pb::GameSessionStatus::Unspecified, GameSessionStatus::to_proto) as i32,
            status_reason: status_reason as i32,
            creation_time: Some(timestamp(record.creation_ms)),
            activation_deadline_time: record.activation_deadline_ms.map(timestamp),
            activation_time: record.activation_ms.map(timestamp),
            termination_time: record.termination_ms.map(timestamp),
            current_player_session_count: record.current_players,
            maximum_player_session_count: record.maximum_players,
            player_session_creation_policy: policy as i32,
            protection_policy: protection as i32,
            game_properties: record
                .properties
                .into_iter()
                .map(|(key, value)| KeyValue { key, value })
                .collect(),
            game_session_data: record.game_session_data,
            matchmaker_data: record.matchmaker_data,
            creator_id: record.creator_id,
            placement_id: record.placement_id,
        }
    }
}

/// A player session as stored, with the game-session fields it is reported with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlayerSessionRecord {
    pub player_session_id: String,
    pub player_id: String,
    pub game_session_id: String,
    pub fleet_id: String,
    pub location: String,
    /// The game session's endpoint.
    pub ip_address: String,
    pub dns_name: String,
    pub port: u32,
    pub status: Option<PlayerSessionStatus>,
    pub player_data: String,
    /// Times, in ms since the epoch.
    pub creation_ms: i64,
    pub reserved_until_ms: Option<i64>,
    pub activation_ms: Option<i64>,
    pub termination_ms: Option<i64>,
}

impl From<PlayerSessionRecord> for pb::PlayerSession {
    fn from(record: PlayerSessionRecord) -> pb::PlayerSession {
        let reserved = record.status == Some(PlayerSessionStatus::Reserved);
        pb::PlayerSession {
            player_session_id: record.player_session_id,
            player_id: record.player_id,
            game_session_id: record.game_session_id,
            fleet_id: record.fleet_id,
            location: record.location,
            endpoint: endpoint(record.ip_address, record.dns_name, record.port),
            status: record
                .status
                .map_or(pb::PlayerSessionStatus::Unspecified, PlayerSessionStatus::to_proto) as i32,
            player_data: record.player_data,
            creation_time: Some(timestamp(record.creation_ms)),
            reserved_until_time: record.reserved_until_ms.filter(|_| reserved).map(timestamp),
            activation_time: record.activation_ms.map(timestamp),
            termination_time: record.termination_ms.map(timestamp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_fleet() {
        let id = new_game_session_id("fleet-1");
        assert_eq!(fleet_of(&id), Some("fleet-1"));
        assert!(id.len() <= GAME_SESSION_ID_MAX);
        let longest = new_game_session_id(&"f".repeat(128));
        assert_eq!(longest.len(), GAME_SESSION_ID_MAX);
        let player = player_session_id(&longest, PLAYER_SESSIONS_PER_GAME_SESSION_MAX);
        assert_eq!(fleet_of(&player).map(str::len), Some(128));
        assert_eq!(player.len(), PLAYER_SESSION_ID_MAX);
        let named = named_game_session_id("fleet-1", "placement:p-1:1:loc-a");
        assert_eq!(named, named_game_session_id("fleet-1", "placement:p-1:1:loc-a"));
        assert_ne!(named, named_game_session_id("fleet-1", "placement:p-1:2:loc-a"));
        assert_ne!(named, named_game_session_id("fleet-2", "placement:p-1:1:loc-a"));
        assert_eq!(fleet_of(&named), Some("fleet-1"));
        assert_eq!(fleet_of("fleet-1"), None);
        assert_eq!(fleet_of("/gsess-x"), None);
        assert_eq!(fleet_of("fleet-1/other-x"), None);
    }

    #[test]
    fn a_player_session_id_names_its_game_session() {
        let game = new_game_session_id("fleet-1");
        let player = player_session_id(&game, 3);
        assert!(player.starts_with("fleet-1/psess-") && player.ends_with("-3"));
        assert_eq!(game_session_of(&player), Some(game.clone()));
        assert_eq!(game_session_of(&game), None);
        assert_eq!(player_session_number(&game, &player), Some(3));
        assert_eq!(player_session_number(&new_game_session_id("fleet-1"), &player), None);
        assert_eq!(player_session_number(&game, &format!("{player}0")), Some(30));
        assert_eq!(player_session_number(&game, "fleet-1/psess-x"), None);
        let uuid = game.split_once("/gsess-").map(|(_, uuid)| uuid).unwrap_or_default();
        for other in [
            format!("fleet-1/psess-{uuid}-03"),
            format!("fleet-1/psess-{uuid}-+3"),
            format!("fleet-2/psess-{uuid}-3"),
            format!("fleet-1/gsess-{uuid}-3"),
            format!("fleet-1/psess-{uuid}x-3"),
        ] {
            assert_eq!(player_session_number(&game, &other), None, "{other}");
        }
        for n in [0, 1, 9, 10, 1000, u64::MAX] {
            assert_eq!(player_session_number(&game, &player_session_id(&game, n)), Some(n));
            assert_eq!(
                player_session_number("elsewhere", &player_session_id("elsewhere", n)),
                Some(n)
            );
        }
        assert_eq!(player_session_id("elsewhere", 2), "elsewhere-2");
        assert_eq!(game_session_of("fleet-1/psess-x-"), None);
        assert_eq!(game_session_of("fleet-1/psess-x-12345678901"), None);
    }

    #[test]
    fn a_session_has_room_only_when_active_accepting_and_not_full() {
        let mut record = GameSessionRecord {
            status: Some(GameSessionStatus::Active),
            accepts_players: true,
            current_players: 9,
            maximum_players: 10,
            ..Default::default()
        };
        assert!(record.has_available_player_sessions());
        record.current_players = 10;
        assert!(!record.has_available_player_sessions());
        record.current_players = 0;
        record.accepts_players = false;
        assert!(!record.has_available_player_sessions());
        record.accepts_players = true;
        record.server_ending = true;
        assert!(!record.has_available_player_sessions());
        record.server_ending = false;
        record.status = Some(GameSessionStatus::Activating);
        assert!(!record.has_available_player_sessions());
    }
}
