//! A SQLite file or a PostgreSQL schema written by an earlier Cairn opens with this one and its
//! runs carry on: the database is rebuilt from a dump (`tests/fixtures/sqlite-<commit>.sql`,
//! `tests/fixtures/postgres-<commit>.sql`, written by `cairn serve --examples` at that commit: a
//! completed `hello` run and an `approval` run suspended on its event), then served by this
//! build's `cairn serve --examples`, which migrates it.

use crate::common::{Server, await_status, http};
use serde_json::json;

/// The dumps, by the commit that wrote them (95282e3 is the commit before issue 26's redesign),
/// each with the time it was written (its first run's creation, in Unix milliseconds).
const DUMPS: &[(&str, &str, i64)] = &[("95282e3", include_str!("fixtures/sqlite-95282e3.sql"), 1_795_670_238_468)];

/// The PostgreSQL dumps, as [`DUMPS`], each of the schema [`pg_dump_schema`] names.
const PG_DUMPS: &[(&str, &str, i64)] = &[("95282e3", include_str!("fixtures/postgres-95282e3.sql"), 1_795_675_073_332)];

/// The schema a PostgreSQL dump was taken of: `cairn_fixture_<commit>`.
fn pg_dump_schema(commit: &str) -> String {
    format!("cairn_fixture_{commit}")
}

/// Now, in Unix milliseconds.
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// `dump` as if written at `now`: every time in it (a number of Unix milliseconds within 60 days
/// of `written`, in rows and in journal events alike) moves by `now - written`. Without this the
/// `approval` run's wait would time out an hour after the dump was made, and the test would
/// depend on the day it runs.
fn as_if_written_at(dump: &str, written: i64, now: i64) -> String {
    let (mut out, mut digits) = (String::with_capacity(dump.len()), String::new());
    let window = 60 * 86_400_000;
    let flush = |digits: &mut String, out: &mut String| {
        match digits.parse::<i64>() {
            Ok(t) if digits.len() == 13 && (t - written).abs() <= window => {
                out.push_str(&(t + now - written).to_string())
            }
            _ => out.push_str(digits),
        }
        digits.clear();
    };
    for c in dump.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

#[test]
fn dumps_move_to_now_whole() {
    let dump = "VALUES('r',1,1795670238477,'{\"deadline\":1795673838478}',2592000000,17956702384770)";
    let moved = as_if_written_at(dump, 1_795_670_238_468, 1_795_670_238_468 + 1_000);
    assert_eq!(moved, "VALUES('r',1,1795670239477,'{\"deadline\":1795673839478}',2592000000,17956702384770)");
}

#[test]
fn a_database_written_by_an_earlier_commit_opens_and_its_runs_carry_on() {
    for (commit, dump, written) in DUMPS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cairn.db");
        rusqlite::Connection::open(&db).unwrap().execute_batch(&as_if_written_at(dump, *written, now_ms())).unwrap();
        carries_on(commit, &Server::start_at(db, None, &[]));
    }
}

#[test]
fn a_postgres_schema_written_by_an_earlier_commit_opens_and_its_runs_carry_on() {
    let url = cairn_postgres::testing::test_database_url();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = match runtime.block_on(tokio_postgres::connect(&url, tokio_postgres::NoTls)) {
        Ok((client, connection)) => {
            runtime.spawn(connection);
            client
        }
        Err(error) => return cairn_postgres::testing::unusable(&url, &error.to_string()).unwrap_or(()),
    };
    for (commit, dump, written) in PG_DUMPS {
        let name = format!("cairn_upgrade_{commit}_{}", std::process::id());
        // Dropped with everything in it when the test ends, passed or not.
        let _schema = cairn_postgres::testing::TestSchema { url: url.clone(), name: name.clone() };
        let dump = as_if_written_at(dump, *written, now_ms()).replace(&pg_dump_schema(commit), &name);
        runtime.block_on(client.batch_execute(&dump)).unwrap();
        let db = std::path::PathBuf::from("unused.db");
        let env = [("CAIRN_DATABASE_URL", url.as_str()), ("CAIRN_SCHEMA", name.as_str())];
        carries_on(commit, &Server::start_at(db, None, &env));
    }
}

/// What a server on a database an earlier `commit` wrote must do: show its runs as they were,
/// finish the one that waited, and take new ones beside them.
fn carries_on(commit: &str, server: &Server) {
    let address = server.address.as_str();

    let (status, hello) = http(address, "GET", "/v1/workflows/hello/runs/old-hello", None);
    assert_eq!(
        (status, &hello["status"], &hello["output"]),
        (200, &json!("completed"), &json!("Hello, ada!")),
        "{commit}"
    );
    let (_, waiting) = http(address, "GET", "/v1/workflows/approval/runs/old-approval", None);
    assert_eq!(waiting["status"], json!("suspended"), "{commit}: {waiting}");

    // The run written by the earlier build takes its event and finishes under this one.
    let (status, _) =
        http(address, "POST", "/v1/workflows/approval/runs/old-approval/signals/approve", Some(r#""yes""#));
    assert_eq!(status, 200, "{commit}");
    let done = await_status(address, "/v1/workflows/approval/runs/old-approval", "completed", None);
    assert_eq!(done["output"], json!("yes"), "{commit}");

    // And the file takes new runs beside the old ones.
    let (status, _) =
        http(address, "POST", "/v1/workflows/hello/runs", Some(r#"{"id":"new-hello","input":{"name":"bo"}}"#));
    assert_eq!(status, 201, "{commit}");
    let new = await_status(address, "/v1/workflows/hello/runs/new-hello", "completed", None);
    assert_eq!(new["output"], json!("Hello, bo!"), "{commit}");
    let (_, page) = http(address, "GET", "/v1/runs", None);
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(3), "{commit}: {page}");
}
