//! `cairn bench list`: lists and counts over a store filled with finished runs.

use super::args::*;
use super::stats::*;
use anyhow::Result;
use cairn::prelude::*;
use cairn::{StartError, Store};
use std::sync::Arc;
use std::time::Instant;

/// An order: its number, and one of 1,000 customers.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Order {
    n: u64,
    customer: String,
}

impl Order {
    /// Order `n`, of customer `c{n % 1000}`.
    fn new(n: u64) -> Self {
        Order { n, customer: format!("c{}", n % 1000) }
    }
}

/// One step; fails (for good) when the order's number is a multiple of 100.
pub(super) async fn one_step(ctx: Ctx, order: Order) -> Result<u64, WorkflowError> {
    let n = order.n;
    ctx.step("only", || async move {
        if n.is_multiple_of(100) { Err(StepError::terminal(format!("{n} is a multiple of 100"))) } else { Ok(n) }
    })
    .await
}

/// Runs `one(n)` for every `n` below `runs`, each in a task of its own (so the store's writer
/// commits them in batches), 5,000 at a time, shown as `what`; how many seconds it took.
pub(super) async fn fill<F, Fut>(what: &str, runs: usize, one: F) -> Result<f64>
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<(), StartError>> + Send + 'static,
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

/// The `list` workload. On PostgreSQL (`postgres`, the same store) the tables are vacuumed
/// and analyzed after the fill, as autovacuum would soon do after a bulk load (some servers, this
/// project's test machines among them, run with it off).
pub(super) async fn list_bench(
    store: Arc<dyn Store>,
    postgres: Option<cairn_postgres::PostgresStore>,
    runs: usize,
    (store_name, durability): (&str, &str),
    json: bool,
) -> Result<()> {
    use cairn_api::Operations;
    use cairn_api::views::{RunPage, Workflows};
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
            let handle = client.start("orders", &Order::new(n)).await?;
            let _ = handle.result::<u64>().await;
            Ok(())
        }
    })
    .await?;
    let vacuum_seconds = match &postgres {
        Some(store) => {
            let began = Instant::now();
            store.vacuum_analyze().await?;
            Some(began.elapsed().as_secs_f64())
        }
        None => None,
    };

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = cairn_http::router(engine.client(), cairn_http::ApiConfig::default());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let remote = cairn_client::Client::new(&url, None)?;
    let timed = |samples: &mut Vec<f64>, began: Instant| samples.push(began.elapsed().as_secs_f64() * 1e3);
    let (mut counts_ms, mut first_ms, mut deep_ms) = (Vec::new(), Vec::new(), Vec::new());
    let mut failed = 0;
    for _ in 0..50 {
        let began = Instant::now();
        let workflows: Workflows = remote.workflows().await?;
        timed(&mut counts_ms, began);
        failed = workflows.workflows.iter().map(|w| w.runs.get("failed").copied().unwrap_or(0)).sum::<u64>();
    }
    for _ in 0..5 {
        let mut cursor: Option<String> = None;
        for page in 0..=100 {
            let query = cairn_client::ListQuery {
                workflow: Some("orders".into()),
                status: Some("failed".into()),
                limit: Some(100),
                cursor: cursor.take(),
                ..Default::default()
            };
            let began = Instant::now();
            let answer: RunPage = remote.list(&query).await?;
            timed(if page == 0 { &mut first_ms } else { &mut deep_ms }, began);
            cursor = answer.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
    }
    // Input filters: a customer's orders (1 in 1,000 runs), first page and then by cursor, each
    // time another customer; and one order by its number.
    let (mut customer_ms, mut order_ms) = (Vec::new(), Vec::new());
    for sample in 0..50_u64 {
        let mut cursor: Option<String> = None;
        for _ in 0..10 {
            let query = cairn_client::ListQuery {
                workflow: Some("orders".into()),
                input: vec![("customer".into(), format!("c{}", sample * 17 % 1000))],
                limit: Some(100),
                cursor: cursor.take(),
                ..Default::default()
            };
            let began = Instant::now();
            let answer: RunPage = remote.list(&query).await?;
            timed(&mut customer_ms, began);
            cursor = answer.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        let n = (sample * 7919 + 1) % runs.max(1) as u64;
        let query = cairn_client::ListQuery { input: vec![("n".into(), n.to_string())], ..Default::default() };
        let began = Instant::now();
        let answer: RunPage = remote.list(&query).await?;
        timed(&mut order_ms, began);
        anyhow::ensure!(answer.runs.len() == 1, "order {n} was found {} times", answer.runs.len());
    }
    server.abort();
    engine.shutdown().await;
    let (customer, order) = (sorted(customer_ms), sorted(order_ms));
    let (counts, first, deep) = (sorted(counts_ms), sorted(first_ms), sorted(deep_ms));
    let report = serde_json::json!({
        "workload": "list",
        "store": store_name,
        "durability": durability,
        "runs": runs,
        "failed_runs": failed,
        "fill_seconds": fill_seconds,
        "vacuum_seconds": vacuum_seconds,
        "workflows_ms_p50": percentile(&counts, 50.0),
        "workflows_ms_p99": percentile(&counts, 99.0),
        "first_page_ms_p50": percentile(&first, 50.0),
        "first_page_ms_p99": percentile(&first, 99.0),
        "deep_pages": deep.len(),
        "deep_page_ms_p50": percentile(&deep, 50.0),
        "deep_page_ms_p99": percentile(&deep, 99.0),
        "input_pages": customer.len(),
        "input_page_ms_p50": percentile(&customer, 50.0),
        "input_page_ms_p99": percentile(&customer, 99.0),
        "input_one_ms_p50": percentile(&order, 50.0),
        "input_one_ms_p99": percentile(&order, 99.0),
    });
    if text_wanted(json) {
        let vacuumed = vacuum_seconds.map(|s| format!(", vacuumed in {s:.1} s")).unwrap_or_default();
        out!(
            "list on {store_name} ({durability}): {runs} runs ({failed} failed) filled in {fill_seconds:.1} s{vacuumed}; GET /v1/workflows p50 {:.2} ms p99 {:.2} ms; failed runs, first page p50 {:.2} ms p99 {:.2} ms; pages 1-100 by cursor p50 {:.2} ms p99 {:.2} ms ({} pages); input.customer= pages p50 {:.2} ms p99 {:.2} ms ({} pages); input.n= p50 {:.2} ms p99 {:.2} ms",
            percentile(&counts, 50.0),
            percentile(&counts, 99.0),
            percentile(&first, 50.0),
            percentile(&first, 99.0),
            percentile(&deep, 50.0),
            percentile(&deep, 99.0),
            deep.len(),
            percentile(&customer, 50.0),
            percentile(&customer, 99.0),
            customer.len(),
            percentile(&order, 50.0),
            percentile(&order, 99.0),
        );
    }
    if json {
        out!("{report}");
    }
    Ok(())
}
