//! A concurrency limit across three worker processes sharing one PostgreSQL database (ten runs
//! at a time each), one of them SIGKILLed mid-way and started again: at most 3 `ticker` runs hold
//! a slot at once. Every run completes with its step committed once, each step body ran once in
//! the process that committed it (again only where a process was killed with it in flight), and
//! the execution log written by the step bodies never shows more than 3 bodies running at any
//! instant (a killed process's body counts as running until the kill).

use crate::common::*;
use cairn::{Client, ConcurrencyRule};
use std::collections::HashMap;

const RUNS: u64 = 60;
const LIMIT: usize = 3;

pub(crate) async fn never_more_than_three_inside_their_step_across_three_workers() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("concurrency").await else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("steps.log");
    let client = Client::new(store.clone());
    client.put_concurrency(&ConcurrencyRule::per_workflow("ticker", LIMIT as u32)).await.unwrap();
    create_runs_of(&client, "ticker", RUNS).await;
    let limit = LIMIT.to_string();
    let options =
        ["--schema", schema.name.as_str(), "--only", "ticker", "--pause-ms", "200", "--ticker-limit", limit.as_str()];
    let killed = three_workers_one_killed(&schema.url, &log, RUNS, &options, 2).await;
    let reruns = verify(&client, &store, &log, RUNS, &Expect::ticker(), &killed).await;

    // Every body's interval, from its begin to its end (or its process's death).
    let text = std::fs::read_to_string(&log).unwrap();
    let mut open: HashMap<(String, String), u128> = HashMap::new();
    let mut changes: Vec<(u128, i32)> = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let key = (parts[1].to_owned(), parts[3].to_owned());
        let at: u128 = parts[4].parse().unwrap();
        match parts[0] {
            "begin" => {
                open.insert(key, at);
                changes.push((at, 1));
            }
            _ => {
                open.remove(&key);
                changes.push((at, -1));
            }
        }
    }
    for (_, pid) in open.keys() {
        changes.push((killed[&pid.parse().unwrap()], -1));
    }
    // Ends before begins at the same microsecond.
    changes.sort();
    let (mut inside, mut most) = (0, 0);
    for (_, change) in &changes {
        inside += change;
        most = most.max(inside);
    }
    assert_eq!(inside, 0);
    assert!(most as usize <= LIMIT, "{most} step bodies ran at once");
    assert_eq!(most as usize, LIMIT, "the limit was reached (the test would see an excess)");
    eprintln!("{RUNS} runs, at most {most} inside their step at once; {reruns} re-ran after the kill");
}
