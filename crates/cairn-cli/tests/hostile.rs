//! `cairn serve` against clients that race it or try to break it: a signal sent right after its
//! run's start, and payloads, cursors and names that no store can hold (each refused with a 4xx
//! while nothing is stored), on SQLite and on PostgreSQL; pages on rebound domains, clients that
//! never read, too many streams, requests hyper cannot parse and tokens no request can send.

use crate::common::{Server, http, on_each_store};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The counts by status of `workflow`'s runs.
fn counts(address: &str, workflow: &str) -> Value {
    let (_, listing) = http(address, "GET", "/v1/workflows", None);
    let all = listing["workflows"].as_array().cloned().unwrap_or_default();
    all.into_iter().find(|w| w["name"] == json!(workflow)).map_or(json!({}), |w| w["runs"].clone())
}

/// Each run of `workflow`, by id.
fn runs_of(address: &str, workflow: &str) -> Vec<Value> {
    let (mut runs, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let after = cursor.as_ref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let (status, page) = http(address, "GET", &format!("/v1/workflows/{workflow}/runs?limit=1000{after}"), None);
        assert_eq!(status, 200, "{page}");
        runs.extend(page["runs"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.replace(':', "%3A")),
            None => return runs,
        }
    }
}

/// 8 clients each start `approval` runs and signal each at once, 2,000 pairs in all: every run
/// takes its own signal and completes on the execution that began it. Before the fix, about 1 %
/// of runs stayed `running` until their lease ran out (a suspension woken at once was claimed
/// again while the execution that suspended it still finished, and that one's end dropped the
/// new lease), and some slept until their wait's deadline an hour away (a signal delivered in
/// memory counted as seen before the wait looked at it).
#[test]
fn a_signal_sent_right_after_its_start_is_never_missed() {
    const CLIENTS: usize = 8;
    const PAIRS: usize = 2_000;
    on_each_store("signal_race", |server, store| {
        let address = server.address.as_str();
        std::thread::scope(|scope| {
            for client in 0..CLIENTS {
                scope.spawn(move || {
                    for i in (client..PAIRS).step_by(CLIENTS) {
                        let start = json!({ "id": format!("n1-{i}") }).to_string();
                        let (status, body) = http(address, "POST", "/v1/workflows/approval/runs", Some(&start));
                        assert_eq!(status, 201, "{store}: {body}");
                        let signal = json!({ "i": i }).to_string();
                        let path = format!("/v1/workflows/approval/runs/n1-{i}/signals/approve");
                        let (status, body) = http(address, "POST", &path, Some(&signal));
                        assert_eq!(status, 200, "{store}: {body}");
                    }
                });
            }
        });
        // A liveness bound, not a speed threshold: a missed signal sleeps for an hour, and a
        // dropped lease (30 s) is counted below as a recovery.
        let begun = Instant::now();
        while counts(address, "approval")["completed"] != json!(PAIRS) && begun.elapsed() < Duration::from_secs(300) {
            std::thread::sleep(Duration::from_millis(200));
        }
        let runs = runs_of(address, "approval");
        let stuck: Vec<_> = runs.iter().filter(|r| r["status"] != json!("completed")).collect();
        assert!(
            stuck.is_empty(),
            "{store}: {} of {PAIRS} runs did not complete: {:?}",
            stuck.len(),
            &stuck[..stuck.len().min(3)]
        );
        // A completed run's `recoveries` is back at 0: the counter tells whether any was taken over.
        let (_, _, metrics) = crate::common::raw(address, "GET", "/metrics", &[], "");
        let recovered = metrics.lines().find(|l| l.starts_with("cairn_runs_recovered_total{workflow=\"approval\"}"));
        assert_eq!(recovered, None, "{store}: runs were taken over after their lease ran out");
        for i in 0..PAIRS {
            let (_, run) = http(address, "GET", &format!("/v1/workflows/approval/runs/n1-{i}"), None);
            assert_eq!(run["output"], json!({ "i": i }), "{store}: each run takes its own signal");
        }
    });
}

