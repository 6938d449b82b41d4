//! GameSessionService: create a game session on a ready process of a fleet (picked and placed in one script, and
//! the process told through its health replica), read, list, change and end it, and search the ACTIVE ones.

use std::sync::Arc;

use berth_domain::game_session::{GameSessionStatus, check, fleet_of, new_game_session_id};
use berth_domain::validate::invalid;
use berth_proto::session::v1::game_session_service_server::GameSessionService;
use berth_proto::session::v1::{self as pb};
use berth_store::endings::{Terminated, terminate_game_session};
use berth_store::sessions::{self as store, Created, GameSessionChange, NewGameSession, Updated};
use prost::Message;
use tonic::{Request, Response, Status};

use crate::Context;
use berth_domain::page_token::{digest, issue, redeem};

/// The handler.
pub struct GameSessions {
    context: Arc<Context>,
}

impl GameSessions {
    pub(crate) fn new(context: Arc<Context>) -> GameSessions {
        GameSessions { context }
    }
}

fn properties(pairs: &[berth_proto::common::v1::KeyValue]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|pair| (pair.key.clone(), pair.value.clone()))
        .collect()
}

/// The fleet of a game session id that passed the checks.
fn fleet(game_session_id: &str) -> Result<&str, Status> {
    fleet_of(game_session_id).ok_or_else(|| Status::not_found(format!("no game session {game_session_id:?}")))
}

/// NOT_FOUND for a fleet no server ever joined, as the contract asks of listings and searches.
async fn known_fleet(store: &berth_store::Store, fleet_id: &str) -> Result<(), Status> {
    if berth_store::fleets::fleet_exists(store, fleet_id).await? {
        Ok(())
    } else {
        Err(Status::not_found(format!("no fleet {fleet_id:?}")))
    }
}

fn not_found(game_session_id: &str) -> Status {
    Status::not_found(format!("no game session {game_session_id:?}"))
}

/// Milliseconds as a UTC time for a message.
fn when(ms: i64) -> String {
    let ts = berth_domain::game_server::timestamp(ms);
    format!("{}.{:03} s after the Unix epoch", ts.seconds, ts.nanos / 1_000_000)
}

#[tonic::async_trait]
impl GameSessionService for GameSessions {
    async fn create_game_session(
        &self,
        request: Request<pb::CreateGameSessionRequest>,
    ) -> Result<Response<pb::CreateGameSessionResponse>, Status> {
        let req = request.into_inner();
        check::check_create_game_session(&req)?;
        let context = &self.context;
        let game_session_id = new_game_session_id(&req.fleet_id);
        let props = properties(&req.game_properties);
        let request_digest = digest(&[&req.encode_to_vec()]);
        // Without a token of the caller's, one of this call's own: the Redis client retries a script whose answer
        // timed out, and the retry must find the session the first attempt may have created, not make a second.
        let token = if req.idempotency_token.is_empty() {
            format!("auto-{}", uuid::Uuid::now_v7().simple())
        } else {
            req.idempotency_token.clone()
        };
        let new = NewGameSession {
            location: &req.location,
            accepts_players: req.player_session_creation_policy() != pb::PlayerSessionCreationPolicy::DenyAll,
            protected: match req.protection_policy() {
                pb::ProtectionPolicy::Unspecified => None,
                policy => Some(policy == pb::ProtectionPolicy::FullProtection),
            },
            name: &req.name,
            properties: &props,
            game_session_data: &req.game_session_data,
            matchmaker_data: &req.matchmaker_data,
            creator_id: &req.creator_id,
            idempotency_token: &token,
            digest: &request_digest,
            ..NewGameSession::new(&game_session_id, &req.fleet_id, req.maximum_player_session_count)
        };
        let session = match store::create_game_session(&context.store, &new, &context.timings).await? {
            Created::Created(record, routing) => {
                crate::metrics::game_session_created();
                berth_runtime::telemetry::announce(&context.store, &routing, &req.fleet_id, &record.game_server_id)
                    .await;
                *record
            }
            Created::Existing(record) => *record,
            // A placement's token holds ':', which no client's may: it never answers a client's request.
            Created::TokenReused | Created::Abandoned => {
                return Err(Status::already_exists(format!(
                    "idempotency_token {:?} was used in fleet {:?} for a different request",
                    req.idempotency_token, req.fleet_id
                )));
            }
            Created::NoServer => {
                return Err(Status::resource_exhausted(format!(
                    "fleet {:?} has no ready server process{} with room for {} players: retry later or scale up",
                    req.fleet_id,
                    in_location(&req.location),
                    req.maximum_player_session_count
                )));
            }
            Created::TooSmall => {
                return Err(Status::resource_exhausted(format!(
                    "every ready server process of fleet {:?}{} takes fewer than {} players: ask for fewer, or run \
                     servers that register a higher max_players",
                    req.fleet_id,
                    in_location(&req.location),
                    req.maximum_player_session_count
                )));
            }
            Created::CreatorLimit(until_ms) => {
                return Err(Status::resource_exhausted(format!(
                    "creator {:?} reached the fleet's limit of new game sessions per period \
                     (resource_creation_limit_policy); it frees up at {}",
                    req.creator_id,
                    when(until_ms)
                )));
            }
            Created::NotFound(why) => {
                return Err(Status::not_found(format!("fleet {:?}: {why}", req.fleet_id)));
            }
            Created::FleetNotActive(why) => {
                return Err(Status::failed_precondition(format!(
                    "fleet {:?} takes no new game session: {why}",
                    req.fleet_id
                )));
            }
        };
        Ok(Response::new(pb::CreateGameSessionResponse {
            game_session: Some(session.into()),
        }))
    }

