//! Child workflows across worker processes on PostgreSQL: one process serves only the parent
//! workflow, another only the child, so every parent runs in the first and every child in the
//! second (the execution log says which process ran each step). Every parent gets its child's
//! output; cancelling a parent cancels the child it waits for, in the other process.

use crate::common::*;
use cairn::{Client, RunFilter, RunId, RunStatus};
use std::time::Duration;

const RUNS: u64 = 6;

async fn wait_status(client: &Client, id: &RunId, status: RunStatus) {
    for _ in 0..6_000 {
        if client.get(id).await.unwrap().status == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let run = client.get(id).await.unwrap();
    panic!("run {id} never reached {status}: it is {} ({:?})", run.status, run.error);
}

/// Waits until some worker has served each of `names` on the store. A parent's child start is
/// refused for a workflow no worker has served yet ([CAIRN-E0304]), so the parents' runs must not
/// begin before the process that serves their children has started (the two start at once).
async fn wait_served(client: &Client, names: &[&str]) {
    for _ in 0..6_000 {
        let served = client.served_workflows().await.unwrap();
        if names.iter().all(|name| served.iter().any(|s| s.key.name == *name)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no worker served {names:?}: {:?}", client.served_workflows().await.unwrap());
}

pub(crate) async fn parents_and_children_run_in_different_processes_and_a_cancel_reaches_the_child() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("children").await else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("steps.log");
    let client = Client::new(store.clone());
    let common = ["--schema", schema.name.as_str(), "--pause-ms", "20"];
    let parents = spawn(&schema.url, &log, RUNS, &[&common[..], &["--only", "family"]].concat());
    let children = spawn(&schema.url, &log, RUNS, &[&common[..], &["--only", "member"]].concat());
    wait_served(&client, &["family", "member"]).await;
    create_runs_of(&client, "family", RUNS).await;
    for i in 0..RUNS {
        let id = RunId::new(format!("run-{i:03}"));
        wait_status(&client, &id, RunStatus::Completed).await;
        let output: u64 = serde_json::from_str(client.get(&id).await.unwrap().output.unwrap().get()).unwrap();
        assert_eq!(output, 4 * i + 1, "output of {id}");
        let kids = client.children(&id).await.unwrap();
        assert_eq!(kids.len(), 1, "{id} has one child");
        assert_eq!((kids[0].workflow.as_str(), kids[0].rare().parent.as_ref()), ("member", Some(&id)));
    }
    // Which process ran what: parents' steps in one, children's in the other.
    let text = std::fs::read_to_string(&log).unwrap();
    let pid_of = |path: &str| -> Vec<u32> {
        let mut pids: Vec<u32> = text
            .lines()
            .filter(|l| l.starts_with("begin ") && l.split(' ').nth(2) == Some(path))
            .map(|l| l.split(' ').nth(3).unwrap().parse().unwrap())
            .collect();
        pids.dedup();
        pids
    };
    assert_eq!(pid_of("a"), [parents.id()]);
    assert_eq!(pid_of("b"), [parents.id()]);
    assert_eq!(pid_of("m1"), [children.id()]);

    // A parent whose child waits an hour: cancelling the parent cancels the child.
    client.start("family", &100u64).id("long").allow_unknown().await.unwrap();
    let long = RunId::new("long");
    wait_status(&client, &long, RunStatus::Suspended).await;
    let child = client.children(&long).await.unwrap().pop().unwrap().id;
    wait_status(&client, &child, RunStatus::Suspended).await;
    client.cancel(&long).await.unwrap();
    wait_status(&client, &long, RunStatus::Cancelled).await;
    wait_status(&client, &child, RunStatus::Cancelled).await;
    let all = client.list(&RunFilter { limit: Some(1000), ..RunFilter::default() }).await.unwrap().runs;
    assert_eq!(all.len() as u64, 2 * RUNS + 2, "no run started twice");
    drop((parents, children));
}
