//! Steps awaited concurrently replay correctly whatever order they finished in; idempotent
//! starts under concurrent callers make one run.

use crate::common::{Counter, clock, sqlite, wait_for_status};
use cairn::prelude::*;
use cairn::{RunStatus, Store};
use std::sync::Arc;
use std::time::Duration;

fn fan_out(
    calls: Counter,
) -> impl Fn(Ctx, u64) -> futures::future::BoxFuture<'static, Result<u64, WorkflowError>> + Send + Sync {
    move |ctx: Ctx, n: u64| {
        let calls = calls.clone();
        Box::pin(async move {
            let parts = (0..n).map(|i| {
                let calls = calls.clone();
                ctx.step(&format!("part[{i}]"), move || {
                    let calls = calls.clone();
                    async move {
                        calls.hit();
                        // Later parts finish first.
                        tokio::time::sleep(Duration::from_millis((n - i) * 3)).await;
                        Ok::<_, StepError>(i * i)
                    }
                })
            });
            let squares = futures::future::try_join_all(parts).await?;
            let branches = futures::future::try_join(
                async {
                    let left = ctx.scope("left")?;
                    let a: u64 = left.step("one", || async { Ok::<_, StepError>(1) }).await?;
                    let b: u64 = left.step("two", || async move { Ok::<_, StepError>(a + 1) }).await?;
                    Ok::<_, WorkflowError>(b)
                },
                async {
                    let right = ctx.scope("right")?;
                    let a: u64 = right.step("one", || async { Ok::<_, StepError>(10) }).await?;
                    Ok::<_, WorkflowError>(a)
                },
            )
            .await?;
            ctx.sleep("rest", Duration::from_secs(3600)).await?;
            Ok(squares.iter().sum::<u64>() + branches.0 + branches.1)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_steps_replay_in_any_completion_order() {
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let clock = clock();
    let calls = Counter::default();
    let first = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(clock.clone())
        .register("fan", 1, fan_out(calls.clone()))
        .start()
        .await
        .unwrap();
    let run = first.client().start("fan", &6u64).await.unwrap();
    wait_for_status(&first.client(), run.id(), RunStatus::Suspended).await;
    first.shutdown().await;
    assert_eq!(calls.get(), 6);
    let second = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(clock.clone())
        .register("fan", 1, fan_out(calls.clone()))
        .start()
        .await
        .unwrap();
    clock.advance(Duration::from_secs(3600));
    assert_eq!(second.client().result::<u64>(run.id()).await.unwrap(), 55 + 2 + 10);
    assert_eq!(calls.get(), 6, "no part ran twice");
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_starts_with_one_key_make_one_run() {
    let (store, _dir) = sqlite();
    let engine = Arc::new(
        Engine::builder()
            .store(store)
            .register("once", 1, |_ctx: Ctx, n: u32| async move { Ok::<_, WorkflowError>(n) })
            .start()
            .await
            .unwrap(),
    );
    let mut tasks = Vec::new();
    for i in 0..8u32 {
        let engine = Arc::clone(&engine);
        tasks.push(tokio::spawn(async move { engine.client().start("once", &i).idempotency_key("the-key").await }));
    }
    let mut created = 0;
    let mut ids = std::collections::HashSet::new();
    for task in tasks {
        let handle = task.await.unwrap().unwrap();
        created += usize::from(handle.created());
        ids.insert(handle.id().clone());
    }
    assert_eq!((created, ids.len()), (1, 1));
    let page = engine.client().list(&cairn::RunFilter::default()).await.unwrap();
    assert_eq!(page.runs.len(), 1);
    let id = ids.into_iter().next().unwrap();
    engine.client().result::<u32>(&id).await.unwrap();
    engine.shutdown().await;
}