    async fn describe_game_sessions(
        &self,
        request: Request<pb::DescribeGameSessionsRequest>,
    ) -> Result<Response<pb::DescribeGameSessionsResponse>, Status> {
        let req = request.into_inner();
        check::check_describe_game_sessions(&req)?;
        let mut found = vec![None; req.game_session_ids.len()];
        // One script per fleet named; most requests name one.
        let mut fleets: Vec<&str> = req
            .game_session_ids
            .iter()
            .map(|id| fleet(id))
            .collect::<Result<_, _>>()?;
        fleets.sort_unstable();
        fleets.dedup();
        for fleet_id in fleets {
            let (positions, ids): (Vec<usize>, Vec<&str>) = req
                .game_session_ids
                .iter()
                .enumerate()
                .filter(|(_, id)| fleet_of(id) == Some(fleet_id))
                .map(|(at, id)| (at, id.as_str()))
                .unzip();
            let records = store::read_game_sessions(&self.context.store, fleet_id, &ids).await?;
            for (at, record) in positions.into_iter().zip(records) {
                found[at] = record;
            }
        }
        let mut response = pb::DescribeGameSessionsResponse::default();
        for (id, record) in req.game_session_ids.into_iter().zip(found) {
            match record {
                Some(record) => response.game_sessions.push(record.into()),
                None => response.unknown_game_session_ids.push(id),
            }
        }
        Ok(Response::new(response))
    }

    async fn list_game_sessions(
        &self,
        request: Request<pb::ListGameSessionsRequest>,
    ) -> Result<Response<pb::ListGameSessionsResponse>, Status> {
        let req = request.into_inner();
        let size = check::check_list_game_sessions(&req)?;
        let statuses: Vec<&str> = req
            .statuses()
            .filter_map(GameSessionStatus::from_proto)
            .map(GameSessionStatus::as_str)
            .collect();
        let selection = digest(&[
            req.fleet_id.as_bytes(),
            req.location.as_bytes(),
            statuses.join(" ").as_bytes(),
        ]);
        let after = redeem(&selection, &req.page_token)?;
        known_fleet(&self.context.store, &req.fleet_id).await?;
        let page = store::list_game_sessions(
            &self.context.store,
            &req.fleet_id,
            &req.location,
            &statuses,
            after,
            size,
        )
        .await?;
        Ok(Response::new(pb::ListGameSessionsResponse {
            game_sessions: page.items.into_iter().map(Into::into).collect(),
            next_page_token: issue(&selection, page.next),
        }))
    }

