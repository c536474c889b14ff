//! A panic in user code never leaves a run `running`: in a step body it is a failed attempt (the
//! retry policy applies), in the workflow body it parks the run with its journal untouched, and
//! fixed code plus `resume` continues it.

use crate::common::{Counter, sqlite};
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::{ControlError, ReadError};
use cairn::{RunStatus, Store};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_step_attempt_is_a_failed_attempt() {
    let (store, _dir) = sqlite();
    let calls = Counter::default();
    let workflow = {
        let calls = calls.clone();
        move |ctx: Ctx, (): ()| {
            let calls = calls.clone();
            async move {
                ctx.step("flaky", || {
                    let calls = calls.clone();
                    async move {
                        if calls.hit() <= 2 {
                            panic!("flaky dependency blew up");
                        }
                        Ok::<_, StepError>(7u8)
                    }
                })
                .retry(RetryPolicy::fixed(Duration::from_millis(1)).attempts(3))
                .await
            }
        }
    };
    let engine = Engine::builder().store(store).register("flaky", 1, workflow).start().await.unwrap();
    let run = engine.client().start("flaky", &()).await.unwrap();
    assert_eq!(run.result::<u8>().await.unwrap(), 7);
    let journal = engine.client().journal(run.id()).await.unwrap();
    let attempts: Vec<(u32, Option<String>)> = journal
        .iter()
        .filter_map(|e| match &e.event {
            Event::StepFailed { attempt, error, started_at, .. } => {
                assert!(started_at.is_some(), "attempts record when they began");
                Some((*attempt, Some(error.clone())))
            }
            Event::StepCompleted { attempt, .. } => Some((*attempt, None)),
            _ => None,
        })
        .collect();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    for (i, (attempt, error)) in attempts.iter().enumerate() {
        assert_eq!(*attempt, i as u32 + 1);
        if i < 2 {
            let error = error.as_deref().unwrap();
            assert!(error.contains("CAIRN-E0107") && error.contains("flaky dependency blew up"), "{error}");
        }
    }
    assert_eq!(calls.get(), 3);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_panics_every_time_exhausts_its_retries() {
    let (store, _dir) = sqlite();
    async fn always(ctx: Ctx, (): ()) -> Result<String, WorkflowError> {
        let outcome = ctx
            .step("boom", || async {
                if std::hint::black_box(true) {
                    panic!("always");
                }
                Ok::<_, StepError>(1u8)
            })
            .retry(RetryPolicy::fixed(Duration::from_millis(1)).attempts(2))
            .await;
        // The body sees an ordinary step failure and may compensate.
        match outcome {
            Err(WorkflowError::StepFailed { attempts, message, .. }) => Ok(format!("{attempts}: {message}")),
            other => Err(WorkflowError::failed(format!("unexpected {other:?}"))),
        }
    }
    let engine = Engine::builder().store(store).register("always", 1, always).start().await.unwrap();
    let run = engine.client().start("always", &()).await.unwrap();
    let text = run.result::<String>().await.unwrap();
    assert!(text.starts_with("2: ") && text.contains("panicked: always"), "{text}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_body_parks_the_run_and_fixed_code_resumes_it() {
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let charged = Counter::default();
    let version = |fixed: bool, charged: Counter| {
        move |ctx: Ctx, amount: u32| {
            let charged = charged.clone();
            async move {
                let receipt: u32 = ctx
                    .step("charge", || {
                        let charged = charged.clone();
                        async move {
                            charged.hit();
                            Ok::<_, StepError>(amount)
                        }
                    })
                    .await?;
                if !fixed {
                    let parsed: Option<u32> = std::hint::black_box(None);
                    parsed.expect("a bug in the body");
                }
                ctx.step("ship", || async move { Ok::<_, StepError>(receipt + 1) }).await
            }
        }
    };
    let buggy = Engine::builder()
        .shared_store(Arc::clone(&store))
        .register("order", 1, version(false, charged.clone()))
        .start()
        .await
        .unwrap();
    let run = buggy.client().start("order", &41u32).await.unwrap();
    match run.result::<u32>().await {
        Err(ReadError::RunDidNotComplete { status: RunStatus::Paused, message, .. }) => {
            assert!(message.contains("CAIRN-E0108") && message.contains("a bug in the body"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let parked = buggy.client().get(run.id()).await.unwrap();
    assert_eq!(parked.status, RunStatus::Paused);
    let journal = buggy.client().journal(run.id()).await.unwrap();
    assert_eq!(journal.len(), 2, "started + charge; parking writes nothing");
    buggy.shutdown().await;

    let fixed = Engine::builder()
        .shared_store(Arc::clone(&store))
        .register("order", 1, version(true, charged.clone()))
        .start()
        .await
        .unwrap();
    fixed.client().resume(run.id()).await.unwrap();
    assert_eq!(fixed.client().result::<u32>(run.id()).await.unwrap(), 42);
    assert_eq!(charged.get(), 1, "the committed step is not executed again");
    let again = fixed.client().resume(run.id()).await;
    assert!(matches!(again, Err(ControlError::RunFinished { .. })), "{again:?}");
    fixed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reclaimed_too_often_without_progress_is_parked_as_poison() {
    use cairn::store::{ClaimRequest, WorkflowKey};
    // Simulates workers that died while executing the run: claims that let the lease expire.
    let (store, _dir) = sqlite();
    let store: Arc<dyn Store> = Arc::new(store);
    let calls = Counter::default();
    let workflow = {
        let calls = calls.clone();
        move |ctx: Ctx, (): ()| {
            let calls = calls.clone();
            async move {
                ctx.step("first", || async { Ok::<_, StepError>(1u8) }).await?;
                ctx.step("crashes", || {
                    let calls = calls.clone();
                    async move {
                        calls.hit();
                        Ok::<_, StepError>(2u8)
                    }
                })
                .await
            }
        }
    };
    let client = Client::from_shared(Arc::clone(&store));
    let run = client.start("poison", &()).id("poison-1").allow_unknown().await.unwrap();
    // Workers claim it and let their leases expire, in the past by the wall clock leases use:
    // the first commits `first`, the next three commit nothing (they "die" in `crashes`).
    let past = cairn::Timestamp::from_system_time(std::time::SystemTime::now()) + Duration::ZERO;
    let past = cairn::Timestamp::from_millis(past.as_millis() - 1_000_000);
    for i in 0..4i64 {
        let at = cairn::Timestamp::from_millis(past.as_millis() + i * 10_000);
        let claim = ClaimRequest {
            owner: format!("doomed-{i}"),
            workflows: vec![WorkflowKey { name: "poison".into(), version: 1 }],
            now: at,
            lease_now: at,
            lease_until: at + Duration::from_secs(1),
            limit: 1,
        };
        let claimed = store.claim(&claim).await.unwrap().remove(0);
        if i == 0 {
            let first = Event::StepCompleted {
                path: cairn::StepPath::parse("first").unwrap(),
                ordinal: 0,
                attempt: 1,
                output: serde_json::value::to_raw_value(&1u8).unwrap(),
                started_at: None,
            };
            let append = cairn::store::Append {
                run_id: claimed.id.clone(),
                epoch: claimed.epoch,
                after_seq: claimed.last_seq,
                events: vec![first],
                at,
                update: cairn::store::RunUpdate::Progress,
                consume_signal: None,
                batched: false,
            };
            store.append(append).await.unwrap();
        }
    }
    assert_eq!(store.get_run(run.id()).await.unwrap().unwrap().recoveries, 3);
    // The engine's claim is the fourth recovery in a row; with a limit of 3 the run is poison.
    let engine = Engine::builder()
        .shared_store(Arc::clone(&store))
        .max_recoveries(3)
        .register("poison", 1, workflow)
        .start()
        .await
        .unwrap();
    let _ = engine.client().result::<u8>(run.id()).await;
    let parked = engine.client().get(run.id()).await.unwrap();
    assert_eq!(parked.status, RunStatus::Paused);
    let error = parked.error.unwrap();
    assert!(error.contains("CAIRN-E0109") && error.contains("`crashes`") && error.contains("4 times"), "{error}");
    assert_eq!(calls.get(), 0, "the step that crashed its workers is not executed again");
    // Resumed (after a fix), it executes normally.
    engine.client().resume(run.id()).await.unwrap();
    assert_eq!(engine.client().result::<u8>(run.id()).await.unwrap(), 2);
    assert_eq!(calls.get(), 1);
    engine.shutdown().await;
}
