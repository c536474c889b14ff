//! W4 (resume after a restart), W5 (fan-out) and W6 (a long durable loop).

use super::args::*;
use super::stats::*;
use anyhow::{Result, bail};
use cairn::prelude::*;
use cairn::{Durability, SqliteOptions, SqliteStore, Store};
use std::sync::Arc;
use std::time::Instant;

/// The W5 workflow: `ctx.each` over `items` items, `concurrency` at a time, one no-op step each.
pub(super) async fn fan_out_workflow(ctx: Ctx, (items, concurrency): (usize, usize)) -> Result<usize, WorkflowError> {
    let done = ctx
        .each("item", 0..items, concurrency, |ctx, i| async move {
            ctx.step("noop", || async move { Ok::<_, StepError>(i) }).await
        })
        .await?;
    done.into_iter().try_fold(0, |n, item| item.map(|_| n + 1))
}

/// W5: `runs` runs (one after another) of one `ctx.each` over `items` items, each timed from its
/// start to its result.
pub(super) async fn fan_out(
    store: Arc<dyn Store>,
    runs: usize,
    (items, concurrency): (usize, usize),
    (store_name, durability_name, floor_us): (&str, &str, f64),
    json: bool,
) -> Result<()> {
    let engine =
        Engine::builder().shared_store(store).sweep_every(None).register("fanout", 1, fan_out_workflow).start().await?;
    let mut seconds = Vec::with_capacity(runs);
    for _ in 0..runs {
        let begun = Instant::now();
        let done: usize = engine.client().start("fanout", &(items, concurrency)).await?.result().await?;
        seconds.push(begun.elapsed().as_secs_f64());
        if done != items {
            bail!("the run finished {done} items of {items}");
        }
    }
    engine.shutdown().await;
    let total: f64 = seconds.iter().sum();
    let steps_per_sec = (runs * items) as f64 / total;
    let report = serde_json::json!({
        "workload": "w5",
        "store": store_name,
        "durability": durability_name,
        "runs": runs,
        "items": items,
        "concurrency": concurrency,
        "seconds": total,
        "steps_per_sec": steps_per_sec,
        "floor_us": floor_us,
    });
    if text_wanted(json) {
        out!(
            "w5 on {store_name} ({durability_name}): {runs} run(s) of {items} items, {concurrency} at a time: {steps_per_sec:.0} steps/s ({total:.2} s); commit floor {floor_us:.1} us"
        );
    }
    if json {
        out!("{report}");
    }
    Ok(())
}

/// The W6 workflow: a durable loop of `iterations` iterations of one no-op step each.
pub(super) async fn long_loop_workflow(ctx: Ctx, iterations: u64) -> Result<u64, WorkflowError> {
    ctx.repeat("tick", 0u64, |ctx, done| async move {
        ctx.step("noop", || async { Ok::<_, StepError>(()) }).await?;
        let done = done + 1;
        Ok(if done == iterations { std::ops::ControlFlow::Break(done) } else { std::ops::ControlFlow::Continue(done) })
    })
    .await
}

/// The process's peak resident set size in KiB (`VmHWM`; `None` where /proc has none).
pub(super) fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// W6: one run of a durable loop of `iterations` one-step iterations, timed from its start to
/// its result; then the journal rows left and the peak RSS.
pub(super) async fn long_loop(
    store: Arc<dyn Store>,
    iterations: usize,
    (store_name, durability_name, floor_us): (&str, &str, f64),
    json: bool,
) -> Result<()> {
    let engine = Engine::builder()
        .shared_store(Arc::clone(&store))
        .sweep_every(None)
        .register("loop", 1, long_loop_workflow)
        .start()
        .await?;
    let begun = Instant::now();
    let run = engine.client().start("loop", &(iterations as u64)).await?;
    let done: u64 = run.result().await?;
    let seconds = begun.elapsed().as_secs_f64();
    if done != iterations as u64 {
        bail!("the loop ran {done} iterations of {iterations}");
    }
    let rows = store.read_journal(run.id()).await?.len();
    engine.shutdown().await;
    let per_sec = iterations as f64 / seconds;
    let rss = peak_rss_kib();
    let report = serde_json::json!({
        "workload": "w6",
        "store": store_name,
        "durability": durability_name,
        "iterations": iterations,
        "seconds": seconds,
        "iterations_per_sec": per_sec,
        "journal_rows": rows,
        "peak_rss_kib": rss,
        "floor_us": floor_us,
    });
    if text_wanted(json) {
        out!(
            "w6 on {store_name} ({durability_name}): {iterations} iterations in {seconds:.1} s = {per_sec:.0} iterations/s; {rows} journal rows at the end; peak RSS {}; commit floor {floor_us:.1} us",
            rss.map_or_else(|| "unknown".to_owned(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0))
        );
    }
    if json {
        out!("{report}");
    }
    Ok(())
}

