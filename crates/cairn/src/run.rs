//! One run executing on this worker: its replay state, its appends, and the driver that decides
//! when it finishes, suspends or stops.

use crate::engine::{Ended, Local};
use crate::{Interrupt, WorkflowError};
use cairn_journal::{
    CursorError, Event, ReplayCursor, Replayed, RunState, SignalId, StepKind, StepPath, StepRecord, Timestamp,
};
use cairn_store::{Append, RunId, RunStatus, RunUpdate, SignalRecord, StoreError, SuspendReason};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// The error of a run parked because its body panicked.
fn body_panicked(message: &str) -> String {
    format!("[CAIRN-E0108] the workflow body panicked: {message}")
}

/// Why a run parked at an operator's request is paused.
pub(crate) const PAUSED_BY_REQUEST: &str = "paused by request";

impl RunExec {
    /// The error that refuses the body what it asked for, if the run was interrupted (and a note
    /// that it was refused something).
    fn refusal(&mut self) -> Option<WorkflowError> {
        let why = self.interrupt.clone()?;
        self.refused = true;
        Some(WorkflowError::Interrupted(why))
    }
}

/// What a run's successor inherits when the run continues as new (and its children, their
/// priority and fairness key).
#[derive(Debug, Clone, Default)]
pub(crate) struct Lineage {
    /// The run's parent, if it is a child.
    pub(crate) parent: Option<RunId>,
    /// How long it is kept once ended.
    pub(crate) retention: Option<std::time::Duration>,
    /// Whether it continues another run (its id is then `{first}~{n}`).
    pub(crate) continues: bool,
    /// Its priority and fairness key.
    pub(crate) queue: Queue,
}

/// Where a run queues for a worker: its priority and its fairness key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Queue {
    /// Higher is claimed first.
    pub(crate) priority: i32,
    /// Served fairly against other keys within its priority.
    pub(crate) fairness_key: Option<String>,
}

impl Queue {
    /// Where `run` queues.
    pub(crate) fn of(run: &cairn_store::RunRecord) -> Queue {
        Queue { priority: run.priority, fairness_key: run.fairness_key.clone() }
    }

    /// Gives `run` this place in the queue.
    pub(crate) fn apply(&self, run: &mut cairn_store::NewRun) {
        (run.priority, run.fairness_key) = (self.priority, self.fairness_key.clone());
    }
}

impl Lineage {
    /// The lineage recorded on a run's row.
    pub(crate) fn of(run: &cairn_store::RunRecord) -> Lineage {
        Lineage {
            parent: run.parent.clone(),
            retention: run.retention,
            continues: run.continued_from.is_some(),
            queue: Queue::of(run),
        }
    }
}

/// The first run of `id`'s chain of continuations, and how many hand-overs led to `id`: run
/// `order-7` continues as `order-7~1`, which continues as `order-7~2`, and so on.
///
/// Only a run that `continues` another has a generation; any other id (even one ending in `~3`)
/// is the first of its chain.
pub(crate) fn chain_position(id: &RunId, continues: bool) -> (&str, u64) {
    let id = id.as_str();
    if continues
        && let Some((first, n)) = id.rsplit_once('~')
        && let Ok(n) = n.parse::<u64>()
    {
        return (first, n);
    }
    (id, 0)
}

/// The first run of the chain of continuations of run `id` (which `continues` another or not):
/// the child a parent waits for, whichever run of the chain ends.
pub(crate) fn first_of_chain(id: &RunId, continues: bool) -> RunId {
    RunId::new(chain_position(id, continues).0)
}

/// Where a payload error about a continued run's input points.
pub(crate) const CONTINUED_INPUT: &str = "input of the continued run";

/// The id of the run that `id` continues as.
pub(crate) fn successor_id(id: &RunId, continues: bool) -> RunId {
    let (first, n) = chain_position(id, continues);
    RunId::new(format!("{first}~{}", n + 1))
}

