//! What the tests of `cairn serve` share: a real server process on a temporary SQLite file, and
//! plain HTTP/1.1 requests to it.
#![allow(dead_code)] // each test file uses its own part

pub(crate) mod browser;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One HTTP/1.1 request (`Connection: close`, a bearer token if given); the status and the JSON
/// body (`null` when it is not JSON).
pub(crate) fn http_with(
    address: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, Value) {
    let auth = token.map(|t| format!("Authorization: Bearer {t}")).unwrap_or_default();
    let mut headers = vec!["Content-Type: application/json"];
    if !auth.is_empty() {
        headers.push(&auth);
    }
    let (status, _, body) = raw(address, method, path, &headers, body.unwrap_or(""));
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// One raw HTTP/1.1 request with `headers` (`Name: value`): the status, the head in lower case
/// and the body.
pub(crate) fn raw(address: &str, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// [`http_with`] without a token.
pub(crate) fn http(address: &str, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
    http_with(address, method, path, body, None)
}

/// Polls a run until it reaches `status` (the engine runs it in the background).
pub(crate) fn await_status(address: &str, path: &str, status: &str, token: Option<&str>) -> Value {
    let mut run = Value::Null;
    for _ in 0..600 {
        run = http_with(address, "GET", path, None, token).1;
        if run["status"] == json!(status) {
            return run;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{path} never became {status}: {run}");
}

/// A running `cairn serve --examples` on a SQLite file in a temporary directory; killed when
/// dropped.
pub(crate) struct Server {
    pub(crate) process: Child,
    /// `host:port` it listens on.
    pub(crate) address: String,
    /// Its SQLite file.
    pub(crate) db: std::path::PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts one on any free port, with `CAIRN_TOKEN` set to `token` (or unset), and waits for
    /// the line that says where it listens.
    pub(crate) fn start(token: Option<&str>) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::start_at(dir.path().join("cairn.db"), token, &[]);
        server._dir = Some(dir);
        server
    }

    /// Starts one on the SQLite file `db` (which outlives it), with `env` set too.
    pub(crate) fn start_at(db: std::path::PathBuf, token: Option<&str>, env: &[(&str, &str)]) -> Server {
        Server::start_listening(db, token, env, "127.0.0.1:0")
    }

    /// As [`Server::start_at`], listening on `listen` (`host:port`).
    pub(crate) fn start_listening(
        db: std::path::PathBuf,
        token: Option<&str>,
        env: &[(&str, &str)],
        listen: &str,
    ) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
        command.envs(env.iter().copied());
        command
            .args(["serve", "--examples", "--listen", listen, "--db"])
            .arg(&db)
            .env_remove("CAIRN_TOKEN")
            .stdout(Stdio::piped());
        if let Some(token) = token {
            command.env("CAIRN_TOKEN", token);
        }
        let mut process = command.spawn().unwrap();
        let mut first = String::new();
        BufReader::new(process.stdout.take().unwrap()).read_line(&mut first).unwrap();
        let address = first
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_owned();
        Server { process, address, db, _dir: None }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A `cairn serve --examples` on PostgreSQL, in a schema of its own (`tag` names it) that is
/// dropped with the returned guard; `None` when no server answers (skipped loudly, or a panic
/// under `CAIRN_REQUIRE_POSTGRES=1`).
pub(crate) fn postgres_server(tag: &str) -> Option<(Server, cairn_postgres::testing::TestSchema)> {
    let url = cairn_postgres::testing::test_database_url();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if let Err(error) = runtime.block_on(tokio_postgres::connect(&url, tokio_postgres::NoTls)) {
        return cairn_postgres::testing::unusable(&url, &error.to_string());
    }
    let name = format!("cairn_cli_{tag}_{}", std::process::id());
    let schema = cairn_postgres::testing::TestSchema { url: url.clone(), name: name.clone() };
    let env = [("CAIRN_DATABASE_URL", url.as_str()), ("CAIRN_SCHEMA", name.as_str())];
    Some((Server::start_at(std::path::PathBuf::from("unused.db"), None, &env), schema))
}

/// Runs `test` against a server on SQLite, then (when one answers) on PostgreSQL; `tag` names
/// the PostgreSQL schema. The test gets the server and the store's name, for its messages.
pub(crate) fn on_each_store(tag: &str, test: impl Fn(&Server, &str)) {
    test(&Server::start(None), "sqlite");
    if let Some((server, _schema)) = postgres_server(tag) {
        test(&server, "postgres");
    }
}
