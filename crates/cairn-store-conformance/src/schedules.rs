//! Schedules' firings and event subscriptions.

use crate::support::*;

/// Schedules are created, redeclared (a changed spec moves the next firing, an unchanged one does
/// not), found due, fired once per due time however many firers race (runs by id, an existing
/// one found, not doubled), paused (not due, not waking anyone), resumed and deleted.
pub async fn schedules_fire_once_per_due_time(store: DynStore) {
    let put = |spec: &str, next: i64| PutSchedule {
        name: "nightly".into(),
        workflow: "order".into(),
        spec: spec.into(),
        input: raw(r#"{"n":1}"#),
        next_fire_at: Some(t(next)),
        now: t(1),
    };
    let created = store.put_schedule(&put("A", 100)).await.expect("create");
    assert_eq!((created.paused, created.next_fire_at, created.last_fired_at), (false, Some(t(100)), None));
    assert_eq!(store.put_schedule(&put("A", 999)).await.expect("same spec").next_fire_at, Some(t(100)));
    assert_eq!(store.put_schedule(&put("B", 200)).await.expect("new spec").next_fire_at, Some(t(200)));
    let due = |now: i64, workflows: &'static [&'static str]| {
        let store = Arc::clone(&store);
        async move {
            let workflows: Vec<String> = workflows.iter().map(|w| (*w).to_owned()).collect();
            let due = store.due_schedules(&workflows, t(now), 10).await.expect("due");
            due.into_iter().map(|s| s.name).collect::<Vec<_>>()
        }
    };
    assert!(due(150, &["order"]).await.is_empty());
    assert_eq!(due(200, &["order"]).await, ["nightly"]);
    assert!(due(200, &["other"]).await.is_empty());
    assert_eq!(store.next_wake_at(&wf("order")).await.expect("wake"), Some(t(200)));

    let run = |id: &str| new_run(id, "order", None, 200);
    let fire = |due: i64, next: i64, runs: Vec<NewRun>| FireSchedule {
        name: "nightly".into(),
        due: t(due),
        next_fire_at: Some(t(next)),
        last_fired_at: Some(t(due)),
        runs,
        now: t(due + 1),
        manual: false,
    };
    // Two firers of one due time: one fires, the other changes nothing.
    let (a, b) = tokio::join!(
        store.fire_schedule(fire(200, 300, vec![run("nightly@200")])),
        store.fire_schedule(fire(200, 300, vec![run("nightly@200"), run("nightly@200-again")]))
    );
    let fired: Vec<Vec<CreatedRun>> = [a.expect("fire"), b.expect("fire")].into_iter().flatten().collect();
    assert_eq!(fired.len(), 1, "exactly one firer fired");
    assert!(fired[0].iter().all(|c| c.created));
    assert!(store.get_run(&RunId::new("nightly@200")).await.expect("get").is_some());
    let after = store.schedules().await.expect("list");
    assert_eq!((after[0].next_fire_at, after[0].last_fired_at), (Some(t(300)), Some(t(200))));
    // A firing that lists a run an earlier one started finds it.
    let again = store.fire_schedule(fire(300, 400, vec![run("nightly@200"), run("nightly@300")])).await.expect("fire");
    let flags: Vec<(String, bool)> =
        again.expect("due").into_iter().map(|c| (c.run.id.to_string(), c.created)).collect();
    assert_eq!(flags, [("nightly@200".to_owned(), false), ("nightly@300".to_owned(), true)]);

    // Paused: not due, wakes nobody, cannot fire; resumed at a new time.
    let pause =
        |paused, next| PauseSchedule { name: "nightly".into(), paused, next_fire_at: Some(t(next)), now: t(450) };
    assert!(store.pause_schedule(&pause(true, 0)).await.expect("pause").paused);
    assert!(due(10_000, &["order"]).await.is_empty());
    assert_eq!(store.next_wake_at(&wf("order")).await.expect("wake"), None);
    assert!(store.fire_schedule(fire(400, 500, vec![run("nightly@400")])).await.expect("fire").is_none());
    assert!(store.get_run(&RunId::new("nightly@400")).await.expect("get").is_none());
    // A manual firing (a trigger) fires while paused, whatever it is due, and is recorded as
    // the last firing; the next firing stays as it was.
    let before = store.schedules().await.expect("list")[0].next_fire_at;
    let manual = FireSchedule { manual: true, last_fired_at: Some(t(420)), ..fire(0, 9_999, vec![run("nightly@420")]) };
    let created = store.fire_schedule(manual).await.expect("trigger").expect("fired while paused");
    assert_eq!((created.len(), created[0].created), (1, true));
    let after = store.schedules().await.expect("list");
    assert_eq!((after[0].paused, after[0].next_fire_at, after[0].last_fired_at), (true, before, Some(t(420))));
    let manual = FireSchedule { manual: true, ..fire(0, 0, vec![run("nightly@420")]) };
    let again = store.fire_schedule(manual).await.expect("trigger").expect("fired");
    assert!(!again[0].created, "the same firing time finds its run");
    let gone = FireSchedule { name: "no-such".into(), manual: true, ..fire(0, 0, vec![run("no-such@1")]) };
    assert!(store.fire_schedule(gone).await.expect("trigger").is_none(), "no schedule, no firing");
    assert!(store.get_run(&RunId::new("no-such@1")).await.expect("get").is_none());
    assert!(store.put_schedule(&put("B", 1)).await.expect("redeclare").paused, "redeclaring keeps the pause");
    let resumed = store.pause_schedule(&pause(false, 5_000)).await.expect("resume");
    assert_eq!((resumed.paused, resumed.next_fire_at), (false, Some(t(5_000))));

    assert!(store.delete_schedule("nightly").await.expect("delete"));
    assert!(!store.delete_schedule("nightly").await.expect("delete again"));
    assert!(store.schedules().await.expect("list").is_empty());
    assert_eq!(
        store.pause_schedule(&pause(true, 0)).await.unwrap_err(),
        StoreError::ScheduleNotFound("nightly".into())
    );
    assert!(store.get_run(&RunId::new("nightly@300")).await.expect("get").is_some(), "its runs stay");
}

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
