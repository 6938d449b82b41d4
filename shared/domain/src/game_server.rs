//! A game server in a fleet's pool, as FleetIQ keeps it: registered AVAILABLE, claimed by one caller for a
//! while, UTILIZED for good once a game runs on it, and deregistered when it ends.

use berth_proto::health::v1 as pb;
use prost_types::Timestamp;
use tonic::Status;

pub use crate::stored::InstanceStatus;
use crate::stored::{TerminationReason, Utilization};
use crate::validate::{Violations, check_page_size};

/// Fleet ids: 1 to 128 characters.
pub const FLEET_ID_LEN: (usize, usize) = (1, 128);
/// Game-server ids: 3 to 128 characters, as FleetIQ.
pub const GAME_SERVER_ID_LEN: (usize, usize) = (3, 128);
/// Instance ids: 1 to 128 characters.
pub const INSTANCE_ID_LEN: (usize, usize) = (1, 128);
/// Connection info: at most 512 characters.
pub const CONNECTION_INFO_MAX: usize = 512;
/// Game-server data: at most 1024 characters.
pub const GAME_SERVER_DATA_MAX: usize = 1024;
/// Largest page of a listing.
pub const PAGE_SIZE_MAX: u32 = 1000;
/// Page size when the request leaves it at 0.
pub const PAGE_SIZE_DEFAULT: u32 = 100;

/// The claim id a server's own reservation (Agones Reserve) holds it under: a reservation is a claim the server
/// makes on itself, out of the pool until it lapses, which no claimer can present.
pub const RESERVATION: &str = "~reserve";

/// A game server as stored, with the claim judged against Redis' clock at the time it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GameServerRecord {
    /// Fleet of the server.
    pub fleet_id: String,
    /// Id of the server within its fleet.
    pub game_server_id: String,
    /// Instance the server runs on.
    pub instance_id: String,
    /// How clients reach it.
    pub connection_info: String,
    /// Free-form game data.
    pub game_server_data: String,
    /// UTILIZED (true) or AVAILABLE (false).
    pub utilized: bool,
    /// State of its instance.
    pub instance_status: InstanceStatus,
    /// Registration time, ms since the epoch.
    pub registered_ms: i64,
    /// Last claim time, ms since the epoch.
    pub last_claim_ms: Option<i64>,
    /// When the live claim lapses, ms since the epoch; `None` when not claimed or lapsed.
    pub claim_expires_ms: Option<i64>,
    /// Id of the live claim, or of the claim that made it UTILIZED; only the claimer is told it.
    pub claim_id: Option<String>,
    /// Last HEALTHY report, ms since the epoch.
    pub health_checked_ms: Option<i64>,
    /// When it became UTILIZED, ms since the epoch.
    pub utilized_ms: Option<i64>,
    /// When its own reservation ends, ms since the epoch; `None` when it is not reserved. A reservation is not a
    /// claim: `claim_expires_ms` and `claim_id` stay unset.
    pub reserved_until_ms: Option<i64>,
}

/// Why a stored game server could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("stored game server {game_server_id} is malformed: {reason}")]
pub struct MalformedRecord {
    game_server_id: String,
    reason: String,
}

impl GameServerRecord {
    /// Builds a record from the field/value pairs of its Redis hash, judging the claim at `now_ms`.
    pub fn from_fields<'a>(
        fleet_id: &str,
        now_ms: i64,
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<GameServerRecord, MalformedRecord> {
        let mut record = GameServerRecord {
            fleet_id: fleet_id.to_owned(),
            game_server_id: String::new(),
            instance_id: String::new(),
            connection_info: String::new(),
            game_server_data: String::new(),
            utilized: false,
            instance_status: InstanceStatus::Active,
            registered_ms: 0,
            last_claim_ms: None,
            claim_expires_ms: None,
            claim_id: None,
            health_checked_ms: None,
            utilized_ms: None,
            reserved_until_ms: None,
        };
        for (field, value) in fields {
            if let Err(reason) = record.set_field(field, value, now_ms) {
                return Err(MalformedRecord {
                    game_server_id: record.game_server_id,
                    reason,
                });
            }
        }
        if record.claim_id.as_deref() == Some(RESERVATION) {
            record.reserved_until_ms = record.claim_expires_ms.take();
            record.claim_id = None;
        }
        Ok(record)
    }

