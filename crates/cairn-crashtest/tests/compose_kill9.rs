//! Crash test with real processes for the authoring vocabulary: runs that join two branches, run
//! six items three at a time, and race two branches, on an SQLite file whose worker is killed with
//! SIGKILL at random moments and restarted. Every run must complete with the right output, every
//! branch step, item and race winner must be journaled once, and a step body may have run twice
//! only where a kill landed while it was in flight.

use crate::common::*;
use cairn::{Client, SqliteStore};

const RUNS: u64 = 40;
const KILLS: usize = 8;

pub(crate) async fn branches_items_and_races_survive_repeated_kill_9() {
    let _slot = crate::common::slot().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("crash.db");
    let db_arg = db.to_str().unwrap();
    let log = dir.path().join("steps.log");
    let store = SqliteStore::open(&db).expect("open");
    let client = Client::new(store.clone());
    create_runs_of(&client, "compose", RUNS).await;

    let killed = kill_repeatedly(db_arg, &log, RUNS, KILLS, &[]).await;
    let reruns = verify(&client, &store, &log, RUNS, &Expect::compose(), &killed).await;
    eprintln!("{KILLS} kills, {reruns} step bodies re-ran after a kill");
}
