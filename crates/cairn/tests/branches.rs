//! `ctx.join` of named branches: each in its own scope (same step names in two branches are no
//! conflict), outputs in order, failures collected by branch name, resumed after a restart
//! without running completed work again.

use crate::common::{Counter, clock, engine_of, reopen, sqlite, wait_for_status};
use cairn::RunStatus;
use cairn::prelude::*;
use std::time::Duration;

/// Calls of each step body: a/one, a/two, b/one, b/two.
type Calls = [Counter; 4];

/// Two branches with the same step names; `a` sleeps an hour between its steps.
fn two_branches(calls: Calls) -> impl Fn(Ctx, ()) -> crate::common::Body<Vec<u32>> + Send + Sync + 'static {
    move |ctx: Ctx, ()| {
        let [a1, a2, b1, b2] = calls.clone();
        Box::pin(async move {
            ctx.join(vec![
                ctx.branch("a", |ctx| async move {
                    let one = ctx.step("one", || async { Ok::<_, StepError>(a1.hit() as u32) }).await?;
                    ctx.sleep("nap", Duration::from_secs(3600)).await?;
                    let two = ctx.step("two", || async { Ok::<_, StepError>(a2.hit() as u32 * 10) }).await?;
                    Ok(one + two)
                }),
                ctx.branch("b", |ctx| async move {
                    let one = ctx.step("one", || async { Ok::<_, StepError>(b1.hit() as u32 * 100) }).await?;
                    let two = ctx.step("two", || async { Ok::<_, StepError>(b2.hit() as u32 * 1000) }).await?;
                    Ok(one + two)
                }),
            ])
            .await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branches_run_in_their_own_scopes_and_resume_after_a_restart() {
    let (store, dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let engine = engine_of(store, &clock, "two", two_branches(calls.clone())).await;
    let run = engine.client().start("two", &()).id("j-1").await.unwrap();
    // `b` is done and `a` sleeps: the run suspends.
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    engine.shutdown().await;
    assert_eq!(calls.iter().map(Counter::get).collect::<Vec<_>>(), [1, 0, 1, 1]);

    clock.advance(Duration::from_secs(3600));
    let store = reopen(&dir);
    let engine = engine_of(store, &clock, "two", two_branches(calls.clone())).await;
    let outputs: Vec<u32> = engine.client().result(run.id()).await.unwrap();
    assert_eq!(outputs, [1 + 10, 100 + 1000], "in the order given");
    assert_eq!(calls.iter().map(Counter::get).collect::<Vec<_>>(), [1, 1, 1, 1], "nothing ran twice");
    let journal = engine.client().journal(run.id()).await.unwrap();
    let paths: Vec<String> = journal.iter().filter_map(|e| e.event.path().map(|p| p.to_string())).collect();
    for path in ["a/one", "a/nap", "a/two", "b/one", "b/two"] {
        assert!(paths.iter().any(|p| p == path), "{path} in {paths:?}");
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_branches_are_named_and_the_others_finish() {
    async fn three(ctx: Ctx, (): ()) -> Result<Vec<u32>, WorkflowError> {
        let fail = |why: &'static str| move || async move { Err::<u32, _>(StepError::terminal(why)) };
        ctx.join(vec![
            ctx.branch("card", |ctx| async move { ctx.step("charge", fail("card declined")).await }),
            ctx.branch("stock", |ctx| async move { ctx.step("reserve", || async { Ok::<_, StepError>(7) }).await }),
            ctx.branch("mail", |ctx| async move { ctx.step("send", fail("no such address")).await }),
        ])
        .await
    }
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("three", 1, three).start().await.unwrap();
    let run = engine.client().start("three", &()).await.unwrap();
    let error = run.result::<Vec<u32>>().await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0111") && error.contains("2 branch(es) failed"), "{error}");
    assert!(error.contains("`card`:") && error.contains("card declined"), "{error}");
    assert!(error.contains("`mail`:") && error.contains("no such address") && !error.contains("`stock`"), "{error}");
    let journal = engine.client().journal(run.id()).await.unwrap();
    assert!(
        journal.iter().any(|e| e.event.path().is_some_and(|p| p.as_str() == "stock/reserve")),
        "the branch that succeeded ran to its end"
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_branches_may_not_share_a_name() {
    async fn twins(ctx: Ctx, (): ()) -> Result<Vec<u32>, WorkflowError> {
        ctx.join(vec![ctx.branch("same", |_| async { Ok(1) }), ctx.branch("same", |_| async { Ok(2) })]).await
    }
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("twins", 1, twins).start().await.unwrap();
    let error = engine.client().start("twins", &()).await.unwrap().result::<Vec<u32>>().await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0102") && error.contains("same"), "{error}");
    engine.shutdown().await;
}
