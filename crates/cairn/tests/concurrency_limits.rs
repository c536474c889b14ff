//! Concurrency limits on SQLite, with two workers sharing one file: at most `limit` runs per key
//! are inside their step at any instant, the others wait (`waiting_for: concurrency`) and start
//! in order as slots free up; a sleeping run gives its slot up (virtual time) and waits for one
//! again when it wakes.

use crate::common::{Body, Counter, clock, reopen, sqlite, wait_for_status};
use cairn::prelude::*;
use cairn::{ConcurrencyRule, RunFilter, RunStatus, WaitingFor};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Per customer: how many runs are inside their step now, and the most there ever were.
#[derive(Clone, Default)]
struct Inside(Arc<Mutex<HashMap<String, (usize, usize)>>>);

impl Inside {
    fn enter(&self, key: &str) {
        let mut map = self.0.lock().unwrap();
        let entry = map.entry(key.to_owned()).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max(entry.0);
    }
    fn leave(&self, key: &str) {
        self.0.lock().unwrap().entry(key.to_owned()).or_default().0 -= 1;
    }
    fn most(&self, key: &str) -> usize {
        self.0.lock().unwrap().get(key).map_or(0, |e| e.1)
    }
}

fn charge(
    inside: Inside,
    gate: Arc<tokio::sync::Semaphore>,
    entered: Counter,
    left: Counter,
) -> impl Fn(Ctx, serde_json::Value) -> Body<()> + Send + Sync + 'static {
    move |ctx, input| {
        let (inside, gate, entered, left) = (inside.clone(), Arc::clone(&gate), entered.clone(), left.clone());
        Box::pin(async move {
            let customer = input["customer"].as_str().unwrap_or_default().to_owned();
            ctx.step("charge", || {
                let (inside, gate, entered, left) = (inside.clone(), Arc::clone(&gate), entered.clone(), left.clone());
                let customer = customer.clone();
                async move {
                    inside.enter(&customer);
                    entered.hit();
                    let permit = gate.acquire().await.map_err(StepError::terminal)?;
                    permit.forget();
                    inside.leave(&customer);
                    left.hit();
                    Ok::<_, StepError>(())
                }
            })
            .await
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_two_per_customer_across_two_workers() {
    let (store, dir) = sqlite();
    let (inside, gate) = (Inside::default(), Arc::new(tokio::sync::Semaphore::new(0)));
    let (entered, left) = (Counter::default(), Counter::default());
    let rule = ConcurrencyRule::per_key("charge", "/customer", 2);
    let mut engines = Vec::new();
    for store in [store, reopen(&dir)] {
        let engine = Engine::builder()
            .store(store)
            .register("charge", 1, charge(inside.clone(), Arc::clone(&gate), entered.clone(), left.clone()))
            .concurrency(rule.clone())
            .start()
            .await
            .unwrap();
        engines.push(engine);
    }
    let client = engines[0].client();
    for i in 0..6 {
        client.start("charge", &serde_json::json!({"customer": "a"})).id(format!("a{i}")).await.unwrap();
    }
    for i in 0..3 {
        client.start("charge", &serde_json::json!({"customer": "b"})).id(format!("b{i}")).await.unwrap();
    }
    // Two of each customer are inside their step; the rest wait, in order.
    entered.wait_for(4).await;
    let waiting = |runs: Vec<cairn::RunRecord>| {
        let mut ids: Vec<String> = runs
            .into_iter()
            .filter(|r| r.waiting_for == Some(WaitingFor::Concurrency))
            .map(|r| r.id.to_string())
            .collect();
        ids.sort();
        ids
    };
    let listed = client.list(&RunFilter { limit: Some(100), ..RunFilter::default() }).await.unwrap().runs;
    assert_eq!(waiting(listed), ["a2", "a3", "a4", "a5", "b2"]);
    assert_eq!(entered.get(), 4);
    // Let them through one at a time: each one leaving frees a slot for the next of its customer.
    for n in 1..=9 {
        gate.add_permits(1);
        left.wait_for(n).await;
    }
    for id in ["a0", "a1", "a2", "a3", "a4", "a5", "b0", "b1", "b2"] {
        wait_for_status(&client, &RunId::new(id), RunStatus::Completed).await;
    }
    assert_eq!((inside.most("a"), inside.most("b")), (2, 2));
    for engine in engines {
        engine.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_run_gives_its_slot_up() {
    let (store, _dir) = sqlite();
    let clock = clock();
    let woke = Counter::default();
    let nap = {
        let woke = woke.clone();
        move |ctx: Ctx, (): ()| {
            let woke = woke.clone();
            async move {
                ctx.sleep("nap", Duration::from_secs(3600)).await?;
                ctx.step("after", || {
                    let woke = woke.clone();
                    async move {
                        woke.hit();
                        Ok::<_, StepError>(())
                    }
                })
                .await
            }
        }
    };
    let engine = Engine::builder()
        .store(store)
        .clock(clock.clone())
        .register("nap", 1, nap)
        .concurrency(ConcurrencyRule::per_workflow("nap", 1))
        .start()
        .await
        .unwrap();
    engine.client().start("nap", &()).id("first").await.unwrap();
    engine.client().start("nap", &()).id("second").await.unwrap();
    // The first sleeps (its slot freed), so the second starts and sleeps too.
    wait_for_status(&engine.client(), &RunId::new("first"), RunStatus::Suspended).await;
    wait_for_status(&engine.client(), &RunId::new("second"), RunStatus::Suspended).await;
    clock.advance(Duration::from_secs(3601));
    for id in ["first", "second"] {
        wait_for_status(&engine.client(), &RunId::new(id), RunStatus::Completed).await;
    }
    assert_eq!(woke.get(), 2);
    engine.shutdown().await;
}
