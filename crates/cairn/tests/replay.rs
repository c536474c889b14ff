//! A completed step's body is never called again when a run resumes on a new engine.

use crate::common::{Counter, clock, sqlite, wait_for_status};
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::{RunStatus, Store};
use std::sync::Arc;
use std::time::Duration;

fn workflow(
    counters: [Counter; 3],
) -> impl Fn(Ctx, u32) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u32, WorkflowError>> + Send>>
+ Send
+ Sync
+ 'static {
    move |ctx: Ctx, input: u32| {
        let [a, b, c] = counters.clone();
        Box::pin(async move {
            let x: u32 = ctx
                .step("a", || async {
                    a.hit();
                    Ok::<_, StepError>(input + 1)
                })
                .await?;
            let y: u32 = ctx
                .step("b", || async {
                    b.hit();
                    Ok::<_, StepError>(x * 10)
                })
                .await?;
            ctx.sleep("nap", Duration::from_secs(3600)).await?;
            let z: u32 = ctx
                .step("c", || async {
                    c.hit();
                    Ok::<_, StepError>(y + 5)
                })
                .await?;
            Ok(z)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completed_steps_are_not_run_again_after_restart() {
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let clock = clock();
    let counters = [Counter::default(), Counter::default(), Counter::default()];

    let first = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(clock.clone())
        .register("replay", 1, workflow(counters.clone()))
        .start()
        .await
        .unwrap();
    let run = first.client().start("replay", &4u32).await.unwrap();
    wait_for_status(&first.client(), run.id(), RunStatus::Suspended).await;
    first.shutdown().await;
    assert_eq!([counters[0].get(), counters[1].get(), counters[2].get()], [1, 1, 0]);

    let second = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(clock.clone())
        .register("replay", 1, workflow(counters.clone()))
        .start()
        .await
        .unwrap();
    clock.advance(Duration::from_secs(3600));
    let output: u32 = second.client().result(run.id()).await.unwrap();
    assert_eq!(output, 55);
    assert_eq!([counters[0].get(), counters[1].get(), counters[2].get()], [1, 1, 1], "each body ran once");

    let journal = second.client().journal(run.id()).await.unwrap();
    let completions = journal.iter().filter(|e| matches!(e.event, Event::StepCompleted { .. })).count();
    assert_eq!(completions, 3);
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_released_mid_step_resumes_on_the_next_engine() {
    // The first engine shuts down while a step body is blocked; the next one runs the body again
    // (at-least-once effect) and the step completes exactly once in the journal.
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let calls = Counter::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let make = |calls: Counter, gate: Arc<tokio::sync::Semaphore>| {
        move |ctx: Ctx, _: ()| {
            let calls = calls.clone();
            let gate = Arc::clone(&gate);
            async move {
                ctx.step("slow", || {
                    let calls = calls.clone();
                    let gate = Arc::clone(&gate);
                    async move {
                        calls.hit();
                        let _permit = gate.acquire().await.map_err(StepError::terminal)?;
                        Ok::<_, StepError>(7u8)
                    }
                })
                .await
            }
        }
    };
    let first = Engine::builder()
        .shared_store(Arc::clone(&store))
        .register("slow", 1, make(calls.clone(), Arc::clone(&gate)))
        .start()
        .await
        .unwrap();
    let run = first.client().start("slow", &()).await.unwrap();
    while calls.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // No grace: the blocked step's cancellation token fires and the lease is handed back.
    first.shutdown_within(Duration::ZERO).await;
    assert_eq!(store.get_run(run.id()).await.unwrap().unwrap().status, RunStatus::Pending);

    gate.add_permits(10);
    let second = Engine::builder()
        .shared_store(Arc::clone(&store))
        .register("slow", 1, make(calls.clone(), gate))
        .start()
        .await
        .unwrap();
    assert_eq!(second.client().result::<u8>(run.id()).await.unwrap(), 7);
    assert_eq!(calls.get(), 2);
    let journal = second.client().journal(run.id()).await.unwrap();
    assert_eq!(journal.iter().filter(|e| matches!(e.event, Event::StepCompleted { .. })).count(), 1);
    second.shutdown().await;
}

/// `ctx.is_replaying()` is false in a run's first execution, and in a resumed one true until the
/// body passes what the journal held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_replaying_is_true_only_before_the_body_passes_its_journal() {
    type Seen = Arc<std::sync::Mutex<Vec<(&'static str, bool)>>>;
    fn workflow(
        seen: Seen,
    ) -> impl Fn(Ctx, ()) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), WorkflowError>> + Send>>
    + Send
    + Sync
    + 'static {
        move |ctx: Ctx, ()| {
            let seen = Arc::clone(&seen);
            Box::pin(async move {
                let mark = |at: &'static str| seen.lock().unwrap().push((at, ctx.is_replaying()));
                mark("start");
                ctx.step("a", || async { Ok::<_, StepError>(1) }).await?;
                mark("after a");
                ctx.sleep("nap", Duration::from_secs(3600)).await?;
                mark("after nap");
                ctx.step("b", || async { Ok::<_, StepError>(2) }).await?;
                mark("after b");
                Ok(())
            })
        }
    }
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let clock = clock();
    let seen: Seen = Arc::default();
    let engine = |seen: &Seen| {
        Engine::builder().shared_store(Arc::clone(&store)).clock(clock.clone()).register(
            "replaying",
            1,
            workflow(Arc::clone(seen)),
        )
    };
    let first = engine(&seen).start().await.unwrap();
    let run = first.client().start("replaying", &()).await.unwrap();
    wait_for_status(&first.client(), run.id(), RunStatus::Suspended).await;
    first.shutdown().await;
    assert_eq!(*seen.lock().unwrap(), [("start", false), ("after a", false)], "a first execution replays nothing");

    seen.lock().unwrap().clear();
    let second = engine(&seen).start().await.unwrap();
    clock.advance(Duration::from_secs(3600));
    second.client().result::<()>(run.id()).await.unwrap();
    second.shutdown().await;
    assert_eq!(
        *seen.lock().unwrap(),
        [("start", true), ("after a", true), ("after nap", false), ("after b", false)],
        "the resumed execution replays up to the sleep the journal held"
    );
}
