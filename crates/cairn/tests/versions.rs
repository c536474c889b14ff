//! Versions side by side, patch markers and removed steps: changing a workflow's code while runs
//! started by the old code are still in flight.

use crate::common::{Body, Counter, wait_for_status};
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::{RunStatus, SqliteStore};
use std::path::Path;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_run_side_by_side_on_their_own_code() {
    async fn v1(ctx: Ctx, name: String) -> Result<String, WorkflowError> {
        ctx.step("greet", || async { Ok::<_, StepError>(format!("hello {name}")) }).await
    }
    async fn v2(ctx: Ctx, name: String) -> Result<String, WorkflowError> {
        let shout = ctx.step("shout", || async { Ok::<_, StepError>(name.to_uppercase()) }).await?;
        ctx.step("greet", || async { Ok::<_, StepError>(format!("HELLO {shout}")) }).await
    }
    let (store, _dir) = crate::common::sqlite();
    let engine =
        Engine::builder().store(store).register("greet", 1, v1).register("greet", 2, v2).start().await.unwrap();
    let newest = engine.client().start("greet", "ann").await.unwrap();
    let pinned = engine.client().start("greet", "bob").version(1).await.unwrap();
    assert_eq!(newest.result::<String>().await.unwrap(), "HELLO ANN");
    assert_eq!(pinned.result::<String>().await.unwrap(), "hello bob");
    assert_eq!(engine.client().get(newest.id()).await.unwrap().version, 2);
    assert_eq!(engine.client().get(pinned.id()).await.unwrap().version, 1);
    let unknown = engine.client().start("greet", "cy").version(3).await;
    assert!(unknown.unwrap_err().to_string().contains("version 3"));
    engine.shutdown().await;
}

fn patches(journal: &[cairn::journal::JournalEntry]) -> Vec<(String, bool)> {
    journal
        .iter()
        .filter_map(|e| match &e.event {
            Event::Patched { id, applied } => Some((id.clone(), *applied)),
            _ => None,
        })
        .collect()
}

async fn old_code(ctx: Ctx, (): ()) -> Result<String, WorkflowError> {
    let a: u8 = ctx.step("a", || async { Ok::<_, StepError>(1u8) }).await?;
    let first: Option<u8> = ctx.wait_for_event("first", EventFilter::any(), HOUR).await?;
    let second: Option<u8> = ctx.wait_for_event("second", EventFilter::any(), HOUR).await?;
    Ok(format!("old {a} {first:?} {second:?}"))
}

/// The old code with a step added behind a patch marker.
fn new_code(extra: &Counter) -> impl Fn(Ctx, ()) -> Body<String> + Send + Sync + 'static {
    let extra = extra.clone();
    move |ctx: Ctx, (): ()| {
        let extra = extra.clone();
        Box::pin(async move {
            let a: u8 = ctx.step("a", || async { Ok::<_, StepError>(1u8) }).await?;
            let mut branch = "old".to_owned();
            if ctx.patched("extra").await? {
                let e: u8 = ctx
                    .step("extra", || {
                        extra.hit();
                        async { Ok::<_, StepError>(9u8) }
                    })
                    .await?;
                branch = format!("new{e}");
            }
            let first: Option<u8> = ctx.wait_for_event("first", EventFilter::any(), HOUR).await?;
            let second: Option<u8> = ctx.wait_for_event("second", EventFilter::any(), HOUR).await?;
            Ok(format!("{branch} {a} {first:?} {second:?}"))
        })
    }
}

