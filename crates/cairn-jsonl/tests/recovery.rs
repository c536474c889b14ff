//! The JSONL store survives restarts and torn writes: what was committed is read back exactly,
//! a torn or uncommitted tail is dropped (never misread), and the store goes on from there.

use cairn_journal::{Event, RunState, StepPath, Timestamp};
use cairn_jsonl::JsonlStore;
use cairn_store::*;
use serde_json::value::RawValue;
use std::io::Write;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

fn step(name: &str, ordinal: u32, output: &str) -> Event {
    Event::StepCompleted {
        path: StepPath::parse(name).unwrap(),
        ordinal,
        attempt: 1,
        output: raw(output),
        started_at: None,
    }
}

async fn seeded(dir: &std::path::Path) -> RunRecord {
    let store = JsonlStore::open(dir).unwrap();
    store
        .create_run({
            let mut run = NewRun::new(
                RunId::new("run/1 ü"),
                cairn_store::WorkflowName::new("order").expect("a valid name"),
                1,
                raw(r#"{"n":1}"#),
                Timestamp::from_millis(1),
            );
            run.idempotency_key = Some(cairn_store::IdempotencyKey::new("k").expect("a valid key"));
            run
        })
        .await
        .unwrap();
    let claimed = store
        .claim(&ClaimRequest {
            owner: "w".into(),
            workflows: vec![WorkflowKey { name: "order".into(), version: 1 }],
            now: Timestamp::from_millis(2),
            lease_now: Timestamp::from_millis(2),
            lease_until: Timestamp::from_millis(10_000),
            limit: 1,
        })
        .await
        .unwrap()
        .remove(0);
    let signal = store
        .send_signal(NewSignal {
            run_id: claimed.id.clone(),
            name: "go".into(),
            payload: raw("7"),
            sent_at: Timestamp::from_millis(3),
        })
        .await
        .unwrap();
    let wait = StepPath::parse("w").unwrap();
    store
        .append(Append {
            run_id: claimed.id.clone(),
            epoch: claimed.epoch,
            after_seq: 1,
            events: vec![
                step("a", 0, "1"),
                Event::WaitStarted { path: wait.clone(), ordinal: 1, event: "go".into(), filter: None, deadline: None },
                Event::WaitCompleted { path: wait, signal: Some(signal), payload: Some(raw("7")) },
            ],
            at: Timestamp::from_millis(4),
            update: RunUpdate::Progress,
            consume_signal: Some(signal),
            batched: false,
        })
        .await
        .unwrap();
    store.get_run(&claimed.id).await.unwrap().unwrap()
}

fn journal_file(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().ends_with(".jsonl") && !p.to_str().unwrap().ends_with(".signals.jsonl"))
        .unwrap()
}

#[tokio::test]
async fn a_reopened_store_reads_back_everything_committed() {
    let dir = tempfile::tempdir().unwrap();
    let before = seeded(dir.path()).await;
    let store = JsonlStore::open(dir.path()).unwrap();
    let after = store.get_run(&before.id).await.unwrap().unwrap();
    assert_eq!((after.last_seq, after.epoch, after.status), (before.last_seq, before.epoch, before.status));
    let journal = store.read_journal(&before.id).await.unwrap();
    assert_eq!(journal.len(), 4);
    RunState::fold(&journal).unwrap();
    let signals = store.signals(&before.id).await.unwrap();
    assert_eq!(signals[0].consumed_seq, Some(4), "the consumption survived");
    // The idempotency key survived too.
    let again = store
        .create_run({
            let mut run = NewRun::new(
                RunId::new("other"),
                cairn_store::WorkflowName::new("order").expect("a valid name"),
                1,
                raw("{}"),
                Timestamp::from_millis(9),
            );
            run.idempotency_key = Some(cairn_store::IdempotencyKey::new("k").expect("a valid key"));
            run
        })
        .await
        .unwrap();
    assert!(!again.created);
    // A second process cannot open the same directory.
    assert!(JsonlStore::open(dir.path()).is_err());
}

