//! Spans over OTLP, HTTP and gRPC: a real receiver on loopback decodes the protobuf `cairn serve`
//! sends (with `OTEL_EXPORTER_OTLP_ENDPOINT`, and headers from `OTEL_EXPORTER_OTLP_HEADERS`),
//! across a restart of the server in the middle of a run: names, attributes, parent/child links,
//! and one trace per run in both processes.
#![cfg(feature = "otlp")]

use crate::common::{Server, await_status, http};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// A protobuf field's value.
#[derive(Debug, Clone)]
enum Wire {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
    Fixed32,
}

/// The fields of one protobuf message, in order.
fn fields(mut buf: &[u8]) -> Vec<(u32, Wire)> {
    fn varint(buf: &mut &[u8]) -> u64 {
        let (mut value, mut shift) = (0u64, 0);
        loop {
            let byte = buf[0];
            *buf = &buf[1..];
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return value;
            }
            shift += 7;
        }
    }
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf);
        let value = match key & 7 {
            0 => Wire::Varint(varint(&mut buf)),
            1 => {
                let (bytes, rest) = buf.split_at(8);
                buf = rest;
                Wire::Fixed64(u64::from_le_bytes(bytes.try_into().unwrap()))
            }
            2 => {
                let len = varint(&mut buf) as usize;
                let (bytes, rest) = buf.split_at(len);
                buf = rest;
                Wire::Bytes(bytes.to_vec())
            }
            5 => {
                buf = &buf[4..];
                Wire::Fixed32
            }
            wire => panic!("wire type {wire} in an OTLP message"),
        };
        out.push(((key >> 3) as u32, value));
    }
    out
}

fn messages(fields: &[(u32, Wire)], number: u32) -> Vec<Vec<u8>> {
    fields
        .iter()
        .filter_map(|(n, v)| match v {
            Wire::Bytes(b) if *n == number => Some(b.clone()),
            _ => None,
        })
        .collect()
}

/// A decoded span.
#[derive(Debug, Clone)]
struct Span {
    trace: Vec<u8>,
    id: Vec<u8>,
    parent: Option<Vec<u8>>,
    name: String,
    start: u64,
    end: u64,
    attributes: HashMap<String, String>,
}

/// Every span of an `ExportTraceServiceRequest`, with its resource's `service.name`.
fn decode(body: &[u8]) -> Vec<(String, Span)> {
    let mut spans = Vec::new();
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    let key_values = |message: &[(u32, Wire)], number: u32| -> HashMap<String, String> {
        messages(message, number)
            .iter()
            .map(|kv| {
                let kv = fields(kv);
                let any = fields(&messages(&kv, 2)[0]);
                let value = match &any[0] {
                    (1, Wire::Bytes(b)) => text(b),
                    (2, Wire::Varint(v)) => (*v != 0).to_string(),
                    (3, Wire::Varint(v)) => (*v as i64).to_string(),
                    other => format!("{other:?}"),
                };
                (text(&messages(&kv, 1)[0]), value)
            })
            .collect()
    };
    for resource_spans in messages(&fields(body), 1) {
        let resource_spans = fields(&resource_spans);
        let resource = fields(&messages(&resource_spans, 1)[0]);
        let service = key_values(&resource, 1).remove("service.name").unwrap_or_default();
        for scope_spans in messages(&resource_spans, 2) {
            for span in messages(&fields(&scope_spans), 2) {
                let span = fields(&span);
                let one = |n: u32| messages(&span, n).into_iter().next();
                let fixed = |n: u32| {
                    span.iter().find_map(|(k, v)| match v {
                        Wire::Fixed64(x) if *k == n => Some(*x),
                        _ => None,
                    })
                };
                spans.push((
                    service.clone(),
                    Span {
                        trace: one(1).unwrap(),
                        id: one(2).unwrap(),
                        parent: one(4),
                        name: text(&one(5).unwrap()),
                        start: fixed(7).unwrap(),
                        end: fixed(8).unwrap(),
                        attributes: key_values(&span, 9),
                    },
                ));
            }
        }
    }
    spans
}

/// Spans received, each with its service's name, and the `authorization` header of each request.
#[derive(Default)]
struct Seen {
    spans: Vec<(String, Span)>,
    authorization: Vec<String>,
}

/// What a receiver has seen so far.
type Received = Arc<Mutex<Seen>>;

