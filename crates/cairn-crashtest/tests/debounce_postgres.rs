//! Debounce across three worker processes sharing one PostgreSQL database: each process makes
//! 17 debounced `ticker` starts for each of 4 keys, all at once, and this test makes the last
//! start of each key once every process's starts have returned (52 starts per key inside one
//! window). Each key gets exactly one run; every start of a key names that run; the run got the
//! last start's input (it is its output and its journaled input); and the execution log written
//! by the step bodies shows each run's step began once, after the key had been quiet.

use crate::common::*;
use cairn::journal::Event;
use cairn::store::JournalStore;
use cairn::{Client, Debounce, RunFilter, RunId, RunStatus};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const KEYS: u64 = 4;
const ROUNDS: u64 = 17;
const QUIET_MS: u64 = 8_000;

/// The execution log's lines starting with `what`, split into fields.
fn lines(log: &std::path::Path, what: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let prefix = format!("{what} ");
    text.lines().filter(|l| l.starts_with(&prefix)).map(|l| l.split(' ').map(str::to_owned).collect()).collect()
}

pub(crate) async fn fifty_two_starts_per_key_from_four_processes_make_one_run_each_with_the_last_input() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("debounce").await else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("steps.log");
    let client = Client::new(store.clone());
    let spec = format!("{KEYS}/{ROUNDS}/{QUIET_MS}");
    let options =
        ["--schema", schema.name.as_str(), "--only", "ticker", "--pause-ms", "50", "--debounce-starts", &spec];
    let mut workers: Vec<Worker> = (0..3).map(|_| spawn(&schema.url, &log, KEYS, &options)).collect();
    let expected = (3 * KEYS * ROUNDS) as usize;
    for _ in 0..6_000 {
        if lines(&log, "start").len() >= expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(lines(&log, "start").len(), expected, "every process made its starts");

    // The last start of each key, from this process, once every other start has returned.
    let mut last: BTreeMap<String, (RunId, u128, u64)> = BTreeMap::new();
    for key in 0..KEYS {
        let key = format!("key-{key}");
        let input = 1_000_000 + last.len() as u64;
        let at = now_micros();
        let debounce = Debounce::new(&key, Duration::from_millis(QUIET_MS));
        let handle = client.start("ticker", &input).debounce(debounce).allow_unknown().await.unwrap();
        assert!(!handle.created(), "{key}: the last start joined the window the processes opened");
        last.insert(key, (handle.id().clone(), at, input));
    }
    for (id, _, _) in last.values() {
        for _ in 0..6_000 {
            if client.get(id).await.unwrap().status == RunStatus::Completed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    for worker in &workers {
        terminate(worker);
    }
    for worker in &mut workers {
        finish(worker, Duration::from_secs(60)).await;
    }

    // One run per key, and every start of a key named it.
    let filter = RunFilter { workflow: Some("ticker".into()), limit: Some(1000), ..RunFilter::default() };
    let runs: BTreeSet<String> = client.list(&filter).await.unwrap().runs.iter().map(|r| r.id.to_string()).collect();
    let ids: BTreeSet<String> = last.values().map(|(id, _, _)| id.to_string()).collect();
    assert_eq!(runs, ids, "exactly one run per key");
    for start in lines(&log, "start") {
        assert_eq!(start[1], last[&start[2]].0.as_str(), "{start:?} named another run than its key's");
    }
    let begins = lines(&log, "begin");
    for (key, (id, at, input)) in &last {
        let run = client.get(id).await.unwrap();
        assert_eq!(run.status, RunStatus::Completed, "{key}");
        assert_eq!(run.output.as_ref().map(|o| o.get().to_owned()), Some(input.to_string()), "{key}: the last input");
        let journal = store.read_journal(id).await.unwrap();
        assert!(
            matches!(&journal[0].event, Event::Started { input: i, .. } if i.get() == input.to_string()),
            "{key}: {:?}",
            journal[0].event
        );
        // Its step began once, and not before the key had been quiet after its last start.
        let began: Vec<u128> = begins.iter().filter(|b| b[1] == id.as_str()).map(|b| b[4].parse().unwrap()).collect();
        assert_eq!(began.len(), 1, "{key}: {began:?}");
        // (Within a millisecond: the run's times are whole milliseconds.)
        let quiet_after = at + u128::from(QUIET_MS) * 1_000;
        assert!(
            began[0] + 1_000 >= quiet_after,
            "{key} began {} µs after its last start",
            began[0].saturating_sub(*at)
        );
    }
    eprintln!("{} starts per key from 3 processes and this one: one run each, with the last input", 3 * ROUNDS + 1);
}
