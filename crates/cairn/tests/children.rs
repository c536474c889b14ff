//! Child workflows: a parent starts a child (deterministic id, `parent` link), waits for it while
//! suspended, gets its output or its failure; cancelling the parent cancels the children it
//! waits for, not detached ones; a restart in the middle runs nothing twice.

use crate::common::{Counter, clock, sqlite, wait_for_status};
use cairn::prelude::*;
use cairn::{RunStatus, SqliteStore};
use std::sync::Arc;
use std::time::Duration;

/// Calls of: the parent's `prepare`, the child's `before`, the child's `after`.
type Calls = Arc<[Counter; 3]>;

fn parent(calls: Calls) -> impl Fn(Ctx, u64) -> crate::common::Body<String> + Send + Sync {
    move |ctx: Ctx, n: u64| {
        let calls = Arc::clone(&calls);
        Box::pin(async move {
            ctx.step("prepare", || async { Ok::<_, StepError>(calls[0].hit()) }).await?;
            let doubled: u64 = ctx.child("double", &n).await?;
            Ok(format!("{n} doubled is {doubled}"))
        })
    }
}

/// Doubles its input after a 30-second sleep (shorter than the parent's first look again, so
/// the parent must be woken by the child's end); fails for 13.
fn double(calls: Calls) -> impl Fn(Ctx, u64) -> crate::common::Body<u64> + Send + Sync {
    move |ctx: Ctx, n: u64| {
        let calls = Arc::clone(&calls);
        Box::pin(async move {
            ctx.step("before", || async { Ok::<_, StepError>(calls[1].hit()) }).await?;
            ctx.sleep("nap", Duration::from_secs(30)).await?;
            ctx.step("after", || {
                calls[2].hit();
                async move { if n == 13 { Err(StepError::terminal("unlucky")) } else { Ok(n * 2) } }
            })
            .await
        })
    }
}

async fn engine(store: SqliteStore, clock: &cairn::ManualClock, calls: &Calls) -> Engine {
    Engine::builder()
        .store(store)
        .clock(clock.clone())
        .register("parent", 1, parent(Arc::clone(calls)))
        .register("double", 1, double(Arc::clone(calls)))
        .start()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_waits_for_its_child_across_a_restart() {
    let (store, dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let first = engine(store, &clock, &calls).await;
    let run = first.client().start("parent", &21u64).id("p-1").await.unwrap();
    wait_for_status(&first.client(), run.id(), RunStatus::Suspended).await;
    let children = first.client().children(run.id()).await.unwrap();
    assert_eq!(children.len(), 1);
    let child = children[0].id.clone();
    assert_eq!(child.as_str(), "p-1:~child[0]", "derived from the parent and the call's path");
    wait_for_status(&first.client(), &child, RunStatus::Suspended).await;
    assert_eq!(first.client().get(&child).await.unwrap().rare().parent.as_ref(), Some(run.id()));
    first.shutdown().await;

    clock.advance(Duration::from_secs(30));
    let second = engine(SqliteStore::open(dir.path().join("cairn.db")).unwrap(), &clock, &calls).await;
    let text: String = second.client().result(run.id()).await.unwrap();
    assert_eq!(text, "21 doubled is 42");
    assert_eq!(calls.iter().map(Counter::get).collect::<Vec<_>>(), [1, 1, 1], "nothing ran twice");
    assert_eq!(second.client().children(run.id()).await.unwrap().len(), 1, "one child, not two");
    let woken = second.client().journal(run.id()).await.unwrap().iter().any(|e| {
        matches!(&e.event, cairn::journal::Event::WaitCompleted { path, signal: Some(_), .. } if path.as_str() == "~child[0]/ended[0]")
    });
    assert!(woken, "the child's end woke the parent");
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_child_fails_its_parents_wait() {
    let (store, _dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let engine = engine(store, &clock, &calls).await;
    let run = engine.client().start("parent", &13u64).await.unwrap();
    let child = loop {
        if let Some(child) = engine.client().children(run.id()).await.unwrap().pop() {
            break child.id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    wait_for_status(&engine.client(), &child, RunStatus::Suspended).await;
    clock.advance(Duration::from_secs(30));
    let error = run.result::<String>().await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0115") && error.contains("failed") && error.contains("unlucky"), "{error}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_parent_cancels_the_children_it_waits_for_but_not_detached_ones() {
    async fn both(ctx: Ctx, (): ()) -> Result<u64, WorkflowError> {
        let detached = ctx.child::<_, u64>("double", &1u64).detached().await?;
        let noted = detached.to_string();
        ctx.step("noted", || {
            let noted = noted.clone();
            async move { Ok::<_, StepError>(noted) }
        })
        .await?;
        ctx.child("double", &2u64).await
    }
    let (store, _dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let engine = Engine::builder()
        .store(store)
        .clock(clock.clone())
        .register("both", 1, both)
        .register("double", 1, double(Arc::clone(&calls)))
        .start()
        .await
        .unwrap();
    let run = engine.client().start("both", &()).id("b-1").await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    let (spawned, awaited) = (cairn::RunId::new("b-1:~spawn[0]"), cairn::RunId::new("b-1:~child[0]"));
    wait_for_status(&engine.client(), &spawned, RunStatus::Suspended).await;
    wait_for_status(&engine.client(), &awaited, RunStatus::Suspended).await;
    engine.client().cancel(run.id()).await.unwrap();
    assert_eq!(engine.client().get(run.id()).await.unwrap().status, RunStatus::Cancelled);
    assert_eq!(engine.client().get(&awaited).await.unwrap().status, RunStatus::Cancelled);
    assert_eq!(engine.client().get(&spawned).await.unwrap().status, RunStatus::Suspended, "detached: left alone");
    assert!(
        engine.client().children(run.id()).await.unwrap().iter().all(|c| c.rare().parent.as_ref() == Some(run.id()))
    );
    engine.shutdown().await;
}
