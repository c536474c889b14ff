//! What the crash tests share: spawning and killing real worker processes, signalling runs, and
//! checking every run, every journal and the execution log afterwards.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use cairn::journal::{Event, RunState};
use cairn::{Client, RunFilter, RunId, RunStatus, Store};
use std::collections::{HashMap, HashSet};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime};

pub mod proxy;

pub const BASE_STEPS: [&str; 5] = ["a", "b", "c", "d", "e"];

/// What run `index` must return with `extra` steps after the first five.
pub fn expected(index: u64, extra: u64) -> u64 {
    let b = (index + 1) * 2;
    let mut value = (b + index * 7) * 3 + 1;
    for i in 0..extra {
        value += i;
    }
    value
}

pub fn steps(extra: u64) -> Vec<String> {
    BASE_STEPS.iter().map(|s| (*s).to_owned()).chain((0..extra).map(|i| format!("x[{i}]"))).collect()
}

/// What every run of a crash test must end with.
pub struct Expect {
    /// The paths of the steps whose bodies write the execution log: each completes once.
    pub steps: Vec<String>,
    /// Steps journaled without a logged body (a race's winner): each completes once.
    pub records: Vec<String>,
    /// The output of run `index`.
    pub output: fn(u64, u64) -> u64,
    /// The second argument of `output`.
    pub extra: u64,
    /// Whether each run consumed a signal.
    pub signalled: bool,
}

impl Expect {
    /// `crashy` runs with `extra` steps after the first five.
    pub fn crashy(extra: u64) -> Expect {
        Expect { steps: steps(extra), records: Vec::new(), output: expected, extra, signalled: true }
    }

    /// `compose` runs: two joined branches of two steps, six items, and a race `fast` wins.
    pub fn compose() -> Expect {
        let mut steps: Vec<String> =
            ["left/l1", "left/l2", "right/r1", "right/r2", "pick-fast/f"].iter().map(|s| (*s).to_owned()).collect();
        steps.extend((0..6).map(|k| format!("item[{k}]/work")));
        Expect { steps, records: vec!["pick".to_owned()], output: |i, _| 20 * i + 108, extra: 0, signalled: false }
    }

    /// `ticker` runs: one step `tick` returning the run's index.
    pub fn ticker() -> Expect {
        Expect { steps: vec!["tick".to_owned()], records: Vec::new(), output: |i, _| i, extra: 0, signalled: false }
    }
}

pub fn now_micros() -> u128 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0)
}

pub struct Rng(pub u64);

impl Rng {
    pub fn seeded() -> Rng {
        let seed = now_micros() as u64;
        eprintln!("crash test seed {seed}");
        Rng(seed)
    }

