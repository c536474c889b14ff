//! What one step costs, counted rather than timed: heap allocations (a counting global
//! allocator), store calls (`CountingStore`), SQL statements and the SQLite virtual machine's
//! instructions (`SqliteOptions::count_statements`), PostgreSQL statements (`pg_stat_statements`),
//! and bytes journaled. Timings on a shared
//! machine drift by 2x, so a small regression hides in their noise; these counts do not drift.
//!
//! Each is asserted as an upper bound a little above its value when the bound was set, for the two
//! shapes of docs/benchmarks.md: W1 (1,000 runs of 10 no-op steps started at once) and W2 (one
//! such run at a time). **A change that makes a step cost more must raise the bound here in the
//! same commit and say why in its message.** A change that makes it cost less should lower it.
#![allow(unsafe_code)] // the counting global allocator below, and nothing else
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use cairn::prelude::*;
use cairn::store::JournalStore;
use cairn::store::{Calls, CountingStore, StatementCount};
use cairn::{MemoryStore, SqliteOptions, SqliteStore, Store};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Counts the allocations (and reallocations) made on threads that asked to be counted.
struct CountingAllocator;

thread_local! {
    /// Whether this thread's allocations are counted, and how many it made while counted.
    static COUNTED: Cell<(bool, u64)> = const { Cell::new((false, 0)) };
}

fn note_allocation() {
    // `try_with`: a thread's own locals may already be gone while it exits.
    let _ = COUNTED.try_with(|counted| {
        let (on, n) = counted.get();
        if on {
            counted.set((true, n + 1));
        }
    });
}

// SAFETY: every call is passed on unchanged to the system allocator; the counter is a plain
// thread-local cell with a const initializer, which allocates nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The allocations this thread makes while `work` runs.
fn allocations_of<T>(work: impl FnOnce() -> T) -> (T, u64) {
    COUNTED.with(|c| c.set((true, 0)));
    let out = work();
    let (_, n) = COUNTED.with(|c| c.replace((false, 0)));
    (out, n)
}

const STEPS: usize = 10;

/// W1's and W2's workflow: `steps` sequential no-op steps returning a small value.
async fn noop(ctx: Ctx, steps: usize) -> Result<usize, WorkflowError> {
    let mut total = 0;
    for i in 0..steps {
        total += ctx.step(&format!("s[{i}]"), || async move { Ok::<_, StepError>(i) }).await?;
    }
    Ok(total)
}

async fn engine(store: Arc<dyn Store>) -> Engine {
    Engine::builder().shared_store(store).sweep_every(None).register("noop", 1, noop).start().await.unwrap()
}

/// W2's shape: `runs` runs, one at a time.
async fn one_at_a_time(engine: &Engine, runs: usize) {
    for _ in 0..runs {
        assert_eq!(engine.client().start("noop", &STEPS).await.unwrap().result::<usize>().await.unwrap(), 45);
    }
}

/// W1's shape: `runs` runs started at once, each awaited by a task of its own.
async fn all_at_once(engine: &Engine, runs: usize) {
    let client = engine.client();
    let tasks: Vec<_> = (0..runs)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(
                async move { Ok::<_, ClientError>(client.start("noop", &STEPS).await?.result::<usize>().await?) },
            )
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), 45);
    }
}

/// A current-thread runtime: the engine, the memory store and the runs all work on the test's
/// thread, so its allocations are all counted and no other test's are. Its clock is paused (it
/// moves on only while every task waits), so no timer fires because this machine was slow: a
/// result waiter's poll would read the store again, and the counts would vary from run to run.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap()
}

fn per_step(count: u64, runs: usize) -> f64 {
    count as f64 / (runs * STEPS) as f64
}

