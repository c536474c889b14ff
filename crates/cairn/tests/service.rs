//! `examples/service.rs`, the README's "Serve your own workflows", as a user runs it: its binary
//! serves its own workflow over HTTP (the API of `cairn serve`, with a token), a run is started,
//! signalled and read to its end through that API, and SIGTERM stops it gracefully. It says
//! where it listens, and a second one on the same address says that address is taken.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "service-secret";

/// The example's binary: built by `cargo test` with the examples, or built here when only this
/// test target was asked for.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(|deps| deps.parent()).unwrap().to_owned();
    let binary = profile.join("examples").join("service");
    if !binary.is_file() {
        let status =
            Command::new(env!("CARGO")).args(["build", "-p", "cairn", "--example", "service"]).status().unwrap();
        assert!(status.success(), "cargo build --example service failed");
    }
    binary
}

/// One request with the token: the status and the JSON body.
fn call(address: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.split(' ').nth(1).unwrap().parse().unwrap(), serde_json::from_str(body).unwrap_or(Value::Null))
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_service_example_serves_its_own_workflow_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let address = format!("127.0.0.1:{port}");
    let mut server = Killed(
        Command::new(example())
            .env("CAIRN_DB", dir.path().join("service.db"))
            .env("CAIRN_LISTEN", &address)
            .env("CAIRN_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // It says where it listens, once it does.
    let mut first = String::new();
    BufReader::new(server.0.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains(&format!("http://{address}/")), "{first:?}");

    // A second one on the same address says which address is taken and what to do, and exits.
    let second = Command::new(example())
        .env("CAIRN_DB", dir.path().join("second.db"))
        .env("CAIRN_LISTEN", &address)
        .env("CAIRN_TOKEN", TOKEN)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{said}");
    assert!(said.contains(&format!("cannot listen on {address}")) && said.contains("CAIRN_LISTEN"), "{said}");
    assert!(!said.contains("Os {"), "a Debug dump rather than a message: {said}");

    let (status, _) = call(&address, "GET", "/v1/workflows/order/runs", "");
    assert_eq!(status, 200);
    let (status, started) = call(
        &address,
        "POST",
        "/v1/workflows/order/runs",
        r#"{"id": "order-1", "input": {"item": "book", "quantity": 2}}"#,
    );
    assert_eq!(status, 201, "{started}");
    let (status, sent) = call(&address, "POST", "/v1/workflows/order/runs/order-1/signals/paid", r#"{"amount": 30}"#);
    assert_eq!(status, 200, "{sent}");
    let (status, run) = call(&address, "GET", "/v1/workflows/order/runs/order-1/result?timeout=60s", "");
    assert_eq!(status, 200);
    assert_eq!((&run["status"], &run["output"]), (&json!("completed"), &json!("shipped 2 x book, paid 30")), "{run}");
    let (status, refused) = call(&address, "POST", "/v1/workflows/unknown/runs", "{}");
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("unknown_workflow")));

    // SIGTERM: a graceful stop, exit status 0.
    let pid = server.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let since = Instant::now();
    let status = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(since.elapsed() < Duration::from_secs(60), "it did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}
