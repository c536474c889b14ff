//! Deterministic helpers: `ctx.now()`, `ctx.random()` and `ctx.uuid()` are journaled on first
//! use, so a run resumed by another engine (after a restart, with its clock moved on) sees the
//! values it saw before.

use crate::common::wait_for_status;
use cairn::prelude::*;
use cairn::{Clock as _, RunStatus, SqliteStore, Timestamp, Uuid};
use std::time::Duration;

type Seen = (Timestamp, Timestamp, u64, u64, Uuid, Timestamp);

/// Before a wait: a time, two random numbers; after it: another time, a UUID, and a time taken
/// in a scope of its own.
async fn stamps(ctx: Ctx, (): ()) -> Result<Seen, WorkflowError> {
    let before = ctx.now().await?;
    let (first, second) = (ctx.random().await?, ctx.random().await?);
    let _: Option<()> = ctx.wait_for_event("go", EventFilter::any(), Duration::from_secs(86_400)).await?;
    let after = ctx.now().await?;
    let id = ctx.uuid().await?;
    let inner = ctx.scope("inner")?.now().await?;
    Ok((before, after, first, second, id, inner))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helpers_keep_their_values_across_a_restart() {
    let (store, dir) = crate::common::sqlite();
    let clock = crate::common::clock();
    let start = clock.now();
    let engine =
        Engine::builder().store(store).clock(clock.clone()).register("stamps", 1, stamps).start().await.unwrap();
    let run = engine.client().start("stamps", &()).id("s-1").await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    let journal_before = engine.client().journal(run.id()).await.unwrap().len();
    engine.shutdown().await;

    // An hour later, another engine on the same file resumes the run.
    clock.advance(Duration::from_secs(3600));
    let store = SqliteStore::open(dir.path().join("cairn.db")).unwrap();
    let engine =
        Engine::builder().store(store).clock(clock.clone()).register("stamps", 1, stamps).start().await.unwrap();
    engine.client().signal(run.id(), "go", &()).await.unwrap();
    let (before, after, first, second, id, inner): Seen = engine.client().result(run.id()).await.unwrap();
    assert_eq!(before, start, "the first time is the one journaled before the restart");
    assert_eq!(after, start + Duration::from_secs(3600));
    assert_eq!(inner, after, "a scope numbers its own helpers");
    assert_ne!(first, second, "two draws are two entries");
    assert_eq!(id.get_version_num(), 4);

    // Each value is a journal entry, numbered per scope and kind; none was drawn twice.
    let journal = engine.client().journal(run.id()).await.unwrap();
    let paths: Vec<String> = journal.iter().filter_map(|e| e.event.path().map(|p| p.to_string())).collect();
    for path in ["~now[0]", "~random[0]", "~random[1]", "~now[1]", "~uuid[0]", "inner/~now[0]"] {
        assert_eq!(paths.iter().filter(|p| *p == path).count(), 1, "{path} in {paths:?}");
    }
    assert!(journal.len() > journal_before);
    let stored: Seen =
        serde_json::from_str(engine.client().get(run.id()).await.unwrap().output.unwrap().get()).unwrap();
    assert_eq!(stored, (before, after, first, second, id, inner));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_the_journal_returns_the_same_values() {
    async fn draw(ctx: Ctx, (): ()) -> Result<(Timestamp, u64, Uuid), WorkflowError> {
        Ok((ctx.now().await?, ctx.random().await?, ctx.uuid().await?))
    }
    let (store, _dir) = crate::common::sqlite();
    let engine = Engine::builder().store(store).register("draw", 1, draw).start().await.unwrap();
    let run = engine.client().start("draw", &()).await.unwrap();
    let drawn: (Timestamp, u64, Uuid) = run.result().await.unwrap();
    let journal = engine.client().journal(run.id()).await.unwrap();
    engine.shutdown().await;
    let report = cairn::testing::replay(&journal, draw).await.unwrap();
    let cairn::testing::ReplayEnd::Returned(Ok(output)) = report.end else { panic!("{:?}", report.end) };
    let replayed: (Timestamp, u64, Uuid) = serde_json::from_str(output.get()).unwrap();
    assert_eq!((replayed, report.replayed), (drawn, 3));
}

/// Continues as new until generation 2, then reports what it knows of itself.
async fn lineage(ctx: Ctx, left: u32) -> Result<(String, String, u64, bool, Option<String>), WorkflowError> {
    let info = ctx.info();
    if left > 0 {
        return ctx.continue_as_new(&(left - 1));
    }
    let parent = info.parent.map(|p| p.to_string());
    Ok((info.run_id.to_string(), info.first_of_chain.to_string(), info.generation, info.deadline.is_some(), parent))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_knows_its_place_in_its_chain_and_its_deadline() {
    let engine =
        Engine::builder().store(cairn::MemoryStore::new()).register("lineage", 1, lineage).start().await.unwrap();
    let client = engine.client();
    let run = client.start("lineage", &2u32).id("meter").timeout(Duration::from_secs(3_600)).await.unwrap();
    let newest = wait_for_status(&client, &"meter~2".into(), RunStatus::Completed).await;
    let seen: (String, String, u64, bool, Option<String>) =
        serde_json::from_str(newest.output.as_ref().unwrap().get()).unwrap();
    assert_eq!(seen, ("meter~2".into(), "meter".into(), 2, true, None));
    assert_eq!(run.id().as_str(), "meter");
    engine.shutdown().await;
}
