//! `ctx.repeat`: iterations in scopes `name[i]`, the state checkpointed, old iterations trimmed
//! from the store, and a restart resuming from the last checkpoint without running done
//! iterations again.

use crate::common::{Counter, clock, engine_of, reopen, sqlite, wait_for_status};
use cairn::journal::{Event, RunState};
use cairn::prelude::*;
use cairn::{LoopOptions, RunStatus, SqliteStore};
use cairn_store::JournalStore;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

const ITERATIONS: usize = 20;

/// Calls of each iteration's step.
type Calls = Arc<[Counter; ITERATIONS]>;

/// Adds each iteration's index to the state, and keeps the durable value `sum` equal to it (an
/// iteration that finds them apart fails the run); iteration `nap_at` naps an hour after its step.
fn counting(
    calls: Calls,
    options: LoopOptions,
    nap_at: usize,
) -> impl Fn(Ctx, ()) -> crate::common::Body<u64> + Send + Sync {
    move |ctx: Ctx, ()| {
        let calls = Arc::clone(&calls);
        Box::pin(async move {
            let total = ctx.var::<u64>("sum")?;
            ctx.repeat_with("count", 0u64, options, |ctx, sum| {
                let (calls, total) = (Arc::clone(&calls), total.clone());
                async move {
                    let index = ctx.path().iteration_of(&cairn::StepPath::parse("count").unwrap()).unwrap() as usize;
                    let seen = total.get()?.unwrap_or(0);
                    if seen != sum {
                        return Err(WorkflowError::failed(format!(
                            "iteration {index}: the value says {seen}, the state {sum}"
                        )));
                    }
                    let got = ctx
                        .step("work", || async { Ok::<_, StepError>(calls[index].hit() as u64 * index as u64) })
                        .await?;
                    total.set(&(sum + got)).await?;
                    if index == nap_at {
                        ctx.sleep("nap", Duration::from_secs(3600)).await?;
                    }
                    let sum = sum + got;
                    Ok(if index + 1 == ITERATIONS { ControlFlow::Break(sum) } else { ControlFlow::Continue(sum) })
                }
            })
            .await
        })
    }
}

async fn rows(dir: &tempfile::TempDir, id: &cairn::RunId) -> Vec<cairn::journal::JournalEntry> {
    reopen(dir).read_journal(id).await.unwrap()
}

