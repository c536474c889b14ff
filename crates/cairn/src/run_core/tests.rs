//! The run core without a runtime: each decision from a journal and a request.

use super::*;
use cairn_journal::JournalEntry;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

fn p(s: &str) -> StepPath {
    StepPath::parse(s).unwrap()
}

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn started(deadline: Option<i64>) -> Event {
    Event::Started { workflow: "w".into(), version: 1, input: raw("null"), deadline: deadline.map(t), reason: None }
}

fn completed(path: &str, ordinal: u32) -> Event {
    Event::StepCompleted { path: p(path), ordinal, attempt: 1, output: raw("1"), started_at: None }
}

fn state(events: Vec<Event>) -> RunState {
    let entries: Vec<_> =
        events.into_iter().enumerate().map(|(i, e)| JournalEntry::new(i as u64 + 1, t(i as i64), e)).collect();
    RunState::fold(&entries).unwrap()
}

fn core(events: Vec<Event>, mode: Mode) -> RunCore {
    RunCore::new(state(events), mode, Limits { max_payload_bytes: 100, suspend_grace: Duration::from_secs(1) })
}

fn signal(id: i64, name: &str, payload: &str) -> SignalRecord {
    SignalRecord { id: SignalId(id), name: name.into(), payload: raw(payload), sent_at: t(0), consumed_seq: None }
}

#[test]
fn a_journaled_step_replays_its_record_and_a_new_one_executes() {
    let mut c = core(vec![started(None), completed("a", 0)], Mode::Live);
    let a = c.begin(&p("a"), StepKind::Step).unwrap();
    assert_eq!(a.ordinal, 0);
    assert!(a.record.is_some_and(|r| r.is_settled()));
    let b = c.begin(&p("b"), StepKind::Step).unwrap();
    assert_eq!((b.ordinal, b.record.is_none()), (1, true));
    assert_eq!(c.unreached().1, 1, "one journaled step replayed");
}

#[test]
fn asking_for_another_step_than_the_journal_holds_interrupts_the_run() {
    let mut c = core(vec![started(None), completed("a", 0)], Mode::Live);
    match c.begin(&p("b"), StepKind::Step) {
        Err(Refused::Interrupt(Interrupt::NonDeterminism(_))) => {}
        other => panic!("expected non-determinism, got {other:?}"),
    }
    // The same path twice is the body's own error; the run goes on.
    let mut c = core(vec![started(None)], Mode::Live);
    c.begin(&p("a"), StepKind::Step).unwrap();
    assert!(matches!(c.begin(&p("a"), StepKind::Step), Err(Refused::Error(WorkflowError::DuplicatePath(_)))));
}

#[test]
fn a_poisoned_run_replays_but_parks_at_its_first_new_step() {
    let mut c = core(vec![started(None), completed("a", 0)], Mode::Poisoned(11));
    assert!(c.begin(&p("a"), StepKind::Step).is_ok());
    match c.begin(&p("b"), StepKind::Step) {
        Err(Refused::Interrupt(Interrupt::Poisoned { path: Some(path), recoveries: 11 })) => assert_eq!(path, p("b")),
        other => panic!("expected poison, got {other:?}"),
    }
    c.interrupt(Interrupt::Poisoned { path: Some(p("b")), recoveries: 11 });
    assert!(matches!(
        c.record(Outcome::Interrupted, t(5)),
        Some(Ending::Record(events, RunUpdate::Park { .. })) if events.is_empty()
    ));
}

#[test]
fn a_replay_check_stops_where_the_journal_ends() {
    let mut c = core(vec![started(None), completed("a", 0)], Mode::ReplayCheck);
    assert!(c.begin(&p("a"), StepKind::Step).is_ok());
    assert!(matches!(
        c.begin(&p("b"), StepKind::Step),
        Err(Refused::Interrupt(Interrupt::ReplayChecked { path })) if path == p("b")
    ));
}

