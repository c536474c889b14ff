//! Exports Cairn's `tracing` spans over OTLP/HTTP (binary protobuf, `POST …/v1/traces`) when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
//!
//! A run's spans share one trace: its trace id is derived from the run id, so every execution
//! of the run (after a suspension, a crash or a deploy, on any worker) adds to the same trace.
//! Spans are batched and sent by one background thread, at least every second and when the
//! process ends ([`Exporter`] flushes when dropped).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::span::{Attributes, Id, Record};
use tracing::{Subscriber, field::Field, field::Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// A span attribute's value.
#[derive(Debug, Clone)]
enum Value {
    Text(String),
    Int(i64),
    Bool(bool),
    Float(f64),
}

/// A span as it is exported.
#[derive(Debug, Clone)]
struct SpanData {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    name: &'static str,
    start: u64,
    end: u64,
    attributes: Vec<(&'static str, Value)>,
}

struct Fields<'a>(&'a mut Vec<(&'static str, Value)>);

impl Fields<'_> {
    fn set(&mut self, field: &Field, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == field.name()) {
            Some(slot) => slot.1 = value,
            None => self.0.push((field.name(), value)),
        }
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, Value::Text(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, Value::Int(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field, Value::Int(i64::try_from(value).unwrap_or(i64::MAX)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field, Value::Bool(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field, Value::Float(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.set(field, Value::Text(format!("{value:?}")));
    }
}

fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A run's trace id: the same in every process (FNV-1a, twice, with different offsets).
pub(crate) fn trace_id_of(run_id: &str) -> [u8; 16] {
    let fnv = |offset: u64| {
        run_id.bytes().fold(offset, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3))
    };
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_be_bytes());
    id[8..].copy_from_slice(&fnv(0x6c62_272e_07bb_0142).to_be_bytes());
    id
}

/// `N` (at most 16) random bytes, from a version 4 UUID.
fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[..N]);
    out
}

/// Spans waiting to be sent, and whether the process is ending.
#[derive(Default)]
struct Queue {
    spans: Vec<SpanData>,
    closing: bool,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

/// The `tracing` layer that collects the spans of Cairn's targets.
pub(crate) struct OtlpLayer {
    shared: Arc<Shared>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for OtlpLayer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut attributes = Vec::new();
        attrs.record(&mut Fields(&mut attributes));
        let parent = span.parent().and_then(|p| p.extensions().get::<SpanData>().map(|d| (d.trace_id, d.span_id)));
        let run_id = attributes.iter().find_map(|(k, v)| match (k, v) {
            (&"run_id", Value::Text(run)) => Some(trace_id_of(run)),
            _ => None,
        });
        let trace_id = run_id.or(parent.map(|(trace, _)| trace)).unwrap_or_else(random_bytes::<16>);
        let data = SpanData {
            trace_id,
            span_id: random_bytes::<8>(),
            parent: parent.map(|(_, span)| span),
            name: attrs.metadata().name(),
            start: now_nanos(),
            end: 0,
            attributes,
        };
        span.extensions_mut().insert(data);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(data) = span.extensions_mut().get_mut::<SpanData>()
        {
            values.record(&mut Fields(&mut data.attributes));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(mut data) = span.extensions_mut().remove::<SpanData>() else { return };
        data.end = now_nanos();
        let mut queue = self.shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.spans.push(data);
        if queue.spans.len() >= BATCH {
            self.shared.wake.notify_one();
        }
    }
}

/// Spans per request, at most.
const BATCH: usize = 512;

/// Where spans go: `host:port` and the request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    authority: String,
    path: String,
}

impl Endpoint {
    /// From `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the whole URL) or `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (a base, `/v1/traces` appended); `None` when neither is set. Only `http://`.
    pub(crate) fn from_env() -> Result<Option<Endpoint>, String> {
        let get = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), get("OTEL_EXPORTER_OTLP_ENDPOINT")) {
            (Some(url), _) => Endpoint::parse(&url, false).map(Some),
            (None, Some(base)) => Endpoint::parse(&base, true).map(Some),
            (None, None) => Ok(None),
        }
    }

    fn parse(url: &str, base: bool) -> Result<Endpoint, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("OTLP endpoint {url:?}: only http:// is supported (OTLP/HTTP with protobuf)"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(format!("OTLP endpoint {url:?} has no host"));
        }
        let authority = if authority.contains(':') { authority.to_owned() } else { format!("{authority}:80") };
        let path = path.trim_end_matches('/');
        let path = match (base, path.is_empty()) {
            (true, true) => "/v1/traces".to_owned(),
            (true, false) => format!("/{path}/v1/traces"),
            (false, _) => format!("/{path}"),
        };
        Ok(Endpoint { authority, path })
    }
}