    fn set_field(&mut self, field: &str, value: &str, now_ms: i64) -> Result<(), String> {
        let millis = || {
            value
                .parse::<i64>()
                .map_err(|_| format!("{field} is not a time in ms: {value:?}"))
        };
        match field {
            "id" => self.game_server_id = value.to_owned(),
            "instance" => self.instance_id = value.to_owned(),
            "conn" => self.connection_info = value.to_owned(),
            "data" => self.game_server_data = value.to_owned(),
            "util" => self.utilized = Utilization::parse(value) == Some(Utilization::Utilized),
            "istatus" => {
                self.instance_status =
                    InstanceStatus::parse(value).ok_or_else(|| format!("unknown instance status {value:?}"))?
            }
            "reg_ms" => self.registered_ms = millis()?,
            "claim_ms" => self.last_claim_ms = Some(millis()?),
            "claim_exp_ms" => self.claim_expires_ms = Some(millis()?).filter(|exp| *exp > now_ms),
            "claim_id" => self.claim_id = Some(value.to_owned()),
            "hc_ms" => self.health_checked_ms = Some(millis()?),
            "util_ms" => self.utilized_ms = Some(millis()?),
            _ => {}
        }
        Ok(())
    }

    /// Whether a claim on it is live.
    pub fn is_claimed(&self) -> bool {
        self.claim_expires_ms.is_some()
    }
}

/// A time in ms since the epoch, as a protobuf timestamp.
pub fn timestamp(ms: i64) -> Timestamp {
    Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

impl From<GameServerRecord> for pb::GameServer {
    fn from(record: GameServerRecord) -> pb::GameServer {
        let claim_status = if record.is_claimed() {
            pb::ClaimStatus::Claimed
        } else {
            pb::ClaimStatus::Unspecified
        };
        let utilization_status = if record.utilized {
            pb::UtilizationStatus::Utilized
        } else {
            pb::UtilizationStatus::Available
        };
        let health_check = if record.health_checked_ms.is_some() {
            pb::HealthCheck::Healthy
        } else {
            pb::HealthCheck::Unspecified
        };
        pb::GameServer {
            fleet_id: record.fleet_id,
            game_server_id: record.game_server_id,
            instance_id: record.instance_id,
            connection_info: record.connection_info,
            game_server_data: record.game_server_data,
            utilization_status: utilization_status as i32,
            claim_status: claim_status as i32,
            health_check: health_check as i32,
            instance_status: record.instance_status.to_proto() as i32,
            registration_time: Some(timestamp(record.registered_ms)),
            last_claim_time: record.last_claim_ms.map(timestamp),
            claim_expire_time: record.claim_expires_ms.map(timestamp),
            last_health_check_time: record.health_checked_ms.map(timestamp),
            utilized_time: record.utilized_ms.map(timestamp),
        }
    }
}

/// Checks a fleet id.
pub fn check_fleet_id(v: &mut Violations, fleet_id: &str) {
    v.id("fleet_id", fleet_id, FLEET_ID_LEN.0, FLEET_ID_LEN.1);
}

/// Checks a game-server id, in `field`.
pub fn check_game_server_id(v: &mut Violations, field: &str, game_server_id: &str) {
    v.id(field, game_server_id, GAME_SERVER_ID_LEN.0, GAME_SERVER_ID_LEN.1);
}

/// Checks the fleet and game-server ids that name one server.
pub fn check_server_ref(v: &mut Violations, fleet_id: &str, game_server_id: &str) {
    check_fleet_id(v, fleet_id);
    check_game_server_id(v, "game_server_id", game_server_id);
}

/// Longest claim id accepted back from a caller (ids Berth hands out are 36-character UUIDs).
pub const CLAIM_ID_MAX: usize = 64;

/// Checks a RegisterGameServer request.
pub fn check_register(req: &pb::RegisterGameServerRequest) -> Result<(), Status> {
    let mut v = Violations::new();
    check_server_ref(&mut v, &req.fleet_id, &req.game_server_id);
    v.id("instance_id", &req.instance_id, INSTANCE_ID_LEN.0, INSTANCE_ID_LEN.1);
    v.text("connection_info", &req.connection_info, CONNECTION_INFO_MAX);
    v.text("game_server_data", &req.game_server_data, GAME_SERVER_DATA_MAX);
    v.into_result()
}

/// What an UpdateGameServer request asks for utilization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UtilizationChange {
    /// Leave it.
    Keep,
    /// Assert it is still AVAILABLE.
    Available,
    /// Mark it UTILIZED.
    Utilized,
}