#[test]
fn an_interrupt_that_stops_at_once_overrides_one_that_waits_for_a_boundary() {
    let mut c = core(vec![started(None)], Mode::Live);
    assert!(c.interrupt(Interrupt::Paused), "a pause waits for a step boundary");
    assert!(!c.interrupt(Interrupt::Cancelled));
    assert_eq!(c.interruption(), Some(&Interrupt::Cancelled));
    // The first reason that stops at once wins.
    c.interrupt(Interrupt::TimedOut);
    assert_eq!(c.interruption(), Some(&Interrupt::Cancelled));
    assert!(matches!(c.admit(), Err(WorkflowError::Interrupted(Interrupt::Cancelled))));
    assert!(c.stops_appends());
}

#[test]
fn a_pause_lets_steps_in_flight_finish_before_the_driver_stops_the_body() {
    let mut c = core(vec![started(None)], Mode::Live);
    assert_eq!(c.stops_now(), None);
    c.start_work();
    c.interrupt(Interrupt::Paused);
    assert_eq!(c.stops_now(), Some(false), "a step is in flight");
    assert!(!c.stops_appends(), "the finished step is committed");
    assert!(c.end_work(), "the last step ending is worth a look");
    assert_eq!(c.stops_now(), Some(true));
}

#[test]
fn appends_follow_the_journal_and_carry_a_deferred_checkpoint_first() {
    let mut c = core(vec![started(None), completed("a", 0)], Mode::Live);
    let id = RunId::new("r");
    let checkpoint =
        |next| Event::LoopCheckpoint { path: p("loop"), next, state: raw("null"), vars: BTreeMap::new(), trim: None };
    c.defer_checkpoint(checkpoint(1)).unwrap();
    // A later checkpoint of the same loop replaces the one still waiting.
    c.defer_checkpoint(checkpoint(2)).unwrap();
    let first = c.prepare_append((&id, 7), vec![completed("b", 1)], RunUpdate::Progress, None, t(9), false);
    assert_eq!((first.after_seq, first.epoch, first.events.len()), (2, 7, 2));
    assert!(matches!(first.events[0], Event::LoopCheckpoint { next: 2, .. }));
    let second = c.prepare_append((&id, 7), vec![completed("c", 2)], RunUpdate::Progress, None, t(9), false);
    assert_eq!((second.after_seq, second.events.len()), (4, 1));
}

#[test]
fn durable_values_and_patches_are_journaled_only_past_the_journal() {
    let patched = Event::Patched { id: "fix".into(), applied: false };
    let mut c = core(vec![started(None), patched, completed("a", 0)], Mode::Live);
    // Replaying: the journaled decision, nothing to journal.
    assert!(matches!(c.patched("fix"), Ok((false, None))));
    assert!(matches!(c.set_var("n", raw("1")), Ok(None)), "still replaying");
    assert_eq!(c.live_position(), None);
    c.begin(&p("a"), StepKind::Step).unwrap();
    assert_eq!(c.live_position(), Some(3));
    assert!(matches!(c.set_var("n", raw("2")), Ok(Some(Event::VarSet { .. }))));
    assert_eq!(c.var("n").map(RawValue::get), Some("2"));
    assert!(matches!(c.patched("new"), Ok((true, Some(Event::Patched { applied: true, .. })))));
}

#[test]
fn a_run_suspends_only_when_nothing_runs_and_a_wake_up_lies_beyond_the_grace() {
    let mut c = core(vec![started(Some(60_000))], Mode::Live);
    assert!(c.suspension_plan(t(0)).is_none(), "nothing parked");
    let soon = c.park(SuspendReason::Sleeping, Some(t(500)), false);
    assert!(c.suspension_plan(t(0)).is_none(), "within the grace period");
    let late = c.park(SuspendReason::Sleeping, Some(t(90_000)), false);
    c.start_work();
    assert!(c.suspension_plan(t(0)).is_none(), "a step is in flight");
    c.end_work();
    match c.suspension_plan(t(0)) {
        Some(RunUpdate::Suspend { wake_at, signals_after: None, .. }) => {
            assert_eq!(wake_at, Some(t(500)), "the earliest wake-up");
        }
        other => panic!("expected a suspension, got {other:?}"),
    }
    c.unpark(soon);
    c.unpark(late);
    c.park(SuspendReason::Waiting, None, true);
    match c.suspension_plan(t(0)) {
        Some(RunUpdate::Suspend { wake_at, signals_after: Some(_), .. }) => {
            assert_eq!(wake_at, Some(t(60_000)), "a wait without a timeout wakes at the deadline");
        }
        other => panic!("expected a suspension, got {other:?}"),
    }
}

