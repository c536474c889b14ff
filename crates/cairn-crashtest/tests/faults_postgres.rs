//! Worker processes reach PostgreSQL through a fault-injecting TCP proxy (`common::proxy`): a
//! slow database, one that refuses connections, one that never answers, a partition and resets.
//! Every run still completes once, and each step body runs once unless a fault says otherwise.

use crate::common::proxy::Proxy;
use crate::common::*;
use cairn::Client;
use std::collections::HashMap;
use std::time::Duration;

const LEASE_MS: &str = "3000";

/// Starts `runs` `crashy` runs (five steps, a short sleep, a signal already sent) in a fresh
/// schema; `None` when no PostgreSQL answers.
async fn seeded(tag: &str, runs: u64) -> Option<(cairn_postgres::PostgresStore, Schema, Client)> {
    let (store, schema) = postgres(tag).await?;
    let client = Client::new(store.clone());
    create_runs(&client, runs).await;
    signal_range(&client, 0..runs).await;
    Some((store, schema, client))
}

/// How many runs a worker's log says it recovered from an expired lease.
fn recoveries(stderr: &std::path::Path) -> usize {
    std::fs::read_to_string(stderr).unwrap_or_default().lines().filter(|l| l.contains("recovered")).count()
}

/// With 300 ms added each way (a 600 ms round trip) and a 3 s lease, two workers complete 100
/// runs of five steps with no lease lost: no run recovered, and each step body ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_database_costs_no_leases() {
    let _alone = alone().await;
    const RUNS: u64 = 100;
    let Some((store, schema, client)) = seeded("slow_db", RUNS).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("steps.log");
    let mut workers = Vec::new();
    let mut proxies = Vec::new();
    for n in 0..2 {
        let proxy = Proxy::to_url(&schema.url).await;
        proxy.set_latency(Duration::from_millis(300));
        let url = proxy.url(&schema.url);
        let stderr = dir.path().join(format!("worker-{n}.log"));
        let args = ["--schema", &schema.name, "--lease-ms", LEASE_MS, "--pause-ms", "50", "--exit-when-done"];
        workers.push((spawn_logged(&url, &log, RUNS, &args, &stderr), stderr));
        proxies.push(proxy);
    }
    for (worker, _) in &mut workers {
        finish(worker, Duration::from_secs(300)).await;
    }
    let recovered: Vec<usize> = workers.iter().map(|(_, stderr)| recoveries(stderr)).collect();
    // Each step completed once, and ran only in the process that committed it.
    verify(&client, &store, &log, RUNS, &Expect::crashy(0), &HashMap::new()).await;
    assert_eq!(recovered, [0, 0], "runs recovered from expired leases, by worker");
}
