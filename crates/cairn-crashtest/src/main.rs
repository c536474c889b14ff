//! A worker process for the crash tests: it executes `crashy`, `compose`, `looper`, `family`/`member`
//! and `ticker` (scheduled) runs, writing an execution log line
//! when each step body begins and ends, until it is killed or (with `--exit-when-done`) every run
//! has completed.
//!
//! Usage: `crash-worker STORE LOG RUNS [--schema NAME] [--only W1,W2] [--extra-steps K] [--pause-ms MAX] [--exit-when-done]
//! [--lease-ms MS] [--grace-ms MS] [--max-recoveries N] [--abort-at RUN/STEP] [--tick-rate N/MS] [--ticker-limit N]` where STORE is an SQLite file
//! path or a `postgres://` URL. On SIGTERM or Ctrl-C it shuts down gracefully (steps in flight get
//! `--grace-ms` to finish, every lease is handed back) and exits 0. With `--abort-at`, the process
//! aborts (no unwinding, no cleanup) at the end of that step's body, every time it runs it.
//! With `--tick-rate N/MS`, `ticker`'s step `tick` runs at most N times in any MS milliseconds
//! (a rate limit); with `--ticker-limit N`, at most N `ticker` runs hold a slot at once (a
//! concurrency limit). With `--debounce-starts K/N/QUIET_MS`, once started it makes N rounds of
//! one debounced `ticker` start per key `key-0`…`key-{K-1}` (input `pid * 1000 + round`, quiet
//! QUIET_MS), logging each as `start RUN KEY PID MICROS`. On PostgreSQL, `--startup-wait-ms MS`
//! and `--connect-timeout-ms MS` set the store's options of those names; `--metrics-file PATH`
//! writes Cairn's metrics there at a graceful exit. Cairn's warnings go to standard error.

use cairn::prelude::*;
use cairn::{LoopOptions, RunFilter, RunStatus, SqliteStore, Store};
use std::ops::ControlFlow;

/// Iterations of a `looper` run.
const LOOP_ITERATIONS: u64 = 40;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What every step returns: the value and the process that computed it.
#[derive(Serialize, Deserialize)]
struct Out {
    pid: u32,
    value: u64,
}

#[derive(Clone)]
struct Worker {
    log: Arc<PathBuf>,
    extra_steps: u64,
    pause_ms: u64,
    abort_at: Option<String>,
}

fn micros() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0)
}

impl Worker {
    /// Appends `WHAT RUN PATH PID MICROS` to the execution log.
    fn log(&self, what: &str, run: &RunId, path: &str) -> Result<(), StepError> {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(self.log.as_path())?;
        file.write_all(format!("{what} {run} {path} {} {}\n", std::process::id(), micros()).as_bytes())?;
        Ok(())
    }

    fn pause(&self, run: &RunId, step: &str) -> Duration {
        let seed =
            run.as_str().bytes().chain(step.bytes()).fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        Duration::from_millis(self.pause_ms / 5 + seed % self.pause_ms.max(1))
    }

    async fn step(&self, ctx: &Ctx, name: &str, value: u64) -> Result<u64, WorkflowError> {
        Ok(self.step_out(ctx, name, value).await?.value)
    }

    /// A logged step returning `value` and the process that computed it.
    async fn step_out(&self, ctx: &Ctx, name: &str, value: u64) -> Result<Out, WorkflowError> {
        let run = ctx.run_id().clone();
        let path = ctx.path().child(name)?.to_string();
        let name = path.as_str();
        let out: Out = ctx
            .step(name.rsplit('/').next().unwrap_or(name), || {
                let run = run.clone();
                async move {
                    self.log("begin", &run, name)?;
                    tokio::time::sleep(self.pause(&run, name)).await;
                    if self.abort_at.as_deref() == Some(&format!("{run}/{name}")) {
                        // Late enough that the steps other runs began at the same time have
                        // committed: the crash is this step's alone.
                        tokio::time::sleep(Duration::from_millis(self.pause_ms * 3)).await;
                        std::process::abort();
                    }
                    self.log("end", &run, name)?;
                    Ok::<_, StepError>(Out { pid: std::process::id(), value })
                }
            })
            .await?;
        Ok(out)
    }

