//! Logs and traces. Logs go to stderr as text or JSON; traces go over OTLP when an endpoint is configured.
//! Trace context crosses services in gRPC metadata (W3C `traceparent`): the edge adopts the caller's, and
//! `berth-sdk` clients send the current span's, so one placement can be followed through every service it touches.
//! Where a hop goes through Redis instead (a request taken from a queue's stream, an announcement to the health
//! replica holding a game server's stream), the sender writes [`traceparent`] beside what it sends and the receiver
//! [`continue_trace`]s from it.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::trace::TracerProvider;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use berth_store::Store;
use berth_store::processes::{self, Routing};

use crate::config::{CommonArgs, LogFormat};

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log filter does not parse.
    #[error("BERTH_LOG is not a valid filter: {0}")]
    Filter(#[from] tracing_subscriber::filter::ParseError),
    /// The OTLP exporter could not be built.
    #[error("cannot export traces to {endpoint}: {reason}")]
    Exporter {
        /// The configured endpoint.
        endpoint: String,
        /// What went wrong.
        reason: String,
    },
    /// A subscriber was already installed.
    #[error("logging was already set up: {0}")]
    AlreadySet(#[from] tracing_subscriber::util::TryInitError),
}

/// Keeps the trace exporter alive; flush it with [`Telemetry::shutdown`] before exiting.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes pending spans.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(err) = provider.shutdown()
        {
            eprintln!("flushing traces failed: {err}");
        }
    }
}

/// Installs logging (and tracing export when configured) for the process.
pub fn init(service: &'static str, args: &CommonArgs) -> Result<Telemetry, TelemetryError> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let filter = EnvFilter::try_new(&args.log)?;
    let fmt = match args.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(std::io::stderr).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let provider = match &args.otlp_endpoint {
        None => None,
        Some(endpoint) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .build()
                .map_err(|err| TelemetryError::Exporter {
                    endpoint: endpoint.clone(),
                    reason: err.to_string(),
                })?;
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(Resource::builder().with_service_name(service).build())
                    .build(),
            )
        }
    };
    // BERTH_LOG chooses what is logged, not what is traced: a quiet log must not cut the traces short.
    let otel = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer(service))
            .with_filter(LevelFilter::INFO)
    });
    tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(otel)
        .try_init()?;
    Ok(Telemetry { provider })
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|key| key.as_str()).collect()
    }
}

/// Makes `span` a child of the trace context a caller sent, if any.
pub(crate) fn adopt_remote_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    let parent =
        opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(headers)));
    // Only fails when no OpenTelemetry layer is installed, in which case there is nothing to link.
    let _ = span.set_parent(parent);
}

struct Carried(HashMap<String, String>);

impl Injector for Carried {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

impl Extractor for Carried {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The current span's trace context as a W3C `traceparent` value, to write beside a message that crosses Redis;
/// `None` when the span is in no trace (no exporter is configured, or the trace is not sampled).
pub fn traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    // Without a trace (no exporter configured) there is nothing to carry, and nothing to allocate for it.
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carried = Carried(HashMap::new());
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.inject_context(&context, &mut carried));
    carried.0.remove("traceparent")
}

/// Tells the health replica holding a process's stream that its desired state moved, within the current trace
/// (see [`berth_store::processes::announce`]).
pub async fn announce(store: &Store, routing: &Routing, fleet_id: &str, game_server_id: &str) {
    processes::announce(store, routing, fleet_id, game_server_id, traceparent().as_deref()).await;
}

/// Makes `span` a child of the span whose [`traceparent`] a message carried across Redis. A value that does not
/// read leaves `span` where it was.
pub fn continue_trace(span: &tracing::Span, traceparent: &str) {
    let carried = Carried(HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]));
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&carried));
    // Only fails when no OpenTelemetry layer is installed, in which case there is nothing to link.
    let _ = span.set_parent(parent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_traceparent_becomes_the_parent_of_the_rpc_span() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let provider = SdkTracerProvider::builder().build();
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let mut headers = http::HeaderMap::new();
            let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
            headers.insert("traceparent", traceparent.parse().unwrap());
            let span = tracing::info_span!("rpc");
            adopt_remote_parent(&span, &headers);
            let trace_id = span.context().span().span_context().trace_id();
            assert_eq!(trace_id.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        });
    }

    #[test]
    fn a_trace_carried_across_redis_continues_where_it_left() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let provider = SdkTracerProvider::builder().build();
        let subscriber =
            tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let sender = tracing::info_span!("sender");
            let carried = sender
                .in_scope(traceparent)
                .expect("a span of a sampled trace has a context");
            let receiver = tracing::info_span!("receiver");
            continue_trace(&receiver, &carried);
            let (sent, received) = (sender.context(), receiver.context());
            assert_eq!(
                received.span().span_context().trace_id(),
                sent.span().span_context().trace_id()
            );
            assert_ne!(
                received.span().span_context().span_id(),
                sent.span().span_context().span_id()
            );
        });
        assert_eq!(traceparent(), None, "outside any trace there is nothing to carry");
    }
}
