//! Waits and signals ([`SignalStore`]): wake-ups on time, signals buffered and consumed once,
//! handed over to a continuation, sent with a start.

use crate::support::*;

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
pub(super) fn hand_over(run: &RunRecord, successor: &str) -> Append {
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
    assert_eq!(old.rare().continued_as, Some(RunId::new("c~1")));
    assert_eq!((old.completed_at, old.lease_owner.as_deref(), old.last_seq), (Some(t(30)), None, 4));
    let new = store.get_run(&RunId::new("c~1")).await.expect("get").expect("successor exists");
    assert_eq!((new.status, new.version, new.input.get()), (RunStatus::Pending, 2, "7"));
    assert_eq!(new.rare().continued_from, Some(run.id.clone()));
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
    assert_eq!(
        (unchanged.status, unchanged.last_seq, unchanged.rare().continued_as.clone()),
        (RunStatus::Running, 1, None)
    );
    assert_eq!(store.read_journal(&d.id).await.expect("journal").len(), 1);
    assert_eq!(store.signals(&d.id).await.expect("signals").len(), 1);
    assert_eq!(
        store.get_run(&RunId::new("c~1")).await.expect("get").expect("exists").rare().continued_from,
        Some(run.id)
    );
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
