//! SQL statements per step on PostgreSQL, counted by `pg_stat_statements` (see
//! crates/cairn/tests/step_costs.rs for the other counts): W2's shape (one run of 10 no-op steps at a
//! time) and W1's (many at once), each asserted as an upper bound a little above its value when the
//! bound was set. A change that makes a step cost more statements must raise the bound here in the
//! same commit and say why.
//!
//! Only the statements naming this test's own schema are counted (transaction control and
//! `pg_notify` are shared by every test on the server, so they are left out). Without the
//! extension loaded the test says so loudly and passes; with `CAIRN_REQUIRE_POSTGRES=1` it fails
//! (`.ci/run` loads it).
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use cairn::prelude::*;
use cairn_postgres::PostgresStore;
use cairn_postgres::testing::test_store;
use std::collections::BTreeMap;

const STEPS: usize = 10;

async fn noop(ctx: Ctx, steps: usize) -> Result<usize, WorkflowError> {
    let mut total = 0;
    for i in 0..steps {
        total += ctx.step(&format!("s[{i}]"), || async move { Ok::<_, StepError>(i) }).await?;
    }
    Ok(total)
}

/// The calls of each statement on `store`'s schema so far; `None` without `pg_stat_statements`.
async fn calls(store: &PostgresStore) -> Option<BTreeMap<String, i64>> {
    let quoted = format!("\"{}\"", store.schema());
    let all = store.statement_calls().await.unwrap()?;
    Some(all.into_iter().filter(|(query, _)| query.contains(&quoted)).collect())
}

fn since(after: &BTreeMap<String, i64>, before: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    after
        .iter()
        .map(|(query, n)| (query.clone(), n - before.get(query).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn per_step(statements: &BTreeMap<String, i64>, runs: usize, shape: &str) -> f64 {
    println!("{shape}: calls, statement");
    for (query, n) in statements {
        let query: String = query.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(110).collect();
        println!("  {n:>6}  {query}");
    }
    statements.values().sum::<i64>() as f64 / (runs * STEPS) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_statements_per_step_stay_under_their_bounds() {
    let Some((store, _schema)) = test_store("costs").await else { return };
    if calls(&store).await.is_none() {
        let url = std::env::var("CAIRN_TEST_DATABASE_URL").unwrap_or_default();
        assert!(
            std::env::var("CAIRN_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "CAIRN_REQUIRE_POSTGRES=1 but pg_stat_statements is not loaded on {url} (shared_preload_libraries)"
        );
        eprintln!("\n!!! SKIPPED: PostgreSQL statements per step (pg_stat_statements is not loaded).\n");
        return;
    }
    let engine =
        Engine::builder().store(store.clone()).sweep_every(None).register("noop", 1, noop).start().await.unwrap();
    for _ in 0..3 {
        engine.start("noop", &STEPS).await.unwrap().result::<usize>().await.unwrap();
    }
    let before = calls(&store).await.unwrap();
    for _ in 0..50 {
        engine.start("noop", &STEPS).await.unwrap().result::<usize>().await.unwrap();
    }
    let w2 = since(&calls(&store).await.unwrap(), &before);
    let before = calls(&store).await.unwrap();
    let client = engine.client();
    let tasks: Vec<_> = (0..500)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.start("noop", &STEPS).await?.result::<usize>().await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), 45);
    }
    let w1 = since(&calls(&store).await.unwrap(), &before);
    engine.shutdown().await;
    let (w2, w1) = (per_step(&w2, 50, "W2 (50 runs)"), per_step(&w1, 500, "W1 (500 runs)"));
    println!("PostgreSQL statements per step on the schema: W2 {w2:.3}, W1 {w1:.3}");
    assert!(w2 <= W2_STATEMENTS, "W2: {w2:.3} statements per step, bound {W2_STATEMENTS}");
    assert!(w1 <= W1_STATEMENTS, "W1: {w1:.3} statements per step, bound {W1_STATEMENTS}");
}

/// Statements per step naming the schema, one run at a time (W2): each step is one statement.
const W2_STATEMENTS: f64 = 1.8;
/// Statements per step naming the schema, many runs at once (W1): rounds carry many steps.
const W1_STATEMENTS: f64 = 0.25;
