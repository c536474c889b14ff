//! Exports Cairn's `tracing` spans through the OpenTelemetry SDK and its OTLP exporter when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. The standard
//! `OTEL_*` variables apply: the protocol (`OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf`, the
//! default, or `grpc`), headers (`OTEL_EXPORTER_OTLP_HEADERS`, e.g. an API key), timeout,
//! compression (gzip over gRPC), `OTEL_SERVICE_NAME` (default `cairn`) and
//! `OTEL_RESOURCE_ATTRIBUTES`. `https://` endpoints use rustls with the system's roots. OTLP/HTTP
//! goes through hyper's client ([`Http`]).
//!
//! A run's spans share one trace: the engine gives each execution's `workflow.run` span a parent
//! made from the run id (`cairn::telemetry::run_trace_parent`), so every execution of the run
//! (after a suspension, a crash or a deploy, on any worker) adds to the same trace. Spans are
//! batched and sent by the SDK's background thread; [`Exporter`] flushes them when dropped.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::time::Duration;

/// The exporting machinery; dropping it sends the spans still waiting.
pub(crate) struct Exporter {
    provider: SdkTracerProvider,
    /// The clients' own runtime (one thread), dropped after the last spans are sent: the
    /// process's main runtime ends before them.
    _runtime: tokio::runtime::Runtime,
}

/// The OTLP/HTTP client: hyper's, with rustls for `https://`, run on the exporter's runtime (the
/// SDK's batch thread that calls it has none).
#[derive(Debug)]
struct Http {
    client: HyperClient<hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>>,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for Http {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime.spawn(async move { client.send_bytes(request).await }).await?
    }
}

/// How long one export may take: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or
/// `OTEL_EXPORTER_OTLP_TIMEOUT` in milliseconds, else the specification's 10 s.
fn timeout() -> Duration {
    let millis = var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT").or_else(|| var("OTEL_EXPORTER_OTLP_TIMEOUT"));
    Duration::from_millis(millis.and_then(|millis| millis.parse().ok()).unwrap_or(10_000))
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("cairn-otlp")
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the OTLP exporter's runtime: {error}"))?;
    let exporter = match protocol.as_deref() {
        None | Some("http/protobuf") => {
            // ring, which every other TLS client here uses (rustls's default, aws-lc-rs, needs
            // cmake and a C toolchain). An error means one is installed already, which serves.
            let _ = rustls::crypto::ring::default_provider().install_default();
            // Without the system's roots, `http://` collectors still work and `https://` ones
            // are refused as untrusted: said once, here.
            let connector = hyper_rustls::HttpsConnectorBuilder::new();
            let connector = match connector.with_native_roots() {
                Ok(connector) => connector,
                Err(error) => {
                    eprintln!(
                        "cairn: warning: no root certificates for OTLP over https ({error}); set SSL_CERT_FILE or SSL_CERT_DIR"
                    );
                    let roots = rustls::RootCertStore::empty();
                    hyper_rustls::HttpsConnectorBuilder::new()
                        .with_tls_config(rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth())
                }
            };
            let connector = connector.https_or_http().enable_http1().build();
            let client = Http { client: HyperClient::new(connector, timeout(), None), runtime: runtime.handle().clone() };
            SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary).with_http_client(client).build()
        }
        Some("grpc") => {
            // The tonic client's connection runs as a task of the runtime it is made in.
            let _inside = runtime.enter();
            SpanExporter::builder().with_tonic().build()
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
    Ok(Some((layer, Exporter { provider, _runtime: runtime })))
}
