//! `cairn serve --examples` as a real process: `hello` through start → result and `approval`
//! through start → signal → completion over HTTP, events published over HTTP and with `cairn
//! events publish` on the same store, `/metrics` counting all of it; SIGTERM stops it cleanly.

use crate::common::{Server, await_status, http, raw};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;

/// `GET /metrics` as text.
fn metrics_of(address: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200") && head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_owned()
}

#[test]
fn serve_examples_over_http_then_stop_on_sigterm() {
    let mut server = Server::start(None);
    let address = server.address.clone();

    assert_eq!(http(&address, "GET", "/healthz", None).0, 200);
    // `cairn --help` names every workflow `--examples` registers.
    let help = Command::new(env!("CARGO_BIN_EXE_cairn")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    let (_, workers) = http(&address, "GET", "/v1/workers", None);
    let served =
        workers["workers"][0]["serves"].as_array().unwrap().iter().map(|s| s["workflow"].as_str().unwrap().to_owned());
    let served: Vec<String> = served.collect();
    assert_eq!(served.len(), 5, "{workers}");
    for name in &served {
        assert!(help.contains(&format!("`{name}`")), "`cairn --help` does not name {name}: {help}");
    }
    let (status, started) = http(&address, "POST", "/v1/workflows/hello/runs", Some(r#"{"input":{"name":"Ada"}}"#));
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().unwrap();
    let done = await_status(&address, &format!("/v1/workflows/hello/runs/{id}"), "completed", None);
    assert_eq!(done["output"], json!("Hello, Ada!"));

    let (status, _) = http(&address, "POST", "/v1/workflows/approval/runs", Some(r#"{"id":"order-7"}"#));
    assert_eq!(status, 201);
    await_status(&address, "/v1/workflows/approval/runs/order-7", "suspended", None);
    let (status, sent) =
        http(&address, "POST", "/v1/workflows/approval/runs/order-7/signals/approve", Some(r#"{"by":"ops"}"#));
    assert_eq!(status, 200, "{sent}");
    let done = await_status(&address, "/v1/workflows/approval/runs/order-7", "completed", None);
    assert_eq!(done["output"], json!({"by": "ops"}));
    let (status, steps) = http(&address, "GET", "/v1/workflows/approval/runs/order-7/steps", None);
    assert_eq!(status, 200);
    assert!(steps["journal"].as_array().unwrap().iter().any(|e| e["event"].get("wait_completed").is_some()), "{steps}");

    // Events: `hello` subscribes to `user.*`.
    let event = r#"{"id":"evt-1","payload":{"name":"Bo"}}"#;
    let (status, published) = http(&address, "POST", "/v1/events/user.signup", Some(event));
    assert_eq!(status, 201, "{published}");
    assert_eq!(published["runs"].as_array().unwrap().len(), 1, "{published}");
    let run = published["runs"][0]["id"].as_str().unwrap();
    let done = await_status(&address, &format!("/v1/workflows/hello/runs/{run}"), "completed", None);
    assert_eq!(done["output"], json!("Hello, Bo!"));
    // The same event from the command line, on the same store: already started, nothing new.
    let publish = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["events", "publish", "--json", "--db"])
            .arg(&server.db)
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let again = publish(&["user.signup", r#"{"name":"Bo"}"#, "--id", "evt-1"]);
    assert_eq!((&again["runs"], &again["already_started"][0]["id"]), (&json!([]), &json!(run)), "{again}");
    // A new event from the command line: the server's worker runs what it starts.
    let fresh = publish(&["user.login", r#"{"name":"Cy"}"#, "--id", "evt-2"]);
    let run = fresh["runs"][0]["id"].as_str().unwrap();
    let done = await_status(&address, &format!("/v1/workflows/hello/runs/{run}"), "completed", None);
    assert_eq!(done["output"], json!("Hello, Cy!"));
    assert_eq!(publish(&["order.placed"])["runs"], json!([]));

    // The dashboard's page, and a live stream left open: SIGTERM must end it, not wait for it.
    let (status, _) = http(&address, "GET", "/", None);
    assert_eq!(status, 200);
    let mut live = TcpStream::connect(&address).unwrap();
    write!(live, "GET /v1/live/runs?workflow=approval HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
    let mut reader = BufReader::new(live.try_clone().unwrap());
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        assert_ne!(reader.read_line(&mut line).unwrap(), 0, "the live stream ended before its first event");
    }
    let snapshot: Value = serde_json::from_str(line["data: ".len()..].trim()).unwrap();
    assert_eq!(snapshot["runs"]["runs"][0]["id"], json!("order-7"), "{snapshot}");

    // Metrics: what this process started, ran, retried, received and swept.
    let (status, flaky) = http(&address, "POST", "/v1/workflows/flaky/runs", Some(r#"{"input":{"failures":1}}"#));
    assert_eq!(status, 201, "{flaky}");
    let flaky = flaky["id"].as_str().unwrap();
    await_status(&address, &format!("/v1/workflows/flaky/runs/{flaky}"), "completed", None);
    let (status, pruned) = http(&address, "POST", "/v1/runs/prune", Some(r#"{"olderThan":"0s"}"#));
    assert_eq!((status, &pruned["deleted"]), (200, &json!(5)), "{pruned}");
    // Two debounced starts make one window, counted once as a delayed run.
    let debounced = r#"{"input":1,"debounce":{"key":"k","quiet":"1h"}}"#;
    for expected in [201, 200] {
        let (status, started) = http(&address, "POST", "/v1/workflows/approval/runs", Some(debounced));
        assert_eq!(status, expected, "{started}");
    }
    let metrics = metrics_of(&address);
    for line in [
        // `hello`: started here by the API and by an HTTP event; the CLI started a third.
        "workflow_runs_started_total{workflow=\"hello\"} 2",
        "workflow_runs_completed_total{workflow=\"hello\",status=\"completed\"} 3",
        "workflow_runs_completed_total{workflow=\"approval\",status=\"completed\"} 1",
        "workflow_runs_in_flight{workflow=\"approval\"} 0",
        "workflow_run_duration_seconds_count{workflow=\"hello\"} 3",
        "workflow_step_duration_seconds_count{workflow=\"hello\",step=\"greet\"} 3",
        "workflow_step_duration_seconds_count{workflow=\"flaky\",step=\"charge\"} 2",
        "workflow_step_retries_total{workflow=\"flaky\",step=\"charge\"} 1",
        "workflow_signals_total{workflow=\"approval\",event=\"approve\"} 1",
        "workflow_retention_swept_total 5",
        "cairn_runs_delayed_total{workflow=\"approval\",rule=\"debounce\"} 1",
        "# TYPE cairn_store_commit_seconds histogram",
        "# TYPE cairn_store_commit_batch_size histogram",
        "# TYPE cairn_claim_lag_seconds histogram",
        "# HELP workflow_runs_started_total Runs started by this process.",
    ] {
        assert!(metrics.contains(line), "{line:?} missing from /metrics:\n{metrics}");
    }

    let terminated = Command::new("kill").arg("-TERM").arg(server.process.id().to_string()).status().unwrap();
    assert!(terminated.success());
    let status = server.process.wait().unwrap();
    assert!(status.success(), "cairn serve exits cleanly on SIGTERM: {status}");
    let mut rest = String::new();
    let _ = reader.read_to_string(&mut rest);
    drop(live);
}

#[test]
fn an_empty_token_is_refused_rather_than_serving_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["serve", "--examples", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("cairn.db"))
        .env("CAIRN_TOKEN", "")
        .output()
        .unwrap();
    assert!(!output.status.success(), "it served");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("CAIRN_TOKEN is set but empty"), "{stderr}");
    assert!(!dir.path().join("cairn.db").exists(), "it opened the store first");
}

/// What a page on another origin could send without asking first (a form or `text/plain`
/// post) changes nothing, and neither does JSON from an origin the server does not allow; the
/// server's own origin and an allowed one may, the latter with CORS headers and a preflight.
#[test]
fn pages_on_other_origins_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_at(dir.path().join("cairn.db"), None, &[("CAIRN_ALLOW_ORIGINS", "https://app.example")]);
    let address = server.address.as_str();
    let start = |headers: &[&str], id: &str| {
        let body = format!(r#"{{"id": "{id}", "input": {{"name": "x"}}}}"#);
        raw(address, "POST", "/v1/workflows/hello/runs", headers, &body)
    };
    let exists = |id: &str| http(address, "GET", &format!("/v1/runs/{id}"), None).0 == 200;

    for kind in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        let (status, _, body) = start(&[&format!("Content-Type: {kind}")], "plain");
        assert_eq!(status, 415, "{kind}: {body}");
        assert!(body.contains("unsupported_media_type"), "{body}");
    }
    assert!(!exists("plain"));

    let json = "Content-Type: application/json";
    let (status, _, body) = start(&[json, "Origin: http://evil.example"], "evil");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("cross_origin"), "{body}");
    let (status, _, _) = raw(address, "POST", "/v1/workflows/hello/runs/x/pause", &["Origin: null"], "");
    assert_eq!(status, 403, "a bodiless control from another origin is refused too");
    assert!(!exists("evil"));

    let own = format!("Origin: http://{address}");
    assert_eq!(start(&[json, &own], "own").0, 201, "the dashboard's own origin may");
    let (status, head, _) = start(&[json, "Origin: https://app.example"], "allowed");
    assert_eq!(status, 201);
    assert!(head.contains("access-control-allow-origin: https://app.example"), "{head}");
    let (status, head, _) = raw(
        address,
        "OPTIONS",
        "/v1/workflows/hello/runs",
        &["Origin: https://app.example", "Access-Control-Request-Method: POST"],
        "",
    );
    assert_eq!(status, 204);
    assert!(head.contains("access-control-allow-headers: authorization, content-type"), "{head}");
    assert!(exists("own") && exists("allowed"));
}

/// At the default level, `serve` says which worker started and what it serves, and gives each
/// run that ends failed one warning line with its run id and error code (when it has one); `--log-format json`
/// writes the same as one JSON object per line.
#[test]
fn serve_logs_its_worker_and_each_failed_run() {
    for format in ["text", "json"] {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["serve", "--examples", "--listen", "127.0.0.1:0", "--log-format", format, "--db"])
            .arg(dir.path().join("cairn.db"))
            .env_remove("CAIRN_TOKEN")
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        let address = first.split("http://").nth(1).and_then(|rest| rest.split('/').next()).unwrap().to_owned();
        let start = r#"{"id": "late", "timeout": "1s"}"#;
        assert_eq!(http(&address, "POST", "/v1/workflows/approval/runs", Some(start)).0, 201);
        await_status(&address, "/v1/runs/late", "failed", None);
        // A step that failed for good: an error of the workflow's own, with no code to log.
        let doomed = r#"{"id": "doomed", "input": {"failures": 2, "attempts": 1}}"#;
        assert_eq!(http(&address, "POST", "/v1/workflows/flaky/runs", Some(doomed)).0, 201);
        await_status(&address, "/v1/runs/doomed", "failed", None);
        let _ = child.kill();
        let _ = child.wait();
        let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
        let line = |what: &str| log.lines().find(|line| line.contains(what)).unwrap_or_else(|| panic!("{log}"));
        let (started, failed) = (line("worker started"), line("run failed: [CAIRN-E0110]"));
        let uncoded = line("run failed: step `charge`");
        if format == "json" {
            let started: Value = serde_json::from_str(started).unwrap();
            assert_eq!(started["level"], json!("INFO"), "{started}");
            assert_eq!(
                started["fields"]["serves"],
                json!("approval@1, fanout@1, flaky@1, hello@1, noop@1"),
                "{started}"
            );
            let failed: Value = serde_json::from_str(failed).unwrap();
            assert_eq!(failed["level"], json!("WARN"), "{failed}");
            assert_eq!(
                (&failed["fields"]["run_id"], &failed["fields"]["code"]),
                (&json!("late"), &json!("CAIRN-E0110"))
            );
            let uncoded: Value = serde_json::from_str(uncoded).unwrap();
            assert_eq!(uncoded["fields"]["run_id"], json!("doomed"), "{uncoded}");
            assert_eq!(uncoded["fields"].get("code"), None, "{uncoded}");
        } else {
            assert!(
                started.contains("INFO") && started.contains("approval@1, fanout@1, flaky@1, hello@1, noop@1"),
                "{started}"
            );
            assert!(failed.contains("WARN") && failed.contains("run_id=late"), "{failed}");
            assert!(failed.contains(r#"code="CAIRN-E0110""#), "{failed}");
            assert!(uncoded.contains("run_id=doomed") && !uncoded.contains("code="), "{uncoded}");
        }
    }
}

/// The server's peak resident memory in MiB (`VmHWM`).
fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
}

/// Reads one response head and the first SSE event of a live stream; the event's name and size.
fn first_event(stream: &mut BufReader<TcpStream>) -> (String, usize) {
    let mut line = String::new();
    stream.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    while line != "\r\n" {
        line.clear();
        stream.read_line(&mut line).unwrap();
    }
    // Chunked: sizes and chunks until an event's blank line.
    let mut text = Vec::new();
    loop {
        line.clear();
        stream.read_line(&mut line).unwrap();
        let chunk = usize::from_str_radix(line.trim(), 16).unwrap();
        let mut data = vec![0; chunk + 2];
        stream.read_exact(&mut data).unwrap();
        text.extend_from_slice(&data[..chunk]);
        if text.ends_with(b"\n\n") {
            let head = String::from_utf8_lossy(&text[..text.len().min(64)]).into_owned();
            if let Some(rest) = head.strip_prefix("event: ") {
                return (rest.split('\n').next().unwrap().to_owned(), text.len());
            }
            text.clear();
        }
    }
}

/// 100 live streams of one run with a 3 MiB output share one reader and one copy of what they
/// send: the server's peak memory stays far below 100 copies (3 GB before), and `/healthz`
/// still answers while they are open.
#[test]
fn a_hundred_live_streams_of_a_large_run_share_one_snapshot() {
    let server = Server::start(None);
    let address = server.address.as_str();
    let name = "x".repeat(3 * 1024 * 1024);
    let (status, started) =
        http(address, "POST", "/v1/workflows/hello/runs", Some(&json!({"input": {"name": name}}).to_string()));
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().unwrap();
    await_status(address, &format!("/v1/runs/{id}"), "completed", None);
    let before = peak_mib(server.process.id());

    let mut streams = Vec::new();
    for _ in 0..100 {
        let mut stream = TcpStream::connect(address).unwrap();
        write!(stream, "GET /v1/workflows/hello/runs/{id}/live HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
        let mut reader = BufReader::with_capacity(1 << 20, stream);
        let (event, size) = first_event(&mut reader);
        assert_eq!(event, "run");
        assert!(size > 6 * 1024 * 1024, "the snapshot holds the input and the output: {size} bytes");
        streams.push(reader);
    }
    // Three intervals with every stream open and none reading.
    for _ in 0..3 {
        std::thread::sleep(std::time::Duration::from_secs(1));
        assert_eq!(http(address, "GET", "/healthz", None).0, 200);
    }
    let peak = peak_mib(server.process.id());
    eprintln!("peak resident memory: {before} MiB before the streams, {peak} MiB with 100 open");
    assert!(peak < before + 512, "100 streams of a 3 MiB run took the server from {before} to {peak} MiB");
    drop(streams);
}

/// `flaky` counts its attempts from the journal, so a server killed between them and started
/// again still succeeds on the right attempt; given fewer attempts than failures, it ends failed.
#[test]
fn the_flaky_example_survives_a_restart_and_can_end_failed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let server = Server::start_at(db.clone(), None, &[]);
    let address = server.address.clone();
    let (status, _) =
        http(&address, "POST", "/v1/workflows/flaky/runs", Some(r#"{"id": "f", "input": {"failures": 3}}"#));
    assert_eq!(status, 201);
    let (status, _) = http(
        &address,
        "POST",
        "/v1/workflows/flaky/runs",
        Some(r#"{"id": "doomed", "input": {"failures": 3, "attempts": 2}}"#),
    );
    assert_eq!(status, 201);
    // Stopped (SIGTERM: its runs' leases are handed back at once) once the first attempt has
    // failed; what it kept in memory is gone.
    for _ in 0..600 {
        let steps = http(&address, "GET", "/v1/workflows/flaky/runs/f/steps", None).1;
        if steps["steps"][0]["attempts"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut server = server;
    Command::new("kill").arg("-TERM").arg(server.process.id().to_string()).status().unwrap();
    server.process.wait().unwrap();

    let restarted = Server::start_at(db, None, &[]);
    let address = restarted.address.as_str();
    let done = await_status(address, "/v1/workflows/flaky/runs/f", "completed", None);
    assert_eq!(done["output"], json!("charged on attempt 4"), "{done}");
    let failed = await_status(address, "/v1/workflows/flaky/runs/doomed", "failed", None);
    assert!(failed["error"].as_str().unwrap().contains("attempt 2: the card service is down"), "{failed}");
}

/// `--default-run-timeout` (here through its variable) fails a run started without a timeout
/// once it has run that long; a value out of range is refused before anything opens.
#[test]
fn a_default_run_timeout_ends_runs_that_set_none() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_at(dir.path().join("cairn.db"), None, &[("CAIRN_DEFAULT_RUN_TIMEOUT", "1s")]);
    let (status, _) = http(&server.address, "POST", "/v1/workflows/approval/runs", Some(r#"{"id": "waits"}"#));
    assert_eq!(status, 201);
    let failed = await_status(&server.address, "/v1/runs/waits", "failed", None);
    assert!(failed["error"].as_str().unwrap().contains("CAIRN-E0110"), "{failed}");
    assert!(failed["deadline"].is_string(), "{failed}");

    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["serve", "--examples", "--listen", "127.0.0.1:0", "--default-run-timeout", "0s", "--db"])
        .arg(dir.path().join("other.db"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--default-run-timeout") && stderr.contains("CAIRN-E0317"), "{stderr}");
    assert!(!dir.path().join("other.db").exists(), "it opened the store first");
}

/// Under `ulimit -n 256`, 300 connections that send nothing (with a header timeout of an hour,
/// so none times out here) do not keep `/healthz` out: the connection cap follows the
/// open-file limit, and a new connection closes the one silent the longest when every slot is
/// taken.
#[test]
fn idle_connections_cannot_keep_others_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 256 && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_cairn"))
        .args(["serve", "--examples", "--listen", "127.0.0.1:0", "--header-timeout", "1h", "--db"])
        .arg(dir.path().join("cairn.db"))
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_MAX_CONNECTIONS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let address = first.split("http://").nth(1).and_then(|rest| rest.split('/').next()).unwrap().to_owned();
    let idle: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(&address).unwrap()).collect();
    // Every connection the server took, including the last ones, is in place before the check.
    std::thread::sleep(std::time::Duration::from_millis(500));

    let since = std::time::Instant::now();
    let mut stream = TcpStream::connect(&address).unwrap();
    // Not a speed check: an hour-long wait is turned into a failure.
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    write!(stream, "GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    let read = stream.read_to_string(&mut response);
    eprintln!("/healthz behind 300 idle connections under ulimit -n 256: {:?}", since.elapsed());
    assert!(read.is_ok() && response.starts_with("HTTP/1.1 200"), "{read:?} {response:?}");
    let _ = child.kill();
    let _ = child.wait();
    drop(idle);
}