/// Checks an UpdateGameServer request and says what it asks of utilization.
pub fn check_update(req: &pb::UpdateGameServerRequest) -> Result<UtilizationChange, Status> {
    let mut v = Violations::new();
    check_server_ref(&mut v, &req.fleet_id, &req.game_server_id);
    if let Some(data) = &req.game_server_data {
        v.text("game_server_data", data, GAME_SERVER_DATA_MAX);
    }
    v.text("claim_id", &req.claim_id, CLAIM_ID_MAX);
    let change = match pb::UtilizationStatus::try_from(req.utilization_status) {
        Ok(pb::UtilizationStatus::Unspecified) => UtilizationChange::Keep,
        Ok(pb::UtilizationStatus::Available) => UtilizationChange::Available,
        Ok(pb::UtilizationStatus::Utilized) => UtilizationChange::Utilized,
        Err(_) => {
            v.add("utilization_status", "must be AVAILABLE, UTILIZED or unset");
            UtilizationChange::Keep
        }
    };
    if pb::HealthCheck::try_from(req.health_check).is_err() {
        v.add("health_check", "must be HEALTHY or unset");
    }
    v.into_result().map(|()| change)
}

/// Checks a DescribeGameServer or DeregisterGameServer request: the server it names.
pub fn check_server_request(fleet_id: &str, game_server_id: &str) -> Result<(), Status> {
    let mut v = Violations::new();
    check_server_ref(&mut v, fleet_id, game_server_id);
    v.into_result()
}

/// Checks a ListGameServers request; the page size to serve.
pub fn check_list(req: &pb::ListGameServersRequest) -> Result<usize, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    let size = check_page_size(&mut v, req.page_size, PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT);
    // A page token is the id the next page starts after.
    if !req.page_token.is_empty() {
        v.id(
            "page_token",
            &req.page_token,
            GAME_SERVER_ID_LEN.0,
            GAME_SERVER_ID_LEN.1,
        );
    }
    v.into_result().map(|()| size)
}

/// Checks a TerminateGameServer request; the reason it gives (SCALE_IN when unset).
pub fn check_terminate(req: &pb::TerminateGameServerRequest) -> Result<TerminationReason, Status> {
    let mut v = Violations::new();
    check_server_ref(&mut v, &req.fleet_id, &req.game_server_id);
    let reason = match pb::TerminationReason::try_from(req.reason) {
        Ok(reason) => TerminationReason::from_proto(reason).unwrap_or(TerminationReason::ScaleIn),
        Err(_) => {
            v.add("reason", format!("must be a TerminationReason, got {}", req.reason));
            TerminationReason::ScaleIn
        }
    };
    v.into_result().map(|()| reason)
}

/// The instance status a request's raw enum value names; `None` for UNSPECIFIED or a value this release does not
/// know.
fn instance_status(value: i32) -> Option<InstanceStatus> {
    pb::InstanceStatus::try_from(value)
        .ok()
        .and_then(InstanceStatus::from_proto)
}