/// A run this worker holds the lease of.
pub(crate) struct RunShared {
    pub(crate) id: RunId,
    /// What its successor inherits, should it continue as new.
    pub(crate) lineage: Lineage,
    /// Its workflow's name.
    pub(crate) workflow: String,
    /// What its steps use unless they say otherwise.
    pub(crate) step_defaults: crate::registry::StepDefaults,
    pub(crate) epoch: u64,
    pub(crate) local: Arc<Local>,
    /// Fired when step code must stop (cancelled, lease lost, non-determinism, store failure,
    /// or a shutdown's grace period ran out); step bodies see it as their cancellation token.
    pub(crate) stop: CancellationToken,
    /// Fired when the run must stop at its next step boundary (a pause or a shutdown, and every
    /// reason `stop` fires for): new steps are refused and parked sleeps and waits return.
    halt: CancellationToken,
    /// Wakes the driver to look again at interrupts and suspensions.
    changed: Notify,
    /// Bumped when a signal may have arrived: delivered in this process, or reported by the store.
    /// Made by the run's first wait for a signal: most runs never wait for one.
    signals_changed: std::sync::OnceLock<watch::Sender<u64>>,
    mode: Mode,
    /// When the run times out (from its `started` event).
    deadline: Option<Timestamp>,
    exec: Mutex<RunExec>,
    /// How many of each deterministic helper (`ctx.now()`, …) each scope has used, which numbers
    /// their journal entries (`~now[0]`, `~now[1]`, …) the same way on every replay.
    helpers: Mutex<HashMap<(StepPath, &'static str), u64>>,
    /// The turns its workflow's rate limits give it, by the step they limit (`None`: its start),
    /// their buckets keyed by its input.
    rate_turns: Vec<crate::flow::RateTurns>,
}

/// How far a run's body may go on this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Executes new steps.
    Live,
    /// The run crashed its workers this many times in a row: its first new step is not executed
    /// but parks the run as poison.
    Poisoned(u32),
    /// A replay check ([`crate::testing::replay`]): nothing is executed or written; the body
    /// stops at the first step its journal does not hold settled.
    ReplayCheck,
}

