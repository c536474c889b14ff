//! The run lifecycle, defined once: every change of a run's summary row as a pure function.
//!
//! Each function takes a [`RunRecord`] and what the caller asked, and changes the row the way
//! every backend must: no IO, no clock (times come in as arguments), no other run. What spans
//! runs (which runs a claim takes, which waiting runs a freed slot admits, the indexes that find
//! them) is the store's; what happens to one row is here.
//!
//! The [`MemoryStore`](crate::memory::MemoryStore) is built on these functions. SQLite and PostgreSQL
//! say the same in SQL, and the model-based test in `cairn-store-conformance` (`model.rs`)
//! checks every backend against a naive store built on them, after every operation of random
//! sequences.
//!
//! ```
//! use cairn_journal::Timestamp;
//! use cairn_store::{NewRun, RunId, RunStatus, lifecycle};
//! use serde_json::value::RawValue;
//! let t = Timestamp::from_millis;
//! let input = RawValue::from_string("1".into()).unwrap();
//! let mut run = lifecycle::create(&NewRun::new(RunId::new("r"), cairn_store::WorkflowName::new("w").expect("a valid name"), 1, input, t(0)), None, 0);
//! assert_eq!(run.status, RunStatus::Pending);
//! lifecycle::claim(&mut run, "worker-1", t(30_000), t(10));
//! assert_eq!((run.status, run.epoch), (RunStatus::Running, 1));
//! assert!(run.is_held_at(t(20)));
//! ```

use crate::types::{
    CancelOutcome, ConcurrencyRule, LeaseStatus, NewRun, PauseOutcome, Request, RunConcurrency, RunRecord, RunStatus,
    RunUpdate, StoreError, SuspendReason,
};
use cairn_journal::Timestamp;
use cairn_journal::flow::WaitingFor;
use cairn_journal::flow::{debounce_wake, holds_slot};
use serde_json::value::RawValue;
use std::time::Duration;

/// The row of a run just created from `new`: [`RunRecord::of`], at fairness sequence `fair_seq`
/// ([`cairn_journal::flow::fair_seq`], which the store computes from its other ready runs), and
/// placed under its workflow's concurrency `rule` if it has one. A run under a rule waits for a
/// slot ([`WaitingFor::Concurrency`]; the store then admits it if its group has room), except a
/// debouncing one, which holds no slot and waits for none until its window closes
/// ([`requeue`]).
pub fn create(new: &NewRun, rule: Option<&ConcurrencyRule>, fair_seq: i64) -> RunRecord {
    let mut run = RunRecord::of(new);
    run.fair_seq = fair_seq;
    if let Some(rule) = rule {
        let mut place = RunConcurrency::of(rule, &new.input);
        if run.is_debouncing() {
            place.hold_suspended = false;
        } else {
            run.waiting_for = Some(WaitingFor::Concurrency);
        }
        run.concurrency = Some(place);
    }
    run
}

/// A later start with the same debounce key joins `open`, the run debouncing under it: `open`
/// takes the start's `input` and wakes `quiet` after `now`, capped by its window's maximum wait.
/// Returns `false`, changing nothing, if `open` has begun (or was cancelled or paused) since.
pub fn join_debounce(open: &mut RunRecord, input: &RawValue, now: Timestamp, quiet: Duration) -> bool {
    if !open.is_debouncing() {
        return false;
    }
    open.input = input.to_owned();
    open.updated_at = now;
    open.wake_at = Some(debounce_wake(now, quiet, open.rare().debounce_until));
    true
}

/// Where a run stands in its concurrency group: `(holds a slot, waits for one)`; `None` for a
/// run in no group.
pub fn slot_state(run: &RunRecord) -> Option<(bool, bool)> {
    let place = run.concurrency.as_ref()?;
    let waiting = run.waiting_for.is_some();
    Some((holds_slot(run.status.as_str(), waiting, place.hold_suspended), waiting))
}

/// Whether `run` holds a slot of its concurrency group.
pub fn holds_a_slot(run: &RunRecord) -> bool {
    slot_state(run).is_some_and(|(holds, _)| holds)
}

/// When `run` may be claimed, if it may be now: a ready pending run since its creation, a
/// suspended run once its `wake_at` is not after `now`, a running run once its lease has
/// expired by `lease_now` (its worker died or stalled).
pub fn due_at(run: &RunRecord, now: Timestamp, lease_now: Timestamp) -> Option<Timestamp> {
    match run.status {
        RunStatus::Pending if run.waiting_for.is_none() => Some(run.created_at),
        RunStatus::Suspended => run.wake_at.filter(|at| *at <= now),
        RunStatus::Running => run.lease_expires_at.filter(|at| *at <= lease_now),
        _ => None,
    }
}

/// A worker (`owner`) claims `run` at `now` under a lease until `lease_until`. The epoch moves
/// on, which fences any earlier holder; a run taken over from an expired lease counts one more
/// recovery.
pub fn claim(run: &mut RunRecord, owner: &str, lease_until: Timestamp, now: Timestamp) {
    if run.status == RunStatus::Running {
        run.recoveries += 1;
    }
    run.status = RunStatus::Running;
    run.suspend_reason = None;
    run.wake_at = None;
    run.lease_owner = Some(owner.to_owned());
    run.lease_expires_at = Some(lease_until);
    run.epoch += 1;
    run.updated_at = now;
}

