//! PlayerSessionService: reserve slots for players in an ACTIVE game session (one, or up to 25 all or none; the
//! count is checked and the slots taken in one script, so the maximum holds whatever races), and read them back.

use std::sync::Arc;

use berth_domain::game_session::PlayerSessionRecord;
use berth_domain::game_session::{PlayerSessionStatus, check, fleet_of};
use berth_domain::validate::invalid;
use berth_proto::session::v1::player_session_service_server::PlayerSessionService;
use berth_proto::session::v1::{self as pb, describe_player_sessions_request::Selector};
use berth_store::Store;
use berth_store::fleets::fleets;
use berth_store::sessions::{self as store, Page, PlayerSource, PlayersCreated};
use tonic::{Request, Response, Status};

use crate::Context;
use berth_domain::page_token::{digest, issue, redeem};

/// A page of one fleet's player sessions from `source` with `status` (empty: any), behind a page token bound to the
/// selection.
pub(crate) async fn page_of(
    store: &Store,
    fleet_id: &str,
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
    let page = store::list_player_sessions(store, fleet_id, source, status, after, size).await?;
    Ok(Page {
        next: page.next.map(|next| issue(&selection, Some(next))),
        items: page.items,
    })
}

/// One player session as a page: empty when `status` (empty: any) leaves it out.
pub(crate) fn page_of_one(record: PlayerSessionRecord, status: &str) -> Page<PlayerSessionRecord> {
    let shown = status.is_empty() || record.status.map(PlayerSessionStatus::as_str) == Some(status);
    Page {
        items: if shown { vec![record] } else { Vec::new() },
        next: None,
    }
}

/// DescribePlayerSessions' answer of a page.
pub(crate) fn described(page: Page<PlayerSessionRecord>) -> pb::DescribePlayerSessionsResponse {
    pb::DescribePlayerSessionsResponse {
        player_sessions: page.items.into_iter().map(Into::into).collect(),
        next_page_token: page.next.unwrap_or_default(),
    }
}

/// The handler.
pub struct PlayerSessions {
    context: Arc<Context>,
}

impl PlayerSessions {
    pub(crate) fn new(context: Arc<Context>) -> PlayerSessions {
        PlayerSessions { context }
    }

    async fn create(&self, game_session_id: &str, players: &[(&str, &str)]) -> Result<Vec<pb::PlayerSession>, Status> {
        let fleet_id = fleet_of(game_session_id)
            .ok_or_else(|| Status::not_found(format!("no game session {game_session_id:?}")))?;
        match store::create_player_sessions(&self.context.store, fleet_id, game_session_id, players).await? {
            PlayersCreated::Created(records) => {
                crate::metrics::player_sessions_created(records.len());
                Ok(records.into_iter().map(Into::into).collect())
            }
            PlayersCreated::NotFound => Err(Status::not_found(format!("no game session {game_session_id:?}"))),
            PlayersCreated::NotActive(status) => Err(Status::failed_precondition(format!(
                "game session {game_session_id:?} is {status}, not ACTIVE: players join only an ACTIVE session"
            ))),
            PlayersCreated::DenyAll => Err(Status::failed_precondition(format!(
                "game session {game_session_id:?} takes no new players (player_session_creation_policy DENY_ALL)"
            ))),
            PlayersCreated::Full(free) => Err(Status::resource_exhausted(format!(
                "game session {game_session_id:?} is full: {free} free slots for {} players",
                players.len()
            ))),
            PlayersCreated::PlayerConflict(player_id) => Err(Status::already_exists(format!(
                "player {player_id:?} holds a live player session in game session {game_session_id:?} with other \
                 player_data"
            ))),
        }
    }
}

#[tonic::async_trait]
impl PlayerSessionService for PlayerSessions {
    async fn create_player_session(
        &self,
        request: Request<pb::CreatePlayerSessionRequest>,
    ) -> Result<Response<pb::CreatePlayerSessionResponse>, Status> {
        let req = request.into_inner();
        check::check_create_player_session(&req)?;
        let mut created = self
            .create(&req.game_session_id, &[(&req.player_id, &req.player_data)])
            .await?;
        Ok(Response::new(pb::CreatePlayerSessionResponse {
            player_session: created.pop(),
        }))
    }