    async fn update_game_session(
        &self,
        request: Request<pb::UpdateGameSessionRequest>,
    ) -> Result<Response<pb::UpdateGameSessionResponse>, Status> {
        let req = request.into_inner();
        check::check_update_game_session(&req)?;
        let fleet_id = fleet(&req.game_session_id)?;
        let props = properties(&req.game_properties);
        let accepts_players = match req.player_session_creation_policy() {
            pb::PlayerSessionCreationPolicy::Unspecified => None,
            policy => Some(policy == pb::PlayerSessionCreationPolicy::AcceptAll),
        };
        let protected = match req.protection_policy() {
            pb::ProtectionPolicy::Unspecified => None,
            policy => Some(policy == pb::ProtectionPolicy::FullProtection),
        };
        let change = GameSessionChange {
            game_session_id: &req.game_session_id,
            maximum_players: req.maximum_player_session_count,
            accepts_players,
            protected,
            name: req.name.as_deref(),
            matchmaker_data: req.matchmaker_data.as_deref(),
            properties: &props,
            properties_max: check::PROPERTIES_MAX,
        };
        let store = &self.context.store;
        match store::update_game_session(store, fleet_id, &change).await? {
            Updated::Updated(record, routing) => {
                berth_runtime::telemetry::announce(store, &routing, fleet_id, &record.game_server_id).await;
                Ok(Response::new(pb::UpdateGameSessionResponse {
                    game_session: Some((*record).into()),
                }))
            }
            Updated::NotFound => Err(not_found(&req.game_session_id)),
            Updated::Ended(status) => Err(Status::failed_precondition(format!(
                "game session {:?} is {status}: an ended session cannot change",
                req.game_session_id
            ))),
            Updated::BelowCount(current) => Err(Status::failed_precondition(format!(
                "maximum_player_session_count {} is below the session's {current} player sessions",
                req.maximum_player_session_count.unwrap_or_default()
            ))),
            Updated::AboveServer(most) => Err(Status::failed_precondition(format!(
                "maximum_player_session_count {} is above the {most} players its game server takes",
                req.maximum_player_session_count.unwrap_or_default()
            ))),
            Updated::TooManyProperties(count) => Err(invalid(
                "game_properties",
                format!(
                    "would leave the session {count} properties, at most {}",
                    check::PROPERTIES_MAX
                ),
            )),
        }
    }

    async fn terminate_game_session(
        &self,
        request: Request<pb::TerminateGameSessionRequest>,
    ) -> Result<Response<pb::TerminateGameSessionResponse>, Status> {
        let req = request.into_inner();
        check::check_terminate_game_session(&req)?;
        let fleet_id = fleet(&req.game_session_id)?;
        let force = req.termination_mode() == pb::TerminationMode::ForceTerminate;
        let store = &self.context.store;
        match terminate_game_session(store, fleet_id, &req.game_session_id, force).await? {
            Terminated::Done(record, game_server_id, routing) => {
                berth_runtime::telemetry::announce(store, &routing, fleet_id, &game_server_id).await;
                Ok(Response::new(pb::TerminateGameSessionResponse {
                    game_session: Some((*record).into()),
                }))
            }
            Terminated::NotFound => Err(not_found(&req.game_session_id)),
            Terminated::Ended(record) => Err(Status::failed_precondition(format!(
                "game session {:?} has already ended: {} ({})",
                req.game_session_id,
                record.status.map_or("unknown", |status| status.as_str()),
                record.status_reason
            ))),
        }
    }

    async fn search_game_sessions(
        &self,
        request: Request<pb::SearchGameSessionsRequest>,
    ) -> Result<Response<pb::SearchGameSessionsResponse>, Status> {
        let req = request.into_inner();
        let (filter, sort, size) = check::check_search_game_sessions(&req)?;
        known_fleet(&self.context.store, &req.fleet_id).await?;
        Ok(Response::new(
            crate::search::search(&self.context.store, &req, (&filter, &sort, size)).await?,
        ))
    }

    type WatchSessionEventsStream = crate::watch::Events;

    async fn watch_session_events(
        &self,
        request: Request<pb::WatchSessionEventsRequest>,
    ) -> Result<Response<Self::WatchSessionEventsStream>, Status> {
        let req = request.into_inner();
        check::check_watch_session_events(&req)?;
        Ok(Response::new(crate::watch::open(self.context.clone(), req).await?))
    }
}

/// " in <location>" for a location named, nothing for none.
fn in_location(location: &str) -> String {
    if location.is_empty() {
        String::new()
    } else {
        format!(" in {location:?}")
    }
}