#[tokio::test]
async fn torn_and_uncommitted_tails_are_dropped_not_misread() {
    let dir = tempfile::tempdir().unwrap();
    let before = seeded(dir.path()).await;
    let file = journal_file(dir.path());
    let committed = std::fs::read(&file).unwrap();
    {
        // An event whose commit row never made it, then half a line: a crash mid-append.
        let mut handle = std::fs::OpenOptions::new().append(true).open(&file).unwrap();
        let event = serde_json::json!({ "event": { "seq": 5, "at": 5, "event": { "step_completed": {
            "path": "b", "ordinal": 2, "attempt": 1, "output": 2 } } } });
        writeln!(handle, "{event}").unwrap();
        handle.write_all(br#"{"row":{"run":{"id":"run/1 "#).unwrap();
    }
    let store = JsonlStore::open(dir.path()).unwrap();
    let run = store.get_run(&before.id).await.unwrap().unwrap();
    assert_eq!(run.last_seq, 4, "the uncommitted step is not in the run");
    assert_eq!(store.read_journal(&run.id).await.unwrap().len(), 4);
    assert_eq!(std::fs::read(&file).unwrap(), committed, "the file is cut back to its last commit");
    // And the store goes on from there: the same step commits cleanly now.
    let mut claimed = store
        .claim(&ClaimRequest {
            owner: "w2".into(),
            workflows: vec![WorkflowKey { name: "order".into(), version: 1 }],
            now: Timestamp::from_millis(20_000),
            lease_now: Timestamp::from_millis(20_000),
            lease_until: Timestamp::from_millis(30_000),
            limit: 1,
        })
        .await
        .unwrap();
    let claimed = claimed.remove(0);
    store
        .append(Append {
            run_id: claimed.id.clone(),
            epoch: claimed.epoch,
            after_seq: 4,
            events: vec![step("b", 2, "2")],
            at: Timestamp::from_millis(20_001),
            update: RunUpdate::Progress,
            consume_signal: None,
            batched: false,
        })
        .await
        .unwrap();
    drop(store);
    let reopened = JsonlStore::open(dir.path()).unwrap();
    let journal = reopened.read_journal(&claimed.id).await.unwrap();
    assert_eq!(journal.len(), 5);
    RunState::fold(&journal).unwrap();
}

#[tokio::test]
async fn a_garbled_committed_line_is_reported_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    seeded(dir.path()).await;
    let file = journal_file(dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    // Corrupt the first line, which a later commit row vouches for.
    let garbled = text.replacen("started", "st@rted", 1);
    std::fs::write(&file, garbled).unwrap();
    let error = JsonlStore::open(dir.path()).unwrap_err();
    assert!(matches!(error, StoreError::Corrupt(_)), "{error:?}");
}

/// The file keeps a loop's whole history; a reopened store reads back what the checkpoints left,
/// as it did before the restart.
#[tokio::test]
async fn trimmed_loops_read_back_trimmed_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let run = seeded(dir.path()).await;
    let store = JsonlStore::open(dir.path()).unwrap();
    let tick = StepPath::parse("tick").unwrap();
    let trim = cairn_journal::Trim { since: run.last_seq, after: run.last_seq, through: run.last_seq + 2 };
    let events = vec![
        step("tick[0]/work", 0, "0"),
        Event::LoopCheckpoint { path: tick.clone(), next: 1, state: raw("1"), trim: None, vars: Default::default() },
        step("tick[1]/work", 0, "1"),
        Event::LoopCheckpoint {
            path: tick,
            next: 2,
            state: raw("2"),
            trim: Some(Box::new(trim)),
            vars: Default::default(),
        },
    ];
    let append = Append {
        run_id: run.id.clone(),
        epoch: run.epoch,
        after_seq: run.last_seq,
        events,
        at: Timestamp::from_millis(5),
        update: RunUpdate::Progress,
        consume_signal: None,
        batched: false,
    };
    store.append(append).await.unwrap();
    let before = store.read_journal(&run.id).await.unwrap();
    drop(store);
    let after = JsonlStore::open(dir.path()).unwrap().read_journal(&run.id).await.unwrap();
    let seqs = |j: &[cairn_journal::JournalEntry]| j.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(&before), seqs(&after));
    assert_eq!(seqs(&after), [1, 2, 3, 4, 7, 8]);
    RunState::fold(&after).unwrap();
}

