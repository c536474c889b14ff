//! The contract, checked by outside tools against a real `cairn serve --examples`: with a token
//! on SQLite, and without one on PostgreSQL:
//!
//! - Schemathesis, driven by the server's own `/openapi.json`, with `--checks all` and every
//!   phase (stateful included): every schema-valid request is taken, every schema-violating one
//!   refused, and every answer matches the document (`contract/schemathesis.toml`);
//! - a client that openapi-python-client generates from that document runs `hello` start →
//!   result and `approval` start → signal → result (`contract/generated_client.py`).
//!
//! Needs `st` (Schemathesis), `openapi-python-client` and `python3` on `PATH`
//! (`pip install schemathesis openapi-python-client`). Without them it is skipped with a loud
//! message, unless `CAIRN_REQUIRE_PYTHON=1`, under which it fails.

use crate::common::{Server, http_with};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TOKEN: &str = "contract-secret";

/// Where this test's files are.
fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/contract")
}

/// `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// Schemathesis, openapi-python-client and Python, or `None` (said loudly) when one is missing
/// and they are not required.
fn tools() -> Option<(PathBuf, PathBuf, PathBuf)> {
    match (on_path("st"), on_path("openapi-python-client"), on_path("python3")) {
        (Some(st), Some(generator), Some(python)) => Some((st, generator, python)),
        _ if std::env::var("CAIRN_REQUIRE_PYTHON").is_ok_and(|v| v == "1") => {
            panic!("CAIRN_REQUIRE_PYTHON=1 but st, openapi-python-client and python3 are not all on PATH")
        }
        _ => {
            eprintln!(
                "\n!!! SKIPPED: the contract tests need Schemathesis and openapi-python-client \
                 (pip install schemathesis openapi-python-client); set CAIRN_REQUIRE_PYTHON=1 to fail instead !!!\n"
            );
            None
        }
    }
}

/// Runs `command`, failing the test with its output when it fails.
fn succeeds(what: &str, command: &mut Command) -> Output {
    let output = command.output().unwrap_or_else(|error| panic!("{what} could not run: {error}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Both checks against `server`, which takes `token` (or none).
fn keeps_its_contract(server: &Server, token: Option<&str>, (st, generator, python): &(PathBuf, PathBuf, PathBuf)) {
    let url = format!("http://{}", server.address);
    let work = tempfile::tempdir().unwrap();

    let document = http_with(&server.address, "GET", "/openapi.json", None, token).1;
    assert_eq!(document["openapi"], "3.1.0", "{document}");
    let document_path = work.path().join("openapi.json");
    std::fs::write(&document_path, document.to_string()).unwrap();

    succeeds(
        "Schemathesis",
        Command::new(st)
            .current_dir(work.path())
            .arg("--config-file")
            .arg(here().join("schemathesis.toml"))
            // One worker: Hypothesis parses its lambdas' source with `ast` from each worker thread,
            // and CPython 3.11's `ast` is not thread-safe ("AST constructor recursion depth
            // mismatch", a Runtime Error in about one run in two with two workers).
            .args(["run", &format!("{url}/openapi.json"), "--checks", "all", "--workers", "1"])
            .args(["--request-timeout", "20"])
            .args(token.map(|token| ["-H".to_owned(), format!("Authorization: Bearer {token}")]).into_iter().flatten()),
    );

    let package = work.path().join("cairn-client");
    succeeds(
        "openapi-python-client",
        Command::new(generator)
            .current_dir(work.path())
            .args(["generate", "--path"])
            .arg(&document_path)
            .arg("--output-path")
            .arg(&package),
    );
    let output = succeeds(
        "the generated client",
        Command::new(python).arg(here().join("generated_client.py")).arg(&package).args([&url, token.unwrap_or("")]),
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("hello and approval completed"));
}

/// With a token, on SQLite.
#[test]
fn outside_tools_find_the_server_keeps_its_document_on_sqlite() {
    let Some(tools) = tools() else { return };
    keeps_its_contract(&Server::start(Some(TOKEN)), Some(TOKEN), &tools);
}

/// Without a token the document asks for none, and tools that trust it find the server keeps it;
/// on PostgreSQL. (The two runs cover both stores and both documents: whether a server has a
/// token does not depend on its store.)
#[test]
fn outside_tools_find_a_server_without_a_token_keeps_its_document_on_postgres() {
    let Some(tools) = tools() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // A schema of its own, made by a store and dropped when the test ends.
    let Some((store, schema)) = runtime.block_on(cairn_postgres::testing::test_store("contract")) else { return };
    drop(store);
    let env = [("CAIRN_DATABASE_URL", schema.url.as_str()), ("CAIRN_SCHEMA", schema.name.as_str())];
    keeps_its_contract(&Server::start_at(PathBuf::from("unused.db"), None, &env), None, &tools);
}
