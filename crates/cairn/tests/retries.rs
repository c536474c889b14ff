//! Retries with backoff in virtual time; attempts and deadlines survive an engine restart.

use crate::common::{Counter, clock, sqlite, wait_for_status};
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::{RunStatus, Store, SuspendReason};
use std::sync::Arc;
use std::time::Duration;

/// Fails its first `failures` calls, then returns the call count; each failure names the attempt
/// the engine says it is ([`cairn::step_attempt`]).
fn flaky(
    failures: usize,
    calls: Counter,
) -> impl Fn(Ctx, ()) -> futures::future::BoxFuture<'static, Result<usize, WorkflowError>> + Send + Sync + 'static {
    move |ctx: Ctx, ()| {
        let calls = calls.clone();
        Box::pin(async move {
            ctx.step("flaky", || async {
                let n = calls.hit();
                let attempt = cairn::step_attempt().unwrap_or_default();
                if n <= failures { Err(StepError::retryable(format!("attempt {attempt} failed"))) } else { Ok(n) }
            })
            .retry(RetryPolicy::exponential().attempts(5).base(Duration::from_secs(10)).jitter(0.0))
            .await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_schedule_survives_a_restart() {
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let clock = clock();
    let t0 = cairn::Clock::now(&clock);
    let calls = Counter::default();

    let first = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(clock.clone())
        .register("flaky", 1, flaky(2, calls.clone()))
        .start()
        .await
        .unwrap();
    let run = first.client().start("flaky", &()).await.unwrap();
    let suspended = wait_for_status(&first.client(), run.id(), RunStatus::Suspended).await;
    first.shutdown().await;
    assert_eq!(suspended.suspend_reason, Some(SuspendReason::BackingOff));
    assert_eq!(suspended.wake_at, Some(t0 + Duration::from_secs(10)), "first retry 10 s after the failure");
    assert_eq!(calls.get(), 1);

    // A new engine knows the attempt count and the deadline from the journal alone.
    let second = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(clock.clone())
        .register("flaky", 1, flaky(2, calls.clone()))
        .start()
        .await
        .unwrap();
    clock.advance(Duration::from_secs(9));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(calls.get(), 1, "not retried before its deadline");
    clock.advance(Duration::from_secs(1));
    let again = loop {
        // The count is read before the record: a record read first may predate the claim that
        // ran the second attempt, and still show the first suspension.
        let retried = calls.get() == 2;
        let r = second.client().get(run.id()).await.unwrap();
        if retried && r.status == RunStatus::Suspended {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(again.wake_at, Some(t0 + Duration::from_secs(30)), "second delay doubles to 20 s");
    clock.advance(Duration::from_secs(20));
    assert_eq!(second.client().result::<usize>(run.id()).await.unwrap(), 3);

    let journal = second.client().journal(run.id()).await.unwrap();
    let attempts: Vec<(u32, bool)> = journal
        .iter()
        .filter_map(|e| match &e.event {
            Event::StepFailed { attempt, .. } => Some((*attempt, false)),
            Event::StepCompleted { attempt, .. } => Some((*attempt, true)),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, vec![(1, false), (2, false), (3, true)]);
    // The body knew which attempt it was, the second one in a new engine with no memory of the
    // first: the count comes from the journal.
    let errors: Vec<&str> = journal
        .iter()
        .filter_map(|e| match &e.event {
            Event::StepFailed { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(errors, ["attempt 1 failed", "attempt 2 failed"]);
    assert_eq!(cairn::step_attempt(), None, "outside a step body");
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_and_terminal_failures_reach_the_body() {
    let (store, _dir) = sqlite();
    let clock = clock();
    let calls = Counter::default();
    let compensations = Counter::default();
    let saga = {
        let calls = calls.clone();
        let compensations = compensations.clone();
        move |ctx: Ctx, terminal: bool| {
            let calls = calls.clone();
            let compensations = compensations.clone();
            async move {
                let charged = ctx
                    .step("charge", || async {
                        calls.hit();
                        if terminal {
                            Err::<u8, _>(StepError::terminal("declined"))
                        } else {
                            Err(StepError::retryable("busy"))
                        }
                    })
                    .retry(RetryPolicy::fixed(Duration::from_millis(100)).attempts(3))
                    .await;
                match charged {
                    Ok(_) => Ok("charged".to_owned()),
                    Err(WorkflowError::StepFailed { attempts, .. }) => {
                        ctx.step("refund", || async {
                            compensations.hit();
                            Ok::<_, StepError>(())
                        })
                        .await?;
                        Ok(format!("compensated after {attempts}"))
                    }
                    Err(other) => Err(other),
                }
            }
        }
    };
    let engine = Engine::builder().store(store).clock(clock.clone()).register("saga", 1, saga).start().await.unwrap();
    let terminal = engine.client().start("saga", &true).await.unwrap();
    assert_eq!(terminal.result::<String>().await.unwrap(), "compensated after 1");
    assert_eq!(calls.get(), 1, "a terminal error is not retried");

    let exhausted = engine.client().start("saga", &false).await.unwrap();
    // Backoff of 100 ms is within the grace period: the run stays in memory and waits in virtual time.
    for failures in 1..=2 {
        loop {
            let journal = engine.client().journal(exhausted.id()).await.unwrap();
            if journal.iter().filter(|e| matches!(e.event, Event::StepFailed { .. })).count() == failures {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        clock.advance(Duration::from_millis(100));
    }
    assert_eq!(exhausted.result::<String>().await.unwrap(), "compensated after 3");
    assert_eq!(calls.get(), 4);
    assert_eq!(compensations.get(), 2);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_times_out_is_retried() {
    let (store, _dir) = sqlite();
    let clock = clock();
    let calls = Counter::default();
    let wf = {
        let calls = calls.clone();
        move |ctx: Ctx, ()| {
            let calls = calls.clone();
            async move {
                ctx.step("slow", || async {
                    if calls.hit() == 1 {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, StepError>("done".to_owned())
                })
                .timeout(Duration::from_secs(5))
                .retry(RetryPolicy::fixed(Duration::from_secs(60)).attempts(2))
                .await
            }
        }
    };
    let engine = Engine::builder().store(store).clock(clock.clone()).register("slow", 1, wf).start().await.unwrap();
    let run = engine.client().start("slow", &()).await.unwrap();
    while calls.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    clock.advance(Duration::from_secs(5));
    let suspended = wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    assert_eq!(suspended.suspend_reason, Some(SuspendReason::BackingOff));
    let journal = engine.client().journal(run.id()).await.unwrap();
    assert!(journal.iter().any(|e| matches!(&e.event, Event::StepFailed { error, .. } if error.contains("timed out"))));
    clock.advance(Duration::from_secs(60));
    assert_eq!(run.result::<String>().await.unwrap(), "done");
    engine.shutdown().await;
}

/// Steps that always fail (retryably), one with the workflow's defaults and one with its own
/// policy; and one that never returns, under the default attempt timeout.
fn defaults_body(
    calls: (Counter, Counter),
) -> impl Fn(Ctx, ()) -> futures::future::BoxFuture<'static, Result<Vec<String>, WorkflowError>> + Send + Sync + 'static
{
    move |ctx: Ctx, ()| {
        let (default_calls, own_calls) = calls.clone();
        Box::pin(async move {
            let fail = |calls: Counter| {
                move || {
                    let n = calls.hit();
                    async move { Err::<(), _>(StepError::retryable(format!("attempt {n} failed"))) }
                }
            };
            let by_default = ctx.step("by-default", fail(default_calls)).await;
            let own =
                ctx.step("own", fail(own_calls)).retry(RetryPolicy::fixed(Duration::from_millis(1)).attempts(3)).await;
            let stuck = ctx.step("stuck", std::future::pending::<Result<(), StepError>>).await;
            Ok([by_default, own, stuck].into_iter().map(|r| r.unwrap_err().to_string()).collect())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflows_step_defaults_apply_unless_a_step_sets_its_own() {
    let (store, _dir) = sqlite();
    let calls = (Counter::default(), Counter::default());
    let engine = Engine::builder()
        .store(store)
        .register("defaults", 1, defaults_body(calls.clone()))
        .default_retry("defaults", RetryPolicy::fixed(Duration::from_millis(1)).attempts(2))
        .default_step_timeout("defaults", Duration::from_millis(20))
        .start()
        .await
        .unwrap();
    let errors: Vec<String> = engine.client().start("defaults", &()).await.unwrap().result().await.unwrap();
    assert_eq!((calls.0.get(), calls.1.get()), (2, 3), "the default policy's 2 attempts; the step's own 3");
    assert!(errors[0].contains("attempt 2 failed") && errors[1].contains("attempt 3 failed"), "{errors:?}");
    assert!(errors[2].contains("timed out"), "{errors:?}");
    engine.shutdown().await;

    // Defaults for a workflow that is not registered are refused.
    let (store, _dir) = sqlite();
    let refused = Engine::builder().store(store).default_step_timeout("nobody", Duration::from_secs(1)).start().await;
    assert!(matches!(&refused, Err(cairn::EngineError::NotRegistered { name, .. }) if name == "nobody"), "{refused:?}");
}
