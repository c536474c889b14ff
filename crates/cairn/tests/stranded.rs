//! Workers record themselves in the store; runs whose version no live worker serves are
//! stranded, listed with the reason, and go on when a worker that serves them starts.

use crate::common::wait_for_status;
use cairn::prelude::*;
use cairn::store::{WorkerRecord, WorkflowKey};
use cairn::{RunFilter, RunStatus, Store, Timestamp};
use std::sync::Arc;
use std::time::Duration;

async fn waits_for_go(ctx: Ctx, n: u32) -> Result<String, WorkflowError> {
    let go: Option<String> = ctx.wait_for_event("go", EventFilter::any(), Duration::from_secs(3600)).await?;
    Ok(format!("v1 {n} {go:?}"))
}

async fn v2(_ctx: Ctx, n: u32) -> Result<String, WorkflowError> {
    Ok(format!("v2 {n}"))
}

fn stranded_ids(page: &cairn::StrandedPage) -> Vec<String> {
    page.runs.iter().map(|s| s.run.id.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_a_version_no_live_worker_serves_are_stranded_until_it_returns() {
    let (store, _dir) = crate::common::sqlite();
    let store: Arc<dyn Store> = Arc::new(store);

    // Version 1 starts three runs that wait for a signal, then its worker stops.
    let old =
        Engine::builder().shared_store(Arc::clone(&store)).register("order", 1, waits_for_go).start().await.unwrap();
    let workers = old.client().live_workers().await.unwrap().workers;
    assert_eq!(workers.len(), 1);
    assert_eq!(workers[0].id, old.worker_id());
    assert_eq!(workers[0].pid, std::process::id());
    assert_eq!(workers[0].serves, [WorkflowKey { name: "order".into(), version: 1 }]);
    let mut ids = Vec::new();
    for n in 0..3u32 {
        let run = old.client().start("order", &n).id(format!("v1-{n}")).await.unwrap();
        wait_for_status(&old.client(), run.id(), RunStatus::Suspended).await;
        ids.push(run.id().clone());
    }
    assert!(
        old.client().stranded(&RunFilter::default()).await.unwrap().runs.is_empty(),
        "served while its worker lives"
    );
    old.shutdown().await;

    let client = Client::from_shared(Arc::clone(&store));
    assert!(client.live_workers().await.unwrap().workers.is_empty(), "a worker that shut down is gone");
    let page = client.stranded(&RunFilter::default()).await.unwrap();
    assert_eq!(stranded_ids(&page), ["v1-2", "v1-1", "v1-0"]);
    assert!(page.runs.iter().all(|s| s.reason == "no worker is live"));

    // Only version 2 is deployed: the old runs stay stranded, with the reason, even when signalled.
    let new = Engine::builder().shared_store(Arc::clone(&store)).register("order", 2, v2).start().await.unwrap();
    let fresh = new.client().start("order", &7u32).await.unwrap();
    assert_eq!(fresh.result::<String>().await.unwrap(), "v2 7");
    for id in &ids {
        new.client().signal(id, "go", "now").await.unwrap();
    }
    let page = client.stranded(&RunFilter::default()).await.unwrap();
    assert_eq!(stranded_ids(&page), ["v1-2", "v1-1", "v1-0"]);
    let reason = "no live worker serves version 1 of `order` (live workers serve version 2)";
    assert!(page.runs.iter().all(|s| s.reason == reason), "{:?}", page.runs[0].reason);
    let versions = client.stranded_versions().await.unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!((versions[0].key.version, versions[0].runs, versions[0].reason.as_str()), (1, 3, reason));
    // A filter narrows the list; pages carry on.
    let one = client.stranded(&RunFilter { limit: Some(1), ..RunFilter::default() }).await.unwrap();
    assert_eq!(stranded_ids(&one), ["v1-2"]);
    let rest = RunFilter { cursor: one.next_cursor, ..RunFilter::default() };
    assert_eq!(stranded_ids(&client.stranded(&rest).await.unwrap()), ["v1-1", "v1-0"]);
    let other = RunFilter { workflow: Some("billing".into()), ..RunFilter::default() };
    assert!(client.stranded(&other).await.unwrap().runs.is_empty());
    for id in &ids {
        assert_ne!(client.get(id).await.unwrap().status, RunStatus::Completed, "nobody executes version 1");
    }

    // Restoring version 1 (beside version 2) resumes every stranded run.
    let both = Engine::builder()
        .shared_store(Arc::clone(&store))
        .register("order", 1, waits_for_go)
        .register("order", 2, v2)
        .start()
        .await
        .unwrap();
    assert!(client.stranded(&RunFilter::default()).await.unwrap().runs.is_empty());
    assert!(client.stranded_versions().await.unwrap().is_empty());
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(both.client().result::<String>(id).await.unwrap(), format!("v1 {n} Some(\"now\")"));
    }
    let served: Vec<u32> = client.live_workers().await.unwrap().served().iter().map(|k| k.version).collect();
    assert_eq!(served, [1, 2], "both live workers' versions");
    both.shutdown().await;
    new.shutdown().await;
    assert!(client.live_workers().await.unwrap().workers.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stops_beating_is_no_longer_live() {
    let (store, _dir) = crate::common::sqlite();
    let client = Client::new(store);
    let now = Timestamp::from_system_time(std::time::SystemTime::now());
    let record = |id: &str, live_until: Timestamp| WorkerRecord {
        id: id.into(),
        host: "elsewhere".into(),
        pid: 1,
        started_at: now - Duration::from_secs(60),
        last_seen: now - Duration::from_secs(40),
        live_until,
        serves: vec![WorkflowKey { name: "order".into(), version: 1 }],
    };
    client.store().record_worker(&record("crashed", now - Duration::from_secs(10))).await.unwrap();
    client.store().record_worker(&record("alive", now + Duration::from_secs(3600))).await.unwrap();
    let live = client.live_workers().await.unwrap();
    assert_eq!(live.workers.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(), ["alive"]);
    assert_eq!(client.store().workers().await.unwrap().len(), 2, "the dead one is still recorded");
}
