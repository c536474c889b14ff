//! Measures the dashboard in headless Chromium (not a test: `cargo test` leaves it out; run it
//! with `cargo test --release -p cairn-cli --test dashboard_bench`). Prints, as figures for
//! `docs/benchmarks.md`:
//!
//! - how long the runs page takes to show its first rows with `CAIRN_DASHBOARD_RUNS` runs stored
//!   (default 1,000,000; filled through an engine, one step each, as `cairn bench list` does),
//!   on SQLite and, when `CAIRN_TEST_DATABASE_URL` answers, on PostgreSQL: navigation start to the
//!   page's `cairn-runs-rendered` mark, over several loads, unfiltered and by an input field;
//! - how long a run of 10,000 steps (`fanout` with 10,000 items, then 20 one-second sleeps)
//!   takes to render (to `cairn-run-rendered`);
//! - the bytes of each event of that run's live stream: whole snapshots (`run`) and JSON Patches
//!   (`patch`), those while it sleeps (a long run that changes a little) apart;
//! - W1 through HTTP (`cairn bench w1 --url`) with the runs page open and without it,
//!   alternating, with the server's CPU seconds.
//!
//! `CAIRN_DASHBOARD_PARTS` picks parts (`steps,w1,rows`; default all); `CAIRN_DASHBOARD_DB` names
//! an SQLite file filled before, used instead of a new fill; `CAIRN_DASHBOARD_SCHEMA` a
//! PostgreSQL schema filled once and kept.
#![allow(clippy::unwrap_used)] // a measuring program: a failed unwrap is a failed measurement

#[allow(dead_code)] // the tests' helper: this program uses part of it
#[path = "common/browser.rs"]
mod browser;

use browser::{Browser, browser_programs};
use cairn::Store;
use cairn::prelude::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CAIRN: &str = env!("CARGO_BIN_EXE_cairn");

/// One step, as `cairn bench list`'s `orders`; fails when the number is a multiple of 100.
async fn one_step(ctx: Ctx, order: serde_json::Value) -> Result<u64, WorkflowError> {
    let n = order["n"].as_u64().unwrap_or_default();
    ctx.step("only", || async move {
        if n.is_multiple_of(100) { Err(StepError::terminal(format!("{n} is a multiple of 100"))) } else { Ok(n) }
    })
    .await
}

