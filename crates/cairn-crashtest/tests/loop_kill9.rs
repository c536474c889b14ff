//! Crash test with real processes for durable loops: runs of a 40-iteration loop (one step per
//! iteration, the last 3 iterations kept in the journal) on an SQLite file whose worker is killed
//! with SIGKILL at random moments and restarted. Every run must complete with the right sum; an
//! iteration's step may have run again only where a kill landed while that iteration was the
//! one in flight (a restart resumes from the last checkpoint, never from further back); and the
//! journals stay trimmed.

use crate::common::*;
use cairn::journal::RunState;
use cairn::store::JournalStore;
use cairn::{Client, RunFilter, RunStatus, SqliteStore};
use std::collections::HashMap;

const RUNS: u64 = 20;
const ITERATIONS: u64 = 40;
const KILLS: usize = 8;

pub(crate) async fn loops_resume_from_their_last_checkpoint_after_repeated_kill_9() {
    let _slot = crate::common::slot().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("crash.db");
    let db_arg = db.to_str().unwrap();
    let log = dir.path().join("steps.log");
    let store = SqliteStore::open(&db).expect("open");
    let client = Client::new(store.clone());
    create_runs_of(&client, "looper", RUNS).await;

    let killed = kill_repeatedly(db_arg, &log, RUNS, KILLS, &["--pause-ms", "40"]).await;

    // Who committed each iteration, from the runs' outputs.
    let mut committed_by: HashMap<(String, u64), u32> = HashMap::new();
    let page = client.list(&RunFilter { limit: Some(1000), ..RunFilter::default() }).await.unwrap();
    assert_eq!(page.runs.len() as u64, RUNS);
    for run in &page.runs {
        assert_eq!(run.status, RunStatus::Completed, "run {} is {} ({:?})", run.id, run.status, run.error);
        let index: u64 = run.id.as_str()[4..].parse().unwrap();
        let (sum, pids): (u64, Vec<u32>) = serde_json::from_str(run.output.as_ref().unwrap().get()).unwrap();
        assert_eq!(sum, (0..ITERATIONS).map(|i| index + i).sum::<u64>(), "sum of {}", run.id);
        assert_eq!(pids.len() as u64, ITERATIONS);
        for (i, pid) in pids.into_iter().enumerate() {
            committed_by.insert((run.id.to_string(), i as u64), pid);
        }
        let journal = store.read_journal(&run.id).await.unwrap();
        RunState::fold(&journal).expect("a trimmed journal folds");
        assert!(journal.len() < 15, "{} rows for {} after {ITERATIONS} iterations", journal.len(), run.id);
    }

    // Every begun step, in log order: (run, iteration, pid).
    let text = std::fs::read_to_string(&log).unwrap();
    let begun: Vec<(String, u64, u32)> = text
        .lines()
        .filter(|l| l.starts_with("begin "))
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            let iteration = parts[2].trim_start_matches("tick[").split(']').next().unwrap().parse().unwrap();
            (parts[1].to_owned(), iteration, parts[3].parse().unwrap())
        })
        .collect();
    let mut reruns = 0;
    for (position, (run, iteration, pid)) in begun.iter().enumerate() {
        let committer = committed_by[&(run.clone(), *iteration)];
        if *pid == committer {
            let again = begun[position + 1..].iter().any(|(r, i, p)| r == run && i == iteration && p == pid);
            assert!(!again, "{run} iteration {iteration} ran twice in {pid}, which committed it");
            continue;
        }
        reruns += 1;
        assert!(killed.contains_key(pid), "{run} iteration {iteration} ran in {pid}, which was not killed");
        let later = begun[position + 1..].iter().any(|(r, _, p)| r == run && p == pid);
        assert!(!later, "{run} iteration {iteration} in {pid} was not in flight when {pid} was killed");
    }
    for run in &page.runs {
        for iteration in 0..ITERATIONS {
            assert!(begun.iter().any(|(r, i, _)| r == run.id.as_str() && *i == iteration), "{} {iteration}", run.id);
        }
    }
    eprintln!("{KILLS} kills, {reruns} iterations re-ran after a kill");
}
