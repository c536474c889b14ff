//! What a run, its worker and a client do when the store fails: mid-append (before the store took
//! the append, or after, with its answer lost), mid-finish, mid-claim, and on a start. Faults come
//! from `FaultyStore`, which fails chosen calls to a real memory store as a lost connection would.

use crate::common::{Counter, wait_for_status};
use cairn::StartError;
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::store::{Append, MemoryStore, RunUpdate};
use cairn::{RunFilter, RunStatus};
use cairn_store::{Fault, Faults, FaultyStore};
use std::time::Duration;

/// Counters of the three steps' executions.
#[derive(Clone, Default)]
struct Steps {
    one: Counter,
    two: Counter,
    three: Counter,
}

/// An engine over a faulty memory store with one workflow of three steps, each counting its
/// executions; short leases, so a run interrupted by a store failure is claimed again soon.
async fn engine(steps: &Steps) -> (Engine, Faults) {
    let store = FaultyStore::new(MemoryStore::new());
    let faults = store.faults();
    let steps = steps.clone();
    let engine = Engine::builder()
        .store(store)
        .lease_duration(Duration::from_millis(300))
        .poll_interval(Duration::from_millis(50))
        .register("three", 1, move |ctx: Ctx, n: u32| {
            let steps = steps.clone();
            async move {
                let a: u32 = ctx.step("one", || counted(&steps.one, n)).await?;
                let b: u32 = ctx.step("two", || counted(&steps.two, a + 1)).await?;
                ctx.step("three", || counted(&steps.three, b + 1)).await
            }
        })
        .start()
        .await
        .expect("engine starts");
    (engine, faults)
}

/// A step body: counts its execution and returns `value`.
async fn counted(counter: &Counter, value: u32) -> Result<u32, StepError> {
    counter.hit();
    Ok(value)
}

/// Whether `append` commits step `name`.
fn commits(append: &Append, name: &str) -> bool {
    append.events.iter().any(|event| matches!(event, Event::StepCompleted { path, .. } if path.name() == name))
}

/// The steps the run's journal says completed, in order.
async fn completed_steps(client: &Client, id: &RunId) -> Vec<String> {
    let journal = client.journal(id).await.unwrap();
    journal
        .iter()
        .filter_map(|entry| match &entry.event {
            Event::StepCompleted { path, .. } => Some(path.to_string()),
            _ => None,
        })
        .collect()
}

fn executions(steps: &Steps) -> [usize; 3] {
    [steps.one.get(), steps.two.get(), steps.three.get()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_whose_answer_is_lost_interrupts_the_run_and_a_later_claim_goes_on_from_the_journal() {
    let steps = Steps::default();
    let (engine, faults) = engine(&steps).await;
    faults.fail_append_when(|append| commits(append, "two"), Fault::After);
    let client = engine.client();
    let run = client.start("three", &1u32).await.unwrap();
    let done = wait_for_status(&client, run.id(), RunStatus::Completed).await;
    assert_eq!(faults.struck("append"), 1);
    assert_eq!(done.output.map(|o| o.get().to_owned()).as_deref(), Some("3"));
    // Step two was committed before its answer was lost: the replay finds it, nothing runs twice.
    assert_eq!(executions(&steps), [1, 1, 1]);
    assert_eq!(completed_steps(&client, run.id()).await, ["one", "two", "three"]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_the_store_never_took_runs_its_step_again_and_journals_it_once() {
    let steps = Steps::default();
    let (engine, faults) = engine(&steps).await;
    faults.fail_append_when(|append| commits(append, "two"), Fault::Before);
    let client = engine.client();
    let run = client.start("three", &1u32).await.unwrap();
    wait_for_status(&client, run.id(), RunStatus::Completed).await;
    assert_eq!(faults.struck("append"), 1);
    // The first result of step two never reached the journal: the step runs again (at least
    // once semantics for a step body), and the journal holds it once.
    assert_eq!(executions(&steps), [1, 2, 1]);
    assert_eq!(completed_steps(&client, run.id()).await, ["one", "two", "three"]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_the_store_never_took_is_recorded_by_the_next_claim_without_running_a_step_again() {
    let steps = Steps::default();
    let (engine, faults) = engine(&steps).await;
    faults.fail_append_when(|append| matches!(append.update, RunUpdate::Finish { .. }), Fault::Before);
    let client = engine.client();
    let run = client.start("three", &1u32).await.unwrap();
    let done = wait_for_status(&client, run.id(), RunStatus::Completed).await;
    assert_eq!(faults.struck("append"), 1);
    assert_eq!(executions(&steps), [1, 1, 1]);
    assert_eq!(done.recoveries, 0, "a finished run's recoveries are cleared: {done:?}");
    let ends = client.journal(run.id()).await.unwrap();
    assert_eq!(ends.iter().filter(|e| matches!(e.event, Event::Completed { .. })).count(), 1);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_claim_is_tried_again() {
    let steps = Steps::default();
    let (engine, faults) = engine(&steps).await;
    faults.fail_nth("claim", 1, Fault::Before);
    faults.fail_nth("claim", 2, Fault::After);
    let client = engine.client();
    let run = client.start("three", &1u32).await.unwrap();
    wait_for_status(&client, run.id(), RunStatus::Completed).await;
    assert_eq!(faults.struck("claim"), 2);
    assert_eq!(executions(&steps), [1, 1, 1]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_the_store_refused_stores_nothing_and_one_whose_answer_was_lost_is_found_by_its_key() {
    let steps = Steps::default();
    let (engine, faults) = engine(&steps).await;
    let client = engine.client();
    faults.fail_nth("create_run", 1, Fault::Before);
    let refused = client.start("three", &1u32).id("refused").await.unwrap_err();
    assert!(matches!(refused, StartError::Store(_)), "{refused:?}");
    assert!(refused.to_string().contains("injected fault"), "the cause is in the message: {refused}");
    assert!(client.get(&RunId::new("refused")).await.is_err(), "nothing was stored");
    faults.fail_nth("create_run", 1, Fault::After);
    let lost = client.start("three", &1u32).idempotency_key("order-7").await.unwrap_err();
    assert!(matches!(lost, StartError::Store(_)), "{lost:?}");
    // The store took it: starting again with the same key finds that run instead of a second.
    let again = client.start("three", &1u32).idempotency_key("order-7").await.unwrap();
    assert!(!again.created());
    wait_for_status(&client, again.id(), RunStatus::Completed).await;
    let runs = client.list(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.runs.len(), 1, "one run in all");
    engine.shutdown().await;
}
