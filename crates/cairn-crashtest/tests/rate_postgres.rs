//! A rate limit across three worker processes sharing one PostgreSQL database, one of them
//! SIGKILLed mid-way and started again: `ticker`'s step `tick` may run at most 4 times in any
//! second. Every run completes with its step committed once; the step bodies' execution log shows
//! each body ran once in the process that committed it (again only where a process was killed
//! with it in flight) and began after its turn was granted; and the turns the committed steps
//! were granted (their journaled `started_at`) never number more than 4 in any second.

use crate::common::*;
use cairn::Client;
use cairn::journal::Event;
use cairn::store::JournalStore;
use std::collections::HashMap;

const RUNS: u64 = 40;
const LIMIT: usize = 4;
const PERIOD_MS: i64 = 1_000;

pub(crate) async fn a_step_runs_at_most_four_times_a_second_across_three_workers() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("rate").await else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("steps.log");
    let client = Client::new(store.clone());
    create_runs_of(&client, "ticker", RUNS).await;
    let rate = format!("{LIMIT}/{PERIOD_MS}");
    let options = ["--schema", schema.name.as_str(), "--only", "ticker", "--pause-ms", "200", "--tick-rate", &rate];
    let killed = three_workers_one_killed(&schema.url, &log, RUNS, &options, 3).await;
    let reruns = verify(&client, &store, &log, RUNS, &Expect::ticker(), &killed).await;

    // The turns the committed steps were granted, from their journals.
    let mut granted: HashMap<String, i64> = HashMap::new();
    for i in 0..RUNS {
        let id = cairn::RunId::new(format!("run-{i:03}"));
        let journal = store.read_journal(&id).await.unwrap();
        let started = journal.iter().find_map(|e| match &e.event {
            Event::StepCompleted { started_at: Some(at), .. } => Some(at.as_millis()),
            _ => None,
        });
        granted.insert(id.to_string(), started.unwrap());
    }
    let mut turns: Vec<i64> = granted.values().copied().collect();
    turns.sort();
    for (i, first) in turns.iter().enumerate() {
        let within = turns[i..].iter().take_while(|at| **at < first + PERIOD_MS).count();
        assert!(within <= LIMIT, "{within} turns within a second from {first}: {turns:?}");
    }
    // Each body began once its turn was granted (the log's clock is the same machine's).
    let text = std::fs::read_to_string(&log).unwrap();
    for line in text.lines().filter(|l| l.starts_with("begin ")) {
        let parts: Vec<&str> = line.split(' ').collect();
        let began_ms = (parts[4].parse::<u128>().unwrap() / 1_000) as i64;
        let turn = granted[parts[1]];
        assert!(began_ms >= turn || killed.contains_key(&parts[3].parse().unwrap()), "{line} before its turn {turn}");
    }
    let spread = turns.last().unwrap() - turns.first().unwrap();
    eprintln!("{RUNS} steps over {spread} ms at most {LIMIT} a second; {reruns} re-ran after the kill");
    assert!(spread >= (RUNS as i64 / LIMIT as i64 - 1) * PERIOD_MS, "the limit held them back: {spread} ms");
}
