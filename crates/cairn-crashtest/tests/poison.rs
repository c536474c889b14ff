//! Poison runs with real processes: a run whose step aborts its worker process every time it runs
//! (no unwinding, no cleanup) is retried by restarted workers until it has crashed them more than
//! the limit allows in a row, then parked with an error naming the step; the other runs in the
//! same store complete meanwhile.

use crate::common::*;
use cairn::{Client, RunId, RunStatus, SqliteStore};
use std::time::Duration;

/// With the poison run, fewer than the worker's 10 run slots: all are claimed together.
const RUNS: u64 = 8;

pub(crate) async fn a_run_that_crashes_its_workers_is_parked_as_poison() {
    let _slot = crate::common::slot().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("poison.db");
    let db_arg = db.to_str().unwrap();
    let log = dir.path().join("steps.log");
    let client = Client::new(SqliteStore::open(&db).unwrap());
    create_runs(&client, RUNS).await;
    let poison = RunId::new("run-099");
    client.start("crashy", &99u64).id(poison.as_str()).allow_unknown().await.unwrap();
    signal_range(&client, 0..RUNS).await;
    client.signal(&poison, "go", &serde_json::json!({ "run": 99, "n": 1 })).await.unwrap();

    let options = ["--max-recoveries", "3", "--abort-at", "run-099/b"];
    let mut crashes = 0;
    while client.get(&poison).await.unwrap().status != RunStatus::Paused {
        let mut worker = spawn(db_arg, &log, RUNS, &options);
        // The worker runs until the poison run's step aborts it, or the run is parked.
        loop {
            if let Some(status) = worker.try_wait().unwrap() {
                assert!(!status.success(), "the worker aborted");
                crashes += 1;
                break;
            }
            if client.get(&poison).await.unwrap().status == RunStatus::Paused {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(crashes <= 8, "the run was not parked after {crashes} crashes");
    }
    let parked = client.get(&poison).await.unwrap();
    let error = parked.error.clone().unwrap();
    assert!(error.contains("CAIRN-E0109") && error.contains("`b`"), "{error}");
    // Its first step committed; the step that crashes was begun once per crash and never after.
    assert_eq!(crashes, 4, "one first attempt plus three recoveries in a row crashed: {error}");
    let text = std::fs::read_to_string(&log).unwrap();
    let b_begins = text.lines().filter(|l| l.starts_with("begin run-099 b ")).count();
    assert_eq!(b_begins, 4);

    let mut last = spawn(db_arg, &log, RUNS, &["--exit-when-done", "--max-recoveries", "3"]);
    finish(&mut last, Duration::from_secs(300)).await;
    for i in 0..RUNS {
        let run = client.get(&RunId::new(format!("run-{i:03}"))).await.unwrap();
        assert_eq!(run.status, RunStatus::Completed, "run {} is {} ({:?})", run.id, run.status, run.error);
    }
    assert_eq!(client.get(&poison).await.unwrap().status, RunStatus::Paused, "a parked run stays parked");
}
