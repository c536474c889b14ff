//! Restarting an ended run from a step: the journal before the step is kept and not executed
//! again; the new run is linked to the original both ways.

use crate::common::{Body, Counter, wait_for_status};
use cairn::RestartError;
use cairn::prelude::*;
use cairn::{RunFilter, RunStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Steps a, b, c; b fails for good while `broken` is set.
fn three_steps(
    calls: &[Counter; 3],
    broken: &Arc<AtomicBool>,
) -> impl Fn(Ctx, u32) -> Body<u32> + Send + Sync + 'static {
    let (calls, broken) = (calls.clone(), Arc::clone(broken));
    move |ctx: Ctx, n: u32| {
        let (calls, broken) = (calls.clone(), Arc::clone(&broken));
        Box::pin(async move {
            let mut total = n;
            for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
                let (calls, broken) = (calls.clone(), Arc::clone(&broken));
                total += ctx
                    .step(name, move || {
                        calls[i].hit();
                        let fail = i == 1 && broken.load(Ordering::SeqCst);
                        async move {
                            if fail { Err(StepError::terminal("b is broken")) } else { Ok(10u32.pow(i as u32)) }
                        }
                    })
                    .await?;
            }
            Ok(total)
        })
    }
}

async fn restarts_of(engine: &Engine, id: &RunId) -> Vec<RunId> {
    let filter = RunFilter { restarted_from: Some(id.clone()), ..RunFilter::default() };
    engine.client().list(&filter).await.unwrap().runs.into_iter().map(|r| r.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_restarts_from_its_failed_step() {
    let (store, _dir) = crate::common::sqlite();
    let calls = [Counter::default(), Counter::default(), Counter::default()];
    let broken = Arc::new(AtomicBool::new(true));
    let engine =
        Engine::builder().store(store).register("three", 1, three_steps(&calls, &broken)).start().await.unwrap();
    let original = engine.client().start("three", &1000u32).timeout(Duration::from_secs(3600)).await.unwrap();
    assert!(original.result::<u32>().await.is_err());
    let original = original.id().clone();
    assert_eq!(engine.client().get(&original).await.unwrap().status, RunStatus::Failed);
    assert_eq!([calls[0].get(), calls[1].get(), calls[2].get()], [1, 1, 0]);

    // Fixed, restarted from `b`: `a` is not executed again.
    broken.store(false, Ordering::SeqCst);
    let restarted = engine.client().restart(&original, "b").await.unwrap();
    assert_ne!(restarted.id(), &original);
    assert_eq!(restarted.result::<u32>().await.unwrap(), 1111);
    assert_eq!([calls[0].get(), calls[1].get(), calls[2].get()], [1, 2, 1]);
    let row = engine.client().get(restarted.id()).await.unwrap();
    assert_eq!(row.rare().restarted_from.as_ref(), Some(&original));
    assert!(row.rare().deadline.is_some(), "the original's timeout carries over");
    assert_eq!(restarts_of(&engine, &original).await, [restarted.id().clone()]);
    let journal = engine.client().journal(restarted.id()).await.unwrap();
    let original_journal = engine.client().journal(&original).await.unwrap();
    assert_eq!(journal[1].event.to_json(), original_journal[1].event.to_json(), "a's result is copied");

    // A completed run restarts too; from its first step everything runs again.
    let again = engine.client().restart(restarted.id(), "a").await.unwrap();
    assert_eq!(again.result::<u32>().await.unwrap(), 1111);
    assert_eq!([calls[0].get(), calls[1].get(), calls[2].get()], [2, 3, 2]);
    assert_eq!(restarts_of(&engine, restarted.id()).await, [again.id().clone()]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_that_cannot_be_made_create_nothing() {
    async fn waits(ctx: Ctx, (): ()) -> Result<(), WorkflowError> {
        ctx.step("first", || async { Ok::<_, StepError>(()) }).await?;
        let _: Option<u8> = ctx.wait_for_event("go", EventFilter::any(), Duration::from_secs(3600)).await?;
        Ok(())
    }
    let (store, _dir) = crate::common::sqlite();
    let engine = Engine::builder().store(store).register("waits", 1, waits).start().await.unwrap();
    let run = engine.client().start("waits", &()).await.unwrap().id().clone();
    wait_for_status(&engine.client(), &run, RunStatus::Suspended).await;
    let count = || async { engine.client().list(&RunFilter::default()).await.unwrap().runs.len() };
    assert!(matches!(engine.client().restart(&run, "first").await, Err(RestartError::NotEnded { .. })));
    engine.client().cancel(&run).await.unwrap();
    for bad in ["nope", "first/deeper", "", "a//b"] {
        let error = engine.client().restart(&run, bad).await.unwrap_err();
        assert!(matches!(error, RestartError::UnknownStep { .. }), "{bad}: {error}");
    }
    let missing = RunId::new("missing");
    assert!(matches!(engine.client().restart(&missing, "first").await, Err(RestartError::RunNotFound(_))));
    assert_eq!(count().await, 1, "nothing was created");
    // A cancelled run restarts from its wait.
    let restarted = engine.client().restart(&run, "go").await.unwrap();
    engine.client().signal(restarted.id(), "go", &1u8).await.unwrap();
    restarted.result::<()>().await.unwrap();
    engine.shutdown().await;
}