/// How W4 opens the store again for each fresh engine.
pub(super) struct Reopen<'a> {
    pub(super) kind: StoreKind,
    pub(super) sqlite_path: std::path::PathBuf,
    pub(super) durability: Durability,
    pub(super) url: &'a str,
    pub(super) schema: &'a str,
}

impl Reopen<'_> {
    pub(super) async fn open(&self, memory: &Arc<dyn Store>) -> Result<Arc<dyn Store>> {
        Ok(match self.kind {
            StoreKind::Memory => Arc::clone(memory),
            StoreKind::Sqlite => {
                let options = SqliteOptions { durability: self.durability, ..SqliteOptions::default() };
                Arc::new(SqliteStore::open_with(&self.sqlite_path, options)?)
            }
            StoreKind::Postgres => {
                let options = cairn_postgres::PostgresOptions::new(self.url).schema(self.schema);
                Arc::new(cairn_postgres::PostgresStore::connect(options).await?)
            }
        })
    }
}

/// The W4 workflow: `steps` no-op steps, then a wait for the signal `go`.
pub(super) async fn resumable(ctx: Ctx, steps: usize) -> Result<usize, WorkflowError> {
    for i in 0..steps {
        ctx.step(&format!("s[{i}]"), || async move { Ok::<_, StepError>(i) }).await?;
    }
    let go: Option<usize> =
        ctx.wait_for_event("go", EventFilter::any(), std::time::Duration::from_secs(86_400)).await?;
    Ok(steps + go.unwrap_or(0))
}

/// W4: `runs` runs of `steps` steps suspend on a signal (set up concurrently, untimed); then, one
/// at a time, an engine is started afresh on a freshly opened store (untimed) and the run is timed
/// from sending its signal to its result: claim, journal load, replay of every step, the wait, the
/// completion.
pub(super) async fn resume(
    store: Arc<dyn Store>,
    reopen: Reopen<'_>,
    runs: usize,
    steps: usize,
    (store_name, durability_name, floor_us): (&str, &str, f64),
    json: bool,
) -> Result<()> {
    let engine = Engine::builder()
        .shared_store(Arc::clone(&store))
        .sweep_every(None)
        .max_active_runs(runs)
        .register("resume", 1, resumable)
        .start()
        .await?;
    let mut ids = Vec::with_capacity(runs);
    for _ in 0..runs {
        ids.push(engine.client().start("resume", &steps).await?.id().clone());
    }
    for id in &ids {
        while engine.client().get(id).await?.status != cairn::RunStatus::Suspended {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    engine.shutdown().await;
    drop(engine);
    let mut resume_ms = Vec::with_capacity(runs);
    // Untimed: the store's checkpointer copies the set-up's write-ahead log into the database, as
    // it has long done when a run that slept for days resumes.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    for id in &ids {
        let fresh = reopen.open(&store).await?;
        let engine =
            Engine::builder().shared_store(fresh).sweep_every(None).register("resume", 1, resumable).start().await?;
        // Untimed: the engine's start-up chores (recording itself, the first claim) finish, as
        // they have on a worker that was restarted before the signal came.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let begun = Instant::now();
        engine.client().signal(id, "go", &1usize).await?;
        let total: usize = engine.client().result(id).await?;
        resume_ms.push(begun.elapsed().as_secs_f64() * 1e3);
        if total != steps + 1 {
            bail!("run {id} returned {total}, expected {}", steps + 1);
        }
        engine.shutdown().await;
        drop(engine);
        // Untimed: the store just dropped closes its connections on its own threads; the next
        // resume starts on a quiet process, as a restarted worker does.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let resume_sorted = sorted(resume_ms);
    let report = serde_json::json!({
        "workload": "w4",
        "store": store_name,
        "durability": durability_name,
        "runs": runs,
        "journal_steps": steps,
        "resume_ms_p50": percentile(&resume_sorted, 50.0),
        "resume_ms_p99": percentile(&resume_sorted, 99.0),
        "resume_ms_max": resume_sorted.last().copied().unwrap_or_default(),
        "floor_us": floor_us,
    });
    if text_wanted(json) {
        out!(
            "w4 on {store_name} ({durability_name}): {runs} runs with {steps}-step journals, signal to result on a fresh engine: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; commit floor {floor_us:.1} us",
            percentile(&resume_sorted, 50.0),
            percentile(&resume_sorted, 99.0),
            resume_sorted.last().copied().unwrap_or_default(),
        );
    }
    if json {
        out!("{report}");
    }
    Ok(())
}
