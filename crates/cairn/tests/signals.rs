//! Signals are buffered: sent before the wait, during it, or after its timeout.

use crate::common::{clock, sqlite, wait_for_status};
use cairn::SignalError;
use cairn::prelude::*;
use cairn::{RunStatus, SuspendReason};
use serde_json::json;
use std::time::Duration;

async fn approval(ctx: Ctx, user: u64) -> Result<Option<String>, WorkflowError> {
    let verdict: Option<serde_json::Value> = ctx
        .wait_for_event("approve", EventFilter::matching(json!({ "user": user })), Duration::from_secs(3600))
        .await?;
    Ok(verdict.map(|v| v["by"].as_str().unwrap_or_default().to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_sent_before_the_wait_is_kept() {
    let (store, _dir) = sqlite();
    // A detached client delivers the signal before any worker exists.
    let client = Client::new(store.clone());
    let run = client.start("approval", &7u64).id("early").allow_unknown().await.unwrap();
    client.signal(run.id(), "approve", &json!({ "user": 7, "by": "ana" })).await.unwrap();
    client.signal(run.id(), "approve", &json!({ "user": 7, "by": "zed" })).await.unwrap();
    let engine = Engine::builder().store(store).clock(clock()).register("approval", 1, approval).start().await.unwrap();
    assert_eq!(
        engine.client().result::<Option<String>>(run.id()).await.unwrap().as_deref(),
        Some("ana"),
        "the oldest match wins"
    );
    let signals = engine.client().signals(run.id()).await.unwrap();
    let consumed: Vec<bool> = signals.iter().map(|s| s.consumed_seq.is_some()).collect();
    assert_eq!(consumed, vec![true, false]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_during_the_wait_wakes_the_run_and_filters_apply() {
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("approval", 1, approval).start().await.unwrap();
    let run = engine.client().start("approval", &7u64).await.unwrap();
    let waiting = wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    assert_eq!(waiting.suspend_reason, Some(SuspendReason::Waiting));
    // Wrong user and wrong name: both stay buffered, the run keeps waiting.
    engine.client().signal(run.id(), "approve", &json!({ "user": 8, "by": "eve" })).await.unwrap();
    engine.client().signal(run.id(), "reject", &json!({ "user": 7, "by": "eve" })).await.unwrap();
    engine.client().signal(run.id(), "approve", &json!({ "user": 7, "by": "bob" })).await.unwrap();
    assert_eq!(run.result::<Option<String>>().await.unwrap().as_deref(), Some("bob"));
    let signals = engine.client().signals(run.id()).await.unwrap();
    let consumed: Vec<bool> = signals.iter().map(|s| s.consumed_seq.is_some()).collect();
    assert_eq!(consumed, vec![false, false, true]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_after_the_timeout_stays_buffered_and_visible() {
    let (store, _dir) = sqlite();
    let clock = clock();
    let engine =
        Engine::builder().store(store).clock(clock.clone()).register("approval", 1, approval).start().await.unwrap();
    let run = engine.client().start("approval", &7u64).await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    clock.advance(Duration::from_secs(3600));
    assert_eq!(run.result::<Option<String>>().await.unwrap(), None, "timed out");
    let late = engine.client().signal(run.id(), "approve", &json!({ "user": 7, "by": "late" })).await;
    assert!(matches!(late, Err(SignalError::RunFinished { .. })), "{late:?}");

    // A run that times out one wait and goes on still buffers signals for later waits.
    async fn twice(ctx: Ctx, (): ()) -> Result<(bool, Option<u8>), WorkflowError> {
        let first: Option<u8> = ctx.wait_for_event("first", EventFilter::any(), Duration::from_secs(10)).await?;
        ctx.sleep("pause", Duration::from_secs(100)).await?;
        let second: Option<u8> = ctx.wait_for_event("second", EventFilter::any(), Duration::from_secs(10)).await?;
        Ok((first.is_none(), second))
    }
    engine.shutdown().await;
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock.clone()).register("twice", 1, twice).start().await.unwrap();
    let run = engine.client().start("twice", &()).await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    clock.advance(Duration::from_secs(10));
    let sleeping = loop {
        let r = engine.client().get(run.id()).await.unwrap();
        if r.suspend_reason == Some(SuspendReason::Sleeping) {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(sleeping.status, RunStatus::Suspended);
    // "first" arrives after its wait timed out: kept, visible, unconsumed.
    engine.client().signal(run.id(), "first", &1u8).await.unwrap();
    engine.client().signal(run.id(), "second", &2u8).await.unwrap();
    let buffered = engine.client().signals(run.id()).await.unwrap();
    assert_eq!(buffered.len(), 2);
    assert!(buffered.iter().all(|s| s.consumed_seq.is_none()));
    clock.advance(Duration::from_secs(100));
    assert_eq!(run.result::<(bool, Option<u8>)>().await.unwrap(), (true, Some(2)));
    let after = engine.client().signals(run.id()).await.unwrap();
    assert_eq!(
        after.iter().map(|s| (s.name.as_str(), s.consumed_seq.is_some())).collect::<Vec<_>>(),
        vec![("first", false), ("second", true)]
    );
    engine.shutdown().await;
}

/// Two waits for the same signal in one scope, as steps of their own names: each consumes one
/// signal, in order, and a restart between them keeps the first one's payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_scope_waits_for_the_same_signal_twice() {
    async fn two_approvals(ctx: Ctx, (): ()) -> Result<(String, String), WorkflowError> {
        let day = Duration::from_secs(86_400);
        let first: Option<String> = ctx.wait_for_event_as("first-approval", "approve", EventFilter::any(), day).await?;
        let second: Option<String> =
            ctx.wait_for_event_as("second-approval", "approve", EventFilter::any(), day).await?;
        Ok((first.unwrap_or_default(), second.unwrap_or_default()))
    }
    let (store, dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("two", 1, two_approvals).start().await.unwrap();
    let run = engine.client().start("two", &()).id("twice").await.unwrap();
    engine.client().signal(run.id(), "approve", &"ana").await.unwrap();
    // Waiting for the second approval (the first consumed the one signal so far).
    let journal = loop {
        let journal = engine.client().journal(run.id()).await.unwrap();
        if journal.iter().any(|e| e.event.path().is_some_and(|p| p.as_str() == "second-approval")) {
            break journal;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(journal.iter().any(
        |e| matches!(&e.event, cairn::journal::Event::WaitCompleted { path, .. } if path.as_str() == "first-approval")
    ));
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    engine.shutdown().await;

    let store = cairn::SqliteStore::open(dir.path().join("cairn.db")).unwrap();
    let engine = Engine::builder().store(store).clock(clock()).register("two", 1, two_approvals).start().await.unwrap();
    engine.client().signal(run.id(), "approve", &"bo").await.unwrap();
    let (first, second): (String, String) = engine.client().result(run.id()).await.unwrap();
    assert_eq!((first.as_str(), second.as_str()), ("ana", "bo"));
    let consumed: Vec<Option<u64>> =
        engine.client().signals(run.id()).await.unwrap().iter().map(|s| s.consumed_seq).collect();
    assert!(consumed.iter().all(Option::is_some) && consumed.len() == 2, "{consumed:?}");
    engine.shutdown().await;
}