#[test]
fn heap_allocations_per_step_on_the_memory_store_stay_under_their_bounds() {
    let runtime = runtime();
    let engine = runtime.block_on(engine(Arc::new(MemoryStore::new())));
    // Warm up: the first runs fill maps and caches that later runs reuse.
    runtime.block_on(one_at_a_time(&engine, 20));
    let ((), w2) = allocations_of(|| runtime.block_on(one_at_a_time(&engine, 200)));
    let ((), w1) = allocations_of(|| runtime.block_on(all_at_once(&engine, 1000)));
    runtime.block_on(engine.shutdown());
    let (w2, w1) = (per_step(w2, 200), per_step(w1, 1000));
    println!("heap allocations per step on the memory store: W2 {w2:.2}, W1 {w1:.2}");
    assert!(w2 <= W2_ALLOCATIONS, "W2: {w2:.2} allocations per step, bound {W2_ALLOCATIONS}");
    assert!(w1 <= W1_ALLOCATIONS, "W1: {w1:.2} allocations per step, bound {W1_ALLOCATIONS}");
}

/// Heap allocations per step, one run at a time (W2), on the memory store: 14.60 since a record
/// carries its workflow's name shared (15.00 before; 18.30 before `RunId` and `StepPath` were).
const W2_ALLOCATIONS: f64 = 15.0;
/// Heap allocations per step, 1,000 runs at once (W1), on the memory store: 13.56 since a record
/// carries its workflow's name shared (13.96 before; 17.66 before `RunId` and `StepPath` were).
const W1_ALLOCATIONS: f64 = 14.0;

#[test]
fn store_calls_per_step_stay_under_their_bounds() {
    let runtime = runtime();
    runtime.block_on(async {
        let counting = CountingStore::new(MemoryStore::new());
        let calls = counting.calls();
        let engine = engine(Arc::new(counting)).await;
        let (w2, w1) = gains(&engine, (100, 1000), async || snapshot(&calls)).await;
        engine.shutdown().await;
        println!("store calls, W2 (100 runs): {w2:?}\nstore calls, W1 (1,000 runs): {w1:?}");
        // Each step is one append; each run adds its create, claim, final append, result read.
        assert_eq!(w2.get("append").copied().unwrap_or(0), 100 * (STEPS as u64 + 1), "W2 appends: {w2:?}");
        assert_eq!(w1.get("append").copied().unwrap_or(0), 1000 * (STEPS as u64 + 1), "W1 appends: {w1:?}");
        let (w2, w1) = (per_step(total(&w2), 100), per_step(total(&w1), 1000));
        println!("store calls per step: W2 {w2:.3}, W1 {w1:.3}");
        assert!(w2 <= W2_STORE_CALLS, "W2: {w2:.3} store calls per step, bound {W2_STORE_CALLS}");
        assert!(w1 <= W1_STORE_CALLS, "W1: {w1:.3} store calls per step, bound {W1_STORE_CALLS}");
    });
}

/// Store calls per step, one run at a time (W2).
const W2_STORE_CALLS: f64 = 1.55;
/// Store calls per step, 1,000 runs at once (W1).
const W1_STORE_CALLS: f64 = 1.4;

fn snapshot(calls: &Calls) -> BTreeMap<String, u64> {
    calls.all().into_iter().map(|(method, n)| (method.to_owned(), n)).collect()
}

/// Every count of `counts` together.
fn total(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().sum()
}

/// What `count` gains over W2's shape (`runs.0` runs, after a few to warm up) and then over W1's
/// (`runs.1` runs at once).
async fn gains(
    engine: &Engine,
    (w2_runs, w1_runs): (usize, usize),
    count: impl AsyncFn() -> BTreeMap<String, u64>,
) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    one_at_a_time(engine, 5).await;
    let before = count().await;
    one_at_a_time(engine, w2_runs).await;
    let w2 = since(count().await, &before);
    let before = count().await;
    all_at_once(engine, w1_runs).await;
    (w2, since(count().await, &before))
}