/// An OTLP/HTTP receiver on loopback: every span posted to `/v1/traces`.
fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let received = Arc::new(Mutex::new(Seen::default()));
    let sink = Arc::clone(&received);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert!(line.starts_with("POST /v1/traces "), "{line}");
            let mut length = 0;
            let (mut content_type, mut authorization) = (String::new(), String::new());
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                let (name, value) = header.split_once(':').unwrap();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap(),
                    "content-type" => content_type = value.trim().to_owned(),
                    "authorization" => authorization = value.trim().to_owned(),
                    _ => {}
                }
            }
            assert_eq!(content_type, "application/x-protobuf");
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut seen = sink.lock().unwrap();
            seen.spans.extend(decode(&body));
            seen.authorization.push(authorization);
            drop(seen);
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        }
    });
    (address, received)
}

/// An OTLP/gRPC receiver on loopback (HTTP/2 without TLS): every span sent to the trace
/// service's `Export`, each answered with an empty response and status 0.
fn grpc_receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let received = Arc::new(Mutex::new(Seen::default()));
    let sink = Arc::clone(&received);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (socket, _) = listener.accept().await.unwrap();
                let sink = Arc::clone(&sink);
                tokio::spawn(async move {
                    let mut connection = h2::server::handshake(socket).await.unwrap();
                    // The connection moves the request bodies only while it is polled, so each
                    // request is answered in a task of its own while this loop goes on polling.
                    while let Some(Ok((request, respond))) = connection.accept().await {
                        tokio::spawn(answer(request, respond, Arc::clone(&sink)));
                    }
                });
            }
        });
    });
    (address, received)
}

/// Reads one `Export` request, keeps its spans and answers it with an empty response and
/// status 0.
async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<bytes::Bytes>,
    sink: Received,
) {
    assert_eq!(request.uri().path(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export");
    let authorization =
        request.headers().get("authorization").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let mut body = request.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        bytes.extend_from_slice(&chunk);
    }
    // A gRPC message: a compression flag (0), its length, then the protobuf.
    assert_eq!(bytes[0], 0, "an uncompressed message");
    let length = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
    let mut seen = sink.lock().unwrap();
    seen.spans.extend(decode(&bytes[5..5 + length]));
    seen.authorization.push(authorization);
    drop(seen);
    let head = http::Response::builder().status(200).header("content-type", "application/grpc").body(()).unwrap();
    let mut send = respond.send_response(head, false).unwrap();
    send.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]), false).unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    send.send_trailers(trailers).unwrap();
}

/// SIGTERM, and a clean exit (which sends the spans still waiting).
fn stop(mut server: Server) {
    let terminated = Command::new("kill").arg("-TERM").arg(server.process.id().to_string()).status().unwrap();
    assert!(terminated.success());
    assert!(server.process.wait().unwrap().success());
}

#[test]
fn a_runs_spans_share_one_trace_across_a_restart_over_http() {
    let (collector, received) = receiver();
    a_runs_spans_share_one_trace_across_a_restart(&format!("http://{collector}"), "http/protobuf", &received);
}

#[test]
fn a_runs_spans_share_one_trace_across_a_restart_over_grpc() {
    let (collector, received) = grpc_receiver();
    a_runs_spans_share_one_trace_across_a_restart(&format!("http://{collector}"), "grpc", &received);
}

