//! `cairn bench w1|w2`: the throughput and latency workloads of docs/benchmarks.md.

use anyhow::{Context, Result, bail};
use cairn::prelude::*;
use cairn::{Durability, MemoryStore, SqliteOptions, SqliteStore, Store};
use clap::{Args, ValueEnum};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Workload {
    /// Throughput: many runs started at once.
    W1,
    /// Latency: one run at a time.
    W2,
    /// Resume: runs with a long journal (default 10,000 steps) suspended on a signal; each is
    /// signalled on a freshly started engine and timed from the signal to its result.
    W4,
    /// Fan-out: one run whose `ctx.each` runs --steps items (default 10,000), --concurrency at a
    /// time (default 100), one no-op step each; timed from the start to the result.
    W5,
    /// Long loop: one run whose `ctx.repeat` runs --steps iterations (default 1,000,000) of one
    /// no-op step each, checkpointed every iteration with the last 10 kept; iterations/s, the
    /// process's peak RSS and the journal rows left at the end.
    W6,
    /// Lists at scale: fill the store with --runs finished runs of one step (1 % failed), then
    /// time the HTTP API's `GET /v1/workflows` and `GET /v1/workflows/{name}/runs?status=failed`
    /// (first page, and pages 1 to 100 by cursor), served in this process.
    List,
    /// Priority at scale: queue --runs runs (default 100,000; no worker) over 10 priorities and
    /// 100 fairness keys (half of them one key's), then print the plan of a claim of the first
    /// 128 and time 20 such claims (each leases what it claims, so the queue shrinks by 128).
    Priority,
}

impl Workload {
    /// How reports name the W1/W2 workloads.
    fn name(self) -> &'static str {
        if self == Workload::W2 { "w2" } else { "w1" }
    }
}