/// Sends collected spans until dropped; dropping it sends what is left.
pub(crate) struct Exporter {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// The layer to install and the exporter that sends what it collects to `endpoint`.
    pub(crate) fn start(endpoint: Endpoint) -> (OtlpLayer, Exporter) {
        let shared = Arc::new(Shared::default());
        let sender = Arc::clone(&shared);
        let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "cairn".to_owned());
        let thread = std::thread::Builder::new()
            .name("cairn-otlp".into())
            .spawn(move || export_loop(&sender, &endpoint, &service))
            .ok();
        (OtlpLayer { shared: Arc::clone(&shared) }, Exporter { shared, thread })
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.shared.queue.lock().unwrap_or_else(PoisonError::into_inner).closing = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn export_loop(shared: &Shared, endpoint: &Endpoint, service: &str) {
    loop {
        let (spans, closing) = {
            let queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
            let (mut queue, _) = shared
                .wake
                .wait_timeout_while(queue, Duration::from_secs(1), |q| !q.closing && q.spans.len() < BATCH)
                .unwrap_or_else(PoisonError::into_inner);
            (std::mem::take(&mut queue.spans), queue.closing)
        };
        for batch in spans.chunks(BATCH) {
            if let Err(error) = post(endpoint, &encode(batch, service)) {
                // Not through `tracing`: that would make spans of its own failures.
                eprintln!("cairn: warning: could not export {} spans to {}: {error}", batch.len(), endpoint.authority);
            }
        }
        if closing {
            return;
        }
    }
}

/// One `POST` of a protobuf body; an error unless the collector answers 2xx.
fn post(endpoint: &Endpoint, body: &[u8]) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(&endpoint.authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        endpoint.path,
        endpoint.authority,
        body.len()
    )?;
    stream.write_all(body)?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    let status = String::from_utf8_lossy(&head[9..12]).into_owned();
    if !status.starts_with('2') {
        return Err(std::io::Error::other(format!("the collector answered {status}")));
    }
    Ok(())
}

// ---- protobuf encoding of opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest ----

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    tag(out, field, 2);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn message(out: &mut Vec<u8>, field: u32, build: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    build(&mut inner);
    bytes(out, field, &inner);
}

fn fixed64(out: &mut Vec<u8>, field: u32, value: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&value.to_le_bytes());
}

/// A `KeyValue` (`key` = 1, `value` = 2: an `AnyValue`).
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    message(out, field, |kv| {
        bytes(kv, 1, key.as_bytes());
        message(kv, 2, |any| match value {
            Value::Text(text) => bytes(any, 1, text.as_bytes()),
            Value::Bool(b) => {
                tag(any, 2, 0);
                varint(any, u64::from(*b));
            }
            Value::Int(i) => {
                tag(any, 3, 0);
                varint(any, *i as u64);
            }
            Value::Float(f) => fixed64(any, 4, f.to_bits()),
        });
    });
}

/// The request body for `spans`, from service `service`.
fn encode(spans: &[SpanData], service: &str) -> Vec<u8> {
    let mut out = Vec::new();
    message(&mut out, 1, |resource_spans| {
        message(resource_spans, 1, |resource| {
            key_value(resource, 1, "service.name", &Value::Text(service.to_owned()));
        });
        message(resource_spans, 2, |scope_spans| {
            message(scope_spans, 1, |scope| {
                bytes(scope, 1, b"cairn");
                bytes(scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for span in spans {
                message(scope_spans, 2, |s| {
                    bytes(s, 1, &span.trace_id);
                    bytes(s, 2, &span.span_id);
                    if let Some(parent) = &span.parent {
                        bytes(s, 4, parent);
                    }
                    bytes(s, 5, span.name.as_bytes());
                    tag(s, 6, 0);
                    varint(s, 1); // SPAN_KIND_INTERNAL
                    fixed64(s, 7, span.start);
                    fixed64(s, 8, span.end);
                    for (key, value) in &span.attributes {
                        key_value(s, 9, key, value);
                    }
                    if span
                        .attributes
                        .iter()
                        .any(|(k, v)| *k == "status" && matches!(v, Value::Text(t) if t == "failed"))
                    {
                        message(s, 15, |status| {
                            tag(status, 3, 0);
                            varint(status, 2); // STATUS_CODE_ERROR
                        });
                    }
                });
            }
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_and_trace_ids() {
        assert_eq!(
            Endpoint::parse("http://collector:4318", true),
            Ok(Endpoint { authority: "collector:4318".into(), path: "/v1/traces".into() })
        );
        assert_eq!(
            Endpoint::parse("http://collector/otlp/", true),
            Ok(Endpoint { authority: "collector:80".into(), path: "/otlp/v1/traces".into() })
        );
        assert_eq!(Endpoint::parse("http://c:1/x/traces", false).map(|e| e.path), Ok("/x/traces".into()));
        assert!(Endpoint::parse("https://collector", true).is_err());
        assert_eq!(trace_id_of("run-1"), trace_id_of("run-1"));
        assert_ne!(trace_id_of("run-1"), trace_id_of("run-2"));
    }

    #[test]
    fn varints_and_fields_encode_as_protobuf() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xAC, 0x02]);
        let mut out = Vec::new();
        bytes(&mut out, 5, b"hi");
        assert_eq!(out, [0x2A, 2, b'h', b'i']);
    }
}
