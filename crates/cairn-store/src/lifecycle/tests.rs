#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use super::*;
use crate::types::{Debounce, RunId};

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

fn new_run(id: &str) -> NewRun {
    NewRun::new(RunId::new(id), crate::WorkflowName::new("w").expect("a valid name"), 1, raw(r#"{"k":"a"}"#), t(0))
}

fn pending() -> RunRecord {
    create(&new_run("r"), None, 0)
}

fn running() -> RunRecord {
    let mut run = pending();
    claim(&mut run, "w1", t(1_000), t(10));
    run
}

fn suspend(reason: SuspendReason, wake_at: Option<i64>) -> RunUpdate {
    RunUpdate::Suspend { reason, wake_at: wake_at.map(t), signals_after: None, now: t(20) }
}

fn rule(hold: bool) -> ConcurrencyRule {
    let rule = ConcurrencyRule::per_key("w", "/k", 1);
    if hold { rule.hold_suspended() } else { rule }
}

#[test]
fn create_is_pending_and_ready_without_a_rule() {
    let run = create(&new_run("r"), None, 7);
    assert_eq!(
        (run.status, run.fair_seq, run.waiting_for, run.concurrency.clone()),
        (RunStatus::Pending, 7, None, None)
    );
    assert_eq!(due_at(&run, t(0), t(0)), Some(t(0)));
    assert_eq!(slot_state(&run), None);
}

#[test]
fn create_under_a_rule_waits_for_a_slot_and_admit_gives_it_one() {
    let mut run = create(&new_run("r"), Some(&rule(true)), 0);
    assert_eq!(run.waiting_for, Some(WaitingFor::Concurrency));
    assert_eq!(run.concurrency, Some(RunConcurrency { key: "a".into(), hold_suspended: true }));
    assert_eq!((slot_state(&run), due_at(&run, t(0), t(0))), (Some((false, true)), None));
    admit(&mut run);
    assert_eq!((slot_state(&run), due_at(&run, t(0), t(0))), (Some((true, false)), Some(t(0))));
}

#[test]
fn a_debounced_start_suspends_and_holds_no_slot_until_its_window_closes() {
    let mut new = new_run("r");
    new.debounce = Some(Debounce::new("d", Duration::from_millis(100)).max_wait(Duration::from_millis(250)));
    let mut run = create(&new, Some(&rule(true)), 0);
    assert!(run.is_debouncing());
    assert_eq!((run.wake_at, run.rare().debounce_until, run.waiting_for), (Some(t(100)), Some(t(250)), None));
    assert!(!holds_a_slot(&run), "a debouncing run holds no slot");
    assert!(join_debounce(&mut run, &raw("2"), t(200), Duration::from_millis(100)));
    assert_eq!((run.input.get(), run.wake_at, run.updated_at), ("2", Some(t(250)), t(200)), "capped by max wait");
    assert!(requeues(&run));
    requeue(&mut run, true, t(250));
    assert_eq!((run.status, run.waiting_for, run.wake_at), (RunStatus::Pending, Some(WaitingFor::Concurrency), None));
    assert!(run.concurrency.as_ref().unwrap().hold_suspended, "its window closed: the rule's hold applies");
    assert!(!join_debounce(&mut run, &raw("3"), t(300), Duration::from_millis(100)), "it began: no joining");
    assert_eq!(run.input.get(), "2");
}

#[test]
fn claim_leases_and_fences_and_a_reclaim_counts_a_recovery() {
    let mut run = running();
    assert_eq!((run.status, run.epoch, run.recoveries), (RunStatus::Running, 1, 0));
    assert_eq!((run.lease_owner.as_deref(), run.lease_expires_at, run.updated_at), (Some("w1"), Some(t(1_000)), t(10)));
    assert_eq!(due_at(&run, t(999), t(999)), None);
    assert_eq!(due_at(&run, t(1_000), t(1_000)), Some(t(1_000)), "its lease expired");
    claim(&mut run, "w2", t(3_000), t(1_500));
    assert_eq!((run.epoch, run.recoveries, run.lease_owner.as_deref()), (2, 1, Some("w2")));
    progress(&mut run, 4, t(1_600));
    assert_eq!((run.last_seq, run.updated_at, run.recoveries), (4, t(1_600), 0));
}

#[test]
fn an_append_is_fenced_by_a_moved_epoch_before_its_sequence_is_checked() {
    let run = running();
    assert!(check_append(&run, 1, 1).is_ok());
    assert!(matches!(check_append(&run, 0, 7), Err(StoreError::Fenced { held: 0, current: 1, .. })));
    assert!(matches!(check_append(&run, 1, 0), Err(StoreError::SequenceConflict { expected: 0, actual: 1, .. })));
}

#[test]
fn suspend_holds_until_wake_at_or_wakes_at_once_when_flagged() {
    let mut run = running();
    apply(&mut run, suspend(SuspendReason::Sleeping, Some(500)), false);
    assert_eq!(
        (run.status, run.suspend_reason, run.wake_at),
        (RunStatus::Suspended, Some(SuspendReason::Sleeping), Some(t(500)))
    );
    assert_eq!((run.lease_owner.as_deref(), run.lease_expires_at), (None, None));
    assert_eq!((due_at(&run, t(499), t(0)), due_at(&run, t(500), t(0))), (None, Some(t(500))));
    let mut woken = running();
    apply(&mut woken, suspend(SuspendReason::Waiting, None), true);
    assert_eq!(woken.wake_at, Some(t(20)), "a buffered signal wakes it at once");
    let mut flagged = running();
    flagged.pending = Some(Request::Pause { reason: "op".into() });
    apply(&mut flagged, suspend(SuspendReason::Sleeping, Some(500)), false);
    assert_eq!(flagged.wake_at, Some(t(20)), "a requested pause wakes it at once");
}

#[test]
fn progress_leaves_the_lease_and_release_gives_it_back() {
    let mut run = running();
    apply(&mut run, RunUpdate::Progress, false);
    assert_eq!((run.status, run.lease_owner.as_deref()), (RunStatus::Running, Some("w1")));
    apply(&mut run, RunUpdate::Release, false);
    assert_eq!((run.status, run.lease_owner, run.lease_expires_at), (RunStatus::Pending, None, None));
}

#[test]
fn finish_and_continue_end_the_run_with_its_retention() {
    let mut run = running();
    run.retention = Some(Duration::from_millis(50));
    run.waiting_for = Some(WaitingFor::Concurrency);
    let finish = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("9")), error: None, at: t(100) };
    apply(&mut run, finish, false);
    assert_eq!((run.status, run.completed_at, run.delete_after), (RunStatus::Completed, Some(t(100)), Some(t(150))));
    assert_eq!((run.output.as_ref().map(|o| o.get()), run.waiting_for), (Some("9"), None));
    let mut continued = running();
    let successor = Box::new(new_run("next"));
    apply(&mut continued, RunUpdate::Continue { successor, at: t(100) }, false);
    assert_eq!(
        (continued.status, continued.rare().continued_as.clone()),
        (RunStatus::Continued, Some(RunId::new("next")))
    );
    assert_eq!(continued.delete_after, None, "no retention: kept");
}

