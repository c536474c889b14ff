//! The conformance suite against the in-memory and SQLite stores.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use cairn_sqlite::{SqliteOptions, SqliteStore};
use cairn_store::{MemoryStore, Store};
use std::sync::Arc;

cairn_store_conformance::conformance_tests!(memory, || async { (Arc::new(MemoryStore::new()) as Arc<dyn Store>, ()) });

fn sqlite_store(options: SqliteOptions) -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open_with(dir.path().join("cairn.db"), options).expect("open sqlite");
    (Arc::new(store), dir)
}

cairn_store_conformance::conformance_tests!(sqlite, || async { sqlite_store(SqliteOptions::default()) });

cairn_store_conformance::conformance_tests!(sqlite_batch_of_one, || async {
    sqlite_store(SqliteOptions { max_batch: 1, ..SqliteOptions::default() })
});

cairn_store_conformance::conformance_tests!(sqlite_writer_thread_only, || async {
    sqlite_store(SqliteOptions { inline_when_idle: false, ..SqliteOptions::default() })
});

cairn_store_conformance::conformance_tests!(jsonl, || async {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = cairn_jsonl::JsonlStore::open(dir.path()).expect("open jsonl");
    (Arc::new(store) as Arc<dyn Store>, dir)
});

/// Every transition the lifecycle table allows (`cairn_store::lifecycle::next`) is done by the
/// model-based test, whose every step also checks that the rows move as the table says: a pair
/// no sequence reaches is a rule no backend is checked against. The sequences come from a fixed
/// seed, so what is reached is the same on every run.
#[test]
fn the_model_test_reaches_every_transition_the_table_allows() {
    let memory = || async { (Arc::new(MemoryStore::new()) as Arc<dyn Store>, ()) };
    let reached = cairn_store_conformance::check_against_model_seeded(2048, 40, [7; 32], memory);
    let allowed = cairn_store::lifecycle::allowed();
    let missed: Vec<_> = allowed.iter().filter(|pair| !reached.contains(pair)).collect();
    assert!(missed.is_empty(), "the model-based test never did these (phase, operation) pairs: {missed:?}");
    assert!(reached.iter().all(|pair| allowed.contains(pair)), "it did a pair the table refuses");
}
