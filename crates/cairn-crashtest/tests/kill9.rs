//! Crash test with real processes: a worker executing 100 runs of 5 steps (with a sleep and a
//! signal) on an SQLite file is killed with SIGKILL at random moments and restarted, again and
//! again. Every run must complete with the right output, every step must have exactly one
//! completion, and a step body may have run twice only where a kill landed while it was in flight.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use cairn::journal::{Event, RunState};
use cairn::{Client, RunFilter, RunId, RunStatus, SqliteStore, Store};
use std::collections::{HashMap, HashSet};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime};

const RUNS: u64 = 100;
const KILLS: usize = 12;
const STEPS: [&str; 5] = ["a", "b", "c", "d", "e"];

fn expected(index: u64) -> u64 {
    let b = (index + 1) * 2;
    (b + index * 7) * 3 + 1
}

struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

fn spawn(db: &std::path::Path, log: &std::path::Path, exit_when_done: bool) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crash-worker"));
    command.arg(db).arg(log).arg(RUNS.to_string());
    if exit_when_done {
        command.arg("--exit-when-done");
    }
    command.spawn().expect("spawn crash-worker")
}

async fn signal_range(client: &Client, range: std::ops::Range<u64>) {
    for i in range {
        let payload = serde_json::json!({ "run": i, "n": i * 7 });
        client.signal(&RunId::new(format!("run-{i:03}")), "go", &payload).await.expect("signal");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_survive_repeated_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("crash.db");
    let log = dir.path().join("steps.log");
    let seed = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);

    let store = SqliteStore::open(&db).expect("open");
    let client = Client::new(store.clone());
    for i in 0..RUNS {
        client.start("crashy", &i).id(format!("run-{i:03}")).await.expect("start");
    }
    // Half the signals are buffered before any worker runs; the rest arrive mid-way.
    signal_range(&client, 0..RUNS / 2).await;

    let mut killed: HashSet<u32> = HashSet::new();
    for kill in 0..KILLS {
        let mut child = spawn(&db, &log, false);
        tokio::time::sleep(Duration::from_millis(500 + rng.next(1500))).await;
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        killed.insert(child.id());
        if kill == KILLS / 2 {
            signal_range(&client, RUNS / 2..RUNS).await;
        }
    }

    let mut last = spawn(&db, &log, true);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = last.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = last.kill();
            panic!("the last worker did not finish the runs");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "last worker exited with {status}");
    let survivor = last.id();

    // Every run completed with the right output.
    let page = client.list(&RunFilter { limit: Some(1000), ..RunFilter::default() }).await.expect("list");
    assert_eq!(page.runs.len() as u64, RUNS);
    let mut committed_by: HashMap<(String, String), u32> = HashMap::new();
    for run in &page.runs {
        assert_eq!(run.status, RunStatus::Completed, "run {} is {} ({:?})", run.id, run.status, run.error);
        let index: u64 = run.id.as_str()[4..].parse().expect("index");
        let output: u64 = serde_json::from_str(run.output.as_ref().expect("output").get()).expect("u64");
        assert_eq!(output, expected(index), "output of {}", run.id);

        // Every step has exactly one completion; the journal folds.
        let journal = store.read_journal(&run.id).await.expect("journal");
        RunState::fold(&journal).expect("journal folds");
        let mut completions: HashMap<String, usize> = HashMap::new();
        for entry in &journal {
            if let Event::StepCompleted { path, output, .. } = &entry.event {
                *completions.entry(path.to_string()).or_default() += 1;
                let out: serde_json::Value = serde_json::from_str(output.get()).expect("json");
                let pid = out["pid"].as_u64().expect("pid") as u32;
                committed_by.insert((run.id.to_string(), path.to_string()), pid);
            }
        }
        for step in STEPS {
            assert_eq!(completions.get(step), Some(&1), "run {} step {step}", run.id);
        }
        assert_eq!(completions.len(), STEPS.len());
        assert!(journal.iter().any(|e| matches!(&e.event, Event::WaitCompleted { signal: Some(_), .. })));
    }

    // The execution log: a body ran again only where a kill landed while it was in flight.
    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<(String, String, u32)> = text
        .lines()
        .map(|l| {
            let parts: Vec<&str> = l.split(' ').collect();
            assert_eq!(parts.len(), 4, "log line {l:?}");
            (parts[1].to_owned(), parts[2].to_owned(), parts[3].parse().expect("pid"))
        })
        .collect();
    let mut reruns = 0;
    for (position, (run, path, pid)) in lines.iter().enumerate() {
        let committer = committed_by[&(run.clone(), path.clone())];
        if *pid == committer {
            continue;
        }
        reruns += 1;
        assert!(killed.contains(pid), "{run}/{path} ran in {pid}, which was not killed, but {committer} committed it");
        let later_in_same_process = lines[position + 1..].iter().any(|(r, _, p)| r == run && p == pid);
        assert!(!later_in_same_process, "{run}/{path} in {pid} was not in flight when {pid} was killed");
    }
    let mut begun_by_committer: HashMap<(String, String), usize> = HashMap::new();
    for (run, path, pid) in &lines {
        if committed_by[&(run.clone(), path.clone())] == *pid {
            *begun_by_committer.entry((run.clone(), path.clone())).or_default() += 1;
        }
    }
    assert!(begun_by_committer.values().all(|&n| n == 1), "a body ran twice in the process that committed it");
    assert_eq!(begun_by_committer.len() as u64, RUNS * STEPS.len() as u64);
    eprintln!("{KILLS} kills, {reruns} step bodies re-ran after a kill, survivor pid {survivor}");
}
