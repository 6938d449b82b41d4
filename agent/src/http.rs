//! The Agones SDK over HTTP/JSON, as Agones' SDK server's gateway serves it for servers written with only an HTTP
//! client (Agones' REST SDK): the same calls as the gRPC service, at the same paths with the same JSON (field names
//! as in the `.proto`, every field written), errors as the gateway writes them (`{"code", "message", "details"}` with
//! the HTTP status of the gRPC code), and the watch as one JSON object a line, `{"result": …}`.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use berth_proto::agones::sdk::alpha::sdk_server::Sdk as Alpha;
use berth_proto::agones::sdk::alpha::{self, Count, PlayerId};
use berth_proto::agones::sdk::beta::sdk_server::Sdk as Beta;
use berth_proto::agones::sdk::beta::{
    AddListValueRequest, CounterUpdateRequest, GetCounterRequest, GetListRequest, List, RemoveListValueRequest,
    UpdateCounterRequest, UpdateListRequest,
};
use berth_proto::agones::sdk::sdk_server::Sdk;
use berth_proto::agones::sdk::{Duration, Empty, KeyValue};
use berth_proto::json;
use prost::{Message, Name};
use tokio_stream::StreamExt;
use tonic::{Request, Status};

use crate::counters::AgonesCounters;
use crate::players::AgonesPlayers;
use crate::sdk::AgonesSdk;

/// The routes of the stable SDK, player tracking, and counters and lists.
pub fn router(sdk: Arc<AgonesSdk>, players: Arc<AgonesPlayers>, counters: Arc<AgonesCounters>) -> Router {
    let beta = Router::new()
        .route("/v1beta1/counters/{name}", get(get_counter).patch(update_counter))
        .route(
            "/v1beta1/lists/{name}",
            get(get_list).patch(update_list).post(list_value),
        )
        .with_state(counters);
    let alpha = Router::new()
        .route("/alpha/player/connect", post(player_connect))
        .route("/alpha/player/disconnect", post(player_disconnect))
        .route("/alpha/player/capacity", put(set_player_capacity).get(player_capacity))
        .route("/alpha/player/count", get(player_count))
        .route("/alpha/player/connected", get(connected_players))
        .route("/alpha/player/connected/{player}", get(player_connected))
        .with_state(players);
    Router::new()
        .route("/ready", post(ready))
        .route("/allocate", post(allocate))
        .route("/shutdown", post(shutdown))
        .route("/health", post(health))
        .route("/gameserver", get(game_server))
        .route("/watch/gameserver", get(watch))
        .route("/metadata/label", put(set_label))
        .route("/metadata/annotation", put(set_annotation))
        .route("/reserve", post(reserve))
        .with_state(sdk)
        .merge(alpha)
        .merge(beta)
        .fallback(|| async { error(&Status::not_found("Not Found")) })
        .method_not_allowed_fallback(|| async { error(&Status::unimplemented("Method Not Allowed")) })
}

fn error(status: &Status) -> Response {
    json::gateway_error_response(status).into_response()
}

/// A message answered as JSON.
fn message<M: Message + Name>(result: Result<tonic::Response<M>, Status>) -> Response {
    match result.and_then(|response| {
        json::to_gateway_json(&response.into_inner()).map_err(|err| Status::internal(err.to_string()))
    }) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(status) => error(&status),
    }
}

/// Calls `method` with the request body read as `M` (an empty body is the empty message); malformed JSON is
/// INVALID_ARGUMENT (400) and calls nothing.
async fn call<M, R, F>(bytes: &Bytes, method: impl FnOnce(Request<M>) -> F) -> Response
where
    M: Message + Name + Default,
    R: Message + Name,
    F: Future<Output = Result<tonic::Response<R>, Status>>,
{
    let request = if bytes.iter().all(u8::is_ascii_whitespace) {
        M::default()
    } else {
        match json::from_json(bytes) {
            Ok(request) => request,
            Err(err) => return error(&Status::invalid_argument(err.to_string())),
        }
    };
    message(method(Request::new(request)).await)
}

async fn ready(State(sdk): State<Arc<AgonesSdk>>, bytes: Bytes) -> Response {
    call::<Empty, _, _>(&bytes, |request| sdk.ready(request)).await
}

async fn allocate(State(sdk): State<Arc<AgonesSdk>>, bytes: Bytes) -> Response {
    call::<Empty, _, _>(&bytes, |request| sdk.allocate(request)).await
}

async fn shutdown(State(sdk): State<Arc<AgonesSdk>>, bytes: Bytes) -> Response {
    call::<Empty, _, _>(&bytes, |request| sdk.shutdown(request)).await
}

/// One POST is one ping (Agones' REST SDK sends one a period).
async fn health(State(sdk): State<Arc<AgonesSdk>>, bytes: Bytes) -> Response {
    call::<Empty, _, _>(&bytes, |_| async move {
        sdk.ping();
        Ok(tonic::Response::new(Empty {}))
    })
    .await
}

async fn game_server(State(sdk): State<Arc<AgonesSdk>>) -> Response {
    message(sdk.get_game_server(Request::new(Empty {})).await)
}

