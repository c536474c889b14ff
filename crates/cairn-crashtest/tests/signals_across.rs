//! Signals from other processes reach a run at once, on SQLite (two handles on one file) and on
//! PostgreSQL (two stores on one schema): a wait never gives up while a matching signal it has
//! not seen is stored, a wait held in memory is woken without suspending, and signal-with-start
//! from concurrent callers makes one run holding every signal.

use crate::common::postgres;
use cairn::StartError;
use cairn::prelude::*;
use cairn::{RunStatus, SqliteStore, Store};
use std::sync::Arc;
use std::time::Duration;

/// Two handles on one store, as two processes would have: the worker's and another process's.
type Pair = (Arc<dyn Store>, Arc<dyn Store>);

fn sqlite_pair() -> (Pair, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cairn.db");
    let worker: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let other: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    ((worker, other), dir)
}

async fn postgres_pair(tag: &str) -> Option<(Pair, crate::common::Schema)> {
    let (store, schema) = postgres(tag).await?;
    let options = cairn_postgres::PostgresOptions::new(&schema.url).schema(&schema.name);
    let other = cairn_postgres::PostgresStore::connect(options).await.unwrap();
    Some(((Arc::new(store), Arc::new(other)), schema))
}

/// A wait that starts after another process stored its signal consumes it even with a zero
/// timeout (the run had loaded its signals at an earlier wait, before the signal was sent).
async fn a_zero_timeout_wait_sees_a_signal_stored_elsewhere((worker, other): Pair) {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(tokio::sync::Notify::new());
    let workflow = {
        let (gate, started) = (Arc::clone(&gate), Arc::clone(&started));
        move |ctx: Ctx, (): ()| {
            let (gate, started) = (Arc::clone(&gate), Arc::clone(&started));
            async move {
                let early: Option<u8> = ctx.wait_for_event("early", EventFilter::any(), Duration::ZERO).await?;
                ctx.step("work", || {
                    let (gate, started) = (Arc::clone(&gate), Arc::clone(&started));
                    async move {
                        started.notify_one();
                        let _permit = gate.acquire().await.map_err(StepError::terminal)?;
                        Ok::<_, StepError>(())
                    }
                })
                .await?;
                let go: Option<String> = ctx.wait_for_event("go", EventFilter::any(), Duration::ZERO).await?;
                Ok((early, go))
            }
        }
    };
    let engine = Engine::builder().shared_store(worker).register("zero", 1, workflow).start().await.unwrap();
    let run = engine.client().start("zero", &()).await.unwrap();
    started.notified().await;
    Client::from_shared(other).signal(run.id(), "go", "from elsewhere").await.unwrap();
    gate.add_permits(1);
    let (early, go) = run.result::<(Option<u8>, Option<String>)>().await.unwrap();
    assert_eq!((early, go.as_deref()), (None, Some("from elsewhere")));
    engine.shutdown().await;
}

/// A run waiting in memory (its timeout inside the suspend grace period) is woken by a signal from
/// another process without suspending first: it is never claimed again (its epoch stays 1).
async fn a_wait_in_memory_is_woken_from_elsewhere((worker, other): Pair) {
    async fn listen(ctx: Ctx, (): ()) -> Result<Option<u32>, WorkflowError> {
        ctx.wait_for_event("go", EventFilter::matching(serde_json::json!({ "ok": true })), Duration::from_secs(600))
            .await
            .map(|payload: Option<serde_json::Value>| payload.and_then(|p| p["n"].as_u64()).map(|n| n as u32))
    }
    let engine = Engine::builder()
        .shared_store(worker)
        .suspend_grace(Duration::from_secs(3600))
        .register("listen", 1, listen)
        .start()
        .await
        .unwrap();
    let run = engine.client().start("listen", &()).await.unwrap();
    let other = Client::from_shared(other);
    // Running, and staying in memory: the wait's deadline is within the grace period.
    while other.get(run.id()).await.unwrap().status != RunStatus::Running {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for _ in 0..20 {
        assert_eq!(other.get(run.id()).await.unwrap().status, RunStatus::Running);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    other.signal(run.id(), "go", &serde_json::json!({ "ok": false, "n": 1 })).await.unwrap();
    other.signal(run.id(), "go", &serde_json::json!({ "ok": true, "n": 2 })).await.unwrap();
    assert_eq!(run.result::<Option<u32>>().await.unwrap(), Some(2));
    let done = other.get(run.id()).await.unwrap();
    assert_eq!((done.status, done.epoch), (RunStatus::Completed, 1), "claimed once: it never suspended");
    engine.shutdown().await;
}

/// Eight callers signal-with-start one run at once: one run is created and it holds all eight.
async fn signal_with_start_from_concurrent_callers((worker, other): Pair) {
    async fn collect(ctx: Ctx, (): ()) -> Result<Vec<u32>, WorkflowError> {
        let mut items = Vec::new();
        for i in 0..8 {
            let scope = ctx.scope_indexed("item", i)?;
            let item: Option<u32> = scope.wait_for_event("item", EventFilter::any(), Duration::from_secs(3600)).await?;
            items.extend(item);
        }
        items.sort_unstable();
        Ok(items)
    }
    let client = Client::from_shared(other);
    let mut callers = Vec::new();
    for i in 0..8u32 {
        let client = client.clone();
        callers.push(tokio::spawn(async move {
            client
                .start("collect", &())
                .id("basket")
                .allow_unknown()
                .with_signal("item", &i)
                .await
                .map(|run| run.created())
        }));
    }
    let mut created = 0;
    for caller in callers {
        created += usize::from(caller.await.unwrap().unwrap());
    }
    assert_eq!(created, 1);
    assert_eq!(client.signals(&RunId::new("basket")).await.unwrap().len(), 8);
    let engine = Engine::builder().shared_store(worker).register("collect", 1, collect).start().await.unwrap();
    assert_eq!(engine.client().result::<Vec<u32>>(&RunId::new("basket")).await.unwrap(), (0..8).collect::<Vec<_>>());
    // The run has finished: signal-with-start is refused now, and stores nothing.
    let late = client.start("collect", &()).id("basket").allow_unknown().with_signal("item", &9u32).await;
    assert!(matches!(late, Err(StartError::RunFinished { .. })), "{late:?}");
    assert_eq!(client.signals(&RunId::new("basket")).await.unwrap().len(), 8);
    engine.shutdown().await;
}

macro_rules! on_both {
    ($($name:ident),*) => {
        pub(crate) mod sqlite {
            $(
                pub(crate) async fn $name() {
                    let _slot = crate::common::slot().await;
                    let (pair, _dir) = super::sqlite_pair();
                    super::$name(pair).await;
                }
            )*
        }
        pub(crate) mod postgres {
            $(
                pub(crate) async fn $name() {
                    let _slot = crate::common::slot().await;
                    let Some((pair, _schema)) = super::postgres_pair("signals").await else { return };
                    super::$name(pair).await;
                }
            )*
        }
    };
}

on_both!(
    a_zero_timeout_wait_sees_a_signal_stored_elsewhere,
    a_wait_in_memory_is_woken_from_elsewhere,
    signal_with_start_from_concurrent_callers
);