/// The seeded run (one signal consumed) gets two more signals, then hands over to `run~1`.
async fn handed_over(dir: &std::path::Path) -> (RunRecord, [SignalId; 2]) {
    let run = seeded(dir).await;
    let store = JsonlStore::open(dir).unwrap();
    let signal = |at| NewSignal { run_id: run.id.clone(), name: "go".into(), payload: raw("8"), sent_at: at };
    let kept = [
        store.send_signal(signal(Timestamp::from_millis(5))).await.unwrap(),
        store.send_signal(signal(Timestamp::from_millis(6))).await.unwrap(),
    ];
    let mut successor = NewRun::new(
        RunId::new("run~1"),
        cairn_store::WorkflowName::new("order").expect("a valid name"),
        1,
        raw("2"),
        Timestamp::from_millis(7),
    );
    successor.continued_from = Some(run.id.clone());
    store
        .append(Append {
            run_id: run.id.clone(),
            epoch: run.epoch,
            after_seq: run.last_seq,
            events: vec![Event::Continued { run: "run~1".into(), input: raw("2") }],
            at: Timestamp::from_millis(7),
            update: RunUpdate::Continue { successor: Box::new(successor), at: Timestamp::from_millis(7) },
            consume_signal: None,
            batched: false,
        })
        .await
        .unwrap();
    (run, kept)
}

#[tokio::test]
async fn a_hand_over_reads_back_with_its_signals_moved() {
    let dir = tempfile::tempdir().unwrap();
    let (run, kept) = handed_over(dir.path()).await;
    let store = JsonlStore::open(dir.path()).unwrap();
    let old = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!((old.status, old.rare().continued_as.clone()), (RunStatus::Continued, Some(RunId::new("run~1"))));
    let ids = |signals: Vec<SignalRecord>| signals.iter().map(|s| (s.id, s.consumed_seq)).collect::<Vec<_>>();
    assert_eq!(store.signals(&run.id).await.unwrap().len(), 1, "only the consumed signal stays");
    assert_eq!(ids(store.signals(&RunId::new("run~1")).await.unwrap()), [(kept[0], None), (kept[1], None)]);
    // The successor, claimed, consumes one, then a signal sent to the first run reaches it: all
    // survive.
    let next = store.get_run(&RunId::new("run~1")).await.unwrap().unwrap();
    let next = store
        .claim(&ClaimRequest {
            owner: "w".into(),
            workflows: vec![WorkflowKey { name: next.workflow.to_string(), version: next.version }],
            now: Timestamp::from_millis(7),
            lease_now: Timestamp::from_millis(7),
            lease_until: Timestamp::from_millis(10_000),
            limit: 1,
        })
        .await
        .unwrap()
        .remove(0);
    assert_eq!(next.id, RunId::new("run~1"));
    let wait = StepPath::parse("w").unwrap();
    store
        .append(Append {
            run_id: next.id.clone(),
            epoch: next.epoch,
            after_seq: 1,
            events: vec![
                Event::WaitStarted { path: wait.clone(), ordinal: 0, event: "go".into(), filter: None, deadline: None },
                Event::WaitCompleted { path: wait, signal: Some(kept[1]), payload: Some(raw("8")) },
            ],
            at: Timestamp::from_millis(8),
            update: RunUpdate::Progress,
            consume_signal: Some(kept[1]),
            batched: false,
        })
        .await
        .unwrap();
    let signal =
        NewSignal { run_id: run.id.clone(), name: "go".into(), payload: raw("9"), sent_at: Timestamp::from_millis(9) };
    let forwarded = store.send_signal(signal).await.unwrap();
    drop(store);
    let store = JsonlStore::open(dir.path()).unwrap();
    assert_eq!(
        ids(store.signals(&RunId::new("run~1")).await.unwrap()),
        [(kept[0], None), (kept[1], Some(3)), (forwarded, None)]
    );
    assert_eq!(store.signals(&run.id).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_hand_over_torn_before_its_commit_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let (run, kept) = handed_over(dir.path()).await;
    // The process died after writing the successor's file and before the run's commit.
    let path = journal_file_of(dir.path(), "run%2F1%20%C3%BC");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[lines.len() - 2].contains("\"continued\""));
    std::fs::write(&path, format!("{}\n", lines[..lines.len() - 2].join("\n"))).unwrap();
    let store = JsonlStore::open(dir.path()).unwrap();
    assert!(store.get_run(&RunId::new("run~1")).await.unwrap().is_none(), "the torn successor is gone");
    assert!(!journal_file_of(dir.path(), "run%7E1").exists());
    let old = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!((old.status, old.last_seq, old.rare().continued_as.clone()), (RunStatus::Running, run.last_seq, None));
    let unconsumed: Vec<SignalId> =
        store.signals(&run.id).await.unwrap().iter().filter(|s| s.consumed_seq.is_none()).map(|s| s.id).collect();
    assert_eq!(unconsumed, kept, "its signals are the run's again");
}