    pub fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// A worker process that is killed when dropped, so a failing test leaves none behind.
pub struct Worker(Child);

impl std::ops::Deref for Worker {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Worker {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A PostgreSQL worker's connections, unless its options say otherwise (the store's default is
/// 16): four crash tests at a time, three workers each, with the default pool reached 99 of the
/// server's default 100 connections.
const WORKER_POOL: &str = "6";

pub fn spawn(store: &str, log: &std::path::Path, runs: u64, options: &[&str]) -> Worker {
    spawn_with(store, log, runs, options, None)
}

/// [`spawn`] with the worker's standard error written to `stderr`.
pub fn spawn_logged(
    store: &str,
    log: &std::path::Path,
    runs: u64,
    options: &[&str],
    stderr: &std::path::Path,
) -> Worker {
    spawn_with(store, log, runs, options, Some(stderr))
}

fn spawn_with(
    store: &str,
    log: &std::path::Path,
    runs: u64,
    options: &[&str],
    stderr: Option<&std::path::Path>,
) -> Worker {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crash-worker"));
    command.arg(store).arg(log).arg(runs.to_string()).args(options);
    if !options.contains(&"--pool-size") {
        command.args(["--pool-size", WORKER_POOL]);
    }
    if let Some(stderr) = stderr {
        command.stderr(std::fs::File::create(stderr).expect("worker log file"));
    }
    Worker(command.spawn().expect("spawn crash-worker"))
}

/// SIGKILLs `child`, reaps it and returns its pid and the moment it was certainly dead.
pub fn kill(child: &mut Child) -> (u32, u128) {
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    (child.id(), now_micros())
}

/// How many step bodies the execution log `log` says have begun (in every process).
pub fn begun(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.starts_with("begin")).count()
}

/// Waits until the execution log `log` says at least `count` step bodies have begun.
pub async fn await_begun(log: &std::path::Path, count: usize) {
    while begun(log) < count {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SIGKILLs `child` once it has begun at least `begun` step bodies and has one in flight (the
/// last line it wrote to the execution log `log` is a begin), or after about 6 s if that never
/// comes; its pid and when it was certainly dead.
pub async fn kill_mid_step(child: &mut Child, log: &std::path::Path, begun: usize) -> (u32, u128) {
    let pid = child.id().to_string();
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let mine: Vec<&str> = text.lines().filter(|l| l.split(' ').nth(3) == Some(pid.as_str())).collect();
        let starts = mine.iter().filter(|l| l.starts_with("begin ")).count();
        if starts >= begun && mine.last().is_some_and(|l| l.starts_with("begin ")) {
            break;
        }
    }
    kill(child)
}

/// Three workers with `options` on `store` share `runs`; one of them is SIGKILLed with a step in
/// flight once it has begun `begun` step bodies ([`kill_mid_step`]) and started again; a fourth
/// (`--exit-when-done`) is waited for until every run has completed, then all are stopped. The
/// killed process and when it died.
pub async fn three_workers_one_killed(
    store: &str,
    log: &std::path::Path,
    runs: u64,
    options: &[&str],
    begun: usize,
) -> HashMap<u32, u128> {
    let mut workers: Vec<Worker> = (0..3).map(|_| spawn(store, log, runs, options)).collect();
    let (pid, at) = kill_mid_step(&mut workers[1], log, begun).await;
    workers[1] = spawn(store, log, runs, options);
    let mut last = spawn(store, log, runs, &[options, &["--exit-when-done"]].concat());
    finish(&mut last, Duration::from_secs(300)).await;
    HashMap::from([(pid, at)])
}

/// Sends SIGTERM to `child` (a graceful shutdown request); does not wait for it.
pub fn terminate(child: &Child) {
    let status = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().expect("kill -TERM");
    assert!(status.success(), "kill -TERM {} failed", child.id());
}

/// `kills` times: a worker with `options` on `store` is SIGKILLed 0.4 to 1.6 s after it started;
/// then a last one (`--exit-when-done`) finishes every run. Each killed process and when it died.
pub async fn kill_repeatedly(
    store: &str,
    log: &std::path::Path,
    runs: u64,
    kills: usize,
    options: &[&str],
) -> HashMap<u32, u128> {
    let mut rng = Rng::seeded();
    let mut killed = HashMap::new();
    for _ in 0..kills {
        let mut child = spawn(store, log, runs, options);
        tokio::time::sleep(Duration::from_millis(400 + rng.next(1200))).await;
        let (pid, at) = kill(&mut child);
        killed.insert(pid, at);
    }
    let mut last = spawn(store, log, runs, &[options, &["--exit-when-done"]].concat());
    finish(&mut last, Duration::from_secs(300)).await;
    killed
}

/// Waits for a worker started with `--exit-when-done` to finish; it must exit successfully.
pub async fn finish(child: &mut Child, limit: Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "worker exited with {status}");
            return;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("a worker did not finish the runs");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn create_runs(client: &Client, runs: u64) {
    create_runs_of(client, "crashy", runs).await;
}

pub async fn create_runs_of(client: &Client, workflow: &str, runs: u64) {
    for i in 0..runs {
        // Queued before any worker is up: they wait for the workers the test starts next.
        client.start(workflow, &i).id(format!("run-{i:03}")).allow_unknown().await.expect("start");
    }
}

pub async fn signal_range(client: &Client, range: std::ops::Range<u64>) {
    for i in range {
        let payload = serde_json::json!({ "run": i, "n": i * 7 });
        client.signal(&RunId::new(format!("run-{i:03}")), "go", &payload).await.expect("signal");
    }
}

struct Execution {
    pid: u32,
    begin: u128,
    end: Option<u128>,
}

/// Checks everything a crash test promises:
/// * every run completed with the right output and its journal folds;
/// * every step has exactly one completion;
/// * the execution log passes [`check_executions`].
pub async fn verify(
    client: &Client,
    store: &dyn Store,
    log: &std::path::Path,
    runs: u64,
    expect: &Expect,
    killed: &HashMap<u32, u128>,
) -> usize {
    let committed_by = verify_runs(client, store, runs, expect).await;
    let (reruns, runs_with_steps) = check_executions(log, &committed_by, killed);
    assert_eq!(runs_with_steps.len() as u64, runs);
    reruns
}

/// The part of [`verify`] that reads the store: every run completed with the right output, its
/// journal folds, each step has exactly one completion. The process that committed each logged
/// step, by run and step path.
pub async fn verify_runs(
    client: &Client,
    store: &dyn Store,
    runs: u64,
    expect: &Expect,
) -> HashMap<(String, String), u32> {
    let steps = &expect.steps;
    let page = client.list(&RunFilter { limit: Some(1000), ..RunFilter::default() }).await.expect("list");
    assert_eq!(page.runs.len() as u64, runs);
    let mut committed_by: HashMap<(String, String), u32> = HashMap::new();
    for run in &page.runs {
        assert_eq!(run.status, RunStatus::Completed, "run {} is {} ({:?})", run.id, run.status, run.error);
        let index: u64 = run.id.as_str()[4..].parse().expect("index");
        let output: u64 = serde_json::from_str(run.output.as_ref().expect("output").get()).expect("u64");
        assert_eq!(output, (expect.output)(index, expect.extra), "output of {}", run.id);
        let journal = store.read_journal(&run.id).await.expect("journal");
        RunState::fold(&journal).expect("journal folds");
        let mut completions: HashMap<String, usize> = HashMap::new();
        for entry in &journal {
            if let Event::StepCompleted { path, output, .. } = &entry.event {
                *completions.entry(path.to_string()).or_default() += 1;
                if expect.records.iter().any(|r| r == path.as_str()) {
                    continue;
                }
                let out: serde_json::Value = serde_json::from_str(output.get()).expect("json");
                committed_by.insert((run.id.to_string(), path.to_string()), out["pid"].as_u64().expect("pid") as u32);
            }
        }
        for step in steps.iter().chain(&expect.records) {
            assert_eq!(completions.get(step), Some(&1), "run {} step {step}", run.id);
        }
        assert_eq!(completions.len(), steps.len() + expect.records.len(), "{completions:?}");
        let signalled = journal.iter().any(|e| matches!(&e.event, Event::WaitCompleted { signal: Some(_), .. }));
        assert_eq!(signalled, expect.signalled);
    }
    committed_by
}

/// Checks the execution log against the process that committed each logged step (`committed_by`,
/// keyed by run and step path, from the steps' outputs):
/// * a step body ran again only in a process that was killed while it had that step in flight
///   (the next step of its scope had not begun there);
/// * it ran once in the process that committed it;
/// * no step body of a run ever ran in two processes at the same time.
///
/// How many bodies ran again, and the runs the log names.
pub fn check_executions(
    log: &std::path::Path,
    committed_by: &HashMap<(String, String), u32>,
    killed: &HashMap<u32, u128>,
) -> (usize, HashSet<String>) {
    let text = std::fs::read_to_string(log).expect("log");
    let mut executions: HashMap<(String, String), Vec<Execution>> = HashMap::new();
    let mut order: Vec<(String, String, u32)> = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts.len(), 5, "log line {line:?}");
        let key = (parts[1].to_owned(), parts[2].to_owned());
        let pid: u32 = parts[3].parse().expect("pid");
        let at: u128 = parts[4].parse().expect("micros");
        let list = executions.entry(key.clone()).or_default();
        match parts[0] {
            "begin" => {
                list.push(Execution { pid, begin: at, end: None });
                order.push((key.0, key.1, pid));
            }
            "end" => {
                let open = list.iter_mut().rev().find(|e| e.pid == pid && e.end.is_none()).expect("end without begin");
                open.end = Some(at);
            }
            other => panic!("unknown log line kind {other}"),
        }
    }
    let mut reruns = 0;
    for (position, (run, path, pid)) in order.iter().enumerate() {
        let committer = committed_by[&(run.clone(), path.clone())];
        if *pid == committer {
            continue;
        }
        reruns += 1;
        assert!(
            killed.contains_key(pid),
            "{run}/{path} ran in {pid}, which was not killed, but {committer} committed it"
        );
        // Steps of one scope run one after another: the next began only once this one committed.
        let scope = |path: &str| path.rsplit_once('/').map_or("", |(scope, _)| scope).to_owned();
        let later = order[position + 1..].iter().any(|(r, s, p)| r == run && p == pid && scope(s) == scope(path));
        assert!(!later, "{run}/{path} in {pid} was not in flight when {pid} was killed");
    }
    for ((run, path), list) in &executions {
        let by_committer = list.iter().filter(|e| e.pid == committed_by[&(run.clone(), path.clone())]).count();
        assert_eq!(by_committer, 1, "{run}/{path} ran more than once in the process that committed it");
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if a.pid == b.pid {
                    continue;
                }
                let until = |e: &Execution| e.end.or_else(|| killed.get(&e.pid).copied()).unwrap_or(u128::MAX);
                let overlap = a.begin < until(b) && b.begin < until(a);
                assert!(!overlap, "{run}/{path} ran in {} and {} at the same time", a.pid, b.pid);
            }
        }
    }
    let runs_with_steps = executions.keys().map(|(run, _)| run.clone()).collect();
    (reruns, runs_with_steps)
}

