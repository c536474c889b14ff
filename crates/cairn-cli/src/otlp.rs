//! Exports Cairn's `tracing` spans through the OpenTelemetry SDK and its OTLP exporter when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. The standard
//! `OTEL_*` variables apply: the protocol (`OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf`, the
//! default, or `grpc`), headers (`OTEL_EXPORTER_OTLP_HEADERS`, e.g. an API key), timeout,
//! compression (gzip over gRPC), `OTEL_SERVICE_NAME` (default `cairn`) and
//! `OTEL_RESOURCE_ATTRIBUTES`. `https://` endpoints use rustls with the system's roots.
//!
//! A run's spans share one trace: the engine gives each execution's `workflow.run` span a parent
//! made from the run id (`cairn::telemetry::run_trace_parent`), so every execution of the run
//! (after a suspension, a crash or a deploy, on any worker) adds to the same trace. Spans are
//! batched and sent by the SDK's background thread; [`Exporter`] flushes them when dropped.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The exporting machinery; dropping it sends the spans still waiting.
pub(crate) struct Exporter {
    provider: SdkTracerProvider,
    /// The gRPC client's own runtime (one thread), dropped after the last spans are sent: the
    /// process's main runtime ends before them.
    _grpc: Option<tokio::runtime::Runtime>,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("cairn: warning: could not send the last spans over OTLP: {error}");
        }
    }
}

/// The layer that hands spans of subscriber `S` to the SDK's tracer.
pub(crate) type OtelLayer<S> = tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>;

/// A variable's value, if set and not empty.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// The `tracing` layer that hands Cairn's spans to OpenTelemetry, and the exporter behind it,
/// when the environment names an OTLP endpoint (`None` when it names none).
pub(crate) fn start<S>() -> Result<Option<(OtelLayer<S>, Exporter)>, String>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    if var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() && var("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        || var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Ok(None);
    }
    let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    let mut grpc = None;
    let exporter = match protocol.as_deref() {
        None | Some("http/protobuf") => {
            // reqwest's rustls is built without a crypto provider (the default one needs cmake
            // and a C toolchain); ring is the one every other TLS client here uses. An error
            // means one is installed already, which serves as well.
            let _ = rustls::crypto::ring::default_provider().install_default();
            SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary).build()
        }
        Some("grpc") => {
            // The tonic client's connection runs as a task of the runtime it is made in.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("cairn-otlp")
                .enable_all()
                .build()
                .map_err(|error| format!("cannot start the OTLP exporter's runtime: {error}"))?;
            let _inside = runtime.enter();
            let exporter = SpanExporter::builder().with_tonic().build();
            drop(_inside);
            grpc = Some(runtime);
            exporter
        }
        Some(other) => {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not supported (use `http/protobuf` or `grpc`)"
            ));
        }
    }
    .map_err(|error| format!("cannot make the OTLP exporter: {error}"))?;
    let named = var("OTEL_SERVICE_NAME").is_some()
        || var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| attributes.contains("service.name="));
    let resource = match named {
        true => Resource::builder().build(),
        false => Resource::builder().with_service_name("cairn").build(),
    };
    let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("cairn"));
    Ok(Some((layer, Exporter { provider, _grpc: grpc })))
}