    /// Five steps, a durable sleep, a wait for a signal, then `extra_steps` more steps.
    async fn crashy(&self, ctx: Ctx, index: u64) -> Result<u64, WorkflowError> {
        let a = self.step(&ctx, "a", index + 1).await?;
        let b = self.step(&ctx, "b", a * 2).await?;
        // Even runs nap within the grace period (in memory); odd ones suspend and are woken later.
        let nap = if index.is_multiple_of(2) { 300 } else { 1500 };
        ctx.sleep("nap", Duration::from_millis(nap)).await?;
        let go: Option<serde_json::Value> = ctx
            .wait_for_event("go", EventFilter::matching(serde_json::json!({ "run": index })), Duration::from_secs(3600))
            .await?;
        let n = go.and_then(|v| v["n"].as_u64()).ok_or_else(|| WorkflowError::failed("signal without n"))?;
        let c = self.step(&ctx, "c", b + n).await?;
        let d = self.step(&ctx, "d", c * 3).await?;
        let mut value = self.step(&ctx, "e", d + 1).await?;
        for i in 0..self.extra_steps {
            value = self.step(&ctx, &format!("x[{i}]"), value + i).await?;
        }
        Ok(value)
    }

    /// A durable loop of [`LOOP_ITERATIONS`] iterations of one step `work` (`index + i`), the last
    /// 3 kept: the sum, and the process that committed each iteration's step.
    async fn looper(&self, ctx: Ctx, index: u64) -> Result<(u64, Vec<u32>), WorkflowError> {
        let options = LoopOptions::default().keep_iterations(3);
        ctx.repeat_with("tick", (0u64, Vec::<u32>::new()), options, |ctx, (sum, mut pids)| async move {
            let i = pids.len() as u64;
            let out = self.step_out(&ctx, "work", index + i).await?;
            pids.push(out.pid);
            let sum = sum + out.value;
            Ok(if i + 1 == LOOP_ITERATIONS {
                ControlFlow::Break((sum, pids))
            } else {
                ControlFlow::Continue((sum, pids))
            })
        })
        .await
    }

    /// A schedule's run: one step `tick` returning `input`.
    async fn ticker(&self, ctx: Ctx, input: u64) -> Result<u64, WorkflowError> {
        self.step(&ctx, "tick", input).await
    }

    /// A parent: step `a`, the child `member` (awaited), step `b`: `4 * index + 1`.
    async fn family(&self, ctx: Ctx, index: u64) -> Result<u64, WorkflowError> {
        let a = self.step(&ctx, "a", index + 1).await?;
        let member: u64 = ctx.child("member", &index).await?;
        self.step(&ctx, "b", a + member).await
    }

    /// A child: step `m1` (`3 * index`); from index 100 on it then waits an hour for `go`.
    async fn member(&self, ctx: Ctx, index: u64) -> Result<u64, WorkflowError> {
        let value = self.step(&ctx, "m1", index * 3).await?;
        if index >= 100 {
            let _: Option<u64> = ctx.wait_for_event("go", EventFilter::any(), Duration::from_secs(3600)).await?;
        }
        Ok(value)
    }

    /// Two joined branches of two steps each, six items (three at a time), and a race that
    /// `fast` wins (`slow` sleeps an hour first): `20 * index + 108`.
    async fn compose(&self, ctx: Ctx, index: u64) -> Result<u64, WorkflowError> {
        let joined = ctx
            .join(vec![
                ctx.branch("left", |ctx| async move {
                    let x = self.step(&ctx, "l1", index + 1).await?;
                    self.step(&ctx, "l2", x * 2).await
                }),
                ctx.branch("right", |ctx| async move {
                    let x = self.step(&ctx, "r1", index + 2).await?;
                    self.step(&ctx, "r2", x * 3).await
                }),
            ])
            .await?;
        let items =
            ctx.each("item", 0..6u64, 3, |ctx, k| async move { self.step(&ctx, "work", index * k).await }).await?;
        let items = items.into_iter().sum::<Result<u64, _>>()?;
        let (_, won) = ctx
            .race(
                "pick",
                vec![
                    ctx.branch("pick-fast", |ctx| async move { self.step(&ctx, "f", 100).await }),
                    ctx.branch("pick-slow", |ctx| async move {
                        ctx.sleep("nap", Duration::from_secs(3600)).await?;
                        self.step(&ctx, "s", 200).await
                    }),
                ],
            )
            .await?;
        Ok(joined.iter().sum::<u64>() + items + won)
    }
}

