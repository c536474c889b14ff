//! A changed step order between two engine lifetimes parks the run with a precise error and
//! leaves the journal as it was.

use crate::common::{clock, sqlite, wait_for_status};
use cairn::ReadError;
use cairn::prelude::*;
use cairn::{RunStatus, Store};
use std::sync::Arc;
use std::time::Duration;

async fn original(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
    let a: u32 = ctx.step("reserve", || async { Ok::<_, StepError>(1) }).await?;
    let b: u32 = ctx.step("charge", || async { Ok::<_, StepError>(2) }).await?;
    ctx.sleep("cool-off", Duration::from_secs(600)).await?;
    Ok(a + b)
}

async fn reordered(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
    let b: u32 = ctx.step("charge", || async { Ok::<_, StepError>(2) }).await?;
    let a: u32 = ctx.step("reserve", || async { Ok::<_, StepError>(1) }).await?;
    ctx.sleep("cool-off", Duration::from_secs(600)).await?;
    Ok(a + b)
}

async fn shortened(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
    let a: u32 = ctx.step("reserve", || async { Ok::<_, StepError>(1) }).await?;
    Ok(a)
}

fn journal_text(journal: &[cairn::journal::JournalEntry]) -> Vec<String> {
    journal.iter().map(|e| format!("{} {}", e.seq, e.event.to_json())).collect()
}

async fn park_with<F, Fut>(changed: F) -> (cairn::RunRecord, Vec<String>, Vec<String>)
where
    F: Fn(Ctx, ()) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<u32, WorkflowError>> + Send + 'static,
{
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let clock = clock();
    let first = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(clock.clone())
        .register("order", 1, original)
        .start()
        .await
        .unwrap();
    let run = first.client().start("order", &()).await.unwrap();
    wait_for_status(&first.client(), run.id(), RunStatus::Suspended).await;
    first.shutdown().await;
    let before = journal_text(&store.read_journal(run.id()).await.unwrap());

    let second = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(clock.clone())
        .register("order", 1, changed)
        .start()
        .await
        .unwrap();
    clock.advance(Duration::from_secs(600));
    let parked = wait_for_status(&second.client(), run.id(), RunStatus::Paused).await;
    let result = second.client().result::<u32>(run.id()).await;
    assert!(matches!(result, Err(ReadError::RunDidNotComplete { status: RunStatus::Paused, .. })));
    second.shutdown().await;
    let after = journal_text(&store.read_journal(run.id()).await.unwrap());
    (parked, before, after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_steps_are_reported_and_the_journal_is_unchanged() {
    let (parked, before, after) = park_with(reordered).await;
    let error = parked.error.unwrap();
    assert!(error.contains("CAIRN-E0101"), "{error}");
    assert!(error.contains("step `reserve`") && error.contains("step `charge`"), "names expected and found: {error}");
    assert_eq!(before, after, "journal unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_the_body_no_longer_reaches_is_reported() {
    let (parked, before, after) = park_with(shortened).await;
    let error = parked.error.unwrap();
    assert!(error.contains("CAIRN-E0101") && error.contains("charge"), "{error}");
    assert_eq!(before, after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_changed_into_a_sleep_is_reported_with_both_kinds() {
    async fn kind_changed(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
        ctx.step("reserve", || async { Ok::<_, StepError>(1u32) }).await?;
        ctx.sleep("charge", Duration::from_secs(1)).await?;
        Ok(0)
    }
    let (parked, before, after) = park_with(kind_changed).await;
    let error = parked.error.unwrap();
    assert!(error.contains("holds a step") && error.contains("asked for a sleep"), "{error}");
    assert_eq!(before, after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_paths_fail_the_run_clearly() {
    async fn twice(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
        ctx.step("same", || async { Ok::<_, StepError>(1u32) }).await?;
        ctx.step("same", || async { Ok::<_, StepError>(2u32) }).await
    }
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).register("twice", 1, twice).start().await.unwrap();
    let run = engine.client().start("twice", &()).await.unwrap();
    let result = run.result::<u32>().await;
    match result {
        Err(ReadError::RunDidNotComplete { status: RunStatus::Failed, message, .. }) => {
            assert!(message.contains("CAIRN-E0102") && message.contains("same"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    engine.shutdown().await;
}
