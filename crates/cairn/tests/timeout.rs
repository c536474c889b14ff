//! Run deadlines (`start(..).timeout(d)`): journaled, so they hold across engine restarts; at the
//! deadline the run fails, steps in flight see their cancellation tokens fire and late results
//! are discarded.

use crate::common::{Body, Counter, clock, wait_for_status};
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::{Clock, ManualClock, RunStatus, SqliteStore};
use std::path::Path;
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

fn sleeper(after: &Counter) -> impl Fn(Ctx, ()) -> Body<u8> + Send + Sync + 'static {
    let after = after.clone();
    move |ctx: Ctx, (): ()| {
        let after = after.clone();
        Box::pin(async move {
            ctx.step("before", || async { Ok::<_, StepError>(1u8) }).await?;
            ctx.sleep("long", 60 * MINUTE).await?;
            ctx.step("after", || {
                after.hit();
                async { Ok::<_, StepError>(2u8) }
            })
            .await
        })
    }
}

async fn engine(path: &Path, clock: &ManualClock, after: &Counter) -> Engine {
    Engine::builder()
        .store(SqliteStore::open(path).unwrap())
        .clock(clock.clone())
        .register("sleeper", 1, sleeper(after))
        .start()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_holds_across_an_engine_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cairn.db");
    let clock = clock();
    let after = Counter::default();
    let first = engine(&path, &clock, &after).await;
    let started_at = clock.now();
    let run = first.client().start("sleeper", &()).timeout(10 * MINUTE).await.unwrap().id().clone();
    let suspended = wait_for_status(&first.client(), &run, RunStatus::Suspended).await;
    let deadline = started_at + 10 * MINUTE;
    assert_eq!(suspended.rare().deadline, Some(deadline));
    assert_eq!(suspended.wake_at, Some(deadline), "a suspended run wakes by its deadline at the latest");
    let journal = first.client().journal(&run).await.unwrap();
    assert!(matches!(journal[0].event, Event::Started { deadline: Some(d), .. } if d == deadline));
    first.shutdown().await;

    // A new engine (the same code) takes over; the deadline passes while the run sleeps.
    let second = engine(&path, &clock, &after).await;
    clock.advance(10 * MINUTE);
    let error = second.client().result::<u8>(&run).await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0110"), "{error}");
    let failed = second.client().get(&run).await.unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(after.get(), 0, "nothing after the deadline ran");
    let journal = second.client().journal(&run).await.unwrap();
    assert!(matches!(&journal.last().unwrap().event, Event::Failed { error } if error.contains("CAIRN-E0110")));
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_in_flight_at_the_deadline_is_cancelled_and_its_result_discarded() {
    let (store, _dir) = crate::common::sqlite();
    let clock = clock();
    let (entered, saw_cancel) = (Counter::default(), Counter::default());
    let workflow = {
        let (entered, saw_cancel) = (entered.clone(), saw_cancel.clone());
        move |ctx: Ctx, (): ()| {
            let (entered, saw_cancel) = (entered.clone(), saw_cancel.clone());
            async move {
                let token = ctx.cancellation_token();
                ctx.step("slow", move || {
                    let (entered, saw_cancel, token) = (entered.clone(), saw_cancel.clone(), token.clone());
                    async move {
                        // Work the step hands off watches the token too, beyond the step's own future.
                        let watcher = token.clone();
                        tokio::spawn(async move {
                            watcher.cancelled().await;
                            saw_cancel.hit();
                        });
                        entered.hit();
                        token.cancelled().await;
                        Ok::<_, StepError>(7u8) // a late result
                    }
                })
                .await
            }
        }
    };
    let engine =
        Engine::builder().store(store).clock(clock.clone()).register("slow", 1, workflow).start().await.unwrap();
    let run = engine.client().start("slow", &()).timeout(5 * MINUTE).await.unwrap();
    while entered.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    clock.advance(5 * MINUTE);
    let error = run.result::<u8>().await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0110"), "{error}");
    while saw_cancel.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await; // the step's cancellation token fired
    }
    let journal = engine.client().journal(run.id()).await.unwrap();
    assert!(journal.iter().all(|e| !matches!(e.event, Event::StepCompleted { .. })), "the late result was discarded");
    // A run without a timeout has no deadline.
    let plain = engine.client().start("slow", &()).await.unwrap();
    assert_eq!(engine.client().get(plain.id()).await.unwrap().rare().deadline, None);
    engine.client().cancel(plain.id()).await.unwrap();
    engine.shutdown().await;
}

/// An engine's default run timeout applies to runs started without one, and not to a run that
/// asks for its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_default_times_out_runs_that_set_none() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let after = Counter::default();
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db")).unwrap())
        .clock(clock.clone())
        .register("sleeper", 1, sleeper(&after))
        .default_run_timeout(10 * MINUTE)
        .start()
        .await
        .unwrap();
    let client = engine.client();
    let started_at = clock.now();
    let defaulted = client.start("sleeper", &()).await.unwrap().id().clone();
    let own = client.start("sleeper", &()).timeout(120 * MINUTE).await.unwrap().id().clone();
    assert_eq!(
        wait_for_status(&client, &defaulted, RunStatus::Suspended).await.rare().deadline,
        Some(started_at + 10 * MINUTE)
    );
    assert_eq!(
        wait_for_status(&client, &own, RunStatus::Suspended).await.rare().deadline,
        Some(started_at + 120 * MINUTE)
    );
    clock.advance(10 * MINUTE);
    let error = client.result::<u8>(&defaulted).await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0110"), "{error}");
    clock.advance(60 * MINUTE);
    assert_eq!(client.result::<u8>(&own).await.unwrap(), 2, "its own timeout, longer than the default, held");
    engine.shutdown().await;
}