/// Runs the loop until iteration `nap_at` naps, stops the engine, and lets a new one finish it;
/// the journal at the nap and at the end.
async fn restart_at(
    options: LoopOptions,
    nap_at: usize,
) -> (Calls, Vec<cairn::journal::JournalEntry>, Vec<cairn::journal::JournalEntry>) {
    let (store, dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let engine = engine_of(store, &clock, "count", counting(Arc::clone(&calls), options, nap_at)).await;
    let run = engine.client().start("count", &()).id("loop-1").await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    engine.shutdown().await;
    let middle = rows(&dir, run.id()).await;
    RunState::fold(&middle).unwrap();
    assert_eq!(cairn::journal::vars(&middle)["sum"], (0..=nap_at as u64).sum::<u64>(), "readable while it sleeps");

    clock.advance(Duration::from_secs(3600));
    let engine = engine_of(reopen(&dir), &clock, "count", counting(Arc::clone(&calls), options, nap_at)).await;
    let sum: u64 = engine.client().result(run.id()).await.unwrap();
    assert_eq!(sum, (0..ITERATIONS as u64).sum::<u64>());
    engine.shutdown().await;
    let end = rows(&dir, run.id()).await;
    RunState::fold(&end).unwrap();
    assert_eq!(cairn::journal::vars(&end)["sum"], (0..ITERATIONS as u64).sum::<u64>());
    (calls, middle, end)
}

fn iterations_in(journal: &[cairn::journal::JournalEntry]) -> Vec<u64> {
    let mut seen: Vec<u64> = journal
        .iter()
        .filter_map(|e| e.event.path()?.iteration_of(&cairn::StepPath::parse("count").unwrap()))
        .collect();
    seen.dedup();
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_at_the_last_checkpoint_and_old_iterations_are_trimmed() {
    let (calls, middle, end) = restart_at(LoopOptions::default().keep_iterations(3), 12).await;
    assert_eq!(calls.iter().map(Counter::get).collect::<Vec<_>>(), vec![1; ITERATIONS], "no iteration ran twice");
    // Suspended in iteration 12: the store holds iterations 9 to 12 (three kept, one running).
    assert_eq!(iterations_in(&middle), [9, 10, 11, 12], "{middle:?}");
    assert_eq!(iterations_in(&end)[0], 16);
    let checkpoints = end.iter().filter(|e| matches!(e.event, Event::LoopCheckpoint { .. })).count();
    assert_eq!(checkpoints, 4, "the last checkpoint and those of the kept iterations");
    assert!(end.len() < 30, "{} rows after {ITERATIONS} iterations", end.len());
}

/// Resumed two iterations before its end, the loop still trims the iterations it keeps no longer
/// (it once kept them until `keep` iterations after the resume, so a loop resumed near its end
/// left them in the journal for good: the crash test `loop_kill9` found 16 to 20 rows where 15
/// is the bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_resumed_near_its_end_still_trims_what_it_no_longer_keeps() {
    let (calls, middle, end) = restart_at(LoopOptions::default().keep_iterations(3), ITERATIONS - 2).await;
    assert_eq!(calls.iter().map(Counter::get).collect::<Vec<_>>(), vec![1; ITERATIONS], "no iteration ran twice");
    assert_eq!(iterations_in(&middle), [15, 16, 17, 18], "{middle:?}");
    // The last checkpoint (before iteration 19) keeps iterations 16 to 18.
    assert_eq!(iterations_in(&end), [16, 17, 18, 19], "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iterations_after_a_sparse_checkpoint_replay_from_the_journal() {
    let options = LoopOptions::default().checkpoint_every(5).keep_iterations(0);
    let (calls, middle, _) = restart_at(options, 12).await;
    assert_eq!(calls.iter().map(Counter::get).collect::<Vec<_>>(), vec![1; ITERATIONS], "no iteration ran twice");
    // Checkpointed at 10: iterations 10 to 12 are in the journal and replayed, not run.
    assert_eq!(iterations_in(&middle), [10, 11, 12], "{middle:?}");
}

/// A loop of one no-op step per iteration, run to `ITERATIONS_LONG` on SQLite: the journal rows
/// stay under a bound all the way (sampled while it runs), and at the end.
const ITERATIONS_LONG: u64 = 1_000_000;
/// The journal's bound: `started`, the last 10 kept iterations with a checkpoint after each, the
/// running iteration and the end, with room for a few more.
const ROWS_BOUND: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy (~80 s in a debug build): `cargo test --workspace --tests -- --ignored` runs it, as .ci/run does"]
async fn a_million_iterations_keep_a_bounded_journal() {
    async fn long(ctx: Ctx, n: u64) -> Result<u64, WorkflowError> {
        ctx.repeat("tick", 0u64, |ctx, done| async move {
            ctx.step("noop", || async { Ok::<_, StepError>(()) }).await?;
            Ok(if done + 1 == n { ControlFlow::Break(done + 1) } else { ControlFlow::Continue(done + 1) })
        })
        .await
    }
    let dir = tempfile::tempdir().unwrap();
    // Durability NORMAL: a million commits, each crash-safe (not power-loss-safe), in reasonable time.
    let options = cairn::SqliteOptions { durability: cairn::Durability::Normal, ..cairn::SqliteOptions::default() };
    let store = SqliteStore::open_with(dir.path().join("cairn.db"), options).unwrap();
    let engine = Engine::builder().store(store.clone()).register("long", 1, long).start().await.unwrap();
    let run = engine.client().start("long", &ITERATIONS_LONG).id("long-1").await.unwrap();
    let mut samples = 0;
    while engine.client().get(run.id()).await.unwrap().status != RunStatus::Completed {
        let rows = store.read_journal(run.id()).await.unwrap().len();
        assert!(rows <= ROWS_BOUND, "{rows} journal rows mid-way");
        samples += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let done: u64 = engine.client().result(run.id()).await.unwrap();
    assert_eq!(done, ITERATIONS_LONG);
    let journal = store.read_journal(run.id()).await.unwrap();
    assert!(journal.len() <= ROWS_BOUND, "{} journal rows at the end", journal.len());
    let state = RunState::fold(&journal).unwrap();
    let record = state.loop_record(&cairn::StepPath::parse("tick").unwrap()).unwrap();
    assert_eq!(record.next, ITERATIONS_LONG - 1, "the last checkpoint is before the last iteration");
    eprintln!("{samples} samples of the journal while it ran; {} rows at the end", journal.len());
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iterations_that_journal_nothing_share_one_checkpoint() {
    async fn compute(ctx: Ctx, n: u64) -> Result<u64, WorkflowError> {
        let total = ctx
            .repeat("sum", (0u64, 0u64), |_, (i, acc)| async move {
                Ok(if i + 1 == n { ControlFlow::Break(acc + i) } else { ControlFlow::Continue((i + 1, acc + i)) })
            })
            .await?;
        ctx.step("report", || async move { Ok::<_, StepError>(total) }).await
    }
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("compute", 1, compute).start().await.unwrap();
    let run = engine.client().start("compute", &1_000u64).await.unwrap();
    assert_eq!(run.result::<u64>().await.unwrap(), (0..1_000).sum::<u64>());
    let journal = engine.client().journal(run.id()).await.unwrap();
    let checkpoints: Vec<u64> = journal
        .iter()
        .filter_map(|e| match &e.event {
            Event::LoopCheckpoint { next, .. } => Some(*next),
            _ => None,
        })
        .collect();
    assert_eq!(checkpoints, [999], "the latest, journaled with the step after the loop");
    RunState::fold(&journal).unwrap();
    engine.shutdown().await;
}
