//! A worker process for the crash tests: it executes `crashy` runs on an SQLite file, writing an
//! execution log line each time a step body starts, until it is killed or (with
//! `--exit-when-done`) every run has completed.
//!
//! Usage: `crash-worker DB LOG RUNS [--exit-when-done]`

use cairn::prelude::*;
use cairn::{RunFilter, RunStatus, SqliteStore};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What every step returns: the value and the process that computed it.
#[derive(Serialize, Deserialize)]
struct Out {
    pid: u32,
    value: u64,
}

#[derive(Clone)]
struct Log(Arc<PathBuf>);

impl Log {
    /// Appends `begin RUN PATH PID` before a step body does anything.
    fn begin(&self, run: &RunId, path: &str) -> Result<(), StepError> {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(self.0.as_path())?;
        file.write_all(format!("begin {run} {path} {}\n", std::process::id()).as_bytes())?;
        Ok(())
    }
}

fn pause(run: &RunId, step: &str) -> Duration {
    let seed =
        run.as_str().bytes().chain(step.bytes()).fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    Duration::from_millis(20 + seed % 100)
}

async fn step(ctx: &Ctx, log: &Log, name: &str, value: u64) -> Result<u64, WorkflowError> {
    let run = ctx.run_id().clone();
    let out: Out = ctx
        .step(name, || {
            let log = log.clone();
            let run = run.clone();
            async move {
                log.begin(&run, name)?;
                tokio::time::sleep(pause(&run, name)).await;
                Ok::<_, StepError>(Out { pid: std::process::id(), value })
            }
        })
        .await?;
    Ok(out.value)
}

/// Five steps, a durable sleep and a wait for a signal.
async fn crashy(ctx: Ctx, log: Log, index: u64) -> Result<u64, WorkflowError> {
    let a = step(&ctx, &log, "a", index + 1).await?;
    let b = step(&ctx, &log, "b", a * 2).await?;
    // Even runs nap within the grace period (in memory); odd ones suspend and are woken later.
    let nap = if index.is_multiple_of(2) { 300 } else { 1500 };
    ctx.sleep("nap", Duration::from_millis(nap)).await?;
    let go: Option<serde_json::Value> = ctx
        .wait_for_event("go", EventFilter::matching(serde_json::json!({ "run": index })), Duration::from_secs(3600))
        .await?;
    let n = go.and_then(|v| v["n"].as_u64()).ok_or_else(|| WorkflowError::failed("signal without n"))?;
    let c = step(&ctx, &log, "c", b + n).await?;
    let d = step(&ctx, &log, "d", c * 3).await?;
    step(&ctx, &log, "e", d + 1).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: crash-worker DB LOG RUNS [--exit-when-done]".into());
    }
    let store = SqliteStore::open(&args[1])?;
    let log = Log(Arc::new(PathBuf::from(&args[2])));
    let runs: usize = args[3].parse()?;
    let exit_when_done = args.iter().any(|a| a == "--exit-when-done");
    let engine = Engine::builder()
        .store(store)
        .lease_duration(Duration::from_secs(1))
        .poll_interval(Duration::from_millis(100))
        // Few runs at a time, so the work spreads over the worker's life and kills land mid-step.
        .max_active_runs(10)
        .register("crashy", 1, move |ctx: Ctx, index: u64| crashy(ctx, log.clone(), index))
        .start()
        .await?;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !exit_when_done {
            continue;
        }
        let filter = RunFilter { status: Some(RunStatus::Completed), limit: Some(1000), ..RunFilter::default() };
        if engine.list(&filter).await?.runs.len() >= runs {
            break;
        }
    }
    engine.shutdown().await;
    Ok(())
}