pub use cairn_postgres::testing::TestSchema as Schema;

/// A store in a fresh schema of the test database, or `None` (said loudly) when no server answers
/// and `CAIRN_REQUIRE_POSTGRES` is not `1`.
pub async fn postgres(tag: &str) -> Option<(cairn_postgres::PostgresStore, Schema)> {
    cairn_postgres::testing::test_store(tag).await
}

/// How many crash tests run at once in this binary: the harness's threads (`tests/main.rs`), and
/// the slots here. They spend their time waiting (on leases, sleeps and restarts: the whole
/// binary used 17 CPU seconds in 114 s of wall time), so four at a time finish in about a
/// quarter of the time, without competing for the CPU; the one test whose claim is a timing
/// margin runs [`exclusive`]ly. Six were too many for PostgreSQL's default 100 connections.
pub const AT_ONCE: u32 = 4;

/// The crash tests' slots.
static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(AT_ONCE as usize);

/// Waits for one of the crash tests' slots; the test holds it for its whole length.
pub async fn slot() -> tokio::sync::SemaphorePermit<'static> {
    SLOTS.acquire().await.expect("never closed")
}

/// [`slot`] for a test that is not async (call it before building a runtime).
pub fn slot_blocking() -> tokio::sync::SemaphorePermit<'static> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    runtime.block_on(slot())
}

/// Waits until no other crash test runs; the test runs alone while it holds every slot.
pub async fn exclusive() -> tokio::sync::SemaphorePermit<'static> {
    SLOTS.acquire_many(AT_ONCE).await.expect("never closed")
}