async fn watch(State(sdk): State<Arc<AgonesSdk>>) -> Response {
    let stream = match sdk.watch_game_server(Request::new(Empty {})).await {
        Ok(stream) => stream.into_inner(),
        Err(status) => return error(&status),
    };
    let lines = stream.map(|item| {
        let line = item
            .and_then(|server| json::to_gateway_json(&server).map_err(|err| Status::internal(err.to_string())))
            .map_or_else(
                |status| {
                    serde_json::json!({"error": json::gateway_error_json(&status)})
                        .to_string()
                        .into_bytes()
                },
                |server| [b"{\"result\":".as_slice(), &server, b"}"].concat(),
            );
        Ok::<_, std::convert::Infallible>([line, b"\n".to_vec()].concat())
    });
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(lines)).into_response()
}

async fn set_label(State(sdk): State<Arc<AgonesSdk>>, bytes: Bytes) -> Response {
    call::<KeyValue, _, _>(&bytes, |request| sdk.set_label(request)).await
}

async fn set_annotation(State(sdk): State<Arc<AgonesSdk>>, bytes: Bytes) -> Response {
    call::<KeyValue, _, _>(&bytes, |request| sdk.set_annotation(request)).await
}

async fn reserve(State(sdk): State<Arc<AgonesSdk>>, bytes: Bytes) -> Response {
    call::<Duration, _, _>(&bytes, |request| sdk.reserve(request)).await
}

async fn player_connect(State(players): State<Arc<AgonesPlayers>>, bytes: Bytes) -> Response {
    call::<PlayerId, _, _>(&bytes, |request| players.player_connect(request)).await
}

async fn player_disconnect(State(players): State<Arc<AgonesPlayers>>, bytes: Bytes) -> Response {
    call::<PlayerId, _, _>(&bytes, |request| players.player_disconnect(request)).await
}

async fn set_player_capacity(State(players): State<Arc<AgonesPlayers>>, bytes: Bytes) -> Response {
    call::<Count, _, _>(&bytes, |request| players.set_player_capacity(request)).await
}

async fn player_capacity(State(players): State<Arc<AgonesPlayers>>) -> Response {
    message(players.get_player_capacity(Request::new(alpha::Empty {})).await)
}

async fn player_count(State(players): State<Arc<AgonesPlayers>>) -> Response {
    message(players.get_player_count(Request::new(alpha::Empty {})).await)
}

async fn connected_players(State(players): State<Arc<AgonesPlayers>>) -> Response {
    message(players.get_connected_players(Request::new(alpha::Empty {})).await)
}

async fn player_connected(State(players): State<Arc<AgonesPlayers>>, Path(player_id): Path<String>) -> Response {
    message(players.is_player_connected(Request::new(PlayerId { player_id })).await)
}

async fn get_counter(State(counters): State<Arc<AgonesCounters>>, Path(name): Path<String>) -> Response {
    message(counters.get_counter(Request::new(GetCounterRequest { name })).await)
}

/// The body is the CounterUpdateRequest; its name is the path's.
async fn update_counter(
    State(counters): State<Arc<AgonesCounters>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Response {
    call::<CounterUpdateRequest, _, _>(&bytes, |request| {
        let update = CounterUpdateRequest {
            name,
            ..request.into_inner()
        };
        let request = UpdateCounterRequest {
            counter_update_request: Some(update),
        };
        async move { counters.update_counter(Request::new(request)).await }
    })
    .await
}

async fn get_list(State(counters): State<Arc<AgonesCounters>>, Path(name): Path<String>) -> Response {
    message(counters.get_list(Request::new(GetListRequest { name })).await)
}

/// The body is the List; the fields to set come as the query's updateMask (comma-separated), as the gateway reads a
/// FieldMask outside the body.
async fn update_list(
    State(counters): State<Arc<AgonesCounters>>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    bytes: Bytes,
) -> Response {
    let paths: Vec<String> = query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(key, _)| *key == "updateMask" || *key == "update_mask")
        .flat_map(|(_, value)| {
            let value = value.replace("%2C", ",").replace("%2c", ",");
            value.split(',').map(str::to_owned).collect::<Vec<_>>()
        })
        .filter(|path| !path.is_empty())
        .collect();
    call::<List, _, _>(&bytes, |request| {
        let list = List {
            name,
            ..request.into_inner()
        };
        let request = UpdateListRequest {
            list: Some(list),
            update_mask: Some(prost_types::FieldMask { paths }),
        };
        async move { counters.update_list(Request::new(request)).await }
    })
    .await
}

/// `POST /v1beta1/lists/{name}:addValue` and `:removeValue`, the body `{"value": …}`.
async fn list_value(
    State(counters): State<Arc<AgonesCounters>>,
    Path(name_and_verb): Path<String>,
    bytes: Bytes,
) -> Response {
    let Some((name, verb)) = name_and_verb.rsplit_once(':') else {
        return error(&Status::not_found("Not Found"));
    };
    let name = name.to_owned();
    match verb {
        "addValue" => {
            call::<AddListValueRequest, _, _>(&bytes, |request| {
                let request = AddListValueRequest {
                    name,
                    ..request.into_inner()
                };
                async move { counters.add_list_value(Request::new(request)).await }
            })
            .await
        }
        "removeValue" => {
            call::<RemoveListValueRequest, _, _>(&bytes, |request| {
                let request = RemoveListValueRequest {
                    name,
                    ..request.into_inner()
                };
                async move { counters.remove_list_value(Request::new(request)).await }
            })
            .await
        }
        _ => error(&Status::not_found("Not Found")),
    }
}