fn option(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// `--debounce-starts K/N/QUIET_MS`: N rounds of one debounced `ticker` start per key, each
/// logged with the run it joined or created.
async fn debounce_starts(engine: &Engine, worker: &Worker, spec: &str) -> Result<(), Box<dyn std::error::Error>> {
    let parts: Vec<u64> = spec.split('/').map(str::parse).collect::<Result<_, _>>()?;
    let [keys, rounds, quiet_ms] = parts[..] else { return Err("--debounce-starts takes K/N/QUIET_MS".into()) };
    for round in 0..rounds {
        for key in 0..keys {
            let key = format!("key-{key}");
            let debounce = cairn::Debounce::new(&key, Duration::from_millis(quiet_ms));
            let input = u64::from(std::process::id()) * 1000 + round;
            let handle = engine.client().start("ticker", &input).debounce(debounce).await?;
            worker.log("start", handle.id(), &key).map_err(|e| format!("cannot log: {e:?}"))?;
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Cairn's warnings (fenced appends, recovered runs, slow heartbeats) go to standard error.
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    // With `--metrics-file PATH`, Cairn's metrics are written there (Prometheus text) at exit.
    let metrics = option(&args, "--metrics-file").map(|path| (path, cairn_http::metrics::Prometheus::install()));
    if args.len() < 4 {
        return Err(
            "usage: crash-worker STORE LOG RUNS [--schema NAME] [--extra-steps K] [--pause-ms MAX] [--exit-when-done]"
                .into(),
        );
    }
    let store: Arc<dyn Store> = if args[1].starts_with("postgres://") || args[1].starts_with("postgresql://") {
        let schema = option(&args, "--schema").unwrap_or_else(|| "cairn".into());
        let mut options = cairn_postgres::PostgresOptions::new(&args[1]).schema(schema);
        if let Some(ms) = option(&args, "--startup-wait-ms") {
            options = options.startup_wait(Duration::from_millis(ms.parse()?));
        }
        if let Some(ms) = option(&args, "--connect-timeout-ms") {
            options = options.connect_timeout(Duration::from_millis(ms.parse()?));
        }
        if let Some(size) = option(&args, "--pool-size") {
            options = options.pool_size(size.parse()?);
        }
        Arc::new(cairn_postgres::PostgresStore::connect(options).await?)
    } else {
        Arc::new(SqliteStore::open(&args[1])?)
    };
    let worker = Worker {
        log: Arc::new(PathBuf::from(&args[2])),
        extra_steps: option(&args, "--extra-steps").map(|v| v.parse()).transpose()?.unwrap_or(0),
        pause_ms: option(&args, "--pause-ms").map(|v| v.parse()).transpose()?.unwrap_or(120),
        abort_at: option(&args, "--abort-at"),
    };
    let millis = |name: &str, default: u64| -> Result<Duration, Box<dyn std::error::Error>> {
        Ok(Duration::from_millis(option(&args, name).map(|v| v.parse()).transpose()?.unwrap_or(default)))
    };
    let lease = millis("--lease-ms", 1000)?;
    let grace = millis("--grace-ms", 5000)?;
    let max_recoveries = option(&args, "--max-recoveries").map(|v| v.parse()).transpose()?;
    let runs: usize = args[3].parse()?;
    let exit_when_done = args.iter().any(|a| a == "--exit-when-done");
    let mut builder = Engine::builder();
    if let Some(max) = max_recoveries {
        builder = builder.max_recoveries(max);
    }
    if let Some(rate) = option(&args, "--tick-rate") {
        let (limit, period) = rate.split_once('/').ok_or("--tick-rate takes N/MS")?;
        let period = Duration::from_millis(period.parse()?);
        builder = builder.rate_limit(cairn::RateLimit::step("ticker", "tick", limit.parse()?, period));
    }
    if let Some(limit) = option(&args, "--ticker-limit") {
        builder = builder.concurrency(cairn::ConcurrencyRule::per_workflow("ticker", limit.parse()?));
    }
    let only = option(&args, "--only");
    let wanted = |name: &str| only.as_deref().is_none_or(|list| list.split(',').any(|n| n == name));
    builder = builder
        .shared_store(store)
        .lease_duration(lease)
        .poll_interval(Duration::from_millis(100))
        // Few runs at a time, so the work spreads over the worker's life and kills land mid-step.
        .max_active_runs(10);
    macro_rules! register {
        ($name:literal, $method:ident) => {
            if wanted($name) {
                let worker = worker.clone();
                builder = builder.register($name, 1, move |ctx: Ctx, index: u64| {
                    let worker = worker.clone();
                    async move { worker.$method(ctx, index).await }
                });
            }
        };
    }
    register!("crashy", crashy);
    register!("compose", compose);
    register!("looper", looper);
    register!("family", family);
    register!("member", member);
    register!("ticker", ticker);
    let engine = builder.start().await?;
    if let Some(spec) = option(&args, "--debounce-starts") {
        debounce_starts(&engine, &worker, &spec).await?;
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
        if !exit_when_done {
            continue;
        }
        let filter = RunFilter { status: Some(RunStatus::Completed), limit: Some(1000), ..RunFilter::default() };
        // A failed look (a connection cut under the fault tests) is tried again at the next tick.
        if engine.client().list(&filter).await.is_ok_and(|page| page.runs.len() >= runs) {
            break;
        }
    }
    engine.shutdown_within(grace).await;
    if let Some((path, Some(recorder))) = metrics {
        std::fs::write(path, recorder.render())?;
    }
    Ok(())
}
