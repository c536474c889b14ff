//! `ctx.saga`: compensations registered as steps complete run in reverse when the body fails,
//! each a journaled step, so a restart in the middle of compensating undoes nothing twice.

use crate::common::{Counter, clock, engine_of, reopen, sqlite, wait_for_status};
use cairn::RunStatus;
use cairn::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Calls of: a, b, c (fails for good), undo-b, undo-a.
type Calls = Arc<[Counter; 5]>;

/// `a` and `b` register compensations, `c` fails; `undo-a` hangs until `open` is set.
fn booking(calls: Calls, open: Arc<AtomicBool>) -> impl Fn(Ctx, ()) -> crate::common::Body<String> + Send + Sync {
    move |ctx: Ctx, ()| {
        let (calls, open) = (Arc::clone(&calls), Arc::clone(&open));
        Box::pin(async move {
            let booked = ctx
                .saga(|ctx, saga| async move {
                    let (ua, ub) = (calls[4].clone(), calls[3].clone());
                    let a = saga
                        .step(ctx.step("a", || async { Ok::<_, StepError>(calls[0].hit() as u32) }), move |a| {
                            let (ua, open) = (ua.clone(), open.load(Ordering::SeqCst));
                            async move {
                                ua.hit();
                                if !open {
                                    std::future::pending::<()>().await;
                                }
                                assert_eq!(a, 1, "the compensation gets the step's output");
                                Ok::<_, StepError>(())
                            }
                        })
                        .await?;
                    let b = saga
                        .step(ctx.step("b", || async { Ok::<_, StepError>(calls[1].hit() as u32 * 10) }), move |_| {
                            let ub = ub.clone();
                            async move {
                                ub.hit();
                                Ok::<_, StepError>(())
                            }
                        })
                        .await?;
                    ctx.step("c", || async {
                        calls[2].hit();
                        Err::<u32, _>(StepError::terminal("no rooms"))
                    })
                    .await?;
                    Ok(a + b)
                })
                .await;
            match booked {
                Err(WorkflowError::Compensated { error, undone }) => Ok(format!("{} after {error}", undone.join(","))),
                other => other.map(|n| n.to_string()),
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compensations_run_in_reverse_once_each_across_a_restart() {
    let (store, dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let open = Arc::new(AtomicBool::new(false));
    let engine = engine_of(store, &clock, "booking", booking(Arc::clone(&calls), Arc::clone(&open))).await;
    let run = engine.client().start("booking", &()).id("saga-1").await.unwrap();
    calls[4].wait_for(1).await;
    let counts = || calls.iter().map(Counter::get).collect::<Vec<_>>();
    assert_eq!(counts(), [1, 1, 1, 1, 1], "b was undone; undo-a hangs");
    engine.shutdown_within(Duration::from_millis(50)).await;
    assert_eq!(engine.client().get(run.id()).await.unwrap().status, RunStatus::Pending);

    open.store(true, Ordering::SeqCst);
    let engine = engine_of(reopen(&dir), &clock, "booking", booking(Arc::clone(&calls), Arc::clone(&open))).await;
    let text: String = engine.client().result(run.id()).await.unwrap();
    assert!(text.starts_with("b,a after step `c` failed"), "{text}");
    assert_eq!(counts(), [1, 1, 1, 1, 2], "only the compensation cut off ran again");
    let journal = engine.client().journal(run.id()).await.unwrap();
    let paths: Vec<String> = journal.iter().filter_map(|e| e.event.path().map(|p| p.to_string())).collect();
    let at = |p: &str| paths.iter().position(|x| x == p).unwrap();
    assert!(at("c") < at("undo-b") && at("undo-b") < at("undo-a"), "{paths:?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_compensation_is_reported_and_the_others_still_run() {
    async fn broken(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
        ctx.saga(|ctx, saga| async move {
            let quick = RetryPolicy::exponential().attempts(1);
            saga.step(ctx.step("first", || async { Ok::<_, StepError>(1u32) }), |_| async { Ok::<_, StepError>(()) })
                .await?;
            saga.step(ctx.step("second", || async { Ok::<_, StepError>(2u32) }), |_| async {
                Err::<(), _>(StepError::terminal("cannot refund"))
            })
            .await?;
            ctx.step("third", || async { Err::<u32, _>(StepError::terminal("boom")) }).retry(quick).await
        })
        .await
    }
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("broken", 1, broken).start().await.unwrap();
    let run = engine.client().start("broken", &()).await.unwrap();
    let error = run.result::<u32>().await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0113") && error.contains("boom") && error.contains("`undo-second`"), "{error}");
    assert!(error.contains("cannot refund") && !error.contains("undo-first"), "{error}");
    wait_for_status(&engine.client(), run.id(), RunStatus::Failed).await;
    let journal = engine.client().journal(run.id()).await.unwrap();
    assert!(journal.iter().any(|e| e.event.path().is_some_and(|p| p.as_str() == "undo-first")));
    engine.shutdown().await;
}
