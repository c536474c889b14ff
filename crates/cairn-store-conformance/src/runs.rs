//! Runs ([`RunStore`]): creating and claiming them.

use crate::support::*;

/// A new run is pending, with its `started` event as journal entry 1.
pub async fn create_and_read_back(store: DynStore) {
    let created = store.create_run(new_run("r1", "order", None, 10)).await.expect("create");
    assert!(created.created);
    let run = store.get_run(&RunId::new("r1")).await.expect("get").expect("exists");
    assert_eq!((run.status, run.last_seq, run.epoch), (RunStatus::Pending, 1, 0));
    assert_eq!(run.input.get(), r#"{"n":1}"#);
    let journal = store.read_journal(&run.id).await.expect("journal");
    assert_eq!(journal.len(), 1);
    assert!(matches!(&journal[0].event, Event::Started { workflow, version: 1, .. } if workflow == "order"));
    assert!(store.get_run(&RunId::new("missing")).await.expect("get").is_none());
}

/// The same `(workflow, key)` returns the first run with `created: false`.
pub async fn idempotent_create(store: DynStore) {
    let first = store.create_run(new_run("a", "order", Some("k"), 1)).await.expect("create");
    let second = store.create_run(new_run("b", "order", Some("k"), 2)).await.expect("create again");
    assert!(first.created && !second.created);
    assert_eq!(second.run.id, RunId::new("a"));
    assert!(store.get_run(&RunId::new("b")).await.expect("get").is_none());
    let other = store.create_run(new_run("c", "refund", Some("k"), 3)).await.expect("other workflow");
    assert!(other.created, "keys are scoped to their workflow");
}

/// Eight concurrent creators with one key make exactly one run.
pub async fn concurrent_idempotent_create(store: DynStore) {
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store.create_run(new_run(&format!("run-{i}"), "order", Some("once"), i)).await
        }));
    }
    let mut created = 0;
    let mut ids = std::collections::HashSet::new();
    for task in tasks {
        let result = task.await.expect("task").expect("create");
        created += usize::from(result.created);
        ids.insert(result.run.id);
    }
    assert_eq!((created, ids.len()), (1, 1));
    let page = store.list_runs(&RunFilter::default()).await.expect("list");
    assert_eq!(page.runs.len(), 1);
}

/// Many creates at once (which a backend may commit together) each get their own answer: new
/// ids are created, a repeated id is refused, a repeated key returns the one run that won.
pub async fn concurrent_mixed_creates(store: DynStore) {
    let mut tasks = Vec::new();
    let mut spawn = |id: String, key: Option<&'static str>, at: i64| {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move { (id.clone(), store.create_run(new_run(&id, "order", key, at)).await) }));
    };
    for i in 0..10 {
        spawn(format!("new-{i}"), None, i);
    }
    for i in 0..3 {
        spawn("twice".into(), None, 20 + i);
    }
    for i in 0..5 {
        spawn(format!("keyed-{i}"), Some("k"), 30 + i);
    }
    let (mut fresh, mut refused, mut keyed_created, mut keyed_ids) = (0, 0, 0, std::collections::HashSet::new());
    for task in tasks {
        let (id, result) = task.await.expect("task");
        match result {
            Ok(created) if id.starts_with("keyed-") => {
                keyed_created += usize::from(created.created);
                keyed_ids.insert(created.run.id);
            }
            Ok(created) => {
                assert!(created.created, "{id} is new");
                assert_eq!(created.run.id.as_str(), id);
                fresh += 1;
            }
            Err(error) => {
                assert_eq!(error, StoreError::DuplicateRunId(RunId::new("twice")));
                refused += 1;
            }
        }
    }
    assert_eq!((fresh, refused), (11, 2));
    assert_eq!((keyed_created, keyed_ids.len()), (1, 1));
    let page = store.list_runs(&RunFilter::default()).await.expect("list");
    assert_eq!(page.runs.len(), 12);
    for run in &page.runs {
        assert_eq!(store.read_journal(&run.id).await.expect("journal").len(), 1, "{} has one started entry", run.id);
    }
}

