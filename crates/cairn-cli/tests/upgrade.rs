//! A SQLite file written by an earlier Cairn opens with this one and its runs carry on: the file
//! is rebuilt from a dump (`tests/fixtures/sqlite-<commit>.sql`, written by `cairn serve
//! --examples` at that commit: a completed `hello` run and an `approval` run suspended on its
//! event), then served by this build's `cairn serve --examples`.

use crate::common::{Server, await_status, http};
use serde_json::json;

/// The dumps, by the commit that wrote them: 95282e3 is the commit before issue 26's redesign.
const DUMPS: &[(&str, &str)] = &[("95282e3", include_str!("fixtures/sqlite-95282e3.sql"))];

#[test]
fn a_database_written_by_an_earlier_commit_opens_and_its_runs_carry_on() {
    for (commit, dump) in DUMPS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cairn.db");
        rusqlite::Connection::open(&db).unwrap().execute_batch(dump).unwrap();
        let server = Server::start_at(db, None, &[]);
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
}
