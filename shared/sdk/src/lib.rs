//! Clients for Berth. [`connect`] opens a channel to any Berth service that carries a bearer token on every
//! call; wrap it in the generated client of the service you need:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use berth_proto::placement::v1::{ClaimGameServerRequest, claim_service_client::ClaimServiceClient};
//!
//! let channel = berth_sdk::connect("http://127.0.0.1:7101", "<token from berth-token>").await?;
//! let mut claims = ClaimServiceClient::new(channel);
//! let claimed = claims
//!     .claim_game_server(ClaimGameServerRequest { fleet_id: "arena-eu".into(), ..Default::default() })
//!     .await?
//!     .into_inner();
//! println!("play at {}", claimed.game_server.unwrap().connection_info);
//! # Ok(()) }
//! ```
//!
//! [`probe`] asks any service whether it is serving and what it serves. [`game_server`] is the SDK a game server
//! process links: its stream to the health service, heartbeats, and the commands Berth gives it.

pub mod game_server;
pub mod probe;

pub use game_server::{Event, Events, GameServer, GameServerConfig, SdkError};

use opentelemetry::propagation::Injector;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Why a client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The token has characters that cannot travel in gRPC metadata.
    #[error("the bearer token is not valid ASCII metadata")]
    BadToken,
    /// The endpoint is not a valid URI or could not be reached.
    #[error("cannot reach {endpoint}: {source}")]
    Connect {
        /// The endpoint.
        endpoint: String,
        /// Why.
        source: tonic::transport::Error,
    },
}

/// Adds `authorization: Bearer <token>` to every call, and the current span's trace context (W3C
/// `traceparent`, through the process's OpenTelemetry propagator) so that the callee's spans join the caller's
/// trace.
#[derive(Clone)]
pub struct BearerToken {
    value: MetadataValue<Ascii>,
}

impl BearerToken {
    /// An interceptor for `token`.
    pub fn new(token: &str) -> Result<BearerToken, ClientError> {
        let value = format!("Bearer {token}").parse().map_err(|_| ClientError::BadToken)?;
        Ok(BearerToken { value })
    }
}

impl Interceptor for BearerToken {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert("authorization", self.value.clone());
        let context = tracing::Span::current().context();
        opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.inject_context(&context, &mut MetadataInjector(request.metadata_mut()))
        });
        Ok(request)
    }
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            tonic::metadata::MetadataValue::try_from(value),
        ) {
            self.0.insert(key, value);
        }
    }
}

/// A channel that authenticates every call.
pub type AuthedChannel = InterceptedService<Channel, BearerToken>;

/// Connects to a Berth service at `endpoint` (e.g. `http://127.0.0.1:7101`), presenting `token`. Several
/// replicas may be listed, comma-separated: calls are spread over those that answer, so that a stream broken by
/// a replica's death resumes through another.
pub async fn connect(endpoint: &str, token: &str) -> Result<AuthedChannel, ClientError> {
    let interceptor = BearerToken::new(token)?;
    let failed = |source| ClientError::Connect {
        endpoint: endpoint.to_owned(),
        source,
    };
    let endpoints = endpoint
        .split(',')
        .map(|one| Endpoint::from_shared(one.trim().to_owned()).map(|one| one.tcp_nodelay(true)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(failed)?;
    let channel = match endpoints.as_slice() {
        [one] => one.connect().await.map_err(failed)?,
        _ => Channel::balance_list(endpoints.into_iter()),
    };
    Ok(InterceptedService::new(channel, interceptor))
}