struct RunExec {
    state: RunState,
    cursor: ReplayCursor,
    last_seq: u64,
    /// Unconsumed signals, loaded on the first wait.
    signals: Option<Vec<SignalRecord>>,
    signals_seen: SignalId,
    /// Signals this execution took (their consuming appends may not have committed yet).
    taken: HashSet<SignalId>,
    in_flight: usize,
    suspensions: HashMap<u64, Suspension>,
    next_suspension: u64,
    interrupt: Option<Interrupt>,
    /// The body was refused a verb because of the interrupt: whatever it returned afterwards
    /// is not its own outcome.
    refused: bool,
    /// Patch markers decided: journaled ones, and those this execution decided.
    patches: HashMap<String, bool>,
    /// Durable values as the body has set them (or a resumed loop restored them).
    vars: BTreeMap<String, Box<RawValue>>,
    /// Events that go out with the run's next append (a loop's checkpoint: it commits with the
    /// next iteration's first step, not in a commit of its own).
    deferred: Vec<Event>,
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
        // Only the last step finishing while something is parked can make the run suspendable,
        // or let a run that must stop at a step boundary stop.
        let worth_a_look = exec.in_flight == 0 && (!exec.suspensions.is_empty() || exec.interrupt.is_some());
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
    pub(crate) fn new(id: RunId, lineage: Lineage, epoch: u64, local: Arc<Local>, state: RunState, mode: Mode) -> Self {
        let cursor = ReplayCursor::new(&state);
        let last_seq = state.last_seq();
        let deadline = state.deadline();
        let stop = CancellationToken::new();
        let rate_turns =
            local.registry.rate_limits(state.workflow()).iter().map(|limit| limit.turns_of(state.input())).collect();
        Self {
            rate_turns,
            id,
            lineage,
            workflow: state.workflow().to_owned(),
            step_defaults: local.registry.step_defaults(state.workflow()),
            epoch,
            local,
            halt: stop.child_token(),
            stop,
            changed: Notify::new(),
            signals_changed: std::sync::OnceLock::new(),
            mode,
            deadline,
            helpers: Mutex::new(HashMap::new()),
            exec: Mutex::new(RunExec {
                cursor,
                last_seq,
                signals: None,
                signals_seen: SignalId(0),
                taken: HashSet::new(),
                in_flight: 0,
                suspensions: HashMap::new(),
                next_suspension: 0,
                interrupt: None,
                refused: false,
                patches: state.patches().clone(),
                vars: BTreeMap::new(),
                deferred: Vec::new(),
                state,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RunExec> {
        // Nothing panics while holding this lock except on a bug; keep going with the data as is.
        self.exec.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The number of the next `kind` helper used in `scope`.
    pub(crate) fn next_helper(&self, scope: &StepPath, kind: &'static str) -> u64 {
        let mut helpers = self.helpers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let next = helpers.entry((scope.clone(), kind)).or_insert(0);
        *next += 1;
        *next - 1
    }

    /// Whether the run's workflow has rate limits at all (else [`turn`](Self::turn) is now).
    pub(crate) fn rate_limited(&self) -> bool {
        !self.rate_turns.is_empty()
    }

    /// Whether a rate limit holds back this run's start.
    pub(crate) fn limits_start(&self) -> bool {
        self.rate_turns.iter().any(|turns| turns.step.is_none())
    }

    /// Waits for this run's turn under its workflow's rate limit on starts (`step` `None`) or on
    /// the steps named `step`, suspended while the limit holds it back; when the turn was
    /// granted (now, for what no limit holds back).
    pub(crate) async fn turn(&self, step: Option<&StepPath>) -> Result<Timestamp, WorkflowError> {
        // A step's limit is named by its last segment.
        let name = step.map(StepPath::name);
        let Some(turns) = self.rate_turns.iter().find(|turns| turns.step.as_deref() == name) else {
            return Ok(self.now());
        };
        if self.mode == Mode::ReplayCheck {
            return Ok(self.now());
        }
        // Boxed, as a park is: rare, and held inline its future would size every step's.
        Box::pin(self.wait_for_turn(turns)).await
    }

    /// Takes turns from the store until one is granted, parked while the limit holds the run back.
    async fn wait_for_turn(&self, turns: &crate::flow::RateTurns) -> Result<Timestamp, WorkflowError> {
        loop {
            self.check()?;
            let take = turns.at(self.now());
            match self.local.store.take_rate(&take).await {
                Ok(None) => return Ok(take.now),
                Ok(Some(at)) => {
                    crate::telemetry::delayed(&self.workflow, cairn_store::WaitingFor::Rate);
                    self.park(Some(at), SuspendReason::RateLimited, None).await?;
                }
                Err(error) => {
                    self.interrupt(Interrupt::Store(error));
                    return Err(self.interrupted());
                }
            }
        }
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.local.clock.now()
    }

    /// Records why the run must stop and stops it: at once (step code sees its cancellation
    /// token fire), or at its next step boundary for a pause or a shutdown. The first reason
    /// wins, except that one that stops at once overrides one that waits for a boundary.
    pub(crate) fn interrupt(&self, why: Interrupt) {
        let at_boundary = why.lets_steps_finish();
        let mut exec = self.lock();
        let replace = match &exec.interrupt {
            None => true,
            Some(current) => current.lets_steps_finish() && !at_boundary,
        };
        if replace {
            exec.interrupt = Some(why);
        }
        drop(exec);
        if at_boundary {
            self.halt.cancel();
        } else {
            self.stop.cancel();
        }
        self.changed.notify_one();
    }

    /// Fires the step bodies' cancellation tokens of a run that is stopping at its next step
    /// boundary but whose steps did not finish in time (a shutdown's grace period ran out).
    pub(crate) fn stop_steps(&self) {
        self.stop.cancel();
    }

    /// `Err` if the run has been interrupted (the body is refused what it asked for).
    pub(crate) fn check(&self) -> Result<(), WorkflowError> {
        self.admit().map(drop)
    }

    /// The run's execution state for a verb of the body, or the refusal if the run was
    /// interrupted.
    fn admit(&self) -> Result<MutexGuard<'_, RunExec>, WorkflowError> {
        let mut exec = self.lock();
        match exec.refusal() {
            Some(refusal) => Err(refusal),
            None => Ok(exec),
        }
    }

    /// Why the run was interrupted, if it was.
    pub(crate) fn interruption(&self) -> Option<Interrupt> {
        self.lock().interrupt.clone()
    }

    /// After the body returned: the first journaled step it never asked for, if any, and how
    /// many journaled steps it did ask for.
    pub(crate) fn unreached(&self) -> (Result<(), cairn_journal::NonDeterminism>, usize) {
        let exec = self.lock();
        (exec.cursor.finish(), exec.cursor.replayed())
    }

    /// The error for the body when it must stop.
    pub(crate) fn interrupted(&self) -> WorkflowError {
        let mut exec = self.lock();
        exec.refused = true;
        WorkflowError::Interrupted(exec.interrupt.clone().unwrap_or(Interrupt::Cancelled))
    }

    /// The body asks for `path`: check it against the journal and return what is known.
    pub(crate) fn begin(&self, path: &StepPath, kind: StepKind) -> Result<Begun, WorkflowError> {
        let mut exec = self.admit()?;
        let replayed = exec.cursor.request(path, kind);
        let record = exec.state.step(path).filter(|_| matches!(replayed, Ok(Replayed::Known { .. })));
        let stop = match self.mode {
            Mode::Live => None,
            Mode::Poisoned(recoveries) if record.is_none() && replayed.is_ok() => {
                Some(Interrupt::Poisoned { path: Some(path.clone()), recoveries })
            }
            Mode::ReplayCheck if replayed.is_ok() && !record.is_some_and(StepRecord::is_settled) => {
                Some(Interrupt::ReplayChecked { path: path.clone() })
            }
            Mode::Poisoned(_) | Mode::ReplayCheck => None,
        };
        let record = record.cloned();
        if let Some(why) = stop {
            drop(exec);
            self.interrupt(why);
            return Err(self.interrupted());
        }
        match replayed {
            Ok(Replayed::Known { ordinal }) => Ok(Begun { ordinal, record }),
            Ok(Replayed::New { ordinal }) => Ok(Begun { ordinal, record: None }),
            Err(error) => {
                drop(exec);
                Err(self.cursor_refused(error))
            }
        }
    }

    /// The body will never ask for anything within `scope` (see [`ReplayCursor::skip_within`]).
    pub(crate) fn skip_within(&self, scope: &StepPath) {
        self.lock().cursor.skip_within(scope);
    }

    /// The body's error for a divergence from the journal: the run parks with it.
    pub(crate) fn diverged(&self, error: cairn_journal::NonDeterminism) -> WorkflowError {
        self.interrupt(Interrupt::NonDeterminism(error));
        self.interrupted()
    }

    /// The body's error for a request the cursor refused; non-determinism parks the run.
    fn cursor_refused(&self, error: CursorError) -> WorkflowError {
        match error {
            CursorError::DuplicatePath(path) => WorkflowError::DuplicatePath(path),
            CursorError::NonDeterminism(error) => self.diverged(error),
            other => WorkflowError::Failed(other.to_string()),
        }
    }

    /// The body evaluates patch marker `id`: the branch journaled for this run, or, the first
    /// time, the patched branch unless the body is still replaying what older code journaled.
    pub(crate) async fn patched(&self, id: &str) -> Result<bool, WorkflowError> {
        let applied = {
            let mut exec = self.admit()?;
            if let Some(&applied) = exec.patches.get(id) {
                return Ok(applied);
            }
            let applied = exec.cursor.past_journal();
            exec.patches.insert(id.to_owned(), applied);
            applied
        };
        self.append(vec![Event::Patched { id: id.to_owned(), applied }], None).await?;
        Ok(applied)
    }

    /// The body starts the durable loop at `path`: its latest checkpoint, if the journal holds
    /// one, whose earlier iterations the cursor now skips and whose durable values the body sees
    /// (the iterations that set them will not run again).
    pub(crate) fn start_loop(&self, path: &StepPath) -> Result<Option<cairn_journal::LoopRecord>, WorkflowError> {
        let mut exec = self.admit()?;
        let record = exec.state.loop_record(path).cloned();
        if let Some(record) = &record {
            exec.cursor.skip_iterations(path, record.next);
            exec.vars.extend(record.vars.iter().map(|(name, value)| (name.clone(), value.clone())));
        }
        Ok(record)
    }

    /// `value` as JSON for the journal, within the engine's payload limit; `what` (a step path,
    /// `var <name>`) names it in the error.
    pub(crate) fn encode<T: serde::Serialize + ?Sized>(
        &self,
        what: &str,
        value: &T,
    ) -> Result<Box<RawValue>, WorkflowError> {
        let raw = serde_json::value::to_raw_value(value)
            .map_err(|e| WorkflowError::Payload { path: what.to_owned(), message: e.to_string() })?;
        let limit = self.local.config.max_payload_bytes;
        if raw.get().len() > limit {
            return Err(WorkflowError::PayloadTooLarge { path: what.to_owned(), size: raw.get().len(), limit });
        }
        Ok(raw)
    }

    /// Journals a loop's checkpoint with the run's next append, whatever that is (a step, a
    /// sleep, the run's end). It replaces one of the same loop still waiting (iterations that
    /// journal nothing), taking over its trim. Lost if the run stops first: then a replay starts
    /// from the checkpoint before.
    pub(crate) fn defer_checkpoint(&self, mut checkpoint: Event) -> Result<(), WorkflowError> {
        let mut exec = self.admit()?;
        let same_loop = |event: &Event| match (event, &checkpoint) {
            (Event::LoopCheckpoint { path: a, .. }, Event::LoopCheckpoint { path: b, .. }) => a == b,
            _ => false,
        };
        if let Some(index) = exec.deferred.iter().position(same_loop) {
            let waiting = exec.deferred.remove(index);
            if let (Some((_, older)), Event::LoopCheckpoint { trim: Some(newer), .. }) =
                (waiting.trim(), &mut checkpoint)
            {
                newer.after = newer.after.min(older.after);
            }
        }
        exec.deferred.push(checkpoint);
        Ok(())
    }

    /// Every durable value as the body has set it, for a loop checkpoint.
    pub(crate) fn vars_now(&self) -> BTreeMap<String, Box<RawValue>> {
        self.lock().vars.clone()
    }

    /// The journal's last entry so far, once the body runs past what the journal held (while it
    /// replays, entries it has not reached yet are already there: `None`).
    pub(crate) fn live_position(&self) -> Option<u64> {
        let exec = self.lock();
        exec.cursor.past_journal().then_some(exec.last_seq)
    }

    /// The loop at `path` trimmed its iterations before `below`: forget what is kept of them.
    pub(crate) fn forget_iterations(&self, path: &StepPath, below: u64) {
        self.lock().cursor.forget_iterations(path, below);
        let mut helpers = self.helpers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        helpers.retain(|(scope, _), _| scope.iteration_of(path).is_none_or(|i| i >= below));
    }

    /// The body sets durable value `name`: journaled once the body runs past what the journal
    /// holds (while it replays, an earlier execution journaled the set; a set made between the
    /// last journaled step and a crash is journaled again, with the same value).
    pub(crate) async fn set_var(&self, name: &str, value: Box<RawValue>) -> Result<(), WorkflowError> {
        let new = {
            let mut exec = self.admit()?;
            exec.vars.insert(name.to_owned(), value.clone());
            exec.cursor.past_journal()
        };
        if new {
            self.append(vec![Event::VarSet { name: name.to_owned(), value }], None).await?;
        }
        Ok(())
    }

    /// Durable value `name` as this execution last set it.
    pub(crate) fn var(&self, name: &str) -> Option<Box<RawValue>> {
        self.lock().vars.get(name).cloned()
    }

    /// The body marks `path` as a step its code no longer has (see [`Ctx::removed`](crate::Ctx::removed)).
    pub(crate) fn removed(&self, path: &StepPath) -> Result<(), WorkflowError> {
        let skipped = self.admit()?.cursor.skip_removed(path);
        skipped.map(drop).map_err(|error| self.cursor_refused(error))
    }

    pub(crate) fn start_work(&self) -> InFlight<'_> {
        self.lock().in_flight += 1;
        InFlight(self)
    }

    /// Appends events while the run goes on (also while it stops at a step boundary: a step
    /// that finished is committed). Any store failure interrupts the run.
    pub(crate) async fn append(&self, events: Vec<Event>, consume: Option<SignalId>) -> Result<(), WorkflowError> {
        self.append_at(events, consume, self.now(), false).await
    }

    /// [`append`](Self::append) journaled at `at` (a time the caller read anyway), `batched`
    /// when other appends of the run go out at about the same time (see [`Append::batched`]).
    pub(crate) async fn append_at(
        &self,
        events: Vec<Event>,
        consume: Option<SignalId>,
        at: Timestamp,
        batched: bool,
    ) -> Result<(), WorkflowError> {
        let stopping = self.lock().interrupt.as_ref().is_some_and(|why| !why.lets_steps_finish());
        if stopping {
            return Err(self.interrupted());
        }
        if self.mode == Mode::ReplayCheck {
            return Ok(());
        }
        self.append_raw(events, RunUpdate::Progress, consume, at, batched).await.map_err(|error| {
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
        at: Timestamp,
        batched: bool,
    ) -> Result<(), StoreError> {
        // The append is submitted while the lock is held, so appends to this run reach the store in
        // the order their sequence numbers were assigned.
        let pending = {
            let mut exec = self.lock();
            let events = match exec.deferred.is_empty() {
                true => events,
                false => std::mem::take(&mut exec.deferred).into_iter().chain(events).collect(),
            };
            let after_seq = exec.last_seq;
            exec.last_seq += events.len() as u64;
            self.local.store.append(Append {
                run_id: self.id.clone(),
                epoch: self.epoch,
                after_seq,
                events,
                at,
                update,
                consume_signal: consume,
                batched,
            })
        };
        pending.await
    }

    /// Hands the lease back without ending the run (engine shutdown).
    pub(crate) async fn release(&self) -> Result<(), StoreError> {
        self.append_raw(Vec::new(), RunUpdate::Release, None, self.now(), false).await
    }

    /// Waits until `wake_at` (or forever), letting the driver suspend the run meanwhile. A wait
    /// passes `signals`, a receiver of [`RunShared::signals_changed`] taken before it last looked
    /// for its signal: a change since then returns at once.
    pub(crate) async fn park(
        &self,
        wake_at: Option<Timestamp>,
        reason: SuspendReason,
        signals: Option<watch::Receiver<u64>>,
    ) -> Result<(), WorkflowError> {
        if wake_at.is_some_and(|w| w <= self.now()) {
            return self.check();
        }
        // Boxed: a park's future (a timer, a cancellation, a signal watch at once) is large, and
        // held inline it would size every step's future for a retry that rarely comes.
        Box::pin(self.parked(wake_at, reason, signals)).await
    }

    /// [`park`](Self::park) once the wake-up is not already due.
    async fn parked(
        &self,
        wake_at: Option<Timestamp>,
        reason: SuspendReason,
        mut signals: Option<watch::Receiver<u64>>,
    ) -> Result<(), WorkflowError> {
        let waits_for_signal = signals.is_some();
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
        let signal = async {
            match signals.as_mut() {
                // Without reports from the store, signals from other processes are looked for
                // every poll interval while a wait stays in memory.
                Some(receiver) if self.local.notices_reported() => {
                    if receiver.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                Some(receiver) => {
                    let _ = tokio::time::timeout(self.local.config.poll_interval, receiver.changed()).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            () = self.halt.cancelled() => {}
            () = signal => {}
        }
        self.check()
    }

    /// A receiver that sees every later change of the run's signals (see [`RunShared::park`]).
    pub(crate) fn watch_signals(&self) -> watch::Receiver<u64> {
        self.signals_changed.get_or_init(|| watch::Sender::new(0)).subscribe()
    }

    /// Loads the run's unconsumed signals once; `true` if this call read them from the store.
    pub(crate) async fn load_signals(&self) -> Result<bool, WorkflowError> {
        if self.lock().signals.is_some() {
            return Ok(false);
        }
        self.refresh_signals().await?;
        Ok(true)
    }

    /// Reads the run's unconsumed signals from the store again (another process may have sent
    /// some), keeping out those this execution took already.
    pub(crate) async fn refresh_signals(&self) -> Result<(), WorkflowError> {
        let signals = self.local.store.signals(&self.id).await.map_err(|e| {
            self.interrupt(Interrupt::Store(e));
            self.interrupted()
        })?;
        let mut exec = self.lock();
        let seen = signals.iter().map(|s| s.id).max().unwrap_or(SignalId(0));
        exec.signals_seen = exec.signals_seen.max(seen);
        let unconsumed: Vec<SignalRecord> = signals
            .into_iter()
            .filter(|s| s.consumed_seq.is_none() && !exec.taken.contains(&s.id) && !exec.state.has_consumed(s.id))
            .collect();
        exec.signals = Some(unconsumed);
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
        let signal = signals.remove(position);
        exec.taken.insert(signal.id);
        Some(signal)
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
        self.signal_may_have_arrived();
    }

    /// Wakes the run's waits to look for their signals again (in the store, if not in memory).
    pub(crate) fn signal_may_have_arrived(&self) {
        // No sender yet: no wait has looked for a signal, and the first will look after this one
        // is in memory or in the store.
        if let Some(changed) = self.signals_changed.get() {
            changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Whether the run should suspend now: nothing executing, something parked, and either a
    /// wait among them or the earliest deadline beyond the grace period.
    fn suspension_plan(&self) -> Option<RunUpdate> {
        let exec = self.lock();
        if exec.in_flight > 0 || exec.suspensions.is_empty() {
            return None;
        }
        let now = self.now();
        // Everything parked ends within the grace period: stay in memory (a wait among them is
        // woken by its signal without a round through the store).
        let soon = now + self.local.config.suspend_grace;
        if exec.suspensions.values().all(|s| s.wake_at.is_some_and(|w| w <= soon)) {
            return None;
        }
        let any_wait = exec.suspensions.values().any(|s| s.waits_for_signal);
        let earliest = exec.suspensions.values().filter(|s| s.wake_at.is_some()).min_by_key(|s| s.wake_at).copied();
        // A run with a deadline is woken by it at the latest, to time out.
        let wake_at = earliest.and_then(|s| s.wake_at).into_iter().chain(self.deadline).min();
        let reason = earliest.map_or(SuspendReason::Waiting, |s| s.reason);
        Some(RunUpdate::Suspend { reason, wake_at, signals_after: any_wait.then_some(exec.signals_seen), now })
    }
}

/// How a run's execution on this worker ended.
enum Outcome {
    Returned(Result<Box<RawValue>, WorkflowError>),
    Panicked(String),
    Interrupted,
    Suspend(RunUpdate),
}

/// Drives a run's body until it returns, suspends or is interrupted, then records the outcome;
/// how the run ended, if it ended here.
pub(crate) async fn drive(shared: Arc<RunShared>, body: crate::registry::BodyFuture) -> Option<Ended> {
    let mut body = Box::pin(crate::panic::caught(body));
    // Interrupts the run at its deadline; never completes.
    let deadline = async {
        if let Some(at) = shared.deadline {
            shared.local.clock.sleep_until(at).await;
            shared.interrupt(Interrupt::TimedOut);
        }
        std::future::pending::<()>().await
    };
    tokio::pin!(deadline);
    if shared.deadline.is_some_and(|at| at <= shared.now()) {
        // Past its deadline already (woken by it, or resumed late): the body may not start a step.
        shared.interrupt(Interrupt::TimedOut);
    }
    let outcome = loop {
        tokio::select! {
            biased;
            () = &mut deadline => {}
            result = &mut body => break match result {
                Ok(result) => Outcome::Returned(result),
                Err(message) => Outcome::Panicked(message),
            },
            () = shared.changed.notified() => {
                let exec = shared.lock();
                if let Some(why) = &exec.interrupt {
                    // A pause or a shutdown lets steps in flight finish and commit first.
                    if !why.lets_steps_finish() || exec.in_flight == 0 {
                        break Outcome::Interrupted;
                    }
                    continue;
                }
                drop(exec);
                if let Some(plan) = shared.suspension_plan() {
                    break Outcome::Suspend(plan);
                }
            }
        }
    };
    drop(body);
    let (interrupt, refused) = {
        let exec = shared.lock();
        (exec.interrupt.clone(), exec.refused)
    };
    let (mut events, mut update) = record(&shared, interrupt, refused, outcome)?;
    if let RunUpdate::Continue { successor, at } = &update
        && let Ok(Some(_)) = shared.local.store.get_run(&successor.id).await
    {
        // Someone created a run with this id: the chain cannot go on under it.
        let error = format!("[CAIRN-E0116] the run cannot continue as new: run id `{}` is taken", successor.id);
        let at = *at;
        events = vec![Event::Failed { error: error.clone() }];
        update = RunUpdate::Finish { status: RunStatus::Failed, output: None, error: Some(error), at };
    }
    let ended = match &update {
        RunUpdate::Finish { status, output, error, .. } => {
            Some(Ended { status: *status, output: output.clone(), error: error.clone() })
        }
        RunUpdate::Continue { .. } => Some(Ended { status: RunStatus::Continued, output: None, error: None }),
        RunUpdate::Park { error } => {
            Some(Ended { status: RunStatus::Paused, output: None, error: Some(error.clone()) })
        }
        _ => None,
    };
    // A suspension's wake-up time is news to the claim loop, which may be sleeping towards a
    // later one.
    let suspends = matches!(update, RunUpdate::Suspend { .. });
    match shared.append_raw(events, update, None, shared.now(), false).await {
        Ok(()) => {
            if suspends {
                shared.local.wake_claimer();
            }
            ended
        }
        Err(error) => {
            // The lease was lost or the store failed: a later claim resumes from the journal.
            tracing::warn!("run {}: could not record its outcome: {error}", shared.id);
            None
        }
    }
}

/// What to record for a run's execution: events plus the row change, or nothing when this worker
/// may not write.
fn record(
    shared: &RunShared,
    interrupt: Option<Interrupt>,
    refused: bool,
    outcome: Outcome,
) -> Option<(Vec<Event>, RunUpdate)> {
    let now = shared.now();
    let finish = |status: RunStatus, output: Option<Box<RawValue>>, error: Option<String>| RunUpdate::Finish {
        status,
        output,
        error,
        at: now,
    };
    let failed =
        |error: String| (vec![Event::Failed { error: error.clone() }], finish(RunStatus::Failed, None, Some(error)));
    let park = |error: String| (Vec::new(), RunUpdate::Park { error });
    // A run asked to stop at a step boundary that finished on its own anyway (its body returned
    // without being refused anything) records how it finished.
    let interrupt = match (interrupt, &outcome) {
        (Some(why), Outcome::Returned(_)) if why.lets_steps_finish() && !refused => None,
        (interrupt, _) => interrupt,
    };
    match (interrupt, outcome) {
        (Some(Interrupt::Cancelled), _) => {
            let reason = "cancelled".to_owned();
            Some((vec![Event::Cancelled { reason: reason.clone() }], finish(RunStatus::Cancelled, None, Some(reason))))
        }
        (Some(Interrupt::TimedOut), _) => Some(failed(Interrupt::TimedOut.to_string())),
        (Some(why @ (Interrupt::NonDeterminism(_) | Interrupt::Poisoned { .. })), _) => Some(park(why.to_string())),
        (Some(Interrupt::Paused), _) => Some(park(PAUSED_BY_REQUEST.to_owned())),
        (Some(Interrupt::ShuttingDown), _) => Some((Vec::new(), RunUpdate::Release)),
        (Some(_), _) | (None, Outcome::Interrupted) => None,
        (None, Outcome::Panicked(message)) => Some(park(body_panicked(&message))),
        (None, Outcome::Suspend(plan)) => Some((Vec::new(), plan)),
        (None, Outcome::Returned(Ok(output))) => {
            let (unreached, _) = shared.unreached();
            let limit = shared.local.config.max_payload_bytes;
            match unreached {
                Err(error) => Some(park(error.to_string())),
                Ok(()) if output.get().len() > limit => Some(failed(
                    WorkflowError::PayloadTooLarge { path: "output".into(), size: output.get().len(), limit }
                        .to_string(),
                )),
                Ok(()) => Some((
                    vec![Event::Completed { output: output.clone() }],
                    finish(RunStatus::Completed, Some(output), None),
                )),
            }
        }
        (None, Outcome::Returned(Err(WorkflowError::ContinueAsNew { input }))) => match shared.unreached().0 {
            Err(error) => Some(park(error.to_string())),
            Ok(()) => Some(shared.successor(input, now).unwrap_or_else(|error| failed(error.to_string()))),
        },
        (None, Outcome::Returned(Err(error))) => Some(failed(error.to_string())),
    }
}

impl RunShared {
    /// The hand-over to the run this one continues as, with `input`: the newest version of the
    /// workflow this worker registers, the same parent, deadline and retention.
    fn successor(&self, input: String, now: Timestamp) -> Result<(Vec<Event>, RunUpdate), WorkflowError> {
        let payload = |message: String| WorkflowError::Payload { path: CONTINUED_INPUT.into(), message };
        let limit = self.local.config.max_payload_bytes;
        if input.len() > limit {
            return Err(WorkflowError::PayloadTooLarge { path: CONTINUED_INPUT.into(), size: input.len(), limit });
        }
        let input = RawValue::from_string(input).map_err(|e| payload(e.to_string()))?;
        let registry = &self.local.registry;
        let version =
            registry.latest(&self.workflow).ok_or_else(|| payload("the workflow is not registered".into()))?;
        if let Some(registered) = registry.get(&self.workflow, version) {
            (registered.check_input)(&input).map_err(payload)?;
        }
        let id = successor_id(&self.id, self.lineage.continues);
        let mut run = cairn_store::NewRun::new(id.clone(), self.workflow.clone(), version, input.clone(), now);
        run.deadline = self.deadline;
        run.retention = self.lineage.retention;
        run.parent = self.lineage.parent.clone();
        run.continued_from = Some(self.id.clone());
        self.lineage.queue.apply(&mut run);
        let events = vec![Event::Continued { run: id.to_string(), input }];
        Ok((events, RunUpdate::Continue { successor: Box::new(run), at: now }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successors_number_the_chain_from_its_first_run() {
        let next = |id: &str, continues| successor_id(&RunId::new(id), continues).to_string();
        assert_eq!(next("meter", false), "meter~1");
        assert_eq!(next("meter~1", true), "meter~2");
        assert_eq!(next("meter~9", true), "meter~10");
        // Only a run that continues another has a generation in its id.
        assert_eq!(next("job~3", false), "job~3~1");
        assert_eq!(next("a~b", true), "a~b~1");
        assert_eq!(chain_position(&RunId::new("p:~child[0]~2"), true), ("p:~child[0]", 2));
    }
}
