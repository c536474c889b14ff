//! Retention in virtual time: ended runs are deleted once their retention passes (per workflow,
//! per run, clamped by the engine's maximum); runs that have not ended are kept whatever their
//! age.

use crate::common::{clock, wait_for_status};
use cairn::prelude::*;
use cairn::{DEFAULT_RETENTION, RunStatus};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_runs_are_deleted_after_their_retention() {
    async fn quick(ctx: Ctx, (): ()) -> Result<u8, WorkflowError> {
        ctx.step("one", || async { Ok::<_, StepError>(1u8) }).await
    }
    async fn waits(ctx: Ctx, (): ()) -> Result<(), WorkflowError> {
        let _: Option<u8> = ctx.wait_for_event("never", EventFilter::any(), 1000 * HOUR).await?;
        Ok(())
    }
    let (store, _dir) = crate::common::sqlite();
    let clock = clock();
    let engine = Engine::builder()
        .store(store)
        .clock(clock.clone())
        .register("quick", 1, quick)
        .register("default", 1, quick)
        .register("waits", 1, waits)
        .retention("quick", HOUR)
        .retention("waits", Duration::from_millis(1))
        .max_retention(10 * HOUR)
        .sweep_every(None)
        .start()
        .await
        .unwrap();
    let by_workflow = engine.client().start("quick", &()).await.unwrap();
    let by_run = engine.client().start("quick", &()).retention(3 * HOUR).await.unwrap();
    let clamped = engine.client().start("quick", &()).retention(100 * HOUR).await.unwrap();
    let default = engine.client().start("default", &()).await.unwrap();
    let waiting = engine.client().start("waits", &()).await.unwrap().id().clone();
    for run in [&by_workflow, &by_run, &clamped, &default] {
        run.result::<u8>().await.unwrap();
    }
    wait_for_status(&engine.client(), &waiting, RunStatus::Suspended).await;
    assert_eq!(engine.client().get(default.id()).await.unwrap().retention, Some(10 * HOUR), "the default, clamped");
    assert_eq!(engine.client().get(clamped.id()).await.unwrap().retention, Some(10 * HOUR));
    assert!(DEFAULT_RETENTION > 10 * HOUR);

    let alive = |engine: &Engine, id: &RunId| {
        let (engine, id) = (engine.client(), id.clone());
        async move { engine.get(&id).await.is_ok() }
    };
    assert!(engine.client().prune(None, false).await.unwrap().is_empty(), "nothing is due yet");
    clock.advance(HOUR);
    let dry = engine.client().prune(None, true).await.unwrap();
    assert_eq!(dry, [by_workflow.id().clone()]);
    assert!(alive(&engine, by_workflow.id()).await, "a dry run deletes nothing");
    assert_eq!(engine.client().prune(None, false).await.unwrap(), [by_workflow.id().clone()]);
    assert!(!alive(&engine, by_workflow.id()).await);
    assert!(engine.client().journal(by_workflow.id()).await.map(|j| j.is_empty()).unwrap_or(true));
    clock.advance(2 * HOUR);
    assert_eq!(engine.client().prune(None, false).await.unwrap(), [by_run.id().clone()]);
    clock.advance(7 * HOUR);
    let mut last = engine.client().prune(None, false).await.unwrap();
    last.sort();
    let mut expected = vec![clamped.id().clone(), default.id().clone()];
    expected.sort();
    assert_eq!(last, expected);
    assert!(alive(&engine, &waiting).await, "a run that has not ended is never deleted");
    assert_eq!(engine.client().get(&waiting).await.unwrap().status, RunStatus::Suspended);
    engine.shutdown().await;
}
