//! Three worker processes share one PostgreSQL database and execute 500 runs of 10 steps (with a
//! sleep and a signal); one of them is killed with SIGKILL several times and restarted. Every run
//! completes once with the right output, no step has two completions, the killed worker's runs are
//! reclaimed after its lease expires, and the execution log shows no step body running in two
//! processes at the same time.

use crate::common::*;
use cairn::Client;
use std::collections::HashMap;
use std::time::Duration;

const RUNS: u64 = 500;
const EXTRA: u64 = 5;
const KILLS: usize = 5;

pub(crate) async fn three_workers_one_killed_repeatedly() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("multiprocess").await else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("steps.log");
    let mut rng = Rng::seeded();
    let client = Client::new(store.clone());
    create_runs(&client, RUNS).await;
    signal_range(&client, 0..RUNS / 2).await;

    let extra = EXTRA.to_string();
    let options = ["--schema", schema.name.as_str(), "--extra-steps", extra.as_str(), "--pause-ms", "25"];
    let steady: Vec<_> = (0..2)
        .map(|_| {
            let mut args = options.to_vec();
            args.push("--exit-when-done");
            spawn(&schema.url, &log, RUNS, &args)
        })
        .collect();
    let mut killed = HashMap::new();
    for kill_number in 0..KILLS {
        let mut victim = spawn(&schema.url, &log, RUNS, &options);
        tokio::time::sleep(Duration::from_millis(800 + rng.next(1500))).await;
        let (pid, at) = kill(&mut victim);
        killed.insert(pid, at);
        if kill_number == 1 {
            signal_range(&client, RUNS / 2..RUNS).await;
        }
    }
    let mut args = options.to_vec();
    args.push("--exit-when-done");
    let mut last = spawn(&schema.url, &log, RUNS, &args);
    for mut worker in steady {
        finish(&mut worker, Duration::from_secs(300)).await;
    }
    finish(&mut last, Duration::from_secs(300)).await;
    let reruns = verify(&client, &store, &log, RUNS, &Expect::crashy(EXTRA), &killed).await;
    eprintln!("3 workers, {KILLS} kills, {reruns} step bodies re-ran after a kill");
}