fn a_runs_spans_share_one_trace_across_a_restart(endpoint: &str, protocol: &str, received: &Received) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20collector-key"),
        ("OTEL_SERVICE_NAME", "cairn-test"),
    ];

    // First process: `hello` runs through; `approval` starts and waits for its signal.
    let first = Server::start_at(db.clone(), None, &env);
    let address = first.address.clone();
    assert_eq!(
        http(&address, "POST", "/v1/workflows/hello/runs", Some(r#"{"id":"h-1","input":{"name":"Ada"}}"#)).0,
        201
    );
    await_status(&address, "/v1/workflows/hello/runs/h-1", "completed", None);
    let flaky = r#"{"id":"f-1","input":{"failures":0}}"#;
    assert_eq!(http(&address, "POST", "/v1/workflows/flaky/runs", Some(flaky)).0, 201);
    await_status(&address, "/v1/workflows/flaky/runs/f-1", "completed", None);
    assert_eq!(http(&address, "POST", "/v1/workflows/approval/runs", Some(r#"{"id":"a-1"}"#)).0, 201);
    await_status(&address, "/v1/workflows/approval/runs/a-1", "suspended", None);
    stop(first);

    // Second process on the same store: the signal arrives and the run completes there.
    let second = Server::start_at(db, None, &env);
    let address = second.address.clone();
    let (status, _) = http(&address, "POST", "/v1/workflows/approval/runs/a-1/signals/approve", Some(r#"{"ok":true}"#));
    assert_eq!(status, 200);
    await_status(&address, "/v1/workflows/approval/runs/a-1", "completed", None);
    stop(second);

    let seen = received.lock().unwrap();
    assert!(!seen.authorization.is_empty());
    assert!(seen.authorization.iter().all(|a| a == "Bearer collector-key"), "{:?}", seen.authorization);
    // An exporter may send a batch again when it took an answer for a failure (OTLP delivery is
    // at least once): each span counts once.
    let mut spans = seen.spans.clone();
    drop(seen);
    let mut ids = std::collections::HashSet::new();
    spans.retain(|(_, span)| ids.insert(span.id.clone()));
    assert!(spans.iter().all(|(service, _)| service == "cairn-test"), "{spans:?}");
    let spans: Vec<Span> = spans.into_iter().map(|(_, span)| span).collect();
    let runs_of = |run: &str| -> Vec<&Span> {
        spans
            .iter()
            .filter(|s| s.name == "workflow.run" && s.attributes.get("run_id").map(String::as_str) == Some(run))
            .collect()
    };
    let children_of = |parent: &Span, name: &str| -> Vec<&Span> {
        spans.iter().filter(|s| s.name == name && s.parent.as_ref() == Some(&parent.id)).collect()
    };

    // `hello`: one execution, its step inside it.
    let [hello] = runs_of("h-1")[..] else { panic!("h-1's run spans: {spans:#?}") };
    let attribute = |span: &Span, key: &str| span.attributes.get(key).cloned().unwrap_or_default();
    assert_eq!(
        (attribute(hello, "workflow.name"), attribute(hello, "workflow.version"), attribute(hello, "status")),
        ("hello".into(), "1".into(), "completed".into())
    );
    // A run's executions hang under one parent made from its id, which no process exports.
    let parent = hello.parent.clone().expect("the run's parent");
    assert!(spans.iter().all(|span| span.id != parent), "the run's parent is not exported");
    let [greet] = children_of(hello, "workflow.step")[..] else { panic!("hello's steps: {spans:#?}") };
    assert_eq!(
        (attribute(greet, "step.name"), attribute(greet, "step.kind"), attribute(greet, "step.attempt")),
        ("greet".into(), "step".into(), "1".into())
    );
    assert_eq!(attribute(greet, "status"), "completed");
    assert_eq!(greet.trace, hello.trace);
    assert!(hello.start <= greet.start && greet.end <= hello.end, "the step lies within its run");

    // `approval`: an execution in each process, one trace; the signal inside the second.
    let approval = runs_of("a-1");
    let statuses: Vec<String> = approval.iter().map(|s| attribute(s, "status")).collect();
    assert_eq!(statuses, ["suspended", "completed"], "{approval:#?}");
    assert_eq!(approval[0].trace, approval[1].trace, "one trace across the restart");
    assert_eq!(approval[0].parent, approval[1].parent, "one parent across the restart");
    assert_ne!(approval[0].parent, hello.parent, "one parent per run");
    assert_ne!(approval[0].trace, hello.trace, "one trace per run");
    // Its wait for the signal is a step span in each execution, the consumed signal inside the
    // second.
    for execution in &approval {
        let [wait] = children_of(execution, "workflow.step")[..] else { panic!("a-1's wait: {spans:#?}") };
        assert_eq!((attribute(wait, "step.name"), attribute(wait, "step.kind")), ("approve".into(), "wait".into()));
    }
    let wait = children_of(approval[1], "workflow.step")[0];
    let [signal] = children_of(wait, "workflow.signal")[..] else { panic!("a-1's signal: {spans:#?}") };
    assert_eq!((attribute(signal, "event"), &signal.trace), ("approve".into(), &approval[0].trace));

    // `flaky`: its step, then its sleep, as step spans of their kinds.
    let [flaky] = runs_of("f-1")[..] else { panic!("f-1's run spans: {spans:#?}") };
    let mut steps = children_of(flaky, "workflow.step");
    steps.sort_by_key(|span| span.start);
    let kinds: Vec<(String, String)> =
        steps.iter().map(|span| (attribute(span, "step.name"), attribute(span, "step.kind"))).collect();
    assert_eq!(kinds, [("charge".into(), "step".into()), ("cool-down".into(), "sleep".into())], "{spans:#?}");

    // Every span says which workflow and run it belongs to.
    for span in &spans {
        assert!(!attribute(span, "workflow.name").is_empty() && !attribute(span, "run_id").is_empty(), "{span:#?}");
    }
}
