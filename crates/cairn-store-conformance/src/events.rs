//! Published events and topic subscriptions ([`EventStore`]).

use crate::support::*;

/// Subscriptions are replaced per workflow: a declaration replaces exactly the named workflows'
/// patterns and versions (dropping those left out, keeping other workflows'), and they read
/// back in order.
pub async fn subscriptions_are_replaced_per_workflow(store: DynStore) {
    let sub =
        |workflow: &str, pattern: &str| Subscription { workflow: workflow.into(), pattern: pattern.into(), version: 1 };
    let set = |workflows: &[&str], subscriptions: Vec<Subscription>| SetSubscriptions {
        workflows: workflows.iter().map(|w| (*w).to_owned()).collect(),
        subscriptions,
    };
    assert!(store.subscriptions().await.expect("subscriptions").is_empty());
    let first =
        set(&["welcome", "audit"], vec![sub("welcome", "user.*"), sub("audit", "*.*"), sub("audit", "billing")]);
    store.set_subscriptions(&first).await.expect("set");
    let all = [sub("audit", "*.*"), sub("audit", "billing"), sub("welcome", "user.*")];
    assert_eq!(store.subscriptions().await.expect("subscriptions"), all, "by workflow, then pattern");
    store.set_subscriptions(&first).await.expect("set again");
    assert_eq!(store.subscriptions().await.expect("subscriptions"), all, "setting the same set changes nothing");
    // Another worker's declaration for `audit` alone, of version 2: `billing` is dropped, `*.*`
    // moves to version 2, `welcome` is untouched.
    let v2 = |pattern: &str| Subscription { version: 2, ..sub("audit", pattern) };
    store.set_subscriptions(&set(&["audit"], vec![v2("*.*"), v2("order.*")])).await.expect("set");
    let after = [v2("*.*"), v2("order.*"), sub("welcome", "user.*")];
    assert_eq!(store.subscriptions().await.expect("subscriptions"), after);
    // A workflow registered without subscriptions has none left.
    store.set_subscriptions(&set(&["welcome", "unknown"], vec![])).await.expect("clear");
    assert_eq!(store.subscriptions().await.expect("subscriptions"), [v2("*.*"), v2("order.*")]);
}

/// Published events are recorded with the runs they started and listed newest first, by topic
/// and by page; an id recorded again keeps its first topic, payload and time and gains the runs
/// of workflows it had none of; a prune deletes those published before its limit.
pub async fn events_are_recorded_merged_paged_and_pruned(store: DynStore) {
    let run = |workflow: &str, id: &str| EventRun { workflow: workflow.into(), run: RunId::new(id) };
    let event = |id: &str, topic: &str, at: i64, runs: Vec<EventRun>| EventRecord {
        id: id.into(),
        topic: topic.into(),
        payload: raw(&format!(r#"{{"id":"{id}","ó":"\u0000"}}"#)),
        published_at: t(at),
        runs,
    };
    let list = |topic: Option<&str>, cursor: Option<EventCursor>, limit: usize| EventQuery {
        topic: topic.map(Into::into),
        cursor,
        limit,
    };
    let ids = |page: &EventPage| page.events.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    assert!(store.events(&list(None, None, 10)).await.expect("events").events.is_empty());
    store.record_event(&event("e1", "user.signup", 10, vec![run("welcome", "r1")])).await.expect("record");
    store.record_event(&event("e2", "user.signup", 20, vec![])).await.expect("record");
    store
        .record_event(&event("e3", "order.paid", 20, vec![run("ship", "r3"), run("audit", "r4")]))
        .await
        .expect("record");
    store.record_event(&event("e0", "order.paid", 5, vec![])).await.expect("record");
    // Recorded again: a later time, topic and payload change nothing; a new workflow's run joins.
    let mut again = event("e1", "other", 99, vec![run("welcome", "r-other"), run("audit", "r5")]);
    again.payload = raw("1");
    store.record_event(&again).await.expect("record again");

    let all = store.events(&list(None, None, 10)).await.expect("events");
    assert_eq!(ids(&all), ["e3", "e2", "e1", "e0"], "newest first, then by id");
    assert_eq!(all.next_cursor, None);
    let e1 = &all.events[2];
    assert_eq!(*e1, event("e1", "user.signup", 10, vec![run("audit", "r5"), run("welcome", "r1")]));
    assert_eq!(all.events[0].runs, [run("audit", "r4"), run("ship", "r3")], "runs by workflow");

    let first = store.events(&list(None, None, 2)).await.expect("page");
    assert_eq!(
        (ids(&first), first.next_cursor.clone()),
        (vec!["e3".to_owned(), "e2".to_owned()], Some(first.events[1].cursor()))
    );
    let second = store.events(&list(None, first.next_cursor, 2)).await.expect("page");
    assert_eq!(ids(&second), ["e1", "e0"]);
    let topic = store.events(&list(Some("order.paid"), None, 10)).await.expect("by topic");
    assert_eq!(ids(&topic), ["e3", "e0"]);
    let after = list(Some("order.paid"), Some(topic.events[0].cursor()), 10);
    assert_eq!(ids(&store.events(&after).await.expect("by topic, paged")), ["e0"]);
    assert!(store.events(&list(Some("user"), None, 10)).await.expect("no prefix match").events.is_empty());
    assert!(store.events(&list(None, None, 0)).await.expect("none").events.is_empty());

    let prune = |dry_run: bool, limit: usize| PruneRequest {
        now: t(1_000),
        ended_before: None,
        events_before: Some(t(20)),
        limit,
        dry_run,
    };
    store.prune(prune(true, 100)).await.expect("dry run");
    assert_eq!(ids(&store.events(&list(None, None, 10)).await.expect("events")), ["e3", "e2", "e1", "e0"]);
    store.prune(prune(false, 1)).await.expect("prune one");
    assert_eq!(ids(&store.events(&list(None, None, 10)).await.expect("events")), ["e3", "e2", "e1"], "oldest first");
    store.prune(prune(false, 100)).await.expect("prune");
    assert_eq!(ids(&store.events(&list(None, None, 10)).await.expect("events")), ["e3", "e2"]);
}

/// A new run's reason (a restart's) is journaled in its `started` event.
pub async fn started_events_keep_their_reason(store: DynStore) {
    let mut run = new_run("because", "order", None, 1);
    run.reason = Some("retry after the outage ✓".into());
    store.create_run(run).await.expect("create");
    store.create_run(new_run("plain", "order", None, 2)).await.expect("create");
    let reason = |journal: Vec<cairn_journal::JournalEntry>| match &journal[0].event {
        Event::Started { reason, .. } => reason.clone(),
        other => panic!("not a start: {other:?}"),
    };
    let journal = store.read_journal(&RunId::new("because")).await.expect("journal");
    assert_eq!(reason(journal).as_deref(), Some("retry after the outage ✓"));
    assert_eq!(reason(store.read_journal(&RunId::new("plain")).await.expect("journal")), None);
}
