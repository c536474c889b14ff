//! A worker at capacity while a sleeping run's wake-up comes due waits for a slot to free: it
//! does not ask the store again and again for a wake-up it cannot act on.

use crate::common::{Counter, clock, sqlite, wait_for_status};
use cairn::RunStatus;
use cairn::prelude::*;
use cairn_store::CountingStore;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_worker_with_an_overdue_wake_up_waits_for_a_slot_instead_of_polling() {
    let (store, _dir) = sqlite();
    let store = CountingStore::new(store);
    let calls = store.calls();
    let clock = clock();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let began = Counter::default();
    let napper = |ctx: Ctx, (): ()| async move {
        ctx.sleep("nap", Duration::from_secs(60)).await?;
        Ok::<_, WorkflowError>(())
    };
    let blocker = {
        let (gate, began) = (Arc::clone(&gate), began.clone());
        move |ctx: Ctx, (): ()| {
            let (gate, began) = (Arc::clone(&gate), began.clone());
            async move {
                ctx.step("wait-for-the-test", || {
                    let (gate, began) = (Arc::clone(&gate), began.clone());
                    async move {
                        began.hit();
                        gate.acquire().await.map_err(StepError::retryable)?.forget();
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
        .suspend_grace(Duration::ZERO)
        // Only a run's end (or a new start) may wake the claim loop here, never a poll.
        .poll_interval(Duration::from_secs(3600))
        .max_active_runs(1)
        .register("napper", 1, napper)
        .register("blocker", 1, blocker)
        .start()
        .await
        .unwrap();
    let nap = engine.client().start("napper", &()).await.unwrap();
    wait_for_status(&engine.client(), nap.id(), RunStatus::Suspended).await;
    let block = engine.client().start("blocker", &()).await.unwrap();
    began.wait_for(1).await;
    // The nap is over while the only slot is taken.
    clock.advance(Duration::from_secs(61));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = calls.of("next_wake_at");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = calls.of("next_wake_at") - before;
    assert!(asked <= 1, "the full worker asked the store for its next wake-up {asked} times in 300 ms");
    assert_eq!(engine.client().get(nap.id()).await.unwrap().status, RunStatus::Suspended, "no slot was free");
    // The slot frees: the woken run is claimed at once.
    gate.add_permits(1);
    wait_for_status(&engine.client(), block.id(), RunStatus::Completed).await;
    wait_for_status(&engine.client(), nap.id(), RunStatus::Completed).await;
    engine.shutdown().await;
}