/// A signal payload no run could read back (a lone surrogate, a number past a float's range) is
/// refused where it comes in, as a start's input is, and the run still takes a good one.
#[test]
fn signal_payloads_a_run_cannot_read_are_refused_and_stored_nowhere() {
    on_each_store("signal_payloads", |server, store| {
        let address = server.address.as_str();
        let (status, body) = http(address, "POST", "/v1/workflows/approval/runs", Some(r#"{"id":"p-1"}"#));
        assert_eq!(status, 201, "{store}: {body}");
        let signal = "/v1/workflows/approval/runs/p-1/signals/approve";
        for payload in [r#""\ud800""#, "1e400", r#"{"\udfff":1}"#, r#"{"a":[1,-2e-400]}"#] {
            let (status, body) = http(address, "POST", signal, Some(payload));
            assert_eq!(
                (status, &body["error"]["code"]),
                (400, &json!("invalid_payload")),
                "{store}: {payload}: {body}"
            );
        }
        let (_, signals) = http(address, "GET", "/v1/workflows/approval/runs/p-1/signals", None);
        assert_eq!(signals["signals"], json!([]), "{store}: nothing stored: {signals}");
        let (status, _) = http(address, "POST", signal, Some(r#""\ud83d\ude00""#));
        assert_eq!(status, 200, "{store}: a whole pair is a character");
        let done = crate::common::await_status(address, "/v1/workflows/approval/runs/p-1", "completed", None);
        assert_eq!(done["output"], json!("\u{1F600}"), "{store}");
    });
}

/// Input no store holds alike (PostgreSQL's `jsonb` refused these with a 500 that showed the
/// driver's message; SQLite stored them where no input filter could find them), NUL in list
/// cursors and in schedule names: each refused with the same 4xx on every store, nothing stored.
#[test]
fn what_a_store_cannot_hold_is_refused_alike_on_every_store() {
    on_each_store("hostile_inputs", |server, store| {
        let address = server.address.as_str();
        for (path, body) in [
            ("/v1/workflows/hello/runs", r#"{"input":{"name":"a","x":"\udc00"}}"#),
            ("/v1/workflows/hello/runs", r#"{"input":{"name":"a","n":1e200000}}"#),
            ("/v1/workflows/hello/runs", r#"{"input":{"name":"a","n":-1e-200000}}"#),
            ("/v1/events/user.signup", r#"{"payload":{"name":"a","x":"\udc00"}}"#),
            ("/v1/events/user.signup", r#"{"payload":{"name":"a","n":1e200000}}"#),
        ] {
            let (status, answer) = http(address, "POST", path, Some(body));
            assert_eq!(
                (status, &answer["error"]["code"]),
                (400, &json!("invalid_payload")),
                "{store}: {body}: {answer}"
            );
        }
        for path in [
            "/v1/runs?cursor=1:%00",
            "/v1/workflows/hello/runs?cursor=1:%00",
            "/v1/run-count?cursor=1:%00",
            "/v1/events?cursor=1:%00",
            "/v1/runs?input.name=%22%5Cud800%22",
        ] {
            let (status, answer) = http(address, "GET", path, None);
            assert!(status == 400 || status == 200, "{store}: {path}: {status} {answer}");
            if path.contains("cursor") {
                assert_eq!((status, &answer["error"]["code"]), (400, &json!("invalid_cursor")), "{store}: {path}");
            } else {
                assert_eq!(answer["runs"], json!([]), "{store}: {path}: no input holds it");
            }
        }
        for (method, path) in [
            ("POST", "/v1/schedules/a%00/pause"),
            ("DELETE", "/v1/schedules/a%00"),
            ("POST", "/v1/schedules/a%00/resume"),
        ] {
            let (status, answer) = http(address, method, path, None);
            assert_eq!(
                (status, &answer["error"]["code"]),
                (400, &json!("invalid_schedule")),
                "{store}: {path}: {answer}"
            );
        }
        assert_eq!(counts(address, "hello"), json!({}), "{store}: no run was started");
        let (_, events) = http(address, "GET", "/v1/events", None);
        assert_eq!(events["events"], json!([]), "{store}: no event was recorded");
    });
}

/// Sends `request` as it is (no `Connection: close` added unless it says so) and reads the
/// answer to its end: the status, the head in lower case and the body.
fn exchange(address: &str, request: &[u8]) -> (u16, String, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// A request naming `host` and a page on it as its origin, as a page on a domain that resolves
/// to 127.0.0.1 sends (DNS rebinding).
fn from_host(address: &str, host: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, _, body) = exchange(address, request.as_bytes());
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A token-less server answers only the hosts it serves: a rebinding page's requests change
/// nothing, while loopback names, `--allowed-host` names and `/healthz` are answered.
#[test]
fn a_page_on_a_rebound_domain_changes_nothing() {
    let server = Server::start_at(
        tempfile::tempdir().unwrap().keep().join("cairn.db"),
        None,
        &[("CAIRN_ALLOWED_HOSTS", "cairn.internal")],
    );
    let address = server.address.as_str();
    let port = address.rsplit(':').next().unwrap();
    let (status, _) = http(address, "POST", "/v1/workflows/approval/runs", Some(r#"{"id":"mine"}"#));
    assert_eq!(status, 201);
    crate::common::await_status(address, "/v1/workflows/approval/runs/mine", "suspended", None);
    let evil = format!("rebind.evil.example:{port}");
    for (method, path, body) in [
        ("POST", "/v1/workflows/hello/runs", r#"{"input":{"name":"x"}}"#),
        ("POST", "/v1/workflows/approval/runs/mine/signals/approve", "{}"),
        ("POST", "/v1/workflows/approval/runs/mine/pause", ""),
        ("DELETE", "/v1/workflows/approval/runs/mine", ""),
        ("POST", "/v1/workflows/approval/runs/mine/restart", r#"{"fromStep":"approve"}"#),
        ("POST", "/v1/events/user.signup", r#"{"payload":{"name":"x"}}"#),
        ("PUT", "/v1/schedules/s", r#"{"workflow":"hello","every":"1m"}"#),
        ("POST", "/v1/runs/bulk", r#"{"action":"cancel","filter":{}}"#),
        ("GET", "/v1/runs", ""),
        ("GET", "/", ""),
    ] {
        let (status, answer) = from_host(address, &evil, method, path, body);
        assert_eq!((status, &answer["error"]["code"]), (403, &json!("unknown_host")), "{method} {path}: {answer}");
    }
    let (status, _) = from_host(address, &evil, "GET", "/healthz", "");
    assert_eq!(status, 200, "health is no secret");
    let (_, run) = http(address, "GET", "/v1/workflows/approval/runs/mine", None);
    assert_eq!(
        (&run["status"], &run["cancel_requested"], &run["pause_requested"]),
        (&json!("suspended"), &json!(false), &json!(false)),
        "{run}"
    );
    assert_eq!(counts(address, "hello"), json!({}), "no run was started");
    let (_, schedules) = http(address, "GET", "/v1/schedules", None);
    assert_eq!(schedules["schedules"], json!([]));
    for host in [format!("localhost:{port}"), format!("cairn.internal:{port}"), format!("[::1]:{port}")] {
        let (status, answer) = from_host(address, &host, "GET", "/v1/runs", "");
        assert_eq!(status, 200, "{host}: {answer}");
    }
}

/// Clients that never read their answers hold no connection past the write timeout, and while
/// every connection is busy a new one is told to come back (`503`, `Retry-After`) at once
/// rather than left waiting. Live streams hold at most half of the connections.
#[test]
fn slow_readers_and_streams_cannot_starve_the_server() {
    // Pipelines 400 dashboard pages (about 37 MB of answers, far more than its 4 KiB receive
    // buffer and the server's send buffer hold) and reads none of them but the first bytes of
    // the first, so it is no silent connection (the server closes those first to make room).
    let slow_reader = |address: &str| {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(&address.parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
        let mut stream: TcpStream = socket.into();
        let one = format!("GET / HTTP/1.1\r\nHost: {address}\r\n\r\n");
        stream.write_all(one.repeat(400).as_bytes()).unwrap();
        let mut first = [0u8; 12];
        stream.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"HTTP/1.1 200");
        stream
    };
    let dir = tempfile::tempdir().unwrap();
    let env = [("CAIRN_MAX_CONNECTIONS", "40"), ("CAIRN_WRITE_TIMEOUT", "1h")];
    let server = Server::start_at(dir.path().join("held.db"), None, &env);
    let address = server.address.as_str();
    let readers: Vec<TcpStream> = (0..40).map(|_| slow_reader(address)).collect();
    let (status, head, body) =
        exchange(address, format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n").as_bytes());
    assert_eq!(status, 503, "{head}{body}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["code"], json!("busy"));
    drop(readers);
    wait_for(|| http(address, "GET", "/healthz", None).0 == 200, "the slots came back");

    // Streams: 20 (half of 40) open; the next is turned away, and the API still answers.
    let streams: Vec<TcpStream> = (0..20)
        .map(|i| {
            let mut stream = TcpStream::connect(address).unwrap();
            write!(stream, "GET /v1/live/runs?id_prefix=s{i} HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
            let mut first = [0u8; 12];
            stream.read_exact(&mut first).unwrap();
            assert_eq!(&first, b"HTTP/1.1 200", "stream {i}");
            stream
        })
        .collect();
    // Turned away, and its connection closed (it holds no slot while it waits).
    let (status, head, body) =
        exchange(address, format!("GET /v1/live/runs HTTP/1.1\r\nHost: {address}\r\n\r\n").as_bytes());
    let turned_away = (status, head.contains("retry-after:"), head.contains("connection: close"));
    assert_eq!(turned_away, (503, true, true), "{head}{body}");
    assert_eq!(http(address, "GET", "/healthz", None).0, 200);
    assert_eq!(http(address, "GET", "/v1/workflows", None).0, 200);
    drop(streams);
    drop(server);

    // With a write timeout of a second, readers that read nothing are cut loose.
    let env = [("CAIRN_MAX_CONNECTIONS", "40"), ("CAIRN_WRITE_TIMEOUT", "1s")];
    let server = Server::start_at(dir.path().join("cut.db"), None, &env);
    let address = server.address.as_str();
    let mut readers: Vec<TcpStream> = (0..40).map(|_| slow_reader(address)).collect();
    // Every slot is free again when 40 connections held open at once are all served.
    let all_free = || {
        let held: Vec<TcpStream> = (0..40)
            .map(|_| {
                let mut stream = TcpStream::connect(address).unwrap();
                write!(stream, "GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
                stream
            })
            .collect();
        held.into_iter().all(|mut stream| {
            let mut first = [0u8; 12];
            stream.read_exact(&mut first).is_ok() && &first == b"HTTP/1.1 200"
        })
    };
    wait_for(all_free, "every stalled connection was closed");
    // And the server ended each reader's connection (under load, 40 connections were all served
    // while readers whose answers the server was still making lived on: read then, one took all
    // 400 answers), as the client's side of each shows.
    wait_for(|| readers.iter().all(|reader| !established(reader)), "the server ended every reader's connection");
    // Each reader, reading now, finds its connection ended after some of its answers.
    for reader in &mut readers {
        reader.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut sink = Vec::new();
        let ended = reader.read_to_end(&mut sink).map(|_| ()).or_else(|e| match e.kind() {
            std::io::ErrorKind::ConnectionReset => Ok(()),
            _ => Err(e),
        });
        assert!(ended.is_ok(), "{ended:?}");
        assert!(sink.len() < 400 * 80_000, "the connection ended before all its answers: {}", sink.len());
    }
}

/// Whether `stream`'s side of its connection is still established (Linux's `/proc/net/tcp`):
/// not once the peer has closed or reset it, though bytes it sent may wait unread.
fn established(stream: &TcpStream) -> bool {
    // A reset socket has no peer any more.
    let (Ok(local), Ok(peer)) = (stream.local_addr(), stream.peer_addr()) else { return false };
    let ports = (format!(":{:04X}", local.port()), format!(":{:04X}", peer.port()));
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() > 3 && fields[1].ends_with(&ports.0) && fields[2].ends_with(&ports.1) && fields[3] == "01"
    })
}

/// Polls `done` until it holds (a liveness bound of a minute, not a speed threshold).
fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
    let begun = Instant::now();
    while !done() {
        assert!(begun.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What hyper answers itself (a request it cannot parse) carries the JSON error too; a request
/// with both `Content-Length` and `Transfer-Encoding` is refused; tokens no request could send
/// keep the server from starting; a token-less server's OpenAPI document asks for no token.
#[test]
fn malformed_requests_get_json_errors_and_unusable_tokens_are_refused() {
    let server = Server::start(None);
    let address = server.address.as_str();
    let long = format!("GET /v1/runs?x={} HTTP/1.1\r\nHost: {address}\r\n\r\n", "a".repeat(100_000));
    let many: String = (0..500).map(|i| format!("X-{i}: y\r\n")).collect();
    let many = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n{many}\r\n");
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (b"GET /v1/ru\0ns HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 400),
        (b"GET /v1/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 400),
        (b"NOT A REQUEST LINE\r\n\r\n".to_vec(), 400),
        (b"POST /v1/events/a HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n".to_vec(), 400),
        (b"POST /v1/events/a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}".to_vec(), 400),
        (long.into_bytes(), 414),
        (many.into_bytes(), 431),
    ];
    for (request, expected) in cases {
        let (status, head, body) = exchange(address, &request);
        let shown = String::from_utf8_lossy(&request[..request.len().min(60)]).into_owned();
        assert_eq!(status, expected, "{shown:?}: {head}");
        let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{shown:?}: {e}: {body:?}"));
        assert!(body["error"]["code"].is_string() && body["error"]["message"].is_string(), "{shown:?}: {body}");
    }
    let smuggled = format!(
        "POST /v1/events/user.signup HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n"
    );
    let (status, head, body) = exchange(address, smuggled.as_bytes());
    assert_eq!(status, 400, "{head}{body}");
    let (_, events) = http(address, "GET", "/v1/events", None);
    assert_eq!(events["events"], json!([]), "nothing was published");
    let (_, document) = http(address, "GET", "/openapi.json", None);
    assert_eq!(document.get("security"), None, "a token-less server asks for no token");
    assert_eq!(document["components"].get("securitySchemes"), None);
    drop(server);

    for token in [" ", " abc", "abc\n", "a b"] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(tempfile::tempdir().unwrap().path().join("t.db"))
            .env("CAIRN_TOKEN", token)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains("CAIRN_TOKEN"), "{token:?}: {stderr}");
    }
}
