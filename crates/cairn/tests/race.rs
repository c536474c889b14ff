//! `ctx.race` of named branches: the first to finish wins, the losers' tokens fire, and the
//! journaled winner is the winner on every replay, whatever the timings are then.

use crate::common::{Counter, clock, engine_of, reopen, sqlite, wait_for_status};
use cairn::RunStatus;
use cairn::journal::Event;
use cairn::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Calls of b/first, b/second, a/work, and how many times b/second saw its token fire.
type Calls = [Counter; 4];

/// `b` (listed first) runs `first`, then `second`, which hangs until `open` is set; `a` naps ten
/// minutes, then runs `work`. After the race the run sleeps a day.
fn pick(calls: Calls, open: Arc<AtomicBool>) -> impl Fn(Ctx, ()) -> crate::common::Body<(String, u32)> + Send + Sync {
    move |ctx: Ctx, ()| {
        let [b1, b2, a, fired] = calls.clone();
        let open = Arc::clone(&open);
        Box::pin(async move {
            let won = ctx
                .race(
                    "pick",
                    vec![
                        ctx.branch("b", |ctx| async move {
                            ctx.step("first", || async { Ok::<_, StepError>(b1.hit() as u32) }).await?;
                            let token = ctx.cancellation_token();
                            ctx.step("second", || {
                                b2.hit();
                                let (open, token, fired) = (open.load(Ordering::SeqCst), token.clone(), fired.clone());
                                async move {
                                    if !open {
                                        // Outlives the step body, which the race drops.
                                        tokio::spawn(async move {
                                            token.cancelled().await;
                                            fired.hit();
                                        });
                                        std::future::pending::<()>().await;
                                    }
                                    Ok::<_, StepError>(2u32)
                                }
                            })
                            .await
                        }),
                        ctx.branch("a", |ctx| async move {
                            ctx.sleep("nap", Duration::from_secs(600)).await?;
                            ctx.step("work", || async { Ok::<_, StepError>(a.hit() as u32 * 10) }).await
                        }),
                    ],
                )
                .await?;
            ctx.sleep("after", Duration::from_secs(86_400)).await?;
            Ok(won)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journaled_winner_wins_again_after_a_restart_though_the_loser_would_now_be_first() {
    let (store, dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let open = Arc::new(AtomicBool::new(false));
    let engine = engine_of(store, &clock, "pick", pick(calls.clone(), Arc::clone(&open))).await;
    let run = engine.client().start("pick", &()).id("race-1").await.unwrap();
    calls[1].wait_for(1).await;
    assert_eq!(calls[1].get(), 1, "b/second is running");
    // `a` wakes and wins; `b/second` is dropped and its token fires.
    clock.advance(Duration::from_secs(600));
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    calls[3].wait_for(1).await;
    assert_eq!(calls.iter().map(Counter::get).collect::<Vec<_>>(), [1, 1, 1, 1], "the loser's token fired");
    engine.shutdown().await;
    let journal = reopen(&dir);
    let journal = cairn::store::JournalStore::read_journal(&journal, run.id()).await.unwrap();
    let winner = journal.iter().find_map(|e| match &e.event {
        Event::StepCompleted { path, output, .. } if path.as_str() == "pick" => Some(output.get().to_owned()),
        _ => None,
    });
    assert_eq!(winner.as_deref(), Some(r#"{"winner":"a"}"#));

    // Now `b` would finish at once, and first: it is listed first and `a` replays its nap.
    open.store(true, Ordering::SeqCst);
    clock.advance(Duration::from_secs(86_400));
    let engine = engine_of(reopen(&dir), &clock, "pick", pick(calls.clone(), Arc::clone(&open))).await;
    let won: (String, u32) = engine.client().result(run.id()).await.unwrap();
    assert_eq!(won, ("a".to_owned(), 10));
    assert_eq!(calls.iter().map(Counter::get).collect::<Vec<_>>(), [1, 1, 1, 1], "no branch ran again");
    let journal = engine.client().journal(run.id()).await.unwrap();
    assert!(!journal.iter().any(|e| e.event.path().is_some_and(|p| p.as_str() == "b/second")));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_branch_that_finishes_first_wins_with_its_error() {
    async fn failing(ctx: Ctx, (): ()) -> Result<(String, u32), WorkflowError> {
        ctx.race(
            "r",
            vec![
                ctx.branch("slow", |ctx| async move {
                    ctx.sleep("nap", Duration::from_secs(60)).await?;
                    Ok(1)
                }),
                ctx.branch("broken", |ctx| async move {
                    ctx.step("boom", || async { Err::<u32, _>(StepError::terminal("no")) }).await
                }),
            ],
        )
        .await
    }
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("failing", 1, failing).start().await.unwrap();
    let run = engine.client().start("failing", &()).await.unwrap();
    let error = run.result::<(String, u32)>().await.unwrap_err().to_string();
    assert!(error.contains("broken/boom") && error.contains("no"), "{error}");
    let journal = engine.client().journal(run.id()).await.unwrap();
    assert!(
        journal.iter().any(|e| matches!(&e.event,
        Event::StepCompleted { path, output, .. } if path.as_str() == "r" && output.get() == r#"{"winner":"broken"}"#))
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_needs_branches_with_distinct_names() {
    async fn empty(ctx: Ctx, (): ()) -> Result<(String, u32), WorkflowError> {
        ctx.race("none", Vec::new()).await
    }
    async fn twins(ctx: Ctx, (): ()) -> Result<(String, u32), WorkflowError> {
        ctx.race("twins", vec![ctx.branch("same", |_| async { Ok(1) }), ctx.branch("same", |_| async { Ok(2) })]).await
    }
    let (store, _dir) = sqlite();
    let engine = Engine::builder()
        .store(store)
        .clock(clock())
        .register("empty", 1, empty)
        .register("twins", 1, twins)
        .start()
        .await
        .unwrap();
    let error =
        engine.client().start("empty", &()).await.unwrap().result::<(String, u32)>().await.unwrap_err().to_string();
    assert!(error.contains("no branches"), "{error}");
    let error =
        engine.client().start("twins", &()).await.unwrap().result::<(String, u32)>().await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0102") && error.contains("same"), "{error}");
    engine.shutdown().await;
}
