//! `ctx.each`: every item in its own scope `name[i]`, at most `concurrency` in flight, results
//! and errors in input order, and items done before a restart not run again.

use crate::common::{Counter, clock, engine_of, reopen, sqlite, wait_for_status};
use cairn::RunStatus;
use cairn::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const ITEMS: usize = 6;

/// Calls of `work` per item, and of item 3's `more`.
type Calls = (Arc<[Counter; ITEMS]>, Counter);

/// Each item runs `work` (item 4 fails for good); item 3 then sleeps an hour and runs `more`.
fn items(calls: Calls) -> impl Fn(Ctx, Vec<u32>) -> crate::common::Body<Vec<Result<u32, String>>> + Send + Sync {
    move |ctx: Ctx, input: Vec<u32>| {
        let calls = calls.clone();
        Box::pin(async move {
            let results = ctx
                .each("item", input, 2, |ctx, n| {
                    let calls = calls.clone();
                    async move {
                        let work = ctx
                            .step("work", || {
                                calls.0[n as usize].hit();
                                async move {
                                    if n == 4 { Err(StepError::terminal("four is broken")) } else { Ok(n * 10) }
                                }
                            })
                            .await?;
                        if n != 3 {
                            return Ok(work);
                        }
                        ctx.sleep("nap", Duration::from_secs(3600)).await?;
                        ctx.step("more", || async { Ok::<_, StepError>(work + calls.1.hit() as u32) }).await
                    }
                })
                .await?;
            Ok(results.into_iter().map(|r| r.map_err(|e| e.to_string())).collect())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_resume_after_a_restart_in_input_order_without_running_again() {
    let (store, dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let engine = engine_of(store, &clock, "items", items(calls.clone())).await;
    let run = engine.client().start("items", &(0..ITEMS as u32).collect::<Vec<_>>()).id("each-1").await.unwrap();
    // Item 3 sleeps in one slot; the other slot carries every other item.
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    engine.shutdown().await;
    let counts = || calls.0.iter().map(Counter::get).collect::<Vec<_>>();
    assert_eq!((counts(), calls.1.get()), (vec![1; ITEMS], 0));

    clock.advance(Duration::from_secs(3600));
    let engine = engine_of(reopen(&dir), &clock, "items", items(calls.clone())).await;
    let results: Vec<Result<u32, String>> = engine.client().result(run.id()).await.unwrap();
    assert_eq!((counts(), calls.1.get()), (vec![1; ITEMS], 1), "no item ran twice");
    assert_eq!(results[..4], [Ok(0), Ok(10), Ok(20), Ok(31)]);
    assert!(results[4].as_ref().unwrap_err().contains("four is broken"), "{results:?}");
    assert_eq!(results[5], Ok(50));
    let journal = engine.client().journal(run.id()).await.unwrap();
    let paths: Vec<String> = journal.iter().filter_map(|e| e.event.path().map(|p| p.to_string())).collect();
    for path in ["item[0]/work", "item[3]/nap", "item[3]/more", "item[5]/work"] {
        assert!(paths.iter().any(|p| p == path), "{path} in {paths:?}");
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_concurrency_items_are_in_flight() {
    const CONCURRENCY: usize = 3;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    // Every step waits until CONCURRENCY of them run at once: fewer slots would never finish.
    let barrier = Arc::new(tokio::sync::Barrier::new(CONCURRENCY));
    let (in_flight2, most2) = (Arc::clone(&in_flight), Arc::clone(&most));
    let body = move |ctx: Ctx, n: usize| -> crate::common::Body<usize> {
        let (in_flight, most, barrier) = (Arc::clone(&in_flight2), Arc::clone(&most2), Arc::clone(&barrier));
        Box::pin(async move {
            let results = ctx
                .each("slot", 0..n, CONCURRENCY, |ctx, i| {
                    let (in_flight, most, barrier) = (Arc::clone(&in_flight), Arc::clone(&most), Arc::clone(&barrier));
                    async move {
                        ctx.step("hold", || {
                            let (in_flight, most, barrier) = (in_flight.clone(), most.clone(), barrier.clone());
                            async move {
                                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                                most.fetch_max(now, Ordering::SeqCst);
                                barrier.wait().await;
                                in_flight.fetch_sub(1, Ordering::SeqCst);
                                Ok::<_, StepError>(i)
                            }
                        })
                        .await
                    }
                })
                .await?;
            Ok(results.into_iter().map(|r| r.unwrap_or(0)).sum())
        })
    };
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("slots", 1, body).start().await.unwrap();
    let sum: usize = engine.client().start("slots", &12usize).await.unwrap().result().await.unwrap();
    assert_eq!(sum, (0..12).sum::<usize>());
    assert_eq!(most.load(Ordering::SeqCst), CONCURRENCY);
    assert_eq!(in_flight.load(Ordering::SeqCst), 0);
    engine.shutdown().await;
}