#[test]
fn a_wait_takes_the_oldest_matching_signal_once() {
    let mut c = core(vec![started(None)], Mode::Live);
    assert!(c.take_signal("go", None).is_none(), "not loaded yet");
    let mut consumed = signal(1, "go", "{}");
    consumed.consumed_seq = Some(9);
    c.load_signals(vec![consumed, signal(2, "go", r#"{"n":1}"#), signal(3, "go", r#"{"n":2}"#)]);
    let filter = serde_json::json!({ "n": 2 });
    assert_eq!(c.take_signal("go", Some(&filter)).map(|s| s.id), Some(SignalId(3)));
    assert_eq!(c.take_signal("go", None).map(|s| s.id), Some(SignalId(2)));
    assert!(c.take_signal("go", None).is_none());
    // Reloading keeps out what this execution took; a delivery adds one.
    c.load_signals(vec![signal(2, "go", "{}"), signal(3, "go", "{}")]);
    assert!(c.take_signal("go", None).is_none());
    c.deliver(signal(4, "go", "{}"));
    assert_eq!(c.take_signal("go", None).map(|s| s.id), Some(SignalId(4)));
}

#[test]
fn how_an_execution_ends_is_recorded_by_its_outcome_and_interrupt() {
    let ok = || Outcome::Returned(Ok(raw("7")));
    let mut c = core(vec![started(None)], Mode::Live);
    assert!(matches!(
        c.record(ok(), t(1)),
        Some(Ending::Record(_, RunUpdate::Finish { status: RunStatus::Completed, .. }))
    ));
    assert!(matches!(
        c.record(Outcome::Returned(Err(WorkflowError::failed("no"))), t(1)),
        Some(Ending::Record(_, RunUpdate::Finish { status: RunStatus::Failed, .. }))
    ));
    assert!(
        matches!(c.record(Outcome::Panicked("boom".into()), t(1)), Some(Ending::Record(_, RunUpdate::Park { error })) if error.contains("E0108"))
    );
    assert!(
        matches!(
            c.record(Outcome::Returned(Ok(raw(&format!("\"{}\"", "x".repeat(200))))), t(1)),
            Some(Ending::Record(_, RunUpdate::Finish { status: RunStatus::Failed, .. }))
        ),
        "an output over the payload limit fails the run"
    );
    assert!(matches!(
        c.record(Outcome::Returned(Err(WorkflowError::ContinueAsNew { input: "1".into() })), t(1)),
        Some(Ending::ContinueAsNew(input)) if input == "1"
    ));
    // A pause the body finished before reaching a boundary: it completed.
    c.interrupt(Interrupt::Paused);
    assert!(matches!(
        c.record(ok(), t(1)),
        Some(Ending::Record(_, RunUpdate::Finish { status: RunStatus::Completed, .. }))
    ));
    // Refused a verb: it is parked by request, whatever it returned.
    let _ = c.admit();
    assert!(
        matches!(c.record(ok(), t(1)), Some(Ending::Record(_, RunUpdate::Park { error })) if error == PAUSED_BY_REQUEST)
    );
    let mut c = core(vec![started(None)], Mode::Live);
    c.interrupt(Interrupt::ShuttingDown);
    let _ = c.admit();
    assert!(matches!(c.record(Outcome::Interrupted, t(1)), Some(Ending::Record(_, RunUpdate::Release))));
    c.interrupt(Interrupt::Cancelled);
    assert!(matches!(
        c.record(Outcome::Interrupted, t(1)),
        Some(Ending::Record(_, RunUpdate::Finish { status: RunStatus::Cancelled, .. }))
    ));
    let mut c = core(vec![started(None)], Mode::Live);
    c.interrupt(Interrupt::LeaseLost);
    assert!(c.record(Outcome::Interrupted, t(1)).is_none(), "a worker that lost the lease writes nothing");
}

#[test]
fn a_body_that_returns_before_reaching_journaled_steps_is_parked() {
    let c = core(vec![started(None), completed("a", 0)], Mode::Live);
    assert!(matches!(c.record(Outcome::Returned(Ok(raw("1"))), t(1)), Some(Ending::Record(_, RunUpdate::Park { .. }))));
}

#[test]
fn helpers_are_numbered_per_scope_and_kind() {
    let mut c = core(vec![started(None)], Mode::Live);
    assert_eq!(c.next_helper(&p("a"), "now"), 0);
    assert_eq!(c.next_helper(&p("a"), "now"), 1);
    assert_eq!(c.next_helper(&p("b"), "now"), 0);
    assert_eq!(c.next_helper(&p("a"), "uuid"), 0);
}

#[test]
fn the_payload_limit_holds_for_encoded_values() {
    assert!(encode("x", &"short", 100).is_ok());
    assert!(matches!(
        encode("x", &"y".repeat(200), 100),
        Err(WorkflowError::PayloadTooLarge { size: 202, limit: 100, .. })
    ));
}

#[test]
fn a_run_knows_its_place_among_runs_from_its_journal_and_lineage() {
    let c = core(vec![started(Some(9_000))], Mode::Live);
    let lineage = Lineage { parent: Some(RunId::new("order-1")), continues: true, ..Lineage::default() };
    let info = c.info(&RunId::new("p:~child[0]~3"), &lineage);
    assert_eq!((info.workflow.as_str(), info.version, info.deadline, info.generation), ("w", 1, Some(t(9_000)), 3));
    assert_eq!(
        (info.first_of_chain.as_str(), info.parent.as_ref().map(RunId::as_str)),
        ("p:~child[0]", Some("order-1"))
    );
    // A run that continues nothing is the first of its chain, whatever its id looks like.
    let first = c.info(&RunId::new("job~3"), &Lineage::default());
    assert_eq!((first.first_of_chain.as_str(), first.generation), ("job~3", 0));
}

/// The id a suspension plan tells the store it may skip signals up to (`None`: no wait).
fn signals_after(c: &RunCore) -> Option<SignalId> {
    match c.suspension_plan(t(0)) {
        Some(RunUpdate::Suspend { signals_after, .. }) => signals_after,
        other => panic!("expected a suspension, got {other:?}"),
    }
}

#[test]
fn a_signal_delivered_after_the_wait_looked_is_not_counted_as_seen() {
    // The wait looked (nothing loaded), parked, then a signal arrived in this process before the
    // body could look again: the suspension must leave it to the store to wake the run.
    let mut c = core(vec![started(None)], Mode::Live);
    c.load_signals(vec![signal(1, "other", "{}")]);
    assert!(c.take_signal("approve", None).is_none());
    c.park(SuspendReason::Waiting, Some(t(3_600_000)), true);
    c.deliver(signal(2, "approve", "{}"));
    assert_eq!(signals_after(&c), Some(SignalId(1)), "only what the wait looked at is seen");
    // A delivery while the first load is in flight (nothing loaded yet) is not seen either.
    let mut c = core(vec![started(None)], Mode::Live);
    c.deliver(signal(4, "approve", "{}"));
    c.load_signals(Vec::new());
    assert!(c.take_signal("approve", None).is_none());
    c.park(SuspendReason::Waiting, Some(t(3_600_000)), true);
    assert_eq!(signals_after(&c), Some(SignalId(0)));
}

#[test]
fn a_signal_another_wait_loaded_is_not_seen_by_a_wait_parked_before() {
    let mut c = core(vec![started(None)], Mode::Live);
    c.load_signals(Vec::new());
    assert!(c.take_signal("b", None).is_none());
    c.park(SuspendReason::Waiting, Some(t(3_600_000)), true);
    // Wait `a` reads the store again and finds its own signal and one for `b`, which `b` has not
    // looked at yet.
    c.load_signals(vec![signal(6, "b", "{}"), signal(7, "a", "{}")]);
    assert_eq!(c.take_signal("a", None).map(|s| s.id), Some(SignalId(7)));
    assert_eq!(signals_after(&c), Some(SignalId(0)), "the wait parked first saw nothing");
}

#[test]
fn a_signal_taken_is_not_delivered_again() {
    let mut c = core(vec![started(None)], Mode::Live);
    c.load_signals(vec![signal(2, "go", "{}")]);
    assert_eq!(c.take_signal("go", None).map(|s| s.id), Some(SignalId(2)));
    // The sender's own delivery arrives after the wait found the signal in the store.
    c.deliver(signal(2, "go", "{}"));
    assert!(c.take_signal("go", None).is_none(), "one signal is consumed once");
}

#[test]
fn an_attempt_retries_at_the_same_time_on_replay_and_fails_for_good_when_none_is_left() {
    use crate::error::StepError;
    let (run, path) = (RunId::new("r"), StepPath::parse("charge").unwrap());
    let policy = cairn_journal::RetryPolicy::exponential().attempts(2).base(Duration::from_millis(100));
    let down = StepError::retryable("down");
    let now = Timestamp::from_millis(1_000);
    let first = end_attempt(&run, &path, 1, Err(&down), &policy, now);
    let AttemptEnd::RetryAt(at) = first else { panic!("{first:?}") };
    assert!(at > now);
    // The jitter is seeded by the run, the step and the attempt: a replay decides the same.
    assert_eq!(end_attempt(&run, &path, 1, Err(&down), &policy, now), first);
    assert_eq!(end_attempt(&run, &path, 2, Err(&down), &policy, now), AttemptEnd::Failed);
    assert_eq!(end_attempt(&run, &path, 1, Err(&StepError::terminal("no")), &policy, now), AttemptEnd::Failed);
    assert_eq!(end_attempt(&run, &path, 2, Ok(()), &policy, now), AttemptEnd::Completed);
}

#[test]
fn a_requested_cancel_or_pause_ends_the_run_with_its_reason() {
    // How the run ends: its status, its error, and the reasons its journaled events give.
    let ended = |c: &RunCore| {
        let reasons = |events: Vec<Event>| -> Vec<String> {
            events.into_iter().map(|e| if let Event::Cancelled { reason } = e { reason } else { "?".into() }).collect()
        };
        match c.record(Outcome::Interrupted, t(1)) {
            Some(Ending::Record(events, RunUpdate::Finish { status, error, .. })) => (status, error, reasons(events)),
            Some(Ending::Record(events, RunUpdate::Park { error })) => {
                (RunStatus::Paused, Some(error), reasons(events))
            }
            _ => (RunStatus::Running, None, vec![]),
        }
    };
    let pause = |reason: &str| Request::Pause { reason: reason.into() };
    let cancel = |reason: &str| Request::Cancel { reason: reason.into() };
    let mut c = core(vec![started(None)], Mode::Live);
    assert_eq!(c.request(&pause("deploy freeze")), Interrupt::Paused);
    c.interrupt(Interrupt::Paused);
    c.request(&pause("later"));
    assert_eq!(ended(&c), (RunStatus::Paused, Some("deploy freeze".into()), vec![]), "the first pause's reason");
    let why = c.request(&cancel("wrong customer"));
    c.interrupt(why);
    let reason = Some("wrong customer".to_owned());
    let journaled = vec!["wrong customer".to_owned()];
    assert_eq!(ended(&c), (RunStatus::Cancelled, reason.clone(), journaled.clone()), "a cancel outranks a pause");
    c.request(&pause("too late"));
    assert_eq!(ended(&c), (RunStatus::Cancelled, reason, journaled), "and a pause cannot undo it");
    c.request(&cancel("superseded"));
    assert_eq!(ended(&c).1.as_deref(), Some("superseded"), "a later cancel's reason");
    let mut c = core(vec![started(None)], Mode::Live);
    c.request(&pause("deploy freeze"));
    c.interrupt(Interrupt::Cancelled);
    assert_eq!(ended(&c).1.as_deref(), Some(CANCELLED_BY_REQUEST), "a cancel never ends with a pause's reason");
}