/// Whether `run`, suspended and due to wake, goes back to wait for a slot instead of being
/// claimed ([`requeue`]): it gave its slot up when it suspended (or it debounced, holding none).
pub fn requeues(run: &RunRecord) -> bool {
    run.status == RunStatus::Suspended && run.concurrency.as_ref().is_some_and(|c| !c.hold_suspended)
}

/// A woken run that gave its slot up waits for one again, pending, at `now`. A debouncing run's
/// window closes here: from now on it keeps its slot while suspended as its rule says (`hold`).
pub fn requeue(run: &mut RunRecord, hold: bool, now: Timestamp) {
    close_debounce_window(run, hold);
    run.status = RunStatus::Pending;
    run.waiting_for = Some(WaitingFor::Concurrency);
    run.suspend_reason = None;
    run.wake_at = None;
    run.updated_at = now;
}

/// Its group admits a run that waited for a slot: it holds one now, and may be claimed.
pub fn admit(run: &mut RunRecord) {
    run.waiting_for = None;
}

/// Whether an append by the holder of `epoch`, after the journal's entry `after_seq`, may change
/// `run`: refused as [`StoreError::Fenced`] if the run's epoch moved on (another worker claimed
/// it, or a cancel or pause fenced it) or it is not running (no one holds it: a run pruned and
/// created again under its id counts its epochs afresh, so a stale holder's epoch can match it),
/// else as [`StoreError::SequenceConflict`] if its journal does not end at `after_seq`.
pub fn check_append(run: &RunRecord, epoch: u64, after_seq: u64) -> Result<(), StoreError> {
    if run.epoch != epoch || run.status != RunStatus::Running {
        return Err(StoreError::Fenced { run_id: run.id.clone(), held: epoch, current: run.epoch });
    }
    if run.last_seq != after_seq {
        return Err(StoreError::SequenceConflict { run_id: run.id.clone(), expected: after_seq, actual: run.last_seq });
    }
    Ok(())
}

/// An append of journal events up to `last_seq` at `at`: the run made progress, so its count of
/// recoveries in a row starts again.
pub fn progress(run: &mut RunRecord, last_seq: u64, at: Timestamp) {
    (run.last_seq, run.updated_at, run.recoveries) = (last_seq, at, 0);
}

/// The row change an append carries (`update`), after its [`progress`]. Every update but
/// [`RunUpdate::Progress`] ends the appender's hold on the run. A suspension wakes at once
/// (`wake_now`: a signal it waits for is already buffered, or a cancel or pause was requested),
/// else at its `wake_at`.
pub fn apply(run: &mut RunRecord, update: RunUpdate, wake_now: bool) {
    if matches!(update, RunUpdate::Progress) {
        return;
    }
    run.lease_owner = None;
    run.lease_expires_at = None;
    run.suspend_reason = None;
    run.wake_at = None;
    match update {
        RunUpdate::Progress => {}
        RunUpdate::Suspend { reason, wake_at, now, .. } => {
            run.status = RunStatus::Suspended;
            run.suspend_reason = Some(reason);
            run.wake_at = if wake_now || run.pending.is_some() { Some(now) } else { wake_at };
        }
        RunUpdate::Finish { status, output, error, at } => {
            (run.output, run.error) = (output, error);
            end(run, status, at);
        }
        RunUpdate::Continue { successor, at } => {
            run.rare_mut().continued_as = Some(successor.id);
            run.error = None;
            end(run, RunStatus::Continued, at);
        }
        RunUpdate::Release => run.status = RunStatus::Pending,
        RunUpdate::Park { error } => {
            run.status = RunStatus::Paused;
            run.error = Some(error);
            // A cancel that waited stays for the worker that claims the run once it is resumed.
            if matches!(run.pending, Some(Request::Pause { .. })) {
                run.pending = None;
            }
        }
    }
}

/// Ends `run` with `status` at `at`: it leaves any queue, no request waits for it any more, and
/// it is kept for its retention from then.
pub fn end(run: &mut RunRecord, status: RunStatus, at: Timestamp) {
    run.status = status;
    run.pending = None;
    run.waiting_for = None;
    run.completed_at = Some(at);
    run.delete_after = run.retention.map(|keep| at + keep);
}

/// A debouncing run whose window closes (it wakes, or is paused) keeps its slot while suspended
/// from then on as its concurrency rule says (`hold`): it held none while it debounced.
pub fn close_debounce_window(run: &mut RunRecord, hold: bool) {
    if let (true, Some(place)) = (run.is_debouncing(), run.concurrency.as_mut()) {
        place.hold_suspended = hold;
    }
}

