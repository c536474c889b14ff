//! Pause and resume: a paused run is not claimed; a running one stops at its next step boundary;
//! `resume` releases runs paused by request and runs parked by an error once fixed code runs.

use crate::common::{Counter, clock, sqlite, wait_for_status};
use cairn::ControlError;
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::{PauseOutcome, RunStatus, Store};
use std::sync::Arc;
use std::time::Duration;

fn journal_text(journal: &[cairn::journal::JournalEntry]) -> Vec<String> {
    journal.iter().map(|e| format!("{} {}", e.seq, e.event.to_json())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_run_is_paused_and_resumed() {
    async fn napper(ctx: Ctx, (): ()) -> Result<u8, WorkflowError> {
        ctx.sleep("nap", Duration::from_secs(600)).await?;
        ctx.step("wake", || async { Ok::<_, StepError>(5u8) }).await
    }
    let (store, _dir) = sqlite();
    let clock = clock();
    let engine =
        Engine::builder().store(store).clock(clock.clone()).register("napper", 1, napper).start().await.unwrap();
    let run = engine.client().start("napper", &()).await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    let before = journal_text(&engine.client().journal(run.id()).await.unwrap());
    assert_eq!(engine.client().pause(run.id()).await.unwrap(), PauseOutcome::Paused);
    let paused = engine.client().get(run.id()).await.unwrap();
    assert_eq!((paused.status, paused.error.as_deref()), (RunStatus::Paused, Some("paused by request")));
    assert_eq!(engine.client().pause(run.id()).await.unwrap(), PauseOutcome::Paused, "pausing again changes nothing");
    // Its timer comes due, but nobody claims a paused run.
    clock.advance(Duration::from_secs(600));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(engine.client().get(run.id()).await.unwrap().status, RunStatus::Paused);
    assert_eq!(
        journal_text(&engine.client().journal(run.id()).await.unwrap()),
        before,
        "pausing writes no journal event"
    );
    engine.client().resume(run.id()).await.unwrap();
    assert_eq!(run.result::<u8>().await.unwrap(), 5);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_stops_at_its_next_step_boundary() {
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (first, second) = (Counter::default(), Counter::default());
    let workflow = {
        let (gate, first, second) = (Arc::clone(&gate), first.clone(), second.clone());
        move |ctx: Ctx, (): ()| {
            let (gate, first, second) = (Arc::clone(&gate), first.clone(), second.clone());
            async move {
                let a: u8 = ctx
                    .step("first", || {
                        let (gate, first) = (Arc::clone(&gate), first.clone());
                        async move {
                            first.hit();
                            let _permit = gate.acquire().await.map_err(StepError::terminal)?;
                            Ok::<_, StepError>(1u8)
                        }
                    })
                    .await?;
                let b: u8 = ctx
                    .step("second", || {
                        let second = second.clone();
                        async move {
                            second.hit();
                            Ok::<_, StepError>(2u8)
                        }
                    })
                    .await?;
                Ok(a + b)
            }
        }
    };
    // Short leases, so heartbeats (every lease/3) carry the pause from another process quickly.
    let engine = Engine::builder()
        .shared_store(Arc::clone(&store))
        .lease_duration(Duration::from_millis(300))
        .register("two", 1, workflow)
        .start()
        .await
        .unwrap();
    let run = engine.client().start("two", &()).await.unwrap();
    while first.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Another process (a detached client) pauses it while its first step is in flight.
    let operator = Client::from_shared(Arc::clone(&store));
    assert_eq!(operator.pause(run.id()).await.unwrap(), PauseOutcome::Requested);
    // The worker hears of it at a heartbeat; the step in flight goes on (its token does not fire).
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(engine.client().get(run.id()).await.unwrap().status, RunStatus::Running);
    gate.add_permits(1);
    let paused = wait_for_status(&operator, run.id(), RunStatus::Paused).await;
    assert_eq!(paused.error.as_deref(), Some("paused by request"));
    let journal = engine.client().journal(run.id()).await.unwrap();
    let completed: Vec<&str> = journal
        .iter()
        .filter_map(|e| match &e.event {
            Event::StepCompleted { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(completed, vec!["first"], "the step in flight was committed");
    assert_eq!(second.get(), 0, "no new step starts while paused");
    let not_paused = operator.resume(&RunId::new("missing")).await;
    assert!(matches!(not_paused, Err(ControlError::RunNotFound(_))), "{not_paused:?}");
    operator.resume(run.id()).await.unwrap();
    assert_eq!(engine.client().result::<u8>(run.id()).await.unwrap(), 3);
    assert_eq!((first.get(), second.get()), (1, 1));
    engine.shutdown().await;
}

async fn original(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
    let a: u32 = ctx.step("reserve", || async { Ok::<_, StepError>(1) }).await?;
    ctx.sleep("cool-off", Duration::from_secs(600)).await?;
    let b: u32 = ctx.step("charge", || async { Ok::<_, StepError>(2) }).await?;
    Ok(a + b)
}

async fn changed(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
    ctx.step("audit", || async { Ok::<_, StepError>(0u32) }).await?;
    original(ctx, ()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_parked_by_non_determinism_resumes_on_fixed_code() {
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let clock = clock();
    type Body = std::pin::Pin<Box<dyn std::future::Future<Output = Result<u32, WorkflowError>> + Send>>;
    let engine_with = async |body: fn(Ctx, ()) -> Body| {
        Engine::builder().shared_store(Arc::clone(&store)).clock(clock.clone()).register("order", 1, body).start().await
    };
    let first = engine_with(|ctx, ()| -> Body { Box::pin(original(ctx, ())) }).await.unwrap();
    let run = first.client().start("order", &()).await.unwrap();
    wait_for_status(&first.client(), run.id(), RunStatus::Suspended).await;
    first.shutdown().await;

    // A deploy changes the body: the run parks with a precise error.
    let broken = engine_with(|ctx, ()| -> Body { Box::pin(changed(ctx, ())) }).await.unwrap();
    clock.advance(Duration::from_secs(600));
    let parked = wait_for_status(&broken.client(), run.id(), RunStatus::Paused).await;
    let error = parked.error.unwrap();
    assert!(error.contains("CAIRN-E0101"), "{error}");
    // Resumed while the broken code is still deployed, it parks again with the same error.
    broken.client().resume(run.id()).await.unwrap();
    let again = wait_for_status(&broken.client(), run.id(), RunStatus::Paused).await;
    assert_eq!(again.error.as_deref(), Some(error.as_str()));
    broken.shutdown().await;

    // The fix is deployed: resume completes the run.
    let fixed = engine_with(|ctx, ()| -> Body { Box::pin(original(ctx, ())) }).await.unwrap();
    fixed.client().resume(run.id()).await.unwrap();
    assert_eq!(fixed.client().result::<u32>(run.id()).await.unwrap(), 3);
    // Resuming a finished run is refused and changes nothing.
    let late = fixed.client().resume(run.id()).await;
    assert!(matches!(late, Err(ControlError::RunFinished { .. })), "{late:?}");
    let paused = fixed.client().pause(run.id()).await;
    assert!(matches!(paused, Err(ControlError::RunFinished { .. })), "{paused:?}");
    assert_eq!(fixed.client().get(run.id()).await.unwrap().status, RunStatus::Completed);
    fixed.shutdown().await;
}