/// Checks a SetInstanceStatus request; the status it sets.
pub fn check_set_instance_status(req: &pb::SetInstanceStatusRequest) -> Result<InstanceStatus, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    v.id("instance_id", &req.instance_id, INSTANCE_ID_LEN.0, INSTANCE_ID_LEN.1);
    let status = instance_status(req.instance_status);
    if status.is_none() {
        v.add("instance_status", "must be ACTIVE, DRAINING or SPOT_TERMINATING");
    }
    v.into_result()?;
    status.ok_or_else(|| Status::internal("an instance status refused without a violation"))
}

/// Checks a ClaimGameServer request; the instance tiers it may take.
pub fn check_claim(req: &berth_proto::placement::v1::ClaimGameServerRequest) -> Result<ClaimTiers, Status> {
    let mut v = Violations::new();
    check_fleet_id(&mut v, &req.fleet_id);
    if !req.game_server_id.is_empty() {
        check_game_server_id(&mut v, "game_server_id", &req.game_server_id);
    }
    if let Some(data) = &req.game_server_data {
        v.text("game_server_data", data, GAME_SERVER_DATA_MAX);
    }
    crate::game_session::check::check_idempotency_token(&mut v, &req.idempotency_token);
    let statuses = req
        .filter
        .as_ref()
        .map(|filter| filter.instance_statuses.as_slice())
        .unwrap_or_default();
    let tiers = check_claim_filter(&mut v, statuses);
    v.into_result().map(|()| tiers)
}

/// The instance tiers a claim may take, lowest first: 0 is ACTIVE, 1 is DRAINING.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimTiers {
    /// Lowest tier allowed.
    pub lowest: u8,
    /// Highest tier allowed.
    pub highest: u8,
}

/// Checks a claim's instance-status filter and turns it into the tiers it allows.
pub fn check_claim_filter(v: &mut Violations, statuses: &[i32]) -> ClaimTiers {
    let field = "filter.instance_statuses";
    if statuses.len() > 2 {
        v.add(field, format!("must have at most 2 entries, got {}", statuses.len()));
    }
    let (mut active, mut draining) = (statuses.is_empty(), statuses.is_empty());
    for status in statuses {
        match instance_status(*status) {
            Some(InstanceStatus::Active) => active = true,
            Some(InstanceStatus::Draining) => draining = true,
            _ => v.add(field, "may name only ACTIVE and DRAINING"),
        }
    }
    ClaimTiers {
        lowest: if active { 0 } else { 1 },
        highest: if draining { 1 } else { 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lapsed_claim_reads_as_not_claimed() {
        let stored = vec![
            ("id", "gs-1"),
            ("util", "AVAILABLE"),
            ("istatus", "ACTIVE"),
            ("reg_ms", "1000"),
            ("claim_ms", "2000"),
            ("claim_exp_ms", "62000"),
        ];
        let live = GameServerRecord::from_fields("f", 61_999, stored.clone()).unwrap();
        assert!(live.is_claimed());
        let lapsed = GameServerRecord::from_fields("f", 62_000, stored).unwrap();
        assert!(!lapsed.is_claimed());
        assert_eq!(lapsed.last_claim_ms, Some(2000));
        let proto = pb::GameServer::from(lapsed);
        assert_eq!(proto.claim_status(), pb::ClaimStatus::Unspecified);
        assert_eq!(proto.last_claim_time.unwrap().seconds, 2);
    }

    #[test]
    fn claim_filter_maps_to_tiers() {
        let mut v = Violations::new();
        assert_eq!(check_claim_filter(&mut v, &[]), ClaimTiers { lowest: 0, highest: 1 });
        let active = [pb::InstanceStatus::Active as i32];
        assert_eq!(
            check_claim_filter(&mut v, &active),
            ClaimTiers { lowest: 0, highest: 0 }
        );
        let draining = [pb::InstanceStatus::Draining as i32];
        assert_eq!(
            check_claim_filter(&mut v, &draining),
            ClaimTiers { lowest: 1, highest: 1 }
        );
        assert!(v.into_result().is_ok());
        let mut v = Violations::new();
        check_claim_filter(&mut v, &[pb::InstanceStatus::SpotTerminating as i32]);
        assert!(v.into_result().is_err());
    }
}
