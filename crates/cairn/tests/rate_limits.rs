//! Rate limits on SQLite, in virtual time: at most `limit` starts (per key), or executions of a
//! named step, in any window of the period; the rest wait suspended (`waiting_for: rate`) and go
//! on as the window moves, none dropped.

use crate::common::{clock, sqlite, wait_for_status};
use cairn::prelude::*;
use cairn::{Clock, ManualClock, RateLimit, RunFilter, RunStatus, SuspendReason, Timestamp, WaitingFor};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// When each step body began (virtual time), with what it was given.
#[derive(Clone, Default)]
struct Began(Arc<Mutex<Vec<(String, Timestamp)>>>);

impl Began {
    fn push(&self, what: String, at: Timestamp) {
        self.0.lock().unwrap().push((what, at));
    }

    fn of(&self, what: &str) -> Vec<Timestamp> {
        self.0.lock().unwrap().iter().filter(|(w, _)| w == what).map(|(_, at)| *at).collect()
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    async fn wait_for(&self, n: usize) {
        for _ in 0..3_000 {
            if self.count() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("only {} of {n} steps began", self.count());
    }
}

/// No window of `period` holds more than `limit` of `times`.
fn assert_at_most(times: &[Timestamp], limit: usize, period: Duration) {
    let mut times: Vec<i64> = times.iter().map(|t| t.as_millis()).collect();
    times.sort();
    for (i, first) in times.iter().enumerate() {
        let within = times[i..].iter().take_while(|at| **at < first + period.as_millis() as i64).count();
        assert!(within <= limit, "{within} within {period:?} from {first}: {times:?}");
    }
}

async fn held_back(client: &Client, workflow: &str) -> usize {
    let filter = RunFilter { workflow: Some(workflow.into()), limit: Some(100), ..RunFilter::default() };
    let runs = client.list(&filter).await.unwrap().runs;
    for run in runs.iter().filter(|r| r.status == RunStatus::Suspended) {
        assert_eq!(run.suspend_reason, Some(SuspendReason::RateLimited), "{}", run.id);
    }
    runs.iter().filter(|r| r.held_back_by() == Some(WaitingFor::Rate)).count()
}

fn sync(began: Began, clock: ManualClock) -> impl Fn(Ctx, serde_json::Value) -> crate::common::Body<()> + Send + Sync {
    move |ctx, input| {
        let (began, clock) = (began.clone(), clock.clone());
        Box::pin(async move {
            let customer = input["customer"].as_str().unwrap_or_default().to_owned();
            ctx.step("sync", || {
                let (began, clock, customer) = (began.clone(), clock.clone(), customer.clone());
                async move {
                    began.push(customer, clock.now());
                    Ok::<_, StepError>(())
                }
            })
            .await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_per_customer_are_limited_and_delayed_not_dropped() {
    let (store, _dir) = sqlite();
    let clock = clock();
    let began = Began::default();
    let period = Duration::from_secs(60);
    let engine = Engine::builder()
        .store(store)
        .clock(clock.clone())
        .suspend_grace(Duration::ZERO)
        .register("sync", 1, sync(began.clone(), clock.clone()))
        .rate_limit(RateLimit::starts("sync", 3, period).per_key("/customer"))
        .start()
        .await
        .unwrap();
    for i in 0..8 {
        engine.client().start("sync", &serde_json::json!({"customer": "a", "n": i})).id(format!("a{i}")).await.unwrap();
    }
    for i in 0..2 {
        engine.client().start("sync", &serde_json::json!({"customer": "b", "n": i})).id(format!("b{i}")).await.unwrap();
    }
    // Three of a's and both of b's start; a's other five wait for the window to move.
    began.wait_for(5).await;
    for _ in 0..3_000 {
        if held_back(&engine.client(), "sync").await == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(held_back(&engine.client(), "sync").await, 5);
    assert_eq!((began.of("a").len(), began.of("b").len()), (3, 2));
    clock.advance(period);
    began.wait_for(8).await;
    clock.advance(period);
    began.wait_for(10).await;
    for i in 0..8 {
        wait_for_status(&engine.client(), &RunId::new(format!("a{i}")), RunStatus::Completed).await;
    }
    assert_eq!(began.count(), 10, "each run's step ran once");
    assert_at_most(&began.of("a"), 3, period);
    assert_at_most(&began.of("b"), 3, period);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_step_runs_at_most_limit_times_per_period() {
    let (store, _dir) = sqlite();
    let clock = clock();
    let began = Began::default();
    let period = Duration::from_secs(10);
    let crawl = {
        let (began, clock) = (began.clone(), clock.clone());
        move |ctx: Ctx, pages: u32| {
            let (began, clock) = (began.clone(), clock.clone());
            async move {
                let fetched = ctx
                    .each("page", 0..pages, 4, |ctx, page| {
                        let (began, clock) = (began.clone(), clock.clone());
                        async move {
                            ctx.step("fetch", || {
                                let (began, clock) = (began.clone(), clock.clone());
                                async move {
                                    began.push("fetch".into(), clock.now());
                                    Ok::<_, StepError>(page)
                                }
                            })
                            .await
                        }
                    })
                    .await?;
                // Another step of the same run is not limited.
                ctx.step("sum", || async { Ok::<_, StepError>(()) }).await?;
                Ok::<_, WorkflowError>(fetched.into_iter().flatten().count())
            }
        }
    };
    let engine = Engine::builder()
        .store(store)
        .clock(clock.clone())
        .suspend_grace(Duration::ZERO)
        .register("crawl", 1, crawl)
        .rate_limit(RateLimit::step("crawl", "fetch", 2, period))
        .start()
        .await
        .unwrap();
    let run = engine.client().start("crawl", &7u32).await.unwrap();
    began.wait_for(2).await;
    let suspended = wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    assert_eq!(suspended.held_back_by(), Some(WaitingFor::Rate));
    for round in 2..=4 {
        clock.advance(period);
        began.wait_for((2 * round).min(7)).await;
    }
    assert_eq!(run.result::<usize>().await.unwrap(), 7);
    assert_eq!(began.count(), 7);
    assert_at_most(&began.of("fetch"), 2, period);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rate_limits_refuse_to_start() {
    let (store, _dir) = sqlite();
    let body = |_ctx: Ctx, (): ()| async { Ok(()) };
    for (limit, needle) in [
        (RateLimit::starts("w", 0, Duration::from_secs(1)), "at least 1"),
        (RateLimit::starts("w", 1, Duration::ZERO), "millisecond"),
        (RateLimit::step("w", "", 1, Duration::from_secs(1)), "step name"),
        (RateLimit::starts("w", 1, Duration::from_secs(1)).per_key("customer"), "JSON pointer"),
        (RateLimit::starts("other", 1, Duration::from_secs(1)), "not registered"),
    ] {
        let refused = Engine::builder()
            .store(store.clone())
            .register("w", 1, body)
            .rate_limit(limit)
            .start()
            .await
            .err()
            .unwrap();
        assert!(refused.to_string().contains("CAIRN-E0314") && refused.to_string().contains(needle), "{refused}");
    }
}
