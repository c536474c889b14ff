//! One run executing on this worker: its replay state, its appends, and the driver that decides
//! when it finishes, suspends or stops.

use crate::engine::{Ended, Local};
use crate::{Interrupt, WorkflowError};
use cairn_journal::{
    CursorError, Event, ReplayCursor, Replayed, RunState, SignalId, StepKind, StepPath, StepRecord, Timestamp,
};
use cairn_store::{Append, RunId, RunStatus, RunUpdate, SignalRecord, StoreError, SuspendReason};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// A run this worker holds the lease of.
pub(crate) struct RunShared {
    pub(crate) id: RunId,
    pub(crate) epoch: u64,
    pub(crate) local: Arc<Local>,
    /// Fired when the run must stop (cancelled, lease lost, non-determinism, store failure).
    pub(crate) stop: CancellationToken,
    /// Wakes the driver to look again at interrupts and suspensions.
    changed: Notify,
    /// Wakes waits when a signal is delivered in process.
    signal_arrived: Notify,
    exec: Mutex<RunExec>,
}

struct RunExec {
    state: RunState,
    cursor: ReplayCursor,
    last_seq: u64,
    /// Unconsumed signals, loaded on the first wait.
    signals: Option<Vec<SignalRecord>>,
    signals_seen: SignalId,
    in_flight: usize,
    suspensions: HashMap<u64, Suspension>,
    next_suspension: u64,
    interrupt: Option<Interrupt>,
}

#[derive(Clone, Copy)]
struct Suspension {
    reason: SuspendReason,
    wake_at: Option<Timestamp>,
    waits_for_signal: bool,
}

/// What the journal says about a step the body asked for.
pub(crate) struct Begun {
    pub(crate) ordinal: u32,
    pub(crate) record: Option<StepRecord>,
}

/// Decrements the in-flight count when a step body is done (or dropped).
pub(crate) struct InFlight<'a>(&'a RunShared);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut exec = self.0.lock();
        exec.in_flight -= 1;
        // Only the last step finishing while something is parked can make the run suspendable.
        let worth_a_look = exec.in_flight == 0 && !exec.suspensions.is_empty();
        drop(exec);
        if worth_a_look {
            self.0.changed.notify_one();
        }
    }
}

struct Registration<'a> {
    shared: &'a RunShared,
    key: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.shared.lock().suspensions.remove(&self.key);
    }
}

