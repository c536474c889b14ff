//! The conformance suite every [`Store`] backend must pass.
//!
//! Each check is an async function taking a fresh, empty store. The
//! [`conformance_tests!`] macro turns the whole suite into `#[tokio::test]`s for one backend:
//!
//! ```ignore
//! cairn_store_conformance::conformance_tests!(memory, || async {
//!     (std::sync::Arc::new(cairn_store::MemoryStore::new()) as std::sync::Arc<dyn cairn_store::Store>, ())
//! });
//! ```

// This crate is test code: a failed check panics, as in any test.
#![allow(clippy::unwrap_used)]

use cairn_journal::{Event, RunState, SignalId, StepPath, Timestamp};
use cairn_store::*;
use serde_json::value::RawValue;
use std::sync::Arc;

/// A store under test.
pub type DynStore = Arc<dyn Store>;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).expect("valid JSON in test")
}

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn new_run(id: &str, workflow: &str, key: Option<&str>, at: i64) -> NewRun {
    let mut run = NewRun::new(RunId::new(id), workflow, 1, raw(r#"{"n":1}"#), t(at));
    run.idempotency_key = key.map(Into::into);
    run
}

fn wf(name: &str) -> Vec<WorkflowKey> {
    vec![WorkflowKey { name: name.into(), version: 1 }]
}

fn claim_req(owner: &str, workflow: &str, now: i64) -> ClaimRequest {
    ClaimRequest {
        owner: owner.into(),
        workflows: wf(workflow),
        now: t(now),
        lease_now: t(now),
        lease_until: t(now + 1_000),
        limit: 100,
    }
}

fn step(path: &str, ordinal: u32) -> Event {
    Event::StepCompleted {
        path: StepPath::parse(path).expect("valid path"),
        ordinal,
        attempt: 1,
        output: raw("\"ok\""),
        started_at: Some(t(4)),
    }
}

fn progress(run: &RunRecord, events: Vec<Event>) -> Append {
    Append {
        run_id: run.id.clone(),
        epoch: run.epoch,
        after_seq: run.last_seq,
        events,
        at: t(5),
        update: RunUpdate::Progress,
        consume_signal: None,
        batched: false,
    }
}

async fn claim_one(store: &DynStore, workflow: &str, now: i64) -> RunRecord {
    let mut claimed = store.claim(&claim_req("w1", workflow, now)).await.expect("claim");
    assert_eq!(claimed.len(), 1, "expected exactly one claimable run");
    claimed.remove(0)
}

/// Worker `w1` extends its lease of `run` (held at `run.epoch`) to 2,000.
async fn beat(store: &DynStore, run: &RunRecord) -> Vec<LeaseStatus> {
    let request =
        HeartbeatRequest { owner: "w1".into(), runs: vec![(run.id.clone(), run.epoch)], lease_until: t(2_000) };
    store.heartbeat(&request).await.expect("heartbeat")
}

/// `run`'s holder suspends it in a sleep until `wake_at`, at `now`.
async fn suspend_sleeping(store: &DynStore, run: &RunRecord, wake_at: i64, now: i64) {
    let mut suspend = progress(run, vec![]);
    suspend.update = RunUpdate::Suspend {
        reason: SuspendReason::Sleeping,
        wake_at: Some(t(wake_at)),
        signals_after: None,
        now: t(now),
    };
    store.append(suspend).await.expect("suspend");
}

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

/// A worker whose lease expired and was reclaimed cannot append; nothing it sent is stored.
pub async fn stale_epoch_is_fenced(store: DynStore) {
    store.create_run(new_run("f", "order", None, 1)).await.expect("create");
    let first = claim_one(&store, "order", 10).await;
    // The lease runs to 1_010; at 2_000 another worker reclaims it.
    let mut request = claim_req("w2", "order", 2_000);
    request.lease_until = t(3_000);
    let second = store.claim(&request).await.expect("reclaim");
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].epoch, first.epoch + 1);
    let err = store.append(progress(&first, vec![step("a", 0)])).await.unwrap_err();
    assert!(matches!(err, StoreError::Fenced { held: 1, current: 2, .. }), "{err:?}");
    assert_eq!(store.read_journal(&first.id).await.expect("journal").len(), 1);
    store.append(progress(&second[0], vec![step("a", 0)])).await.expect("new holder appends");
    let lease = store
        .heartbeat(&HeartbeatRequest {
            owner: "w1".into(),
            runs: vec![(first.id.clone(), first.epoch)],
            lease_until: t(9),
        })
        .await
        .expect("heartbeat");
    assert!(!lease[0].held);
}

