//! Runs ([`RunStore`]) as operators read and tidy them: lists and counts, retention and pruning,
//! stranded runs.

use crate::support::*;

/// A run that ends (finished by its worker, or cancelled while idle) may be deleted from its end
/// plus its retention; a run without retention is kept.
pub async fn ending_sets_delete_after(store: DynStore) {
    let keep = |id: &str, at: i64, ms: Option<u64>| {
        let mut run = new_run(id, "order", None, at);
        run.retention = ms.map(std::time::Duration::from_millis);
        run
    };
    store.create_run(keep("kept", 1, Some(100))).await.expect("create");
    store.create_run(keep("forever", 2, None)).await.expect("create");
    for run in store.claim(&claim_req("w1", "order", 10)).await.expect("claim") {
        let mut finish = progress(&run, vec![Event::Completed { output: raw("1") }]);
        finish.update =
            RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(20) };
        store.append(finish).await.expect("finish");
    }
    store.create_run(keep("idle", 3, Some(1_000))).await.expect("create");
    store.cancel(control(&RunId::new("idle"), 30)).await.expect("cancel");
    let delete_after = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get_run(&RunId::new(id)).await.expect("get").expect("exists").delete_after }
    };
    assert_eq!(delete_after("kept").await, Some(t(120)));
    assert_eq!(delete_after("forever").await, None);
    assert_eq!(delete_after("idle").await, Some(t(1_030)));
}

/// Pruning deletes ended runs past their retention (or ended before a cut-off) with their journals
/// and signals, in bounded batches; never a run that has not ended.
pub async fn prune_deletes_ended_runs_past_retention(store: DynStore) {
    let keep = |id: &str, at: i64, ms: Option<u64>| {
        let mut run = new_run(id, "order", Some(id), at);
        run.retention = ms.map(std::time::Duration::from_millis);
        run
    };
    for (id, ms) in [("old", Some(10)), ("young", Some(1_000)), ("forever", None)] {
        store.create_run(keep(id, 1, ms)).await.expect("create");
    }
    for run in store.claim(&claim_req("w1", "order", 10)).await.expect("claim") {
        let mut finish = progress(&run, vec![Event::Completed { output: raw("1") }]);
        finish.update =
            RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(20) };
        store.append(finish).await.expect("finish");
    }
    store
        .send_signal(NewSignal { run_id: RunId::new("old"), name: "x".into(), payload: raw("1"), sent_at: t(15) })
        .await
        .expect_err("finished runs refuse signals");
    store.create_run(keep("cancelled", 2, Some(5))).await.expect("create");
    store.cancel(control(&RunId::new("cancelled"), 25)).await.expect("cancel");
    // Unfinished runs of every status, all with a retention long past.
    store.create_run(keep("asleep", 3, Some(1))).await.expect("create");
    let asleep = claim_one(&store, "order", 30).await;
    suspend_sleeping(&store, &asleep, 1_000_000, 30).await;
    store.create_run(keep("running", 4, Some(1))).await.expect("create");
    claim_one(&store, "order", 30).await;
    store.create_run(keep("paused", 5, Some(1))).await.expect("create");
    store.pause(control(&RunId::new("paused"), 30)).await.expect("pause");
    store.create_run(keep("pending", 6, Some(1))).await.expect("create");
    let all = ["old", "young", "forever", "cancelled", "asleep", "running", "paused", "pending"];

    let request = |limit: usize, dry_run: bool, ended_before: Option<i64>| PruneRequest {
        now: t(100),
        ended_before: ended_before.map(t),
        events_before: None,
        limit,
        dry_run,
    };
    let ids = |runs: Vec<RunId>| {
        let mut ids: Vec<String> = runs.into_iter().map(|r| r.as_str().to_owned()).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(store.prune(request(10, true, None)).await.expect("dry run")), ["cancelled", "old"]);
    for id in all {
        assert!(store.get_run(&RunId::new(id)).await.expect("get").is_some(), "a dry run deletes nothing");
    }
    let first = store.prune(request(1, false, None)).await.expect("prune");
    let second = store.prune(request(1, false, None)).await.expect("prune");
    assert_eq!((first.len(), second.len()), (1, 1), "batches are bounded");
    assert!(store.prune(request(10, false, None)).await.expect("prune").is_empty());
    for id in ["cancelled", "old"] {
        let id = RunId::new(id);
        assert!(store.get_run(&id).await.expect("get").is_none());
        assert!(store.read_journal(&id).await.map(|j| j.is_empty()).unwrap_or(true));
        assert!(store.signals(&id).await.map(|s| s.is_empty()).unwrap_or(true));
    }
    // A cut-off deletes every run that ended before it, whatever its retention.
    let cut = ids(store.prune(request(10, false, Some(21))).await.expect("prune"));
    assert_eq!(cut, ["forever", "young"]);
    for id in ["asleep", "running", "paused", "pending"] {
        assert!(store.get_run(&RunId::new(id)).await.expect("get").is_some(), "{id} has not ended: kept");
    }
    // A deleted run's id and idempotency key are free again.
    assert!(store.create_run(keep("old", 200, None)).await.expect("create").created);
}

