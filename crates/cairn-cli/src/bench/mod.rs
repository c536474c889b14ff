//! `cairn bench`: the workloads of docs/benchmarks.md. W1 (throughput) and W2 (latency) here, on
//! every store and with several worker processes; the others in `workloads` (W4, W5, W6), `list`,
//! `priority` and `http` (W1 and W2 through a server).

use anyhow::{Context, Result, bail};
use cairn::prelude::*;
use cairn::{Durability, MemoryStore, SqliteOptions, SqliteStore, Store};
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod args;
mod http;
mod list;
mod priority;
mod stats;
mod workloads;

pub(crate) use args::{BenchArgs, DurabilityArg, StoreKind, WorkerArgs, Workload, durability_name, text_wanted};
use http::*;
use list::*;
use priority::*;
use stats::{percentile, sorted, statement_counts};
use workloads::*;

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

/// An extra bench worker: executes `noop` runs until it is killed or told to stop.
pub(crate) async fn worker(args: WorkerArgs) -> Result<()> {
    let options = cairn_postgres::PostgresOptions::new(&args.database_url).schema(&args.schema);
    let store = cairn_postgres::PostgresStore::connect(options).await?;
    let builder = Engine::builder().store(store).max_active_runs(args.max_active_runs);
    let engine = w1_workflows(builder, noop_workflow(Arc::new(Mutex::new(Vec::new())), false)).start().await?;
    cairn_http::stop_requested().await;
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
        Workload::List => {
            Some(list_bench(Arc::clone(&store), bench_schema.clone(), runs, (named.0, named.1), args.json).await)
        }
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
        let client = engine.client();
        for _ in 0..runs {
            marks.lock().unwrap_or_else(|p| p.into_inner()).clear();
            let begun = Instant::now();
            let handle = client.start("noop", &steps).await?;
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
                    let mut run = cairn::store::NewRun::new(
                        id.clone(),
                        cairn::WorkflowName::new("prunable").expect("a valid name"),
                        1,
                        serde_json::value::to_raw_value(&i)?,
                        at,
                    );
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
