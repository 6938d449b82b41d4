//! The edge every RPC passes through before its handler: a span joined to the caller's trace, the bearer-token
//! check (the caller is put in the request's extensions for handlers' scope checks), and the request count and
//! latency metrics by method and status code.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use http::{Request, Response};
use tonic::body::Body;
use tower::{Layer, Service};
use tracing::Instrument;

use crate::auth::{AccessRules, AuthMode, PUBLIC_PATHS, authenticate};
use crate::telemetry::adopt_remote_parent;

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
        Box::pin(async move {
            let path = request.uri().path().to_owned();
            // Label metrics only with paths Berth serves, so that callers cannot mint endless series.
            let known = PUBLIC_PATHS.iter().any(|public| path.starts_with(public))
                || config.rules.iter().any(|(prefix, _)| path.starts_with(prefix));
            let method = if known { path.clone() } else { "unknown".to_owned() };
            let span = tracing::info_span!("rpc", service = config.service, path = %path);
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
                            return Ok(status.into_http());
                        }
                    }
                }
                let response = inner.call(request).await?;
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

fn record(method: String, code: i32, started: Instant) {
    let code = tonic::Code::from_i32(code);
    metrics::counter!("berth_grpc_requests_total", "method" => method.clone(), "code" => format!("{code:?}"))
        .increment(1);
    metrics::histogram!("berth_grpc_request_duration_seconds", "method" => method)
        .record(started.elapsed().as_secs_f64());
}
