//! Steering runs ([`RunStore`]): cancel, park, release, pause and resume, and the recovery count
//! of runs reclaimed.

use crate::support::*;

/// Cancelling an idle run ends it at once; a held run keeps the request, with its reason, for its
/// worker, and outranks a pause; the worker's finish clears it.
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
        .cancel(ControlRequest { run_id: run.id.clone(), reason: "wrong customer".into(), at: t(11), lease_now: t(11) })
        .await
        .expect("cancel");
    assert_eq!(outcome, CancelOutcome::Requested);
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    let cancel = Some(Request::Cancel { reason: "wrong customer".into() });
    assert_eq!((row.status, &row.pending, row.error.as_deref()), (RunStatus::Running, &cancel, None));
    assert_eq!(store.pause(control(&run.id, 11)).await.expect("pause"), PauseOutcome::Requested);
    let lease = beat(&store, &run).await;
    assert_eq!(lease, vec![LeaseStatus { run_id: run.id.clone(), held: true, pending: cancel.clone() }]);
    // If the holder suspends instead of finishing, the run wakes at once so it can be cancelled.
    suspend_sleeping(&store, &run, 99_999, 12).await;
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").wake_at, Some(t(12)));
    let again = claim_one(&store, "order", 13).await;
    assert_eq!(again.pending, cancel, "the claimer learns of the cancel and its reason");
    let mut finish = progress(&again, vec![]);
    finish.update = RunUpdate::Finish {
        status: RunStatus::Cancelled,
        output: None,
        error: Some("wrong customer".into()),
        at: t(14),
    };
    store.append(finish).await.expect("finish");
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((row.status, row.pending, row.error.as_deref()), (RunStatus::Cancelled, None, Some("wrong customer")));
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