/// What each count in `after` gained since `before`, leaving out those that did not.
fn since(after: BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .into_iter()
        .map(|(method, n)| {
            let earlier = before.get(&method).copied().unwrap_or(0);
            (method, n - earlier)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// A SQLite store counting its statements, in a temporary directory.
fn counted_sqlite() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions { count_statements: true, ..SqliteOptions::default() };
    (SqliteStore::open_with(dir.path().join("cairn.db"), options).unwrap(), dir)
}

fn print_statements(shape: &str, statements: &BTreeMap<String, StatementCount>) {
    println!("{shape}: executions, re-compilations, VM instructions, SQL");
    for (sql, count) in statements {
        let sql: String = sql.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(100).collect();
        println!("  {:>7} {:>5} {:>9}  {sql}", count.executions, count.reprepares, count.vm_steps);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_statements_per_step_stay_under_their_bounds_and_none_is_compiled_again() {
    let (store, _dir) = counted_sqlite();
    let counts = store.statements().unwrap();
    let engine = engine(Arc::new(store)).await;
    one_at_a_time(&engine, 5).await;
    counts.reset();
    one_at_a_time(&engine, 100).await;
    let w2 = counts.snapshot();
    counts.reset();
    all_at_once(&engine, 1000).await;
    let w1 = counts.snapshot();
    engine.shutdown().await;
    print_statements("W2 (100 runs)", &w2);
    print_statements("W1 (1,000 runs)", &w1);
    for (shape, statements) in [("W2", &w2), ("W1", &w1)] {
        // A statement compiled again on every use costs as much as a new one (the claim and the
        // create's fairness lookup once were: `sqlite3RunParser` in the writer's profile).
        let again: Vec<_> = statements.iter().filter(|(_, c)| c.reprepares > 0).map(|(sql, _)| sql).collect();
        assert!(again.is_empty(), "{shape}: statements compiled again: {again:?}");
    }
    let sum = |statements: &BTreeMap<String, StatementCount>, of: fn(&StatementCount) -> u64| {
        statements.values().map(of).sum::<u64>()
    };
    let (w2_statements, w1_statements) =
        (per_step(sum(&w2, |c| c.executions), 100), per_step(sum(&w1, |c| c.executions), 1000));
    let (w2_vm, w1_vm) = (per_step(sum(&w2, |c| c.vm_steps), 100), per_step(sum(&w1, |c| c.vm_steps), 1000));
    println!(
        "SQLite per step: W2 {w2_statements:.3} statements, {w2_vm:.1} VM instructions; W1 {w1_statements:.3} statements, {w1_vm:.1} VM instructions"
    );
    assert!(w2_statements <= W2_SQLITE_STATEMENTS, "W2: {w2_statements:.3} statements per step");
    assert!(w1_statements <= W1_SQLITE_STATEMENTS, "W1: {w1_statements:.3} statements per step");
    assert!(w2_vm <= W2_SQLITE_VM_STEPS, "W2: {w2_vm:.1} SQLite VM instructions per step");
    assert!(w1_vm <= W1_SQLITE_VM_STEPS, "W1: {w1_vm:.1} SQLite VM instructions per step");
}

/// SQL statements per step on SQLite, one run at a time (W2): every command commits alone. (It
/// was 5.9 while the index of inputs had an insert trigger, whose `WHEN` counted as a statement
/// per run; since migration 21 a start whose input is not an object writes no index row and
/// runs no statement for it: W2 measured 5.700. Raised to 6.0 with `run_heads`, migration 25:
/// a claim makes the run's head and its end deletes it, two statements a run of ten steps, for
/// a step's append that rewrites a five-column row instead of the 35-column run: 5.900.)
const W2_SQLITE_STATEMENTS: f64 = 6.0;
/// SQL statements per step on SQLite, 1,000 runs at once (W1): commands share transactions.
const W1_SQLITE_STATEMENTS: f64 = 3.0;
/// SQLite virtual-machine instructions per step, W2. (Raised from 205 when appends began to
/// check the run is running as well as its epoch: about 3 instructions per append; lowered
/// from 208 when a step's append moved to the run's head, migration 25: 204.2 → 181.0.)
const W2_SQLITE_VM_STEPS: f64 = 185.0;
/// SQLite virtual-machine instructions per step, W1 (raised from 175 for the same check;
/// lowered from 178 with the heads: 174.8 → 151.5).
const W1_SQLITE_VM_STEPS: f64 = 155.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_bytes_per_step_stay_under_their_bound() {
    let store = Arc::new(MemoryStore::new());
    let engine = engine(store.clone()).await;
    let mut ids = Vec::new();
    for _ in 0..20 {
        let run = engine.client().start("noop", &STEPS).await.unwrap();
        run.result::<usize>().await.unwrap();
        ids.push(run.id().clone());
    }
    engine.shutdown().await;
    let mut bytes = 0;
    for id in &ids {
        bytes += store.read_journal(id).await.unwrap().iter().map(|entry| entry.event.to_json().len()).sum::<usize>();
    }
    let per_step = per_step(bytes as u64, ids.len());
    println!("journal bytes per step (the events' JSON, the run's start and end included): {per_step:.1}");
    assert!(per_step <= JOURNAL_BYTES, "{per_step:.1} journal bytes per step, bound {JOURNAL_BYTES}");
}

/// Bytes of journaled JSON per step, the run's `started` and `completed` events shared out.
const JOURNAL_BYTES: f64 = 110.0;

/// The calls of each statement naming `store`'s schema so far; `None` without
/// `pg_stat_statements`. Transaction control and `pg_notify` are left out: every test on the server
/// shares them.
async fn schema_statements(store: &cairn_postgres::PostgresStore) -> Option<BTreeMap<String, u64>> {
    let all = store.statement_calls().await.unwrap()?;
    // The store's statements: the database is the test's own, so every statement in it but
    // transaction control and bare notifications (not counted, as before the statements stopped
    // naming their schema).
    let counted = |query: &str| {
        let head = query.trim_start().to_ascii_uppercase();
        !["BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK", "SELECT PG_NOTIFY("].iter().any(|p| head.starts_with(p))
    };
    Some(
        all.into_iter()
            .filter(|(query, _)| counted(query))
            .map(|(query, calls)| (query, u64::try_from(calls).unwrap_or(0)))
            .collect(),
    )
}

fn print_postgres_statements(shape: &str, statements: &BTreeMap<String, u64>) {
    println!("{shape}: calls, statement");
    for (query, calls) in statements {
        let query: String = query.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(110).collect();
        println!("  {calls:>6}  {query}");
    }
}

/// Without `pg_stat_statements` loaded this says so loudly and passes; with
/// `CAIRN_REQUIRE_POSTGRES=1` it fails (`.ci/run` loads it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_statements_per_step_stay_under_their_bounds() {
    let Some((store, _database)) = cairn_postgres::testing::test_database_store("costs").await else { return };
    if schema_statements(&store).await.is_none() {
        let url = std::env::var("CAIRN_TEST_DATABASE_URL").unwrap_or_default();
        assert!(
            std::env::var("CAIRN_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "CAIRN_REQUIRE_POSTGRES=1 but pg_stat_statements is not loaded on {url} (shared_preload_libraries)"
        );
        eprintln!("\n!!! SKIPPED: PostgreSQL statements per step (pg_stat_statements is not loaded).\n");
        return;
    }
    let engine = engine(Arc::new(store.clone())).await;
    let (w2, w1) = gains(&engine, (50, 500), async || schema_statements(&store).await.unwrap()).await;
    engine.shutdown().await;
    print_postgres_statements("W2 (50 runs)", &w2);
    print_postgres_statements("W1 (500 runs)", &w1);
    let (w2, w1) = (per_step(total(&w2), 50), per_step(total(&w1), 500));
    println!("PostgreSQL statements per step on the schema: W2 {w2:.3}, W1 {w1:.3}");
    assert!(w2 <= W2_POSTGRES_STATEMENTS, "W2: {w2:.3} statements per step, bound {W2_POSTGRES_STATEMENTS}");
    assert!(w1 <= W1_POSTGRES_STATEMENTS, "W1: {w1:.3} statements per step, bound {W1_POSTGRES_STATEMENTS}");
}

/// PostgreSQL statements per step naming the schema, one run at a time (W2): each step is one.
const W2_POSTGRES_STATEMENTS: f64 = 1.8;
/// PostgreSQL statements per step naming the schema, 500 runs at once (W1): rounds carry many.
const W1_POSTGRES_STATEMENTS: f64 = 0.25;