/// Whether a report's text line is printed: without `--json`, or on a terminal.
fn text_wanted(json: bool) -> bool {
    !json || std::io::IsTerminal::is_terminal(&std::io::stdout())
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum StoreKind {
    /// In-process memory.
    Memory,
    /// An SQLite file (in a temporary directory under the current one, removed afterwards).
    Sqlite,
    /// PostgreSQL at --database-url, in a fresh schema dropped afterwards.
    Postgres,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum DurabilityArg {
    /// synchronous=FULL: commits survive power loss.
    Full,
    /// synchronous=NORMAL: commits survive a process crash.
    Normal,
}

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// Which workload.
    workload: Workload,
    /// Which store.
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// SQLite durability.
    #[arg(long, value_enum, default_value = "full")]
    durability: DurabilityArg,
    /// Runs (default: 1000 for w1, 200 for w2, 10 for w4).
    #[arg(long)]
    runs: Option<usize>,
    /// Steps per run (default: 10; 10,000 for w4 and w5).
    #[arg(long)]
    steps: Option<usize>,
    /// W5: items in flight at once.
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// W1/W2 with a retention sweep in progress: first fill the store with this many ended runs
    /// of 10 steps each, past their retention, then delete them in the background (as an
    /// engine's sweeper does, paced by `Client::sweep`) while the workload runs.
    #[arg(long, default_value_t = 0)]
    prunable: usize,
    /// W1 under a concurrency limit: at most this many runs at once (per key, with
    /// --limit-keys), across the workers; the claim's plan is printed while runs wait.
    #[arg(long)]
    limit: Option<u32>,
    /// With --limit: the runs are spread over this many keys, each with its own limit.
    #[arg(long)]
    limit_keys: Option<usize>,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// Worker processes sharing the work (`--store postgres` only): this one plus N-1 more.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// PostgreSQL URL for `--store postgres`.
    #[arg(long, env = "CAIRN_DATABASE_URL", default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    database_url: String,
    /// W1/W2 through the HTTP API of a running `cairn serve --examples` at this URL (its `noop`
    /// workflow): each run started with `POST …/runs` and awaited with `GET …/result`; `--store`
    /// is then the server's business.
    #[arg(long)]
    url: Option<String>,
    /// The server's bearer token (with --url).
    #[arg(long, env = "CAIRN_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// Runs in flight at once over HTTP (each holds a connection while it waits for its result).
const HTTP_CONCURRENCY: usize = 256;

/// W1 or W2 against a server: starts and results over the API.
async fn http_bench(args: &BenchArgs, url: &str, runs: usize, steps: usize) -> Result<()> {
    use cairn_http::views::{RunDetail, StartedRun};
    let remote = Arc::new(crate::remote::Remote::new(url, args.token.clone())?);
    let one = move |remote: Arc<crate::remote::Remote>| async move {
        let begun = Instant::now();
        let body = serde_json::json!({ "input": steps }).to_string();
        let started: StartedRun = remote.call("POST", "/v1/workflows/noop/runs", Some(body)).await?;
        let path = format!("/v1/workflows/noop/runs/{}/result?timeout=300s", crate::remote::encode(&started.run.id));
        let run: RunDetail = remote.call("GET", &path, None).await?;
        if run.listed.run.status != "completed" {
            bail!("run {} ended {}: {:?}", run.listed.run.id, run.listed.run.status, run.listed.run.error);
        }
        Ok::<_, anyhow::Error>(begun.elapsed().as_secs_f64() * 1e3)
    };
    let name = args.workload.name();
    let mut progress = crate::progress::Progress::new(format!("{name} over HTTP"), "runs", Some(runs as u64));
    let started = Instant::now();
    let mut run_ms = Vec::with_capacity(runs);
    if args.workload == Workload::W2 {
        for _ in 0..runs {
            run_ms.push(one(Arc::clone(&remote)).await?);
            progress.add(1);
        }
    } else {
        let limit = Arc::new(tokio::sync::Semaphore::new(HTTP_CONCURRENCY));
        let tasks: Vec<_> = (0..runs)
            .map(|_| {
                let (remote, limit) = (Arc::clone(&remote), Arc::clone(&limit));
                tokio::spawn(async move {
                    let _permit = limit.acquire_owned().await?;
                    one(remote).await
                })
            })
            .collect();
        for task in tasks {
            run_ms.push(task.await??);
            progress.add(1);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    progress.finish();
    let steps_total = runs * steps;
    let run_sorted = sorted(run_ms);
    let report = serde_json::json!({
        "workload": name,
        "store": "http",
        "url": url,
        "runs": runs,
        "steps": steps_total,
        "seconds": seconds,
        "runs_per_sec": runs as f64 / seconds,
        "steps_per_sec": steps_total as f64 / seconds,
        "run_ms_p50": percentile(&run_sorted, 50.0),
        "run_ms_p99": percentile(&run_sorted, 99.0),
        "step_overhead_us_p50": percentile(&run_sorted, 50.0) * 1e3 / steps as f64,
        "concurrency": if args.workload == Workload::W2 { 1 } else { HTTP_CONCURRENCY.min(runs) },
    });
    if text_wanted(args.json) {
        out!(
            "{name} over HTTP at {url}: {runs} runs x {steps} steps in {seconds:.3} s = {:.0} runs/s, {:.0} steps/s; run p50 {:.2} ms, p99 {:.2} ms",
            runs as f64 / seconds,
            steps_total as f64 / seconds,
            percentile(&run_sorted, 50.0),
            percentile(&run_sorted, 99.0),
        );
    }
    if args.json {
        out!("{report}");
    }
    Ok(())
}

/// `steps` sequential no-op steps returning a small JSON value; records when each step returned.
pub(crate) fn noop_workflow(
    marks: Arc<Mutex<Vec<Instant>>>,
    record: bool,
) -> impl Fn(Ctx, usize) -> futures::future::BoxFuture<'static, Result<usize, WorkflowError>> + Send + Sync + 'static {
    move |ctx: Ctx, steps: usize| {
        let marks = Arc::clone(&marks);
        Box::pin(async move {
            let mut total = 0;
            for i in 0..steps {
                let value: usize = ctx.step(&format!("s[{i}]"), || async move { Ok::<_, StepError>(i) }).await?;
                total += value;
                if record {
                    marks.lock().unwrap_or_else(|p| p.into_inner()).push(Instant::now());
                }
            }
            Ok(total)
        })
    }
}

/// Statements run between two `statement_calls` snapshots, most frequent first, each as the
/// start of its text (whitespace squeezed, at most 100 characters).
fn statement_counts(before: &[(String, i64)], after: &[(String, i64)]) -> Vec<(String, i64)> {
    let before: std::collections::HashMap<&str, i64> = before.iter().map(|(q, n)| (q.as_str(), *n)).collect();
    let mut counts: Vec<(String, i64)> = after
        .iter()
        .map(|(query, n)| (query, n - before.get(query.as_str()).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .map(|(query, n)| (query.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(100).collect(), n))
        .collect();
    counts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    counts
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// One step; fails (for good) when its input is a multiple of 100.
async fn one_step(ctx: Ctx, n: u64) -> Result<u64, WorkflowError> {
    ctx.step("only", || async move {
        if n.is_multiple_of(100) { Err(StepError::terminal(format!("{n} is a multiple of 100"))) } else { Ok(n) }
    })
    .await
}

/// Runs `one(n)` for every `n` below `runs`, each in a task of its own (so the store's writer
/// commits them in batches), 5,000 at a time, shown as `what`; how many seconds it took.
async fn fill<F, Fut>(what: &str, runs: usize, one: F) -> Result<f64>
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<(), ClientError>> + Send + 'static,
{
    let mut progress = crate::progress::Progress::new(what, "runs", Some(runs as u64));
    let filled = Instant::now();
    for first in (0..runs as u64).step_by(5000) {
        let chunk = first..(first + 5000).min(runs as u64);
        let tasks: Vec<_> = chunk.clone().map(|n| tokio::spawn(one(n))).collect();
        for task in tasks {
            task.await??;
        }
        progress.add(chunk.end - chunk.start);
    }
    progress.finish();
    Ok(filled.elapsed().as_secs_f64())
}

/// The `list` workload.
async fn list_bench(
    store: Arc<dyn Store>,
    runs: usize,
    (store_name, durability): (&str, &str),
    json: bool,
) -> Result<()> {
    use cairn_http::views::{RunPage, Workflows};
    let engine = Engine::builder()
        .shared_store(store)
        .sweep_every(None)
        .max_active_runs(5000)
        .register("orders", 1, one_step)
        .start()
        .await?;
    let client = engine.client();
    let fill_seconds = fill("list: filling", runs, |n| {
        let client = client.clone();
        async move {
            let handle = client.start("orders", &n).await?;
            let _ = handle.result::<u64>().await;
            Ok(())
        }
    })
    .await?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = cairn_http::router(engine.client(), cairn_http::ApiConfig::default());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let remote = crate::remote::Remote::new(&url, None)?;
    let timed = |samples: &mut Vec<f64>, began: Instant| samples.push(began.elapsed().as_secs_f64() * 1e3);
    let (mut counts_ms, mut first_ms, mut deep_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut failed = 0;
    for _ in 0..50 {
        let began = Instant::now();
        let workflows: Workflows = remote.call("GET", "/v1/workflows", None).await?;
        timed(&mut counts_ms, began);
        failed = workflows.workflows.iter().map(|w| w.runs.get("failed").copied().unwrap_or(0)).sum::<u64>();
    }
    for _ in 0..5 {
        let mut cursor: Option<String> = None;
        for page in 0..=100 {
            let path = match &cursor {
                Some(cursor) => format!("/v1/workflows/orders/runs?status=failed&limit=100&cursor={cursor}"),
                None => "/v1/workflows/orders/runs?status=failed&limit=100".to_owned(),
            };
            let began = Instant::now();
            let answer: RunPage = remote.call("GET", &path, None).await?;
            timed(if page == 0 { &mut first_ms } else { &mut deep_ms }, began);
            cursor = answer.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
    }
    server.abort();
    engine.shutdown().await;
    let (counts, first, deep) = (sorted(counts_ms), sorted(first_ms), sorted(deep_ms));
    let report = serde_json::json!({
        "workload": "list",
        "store": store_name,
        "durability": durability,
        "runs": runs,
        "failed_runs": failed,
        "fill_seconds": fill_seconds,
        "workflows_ms_p50": percentile(&counts, 50.0),
        "workflows_ms_p99": percentile(&counts, 99.0),
        "first_page_ms_p50": percentile(&first, 50.0),
        "first_page_ms_p99": percentile(&first, 99.0),
        "deep_pages": deep.len(),
        "deep_page_ms_p50": percentile(&deep, 50.0),
        "deep_page_ms_p99": percentile(&deep, 99.0),
    });
    if text_wanted(json) {
        out!(
            "list on {store_name} ({durability}): {runs} runs ({failed} failed) filled in {fill_seconds:.1} s; GET /v1/workflows p50 {:.2} ms p99 {:.2} ms; failed runs, first page p50 {:.2} ms p99 {:.2} ms; pages 1-100 by cursor p50 {:.2} ms p99 {:.2} ms ({} pages)",
            percentile(&counts, 50.0),
            percentile(&counts, 99.0),
            percentile(&first, 50.0),
            percentile(&first, 99.0),
            percentile(&deep, 50.0),
            percentile(&deep, 99.0),
            deep.len(),
        );
    }
    if json {
        out!("{report}");
    }
    Ok(())
}

/// Arguments of the hidden `bench-worker` subcommand.
#[derive(Args)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    database_url: String,
    #[arg(long)]
    schema: String,
    #[arg(long)]
    max_active_runs: usize,
}

/// An extra bench worker: executes `noop` runs until it is killed or told to stop.
pub(crate) async fn worker(args: WorkerArgs) -> Result<()> {
    let options = cairn_postgres::PostgresOptions::new(&args.database_url).schema(&args.schema);
    let store = cairn_postgres::PostgresStore::connect(options).await?;
    let builder = Engine::builder().store(store).max_active_runs(args.max_active_runs);
    let engine = w1_workflows(builder, noop_workflow(Arc::new(Mutex::new(Vec::new())), false)).start().await?;
    crate::stop_requested().await;
    engine.shutdown().await;
    Ok(())
}

/// `builder` with W1's workflows: `noop` (`steps` no-op steps) and `keyed` (the same, input
/// `[steps, key]`, for `--limit-keys`), on every process that runs them.
fn w1_workflows<F>(builder: cairn::EngineBuilder, noop: F) -> cairn::EngineBuilder
where
    F: Fn(Ctx, usize) -> futures::future::BoxFuture<'static, Result<usize, WorkflowError>> + Send + Sync + 'static,
{
    let noop = Arc::new(noop);
    let keyed = Arc::clone(&noop);
    builder.register("noop", 1, move |ctx: Ctx, steps: usize| noop(ctx, steps)).register(
        "keyed",
        1,
        move |ctx: Ctx, (steps, _key): (usize, String)| keyed(ctx, steps),
    )
}

/// Kills the extra worker processes when the bench ends, however it ends.
struct Workers(Vec<std::process::Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) async fn run(args: BenchArgs) -> Result<()> {
    let runs = args.runs.unwrap_or(match args.workload {
        Workload::W1 => 1000,
        Workload::W2 => 200,
        Workload::W4 => 10,
        Workload::W5 | Workload::W6 => 1,
        Workload::List => 1_000_000,
        Workload::Priority => 100_000,
    });
    let steps = args.steps.unwrap_or(match args.workload {
        Workload::W4 | Workload::W5 => 10_000,
        Workload::W6 => 1_000_000,
        _ => 10,
    });
    if runs == 0 || steps == 0 {
        bail!("--runs and --steps must be at least 1");
    }
    // W4, W5 and W6 measure runs of their own, one at a time.
    let own_runs = matches!(args.workload, Workload::W4 | Workload::W5 | Workload::W6 | Workload::Priority);
    if args.prunable > 0 && own_runs {
        bail!("--prunable applies to w1 and w2");
    }
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if let Some(url) = &args.url {
        if own_runs || args.prunable > 0 || args.workers > 1 {
            bail!("--url runs w1 or w2 as they are (no --prunable, --workers)");
        }
        return http_bench(&args, url, runs, steps).await;
    }
    let durability = match args.durability {
        DurabilityArg::Full => Durability::Full,
        DurabilityArg::Normal => Durability::Normal,
    };
    let dir = tempfile::Builder::new().prefix(".cairn-bench-").tempdir_in(".").context("creating a bench directory")?;
    let mut bench_schema: Option<cairn_postgres::PostgresStore> = None;
    let mut schema_name = String::new();
    if args.workers > 1 && args.store != StoreKind::Postgres {
        bail!("--workers needs --store postgres");
    }
    let workers = args.workers.max(1);
    let per_worker = runs.div_ceil(workers);
    let sqlite_path = dir.path().join("bench.db");
    let mut sqlite_store: Option<SqliteStore> = None;
    let (store, store_name, floor_us): (Arc<dyn Store>, &str, f64) = match args.store {
        StoreKind::Memory => (Arc::new(MemoryStore::new()), "memory", 0.0),
        StoreKind::Sqlite => {
            let floor = cairn::store::sqlite_commit_floor_us(&dir.path().join("floor.db"), durability, 200)
                .context("measuring the commit floor")?;
            let options = SqliteOptions { durability, ..SqliteOptions::default() };
            let store = SqliteStore::open_with(&sqlite_path, options)?;
            sqlite_store = Some(store.clone());
            (Arc::new(store), "sqlite", floor)
        }
        StoreKind::Postgres => {
            let schema = format!("cairn_bench_{}", std::process::id());
            schema_name = schema.clone();
            let options = cairn_postgres::PostgresOptions::new(&args.database_url).schema(&schema);
            let store = cairn_postgres::PostgresStore::connect(options).await?;
            let floor = store.commit_floor_us(200).await?;
            bench_schema = Some(store.clone());
            (Arc::new(store), "postgres", floor)
        }
    };
    let explain = ClaimPlan { sqlite: sqlite_store, postgres: bench_schema.clone() };
    // The workloads with a runner of their own; W1 and W2 go on below.
    let named = (store_name, durability_name(args.store, durability), floor_us);
    let result = match args.workload {
        Workload::List => Some(list_bench(Arc::clone(&store), runs, (named.0, named.1), args.json).await),
        Workload::Priority => {
            Some(priority_bench(Arc::clone(&store), &explain, runs, (named.0, named.1), args.json).await)
        }
        Workload::W6 => Some(long_loop(Arc::clone(&store), steps, named, args.json).await),
        Workload::W5 => Some(fan_out(Arc::clone(&store), runs, (steps, args.concurrency), named, args.json).await),
        Workload::W4 => {
            let reopen =
                Reopen { kind: args.store, sqlite_path, durability, url: &args.database_url, schema: &schema_name };
            Some(resume(Arc::clone(&store), reopen, runs, steps, named, args.json).await)
        }
        Workload::W1 | Workload::W2 => None,
    };
    if let Some(result) = result {
        if let Some(store) = bench_schema {
            store.drop_schema().await?;
        }
        return result;
    }
    let marks = Arc::new(Mutex::new(Vec::new()));
    let extra = Workers(
        (1..workers)
            .map(|_| {
                std::process::Command::new(std::env::current_exe()?)
                    .args(["bench-worker", "--database-url", &args.database_url, "--schema", &schema_name])
                    .args(["--max-active-runs", &per_worker.to_string()])
                    .spawn()
            })
            .collect::<std::io::Result<Vec<_>>>()
            .context("starting the extra bench workers")?,
    );
    let sweeping = if args.prunable > 0 { Some(fill_prunable(&store, args.prunable).await?) } else { None };
    let builder =
        Engine::builder().shared_store(Arc::clone(&store)).sweep_every(None).max_active_runs(per_worker.max(1));
    let mut builder = w1_workflows(builder, noop_workflow(Arc::clone(&marks), args.workload == Workload::W2));
    let (workflow, keys) = match (args.limit, args.limit_keys) {
        (Some(limit), Some(keys)) => {
            builder = builder.concurrency(cairn::ConcurrencyRule::per_key("keyed", "/1", limit));
            ("keyed", Some(keys.max(1)))
        }
        (Some(limit), None) => {
            builder = builder.concurrency(cairn::ConcurrencyRule::per_workflow("noop", limit));
            ("noop", None)
        }
        (None, Some(_)) => bail!("--limit-keys needs --limit"),
        (None, None) => ("noop", None),
    };
    let engine = builder.start().await?;

    let calls_before = match &bench_schema {
        Some(store) => store.statement_calls().await?,
        None => None,
    };
    let mut run_ms = Vec::with_capacity(runs);
    let mut step_us = Vec::new();
    let mut claim_plan: Vec<String> = Vec::new();
    let sweeper = sweeping.map(|client| {
        tokio::spawn(async move {
            let begun = Instant::now();
            let deleted = client.sweep().await.map(|ids| ids.len());
            (deleted, begun.elapsed())
        })
    });
    let started = Instant::now();
    let name = args.workload.name();
    let mut progress = crate::progress::Progress::new(name, "runs", Some(runs as u64));
    if args.workload == Workload::W2 {
        for _ in 0..runs {
            marks.lock().unwrap_or_else(|p| p.into_inner()).clear();
            let begun = Instant::now();
            let handle = engine.start("noop", &steps).await?;
            handle.result::<usize>().await?;
            run_ms.push(begun.elapsed().as_secs_f64() * 1e3);
            let marks = marks.lock().unwrap_or_else(|p| p.into_inner());
            step_us.extend(marks.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e6));
            progress.add(1);
        }
    } else {
        let client = engine.client();
        let tasks: Vec<_> = (0..runs)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    let begun = Instant::now();
                    let handle = match keys {
                        Some(keys) => client.start(workflow, &(steps, format!("k{}", i % keys))).await?,
                        None => client.start(workflow, &steps).await?,
                    };
                    handle.result::<usize>().await?;
                    Ok::<_, ClientError>(begun.elapsed())
                })
            })
            .collect();
        if args.limit.is_some() {
            // While runs wait for slots: the plan of a claim.
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            claim_plan = explain.explain(&bench_claim(workflow, 128, std::time::Duration::ZERO)).await?;
        }
        for task in tasks {
            run_ms.push(task.await??.as_secs_f64() * 1e3);
            progress.add(1);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    progress.finish();
    let sweep = match sweeper {
        Some(task) => {
            let still_sweeping = !task.is_finished();
            let (deleted, took) = task.await?;
            Some((deleted?, took.as_secs_f64(), still_sweeping))
        }
        None => None,
    };
    let statements = match (&bench_schema, calls_before) {
        (Some(store), Some(before)) => store.statement_calls().await?.map(|after| statement_counts(&before, &after)),
        _ => None,
    };
    engine.shutdown().await;
    drop(extra);
    if let Some(store) = bench_schema {
        store.drop_schema().await?;
    }

    let steps_total = runs * steps;
    let run_sorted = sorted(run_ms);
    let step_sorted = sorted(step_us);
    let step_p50 = if step_sorted.is_empty() {
        // W1 does not time single steps: the whole-run wall time per step stands in.
        seconds * 1e6 / steps_total as f64
    } else {
        percentile(&step_sorted, 50.0)
    };
    let durability_name = durability_name(args.store, durability);
    let report = serde_json::json!({
        "workload": name,
        "store": store_name,
        "durability": durability_name,
        "runs": runs,
        "workers": workers,
        "limit": args.limit,
        "limit_keys": args.limit_keys,
        "claim_plan": claim_plan,
        "steps": steps_total,
        "seconds": seconds,
        "runs_per_sec": runs as f64 / seconds,
        "steps_per_sec": steps_total as f64 / seconds,
        "run_ms_p50": percentile(&run_sorted, 50.0),
        "run_ms_p99": percentile(&run_sorted, 99.0),
        "step_overhead_us_p50": step_p50,
        "step_us_p99": percentile(&step_sorted, 99.0),
        "floor_us": floor_us,
        "swept_runs": sweep.map(|(deleted, _, _)| deleted),
        "sweep_seconds": sweep.map(|(_, took, _)| took),
        "sweep_outlasted_workload": sweep.map(|(_, _, still)| still),
        "sql_statements_per_step": statements.as_ref().map(|s| s.iter().map(|(_, n)| n).sum::<i64>() as f64 / steps_total as f64),
    });
    if text_wanted(args.json) {
        out!(
            "{} on {} ({}, {} worker(s)): {} runs x {} steps in {:.3} s = {:.0} runs/s, {:.0} steps/s; run p50 {:.2} ms, p99 {:.2} ms; step p50 {:.1} us; commit floor {:.1} us",
            report["workload"].as_str().unwrap_or_default(),
            store_name,
            durability_name,
            workers,
            runs,
            steps,
            seconds,
            runs as f64 / seconds,
            steps_total as f64 / seconds,
            percentile(&run_sorted, 50.0),
            percentile(&run_sorted, 99.0),
            step_p50,
            floor_us
        );
        if let Some((deleted, took, still)) = sweep {
            let during = if still { "throughout the workload" } else { "ending before the workload did" };
            out!("retention sweep in the background: {deleted} ended runs deleted in {took:.2} s, {during}");
        }
    }
    if !claim_plan.is_empty() && text_wanted(args.json) {
        out!("the plan of a claim of 128 while runs waited for slots:");
        print_plan(&claim_plan);
    }
    if let Some(statements) = &statements
        && text_wanted(args.json)
    {
        out!("SQL statements (= round trips) per step, from pg_stat_statements:");
        for (query, calls) in statements {
            out!("  {:>8.3}  {}", *calls as f64 / steps_total as f64, query);
        }
    }
    if args.json {
        out!("{report}");
    }
    Ok(())
}

fn durability_name(kind: StoreKind, durability: Durability) -> &'static str {
    match kind {
        StoreKind::Memory => "none",
        StoreKind::Sqlite => durability.as_str(),
        StoreKind::Postgres => "synchronous_commit=on",
    }
}

/// Fills the store with `count` ended runs of 10 steps each whose retention has passed (created
/// with their journals in one `create_run` each, then cancelled), for a sweep to delete; returns
/// a client to sweep with.
async fn fill_prunable(store: &Arc<dyn Store>, count: usize) -> Result<Client> {
    use cairn::journal::{Event, StepPath};
    let client = Client::from_shared(Arc::clone(store));
    let output = serde_json::value::to_raw_value(&1)?;
    let at = cairn::Timestamp::from_system_time(std::time::SystemTime::now());
    let steps: Vec<Event> = (0..10u32)
        .map(|i| {
            Ok(Event::StepCompleted {
                path: StepPath::parse(&format!("s[{i}]"))?,
                ordinal: i,
                attempt: 1,
                output: output.clone(),
                started_at: Some(at),
            })
        })
        .collect::<Result<_>>()?;
    let mut next = 0;
    while next < count {
        let batch: Vec<_> = (next..count.min(next + 1000))
            .map(|i| {
                let (store, client, steps) = (Arc::clone(store), client.clone(), steps.clone());
                tokio::spawn(async move {
                    let id = cairn::RunId::new(format!("prunable-{i:07}"));
                    let mut run =
                        cairn::store::NewRun::new(id.clone(), "prunable", 1, serde_json::value::to_raw_value(&i)?, at);
                    run.retention = Some(std::time::Duration::ZERO);
                    run.prefix = steps;
                    store.create_run(run).await?;
                    client.cancel(&id).await?;
                    Ok::<_, anyhow::Error>(())
                })
            })
            .collect();
        for task in batch {
            task.await??;
        }
        next += 1000;
    }
    Ok(client)
}

/// The W5 workflow: `ctx.each` over `items` items, `concurrency` at a time, one no-op step each.
async fn fan_out_workflow(ctx: Ctx, (items, concurrency): (usize, usize)) -> Result<usize, WorkflowError> {
    let done = ctx
        .each("item", 0..items, concurrency, |ctx, i| async move {
            ctx.step("noop", || async move { Ok::<_, StepError>(i) }).await
        })
        .await?;
    done.into_iter().try_fold(0, |n, item| item.map(|_| n + 1))
}

/// W5: `runs` runs (one after another) of one `ctx.each` over `items` items, each timed from its
/// start to its result.
async fn fan_out(
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
        let done: usize = engine.start("fanout", &(items, concurrency)).await?.result().await?;
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
async fn long_loop_workflow(ctx: Ctx, iterations: u64) -> Result<u64, WorkflowError> {
    ctx.repeat("tick", 0u64, |ctx, done| async move {
        ctx.step("noop", || async { Ok::<_, StepError>(()) }).await?;
        let done = done + 1;
        Ok(if done == iterations { std::ops::ControlFlow::Break(done) } else { std::ops::ControlFlow::Continue(done) })
    })
    .await
}

/// The process's peak resident set size in KiB (`VmHWM`; `None` where /proc has none).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// W6: one run of a durable loop of `iterations` one-step iterations, timed from its start to
/// its result; then the journal rows left and the peak RSS.
async fn long_loop(
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
    let run = engine.start("loop", &(iterations as u64)).await?;
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

/// The SQL store under a bench, to ask for the plan of its claim.
struct ClaimPlan {
    sqlite: Option<SqliteStore>,
    postgres: Option<cairn_postgres::PostgresStore>,
}

impl ClaimPlan {
    async fn explain(&self, request: &cairn::store::ClaimRequest) -> Result<Vec<String>> {
        Ok(match (&self.sqlite, &self.postgres) {
            (Some(store), _) => store.explain_claim(request).await?,
            (_, Some(store)) => store.explain_claim(request).await?,
            _ => vec!["(the memory store has no query plan: a B-tree range in claim order)".to_owned()],
        })
    }
}

/// A claim now by the bench of up to `limit` runs of `workflow` v1, leased for `lease`.
fn bench_claim(workflow: &str, limit: usize, lease: std::time::Duration) -> cairn::store::ClaimRequest {
    let now = cairn::Timestamp::from_system_time(std::time::SystemTime::now());
    cairn::store::ClaimRequest {
        owner: "bench".into(),
        workflows: vec![cairn::store::WorkflowKey { name: workflow.into(), version: 1 }],
        now,
        lease_now: now,
        lease_until: now + lease,
        limit,
    }
}

/// Prints a claim's plan, one indented line per step.
fn print_plan(plan: &[String]) {
    for line in plan {
        out!("  {line}");
    }
}

/// The fairness key of the `n`th queued run of the priority workload: half are `tenant-0`'s, the
/// rest spread over `tenant-1` to `tenant-99`.
fn bench_tenant(n: u64) -> String {
    if n.is_multiple_of(2) { "tenant-0".to_owned() } else { format!("tenant-{}", 1 + n % 99) }
}

/// The `priority` workload.
async fn priority_bench(
    store: Arc<dyn Store>,
    plan: &ClaimPlan,
    runs: usize,
    (store_name, durability): (&str, &str),
    json: bool,
) -> Result<()> {
    const PRIORITIES: u64 = 10;
    const CLAIM: usize = 128;
    const CLAIMS: usize = 20;
    let client = Client::from_shared(Arc::clone(&store));
    let fill_seconds = fill("priority: queueing", runs, |n| {
        let client = client.clone();
        async move {
            let priority = (n * 7 % PRIORITIES) as i32;
            client.start("queued", &n).priority(priority).fairness_key(bench_tenant(n)).await.map(drop)
        }
    })
    .await?;
    let request = bench_claim("queued", CLAIM, std::time::Duration::from_secs(3600));
    let plan = plan.explain(&request).await?;
    let mut claim_ms = Vec::with_capacity(CLAIMS);
    let mut first = Vec::new();
    for i in 0..CLAIMS {
        let began = Instant::now();
        let claimed = store.claim(&request).await?;
        claim_ms.push(began.elapsed().as_secs_f64() * 1e3);
        if claimed.len() != CLAIM.min(runs - i * CLAIM) {
            bail!("claim {i} took {} runs", claimed.len());
        }
        if i == 0 {
            first = claimed;
        }
    }
    let top = (PRIORITIES - 1) as i32;
    let keys: std::collections::BTreeSet<&str> = first.iter().filter_map(|r| r.fairness_key.as_deref()).collect();
    if first.iter().any(|r| r.priority != top) {
        bail!("the first claim took runs below priority {top}");
    }
    let sorted_ms = sorted(claim_ms);
    let report = serde_json::json!({
        "workload": "priority",
        "store": store_name,
        "durability": durability,
        "queued": runs,
        "fill_seconds": fill_seconds,
        "claim": CLAIM,
        "claims": CLAIMS,
        "claim_ms_p50": percentile(&sorted_ms, 50.0),
        "claim_ms_max": sorted_ms.last().copied().unwrap_or(0.0),
        "first_claim_priority": top,
        "first_claim_keys": keys.len(),
        "plan": plan,
    });
    if text_wanted(json) {
        out!(
            "priority on {store_name} ({durability}): {runs} runs queued in {fill_seconds:.1} s; a claim of {CLAIM}: p50 {:.2} ms, max {:.2} ms over {CLAIMS}; the first took priority {top} only, from {} fairness keys; its plan:",
            percentile(&sorted_ms, 50.0),
            sorted_ms.last().copied().unwrap_or(0.0),
            keys.len()
        );
        print_plan(&plan);
    }
    if json {
        out!("{report}");
    }
    Ok(())
}

/// How W4 opens the store again for each fresh engine.
struct Reopen<'a> {
    kind: StoreKind,
    sqlite_path: std::path::PathBuf,
    durability: Durability,
    url: &'a str,
    schema: &'a str,
}

impl Reopen<'_> {
    async fn open(&self, memory: &Arc<dyn Store>) -> Result<Arc<dyn Store>> {
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
async fn resumable(ctx: Ctx, steps: usize) -> Result<usize, WorkflowError> {
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
async fn resume(
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
        ids.push(engine.start("resume", &steps).await?.id().clone());
    }
    for id in &ids {
        while engine.get(id).await?.status != cairn::RunStatus::Suspended {
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
        engine.signal(id, "go", &1usize).await?;
        let total: usize = engine.result(id).await?;
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