    async fn create_player_sessions(
        &self,
        request: Request<pb::CreatePlayerSessionsRequest>,
    ) -> Result<Response<pb::CreatePlayerSessionsResponse>, Status> {
        let req = request.into_inner();
        check::check_create_player_sessions(&req)?;
        let players: Vec<(&str, &str)> = req
            .players
            .iter()
            .map(|player| (player.player_id.as_str(), player.player_data.as_str()))
            .collect();
        let player_sessions = self.create(&req.game_session_id, &players).await?;
        Ok(Response::new(pb::CreatePlayerSessionsResponse { player_sessions }))
    }

    async fn describe_player_sessions(
        &self,
        request: Request<pb::DescribePlayerSessionsRequest>,
    ) -> Result<Response<pb::DescribePlayerSessionsResponse>, Status> {
        let req = request.into_inner();
        let size = check::check_describe_player_sessions(&req)?;
        let store = &self.context.store;
        let status = PlayerSessionStatus::from_proto(req.status_filter()).map_or("", PlayerSessionStatus::as_str);
        let page: Page<_> = match &req.selector {
            Some(Selector::PlayerSessionId(id)) => {
                let fleet_id = fleet_of(id).ok_or_else(|| Status::not_found(format!("no player session {id:?}")))?;
                let record = store::read_player_sessions(store, fleet_id, &[id])
                    .await?
                    .pop()
                    .flatten()
                    .ok_or_else(|| Status::not_found(format!("no player session {id:?}")))?;
                page_of_one(record, status)
            }
            Some(Selector::GameSessionId(id)) => {
                let fleet_id = fleet_of(id).ok_or_else(|| Status::not_found(format!("no game session {id:?}")))?;
                if store::read_game_sessions(store, fleet_id, &[id])
                    .await?
                    .pop()
                    .flatten()
                    .is_none()
                {
                    return Err(Status::not_found(format!("no game session {id:?}")));
                }
                page_of(
                    store,
                    fleet_id,
                    PlayerSource::GameSession(id),
                    status,
                    &req.page_token,
                    size,
                )
                .await?
            }
            Some(Selector::PlayerId(player_id)) => self.by_player(player_id, status, &req.page_token, size).await?,
            None => {
                return Err(invalid(
                    "selector",
                    "must be set: player_session_id, game_session_id or player_id",
                ));
            }
        };
        Ok(Response::new(described(page)))
    }
}

impl PlayerSessions {
    /// A player's sessions across fleets: each fleet keeps its own index of them, so the fleets are read in turn
    /// (in name order), a page token naming the fleet and the position in it.
    async fn by_player(
        &self,
        player_id: &str,
        status: &str,
        token: &str,
        size: usize,
    ) -> Result<Page<PlayerSessionRecord>, Status> {
        let store = &self.context.store;
        let selection = digest(&[b"p", player_id.as_bytes(), status.as_bytes()]);
        let resume = redeem(&selection, token)?
            .map(|position| position.split_once('|').unwrap_or((position, "")))
            .map(|(fleet, after)| (fleet.to_owned(), after.to_owned()));
        let mut names = fleets(store).await?;
        names.sort_unstable();
        let mut items = Vec::new();
        for (at, fleet_id) in names.iter().enumerate() {
            let after = match &resume {
                Some((fleet, _)) if fleet_id < fleet => continue,
                Some((fleet, after)) if fleet_id == fleet && !after.is_empty() => Some(after.as_str()),
                _ => None,
            };
            let source = PlayerSource::Player(player_id);
            let page = store::list_player_sessions(store, fleet_id, source, status, after, size - items.len()).await?;
            items.extend(page.items);
            // Where the next page starts: further in this fleet, or at the start of the next one.
            let next = match (page.next, names.get(at + 1)) {
                (Some(next), _) => Some(format!("{fleet_id}|{next}")),
                (None, Some(following)) if items.len() == size => Some(format!("{following}|")),
                _ => None,
            };
            if let Some(next) = next {
                return Ok(Page {
                    items,
                    next: Some(issue(&selection, Some(next))),
                });
            }
        }
        Ok(Page { items, next: None })
    }
}