#[test]
fn park_pauses_with_the_error_and_clears_a_pause_request_but_not_a_cancel() {
    let mut run = running();
    run.pending = Some(Request::Pause { reason: "op".into() });
    apply(&mut run, RunUpdate::Park { error: "nondeterminism".into() }, false);
    assert_eq!((run.status, run.error.as_deref(), run.pending), (RunStatus::Paused, Some("nondeterminism"), None));
    let mut cancelled = running();
    let cancel = Some(Request::Cancel { reason: "wrong customer".into() });
    cancelled.pending = cancel.clone();
    apply(&mut cancelled, RunUpdate::Park { error: "nondeterminism".into() }, false);
    assert_eq!(cancelled.pending, cancel, "the cancel waits for the worker that claims it once resumed");
    resume(&mut cancelled, t(30)).unwrap();
    assert_eq!(cancelled.pending, cancel);
}

#[test]
fn heartbeat_extends_only_the_current_holders_lease() {
    let mut run = running();
    run.pending = Some(Request::Cancel { reason: "op".into() });
    let status = heartbeat(&mut run, "w1", 1, t(2_000));
    assert!(status.held && status.pending == run.pending);
    assert_eq!(run.lease_expires_at, Some(t(2_000)));
    assert!(!heartbeat(&mut run, "w1", 0, t(3_000)).held, "a stale epoch");
    assert!(!heartbeat(&mut run, "w2", 1, t(3_000)).held, "another owner");
    assert_eq!(run.lease_expires_at, Some(t(2_000)));
}

#[test]
fn a_signal_wakes_a_waiting_run_and_is_refused_once_it_ended() {
    let mut run = running();
    apply(&mut run, suspend(SuspendReason::Waiting, Some(900)), false);
    signal(&mut run, t(300)).unwrap();
    assert_eq!(run.wake_at, Some(t(300)));
    signal(&mut run, t(400)).unwrap();
    assert_eq!(run.wake_at, Some(t(300)), "the earliest wake-up stands");
    let mut sleeping = running();
    apply(&mut sleeping, suspend(SuspendReason::Sleeping, Some(900)), false);
    signal(&mut sleeping, t(300)).unwrap();
    assert_eq!(sleeping.wake_at, Some(t(900)), "a sleep is not cut short");
    let finish = RunUpdate::Finish { status: RunStatus::Failed, output: None, error: Some("x".into()), at: t(1) };
    apply(&mut run, finish, false);
    assert!(matches!(signal(&mut run, t(500)), Err(StoreError::RunFinished { status: RunStatus::Failed, .. })));
}

