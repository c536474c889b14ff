//! Crash test with real processes: a worker executing 100 runs of 5 steps (with a sleep and a
//! signal) on an SQLite file is killed with SIGKILL at random moments and restarted, again and
//! again. Every run must complete with the right output, every step must have exactly one
//! completion, and a step body may have run twice only where a kill landed while it was in flight.

use crate::common::*;
use cairn::{Client, SqliteStore};
use std::collections::HashMap;
use std::time::Duration;

const RUNS: u64 = 100;
const KILLS: usize = 12;

pub(crate) async fn runs_survive_repeated_kill_9() {
    let _slot = crate::common::slot().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("crash.db");
    let db_arg = db.to_str().unwrap();
    let log = dir.path().join("steps.log");
    let mut rng = Rng::seeded();

    let store = SqliteStore::open(&db).expect("open");
    let client = Client::new(store.clone());
    create_runs(&client, RUNS).await;
    // Half the signals are buffered before any worker runs; the rest arrive mid-way.
    signal_range(&client, 0..RUNS / 2).await;

    let mut killed = HashMap::new();
    for kill_number in 0..KILLS {
        let mut child = spawn(db_arg, &log, RUNS, &[]);
        tokio::time::sleep(Duration::from_millis(500 + rng.next(1500))).await;
        let (pid, at) = kill(&mut child);
        killed.insert(pid, at);
        if kill_number == KILLS / 2 {
            signal_range(&client, RUNS / 2..RUNS).await;
        }
    }
    let mut last = spawn(db_arg, &log, RUNS, &["--exit-when-done"]);
    finish(&mut last, Duration::from_secs(300)).await;
    let reruns = verify(&client, &store, &log, RUNS, &Expect::crashy(0), &killed).await;
    eprintln!("{KILLS} kills, {reruns} step bodies re-ran after a kill");
}