/// Appends must continue the journal where it ends; events are numbered densely.
pub async fn append_checks_sequence(store: DynStore) {
    store.create_run(new_run("s", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    store.append(progress(&run, vec![step("a", 0), step("b", 1)])).await.expect("append");
    let err = store.append(progress(&run, vec![step("c", 2)])).await.unwrap_err();
    assert!(matches!(err, StoreError::SequenceConflict { expected: 1, actual: 3, .. }), "{err:?}");
    let mut next = progress(&run, vec![step("c", 2)]);
    next.after_seq = 3;
    store.append(next).await.expect("append after 3");
    let journal = store.read_journal(&run.id).await.expect("journal");
    assert_eq!(journal.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    RunState::fold(&journal).expect("journal folds");
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").last_seq, 4);
}

/// Appends of one run sent together (a run's concurrent items, `batched`), the last finishing the
/// run, all land in order, whatever the backend merges; one sent after them with a stale
/// sequence number is refused and changes nothing.
pub async fn appends_sent_together_land_in_order(store: DynStore) {
    store.create_run(new_run("fan", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let mut sent = Vec::new();
    for i in 0..40u32 {
        let mut append = progress(&run, vec![step(&format!("item[{i}]/work"), 0)]);
        append.after_seq = run.last_seq + u64::from(i);
        append.batched = true;
        if i == 39 {
            let output = raw("40");
            append.events.push(Event::Completed { output: output.clone() });
            append.update =
                RunUpdate::Finish { status: RunStatus::Completed, output: Some(output), error: None, at: t(6) };
        }
        sent.push(store.append(append));
    }
    for outcome in futures::future::join_all(sent).await {
        outcome.expect("append");
    }
    let mut stale = progress(&run, vec![step("late", 0)]);
    stale.after_seq = 41;
    assert!(store.append(stale).await.is_err(), "an append to an ended run");
    let journal = store.read_journal(&run.id).await.expect("journal");
    assert_eq!(journal.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=42).collect::<Vec<_>>());
    let state = RunState::fold(&journal).expect("journal folds");
    assert_eq!(state.steps().count(), 40);
    let ended = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((ended.status, ended.last_seq), (RunStatus::Completed, 42));
}

/// A loop checkpoint's trim deletes, within its range, the loop's iterations, its earlier
/// checkpoints and the durable values' sets, and nothing else (another loop's checkpoint, a step
/// beside the loop, a set after the range); the journal read back folds with the gaps.
pub async fn loop_checkpoints_trim_their_history(store: DynStore) {
    store.create_run(new_run("looping", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let checkpoint = |path: &str, next: u64, trim: Option<cairn_journal::Trim>| Event::LoopCheckpoint {
        path: StepPath::parse(path).expect("valid path"),
        next,
        state: raw(&next.to_string()),
        trim,
        vars: Default::default(),
    };
    let set = |value: &str| Event::VarSet { name: "n".into(), value: raw(value) };
    let batches = vec![
        vec![step("tick[0]/work", 0)],                                // 2
        vec![checkpoint("tock", 4, None), step("ticker[0]/work", 0)], // 3, 4
        vec![checkpoint("tick", 1, None), set("1")],                  // 5, 6
        vec![step("tick[1]/work", 0), step("side", 0)],               // 7, 8
        vec![set("2"), checkpoint("tick", 2, Some(cairn_journal::Trim { since: 1, after: 1, through: 6 }))], // 9, 10
    ];
    let mut after_seq = run.last_seq;
    for events in batches {
        let mut append = progress(&run, events);
        append.after_seq = after_seq;
        after_seq += append.events.len() as u64;
        store.append(append).await.expect("append");
    }
    let journal = store.read_journal(&run.id).await.expect("journal");
    assert_eq!(journal.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 3, 4, 7, 8, 9, 10]);
    let state = RunState::fold(&journal).expect("a trimmed journal folds");
    let record = state.loop_record(&StepPath::parse("tick").expect("path")).expect("the loop's checkpoint");
    assert_eq!((record.next, record.seq), (2, 10));
    assert!(state.loop_record(&StepPath::parse("tock").expect("path")).is_some(), "another loop's checkpoint stays");
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").last_seq, 10);
}

/// A journal of 5,001 entries reads back whole and in order, and a second run's entries do not
/// mix in (backends may read long journals in parts).
pub async fn long_journals_read_back_whole(store: DynStore) {
    for id in ["long", "other"] {
        store.create_run(new_run(id, "order", None, 1)).await.expect("create");
    }
    let mut claimed = store.claim(&claim_req("w1", "order", 10)).await.expect("claim");
    claimed.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    for (run, steps) in claimed.iter().zip([5_000u32, 3]) {
        let mut after_seq = run.last_seq;
        for chunk in (0..steps).collect::<Vec<_>>().chunks(500) {
            let events = chunk.iter().map(|&i| step(&format!("{}[{i}]", run.id.as_str()), i)).collect::<Vec<_>>();
            let mut append = progress(run, events);
            append.after_seq = after_seq;
            after_seq += chunk.len() as u64;
            store.append(append).await.expect("append");
        }
    }
    let long = RunId::new("long");
    let journal = store.read_journal(&long).await.expect("journal");
    assert_eq!(journal.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=5_001).collect::<Vec<_>>());
    let state = RunState::fold(&journal).expect("journal folds");
    assert_eq!(state.steps().count(), 5_000);
    assert!(state.steps().all(|(path, _)| path.as_str().starts_with("long[")), "another run's entries mixed in");
    // Read through a known last entry: the whole journal, or the prefix asked for.
    let through = store.read_journal_through(&long, 5_001).await.expect("journal");
    assert_eq!(through.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=5_001).collect::<Vec<_>>());
    assert_eq!(RunState::fold(&through).expect("folds").steps().count(), 5_000);
    let prefix = store.read_journal_through(&long, 2_500).await.expect("journal");
    assert_eq!(prefix.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=2_500).collect::<Vec<_>>());
    let other = RunId::new("other");
    assert_eq!(store.read_journal(&other).await.expect("journal").len(), 4);
    assert_eq!(store.read_journal_through(&other, 4).await.expect("journal").len(), 4);
    assert!(store.read_journal(&RunId::new("absent")).await.expect("journal").is_empty());
    assert!(store.read_journal_through(&RunId::new("absent"), 3_000).await.expect("journal").is_empty());
}

/// A suspended run becomes ready at its `wake_at`, not before.
pub async fn suspended_runs_wake_on_time(store: DynStore) {
    store.create_run(new_run("z", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let mut append = progress(
        &run,
        vec![Event::TimerStarted { path: StepPath::parse("nap").expect("path"), ordinal: 0, wake_at: t(500) }],
    );
    append.update =
        RunUpdate::Suspend { reason: SuspendReason::Sleeping, wake_at: Some(t(500)), signals_after: None, now: t(10) };
    store.append(append).await.expect("suspend");
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!(
        (row.status, row.suspend_reason, row.wake_at),
        (RunStatus::Suspended, Some(SuspendReason::Sleeping), Some(t(500)))
    );
    assert_eq!(row.lease_owner, None);
    assert_eq!(store.next_wake_at(&wf("order")).await.expect("next"), Some(t(500)));
    assert_eq!(store.next_wake_at(&wf("refund")).await.expect("next"), None);
    assert!(store.claim(&claim_req("w1", "order", 499)).await.expect("claim").is_empty());
    let again = claim_one(&store, "order", 500).await;
    assert_eq!((again.epoch, again.last_seq), (2, 2));
}

/// Signals are buffered before a wait, consumed once, and wake waiting runs.
pub async fn signals_are_buffered_and_consumed_once(store: DynStore) {
    store.create_run(new_run("g", "order", None, 1)).await.expect("create");
    let early = store
        .send_signal(NewSignal {
            run_id: RunId::new("g"),
            name: "go".into(),
            payload: raw(r#"{"a":1}"#),
            sent_at: t(2),
        })
        .await
        .expect("signal before wait");
    let run = claim_one(&store, "order", 10).await;
    let signals = store.signals(&run.id).await.expect("signals");
    assert_eq!(signals.len(), 1);
    assert_eq!((signals[0].id, signals[0].name.as_str(), signals[0].consumed_seq), (early, "go", None));
    let wait = StepPath::parse("w").expect("path");
    let mut append = progress(
        &run,
        vec![
            Event::WaitStarted { path: wait.clone(), ordinal: 0, event: "go".into(), filter: None, deadline: None },
            Event::WaitCompleted { path: wait.clone(), signal: Some(early), payload: Some(raw(r#"{"a":1}"#)) },
        ],
    );
    append.consume_signal = Some(early);
    store.append(append).await.expect("consume");
    assert_eq!(store.signals(&run.id).await.expect("signals")[0].consumed_seq, Some(3));

    // Consuming it again is refused, and nothing of that append is stored.
    let run = store.get_run(&run.id).await.expect("get").expect("exists");
    let w2 = StepPath::parse("w2").expect("path");
    let mut again = progress(
        &run,
        vec![
            Event::WaitStarted { path: w2.clone(), ordinal: 1, event: "go".into(), filter: None, deadline: None },
            Event::WaitCompleted { path: w2, signal: Some(early), payload: None },
        ],
    );
    again.consume_signal = Some(early);
    assert_eq!(store.append(again).await.unwrap_err(), StoreError::SignalUnavailable(early));
    assert_eq!(store.read_journal(&run.id).await.expect("journal").len(), 3);
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").last_seq, 3);

    // A run suspended waiting is woken by the next signal.
    let mut suspend = progress(&run, vec![]);
    suspend.update = RunUpdate::Suspend {
        reason: SuspendReason::Waiting,
        wake_at: Some(t(10_000)),
        signals_after: Some(early),
        now: t(20),
    };
    store.append(suspend).await.expect("suspend");
    assert!(store.claim(&claim_req("w1", "order", 30)).await.expect("claim").is_empty());
    store
        .send_signal(NewSignal { run_id: run.id.clone(), name: "other".into(), payload: raw("{}"), sent_at: t(40) })
        .await
        .expect("signal");
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").wake_at, Some(t(40)));
    assert_eq!(claim_one(&store, "order", 40).await.id, run.id);
}

/// A signal that arrives while the run is held wakes it as soon as it suspends.
pub async fn signal_during_execution_is_not_lost(store: DynStore) {
    store.create_run(new_run("h", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let id = store
        .send_signal(NewSignal { run_id: run.id.clone(), name: "go".into(), payload: raw("1"), sent_at: t(11) })
        .await
        .expect("signal");
    let mut suspend = progress(&run, vec![]);
    suspend.update = RunUpdate::Suspend {
        reason: SuspendReason::Waiting,
        wake_at: None,
        signals_after: Some(SignalId(id.0 - 1)),
        now: t(12),
    };
    store.append(suspend).await.expect("suspend");
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").wake_at, Some(t(12)));
}

/// Signals and cancellations of unknown or finished runs are refused and store nothing.
pub async fn finished_runs_refuse_signals_and_cancels(store: DynStore) {
    let missing = RunId::new("nope");
    let err = store
        .send_signal(NewSignal { run_id: missing.clone(), name: "go".into(), payload: raw("1"), sent_at: t(1) })
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::RunNotFound(missing.clone()));
    let cancel = |id: &RunId| ControlRequest { run_id: id.clone(), reason: "stop".into(), at: t(50), lease_now: t(50) };
    assert_eq!(store.cancel(cancel(&missing)).await.unwrap_err(), StoreError::RunNotFound(missing));

    store.create_run(new_run("done", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let mut finish = progress(&run, vec![Event::Completed { output: raw("7") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("7")), error: None, at: t(20) };
    store.append(finish).await.expect("finish");
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!(
        (row.status, row.output.as_ref().map(|o| o.get()), row.completed_at),
        (RunStatus::Completed, Some("7"), Some(t(20)))
    );
    let err = store
        .send_signal(NewSignal { run_id: run.id.clone(), name: "go".into(), payload: raw("1"), sent_at: t(30) })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::RunFinished { status: RunStatus::Completed, .. }));
    assert!(store.signals(&run.id).await.expect("signals").is_empty());
    assert!(matches!(store.cancel(cancel(&run.id)).await.unwrap_err(), StoreError::RunFinished { .. }));
    assert_eq!(store.read_journal(&run.id).await.expect("journal").len(), 2);
    assert!(store.claim(&claim_req("w1", "order", 10_000)).await.expect("claim").is_empty());
}

/// `run`'s holder ends it as `continued` and hands over to the fresh run `successor` (input `7`).
fn hand_over(run: &RunRecord, successor: &str) -> Append {
    let mut next = NewRun::new(RunId::new(successor), run.workflow.clone(), 2, raw("7"), t(30));
    next.continued_from = Some(run.id.clone());
    next.retention = Some(std::time::Duration::from_secs(60));
    let mut append = progress(run, vec![Event::Continued { run: successor.into(), input: raw("7") }]);
    append.update = RunUpdate::Continue { successor: Box::new(next), at: t(30) };
    append
}

/// A run that continues as new ends as `continued`, linked both ways to its successor, which
/// starts fresh and takes every signal the run had not consumed; signals sent to the run later
/// reach the newest run of the chain; a successor whose id is taken refuses the whole hand-over.
pub async fn continue_as_new_hands_over_unconsumed_signals(store: DynStore) {
    store.create_run(new_run("c", "order", None, 1)).await.expect("create");
    let send = |to: &str, name: &str, at: i64| NewSignal {
        run_id: RunId::new(to),
        name: name.into(),
        payload: raw("1"),
        sent_at: t(at),
    };
    let first = store.send_signal(send("c", "go", 2)).await.expect("signal");
    let second = store.send_signal(send("c", "go", 3)).await.expect("signal");
    let run = claim_one(&store, "order", 10).await;
    let wait = StepPath::parse("w").expect("path");
    let mut consume = progress(
        &run,
        vec![
            Event::WaitStarted { path: wait.clone(), ordinal: 0, event: "go".into(), filter: None, deadline: None },
            Event::WaitCompleted { path: wait, signal: Some(first), payload: Some(raw("1")) },
        ],
    );
    consume.consume_signal = Some(first);
    store.append(consume).await.expect("consume");
    let run = store.get_run(&run.id).await.expect("get").expect("exists");
    store.append(hand_over(&run, "c~1")).await.expect("hand over");

    let old = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!(old.status, RunStatus::Continued);
    assert_eq!(old.continued_as, Some(RunId::new("c~1")));
    assert_eq!((old.completed_at, old.lease_owner.as_deref(), old.last_seq), (Some(t(30)), None, 4));
    let new = store.get_run(&RunId::new("c~1")).await.expect("get").expect("successor exists");
    assert_eq!((new.status, new.version, new.input.get()), (RunStatus::Pending, 2, "7"));
    assert_eq!(new.continued_from, Some(run.id.clone()));
    assert_eq!(new.retention, Some(std::time::Duration::from_secs(60)));
    assert_eq!(store.read_journal(&new.id).await.expect("journal").len(), 1);
    let ids = |signals: Vec<SignalRecord>| signals.iter().map(|s| (s.id, s.consumed_seq)).collect::<Vec<_>>();
    assert_eq!(ids(store.signals(&run.id).await.expect("signals")), [(first, Some(3))]);
    assert_eq!(ids(store.signals(&new.id).await.expect("signals")), [(second, None)]);

    // Signals sent to the first run of the chain reach the newest.
    let later = store.send_signal(send("c", "go", 40)).await.expect("forwarded");
    assert_eq!(ids(store.signals(&new.id).await.expect("signals")), [(second, None), (later, None)]);
    let new = store
        .claim(&ClaimRequest {
            workflows: vec![WorkflowKey { name: "order".into(), version: 2 }],
            ..claim_req("w1", "order", 50)
        })
        .await
        .expect("claim")
        .pop()
        .expect("the successor is claimable");
    store.append(hand_over(&new, "c~2")).await.expect("second hand-over");
    let last = store.send_signal(send("c", "go", 60)).await.expect("forwarded twice");
    assert_eq!(
        ids(store.signals(&RunId::new("c~2")).await.expect("signals")),
        [(second, None), (later, None), (last, None)]
    );

    // A hand-over to a taken id changes nothing.
    store.create_run(new_run("d", "other", None, 1)).await.expect("create");
    store.send_signal(send("d", "go", 2)).await.expect("signal");
    let d = claim_one(&store, "other", 10).await;
    assert_eq!(store.append(hand_over(&d, "c~1")).await.unwrap_err(), StoreError::DuplicateRunId(RunId::new("c~1")));
    let unchanged = store.get_run(&d.id).await.expect("get").expect("exists");
    assert_eq!((unchanged.status, unchanged.last_seq, unchanged.continued_as), (RunStatus::Running, 1, None));
    assert_eq!(store.read_journal(&d.id).await.expect("journal").len(), 1);
    assert_eq!(store.signals(&d.id).await.expect("signals").len(), 1);
    assert_eq!(store.get_run(&RunId::new("c~1")).await.expect("get").expect("exists").continued_from, Some(run.id));
}

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
        assert_eq!((row.deadline, row.last_seq), (Some(t(5_000)), 2));
        assert_eq!(row.retention, Some(std::time::Duration::from_millis(100)));
        assert_eq!(row.restarted_from, Some(RunId::new("orig")));
        assert_eq!(row.parent, Some(RunId::new("orig")));
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
    assert_eq!((row.deadline, row.retention), (Some(t(9)), Some(std::time::Duration::from_millis(7))));
}

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

/// Lists keep only runs whose input contains the filter's JSON (as PostgreSQL's `@>`), page by
/// page.
pub async fn list_filters_by_input(store: DynStore) {
    let inputs = [
        ("r1", r#"{"customer":42,"tags":["a","b"],"address":{"city":"Oslo","zip":"0150"}}"#),
        ("r2", r#"{"customer":7,"tags":["b"]}"#),
        ("r3", r#"{"customer":42.0}"#),
        ("r4", r#""customer""#),
        ("r5", "[1,2]"),
    ];
    for (i, (id, input)) in inputs.iter().enumerate() {
        let input = RawValue::from_string((*input).to_owned()).unwrap();
        store.create_run(NewRun::new(RunId::new(*id), "order", 1, input, t(i as i64))).await.expect("create");
    }
    let ids = |page: &RunPage| page.runs.iter().map(|r| r.id.to_string()).collect::<Vec<_>>();
    let filtered = |needle: serde_json::Value| RunFilter { input_contains: Some(needle), ..RunFilter::default() };
    let cases = [
        (serde_json::json!({"customer": 42}), vec!["r3", "r1"]),
        (serde_json::json!({"tags": ["b"]}), vec!["r2", "r1"]),
        (serde_json::json!({"address": {"city": "Oslo"}}), vec!["r1"]),
        (serde_json::json!({"address": {"city": "Bergen"}}), vec![]),
        (serde_json::json!({}), vec!["r3", "r2", "r1"]),
    ];
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

/// Runs that need a worker are counted per workflow version, and listed as stranded when no
/// served version matches theirs; ended and paused runs are never stranded.
pub async fn stranded_runs_are_counted_and_listed(store: DynStore) {
    let versioned = |id: &str, workflow: &str, version: u32, at: i64| {
        NewRun::new(RunId::new(id), workflow, version, raw("{}"), t(at))
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

/// Cancelling an idle run ends it at once; a held run is flagged for its worker.
pub async fn cancel_idle_and_held_runs(store: DynStore) {
    store.create_run(new_run("idle", "order", None, 1)).await.expect("create");
    let outcome = store
        .cancel(ControlRequest { run_id: RunId::new("idle"), reason: "user".into(), at: t(5), lease_now: t(5) })
        .await
        .expect("cancel");
    assert_eq!(outcome, CancelOutcome::Cancelled);
    let row = store.get_run(&RunId::new("idle")).await.expect("get").expect("exists");
    assert_eq!(row.status, RunStatus::Cancelled);
    let journal = store.read_journal(&row.id).await.expect("journal");
    assert!(matches!(&journal.last().expect("entry").event, Event::Cancelled { reason } if reason == "user"));
    RunState::fold(&journal).expect("folds");

    store.create_run(new_run("held", "order", None, 2)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let outcome = store
        .cancel(ControlRequest { run_id: run.id.clone(), reason: "user".into(), at: t(11), lease_now: t(11) })
        .await
        .expect("cancel");
    assert_eq!(outcome, CancelOutcome::Requested);
    let lease = beat(&store, &run).await;
    assert_eq!(
        lease,
        vec![LeaseStatus { run_id: run.id.clone(), held: true, cancel_requested: true, pause_requested: false }]
    );
    // If the holder suspends instead of finishing, the run wakes at once so it can be cancelled.
    suspend_sleeping(&store, &run, 99_999, 12).await;
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").wake_at, Some(t(12)));
}

/// A parked run is paused with its error and is not claimed again.
pub async fn parked_runs_stay_parked(store: DynStore) {
    store.create_run(new_run("p", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let mut park = progress(&run, vec![]);
    park.update = RunUpdate::Park { error: "[CAIRN-E0101] drift".into() };
    store.append(park).await.expect("park");
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((row.status, row.error.as_deref()), (RunStatus::Paused, Some("[CAIRN-E0101] drift")));
    assert!(store.claim(&claim_req("w1", "order", 99_999)).await.expect("claim").is_empty());
}

/// A released run is ready again for any worker at once, and its old epoch is fenced.
pub async fn released_runs_are_ready_at_once(store: DynStore) {
    store.create_run(new_run("rel", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let mut release = progress(&run, vec![step("a", 0)]);
    release.update = RunUpdate::Release;
    store.append(release).await.expect("release");
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((row.status, row.lease_owner.as_deref(), row.last_seq), (RunStatus::Pending, None, 2));
    let again = claim_one(&store, "order", 11).await;
    assert_eq!(again.epoch, run.epoch + 1);
    let err = store.append(progress(&row, vec![])).await.unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
}

fn control(id: &RunId, at: i64) -> ControlRequest {
    ControlRequest { run_id: id.clone(), reason: "operator".into(), at: t(at), lease_now: t(at) }
}

/// An idle run pauses at once and is not claimed until resumed; pausing again changes nothing;
/// resuming makes it ready at once. Bad requests are refused and change nothing.
pub async fn pause_and_resume_idle_runs(store: DynStore) {
    store.create_run(new_run("idle", "order", None, 1)).await.expect("create");
    let id = RunId::new("idle");
    assert_eq!(store.pause(control(&id, 5)).await.expect("pause"), PauseOutcome::Paused);
    let row = store.get_run(&id).await.expect("get").expect("exists");
    assert_eq!((row.status, row.error.as_deref(), row.epoch), (RunStatus::Paused, Some("operator"), 1));
    assert!(store.claim(&claim_req("w1", "order", 99_999)).await.expect("claim").is_empty(), "paused: not claimed");
    assert_eq!(store.pause(control(&id, 6)).await.expect("pause again"), PauseOutcome::Paused);
    assert_eq!(store.get_run(&id).await.expect("get").expect("exists").epoch, 1, "nothing changed");
    store.resume(ResumeRequest { run_id: id.clone(), at: t(7) }).await.expect("resume");
    let row = store.get_run(&id).await.expect("get").expect("exists");
    assert_eq!((row.status, row.error.as_deref(), row.updated_at), (RunStatus::Pending, None, t(7)));
    let err = store.resume(ResumeRequest { run_id: id.clone(), at: t(8) }).await.unwrap_err();
    assert_eq!(err, StoreError::NotPaused { run_id: id.clone(), status: RunStatus::Pending });
    let missing = RunId::new("missing");
    assert_eq!(store.pause(control(&missing, 9)).await.unwrap_err(), StoreError::RunNotFound(missing.clone()));
    assert_eq!(
        store.resume(ResumeRequest { run_id: missing.clone(), at: t(9) }).await.unwrap_err(),
        StoreError::RunNotFound(missing)
    );
    assert_eq!(claim_one(&store, "order", 10).await.id, id);
    store.cancel(control(&id, 10)).await.expect("cancel request");
    store.create_run(new_run("done", "order", None, 2)).await.expect("create");
    store.cancel(control(&RunId::new("done"), 11)).await.expect("cancel");
    let err = store.pause(control(&RunId::new("done"), 12)).await.unwrap_err();
    assert!(matches!(err, StoreError::RunFinished { status: RunStatus::Cancelled, .. }), "{err:?}");
    assert_eq!(store.get_run(&RunId::new("done")).await.expect("get").expect("exists").status, RunStatus::Cancelled);
}

/// A held run is flagged and its worker hears of it by heartbeat; suspending while flagged wakes
/// it at once (so a worker parks it), and parking clears the flag.
pub async fn pause_held_runs_by_flag(store: DynStore) {
    store.create_run(new_run("held", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    assert_eq!(store.pause(control(&run.id, 11)).await.expect("pause"), PauseOutcome::Requested);
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((row.status, row.pause_requested), (RunStatus::Running, true));
    let lease = beat(&store, &run).await;
    assert_eq!(
        lease,
        vec![LeaseStatus { run_id: run.id.clone(), held: true, cancel_requested: false, pause_requested: true }]
    );
    suspend_sleeping(&store, &run, 99_999, 12).await;
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").wake_at, Some(t(12)));
    let again = claim_one(&store, "order", 13).await;
    assert!(again.pause_requested, "the claimer learns of the pause");
    let mut park = progress(&again, vec![]);
    park.update = RunUpdate::Park { error: "paused".into() };
    store.append(park).await.expect("park");
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((row.status, row.pause_requested), (RunStatus::Paused, false));
}

/// A claim of a run whose lease expired counts a recovery; any append resets the count; a
/// released or suspended run's claim does not count.
pub async fn reclaims_count_recoveries_until_progress(store: DynStore) {
    store.create_run(new_run("crashy", "order", None, 1)).await.expect("create");
    let first = claim_one(&store, "order", 10).await;
    assert_eq!(first.recoveries, 0);
    // The lease (until 1_010) expires twice without anything committed.
    let second = claim_one(&store, "order", 2_000).await;
    let third = claim_one(&store, "order", 4_000).await;
    assert_eq!((second.recoveries, third.recoveries), (1, 2));
    store.append(progress(&third, vec![step("a", 0)])).await.expect("progress");
    assert_eq!(store.get_run(&third.id).await.expect("get").expect("exists").recoveries, 0);
    let mut release = progress(&store.get_run(&third.id).await.expect("get").expect("exists"), vec![]);
    release.update = RunUpdate::Release;
    store.append(release).await.expect("release");
    assert_eq!(claim_one(&store, "order", 4_001).await.recoveries, 0, "a released run was not recovered");
}

/// Signal-with-start creates the run and buffers the signal atomically; later calls signal the
/// existing run; concurrent callers make one run that holds every signal.
pub async fn start_with_signal_is_atomic(store: DynStore) {
    let go = |n: u32| StartSignal { name: "go".into(), payload: raw(&n.to_string()) };
    let (created, first) = store.start_with_signal(new_run("sws", "order", None, 1), go(0)).await.expect("start");
    assert!(created.created);
    let (again, second) = store.start_with_signal(new_run("sws", "order", None, 2), go(1)).await.expect("again");
    assert!(!again.created && second > first);
    assert_eq!(store.read_journal(&RunId::new("sws")).await.expect("journal").len(), 1);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store.start_with_signal(new_run(&format!("k-{i}"), "order", Some("key"), 3), go(i)).await
        }));
    }
    let mut ids = std::collections::HashSet::new();
    let mut created = 0;
    for task in tasks {
        let (run, _) = task.await.expect("task").expect("start with signal");
        created += usize::from(run.created);
        ids.insert(run.run.id);
    }
    assert_eq!((created, ids.len()), (1, 1));
    let keyed = ids.into_iter().next().expect("one run");
    let signals = store.signals(&keyed).await.expect("signals");
    let mut payloads: Vec<String> = signals.iter().map(|s| s.payload.get().to_owned()).collect();
    payloads.sort();
    assert_eq!(payloads, (0..8).map(|i| i.to_string()).collect::<Vec<_>>());
    // A run of another workflow with that id, and a finished run, are refused; nothing stored.
    let err = store.start_with_signal(new_run("sws", "refund", None, 4), go(9)).await.unwrap_err();
    assert_eq!(err, StoreError::DuplicateRunId(RunId::new("sws")));
    store.cancel(control(&RunId::new("sws"), 5)).await.expect("cancel");
    let err = store.start_with_signal(new_run("sws", "order", None, 6), go(9)).await.unwrap_err();
    assert!(matches!(err, StoreError::RunFinished { .. }), "{err:?}");
    assert_eq!(store.signals(&RunId::new("sws")).await.expect("signals").len(), 2);
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
    let prune = |dry_run| PruneRequest { now: t(1_000_000), ended_before: None, limit: 100, dry_run };
    assert_eq!(store.prune(prune(true)).await.expect("dry run").len(), 1);
    assert_eq!(counts(store.workflow_counts().await.expect("counts")), expected(2));
    assert_eq!(store.prune(prune(false)).await.expect("prune"), [RunId::new("o-done-2")]);
    assert_eq!(counts(store.workflow_counts().await.expect("counts")), expected(1));
}

/// Concurrency rules: runs of a limited workflow hold at most `limit` slots per key; the others
/// wait in creation order and are admitted as slots free up (a run ends, suspends without
/// holding, is paused) or the limit grows; a woken run that gave its slot up waits again; a
/// paused run resumes waiting; a refused rule stores nothing.
pub async fn concurrency_limits_admit_in_order(store: DynStore) {
    assert!(store.put_concurrency(&ConcurrencyRule::per_workflow("charge", 0)).await.is_err());
    assert!(store.put_concurrency(&ConcurrencyRule::per_key("charge", "customer", 2)).await.is_err());
    assert!(store.concurrency_rules().await.expect("rules").is_empty());
    store.put_concurrency(&ConcurrencyRule::per_key("charge", "/customer", 2)).await.expect("rule");
    let create = |id: &'static str, customer: &'static str, at: i64| {
        let store = Arc::clone(&store);
        async move {
            let input = raw(&format!(r#"{{"customer":"{customer}"}}"#));
            let created =
                store.create_run(NewRun::new(RunId::new(id), "charge", 1, input, t(at))).await.expect("create");
            assert_eq!(created.run.concurrency.as_ref().map(|c| c.key.as_str()), Some(customer));
            created.run.waiting_for
        }
    };
    let waiting = Some(WaitingFor::Concurrency);
    for (i, id) in ["c1", "c2", "c3", "c4", "c5"].into_iter().enumerate() {
        assert_eq!(create(id, "a", 10 + i as i64).await, if i < 2 { None } else { waiting }, "{id}");
    }
    assert_eq!(create("b1", "b", 15).await, None);
    let waits = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get_run(&RunId::new(id)).await.expect("get").expect("exists").waiting_for }
    };
    let claim = |now: i64| {
        let store = Arc::clone(&store);
        async move {
            let mut ids: Vec<String> = store
                .claim(&claim_req("w1", "charge", now))
                .await
                .expect("claim")
                .into_iter()
                .map(|r| r.id.as_str().to_owned())
                .collect();
            ids.sort();
            ids
        }
    };
    let get = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get_run(&RunId::new(id)).await.expect("get").expect("exists") }
    };
    assert_eq!(claim(20).await, ["b1", "c1", "c2"]);
    assert_eq!(claim(21).await, Vec::<String>::new());

    // c1 ends: c3 is admitted.
    let mut finish = progress(&get("c1").await, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(30) };
    store.append(finish).await.expect("finish");
    assert_eq!((waits("c3").await, waits("c4").await), (None, waiting));
    assert_eq!(claim(31).await, ["c3"]);
    // c2 sleeps until 500 and gives its slot up: c4 is admitted.
    suspend_sleeping(&store, &get("c2").await, 500, 40).await;
    assert_eq!(claim(41).await, ["c4"]);
    // c2 wakes while c3 and c4 hold both slots: it waits again, behind nobody (c5 came later).
    assert_eq!(claim(600).await, Vec::<String>::new());
    let c2 = get("c2").await;
    assert_eq!((c2.status, c2.waiting_for), (RunStatus::Pending, waiting));
    let mut finish = progress(&get("c3").await, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(610) };
    store.append(finish).await.expect("finish");
    assert_eq!((waits("c2").await, waits("c5").await), (None, waiting), "admitted in creation order");
    assert_eq!(claim(611).await, ["c2"]);
    // A larger limit admits c5 at once; listing shows who waits.
    let listed = store.list_runs(&RunFilter::default()).await.expect("list");
    assert_eq!(listed.runs.iter().filter(|r| r.waiting_for.is_some()).count(), 1);
    store.put_concurrency(&ConcurrencyRule::per_key("charge", "/customer", 3)).await.expect("raise");
    assert_eq!(waits("c5").await, None);
    assert_eq!(store.concurrency_rules().await.expect("rules")[0].limit, 3);
    assert!(store.delete_concurrency("charge").await.expect("delete"));
    assert!(!store.delete_concurrency("charge").await.expect("delete again"));

    // A rule that keeps suspended runs' slots; a paused run resumes waiting.
    store.put_concurrency(&ConcurrencyRule::per_workflow("hold", 1).hold_suspended()).await.expect("rule");
    for (id, at) in [("h1", 100), ("h2", 101)] {
        store.create_run(NewRun::new(RunId::new(id), "hold", 1, raw("{}"), t(at))).await.expect("create");
    }
    let h1 = claim_one(&store, "hold", 102).await;
    assert_eq!(h1.id.as_str(), "h1");
    suspend_sleeping(&store, &h1, 1_000_000, 103).await;
    assert_eq!(waits("h2").await, waiting, "h1 keeps its slot while it sleeps");
    store.pause(control(&RunId::new("h1"), 104)).await.expect("pause");
    assert_eq!(waits("h2").await, None, "a paused run gives its slot up");
    store.resume(ResumeRequest { run_id: RunId::new("h1"), at: t(105) }).await.expect("resume");
    let h1 = get("h1").await;
    assert_eq!((h1.status, h1.waiting_for), (RunStatus::Pending, waiting));
    assert!(store.claim(&claim_req("w1", "hold", 106)).await.expect("claim").iter().all(|r| r.id.as_str() == "h2"));
}

/// Ready runs are claimed by priority, then fairly between fairness keys (start-time fair
/// queuing: a key with a backlog takes turns with a key that arrives later), then by age; a
/// woken run keeps the place its creation gave it; runs created together (one batch) get
/// distinct places.
pub async fn claims_follow_priority_then_fairness(store: DynStore) {
    let create = |id: String, priority: i32, key: Option<&'static str>, at: i64| {
        let store = Arc::clone(&store);
        async move {
            let mut run = NewRun::new(RunId::new(id), "fair", 1, raw("{}"), t(at));
            (run.priority, run.fairness_key) = (priority, key.map(Into::into));
            store.create_run(run).await.expect("create").run
        }
    };
    for i in 0..30 {
        assert_eq!(create(format!("a{i}"), 0, Some("a"), 10 + i).await.fair_seq, i, "a's runs queue one after another");
    }
    for i in 0..3 {
        let b = create(format!("b{i}"), 0, Some("b"), 50 + i).await;
        assert_eq!((b.fair_seq, b.fairness_key.as_deref(), b.priority), (i, Some("b"), 0), "b starts at the head");
    }
    create("low".into(), -1, None, 60).await;
    let urgent = create("urgent".into(), 5, None, 70).await;
    assert_eq!((urgent.priority, urgent.fairness_key, urgent.fair_seq), (5, None, 0));
    let read = store.get_run(&RunId::new("b2")).await.expect("get").expect("exists");
    assert_eq!((read.priority, read.fairness_key.as_deref(), read.fair_seq), (0, Some("b"), 2));

    let mut order = Vec::new();
    let one = |now: i64| ClaimRequest { limit: 1, ..claim_req("w1", "fair", now) };
    for now in 100..110 {
        let claimed = store.claim(&one(now)).await.expect("claim");
        order.extend(claimed.into_iter().map(|r| r.id.as_str().to_owned()));
    }
    assert_eq!(order, ["urgent", "a0", "b0", "a1", "b1", "a2", "b2", "a3", "a4", "a5"]);

    // a3 sleeps and wakes: it goes before the queued runs of its priority (an earlier place).
    let a3 = store.get_run(&RunId::new("a3")).await.expect("get").expect("exists");
    suspend_sleeping(&store, &a3, 200, 150).await;
    let claimed = store.claim(&one(300)).await.expect("claim");
    assert_eq!(claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a3"]);
    let rest = store.claim(&ClaimRequest { limit: 100, ..claim_req("w1", "fair", 301) }).await.expect("claim");
    let rest: Vec<&str> = rest.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(rest.len(), 25, "{rest:?}");

    // Runs created at once of one key each get their own place.
    let together = (0..20).map(|i| create(format!("c{i}"), 0, Some("c"), 400));
    let mut places: Vec<i64> = futures::future::join_all(together).await.into_iter().map(|r| r.fair_seq).collect();
    places.sort();
    assert_eq!(places, (0..20).collect::<Vec<i64>>());
}

/// A rate limit's bucket grants at most `limit` turns in any window of its period, across
/// concurrent takers; a refused take is told when a turn frees up, and gets it then; buckets are
/// independent.
pub async fn rate_limits_grant_at_most_limit_per_window(store: DynStore) {
    let take = |bucket: &str, now: i64| TakeRate {
        bucket: bucket.to_owned(),
        limit: 3,
        period: std::time::Duration::from_millis(1_000),
        now: t(now),
    };
    for now in [0, 10, 20] {
        assert_eq!(store.take_rate(&take("a", now)).await.expect("take"), None, "turn at {now}");
    }
    assert_eq!(store.take_rate(&take("a", 500)).await.expect("take"), Some(t(1_000)), "full until 0 ages out");
    assert_eq!(store.take_rate(&take("b", 500)).await.expect("take"), None, "another bucket is its own");
    assert_eq!(store.take_rate(&take("a", 999)).await.expect("take"), Some(t(1_000)));
    assert_eq!(store.take_rate(&take("a", 1_000)).await.expect("take"), None, "0 aged out");
    assert_eq!(store.take_rate(&take("a", 1_001)).await.expect("take"), Some(t(1_010)), "refusals record nothing");

    // Askers' clocks out of order: one a period ahead does not make the bucket forget grants
    // still inside an earlier asker's window.
    for now in [1_004, 1_005, 1_006, 2_006] {
        assert_eq!(store.take_rate(&take("skew", now)).await.expect("take"), None, "turn at {now}");
    }
    assert_eq!(store.take_rate(&take("skew", 2_000)).await.expect("take"), Some(t(2_005)), "1,004 to 1,006 count");

    // Twenty takers at once: three turns.
    let takes = (0..20).map(|_| {
        let store = Arc::clone(&store);
        async move { store.take_rate(&take("burst", 5_000)).await.expect("take") }
    });
    let verdicts = futures::future::join_all(takes).await;
    assert_eq!(verdicts.iter().filter(|v| v.is_none()).count(), 3, "{verdicts:?}");
    assert!(verdicts.iter().flatten().all(|at| *at == t(6_000)), "{verdicts:?}");
}

/// A run cancelled or paused while it waits for a concurrency slot leaves the queue: it is never
/// admitted (it would hold a slot nobody frees), and the runs behind it are.
pub async fn waiting_runs_cancelled_or_paused_leave_the_queue(store: DynStore) {
    store.put_concurrency(&ConcurrencyRule::per_workflow("one", 1)).await.expect("rule");
    for (id, at) in [("r1", 1), ("r2", 2), ("r3", 3), ("r4", 4)] {
        store.create_run(NewRun::new(RunId::new(id), "one", 1, raw("{}"), t(at))).await.expect("create");
    }
    let get = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get_run(&RunId::new(id)).await.expect("get").expect("exists") }
    };
    assert_eq!(get("r2").await.waiting_for, Some(WaitingFor::Concurrency));
    assert_eq!(store.cancel(control(&RunId::new("r2"), 5)).await.expect("cancel"), CancelOutcome::Cancelled);
    assert_eq!(store.pause(control(&RunId::new("r3"), 6)).await.expect("pause"), PauseOutcome::Paused);
    let (r2, r3) = (get("r2").await, get("r3").await);
    assert_eq!((r2.status, r2.held_back_by()), (RunStatus::Cancelled, None));
    assert_eq!((r3.status, r3.held_back_by()), (RunStatus::Paused, None));
    // r1 ends: r4, the only run still waiting, takes the slot.
    let r1 = claim_one(&store, "one", 10).await;
    let mut finish = progress(&r1, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(11) };
    store.append(finish).await.expect("finish");
    assert_eq!(get("r4").await.waiting_for, None, "the slot went to r4");
    assert_eq!(claim_one(&store, "one", 12).await.id.as_str(), "r4");
    // r3 resumes behind r4, and gets the slot when r4 ends.
    store.resume(ResumeRequest { run_id: RunId::new("r3"), at: t(13) }).await.expect("resume");
    assert_eq!(get("r3").await.waiting_for, Some(WaitingFor::Concurrency));
    let mut finish = progress(&get("r4").await, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(14) };
    store.append(finish).await.expect("finish");
    assert_eq!(claim_one(&store, "one", 15).await.id.as_str(), "r3");
}

/// A create refused or answered by an existing run (its id or idempotency key taken) takes no
/// concurrency slot: the group's next run is admitted as if it had never been asked for.
pub async fn refused_creates_take_no_slot(store: DynStore) {
    store.put_concurrency(&ConcurrencyRule::per_workflow("solo", 1)).await.expect("rule");
    let create = |id: &'static str, key: Option<&'static str>, at: i64| {
        let store = Arc::clone(&store);
        async move { store.create_run(new_run(id, "solo", key, at)).await }
    };
    let first = create("s1", Some("k"), 1).await.expect("create");
    assert_eq!((first.created, first.run.waiting_for), (true, None));
    let s1 = claim_one(&store, "solo", 2).await;
    let mut finish = progress(&s1, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(3) };
    store.append(finish).await.expect("finish");
    // Its key again: the existing run, no slot taken.
    let again = create("s2", Some("k"), 4).await.expect("create");
    assert_eq!((again.created, again.run.id.as_str()), (false, "s1"));
    let s3 = create("s3", None, 5).await.expect("create");
    assert_eq!(s3.run.waiting_for, None, "the group's one slot was free");
    // Its id again: refused, no slot taken; the next run waits for s3's slot.
    assert!(matches!(create("s3", None, 6).await, Err(StoreError::DuplicateRunId(_))));
    let s4 = create("s4", None, 7).await.expect("create");
    assert_eq!(s4.run.waiting_for, Some(WaitingFor::Concurrency));
    let s3 = claim_one(&store, "solo", 8).await;
    let mut finish = progress(&s3, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(9) };
    store.append(finish).await.expect("finish");
    assert_eq!(claim_one(&store, "solo", 10).await.id.as_str(), "s4");
}

/// A debounced start (`quiet` 1 s, at most 3 s) with `n` as its input, at `at`, under `key`.
fn debounced(id: &str, key: &str, n: i64, at: i64) -> NewRun {
    let mut run = NewRun::new(RunId::new(id), "digest", 1, raw(&format!(r#"{{"n":{n}}}"#)), t(at));
    let quiet = std::time::Duration::from_secs(1);
    run.debounce = Some(Debounce::new(key, quiet).max_wait(std::time::Duration::from_secs(3)));
    run
}

/// Debounced starts with one key collapse into one run while it has not begun: it takes the
/// latest input (its `started` event too) and begins once the key has been quiet, or at its
/// first start's maximum wait; concurrent starters all find the one run; once it has begun, the
/// next start opens a new window; a debouncing run holds no concurrency slot.
pub async fn debounced_starts_collapse_into_one_run(store: DynStore) {
    let first = store.create_run(debounced("d1", "k", 1, 0)).await.expect("create");
    assert!(first.created);
    let run = &first.run;
    assert_eq!((run.status, run.suspend_reason), (RunStatus::Suspended, Some(SuspendReason::Debouncing)));
    assert_eq!((run.wake_at, run.held_back_by()), (Some(t(1_000)), Some(WaitingFor::Debounce)));
    for (i, at) in [(2, 400), (3, 900)] {
        let joined = store.create_run(debounced(&format!("d{i}"), "k", i, at)).await.expect("join");
        assert!(!joined.created);
        assert_eq!((joined.run.id.as_str(), joined.run.wake_at), ("d1", Some(t(at + 1_000))));
    }
    assert!(store.get_run(&RunId::new("d2")).await.expect("get").is_none(), "a joining start makes no run");
    // Another key has its own window; a bad debounce or one with an idempotency key is refused.
    assert!(store.create_run(debounced("e1", "other", 7, 950)).await.expect("create").created);
    let mut keyed = debounced("x1", "k", 9, 960);
    keyed.idempotency_key = Some("once".into());
    assert!(matches!(store.create_run(keyed).await, Err(StoreError::InvalidInput(_))));
    let mut bad = debounced("x2", "k", 9, 960);
    bad.debounce = Some(Debounce::new("k", std::time::Duration::ZERO));
    assert!(matches!(store.create_run(bad).await, Err(StoreError::InvalidInput(_))));
    let d1 = store.get_run(&RunId::new("d1")).await.expect("get").expect("exists");
    assert_eq!((d1.input.get(), d1.wake_at), (r#"{"n":3}"#, Some(t(1_900))), "the refused starts changed nothing");
    // Not claimable before its window closes.
    assert!(store.claim(&claim_req("w1", "digest", 1_899)).await.expect("claim").iter().all(|r| r.id.as_str() != "d1"));
    // The maximum wait caps a steady stream: starts every 900 ms never leave a quiet second.
    for (i, at, wakes) in [(4, 1_800, 2_800), (5, 2_700, 3_000)] {
        let joined = store.create_run(debounced(&format!("d{i}"), "k", i, at)).await.expect("join");
        assert_eq!((joined.run.id.as_str(), joined.run.wake_at), ("d1", Some(t(wakes))), "capped at 0 + 3 s");
    }
    let journal = store.read_journal(&RunId::new("d1")).await.expect("journal");
    assert_eq!(journal.len(), 1);
    assert!(matches!(&journal[0].event, Event::Started { input, .. } if input.get() == r#"{"n":5}"#));
    let claimed = store.claim(&claim_req("w1", "digest", 3_000)).await.expect("claim");
    let mut ids: Vec<&str> = claimed.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["d1", "e1"], "each window's run begins once");
    let d1 = claimed.iter().find(|r| r.id.as_str() == "d1").expect("claimed");
    assert_eq!((d1.status, d1.suspend_reason, d1.input.get()), (RunStatus::Running, None, r#"{"n":5}"#));
    assert_eq!(d1.held_back_by(), None);
    // It has begun: the next start opens a new window.
    let next = store.create_run(debounced("d6", "k", 6, 3_001)).await.expect("create");
    assert!(next.created && next.run.is_debouncing());

    // Concurrent starters of one key find one run.
    let starts: Vec<_> = (0..16)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.create_run(debounced(&format!("c{i}"), "burst", i, 5_000 + i)).await })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    let mut created = 0;
    for start in starts {
        let start = start.await.expect("task").expect("create");
        created += usize::from(start.created);
        ids.insert(start.run.id.to_string());
    }
    assert_eq!((created, ids.len()), (1, 1), "{ids:?}");

    // Under a concurrency rule that keeps suspended runs' slots, a debouncing run holds none; once
    // its window closes it waits for one, and then keeps it while suspended.
    store.put_concurrency(&ConcurrencyRule::per_workflow("held", 1).hold_suspended()).await.expect("rule");
    let mut waiting = debounced("h1", "k", 1, 10_000);
    waiting.workflow = "held".into();
    let h1 = store.create_run(waiting).await.expect("create").run;
    assert_eq!((h1.waiting_for, h1.concurrency.as_ref().map(|c| c.hold_suspended)), (None, Some(false)));
    let h2 = store.create_run(NewRun::new(RunId::new("h2"), "held", 1, raw("{}"), t(10_001))).await.expect("create");
    assert_eq!(h2.run.waiting_for, None, "the debouncing run holds no slot");
    assert_eq!(claim_one(&store, "held", 10_002).await.id.as_str(), "h2");
    assert!(store.claim(&claim_req("w1", "held", 11_000)).await.expect("claim").is_empty(), "h2 holds the slot");
    let h1 = store.get_run(&RunId::new("h1")).await.expect("get").expect("exists");
    assert_eq!((h1.status, h1.waiting_for), (RunStatus::Pending, Some(WaitingFor::Concurrency)));
    assert_eq!(h1.concurrency.map(|c| c.hold_suspended), Some(true), "its rule applies from now on");
    // Paused while it debounces, its window closes too: resumed, it waits for a slot and keeps it
    // while suspended as its rule says.
    let mut paused = debounced("h3", "other", 1, 11_000);
    paused.workflow = "held".into();
    store.create_run(paused).await.expect("create");
    assert_eq!(store.pause(control(&RunId::new("h3"), 11_001)).await.expect("pause"), PauseOutcome::Paused);
    let h3 = store.get_run(&RunId::new("h3")).await.expect("get").expect("exists");
    assert_eq!((h3.status, h3.held_back_by()), (RunStatus::Paused, None));
    assert_eq!(h3.concurrency.map(|c| c.hold_suspended), Some(true));
    let mut again = debounced("h4", "other", 2, 11_002);
    again.workflow = "held".into();
    assert!(store.create_run(again).await.expect("create").created, "the paused run's window closed");
    let mut joins = debounced("h5", "other", 3, 11_003);
    joins.workflow = "held".into();
    let joined = store.create_run(joins).await.expect("join under a rule");
    assert_eq!((joined.created, joined.run.id.as_str(), joined.run.input.get()), (false, "h4", r#"{"n":3}"#));
}

/// Declares one `#[tokio::test]` per conformance check for a backend.
///
/// `$make` is an expression producing a future of `(store, guard)` — a fresh, empty [`DynStore`]
/// and anything that must live as long as the test (a temporary directory, say) — or of an
/// `Option` of that, `None` meaning the backend is unavailable and the test is skipped.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:ident, $make:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $crate::conformance_tests!(@each $make;
                create_and_read_back, idempotent_create, concurrent_idempotent_create, concurrent_mixed_creates,
                duplicate_id_is_refused,
                claim_respects_workflows_and_versions, stale_epoch_is_fenced, append_checks_sequence,
                long_journals_read_back_whole, appends_sent_together_land_in_order, loop_checkpoints_trim_their_history,
                suspended_runs_wake_on_time, signals_are_buffered_and_consumed_once,
                signal_during_execution_is_not_lost, finished_runs_refuse_signals_and_cancels,
                cancel_idle_and_held_runs, parked_runs_stay_parked, released_runs_are_ready_at_once,
                list_filters_and_pages, list_filters_by_input, pause_and_resume_idle_runs, pause_held_runs_by_flag,
                reclaims_count_recoveries_until_progress, start_with_signal_is_atomic, new_runs_keep_their_options,
                ending_sets_delete_after, prune_deletes_ended_runs_past_retention,
                workers_are_recorded_and_forgotten, subscriptions_are_replaced_per_workflow,
                stranded_runs_are_counted_and_listed, workflow_counts_follow_every_status,
                continue_as_new_hands_over_unconsumed_signals, schedules_fire_once_per_due_time,
                concurrency_limits_admit_in_order, claims_follow_priority_then_fairness,
                rate_limits_grant_at_most_limit_per_window, debounced_starts_collapse_into_one_run,
                waiting_runs_cancelled_or_paused_leave_the_queue, refused_creates_take_no_slot);
        }
    };
    (@each $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                // `None`: the backend is not available here and the test is skipped (the maker
                // says so, and fails instead where the backend is required).
                let made: Option<($crate::DynStore, _)> = ($make)().await.into();
                if let Some((store, _guard)) = made {
                    $crate::$name(store).await;
                }
            }
        )*
    };
}
