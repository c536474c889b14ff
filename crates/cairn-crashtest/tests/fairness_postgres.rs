//! Priority with fairness across three worker processes sharing one PostgreSQL database (ten
//! runs at a time each). Queued before any worker starts: 600 runs of tenant `a`, then 10 of
//! tenant `b`, then 20 of a higher priority. The execution log written by the step bodies shows
//! that every run of `b` and every high-priority run began before `a`'s 100th run did, though
//! they were queued after all of `a`'s; every run completed with its step committed once, and
//! no step body ran twice.

use crate::common::*;
use cairn::Client;
use std::collections::HashMap;
use std::time::Duration;

const A_RUNS: u64 = 600;
const B_RUNS: u64 = 10;
const HIGH_RUNS: u64 = 20;

pub(crate) async fn a_small_tenant_and_high_priorities_go_first_across_three_workers() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("fairness").await else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("steps.log");
    let client = Client::new(store.clone());
    let total = A_RUNS + B_RUNS + HIGH_RUNS;
    for i in 0..total {
        let start = client.start("ticker", &i).id(format!("run-{i:03}")).allow_unknown();
        let start = match i {
            i if i < A_RUNS => start.fairness_key("a"),
            i if i < A_RUNS + B_RUNS => start.fairness_key("b"),
            _ => start.priority(5),
        };
        start.await.unwrap();
    }
    let options = ["--schema", schema.name.as_str(), "--only", "ticker", "--pause-ms", "300", "--exit-when-done"];
    let mut workers: Vec<Worker> = (0..3).map(|_| spawn(&schema.url, &log, total, &options)).collect();
    for worker in &mut workers {
        finish(worker, Duration::from_secs(600)).await;
    }
    let reruns = verify(&client, &store, &log, total, &Expect::ticker(), &HashMap::new()).await;
    assert_eq!(reruns, 0);

    // When each run's step began, by the log.
    let text = std::fs::read_to_string(&log).unwrap();
    let began: HashMap<u64, u128> = text
        .lines()
        .filter_map(|line| line.strip_prefix("begin run-"))
        .map(|rest| {
            let parts: Vec<&str> = rest.split(' ').collect();
            (parts[0].parse().unwrap(), parts[3].parse().unwrap())
        })
        .collect();
    assert_eq!(began.len() as u64, total);
    let hundredth_of_a = began[&99];
    let late: Vec<u64> = (A_RUNS..total).filter(|i| began[i] >= hundredth_of_a).collect();
    assert!(late.is_empty(), "runs of b or of the higher priority began after a's 100th: {late:?}");
    let mut order: Vec<(u128, u64)> = began.iter().map(|(i, at)| (*at, *i)).collect();
    order.sort();
    let position = |i: u64| order.iter().position(|(_, j)| *j == i).unwrap();
    let last_of_b = (A_RUNS..A_RUNS + B_RUNS).map(position).max().unwrap();
    let last_high = (A_RUNS + B_RUNS..total).map(position).max().unwrap();
    eprintln!(
        "a's 100th run began {}th, b's last {}th, the last high-priority run {}th",
        position(99) + 1,
        last_of_b + 1,
        last_high + 1
    );
}