fn open(path: &Path) -> SqliteStore {
    SqliteStore::open(path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patched_branch_replays_the_same_way_across_engine_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cairn.db");
    // The old code starts a run, which waits.
    let engine = Engine::builder().store(open(&path)).register("flow", 1, old_code).start().await.unwrap();
    let old_run = engine.client().start("flow", &()).await.unwrap().id().clone();
    wait_for_status(&engine.client(), &old_run, RunStatus::Suspended).await;
    engine.shutdown().await;

    // The new code is deployed: the old run replays past the marker on the old branch; a new run
    // takes the new one.
    let extra = Counter::default();
    let engine = Engine::builder().store(open(&path)).register("flow", 1, new_code(&extra)).start().await.unwrap();
    let new_run = engine.client().start("flow", &()).await.unwrap().id().clone();
    engine.client().signal(&old_run, "first", &1u8).await.unwrap();
    engine.client().signal(&new_run, "first", &2u8).await.unwrap();
    for run in [&old_run, &new_run] {
        // Suspended again after consuming the signal (it was suspended before it, too).
        let mut polls = 0;
        while !engine
            .client()
            .journal(run)
            .await
            .unwrap()
            .iter()
            .any(|e| matches!(&e.event, Event::WaitCompleted { .. }))
        {
            polls += 1;
            assert!(polls < 3_000, "run {run} never consumed its signal");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        wait_for_status(&engine.client(), run, RunStatus::Suspended).await;
        let journal = engine.client().journal(run).await.unwrap();
        assert!(journal.iter().any(|e| matches!(&e.event, Event::WaitCompleted { signal: Some(_), .. })));
    }
    engine.shutdown().await;
    assert_eq!(extra.get(), 1);

    // After a restart both replay the branch they took (the new run's journal holds steps past the
    // marker now, so only the journaled decision keeps it on the new branch).
    let engine = Engine::builder().store(open(&path)).register("flow", 1, new_code(&extra)).start().await.unwrap();
    engine.client().signal(&old_run, "second", &3u8).await.unwrap();
    engine.client().signal(&new_run, "second", &4u8).await.unwrap();
    assert_eq!(engine.client().result::<String>(&old_run).await.unwrap(), "old 1 Some(1) Some(3)");
    assert_eq!(engine.client().result::<String>(&new_run).await.unwrap(), "new9 1 Some(2) Some(4)");
    assert_eq!(extra.get(), 1, "the patched step ran once, not again on replay");
    assert_eq!(patches(&engine.client().journal(&old_run).await.unwrap()), [("extra".to_owned(), false)]);
    assert_eq!(patches(&engine.client().journal(&new_run).await.unwrap()), [("extra".to_owned(), true)]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_steps_old_journal_replays() {
    let dropped = Counter::default();
    let code = |mark_removed: bool, keep: bool| {
        let dropped = dropped.clone();
        move |ctx: Ctx, (): ()| {
            let dropped = dropped.clone();
            async move {
                let a: u8 = ctx.step("a", || async { Ok::<_, StepError>(1u8) }).await?;
                if keep {
                    ctx.step("dropped", || {
                        dropped.hit();
                        async { Ok::<_, StepError>(()) }
                    })
                    .await?;
                } else if mark_removed {
                    ctx.removed("dropped")?;
                }
                let go: Option<u8> = ctx.wait_for_event("go", EventFilter::any(), HOUR).await?;
                let c: u8 = ctx.step("c", || async { Ok::<_, StepError>(3u8) }).await?;
                Ok::<_, WorkflowError>(a + go.unwrap_or(0) + c)
            }
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cairn.db");
    let engine = Engine::builder().store(open(&path)).register("flow", 1, code(false, true)).start().await.unwrap();
    let old_run = engine.client().start("flow", &()).await.unwrap().id().clone();
    wait_for_status(&engine.client(), &old_run, RunStatus::Suspended).await;
    engine.shutdown().await;

    // Deleting the step without a marker: the old journal no longer replays.
    let engine = Engine::builder().store(open(&path)).register("flow", 1, code(false, false)).start().await.unwrap();
    engine.client().signal(&old_run, "go", &10u8).await.unwrap();
    let parked = wait_for_status(&engine.client(), &old_run, RunStatus::Paused).await;
    assert!(parked.error.as_deref().unwrap_or_default().contains("CAIRN-E0101"), "{parked:?}");
    engine.shutdown().await;

    // With the marker it does, and runs the new code starts never had the step.
    let engine = Engine::builder().store(open(&path)).register("flow", 1, code(true, false)).start().await.unwrap();
    engine.client().resume(&old_run).await.unwrap();
    assert_eq!(engine.client().result::<u8>(&old_run).await.unwrap(), 14);
    let new_run = engine.client().start("flow", &()).await.unwrap();
    engine.client().signal(new_run.id(), "go", &20u8).await.unwrap();
    assert_eq!(new_run.result::<u8>().await.unwrap(), 24);
    let journal = engine.client().journal(new_run.id()).await.unwrap();
    assert!(journal.iter().all(|e| e.event.path().is_none_or(|p| p.as_str() != "dropped")));
    assert_eq!(dropped.get(), 1, "only the old code ran the removed step");
    engine.shutdown().await;
}
