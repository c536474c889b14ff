//! Workers and maintenance ([`WorkerStore`]): the worker registry and the registry of served
//! workflow versions.

use crate::support::*;

/// Workers are recorded, refreshed in place (by id), listed with what they serve, and forgotten
/// by id or by how long ago they were last live.
pub async fn workers_are_recorded_and_forgotten(store: DynStore) {
    let key = |name: &str, version: u32| WorkflowKey { name: name.into(), version };
    let worker = |id: &str, seen: i64, serves: Vec<WorkflowKey>| WorkerRecord {
        id: id.into(),
        host: "host-a".into(),
        pid: 4242,
        started_at: t(1),
        last_seen: t(seen),
        live_until: t(seen + 30),
        serves,
    };
    assert!(store.workers().await.expect("workers").is_empty());
    let a = worker("a", 10, vec![key("order", 1), key("order", 2)]);
    let b = worker("b", 20, vec![key("ship@eu", 3)]);
    store.record_worker(&b).await.expect("record");
    store.record_worker(&a).await.expect("record");
    assert_eq!(store.workers().await.expect("workers"), [a.clone(), b.clone()], "by id, as recorded");
    let a = worker("a", 50, vec![key("order", 2)]);
    store.record_worker(&a).await.expect("refresh");
    assert_eq!(store.workers().await.expect("workers"), [a.clone(), b.clone()], "refreshed in place");
    assert!(a.is_live_at(t(79)) && !a.is_live_at(t(80)));
    // `b` was last live until 50: forgotten by a cut-off after that; `a` (live until 80) is not.
    let dead = ForgetWorkers { ids: vec![], dead_before: Some(t(60)) };
    assert_eq!(store.forget_workers(&dead).await.expect("forget"), 1);
    assert_eq!(store.workers().await.expect("workers"), [a]);
    let gone = ForgetWorkers { ids: vec!["a".into(), "nobody".into()], dead_before: None };
    assert_eq!(store.forget_workers(&gone).await.expect("forget"), 1);
    assert!(store.workers().await.expect("workers").is_empty());
}

/// The versions workers serve are recorded for good (after the workers are forgotten), each with
/// when it was first and last recorded, listed by name then version.
pub async fn served_workflows_outlive_their_workers(store: DynStore) {
    let key = |name: &str, version: u32| WorkflowKey { name: name.into(), version };
    assert!(store.served_workflows().await.expect("served").is_empty());
    store.record_served(&[key("order", 2), key("order", 1)], t(10)).await.expect("record");
    store.record_served(&[key("order", 2), key("ship@eu", 3)], t(30)).await.expect("record");
    store.record_served(&[key("order", 2)], t(20)).await.expect("record an older start");
    store.record_served(&[], t(40)).await.expect("record nothing");
    let served =
        |key: WorkflowKey, first: i64, last: i64| ServedWorkflow { key, first_served: t(first), last_served: t(last) };
    assert_eq!(
        store.served_workflows().await.expect("served"),
        [served(key("order", 1), 10, 10), served(key("order", 2), 10, 30), served(key("ship@eu", 3), 30, 30)]
    );
    let gone = ForgetWorkers { ids: vec![], dead_before: Some(t(1_000_000)) };
    store.forget_workers(&gone).await.expect("forget");
    assert_eq!(store.served_workflows().await.expect("served").len(), 3, "kept after every worker is forgotten");
}