/// A taken id is refused and the existing run is untouched.
pub async fn duplicate_id_is_refused(store: DynStore) {
    store.create_run(new_run("dup", "order", None, 1)).await.expect("create");
    let mut other = new_run("dup", "refund", None, 2);
    other.input = raw("[1]");
    assert_eq!(store.create_run(other).await.unwrap_err(), StoreError::DuplicateRunId(RunId::new("dup")));
    let run = store.get_run(&RunId::new("dup")).await.expect("get").expect("exists");
    assert_eq!((run.workflow.as_str(), run.input.get()), ("order", r#"{"n":1}"#));
    assert_eq!(store.read_journal(&run.id).await.expect("journal").len(), 1);
}

/// Claims lease ready runs of the named workflow versions only, bumping the epoch.
pub async fn claim_respects_workflows_and_versions(store: DynStore) {
    store.create_run(new_run("o", "order", None, 1)).await.expect("create");
    store.create_run(new_run("r", "refund", None, 2)).await.expect("create");
    let mut v2 = new_run("o2", "order", None, 3);
    v2.version = 2;
    store.create_run(v2).await.expect("create");
    let claimed = store.claim(&claim_req("w1", "order", 10)).await.expect("claim");
    assert_eq!(claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec!["o"]);
    assert_eq!((claimed[0].status, claimed[0].epoch), (RunStatus::Running, 1));
    assert_eq!(claimed[0].lease_owner.as_deref(), Some("w1"));
    assert!(store.claim(&claim_req("w2", "order", 10)).await.expect("claim").is_empty(), "leased runs are not ready");
    for id in ["r", "o2"] {
        let run = store.get_run(&RunId::new(id)).await.expect("get").expect("exists");
        assert_eq!(run.status, RunStatus::Pending);
    }
}

/// A run created with a deadline, a retention, a restart link and a journal prefix keeps them all;
/// its journal continues after the prefix; restarts are listed by the run they restart.
pub async fn new_runs_keep_their_options(store: DynStore) {
    store.create_run(new_run("orig", "order", None, 1)).await.expect("create");
    let mut run = new_run("again", "order", None, 2);
    run.deadline = Some(t(5_000));
    run.retention = Some(std::time::Duration::from_millis(100));
    run.restarted_from = Some(RunId::new("orig"));
    run.parent = Some(RunId::new("orig"));
    run.prefix = vec![step("a", 0)];
    let created = store.create_run(run).await.expect("create").run;
    let row = store.get_run(&created.id).await.expect("get").expect("exists");
    for row in [&created, &row] {
        assert_eq!((row.rare().deadline, row.last_seq), (Some(t(5_000)), 2));
        assert_eq!(row.retention, Some(std::time::Duration::from_millis(100)));
        assert_eq!(row.rare().restarted_from, Some(RunId::new("orig")));
        assert_eq!(row.rare().parent, Some(RunId::new("orig")));
    }
    let children = RunFilter { parent: Some(RunId::new("orig")), ..RunFilter::default() };
    let listed = store.list_runs(&children).await.expect("list").runs;
    assert_eq!(listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["again"]);
    let none = RunFilter { parent: Some(RunId::new("again")), ..RunFilter::default() };
    assert!(store.list_runs(&none).await.expect("list").runs.is_empty());
    let journal = store.read_journal(&row.id).await.expect("journal");
    assert!(matches!(journal[0].event, Event::Started { deadline: Some(d), .. } if d == t(5_000)));
    let state = RunState::fold(&journal).expect("folds");
    assert!(state.step(&StepPath::parse("a").expect("path")).is_some());
    let claimed = store.claim(&claim_req("w1", "order", 10)).await.expect("claim");
    let claimed = claimed.into_iter().find(|r| r.id == row.id).expect("claimed");
    assert_eq!(claimed.last_seq, 2);
    store.append(progress(&claimed, vec![step("b", 1)])).await.expect("append after the prefix");
    let filter = RunFilter { restarted_from: Some(RunId::new("orig")), ..RunFilter::default() };
    let restarts: Vec<_> = store.list_runs(&filter).await.expect("list").runs.into_iter().map(|r| r.id).collect();
    assert_eq!(restarts, [RunId::new("again")]);
    // Signal-with-start keeps them too.
    let mut run = new_run("signalled", "order", None, 3);
    run.deadline = Some(t(9));
    run.retention = Some(std::time::Duration::from_millis(7));
    let signal = StartSignal { name: "go".into(), payload: raw("1") };
    store.start_with_signal(run, signal).await.expect("start with signal");
    let row = store.get_run(&RunId::new("signalled")).await.expect("get").expect("exists");
    assert_eq!((row.rare().deadline, row.retention), (Some(t(9)), Some(std::time::Duration::from_millis(7))));
}
