//! `ctx.continue_as_new`: a run hands over to a fresh run of its workflow, and no signal is lost
//! on the way.

use crate::common::{Body, Counter, clock, engine_of, reopen, sqlite, wait_for_status};
use cairn::SignalError;
use cairn::prelude::*;
use cairn::store::JsonlStore;
use cairn::{RunStatus, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

const HOUR: Duration = Duration::from_secs(3600);

/// The result of the chain `run` begins; the bound only turns a hang (a lost signal leaves a run
/// waiting forever on the virtual clock) into a failure.
async fn chain_result<T: serde::de::DeserializeOwned>(run: &cairn::RunHandle) -> T {
    tokio::time::timeout(Duration::from_secs(120), run.result::<T>())
        .await
        .expect("the chain never ended: a signal was lost")
        .unwrap()
}

/// Generation 0 holds in a step until the test opens `gate`, then continues as generation 1,
/// which returns the first `note` signal it receives.
fn relay(held: Counter, gate: Arc<Semaphore>) -> impl Fn(Ctx, u32) -> Body<u64> + Send + Sync + 'static {
    move |ctx, generation| {
        let (held, gate) = (held.clone(), Arc::clone(&gate));
        Box::pin(async move {
            if generation == 0 {
                ctx.step("hold", || {
                    let (held, gate) = (held.clone(), Arc::clone(&gate));
                    async move {
                        held.hit();
                        gate.acquire().await.map_err(|e| StepError::terminal(e.to_string()))?.forget();
                        Ok::<_, StepError>(())
                    }
                })
                .await?;
                return ctx.continue_as_new(&1u32);
            }
            let note: Option<u64> = ctx.wait_for_event("note", EventFilter::any(), HOUR).await?;
            note.ok_or_else(|| WorkflowError::failed("no note"))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_sent_during_the_hand_over_is_consumed_by_the_new_run() {
    let (store, _dir) = sqlite();
    let (held, gate) = (Counter::default(), Arc::new(Semaphore::new(0)));
    let engine = engine_of(store, &clock(), "relay", relay(held.clone(), Arc::clone(&gate))).await;
    let run = engine.client().start("relay", &0u32).id("relay").await.unwrap();
    held.wait_for(1).await;
    // The run is held and about to hand over; the signal waits for nobody yet.
    engine.client().signal(run.id(), "note", &42u64).await.unwrap();
    gate.add_permits(1);
    assert_eq!(chain_result::<u64>(&run).await, 42, "the result of the chain's last run");

    let first = engine.client().get(run.id()).await.unwrap();
    assert_eq!((first.status, first.rare().continued_as.clone()), (RunStatus::Continued, Some("relay~1".into())));
    assert!(engine.client().signals(run.id()).await.unwrap().is_empty(), "the signal moved");
    let next = engine.client().get(&"relay~1".into()).await.unwrap();
    assert_eq!((next.status, next.rare().continued_from.clone()), (RunStatus::Completed, Some(run.id().clone())));
    assert_eq!(next.input.get(), "1");
    let signals = engine.client().signals(&next.id).await.unwrap();
    assert_eq!(signals.len(), 1);
    assert!(signals[0].consumed_seq.is_some());
    let journal = engine.client().journal(run.id()).await.unwrap();
    assert!(matches!(&journal.last().unwrap().event, cairn::journal::Event::Continued { run, .. } if run == "relay~1"));
    assert_eq!(held.get(), 1, "the first run's step ran once");
    // The first run's id still takes signals: they go to the newest run, which has ended.
    let refused = engine.client().signal(run.id(), "note", &1u64).await.unwrap_err();
    assert!(matches!(refused, SignalError::RunFinished { status: RunStatus::Completed, .. }), "{refused:?}");
    engine.shutdown().await;
}

/// Adds up `tick` signals, `PER_RUN` per run, continuing as new until `TICKS` have been counted.
const PER_RUN: u64 = 4;
const TICKS: u64 = 40;

async fn tally(ctx: Ctx, (count, sum): (u64, u64)) -> Result<(u64, u64), WorkflowError> {
    let (mut count, mut sum) = (count, sum);
    for i in 0..PER_RUN {
        let tick: Option<u64> = ctx.wait_for_event_as(&format!("tick[{i}]"), "tick", EventFilter::any(), HOUR).await?;
        (count, sum) = (count + 1, sum + tick.ok_or_else(|| WorkflowError::failed("a wait timed out"))?);
    }
    if count >= TICKS {
        return Ok((count, sum));
    }
    ctx.continue_as_new(&(count, sum))
}

/// Signals sent to the first run as fast as they go, while the chain hands over again and
/// again: each is consumed once, by some run of the chain.
async fn no_tick_is_lost(store: impl Store) {
    let engine = Engine::builder().store(store).clock(clock()).register("tally", 1, tally).start().await.unwrap();
    let run = engine.client().start("tally", &(0u64, 0u64)).id("tally").await.unwrap();
    let sender = {
        let (engine, id) = (engine.client(), run.id().clone());
        tokio::spawn(async move {
            for tick in 1..=TICKS {
                engine.signal(&id, "tick", &tick).await.unwrap();
            }
        })
    };
    assert_eq!(chain_result::<(u64, u64)>(&run).await, (TICKS, TICKS * (TICKS + 1) / 2));
    sender.await.unwrap();
    let chain = TICKS / PER_RUN;
    let last = engine.client().get(&format!("tally~{}", chain - 1).as_str().into()).await.unwrap();
    assert_eq!(last.status, RunStatus::Completed);
    assert!(last.rare().continued_as.is_none());
    let mut consumed = 0;
    for n in 0..chain {
        let id = if n == 0 { "tally".to_owned() } else { format!("tally~{n}") };
        let signals = engine.client().signals(&id.as_str().into()).await.unwrap();
        assert!(signals.iter().all(|s| s.consumed_seq.is_some()), "run {id} left a signal unconsumed");
        consumed += signals.len() as u64;
    }
    assert_eq!(consumed, TICKS);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_signal_is_lost_across_many_hand_overs_on_sqlite() {
    let (store, _dir) = sqlite();
    no_tick_is_lost(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy (~35 s in a debug build): `cargo test --workspace --tests -- --ignored` runs it, as .ci/run does"]
async fn no_signal_is_lost_across_many_hand_overs_on_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    no_tick_is_lost(JsonlStore::open(dir.path()).unwrap()).await;
}

/// Each run does one step, waits for `go`, then continues, three times.
fn stages(worked: Counter) -> impl Fn(Ctx, u32) -> Body<u32> + Send + Sync + 'static {
    move |ctx, stage| {
        let worked = worked.clone();
        Box::pin(async move {
            ctx.step("work", || {
                let worked = worked.clone();
                async move { Ok::<_, StepError>(worked.hit()) }
            })
            .await?;
            let _: Option<()> = ctx.wait_for_event("go", EventFilter::any(), HOUR).await?;
            if stage == 2 {
                return Ok(stage);
            }
            ctx.continue_as_new(&(stage + 1))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_engine_goes_on_along_the_chain_without_redoing_work() {
    let (store, dir) = sqlite();
    let clock = clock();
    let worked = Counter::default();
    let engine = engine_of(store, &clock, "stages", stages(worked.clone())).await;
    let run = engine.client().start("stages", &0u32).id("stages").await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    engine.client().signal(run.id(), "go", &()).await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Continued).await;
    wait_for_status(&engine.client(), &"stages~1".into(), RunStatus::Suspended).await;
    drop(engine);

    // Another process opens the file: the second run replays its step, then hands over.
    let engine = engine_of(reopen(&dir), &clock, "stages", stages(worked.clone())).await;
    engine.client().signal(run.id(), "go", &()).await.unwrap();
    wait_for_status(&engine.client(), &"stages~1".into(), RunStatus::Continued).await;
    wait_for_status(&engine.client(), &"stages~2".into(), RunStatus::Suspended).await;
    engine.shutdown().await;
    let engine = engine_of(reopen(&dir), &clock, "stages", stages(worked.clone())).await;
    engine.client().signal(run.id(), "go", &()).await.unwrap();
    assert_eq!(engine.client().result::<u32>(run.id()).await.unwrap(), 2);
    assert_eq!(worked.get(), 3, "one step per run of the chain");
    let runs = engine.client().list(&cairn::RunFilter::default()).await.unwrap().runs;
    let mut ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["stages", "stages~1", "stages~2"], "no run was started twice");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_id_taken_by_another_run_fails_the_run_instead() {
    let (store, _dir) = sqlite();
    let worked = Counter::default();
    let engine = engine_of(store, &clock(), "stages", stages(worked)).await;
    engine.client().start("stages", &2u32).id("x~1").await.unwrap();
    let run = engine.client().start("stages", &0u32).id("x").await.unwrap();
    engine.client().signal(run.id(), "go", &()).await.unwrap();
    let failed = wait_for_status(&engine.client(), run.id(), RunStatus::Failed).await;
    assert!(failed.error.unwrap().contains("CAIRN-E0116"));
    assert_eq!(engine.client().get(&"x~1".into()).await.unwrap().rare().continued_from, None);
    engine.shutdown().await;
}

/// Counts down, continuing as new at each step, and returns how many runs it took.
async fn countdown(ctx: Ctx, (left, runs): (u32, u32)) -> Result<u32, WorkflowError> {
    if left == 0 {
        return Ok(runs + 1);
    }
    ctx.step("tick", || async { Ok::<_, StepError>(()) }).await?;
    ctx.continue_as_new(&(left - 1, runs + 1))
}

async fn launcher(ctx: Ctx, left: u32) -> Result<u32, WorkflowError> {
    ctx.child("countdown", &(left, 0u32)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_waits_for_the_last_run_of_its_childs_chain() {
    let (store, _dir) = sqlite();
    let engine = Engine::builder()
        .store(store)
        .clock(clock())
        .register("countdown", 1, countdown)
        .register("launcher", 1, launcher)
        .start()
        .await
        .unwrap();
    let run = engine.client().start("launcher", &3u32).id("l").await.unwrap();
    assert_eq!(chain_result::<u32>(&run).await, 4, "the child's chain had four runs");
    let children = engine.client().children(run.id()).await.unwrap();
    let ids: Vec<&str> = children.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["l:~child[0]", "l:~child[0]~1", "l:~child[0]~2", "l:~child[0]~3"], "each keeps the parent");
    engine.shutdown().await;
}

/// Continues once, then waits for a signal nobody sends.
async fn idler(ctx: Ctx, generation: u32) -> Result<(), WorkflowError> {
    if generation == 0 {
        return ctx.continue_as_new(&1u32);
    }
    let _: Option<()> = ctx.wait_for_event("never", EventFilter::any(), HOUR).await?;
    Ok(())
}

async fn idle_parent(ctx: Ctx, (): ()) -> Result<(), WorkflowError> {
    ctx.child("idler", &0u32).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_reaches_the_newest_run_of_a_chain_and_of_a_childs_chain() {
    let (store, _dir) = sqlite();
    let engine = Engine::builder()
        .store(store)
        .clock(clock())
        .register("idler", 1, idler)
        .register("idle-parent", 1, idle_parent)
        .start()
        .await
        .unwrap();
    let run = engine.client().start("idler", &0u32).id("idle").await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Continued).await;
    wait_for_status(&engine.client(), &"idle~1".into(), RunStatus::Suspended).await;
    engine.client().cancel(run.id()).await.unwrap();
    wait_for_status(&engine.client(), &"idle~1".into(), RunStatus::Cancelled).await;

    let parent = engine.client().start("idle-parent", &()).id("p").await.unwrap();
    wait_for_status(&engine.client(), &"p:~child[0]".into(), RunStatus::Continued).await;
    wait_for_status(&engine.client(), &"p:~child[0]~1".into(), RunStatus::Suspended).await;
    engine.client().cancel(parent.id()).await.unwrap();
    wait_for_status(&engine.client(), &"p:~child[0]~1".into(), RunStatus::Cancelled).await;
    wait_for_status(&engine.client(), parent.id(), RunStatus::Cancelled).await;
    engine.shutdown().await;
}