impl RunShared {
    pub(crate) fn new(id: RunId, epoch: u64, local: Arc<Local>, state: RunState) -> Self {
        let cursor = ReplayCursor::new(&state);
        let last_seq = state.last_seq();
        Self {
            id,
            epoch,
            local,
            stop: CancellationToken::new(),
            changed: Notify::new(),
            signal_arrived: Notify::new(),
            exec: Mutex::new(RunExec {
                state,
                cursor,
                last_seq,
                signals: None,
                signals_seen: SignalId(0),
                in_flight: 0,
                suspensions: HashMap::new(),
                next_suspension: 0,
                interrupt: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RunExec> {
        // Nothing panics while holding this lock except on a bug; keep going with the data as is.
        self.exec.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.local.clock.now()
    }

    /// Records why the run must stop (the first reason wins) and stops it.
    pub(crate) fn interrupt(&self, why: Interrupt) {
        let mut exec = self.lock();
        if exec.interrupt.is_none() {
            exec.interrupt = Some(why);
        }
        drop(exec);
        self.stop.cancel();
        self.changed.notify_one();
    }

    /// `Err` if the run has been interrupted.
    pub(crate) fn check(&self) -> Result<(), WorkflowError> {
        match &self.lock().interrupt {
            Some(why) => Err(WorkflowError::Interrupted(why.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn interrupted(&self) -> WorkflowError {
        let why = self.lock().interrupt.clone().unwrap_or(Interrupt::Cancelled);
        WorkflowError::Interrupted(why)
    }

    /// The body asks for `path`: check it against the journal and return what is known.
    pub(crate) fn begin(&self, path: &StepPath, kind: StepKind) -> Result<Begun, WorkflowError> {
        let mut exec = self.lock();
        if let Some(why) = &exec.interrupt {
            return Err(WorkflowError::Interrupted(why.clone()));
        }
        match exec.cursor.request(path, kind) {
            Ok(Replayed::Known { ordinal }) => Ok(Begun { ordinal, record: exec.state.step(path).cloned() }),
            Ok(Replayed::New { ordinal }) => Ok(Begun { ordinal, record: None }),
            Err(CursorError::DuplicatePath(path)) => Err(WorkflowError::DuplicatePath(path)),
            Err(CursorError::NonDeterminism(error)) => {
                drop(exec);
                self.interrupt(Interrupt::NonDeterminism(error));
                Err(self.interrupted())
            }
            Err(other) => Err(WorkflowError::Failed(other.to_string())),
        }
    }

    pub(crate) fn start_work(&self) -> InFlight<'_> {
        self.lock().in_flight += 1;
        InFlight(self)
    }

    /// Appends events while the run goes on. Any store failure interrupts the run.
    pub(crate) async fn append(&self, events: Vec<Event>, consume: Option<SignalId>) -> Result<(), WorkflowError> {
        self.check()?;
        self.append_raw(events, RunUpdate::Progress, consume).await.map_err(|error| {
            self.interrupt(match error {
                StoreError::Fenced { .. } => Interrupt::LeaseLost,
                other => Interrupt::Store(other),
            });
            self.interrupted()
        })
    }

    /// Appends without looking at interrupts (for the driver's final appends).
    async fn append_raw(
        &self,
        events: Vec<Event>,
        update: RunUpdate,
        consume: Option<SignalId>,
    ) -> Result<(), StoreError> {
        // The append is submitted while the lock is held, so appends to this run reach the store in
        // the order their sequence numbers were assigned.
        let pending = {
            let mut exec = self.lock();
            let after_seq = exec.last_seq;
            exec.last_seq += events.len() as u64;
            self.local.store.append(Append {
                run_id: self.id.clone(),
                epoch: self.epoch,
                after_seq,
                events,
                at: self.local.clock.now(),
                update,
                consume_signal: consume,
            })
        };
        pending.await
    }

    /// Hands the lease back without ending the run (engine shutdown).
    pub(crate) async fn release(&self) -> Result<(), StoreError> {
        self.append_raw(Vec::new(), RunUpdate::Release, None).await
    }

    /// Waits until `wake_at` (or forever), letting the driver suspend the run meanwhile.
    pub(crate) async fn park(
        &self,
        wake_at: Option<Timestamp>,
        reason: SuspendReason,
        waits_for_signal: bool,
    ) -> Result<(), WorkflowError> {
        if wake_at.is_some_and(|w| w <= self.now()) {
            return self.check();
        }
        let key = {
            let mut exec = self.lock();
            let key = exec.next_suspension;
            exec.next_suspension += 1;
            exec.suspensions.insert(key, Suspension { reason, wake_at, waits_for_signal });
            key
        };
        let _registration = Registration { shared: self, key };
        self.changed.notify_one();
        let sleep = async {
            match wake_at {
                Some(at) => self.local.clock.sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            () = self.stop.cancelled() => {}
            () = self.signal_arrived.notified(), if waits_for_signal => {}
        }
        self.check()
    }

    /// Loads the run's unconsumed signals once.
    pub(crate) async fn load_signals(&self) -> Result<(), WorkflowError> {
        if self.lock().signals.is_some() {
            return Ok(());
        }
        let signals = self.local.store.signals(&self.id).await.map_err(|e| {
            self.interrupt(Interrupt::Store(e));
            self.interrupted()
        })?;
        let mut exec = self.lock();
        if exec.signals.is_none() {
            let seen = signals.iter().map(|s| s.id).max().unwrap_or(SignalId(0));
            exec.signals_seen = exec.signals_seen.max(seen);
            exec.signals = Some(signals.into_iter().filter(|s| s.consumed_seq.is_none()).collect());
        }
        Ok(())
    }

    /// Takes the oldest unconsumed signal named `name` whose payload contains `filter`.
    pub(crate) fn take_signal(&self, name: &str, filter: Option<&serde_json::Value>) -> Option<SignalRecord> {
        let mut exec = self.lock();
        let signals = exec.signals.as_mut()?;
        let position = signals.iter().position(|s| {
            s.name == name
                && filter.is_none_or(|filter| {
                    serde_json::from_str::<serde_json::Value>(s.payload.get())
                        .is_ok_and(|payload| cairn_journal::json_contains(&payload, filter))
                })
        })?;
        Some(signals.remove(position))
    }

    /// A signal delivered in this process while the run executes here.
    pub(crate) fn deliver(&self, signal: SignalRecord) {
        let mut exec = self.lock();
        exec.signals_seen = exec.signals_seen.max(signal.id);
        if let Some(signals) = exec.signals.as_mut()
            && !signals.iter().any(|s| s.id == signal.id)
        {
            signals.push(signal);
        }
        drop(exec);
        self.signal_arrived.notify_waiters();
    }

    /// Whether the run should suspend now: nothing executing, something parked, and either a
    /// wait among them or the earliest deadline beyond the grace period.
    fn suspension_plan(&self) -> Option<RunUpdate> {
        let exec = self.lock();
        if exec.in_flight > 0 || exec.suspensions.is_empty() {
            return None;
        }
        let now = self.now();
        let any_wait = exec.suspensions.values().any(|s| s.waits_for_signal);
        let earliest = exec.suspensions.values().filter(|s| s.wake_at.is_some()).min_by_key(|s| s.wake_at).copied();
        let wake_at = earliest.and_then(|s| s.wake_at);
        if !any_wait && wake_at.is_some_and(|w| w <= now + self.local.config.suspend_grace) {
            return None;
        }
        let reason = earliest.map_or(SuspendReason::Waiting, |s| s.reason);
        Some(RunUpdate::Suspend { reason, wake_at, signals_after: any_wait.then_some(exec.signals_seen), now })
    }
}

/// How a run's execution on this worker ended.
enum Outcome {
    Returned(Result<Box<RawValue>, WorkflowError>),
    Interrupted,
    Suspend(RunUpdate),
}

/// Drives a run's body until it returns, suspends or is interrupted, then records the outcome.
pub(crate) async fn drive(shared: Arc<RunShared>, mut body: crate::registry::BodyFuture) {
    let outcome = loop {
        tokio::select! {
            biased;
            result = &mut body => break Outcome::Returned(result),
            () = shared.changed.notified() => {
                if shared.lock().interrupt.is_some() {
                    break Outcome::Interrupted;
                }
                if let Some(plan) = shared.suspension_plan() {
                    break Outcome::Suspend(plan);
                }
            }
        }
    };
    drop(body);
    let interrupt = shared.lock().interrupt.clone();
    let now = shared.now();
    let finish = |status: RunStatus, output: Option<Box<RawValue>>, error: Option<String>| RunUpdate::Finish {
        status,
        output,
        error,
        at: now,
    };
    // What to record: events plus the row change, or nothing when this worker may not write.
    let plan: Option<(Vec<Event>, RunUpdate)> = match (interrupt, outcome) {
        (Some(Interrupt::Cancelled), _) => {
            let reason = "cancelled".to_owned();
            Some((vec![Event::Cancelled { reason: reason.clone() }], finish(RunStatus::Cancelled, None, Some(reason))))
        }
        (Some(Interrupt::NonDeterminism(error)), _) => Some((Vec::new(), RunUpdate::Park { error: error.to_string() })),
        (Some(Interrupt::LeaseLost | Interrupt::Store(_)), _) | (None, Outcome::Interrupted) => None,
        (None, Outcome::Suspend(plan)) => Some((Vec::new(), plan)),
        (None, Outcome::Returned(Ok(output))) => {
            let unreached = shared.lock().cursor.finish();
            let limit = shared.local.config.max_payload_bytes;
            match unreached {
                Err(error) => Some((Vec::new(), RunUpdate::Park { error: error.to_string() })),
                Ok(()) if output.get().len() > limit => {
                    let error =
                        WorkflowError::PayloadTooLarge { path: "output".into(), size: output.get().len(), limit }
                            .to_string();
                    Some((vec![Event::Failed { error: error.clone() }], finish(RunStatus::Failed, None, Some(error))))
                }
                Ok(()) => Some((
                    vec![Event::Completed { output: output.clone() }],
                    finish(RunStatus::Completed, Some(output), None),
                )),
            }
        }
        (None, Outcome::Returned(Err(error))) => {
            let error = error.to_string();
            Some((vec![Event::Failed { error: error.clone() }], finish(RunStatus::Failed, None, Some(error))))
        }
    };
    let ended = match plan {
        None => None,
        Some((events, update)) => {
            let ended = match &update {
                RunUpdate::Finish { status, output, error, .. } => {
                    Some(Ended { status: *status, output: output.clone(), error: error.clone() })
                }
                RunUpdate::Park { error } => {
                    Some(Ended { status: RunStatus::Paused, output: None, error: Some(error.clone()) })
                }
                _ => None,
            };
            // A suspension's wake-up time is news to the claim loop, which may be sleeping
            // towards a later one.
            let suspends = matches!(update, RunUpdate::Suspend { .. });
            match shared.append_raw(events, update, None).await {
                Ok(()) => {
                    if suspends {
                        shared.local.wake_claimer();
                    }
                    ended
                }
                Err(error) => {
                    // The lease was lost or the store failed: a later claim resumes from the journal.
                    crate::engine::log_warning(&format!("run {}: could not record its outcome: {error}", shared.id));
                    None
                }
            }
        }
    };
    shared.local.run_finished(&shared.id, ended);
}
