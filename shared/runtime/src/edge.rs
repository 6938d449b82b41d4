//! The edge every RPC passes through before its handler: a span joined to the caller's trace, the bearer-token
//! check (the caller is put in the request's extensions for handlers' scope checks), the caller's deadline, and the
//! request count and latency metrics by method and status code.
//!
//! A call still unanswered at the caller's deadline (`grpc-timeout`) is answered DEADLINE_EXCEEDED here, as the
//! contracts promise, and its handler dropped. tonic's own timeout, outside every layer, would answer CANCELLED
//! "Timeout expired" a moment later; the edge gives up a margin before it (`deadline::CallerDeadline`), so that it
//! always answers first, and leaves that deadline in the request's extensions for the handlers that commit.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use http::{Request, Response};
use prost::Message;
use tonic::body::Body;
use tower::{Layer, Service};
use tracing::Instrument;

use crate::auth::{AccessRules, AuthMode, PUBLIC_PATHS, authenticate};
use crate::deadline::CallerDeadline;
use crate::metrics::{GRPC_REQUEST_DURATION, GRPC_REQUESTS};
use crate::telemetry::adopt_remote_parent;

/// Every method path the served contracts define (Berth's own, health and reflection): the only values the
/// metrics' `method` label takes besides `unknown`, so that no caller can mint a new series by inventing a path.
static METHODS: LazyLock<HashSet<String>> = LazyLock::new(|| {
    let sets = [
        berth_proto::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
        tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
        tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
    ];
    sets.into_iter()
        .flat_map(|encoded| {
            prost_types::FileDescriptorSet::decode(encoded)
                .expect("compiled-in descriptor sets decode")
                .file
        })
        .flat_map(|file| {
            let package = file.package().to_owned();
            file.service.into_iter().flat_map(move |service| {
                let prefix = format!("/{package}.{}/", service.name());
                service
                    .method
                    .into_iter()
                    .map(move |method| format!("{prefix}{}", method.name()))
            })
        })
        .collect()
});

/// The `method` label of a request path.
fn method_label(path: &str) -> String {
    if METHODS.contains(path) {
        path.to_owned()
    } else {
        "unknown".to_owned()
    }
}

/// What the edge needs to know.
#[derive(Clone)]
pub(crate) struct EdgeLayer {
    pub(crate) service: &'static str,
    pub(crate) auth: Arc<AuthMode>,
    pub(crate) rules: AccessRules,
}

impl<S> Layer<S> for EdgeLayer {
    type Service = Edge<S>;

    fn layer(&self, inner: S) -> Edge<S> {
        Edge {
            inner,
            config: self.clone(),
        }
    }
}

/// The edge around a service's routes.
#[derive(Clone)]
pub(crate) struct Edge<S> {
    inner: S,
    config: EdgeLayer,
}

impl<S> Service<Request<Body>> for Edge<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        // The clone is the one that is ready; keep it and leave the fresh one for the next call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        // Read now, as tonic's timeout was started, not when the future is first polled.
        let deadline = request
            .headers()
            .get("grpc-timeout")
            .and_then(|value| CallerDeadline::of(value, Instant::now()));
        if let Some(deadline) = deadline {
            request.extensions_mut().insert(deadline);
        }
        Box::pin(async move {
            let path = request.uri().path().to_owned();
            let method = method_label(&path);
            // Named as OpenTelemetry names RPC spans (`package.Service/Method`); a path no service serves is
            // "unknown", so that span names stay few.
            let span = tracing::info_span!(
                "rpc",
                otel.name = method.trim_start_matches('/'),
                otel.kind = "server",
                rpc.system = "grpc",
                service = config.service,
                path = %path
            );
            adopt_remote_parent(&span, request.headers());
            let started = Instant::now();
            async move {
                if !PUBLIC_PATHS.iter().any(|public| path.starts_with(public)) {
                    let authorization = request
                        .headers()
                        .get(http::header::AUTHORIZATION)
                        .and_then(|value| value.to_str().ok());
                    match authenticate(&config.auth, config.rules, &path, authorization) {
                        Ok(caller) => {
                            request.extensions_mut().insert(caller);
                        }
                        Err(status) => {
                            tracing::debug!(code = ?status.code(), message = status.message(), "refused");
                            record(method, status.code() as i32, started);
                            return Ok(refusal(&status, is_grpc(request.headers())));
                        }
                    }
                }
                let answered = inner.call(request);
                let response = match deadline {
                    None => answered.await?,
                    Some(CallerDeadline(at)) => match tokio::time::timeout_at(at.into(), answered).await {
                        Ok(response) => response?,
                        Err(_) => {
                            let status = tonic::Status::deadline_exceeded(
                                "the caller's deadline (grpc-timeout) passed before the call was answered",
                            );
                            record(method, status.code() as i32, started);
                            return Ok(status.into_http());
                        }
                    },
                };
                // Errors of unary calls travel in the headers (trailers-only responses); a status that
                // comes in trailers is an OK unary call or a stream, counted as OK here.
                let code = response
                    .headers()
                    .get("grpc-status")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.parse().ok())
                    .unwrap_or(0);
                record(method, code, started);
                Ok(response)
            }
            .instrument(span)
            .await
        })
    }
}

/// Whether a request is a gRPC call rather than a plain HTTP one (a JSON face served beside the gRPC services).
fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/grpc"))
}

/// A refusal as the caller reads it: a gRPC status, or for a plain HTTP request the JSON and HTTP status
/// grpc-gateway writes.
fn refusal(status: &tonic::Status, grpc: bool) -> Response<Body> {
    if grpc {
        return status.clone().into_http();
    }
    berth_proto::json::gateway_error_response(status).map(Body::new)
}

fn record(method: String, code: i32, started: Instant) {
    let code = tonic::Code::from_i32(code);
    metrics::counter!(GRPC_REQUESTS, "method" => method.clone(), "code" => format!("{code:?}")).increment(1);
    metrics::histogram!(GRPC_REQUEST_DURATION, "method" => method).record(started.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_methods_of_the_contracts_are_labels() {
        for path in [
            "/berth.session.v1.GameSessionService/CreateGameSession",
            "/berth.health.v1.SdkService/Attach",
            "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        ] {
            assert_eq!(method_label(path), path);
        }
        for path in [
            "/berth.session.v1.GameSessionService/Invented",
            "/berth.session.v1.GameSessionService/",
            "/elsewhere.Service/Call",
        ] {
            assert_eq!(method_label(path), "unknown");
        }
    }
}