#[test]
fn cancel_waits_for_a_live_holder_and_ends_anyone_elses_run() {
    let mut held = running();
    assert_eq!(cancel(&mut held, "op", t(500), t(500)).unwrap(), CancelOutcome::Requested);
    assert_eq!((held.epoch, held.status, held.error.as_deref()), (1, RunStatus::Running, None));
    assert_eq!(held.pending, Some(Request::Cancel { reason: "op".into() }));
    assert_eq!(pause(&mut held, "later", t(501), t(501), false).unwrap(), PauseOutcome::Requested);
    assert_eq!(held.pending, Some(Request::Cancel { reason: "op".into() }), "a cancel outranks a pause");
    cancel(&mut held, "again", t(502), t(502)).unwrap();
    assert_eq!(held.pending, Some(Request::Cancel { reason: "again".into() }), "the newest cancel's reason");
    end(&mut held, RunStatus::Cancelled, t(503));
    assert_eq!(held.pending, None, "nothing waits for an ended run");
    let mut lapsed = running();
    lapsed.recoveries = 2;
    lapsed.retention = Some(Duration::from_millis(10));
    assert_eq!(cancel(&mut lapsed, "op", t(1_000), t(1_000)).unwrap(), CancelOutcome::Cancelled, "its lease expired");
    assert_eq!((lapsed.status, lapsed.epoch, lapsed.last_seq), (RunStatus::Cancelled, 2, 2));
    assert_eq!(
        (lapsed.error.as_deref(), lapsed.completed_at, lapsed.delete_after),
        (Some("op"), Some(t(1_000)), Some(t(1_010)))
    );
    assert_eq!((lapsed.lease_owner.as_deref(), lapsed.recoveries), (None, 2), "a cancel is not progress");
    let mut ended = running();
    end(&mut ended, RunStatus::Completed, t(5));
    assert!(matches!(cancel(&mut ended, "op", t(6), t(6)), Err(StoreError::RunFinished { .. })));
    assert_eq!(ended.pending, None);
}

#[test]
fn pause_parks_an_unheld_run_and_resume_queues_it_again() {
    let mut held = running();
    assert_eq!(pause(&mut held, "op", t(30), t(30), false).unwrap(), PauseOutcome::Requested);
    assert_eq!((&held.pending, held.status), (&Some(Request::Pause { reason: "op".into() }), RunStatus::Running));
    pause(&mut held, "again", t(31), t(31), false).unwrap();
    assert_eq!(held.pending, Some(Request::Pause { reason: "op".into() }), "the first pause's reason stands");
    let mut run = create(&new_run("r"), Some(&rule(false)), 0);
    admit(&mut run);
    assert_eq!(pause(&mut run, "op", t(30), t(30), false).unwrap(), PauseOutcome::Paused);
    assert_eq!((run.status, run.epoch, run.error.as_deref()), (RunStatus::Paused, 1, Some("op")));
    assert!(!holds_a_slot(&run), "a paused run gives its slot up");
    assert_eq!(pause(&mut run, "again", t(40), t(40), false).unwrap(), PauseOutcome::Paused);
    assert_eq!(run.error.as_deref(), Some("op"), "pausing a paused run changes nothing");
    run.recoveries = 3;
    resume(&mut run, t(50)).unwrap();
    assert_eq!(
        (run.status, run.waiting_for, run.error.clone(), run.recoveries),
        (RunStatus::Pending, Some(WaitingFor::Concurrency), None, 0)
    );
    assert!(matches!(resume(&mut run, t(60)), Err(StoreError::NotPaused { status: RunStatus::Pending, .. })));
    end(&mut run, RunStatus::Cancelled, t(70));
    assert!(matches!(pause(&mut run, "op", t(80), t(80), false), Err(StoreError::RunFinished { .. })));
    assert!(matches!(resume(&mut run, t(80)), Err(StoreError::RunFinished { .. })));
}

#[test]
fn a_suspended_run_keeps_its_slot_only_under_a_holding_rule() {
    for hold in [false, true] {
        let mut run = create(&new_run("r"), Some(&rule(hold)), 0);
        admit(&mut run);
        claim(&mut run, "w1", t(1_000), t(10));
        assert!(holds_a_slot(&run));
        apply(&mut run, suspend(SuspendReason::Sleeping, Some(500)), false);
        assert_eq!(holds_a_slot(&run), hold);
        assert_eq!(requeues(&run), !hold);
    }
}
