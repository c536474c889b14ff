//! `cairn serve --examples` as a real process: `hello` through start → result and `approval`
//! through start → signal → completion over HTTP; SIGTERM stops it cleanly.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One HTTP/1.1 request (`Connection: close`); the status and the JSON body.
fn http(address: &str, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Polls a run until it reaches `status` (the engine runs it in the background).
fn await_status(address: &str, path: &str, status: &str) -> Value {
    let mut run = Value::Null;
    for _ in 0..600 {
        run = http(address, "GET", path, None).1;
        if run["status"] == json!(status) {
            return run;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{path} never became {status}: {run}");
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_examples_over_http_then_stop_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["serve", "--examples", "--listen", "127.0.0.1:0", "--db"])
            .arg(&db)
            .env_remove("CAIRN_TOKEN")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(server.0.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let address = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();

    assert_eq!(http(&address, "GET", "/healthz", None).0, 200);
    let (status, started) = http(&address, "POST", "/v1/workflows/hello/runs", Some(r#"{"input":{"name":"Ada"}}"#));
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().unwrap();
    let done = await_status(&address, &format!("/v1/workflows/hello/runs/{id}"), "completed");
    assert_eq!(done["output"], json!("Hello, Ada!"));

    let (status, _) = http(&address, "POST", "/v1/workflows/approval/runs", Some(r#"{"id":"order-7"}"#));
    assert_eq!(status, 201);
    await_status(&address, "/v1/workflows/approval/runs/order-7", "suspended");
    let (status, sent) =
        http(&address, "POST", "/v1/workflows/approval/runs/order-7/signals/approve", Some(r#"{"by":"ops"}"#));
    assert_eq!(status, 200, "{sent}");
    let done = await_status(&address, "/v1/workflows/approval/runs/order-7", "completed");
    assert_eq!(done["output"], json!({"by": "ops"}));
    let (status, steps) = http(&address, "GET", "/v1/workflows/approval/runs/order-7/steps", None);
    assert_eq!(status, 200);
    assert!(steps["journal"].as_array().unwrap().iter().any(|e| e["event"].get("wait_completed").is_some()), "{steps}");

    let terminated = Command::new("kill").arg("-TERM").arg(server.0.id().to_string()).status().unwrap();
    assert!(terminated.success());
    let status = server.0.wait().unwrap();
    assert!(status.success(), "cairn serve exits cleanly on SIGTERM: {status}");
}
