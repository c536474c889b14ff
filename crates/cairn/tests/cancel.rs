//! Cancellation is durable: of a sleeping run, and of a run inside a long step.

use crate::common::{Counter, clock, sqlite, wait_for_status};
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::{CancelOutcome, ControlError, ReadError, RunStatus};
use cairn_store::RunStore;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_a_sleeping_run() {
    let (store, _dir) = sqlite();
    let after = Counter::default();
    let wf = {
        let after = after.clone();
        move |ctx: Ctx, ()| {
            let after = after.clone();
            async move {
                ctx.sleep("long", Duration::from_secs(86_400)).await?;
                ctx.step("after", || async {
                    after.hit();
                    Ok::<_, StepError>(())
                })
                .await
            }
        }
    };
    let clock = clock();
    let engine = Engine::builder().store(store).clock(clock.clone()).register("sleepy", 1, wf).start().await.unwrap();
    let run = engine.client().start("sleepy", &()).await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    assert_eq!(engine.client().cancel(run.id()).await.unwrap(), CancelOutcome::Cancelled);
    let result = run.result::<()>().await;
    assert!(matches!(result, Err(ReadError::RunDidNotComplete { status: RunStatus::Cancelled, .. })), "{result:?}");
    clock.advance(Duration::from_secs(86_400));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(after.get(), 0, "a cancelled run never runs again");
    assert_eq!(engine.client().get(run.id()).await.unwrap().status, RunStatus::Cancelled);
    assert!(matches!(engine.client().cancel(run.id()).await, Err(ControlError::RunFinished { .. })));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_a_run_inside_a_long_step() {
    let (store, _dir) = sqlite();
    let saw_cancel = Counter::default();
    let started = Counter::default();
    let wf = {
        let saw_cancel = saw_cancel.clone();
        let started = started.clone();
        move |ctx: Ctx, ()| {
            let saw_cancel = saw_cancel.clone();
            let started = started.clone();
            async move {
                let token = ctx.cancellation_token();
                ctx.step("long", || {
                    let token = token.clone();
                    let saw_cancel = saw_cancel.clone();
                    let started = started.clone();
                    async move {
                        started.hit();
                        // Step code that watches its token; its late result must be discarded.
                        let watcher = tokio::spawn(async move {
                            token.cancelled().await;
                            saw_cancel.hit();
                        });
                        let _ = watcher.await;
                        Ok::<_, StepError>("finished anyway".to_owned())
                    }
                })
                .await
            }
        }
    };
    let engine = Engine::builder().store(store).clock(clock()).register("long", 1, wf).start().await.unwrap();
    let run = engine.client().start("long", &()).await.unwrap();
    while started.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cancelled = engine.client().cancel(run.id()).because("the customer called it off").await;
    assert_eq!(cancelled.unwrap(), CancelOutcome::Requested);
    let result = run.result::<String>().await;
    assert!(matches!(result, Err(ReadError::RunDidNotComplete { status: RunStatus::Cancelled, .. })), "{result:?}");
    while saw_cancel.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let journal = engine.client().journal(run.id()).await.unwrap();
    assert!(!journal.iter().any(|e| matches!(e.event, Event::StepCompleted { .. })), "late result discarded");
    // The reason given, kept while the worker stopped the run, is the one it journaled.
    let reason = "the customer called it off".to_owned();
    assert!(matches!(&journal.last().unwrap().event, Event::Cancelled { reason: r } if *r == reason), "{journal:?}");
    assert_eq!(engine.client().get(run.id()).await.unwrap().error, Some(reason));
    cairn::journal::RunState::fold(&journal).unwrap();
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_from_another_process_reaches_the_worker_through_its_heartbeat() {
    let (store, _dir) = sqlite();
    let started = Counter::default();
    let wf = {
        let started = started.clone();
        move |ctx: Ctx, ()| {
            let started = started.clone();
            async move {
                ctx.step("forever", || async {
                    started.hit();
                    std::future::pending::<()>().await;
                    Ok::<_, StepError>(())
                })
                .await
            }
        }
    };
    let engine = Engine::builder()
        .store(store.clone())
        .lease_duration(Duration::from_millis(300))
        .register("forever", 1, wf)
        .start()
        .await
        .unwrap();
    let run = engine.client().start("forever", &()).await.unwrap();
    while started.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A detached client (as the CLI is) only flags the run; the worker's heartbeat does the rest.
    let outside = Client::new(store);
    assert_eq!(outside.cancel(run.id()).because("from the CLI").await.unwrap(), CancelOutcome::Requested);
    wait_for_status(&outside, run.id(), RunStatus::Cancelled).await;
    let journal = outside.journal(run.id()).await.unwrap();
    assert!(matches!(&journal.last().unwrap().event, Event::Cancelled { reason } if reason == "from the CLI"));
    // A reason that breaks its rule is refused.
    let refused = outside.cancel(run.id()).because("").await;
    assert!(matches!(refused, Err(ControlError::InvalidName(_))), "{refused:?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_flagged_on_a_vanished_worker_is_finished_by_the_next() {
    use cairn::store::{ClaimRequest, ControlRequest, NewRun, WorkflowKey};
    let (store, _dir) = sqlite();
    let wall = || cairn::Timestamp::from_system_time(std::time::SystemTime::now());
    store
        .create_run(NewRun::new(
            cairn::RunId::new("orphan"),
            cairn::WorkflowName::new("forever").expect("a valid name"),
            1,
            serde_json::value::to_raw_value(&()).unwrap(),
            wall(),
        ))
        .await
        .unwrap();
    // A worker that claims the run for 300 ms and then disappears without a trace.
    let claimed = store
        .claim(&ClaimRequest {
            owner: "ghost".into(),
            workflows: vec![WorkflowKey { name: "forever".into(), version: 1 }],
            now: wall(),
            lease_now: wall(),
            lease_until: wall() + Duration::from_millis(300),
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let flagged = store
        .cancel(ControlRequest {
            run_id: cairn::RunId::new("orphan"),
            reason: "stop".into(),
            at: wall(),
            lease_now: wall(),
        })
        .await
        .unwrap();
    assert_eq!(flagged, CancelOutcome::Requested);

    let ran = Counter::default();
    let wf = {
        let ran = ran.clone();
        move |ctx: Ctx, ()| {
            let ran = ran.clone();
            async move {
                ctx.step("work", || async {
                    ran.hit();
                    Ok::<_, StepError>(())
                })
                .await
            }
        }
    };
    let engine = Engine::builder()
        .store(store)
        .poll_interval(Duration::from_millis(50))
        .register("forever", 1, wf)
        .start()
        .await
        .unwrap();
    wait_for_status(&engine.client(), &cairn::RunId::new("orphan"), RunStatus::Cancelled).await;
    assert_eq!(ran.get(), 0, "the body of a cancelled run does not run");
    let journal = engine.client().journal(&cairn::RunId::new("orphan")).await.unwrap();
    assert!(matches!(&journal.last().unwrap().event, Event::Cancelled { reason } if reason == "stop"), "{journal:?}");
    engine.shutdown().await;
}
