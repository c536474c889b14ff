//! Bad input gets a typed error and stores nothing that could corrupt a run.

use crate::common::sqlite;
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::{DEFAULT_MAX_PAYLOAD_BYTES, ReadError, RunFilter, RunStatus, SignalError, StartError};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Order {
    sku: String,
    quantity: u32,
}

async fn order(ctx: Ctx, order: Order) -> Result<u32, WorkflowError> {
    ctx.step("count", || async { Ok::<_, StepError>(order.quantity) }).await
}

async fn big(ctx: Ctx, size: usize) -> Result<usize, WorkflowError> {
    let blob: String = ctx.step("blob", || async move { Ok::<_, StepError>("x".repeat(size)) }).await?;
    Ok(blob.len())
}

async fn run_count(client: &Client) -> usize {
    client.list(&RunFilter::default()).await.unwrap().runs.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_starts_are_refused_and_store_nothing() {
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).register("order", 1, order).start().await.unwrap();

    let unknown = engine.client().start("no-such-workflow", &1).await;
    assert!(matches!(unknown, Err(StartError::UnknownWorkflow(ref name)) if name == "no-such-workflow"), "{unknown:?}");
    let version = engine.client().start("order", &Order { sku: "a".into(), quantity: 1 }).version(9).await;
    assert!(matches!(version, Err(StartError::UnknownVersion { version: 9, .. })), "{version:?}");
    let undecodable = engine.client().start("order", &serde_json::json!({ "sku": 5 })).await;
    assert!(matches!(undecodable, Err(StartError::InvalidPayload(_))), "{undecodable:?}");
    let bad_id = engine.client().start("order", &Order { sku: "a".into(), quantity: 1 }).id("a/b").await;
    assert!(matches!(bad_id, Err(StartError::InvalidPayload(_))), "{bad_id:?}");
    assert_eq!(run_count(&engine.client()).await, 0);

    let first = engine.client().start("order", &Order { sku: "a".into(), quantity: 2 }).id("order-1").await.unwrap();
    assert_eq!(first.result::<u32>().await.unwrap(), 2);
    let duplicate = engine.client().start("order", &Order { sku: "b".into(), quantity: 3 }).id("order-1").await;
    assert!(matches!(duplicate, Err(StartError::DuplicateRunId(_))), "{duplicate:?}");
    let kept = engine.client().get(first.id()).await.unwrap();
    assert_eq!(kept.input.get(), r#"{"sku":"a","quantity":2}"#);

    let late = engine.client().signal(first.id(), "anything", &1).await;
    assert!(matches!(late, Err(SignalError::RunFinished { status: RunStatus::Completed, .. })), "{late:?}");
    assert!(engine.client().signals(first.id()).await.unwrap().is_empty());
    let missing = engine.client().signal(&RunId::new("ghost"), "x", &1).await;
    assert!(matches!(missing, Err(SignalError::RunNotFound(_))), "{missing:?}");
    assert_eq!(run_count(&engine.client()).await, 1);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_payloads_are_refused() {
    assert_eq!(DEFAULT_MAX_PAYLOAD_BYTES, 4 * 1024 * 1024);
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).max_payload_bytes(1024).register("big", 1, big).start().await.unwrap();

    let input = engine.client().start("big", &"y".repeat(2048)).await;
    assert!(matches!(input, Err(StartError::PayloadTooLarge { limit: 1024, .. })), "{input:?}");
    assert_eq!(run_count(&engine.client()).await, 0);

    let small = engine.client().start("big", &10usize).await.unwrap();
    assert_eq!(small.result::<usize>().await.unwrap(), 10);
    let huge = engine.client().start("big", &5000usize).await.unwrap();
    match huge.result::<usize>().await {
        Err(ReadError::RunDidNotComplete { status: RunStatus::Failed, message, .. }) => {
            assert!(message.contains("CAIRN-E0105") && message.contains("blob"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let journal = engine.client().journal(huge.id()).await.unwrap();
    assert!(
        !journal.iter().any(|e| matches!(e.event, Event::StepCompleted { .. })),
        "the oversized output was not stored"
    );
    cairn::journal::RunState::fold(&journal).unwrap();

    let signal = engine.client().signal(huge.id(), "x", &"z".repeat(2048)).await;
    assert!(matches!(signal, Err(SignalError::PayloadTooLarge { .. }) | Err(SignalError::RunFinished { .. })));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_limit_is_four_mebibytes() {
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).register("big", 1, big).start().await.unwrap();
    // A string of n bytes is n + 2 bytes of JSON.
    let fits = engine.client().start("big", &(DEFAULT_MAX_PAYLOAD_BYTES - 2)).await.unwrap();
    assert_eq!(fits.result::<usize>().await.unwrap(), DEFAULT_MAX_PAYLOAD_BYTES - 2);
    let over = engine.client().start("big", &(DEFAULT_MAX_PAYLOAD_BYTES - 1)).await.unwrap();
    match over.result::<usize>().await {
        Err(ReadError::RunDidNotComplete { status: RunStatus::Failed, message, .. }) => {
            assert!(message.contains("CAIRN-E0105") && message.contains("4194305"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let journal = engine.client().journal(over.id()).await.unwrap();
    assert!(!journal.iter().any(|e| matches!(e.event, Event::StepCompleted { .. })));
    engine.shutdown().await;
}

/// Names and keys keep the same rules from every client: a key with a NUL or 3,000 characters, a
/// workflow or event name with a control character, are refused with `InvalidName` before
/// anything is stored (PostgreSQL answered 500 for such keys when they reached it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_keys_that_break_their_rules_are_refused_and_store_nothing() {
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).register("order", 1, order).start().await.unwrap();
    let client = engine.client();
    let input = Order { sku: "a".into(), quantity: 1 };
    for key in ["a\0b".to_owned(), "k".repeat(3_000), String::new()] {
        let refused = client.start("order", &input).idempotency_key(key.clone()).await.unwrap_err();
        assert!(matches!(&refused, StartError::InvalidName(error) if error.what == "idempotency key"), "{refused:?}");
        assert_eq!(refused.name(), "invalid_idempotency_key");
        assert_eq!(refused.code(), Some("CAIRN-E0316"));
    }
    // A client without an engine (it knows no workflows) checks the name itself.
    let detached = Client::from_shared(client.store().clone());
    let refused = detached.start("bad\nname", &1).await.unwrap_err();
    assert!(matches!(&refused, StartError::InvalidName(error) if error.what == "workflow name"), "{refused:?}");
    assert_eq!(run_count(&client).await, 0, "nothing was stored");
    let run = client.start("order", &input).await.unwrap();
    let refused = client.signal(run.id(), "", &1).await.unwrap_err();
    assert!(matches!(&refused, SignalError::InvalidName(error) if error.what == "event name"), "{refused:?}");
    assert!(client.signals(run.id()).await.unwrap().is_empty(), "no signal was stored");
    engine.shutdown().await;
}