/// Lists keep only runs whose input contains the filter's JSON (as PostgreSQL's `@>`), page by
/// page, with the other filters, whatever the values' kinds and the fields' names (the SQL stores
/// read such a filter from an index of inputs).
pub async fn list_filters_by_input(store: DynStore) {
    let long = "x".repeat(300);
    let long_input = format!(r#"{{"note":"{long}","customer":8}}"#);
    let inputs = [
        ("r1", r#"{"customer":42,"tags":["a","b"],"address":{"city":"Oslo","zip":"0150"}}"#),
        ("r2", r#"{"customer":7,"tags":["b"]}"#),
        ("r3", r#"{"customer":42.0}"#),
        ("r4", r#""customer""#),
        ("r5", "[1,2]"),
        ("r6", r#"{"vip":true,"coupon":null,"a.b":{"c d":"é\"q"},"n":4.2e1,"big":9007199254740993}"#),
        ("r7", r#"{"vip":false,"customer":"42","tags":[{"x":1}]}"#),
        ("r8", long_input.as_str()),
        ("r9", "42"),
    ];
    for (i, (id, input)) in inputs.iter().enumerate() {
        let input = RawValue::from_string((*input).to_owned()).unwrap();
        store.create_run(NewRun::new(RunId::new(*id), workflow("order"), 1, input, t(i as i64))).await.expect("create");
    }
    let ids = |page: &RunPage| page.runs.iter().map(|r| r.id.to_string()).collect::<Vec<_>>();
    let filtered = |needle: serde_json::Value| RunFilter { input_contains: Some(needle), ..RunFilter::default() };
    let cases = [
        (serde_json::json!({"customer": 42}), vec!["r3", "r1"]),
        (serde_json::json!({"tags": ["b"]}), vec!["r2", "r1"]),
        (serde_json::json!({"address": {"city": "Oslo"}}), vec!["r1"]),
        (serde_json::json!({"address": {"city": "Bergen"}}), vec![]),
        (serde_json::json!({}), vec!["r8", "r7", "r6", "r3", "r2", "r1"]),
        (serde_json::json!({"vip": true}), vec!["r6"]),
        (serde_json::json!({"vip": false}), vec!["r7"]),
        (serde_json::json!({"coupon": null}), vec!["r6"]),
        (serde_json::json!({"customer": "42"}), vec!["r7"]),
        (serde_json::json!({"n": 42}), vec!["r6"]),
        (serde_json::json!({"big": 9007199254740993_u64}), vec!["r6"]),
        (serde_json::json!({"a.b": {"c d": "é\"q"}}), vec!["r6"]),
        (serde_json::json!({"a": {"b": {"c d": "é\"q"}}}), vec![]),
        (serde_json::json!({"tags": [{"x": 1}]}), vec!["r7"]),
        (serde_json::json!({"note": long, "customer": 8}), vec!["r8"]),
        (serde_json::json!({"note": "x"}), vec![]),
        (serde_json::json!(42), vec!["r9"]),
        (serde_json::json!("customer"), vec!["r4"]),
        (serde_json::json!([2]), vec!["r5"]),
    ];
    // A list without payloads selects the same runs and reads neither input nor output.
    let bare = RunFilter { without_payloads: true, ..filtered(serde_json::json!({"customer": 42})) };
    let page = store.list_runs(&bare).await.expect("list");
    assert_eq!(ids(&page), ["r3", "r1"]);
    assert!(page.runs.iter().all(|r| r.input.get() == "null" && r.output.is_none()), "{:?}", page.runs);
    let full = store.list_runs(&filtered(serde_json::json!({"customer": 42}))).await.expect("list");
    assert_eq!(full.runs[0].input.get(), inputs[2].1, "a full list reads the input");
    for (needle, expected) in cases {
        let page = store.list_runs(&filtered(needle.clone())).await.expect("list");
        assert_eq!(ids(&page), expected, "input containing {needle}");
    }
    // One match per page: the cursor goes on to the next match.
    let mut filter = RunFilter { limit: Some(1), ..filtered(serde_json::json!({"customer": 42})) };
    let first = store.list_runs(&filter).await.expect("list");
    assert_eq!(ids(&first), ["r3"]);
    filter.cursor = first.next_cursor;
    let second = store.list_runs(&filter).await.expect("list");
    assert_eq!((ids(&second), second.next_cursor), (vec!["r1".to_owned()], None));
    // With the other filters: a workflow, a time range, a status.
    let other = RunFilter { workflow: Some("other".into()), ..filtered(serde_json::json!({"customer": 42})) };
    assert_eq!(ids(&store.list_runs(&other).await.expect("list")), Vec::<String>::new());
    let range = RunFilter {
        created_after: Some(t(1)),
        created_before: Some(t(3)),
        ..filtered(serde_json::json!({"customer": 42}))
    };
    assert_eq!(ids(&store.list_runs(&range).await.expect("list")), ["r3"]);
    let pending = RunFilter { status: Some(RunStatus::Pending), ..filtered(serde_json::json!({"customer": 7})) };
    assert_eq!(ids(&store.list_runs(&pending).await.expect("list")), ["r2"]);

    // An input with more scalars than the SQL stores index still matches, and so do the others.
    let many: serde_json::Map<String, serde_json::Value> =
        (0..100).map(|i| (format!("f{i}"), serde_json::json!(i))).collect();
    let many_input = RawValue::from_string(serde_json::Value::Object(many).to_string()).unwrap();
    store.create_run(NewRun::new(RunId::new("r-many"), workflow("order"), 1, many_input, t(10))).await.expect("create");
    for (needle, expected) in
        [(serde_json::json!({"f99": 99}), vec!["r-many"]), (serde_json::json!({"customer": 42}), vec!["r3", "r1"])]
    {
        let page = store.list_runs(&filtered(needle.clone())).await.expect("list");
        assert_eq!(ids(&page), expected, "input containing {needle}, with a run of many values");
    }

    // A debounced start that joins a waiting run replaces its input, and the filter follows.
    store.create_run(crate::flow::debounced("d1", "k", 1, 20)).await.expect("create");
    store.create_run(crate::flow::debounced("d2", "k", 2, 21)).await.expect("join");
    for (n, expected) in [(1, vec![]), (2, vec!["d1"])] {
        let page = store.list_runs(&filtered(serde_json::json!({"n": n}))).await.expect("list");
        assert_eq!(ids(&page), expected, "debounced input n = {n}");
    }
}

/// Runs that need a worker are counted per workflow version, and listed as stranded when no
/// served version matches theirs; ended and paused runs are never stranded.
pub async fn stranded_runs_are_counted_and_listed(store: DynStore) {
    let versioned = |id: &str, workflow: &str, version: u32, at: i64| {
        NewRun::new(RunId::new(id), crate::support::workflow(workflow), version, raw("{}"), t(at))
    };
    store.create_run(versioned("o1-asleep", "order", 1, 1)).await.expect("create");
    let asleep = claim_one(&store, "order", 10).await;
    suspend_sleeping(&store, &asleep, 1_000_000, 10).await;
    store.create_run(versioned("o1-running", "order", 1, 2)).await.expect("create");
    claim_one(&store, "order", 10).await;
    store.create_run(versioned("o1-cancelled", "order", 1, 3)).await.expect("create");
    store.cancel(control(&RunId::new("o1-cancelled"), 11)).await.expect("cancel");
    store.create_run(versioned("o1-paused", "order", 1, 4)).await.expect("create");
    store.pause(control(&RunId::new("o1-paused"), 11)).await.expect("pause");
    store.create_run(versioned("o1-pending", "order", 1, 5)).await.expect("create");
    store.create_run(versioned("o2-pending", "order", 2, 6)).await.expect("create");
    store.create_run(versioned("b1-pending", "billing", 1, 7)).await.expect("create");

    let counts = store.version_counts().await.expect("counts");
    let counts: Vec<(String, u32, u64)> = counts.into_iter().map(|c| (c.key.name, c.key.version, c.runs)).collect();
    assert_eq!(counts, [("billing".into(), 1, 1), ("order".into(), 1, 3), ("order".into(), 2, 1)]);

    let list = |stranded: Vec<WorkflowKey>, workflow: Option<&str>, limit: usize| RunFilter {
        stranded: Some(stranded),
        workflow: workflow.map(Into::into),
        limit: Some(limit),
        ..RunFilter::default()
    };
    let ids = |page: RunPage| page.runs.into_iter().map(|r| r.id.as_str().to_owned()).collect::<Vec<_>>();
    let served = vec![WorkflowKey { name: "order".into(), version: 2 }];
    assert_eq!(
        ids(store.list_runs(&list(served.clone(), None, 100)).await.expect("list")),
        ["b1-pending", "o1-pending", "o1-running", "o1-asleep"]
    );
    assert_eq!(
        ids(store.list_runs(&list(served.clone(), Some("order"), 100)).await.expect("list")),
        ["o1-pending", "o1-running", "o1-asleep"]
    );
    assert_eq!(
        ids(store.list_runs(&list(vec![], None, 100)).await.expect("list")),
        ["b1-pending", "o2-pending", "o1-pending", "o1-running", "o1-asleep"],
        "nothing served: every run that needs a worker is stranded"
    );
    // Pages of one.
    let mut filter = list(served, None, 1);
    let mut paged = Vec::new();
    loop {
        let page = store.list_runs(&filter).await.expect("list");
        paged.extend(page.runs.iter().map(|r| r.id.as_str().to_owned()));
        match page.next_cursor {
            Some(cursor) => filter.cursor = Some(cursor),
            None => break,
        }
    }
    assert_eq!(paged, ["b1-pending", "o1-pending", "o1-running", "o1-asleep"]);
}

/// Listing filters by workflow, status and time, and pages by keyset without gaps or repeats.
pub async fn list_filters_and_pages(store: DynStore) {
    for i in 0..25 {
        let workflow = if i % 5 == 0 { "refund" } else { "order" };
        // Several runs share a creation time, so the id must break ties.
        store.create_run(new_run(&format!("run-{i:02}"), workflow, None, i64::from(i / 3))).await.expect("create");
    }
    let mut seen = Vec::new();
    let mut filter = RunFilter { limit: Some(7), ..Default::default() };
    loop {
        let page = store.list_runs(&filter).await.expect("list");
        assert!(page.runs.len() <= 7);
        seen.extend(page.runs.iter().map(|r| (r.created_at, r.id.clone())));
        match page.next_cursor {
            Some(cursor) => filter.cursor = Some(PageCursor::decode(&cursor.encode()).expect("cursor round-trips")),
            None => break,
        }
    }
    assert_eq!(seen.len(), 25);
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, sorted, "newest first, no repeats");
    sorted.dedup();
    assert_eq!(sorted.len(), 25);

    let refunds =
        store.list_runs(&RunFilter { workflow: Some("refund".into()), ..Default::default() }).await.expect("list");
    assert_eq!(refunds.runs.len(), 5);
    let window = RunFilter { created_after: Some(t(2)), created_before: Some(t(4)), ..Default::default() };
    assert_eq!(store.list_runs(&window).await.expect("list").runs.len(), 6);
    store.claim(&claim_req("w1", "refund", 100)).await.expect("claim");
    let running =
        store.list_runs(&RunFilter { status: Some(RunStatus::Running), ..Default::default() }).await.expect("list");
    assert_eq!(running.runs.len(), 5);
    assert!(running.runs.iter().all(|r| r.workflow == "refund"));
}

/// Runs are found by a prefix of their id (any characters, the next code point's included) and
/// by text in their error (ASCII case ignored), with other filters and across pages; counts
/// match the lists and stop at the bound asked for.
pub async fn list_by_id_prefix_and_error_and_count(store: DynStore) {
    let ids = ["order-1", "order-10", "order-2", "ordes", "órder-1", "x", "order-1\u{10FFFF}"];
    for (i, id) in ids.iter().enumerate() {
        store.create_run(new_run(id, "order", None, i as i64)).await.expect("create");
    }
    let listed = |filter: RunFilter| {
        let store = store.clone();
        async move {
            let mut filter = RunFilter { limit: Some(2), ..filter };
            let mut ids = Vec::new();
            loop {
                let page = store.list_runs(&filter).await.expect("list");
                ids.extend(page.runs.into_iter().map(|r| r.id.to_string()));
                match page.next_cursor {
                    Some(cursor) => filter.cursor = Some(cursor),
                    None => break,
                }
            }
            let count =
                store.count_runs(&RunFilter { limit: Some(1), cursor: None, ..filter }, 1000).await.expect("count");
            assert_eq!(count, ids.len() as u64, "{ids:?}");
            ids
        }
    };
    let prefix = |p: &str| RunFilter { id_prefix: Some(p.into()), ..RunFilter::default() };
    assert_eq!(listed(prefix("order-1")).await, ["order-1\u{10FFFF}", "order-10", "order-1"]);
    assert_eq!(listed(prefix("orde")).await, ["order-1\u{10FFFF}", "ordes", "order-2", "order-10", "order-1"]);
    assert_eq!(listed(prefix("ó")).await, ["órder-1"]);
    assert_eq!(listed(prefix("order-1\u{10FFFF}")).await, ["order-1\u{10FFFF}"]);
    assert_eq!(listed(prefix("nothing")).await, Vec::<String>::new());
    assert_eq!(listed(prefix("")).await.len(), ids.len());
    assert_eq!(listed(prefix("with\0nul")).await, Vec::<String>::new());

    // Two runs fail with errors; a third completes.
    let claimed = store.claim(&claim_req("w1", "order", 100)).await.expect("claim");
    for (id, error) in [("order-2", Some("The CARD service is down")), ("ordes", Some("timeout: card")), ("x", None)] {
        let claimed = claimed.iter().find(|r| r.id.as_str() == id).expect("claimed");
        let (event, output, status) = match error {
            Some(error) => (Event::Failed { error: error.into() }, None, RunStatus::Failed),
            None => (Event::Completed { output: raw("1") }, Some(raw("1")), RunStatus::Completed),
        };
        let mut finish = progress(claimed, vec![event]);
        finish.update = RunUpdate::Finish { status, output, error: error.map(str::to_owned), at: t(20) };
        store.append(finish).await.expect("finish");
    }
    let error = |text: &str| RunFilter { error_contains: Some(text.into()), ..RunFilter::default() };
    assert_eq!(listed(error("card")).await, ["ordes", "order-2"]);
    assert_eq!(listed(error("Card Service")).await, ["order-2"]);
    assert_eq!(listed(error("down ")).await, Vec::<String>::new());
    assert_eq!(listed(RunFilter { status: Some(RunStatus::Failed), ..prefix("order") }).await, ["order-2"]);

    // A count stops at its bound; the plain filters count as the lists do.
    assert_eq!(store.count_runs(&RunFilter::default(), 3).await.expect("count"), 3);
    assert_eq!(store.count_runs(&RunFilter::default(), 1000).await.expect("count"), ids.len() as u64);
    let failed = RunFilter { status: Some(RunStatus::Failed), workflow: Some("order".into()), ..RunFilter::default() };
    assert_eq!(store.count_runs(&failed, 1000).await.expect("count"), 2);
    let window = RunFilter { created_after: Some(t(2)), created_before: Some(t(4)), ..RunFilter::default() };
    assert_eq!(store.count_runs(&window, 1000).await.expect("count"), 2);
    assert_eq!(
        store.count_runs(&RunFilter { workflow: Some("none".into()), ..RunFilter::default() }, 9).await.expect("count"),
        0
    );
}

/// Counts per workflow and status follow runs through every status, and down again when ended
/// runs are deleted.
pub async fn workflow_counts_follow_every_status(store: DynStore) {
    assert_eq!(store.workflow_counts().await.expect("counts"), []);
    let ended = [
        ("o-done-1", "order", RunStatus::Completed, None),
        ("o-done-2", "order", RunStatus::Completed, Some(1)),
        ("o-failed", "order", RunStatus::Failed, None),
        ("b-done", "billing", RunStatus::Completed, None),
    ];
    for (i, (id, workflow, status, keep_ms)) in ended.into_iter().enumerate() {
        let mut run = new_run(id, workflow, None, i as i64);
        run.retention = keep_ms.map(std::time::Duration::from_millis);
        store.create_run(run).await.expect("create");
        let claimed = claim_one(&store, workflow, 10).await;
        let (event, output, error) = match status {
            RunStatus::Completed => (Event::Completed { output: raw("1") }, Some(raw("1")), None),
            _ => (Event::Failed { error: "boom".into() }, None, Some("boom".to_owned())),
        };
        let mut finish = progress(&claimed, vec![event]);
        finish.update = RunUpdate::Finish { status, output, error, at: t(20) };
        store.append(finish).await.expect("finish");
    }
    store.create_run(new_run("o-running", "order", None, 10)).await.expect("create");
    claim_one(&store, "order", 30).await;
    store.create_run(new_run("o-asleep", "order", None, 11)).await.expect("create");
    let asleep = claim_one(&store, "order", 30).await;
    suspend_sleeping(&store, &asleep, 1_000_000, 30).await;
    store.create_run(new_run("o-paused", "order", None, 12)).await.expect("create");
    store.pause(control(&RunId::new("o-paused"), 31)).await.expect("pause");
    store.create_run(new_run("o-cancelled", "order", None, 13)).await.expect("create");
    store.cancel(control(&RunId::new("o-cancelled"), 31)).await.expect("cancel");
    store.create_run(new_run("o-pending-1", "order", None, 14)).await.expect("create");
    store.create_run(new_run("o-pending-2", "order", None, 15)).await.expect("create");

    let counts = |counts: Vec<WorkflowCount>| -> Vec<(String, &'static str, u64)> {
        counts.into_iter().map(|c| (c.workflow, c.status.as_str(), c.runs)).collect()
    };
    let expected = |completed: u64| {
        vec![
            ("billing".to_owned(), "completed", 1),
            ("order".to_owned(), "cancelled", 1),
            ("order".to_owned(), "completed", completed),
            ("order".to_owned(), "failed", 1),
            ("order".to_owned(), "paused", 1),
            ("order".to_owned(), "pending", 2),
            ("order".to_owned(), "running", 1),
            ("order".to_owned(), "suspended", 1),
        ]
    };
    assert_eq!(counts(store.workflow_counts().await.expect("counts")), expected(2));

    // Deleting an ended run counts it out; a dry run changes nothing.
    let prune =
        |dry_run| PruneRequest { now: t(1_000_000), ended_before: None, events_before: None, limit: 100, dry_run };
    assert_eq!(store.prune(prune(true)).await.expect("dry run").len(), 1);
    assert_eq!(counts(store.workflow_counts().await.expect("counts")), expected(2));
    assert_eq!(store.prune(prune(false)).await.expect("prune"), [RunId::new("o-done-2")]);
    assert_eq!(counts(store.workflow_counts().await.expect("counts")), expected(1));
}
