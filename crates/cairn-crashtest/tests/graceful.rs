//! Graceful shutdown with a real process: a worker told to stop (SIGTERM) with steps in flight
//! lets them finish and commit, hands every lease back and exits; a second worker picks the runs
//! up at once, long before the first worker's leases would have expired; no committed step runs
//! again.

use crate::common::*;
use cairn::journal::Event;
use cairn::store::JournalStore;
use cairn::{Client, RunFilter, RunStatus, SqliteStore};
use std::collections::HashMap;
use std::time::Duration;

const RUNS: u64 = 30;

pub(crate) async fn sigterm_drains_steps_in_flight_and_hands_leases_back() {
    let _slot = crate::common::slot().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("graceful.db");
    let db_arg = db.to_str().unwrap();
    let log = dir.path().join("steps.log");
    let store = SqliteStore::open(&db).unwrap();
    let client = Client::new(store.clone());
    create_runs(&client, RUNS).await;
    signal_range(&client, 0..RUNS).await;

    // A long lease: without the hand-back, the runs would wait a minute for another worker.
    let mut first = spawn(db_arg, &log, RUNS, &["--lease-ms", "60000", "--pause-ms", "300", "--grace-ms", "20000"]);
    let in_flight = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let begins = text.lines().filter(|l| l.starts_with("begin")).count();
        let ends = text.lines().filter(|l| l.starts_with("end")).count();
        (begins, ends)
    };
    loop {
        let (begins, ends) = in_flight();
        if begins > ends && begins >= 15 {
            break;
        }
        assert!(first.try_wait().unwrap().is_none(), "the worker exited early");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let all = RunFilter { limit: Some(1000), ..RunFilter::default() };
    let leases: HashMap<String, i64> = client
        .list(&all)
        .await
        .unwrap()
        .runs
        .into_iter()
        .filter_map(|r| r.lease_expires_at.map(|at| (r.id.to_string(), at.as_millis())))
        .collect();
    assert!(!leases.is_empty(), "runs were leased when the worker was told to stop");
    terminate(&first);
    let status = first.wait().unwrap();
    assert!(status.success(), "the worker exits cleanly after SIGTERM: {status}");
    let stopped_at = now_micros() / 1000;

    // Every step body the first worker began, it finished (and, see `verify`, committed).
    let text = std::fs::read_to_string(&log).unwrap();
    let pid = first.id().to_string();
    let mine = |kind: &str| text.lines().filter(|l| l.starts_with(kind) && l.split(' ').nth(3) == Some(&pid)).count();
    assert_eq!(mine("begin"), mine("end"), "steps in flight finished before the worker exited");
    // Every lease was handed back: nothing is left running under the stopped worker.
    for run in client.list(&all).await.unwrap().runs {
        assert_ne!(run.status, RunStatus::Running, "{} still leased", run.id);
        assert!(run.lease_owner.is_none(), "{} still leased", run.id);
    }

    let mut second = spawn(db_arg, &log, RUNS, &["--exit-when-done", "--lease-ms", "60000"]);
    finish(&mut second, Duration::from_secs(300)).await;
    // No process was killed: every step body ran exactly once, in the process that committed it.
    assert_eq!(verify(&client, &store, &log, RUNS, &Expect::crashy(0), &HashMap::new()).await, 0);
    // The runs leased at the stop went on long before those leases would have expired.
    let mut resumed = 0;
    for (id, lease_expired_at) in &leases {
        let journal = store.read_journal(&cairn::RunId::new(id.as_str())).await.unwrap();
        let next =
            journal.iter().find(|e| e.at.as_millis() > stopped_at as i64 && !matches!(e.event, Event::Started { .. }));
        if let Some(next) = next {
            assert!(next.at.as_millis() < *lease_expired_at, "run {id} resumed only after its old lease expired");
            resumed += 1;
        }
    }
    assert!(resumed > 0, "some run leased at the stop was continued by the second worker");
}