fn journal_file_of(dir: &std::path::Path, stem: &str) -> std::path::PathBuf {
    dir.join("runs").join(format!("{stem}.jsonl"))
}

/// Admissions are not written to the files of the runs they admit: a reopened store recounts its
/// concurrency groups (the rule, the slots held, the queue in creation order) and goes on.
#[tokio::test]
async fn a_reopened_store_recounts_its_concurrency_slots() {
    let dir = tempfile::tempdir().unwrap();
    let claim = |store: &JsonlStore, now: i64| {
        let request = ClaimRequest {
            owner: "w".into(),
            workflows: vec![WorkflowKey { name: "charge".into(), version: 1 }],
            now: Timestamp::from_millis(now),
            lease_now: Timestamp::from_millis(now),
            lease_until: Timestamp::from_millis(now + 10_000),
            limit: 10,
        };
        let store = store.clone();
        async move {
            let mut ids: Vec<String> =
                store.claim(&request).await.unwrap().into_iter().map(|r| r.id.as_str().to_owned()).collect();
            ids.sort();
            ids
        }
    };
    {
        let store = JsonlStore::open(dir.path()).unwrap();
        store.put_concurrency(&ConcurrencyRule::per_workflow("charge", 2)).await.unwrap();
        for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
            let run = NewRun::new(
                RunId::new(id),
                cairn_store::WorkflowName::new("charge").expect("a valid name"),
                1,
                raw("{}"),
                Timestamp::from_millis(1 + i as i64),
            );
            store.create_run(run).await.unwrap();
        }
    }
    let store = JsonlStore::open(dir.path()).unwrap();
    assert_eq!(store.concurrency_rules().await.unwrap()[0].limit, 2);
    assert_eq!(claim(&store, 10).await, ["a", "b"]);
    let a = store.get_run(&RunId::new("a")).await.unwrap().unwrap();
    store
        .append(Append {
            run_id: a.id.clone(),
            epoch: a.epoch,
            after_seq: a.last_seq,
            events: vec![Event::Completed { output: raw("1") }],
            at: Timestamp::from_millis(11),
            update: RunUpdate::Finish {
                status: RunStatus::Completed,
                output: Some(raw("1")),
                error: None,
                at: Timestamp::from_millis(11),
            },
            consume_signal: None,
            batched: false,
        })
        .await
        .unwrap();
    assert_eq!(claim(&store, 12).await, ["c"], "the slot a freed goes to c");
}