/// Worker `owner`, holding `run` at `epoch`, extends its lease to `lease_until`, and learns
/// whether it still holds the run and which cancel or pause waits for it.
pub fn heartbeat(run: &mut RunRecord, owner: &str, epoch: u64, lease_until: Timestamp) -> LeaseStatus {
    let held = run.epoch == epoch && run.status == RunStatus::Running && run.lease_owner.as_deref() == Some(owner);
    if held {
        run.lease_expires_at = Some(lease_until);
    }
    LeaseStatus { run_id: run.id.clone(), held, pending: run.pending.clone() }
}

/// A signal sent at `sent_at` reaches `run`: a run waiting for signals wakes by then. Refused
/// for a run that has ended.
pub fn signal(run: &mut RunRecord, sent_at: Timestamp) -> Result<(), StoreError> {
    decide(run, Operation::Signal, sent_at)?;
    if run.status == RunStatus::Suspended && run.suspend_reason == Some(SuspendReason::Waiting) {
        run.wake_at = Some(run.wake_at.map_or(sent_at, |w| w.min(sent_at)));
    }
    Ok(())
}

/// A cancel of `run` at `at` for `reason`. A run a live worker holds at `lease_now` keeps the
/// request ([`Request::Cancel`], in place of any pause or earlier cancel that waited) until that
/// worker ends it, journaling the reason ([`CancelOutcome::Requested`]). Any other ends now
/// ([`CancelOutcome::Cancelled`]): fenced (its epoch moves on), out of any queue, with
/// one more journal entry (the store writes the `cancelled` event at the new `last_seq`). Its
/// recoveries stay as they were: a cancel is not the run's progress. Refused for a run that
/// has ended.
pub fn cancel(
    run: &mut RunRecord,
    reason: &str,
    at: Timestamp,
    lease_now: Timestamp,
) -> Result<CancelOutcome, StoreError> {
    let next = decide(run, Operation::Cancel, lease_now)?;
    if next == Phase::Held {
        run.pending = Some(Request::Cancel { reason: reason.to_owned() });
        return Ok(CancelOutcome::Requested);
    }
    run.epoch += 1;
    run.last_seq += 1;
    run.updated_at = at;
    let cancelled =
        RunUpdate::Finish { status: RunStatus::Cancelled, output: None, error: Some(reason.to_owned()), at };
    apply(run, cancelled, false);
    Ok(CancelOutcome::Cancelled)
}

/// A pause of `run` at `at` for `reason`. A run a live worker holds at `lease_now` keeps the
/// request ([`Request::Pause`], unless a cancel or an earlier pause waits already), and that
/// worker parks it at its next step boundary with `reason` as why ([`PauseOutcome::Requested`]). Any other
/// is paused now: fenced, out of any queue, its slot given up; a debouncing run's window closes
/// as its rule says (`hold`). Refused for a run that has ended; a paused run stays paused.
pub fn pause(
    run: &mut RunRecord,
    reason: &str,
    at: Timestamp,
    lease_now: Timestamp,
    hold: bool,
) -> Result<PauseOutcome, StoreError> {
    let from = Phase::of(run, lease_now);
    let next = decide(run, Operation::Pause, lease_now)?;
    if from == Phase::Paused {
        return Ok(PauseOutcome::Paused);
    }
    if next == Phase::Held {
        if run.pending.is_none() {
            run.pending = Some(Request::Pause { reason: reason.to_owned() });
        }
        return Ok(PauseOutcome::Requested);
    }
    close_debounce_window(run, hold);
    run.epoch += 1;
    run.updated_at = at;
    run.waiting_for = None;
    apply(run, RunUpdate::Park { error: reason.to_owned() }, false);
    Ok(PauseOutcome::Paused)
}

/// Resumes a paused `run` at `at`: pending again (waiting for a slot if it is under a rule,
/// since it gave its slot up), its pause reason and recoveries cleared. Refused for a run that
/// has ended or is not paused.
pub fn resume(run: &mut RunRecord, at: Timestamp) -> Result<(), StoreError> {
    decide(run, Operation::Resume, at)?;
    run.status = RunStatus::Pending;
    if run.concurrency.is_some() {
        run.waiting_for = Some(WaitingFor::Concurrency);
    }
    run.error = None;
    run.recoveries = 0;
    run.updated_at = at;
    Ok(())
}

mod table;
#[cfg(test)]
mod tests;

pub use table::{Operation, Phase, Refusal, allowed, next};

/// `operation` (one anyone may do: a signal, a cancel, a pause, a resume) on `run` as the table
/// says when leases are judged at `lease_now`: the phase it leaves `run` in, or the store's
/// refusal. (The holder's own operations are fenced by epoch in [`check_append`] and
/// [`heartbeat`], which the table's `NotRunning` summarises.)
fn decide(run: &RunRecord, operation: Operation, lease_now: Timestamp) -> Result<Phase, StoreError> {
    next(Phase::of(run, lease_now), operation).map_err(|refusal| match refusal {
        Refusal::Ended => StoreError::RunFinished { run_id: run.id.clone(), status: run.status },
        Refusal::NotPaused => StoreError::NotPaused { run_id: run.id.clone(), status: run.status },
        Refusal::NotRunning | Refusal::NotClaimable => {
            StoreError::Fenced { run_id: run.id.clone(), held: run.epoch, current: run.epoch }
        }
    })
}