/// A held run keeps the pause, with its reason (the first one's, if paused again), and its worker
/// hears of it by heartbeat; suspending while it waits wakes the run at once (so a worker parks
/// it), and parking clears it; a park keeps a cancel that waits.
pub async fn pause_held_runs_by_flag(store: DynStore) {
    store.create_run(new_run("held", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    assert_eq!(store.pause(control(&run.id, 11)).await.expect("pause"), PauseOutcome::Requested);
    let mut later = control(&run.id, 11);
    later.reason = "later".into();
    assert_eq!(store.pause(later).await.expect("pause again"), PauseOutcome::Requested);
    let pause = Some(Request::Pause { reason: "operator".into() });
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((row.status, &row.pending, row.error.as_deref()), (RunStatus::Running, &pause, None));
    let lease = beat(&store, &run).await;
    assert_eq!(lease, vec![LeaseStatus { run_id: run.id.clone(), held: true, pending: pause.clone() }]);
    suspend_sleeping(&store, &run, 99_999, 12).await;
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").wake_at, Some(t(12)));
    let again = claim_one(&store, "order", 13).await;
    assert_eq!(again.pending, pause, "the claimer learns of the pause");
    let mut park = progress(&again, vec![]);
    park.update = RunUpdate::Park { error: "operator".into() };
    store.append(park).await.expect("park");
    let row = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((row.status, row.pending, row.error.as_deref()), (RunStatus::Paused, None, Some("operator")));

    store.create_run(new_run("doomed", "order", None, 2)).await.expect("create");
    let doomed = claim_one(&store, "order", 20).await;
    assert_eq!(store.cancel(control(&doomed.id, 21)).await.expect("cancel"), CancelOutcome::Requested);
    let mut park = progress(&doomed, vec![]);
    park.update = RunUpdate::Park { error: "[CAIRN-E0101] drift".into() };
    store.append(park).await.expect("park");
    let row = store.get_run(&doomed.id).await.expect("get").expect("exists");
    let cancel = Some(Request::Cancel { reason: "operator".into() });
    assert_eq!((row.status, &row.pending), (RunStatus::Paused, &cancel), "the cancel still waits");
    store.resume(ResumeRequest { run_id: doomed.id.clone(), at: t(22) }).await.expect("resume");
    assert_eq!(claim_one(&store, "order", 23).await.pending, cancel, "for the worker that claims it next");
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

/// A run's journal end, last change and recoveries stay right through every way a run leaves
/// its worker without the worker's say: its steps' progress is read back while it runs; a claim
/// after its lease lapsed goes on from the journal's end (one recovery, not counted again after
/// progress) and fences the old holder; an operator's pause or cancel of a run whose lease lapsed
/// keeps the end (the cancel's entry follows it). The journal is whole and in order at the end.
pub async fn a_run_taken_from_its_worker_keeps_its_journal_end(store: DynStore) {
    let get = |id: RunId| {
        let store = Arc::clone(&store);
        async move { store.get_run(&id).await.expect("get").expect("exists") }
    };
    let step_at = |run: &RunRecord, name: &str, at: i64| {
        let mut append = progress(run, vec![step(name, 0)]);
        append.at = t(at);
        append
    };
    store.create_run(new_run("taken", "order", None, 1)).await.expect("create");
    let first = claim_one(&store, "order", 10).await;
    store.append(step_at(&first, "a", 20)).await.expect("a");
    let mut read = get(first.id.clone()).await;
    assert_eq!((read.last_seq, read.updated_at, read.epoch), (first.last_seq + 1, t(20), first.epoch));
    store.append(step_at(&read, "b", 30)).await.expect("b");
    read = get(first.id.clone()).await;
    assert_eq!((read.last_seq, read.updated_at, read.recoveries), (first.last_seq + 2, t(30), 0));

    // The lease (until 1_010) lapses: the next claim goes on from the journal's end.
    let second = claim_one(&store, "order", 2_000).await;
    assert_eq!((second.last_seq, second.recoveries, second.epoch), (first.last_seq + 2, 1, first.epoch + 1));
    assert_eq!(get(first.id.clone()).await.last_seq, second.last_seq);
    let stale = store.append(step_at(&read, "c", 2_001)).await.expect_err("the old holder is fenced");
    assert!(matches!(stale, StoreError::Fenced { .. }), "{stale:?}");
    store.append(step_at(&second, "c", 2_010)).await.expect("c");
    // It lapses again after progress: one recovery again, not two.
    let third = claim_one(&store, "order", 4_000).await;
    assert_eq!((third.last_seq, third.recoveries), (second.last_seq + 1, 1));
    // And once more without progress: two.
    let fourth = claim_one(&store, "order", 6_000).await;
    assert_eq!((fourth.last_seq, fourth.recoveries), (third.last_seq, 2));
    store.append(step_at(&fourth, "d", 6_001)).await.expect("d");

    // An operator pauses it after its lease lapsed: the row keeps the journal's end.
    assert_eq!(store.pause(control(&first.id, 9_000)).await.expect("pause"), PauseOutcome::Paused);
    let paused = get(first.id.clone()).await;
    assert_eq!((paused.status, paused.last_seq, paused.recoveries), (RunStatus::Paused, fourth.last_seq + 1, 0));
    let fenced = store.append(step_at(&fourth, "e", 9_001)).await.expect_err("the pause fenced the holder");
    assert!(matches!(fenced, StoreError::Fenced { .. }), "{fenced:?}");
    store.resume(ResumeRequest { run_id: first.id.clone(), at: t(9_002) }).await.expect("resume");
    let fifth = claim_one(&store, "order", 9_003).await;
    assert_eq!((fifth.last_seq, fifth.recoveries), (paused.last_seq, 0));
    store.append(step_at(&fifth, "e", 9_004)).await.expect("e");

    // Its lease lapses and an operator cancels it: the cancel's entry follows the last step.
    assert_eq!(store.cancel(control(&first.id, 20_000)).await.expect("cancel"), CancelOutcome::Cancelled);
    let cancelled = get(first.id.clone()).await;
    assert_eq!((cancelled.status, cancelled.last_seq), (RunStatus::Cancelled, fifth.last_seq + 2));
    assert!(store.claim(&claim_req("w1", "order", 30_000)).await.expect("claim").is_empty());
    let journal = store.read_journal(&first.id).await.expect("journal");
    let seqs: Vec<u64> = journal.iter().map(|entry| entry.seq).collect();
    assert_eq!(seqs, (1..=cancelled.last_seq).collect::<Vec<u64>>(), "the journal is whole and in order");
    assert!(matches!(&journal.last().expect("entry").event, Event::Cancelled { .. }));
}