/// A debounced start that joined a run rewrote that run's `started` event: reopened, the run
/// has the latest input and still debounces, and the next start with its key joins it again.
#[tokio::test]
async fn a_joined_debounce_window_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let start = |n: i64, at: i64| {
        let mut run = NewRun::new(
            RunId::new(format!("d{n}")),
            cairn_store::WorkflowName::new("digest").expect("a valid name"),
            1,
            raw(&format!(r#"{{"n":{n}}}"#)),
            Timestamp::from_millis(at),
        );
        run.debounce = Some(Debounce::new("k", std::time::Duration::from_secs(1)));
        run
    };
    {
        let store = JsonlStore::open(dir.path()).unwrap();
        assert!(store.create_run(start(1, 0)).await.unwrap().created);
        assert!(!store.create_run(start(2, 500)).await.unwrap().created);
    }
    let store = JsonlStore::open(dir.path()).unwrap();
    let id = RunId::new("d1");
    let run = store.get_run(&id).await.unwrap().unwrap();
    assert!(run.is_debouncing());
    assert_eq!((run.input.get(), run.wake_at), (r#"{"n":2}"#, Some(Timestamp::from_millis(1_500))));
    let journal = store.read_journal(&id).await.unwrap();
    assert_eq!(journal.len(), 1);
    assert!(matches!(&journal[0].event, Event::Started { input, .. } if input.get() == r#"{"n":2}"#));
    let joined = store.create_run(start(3, 900)).await.unwrap();
    assert_eq!((joined.created, joined.run.id.as_str()), (false, "d1"));
}

/// Published events read back after a restart, merged as they were recorded (a later line of an
/// id is its merged record), a torn last line dropped; a prune that deletes some rewrites the
/// file with the rest.
#[tokio::test]
async fn published_events_read_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let run = |workflow: &str, id: &str| EventRun { workflow: workflow.into(), run: RunId::new(id) };
    let event = |id: &str, at: i64, runs: Vec<EventRun>| EventRecord {
        id: id.into(),
        topic: "user.signup".into(),
        payload: raw(r#"{"name":"Ada"}"#),
        published_at: Timestamp::from_millis(at),
        runs,
    };
    let all = EventQuery { limit: 10, ..EventQuery::default() };
    {
        let store = JsonlStore::open(dir.path()).unwrap();
        store.record_event(&event("e1", 10, vec![run("welcome", "r1")])).await.unwrap();
        store.record_event(&event("e2", 20, vec![])).await.unwrap();
        store.record_event(&event("e1", 30, vec![run("audit", "r2")])).await.unwrap();
    }
    let file = dir.path().join("events.jsonl");
    std::fs::OpenOptions::new().append(true).open(&file).unwrap().write_all(br#"{"id":"torn","to"#).unwrap();
    {
        let store = JsonlStore::open(dir.path()).unwrap();
        let page = store.events(&all).await.unwrap();
        let ids: Vec<&str> = page.events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["e2", "e1"]);
        assert_eq!(page.events[1], event("e1", 10, vec![run("audit", "r2"), run("welcome", "r1")]));
        // The torn line was cut off: a record after it reads back.
        store.record_event(&event("e0", 5, vec![])).await.unwrap();
        let prune = PruneRequest {
            now: Timestamp::from_millis(100),
            ended_before: None,
            events_before: Some(Timestamp::from_millis(15)),
            limit: 10,
            dry_run: false,
        };
        store.prune(prune).await.unwrap();
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 1, "rewritten with e2 alone (e0, e1 pruned)");
    let store = JsonlStore::open(dir.path()).unwrap();
    let page = store.events(&all).await.unwrap();
    assert_eq!(page.events, [event("e2", 20, vec![])]);
}