/// Stores `runs` ended runs of `orders` (inputs `{"n", "customer": "c<n % 1000>"}`) in `store`.
async fn fill(store: impl Store + 'static, runs: u64) {
    let engine = Engine::builder()
        .store(store)
        .sweep_every(None)
        .max_active_runs(5000)
        .register("orders", 1, one_step)
        .start()
        .await
        .unwrap();
    let client = engine.client();
    let since = Instant::now();
    for first in (0..runs).step_by(5000) {
        let tasks: Vec<_> = (first..(first + 5000).min(runs))
            .map(|n| {
                let client = client.clone();
                tokio::spawn(async move {
                    let input = json!({"n": n, "customer": format!("c{}", n % 1000)});
                    let run = client.start("orders", &input).await.unwrap();
                    let _ = run.result::<u64>().await;
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        if first % 100_000 == 0 {
            eprintln!("  filled {first} runs in {:.0} s", since.elapsed().as_secs_f64());
        }
    }
    eprintln!("  filled {runs} runs in {:.0} s", since.elapsed().as_secs_f64());
    engine.shutdown().await;
}

/// A `cairn serve` with `args`, and the address it listens on.
fn serve(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(CAIRN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("CAIRN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let address = first.split("http://").nth(1).and_then(|rest| rest.split('/').next()).unwrap().to_owned();
    (child, address)
}

/// Milliseconds from navigation start to the page's mark `mark`, over `loads` full loads of
/// `url`: sorted.
fn time_to_mark(browser: &Browser, url: &str, mark: &str, loads: usize) -> Vec<f64> {
    let mut times = Vec::new();
    for _ in 0..loads {
        browser.goto("about:blank");
        browser.goto(url);
        let script = format!("const m = performance.getEntriesByName('{mark}')[0]; return m ? m.startTime : 0");
        times.push(browser.wait_for(mark, &script).as_f64().unwrap());
    }
    eprintln!("  {url}: {times:.0?} ms, in load order");
    times.sort_by(f64::total_cmp);
    times
}

fn summary(times: &[f64]) -> String {
    let median = times[times.len() / 2];
    format!("median {median:.0} ms, min {:.0}, max {:.0} ({} loads)", times[0], times[times.len() - 1], times.len())
}

fn first_rows(browser: &Browser, address: &str, store: &str, runs: u64) {
    let home = format!("http://{address}/");
    let all = time_to_mark(browser, &home, "cairn-runs-rendered", 9);
    println!("first rows, {store}, {runs} runs: {}", summary(&all));
    let rows = browser.count("tr.run");
    assert_eq!(rows, 50, "the first page shows 50 rows");
    let by_input = time_to_mark(browser, &format!("{home}#/?input.customer=c7"), "cairn-runs-rendered", 9);
    println!("first rows, {store}, {runs} runs, input.customer=c7: {}", summary(&by_input));
}

/// The CPU seconds (user + system) process `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// Reads run `path`'s live stream until the run has ended, and returns each event's name and
/// bytes, in order.
fn live_events(address: &str, path: &str) -> Vec<(String, usize)> {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut text = String::new();
    let mut events = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut ended = false;
    while !ended {
        let read = stream.read(&mut chunk).unwrap();
        assert!(read > 0, "the stream closed");
        text.push_str(&String::from_utf8_lossy(&chunk[..read]));
        // Chunked transfer: the chunk sizes sit between events; count the events' own bytes.
        while let Some(start) = text.find("event: ") {
            let Some(end) = text[start..].find("\n\n") else { break };
            let event = &text[start..start + end];
            let name = event["event: ".len()..].lines().next().unwrap_or_default().to_owned();
            events.push((name, event.len()));
            ended |= event.contains("\"completed_at\":\"") || event.contains("/completed_at\"");
            text.drain(..start + end + 2);
        }
    }
    events
}

fn sizes(events: &[(String, usize)], name: &str) -> String {
    let mut sizes: Vec<usize> = events.iter().filter(|(n, _)| n == name).map(|(_, s)| *s).collect();
    if sizes.is_empty() {
        return format!("no `{name}` events");
    }
    sizes.sort_unstable();
    format!("{} `{name}` events, median {} bytes, max {}", sizes.len(), sizes[sizes.len() / 2], sizes[sizes.len() - 1])
}

fn main() {
    let Some((driver, chromium)) = browser_programs() else { return };
    let runs: u64 = std::env::var("CAIRN_DASHBOARD_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let browser = Browser::start(&driver, &chromium);

    let parts = std::env::var("CAIRN_DASHBOARD_PARTS").unwrap_or_else(|_| "steps,w1,rows".into());
    let (mut server, address) = serve(&["--examples", "--db", dir.path().join("steps.db").to_str().unwrap()]);
    if parts.contains("steps") {
        // A run of 10,000 steps: the bytes of its live updates as it runs, then its render time.
        let body = r#"{"id":"long-1","input":{"items":10000,"ticks":20}}"#;
        let mut stream = TcpStream::connect(&address).unwrap();
        write!(stream, "POST /v1/workflows/fanout/runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
        let events = live_events(&address, "/v1/workflows/fanout/runs/long-1/live");
        println!("live stream of a 10,000-step run: {}; {}", sizes(&events, "run"), sizes(&events, "patch"));
        let quiet = &events[events.len().saturating_sub(16)..events.len() - 1];
        println!("  while it sleeps (its last 15 updates but the end): {}", sizes(quiet, "patch"));
        let page = format!("http://{address}/#/runs/fanout/long-1");
        let rendered = time_to_mark(&browser, &page, "cairn-run-rendered", 5);
        println!("a 10,000-step run rendered: {}", summary(&rendered));
        println!("  rows drawn: steps {}, timeline {}", browser.count("tr.step-row"), browser.count("g.step"));
    }

    // W1 through HTTP, with the runs page open and without it, alternating.
    for round in 0..if parts.contains("w1") { 4 } else { 0 } {
        for open in [false, true] {
            if open {
                browser.goto(&format!("http://{address}/"));
                browser.wait_for("the runs page", "return document.querySelectorAll('tr.run').length > 0");
            } else {
                browser.goto("about:blank");
            }
            let cpu = cpu_seconds(server.id());
            let output = Command::new(CAIRN)
                .args(["bench", "w1", "--url", &format!("http://{address}"), "--runs", "5000", "--json"])
                .output()
                .unwrap();
            let cpu = cpu_seconds(server.id()) - cpu;
            let text = String::from_utf8_lossy(&output.stdout);
            let json: serde_json::Value =
                serde_json::from_str(text.lines().last().unwrap_or("null")).unwrap_or_default();
            println!(
                "W1 via HTTP, round {round}, page {}: server CPU {cpu:.2} s, {:.0} steps/s, run p50 {:.1} ms",
                if open { "open  " } else { "closed" },
                json["steps_per_sec"].as_f64().unwrap_or_default(),
                json["run_ms_p50"].as_f64().unwrap_or_default()
            );
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    if !parts.contains("rows") {
        return;
    }

    // First rows with many runs stored: SQLite, then PostgreSQL.
    // `CAIRN_DASHBOARD_DB`: an SQLite file this program filled before (kept by copying it).
    let db = match std::env::var_os("CAIRN_DASHBOARD_DB") {
        Some(db) => std::path::PathBuf::from(db),
        None => {
            let db = dir.path().join("many.db");
            runtime.block_on(fill(cairn::SqliteStore::open(&db).unwrap(), runs));
            db
        }
    };
    let (mut server, address) = serve(&["--db", db.to_str().unwrap()]);
    first_rows(&browser, &address, "SQLite", runs);
    let _ = server.kill();
    let _ = server.wait();

    let url = std::env::var("CAIRN_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    // `CAIRN_DASHBOARD_SCHEMA`: a schema to fill once and keep (filled again only when empty).
    let kept = std::env::var("CAIRN_DASHBOARD_SCHEMA").ok();
    let schema = kept.clone().unwrap_or_else(|| format!("dashboard_bench_{}", std::process::id()));
    let options = cairn_postgres::PostgresOptions::new(&url).schema(&schema);
    let Ok(store) = runtime.block_on(cairn_postgres::PostgresStore::connect(options)) else {
        println!("first rows, PostgreSQL: no server at {url}");
        return;
    };
    let empty = runtime.block_on(store.list_runs(&cairn::RunFilter::default())).unwrap().runs.is_empty();
    if empty {
        runtime.block_on(fill(store.clone(), runs));
        runtime.block_on(store.vacuum_analyze()).unwrap();
    }
    let (mut server, address) = serve(&["--database-url", &url, "--schema", &schema]);
    first_rows(&browser, &address, "PostgreSQL", runs);
    let _ = server.kill();
    let _ = server.wait();
    if kept.is_some() {
        return;
    }
    let drop = (Command::new("psql").args([&url, "-qc", &format!("DROP SCHEMA {schema} CASCADE")]))
        .env("PGOPTIONS", "-c client_min_messages=warning")
        .status();
    assert!(drop.is_ok_and(|s| s.success()), "could not drop {schema}");
}
