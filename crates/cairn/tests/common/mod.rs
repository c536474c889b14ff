//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use cairn::{Client, Engine, ManualClock, RunId, RunRecord, RunStatus, SqliteStore, Timestamp, WorkflowError};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A fresh SQLite store in a temporary directory (kept alive by the returned guard).
pub fn sqlite() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("cairn.db")).expect("open sqlite");
    (store, dir)
}

/// The SQLite file of `sqlite()`'s directory, opened again (as a restarted process would).
pub fn reopen(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(dir.path().join("cairn.db")).expect("reopen sqlite")
}

/// An engine on `store` with `clock` and the one workflow `name` (version 1).
pub async fn engine_of<I, O, F, Fut>(store: SqliteStore, clock: &ManualClock, name: &str, body: F) -> Engine
where
    I: serde::de::DeserializeOwned + Send + 'static,
    O: serde::Serialize + Send + 'static,
    F: Fn(cairn::Ctx, I) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<O, WorkflowError>> + Send + 'static,
{
    Engine::builder().store(store).clock(clock.clone()).register(name, 1, body).start().await.expect("engine starts")
}

/// A virtual clock at a fixed, arbitrary instant.
pub fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_millis(1_700_000_000_000))
}

/// Polls until the run exists and reaches `status`. The bound only turns a hang into a failure;
/// no test asserts on how long anything took.
pub async fn wait_for_status(client: &Client, id: &RunId, status: RunStatus) -> RunRecord {
    for _ in 0..3_000 {
        if let Ok(run) = client.get(id).await
            && run.status == status
        {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let run = client.get(id).await.expect("get run");
    panic!("run {id} never reached {status}; it is {} ({:?})", run.status, run.error);
}

/// A shared call counter for step bodies.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub fn hit(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
    /// Polls until the count reaches `n` (the bound only turns a hang into a failure).
    pub async fn wait_for(&self, n: usize) {
        for _ in 0..3_000 {
            if self.get() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the counter stayed at {} below {n}", self.get());
    }
}

/// A workflow body's future, boxed: the return type of test helpers that build workflows.
pub type Body<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, cairn::WorkflowError>> + Send>>;
