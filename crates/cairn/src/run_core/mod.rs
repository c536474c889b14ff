//! The run core: one run's state machine, with no runtime, store or clock.
//!
//! Given the journal so far and what the workflow body asks next, a [`RunCore`] decides: replay
//! this step's result ([`begin`](RunCore::begin) answers with its record), journal these events
//! ([`prepare_append`](RunCore::prepare_append) numbers them and adds what was deferred), suspend
//! until a time or a signal ([`suspension_plan`](RunCore::suspension_plan)), consume a signal
//! ([`take_signal`](RunCore::take_signal)), and how the execution ends ([`record`](RunCore::record):
//! complete, fail, park, continue as new, hand the lease back). Times come in as arguments.
//!
//! The engine's run driver (`run.rs`) carries these decisions out: it holds a `RunCore` behind a
//! lock, appends to the store, sleeps on the clock and wakes waits. A worker written in another
//! language, or a step-through debugger, could drive the same core.
//!
//! ```
//! use cairn::journal::{Event, JournalEntry, RunState, StepKind, StepPath, Timestamp};
//! use cairn::run_core::{Limits, Mode, RunCore};
//!
//! let started = Event::Started {
//!     workflow: "w".into(),
//!     version: 1,
//!     input: serde_json::value::to_raw_value(&1).unwrap(),
//!     deadline: None,
//!     reason: None,
//! };
//! let state = RunState::fold(&[JournalEntry::new(1, Timestamp::from_millis(0), started)]).unwrap();
//! let mut core = RunCore::new(state, Mode::Live, Limits::default());
//! // The journal holds no step yet: the body's first step is new, and executes.
//! let begun = core.begin(&StepPath::parse("a").unwrap(), StepKind::Step).unwrap();
//! assert!(begun.record.is_none());
//! ```

mod attempt;
mod lineage;
#[cfg(test)]
mod tests;

pub use attempt::{AttemptEnd, end_attempt};
pub use lineage::{InputCheck, Lineage};
// The engine's own: how a child, a detached run and a continuation are named and journaled.
pub(crate) use lineage::{
    AWAITED, CHILD_ENDED, CONTINUED_INPUT, DETACHED, Queue, awaited, chain_position, first_of_chain, successor,
};

use crate::error::{Interrupt, WorkflowError};
use cairn_journal::{
    CursorError, Event, LoopRecord, NonDeterminism, ReplayCursor, Replayed, RunState, SignalId, StepKind, StepPath,
    StepRecord, Timestamp,
};
use cairn_store::{Append, Request, RunId, RunStatus, RunUpdate, SignalRecord, SuspendReason};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// The default payload limit: 4 MiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 4 * 1024 * 1024;

/// `value` as JSON for the journal, within the payload limit `max_payload_bytes`; `what` (a step
/// path, `var <name>`) names it in the error.
pub fn encode<T: serde::Serialize + ?Sized>(
    what: &str,
    value: &T,
    max_payload_bytes: usize,
) -> Result<Box<RawValue>, WorkflowError> {
    let raw = serde_json::value::to_raw_value(value)
        .map_err(|e| WorkflowError::Payload { path: what.to_owned(), message: e.to_string() })?;
    if raw.get().len() > max_payload_bytes {
        return Err(WorkflowError::PayloadTooLarge {
            path: what.to_owned(),
            size: raw.get().len(),
            limit: max_payload_bytes,
        });
    }
    Ok(raw)
}

/// How a run ended on a worker, as its watchers learn it without reading the store.
#[derive(Debug, Clone)]
pub struct Ended {
    /// Its status.
    pub status: RunStatus,
    /// Its output, if it completed.
    pub output: Option<Box<RawValue>>,
    /// Its error, if it failed or was parked.
    pub error: Option<String>,
}

impl Ended {
    /// How the run ends with `update`, if it ends (or is parked).
    pub fn of(update: &RunUpdate) -> Option<Ended> {
        match update {
            RunUpdate::Finish { status, output, error, .. } => {
                Some(Ended { status: *status, output: output.clone(), error: error.clone() })
            }
            RunUpdate::Continue { .. } => Some(Ended { status: RunStatus::Continued, output: None, error: None }),
            RunUpdate::Park { error } => {
                Some(Ended { status: RunStatus::Paused, output: None, error: Some(error.clone()) })
            }
            _ => None,
        }
    }
}

/// Why a run parked at an operator's request is paused (its row's error).
pub const PAUSED_BY_REQUEST: &str = "paused by request";

/// The reason a cancel journals when its canceller gave none.
pub const CANCELLED_BY_REQUEST: &str = "cancelled";

/// The error of a run parked because its body panicked.
fn body_panicked(message: &str) -> String {
    format!("[CAIRN-E0108] the workflow body panicked: {message}")
}

/// How far a run's body may go on this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Executes new steps.
    Live,
    /// The run crashed its workers this many times in a row: its first new step is not executed
    /// but parks the run as poison.
    Poisoned(u32),
    /// A replay check ([`crate::testing::replay`]): nothing is executed or written; the body
    /// stops at the first step its journal does not hold settled.
    ReplayCheck,
}

/// The engine settings a run's decisions depend on.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest JSON payload (a step's result, a durable value, the output) journaled.
    pub max_payload_bytes: usize,
    /// Parked sleeps that all end within this long keep the run in memory instead of suspending.
    pub suspend_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES, suspend_grace: Duration::from_secs(1) }
    }
}

/// What the journal says about a step the body asked for.
#[derive(Debug)]
pub struct Begun {
    /// The step's ordinal among the run's steps.
    pub ordinal: u32,
    /// Its journaled record, when the journal holds it (`None`: the step is new).
    pub record: Option<StepRecord>,
}

/// What a run knows of itself ([`Ctx::info`](crate::ctx::Ctx::info)): the same on every replay,
/// since it comes from the journal's `started` event and the run's row.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunInfo {
    /// The run's id.
    pub run_id: RunId,
    /// Its workflow's name.
    pub workflow: String,
    /// The workflow version it is pinned to.
    pub version: u32,
    /// When it times out, if it has a deadline.
    pub deadline: Option<Timestamp>,
    /// The run that started it as a child, if any.
    pub parent: Option<RunId>,
    /// The first run of its chain of continuations (itself, unless it continues another).
    pub first_of_chain: RunId,
    /// How many continuations led to it (0 for the first run of a chain).
    pub generation: u64,
}

/// Why the core refused what the body asked for.
#[derive(Debug)]
pub enum Refused {
    /// The body gets this error; the run goes on.
    Error(WorkflowError),
    /// The run must be interrupted for this reason (its tokens fire), and the body then gets
    /// [`RunCore::interrupted`].
    Interrupt(Interrupt),
}

/// How a run's execution on a worker ended.
#[derive(Debug)]
pub enum Outcome {
    /// The body returned.
    Returned(Result<Box<RawValue>, WorkflowError>),
    /// The body panicked with this message.
    Panicked(String),
    /// The driver stopped the body because the run was interrupted.
    Interrupted,
    /// The driver stopped the body to suspend the run with this update.
    Suspend(RunUpdate),
}

/// What an execution records when it ends, before the driver checks a continuation.
#[derive(Debug)]
pub enum Ending {
    /// Append these events with this row update.
    Record(Vec<Event>, RunUpdate),
    /// The body continues as new with this input: the driver builds the successor (it knows the
    /// registered versions), or fails the run with the error.
    ContinueAsNew(String),
}

#[derive(Debug, Clone, Copy)]
struct Suspension {
    reason: SuspendReason,
    wake_at: Option<Timestamp>,
    /// For a wait: every signal up to this id was in memory when it last looked (see
    /// `RunCore::signals_loaded_through`).
    looked_through: Option<SignalId>,
}

/// What a worker does with a run it has just claimed, before it reads its journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Execute it, in this mode (poisoned when its workers died `max_recoveries` times in a row
    /// without committing anything: its first new step parks it instead of running).
    Execute(Mode),
    /// Pause it for this reason without running anything: a pause was requested while its
    /// worker was gone.
    Pause(String),
    /// Park it with this error without running anything: a poisoned run's last replay crashed
    /// its worker before it reached a new step.
    Park(String),
}

/// What a worker does with `run`, just claimed, when a run may be recovered `max_recoveries`
/// times in a row before it is poison. A cancel requested while another worker held it is
/// finished once the run is loaded ([`RunRecord::pending`](cairn_store::RunRecord)).
///
/// ```
/// use cairn::run_core::{Admission, Mode, admission};
/// let mut run = cairn::RunRecord::of(&cairn::store::NewRun::new(
///     cairn::RunId::new("r"), cairn::WorkflowName::new("w").expect("a valid name"), 1, serde_json::value::RawValue::from_string("1".into()).unwrap(),
///     cairn::Timestamp::from_millis(0)));
/// assert_eq!(admission(&run, 3), Admission::Execute(Mode::Live));
/// run.recoveries = 4;
/// assert_eq!(admission(&run, 3), Admission::Execute(Mode::Poisoned(4)));
/// run.recoveries = 5;
/// assert!(matches!(admission(&run, 3), Admission::Park(error) if error.contains("CAIRN-E0109")));
/// ```
pub fn admission(run: &cairn_store::RunRecord, max_recoveries: u32) -> Admission {
    if let Some(Request::Pause { reason }) = &run.pending {
        return Admission::Pause(reason.clone());
    }
    if run.recoveries > max_recoveries.saturating_add(1) {
        let poisoned = Interrupt::Poisoned { path: None, recoveries: run.recoveries };
        return Admission::Park(poisoned.to_string());
    }
    match run.recoveries > max_recoveries {
        true => Admission::Execute(Mode::Poisoned(run.recoveries)),
        false => Admission::Execute(Mode::Live),
    }
}

/// One run's state machine on a worker: see the [module](self).
#[derive(Debug)]
pub struct RunCore {
    state: RunState,
    cursor: ReplayCursor,
    last_seq: u64,
    mode: Mode,
    limits: Limits,
    in_flight: usize,
    /// What most runs never need, made on first use ([`Rare`]): a run in flight is held in
    /// memory for its whole life, thousands at once.
    rare: Option<Box<Rare>>,
}

/// The part of a [`RunCore`] that most runs never touch: signals, sleeps and waits, interrupts,
/// patches, durable values, loop checkpoints and deterministic helpers.
#[derive(Debug, Default)]
struct Rare {
    /// Unconsumed signals, loaded on the first wait.
    signals: Option<Vec<SignalRecord>>,
    /// The newest signal of the store's last read: every signal of the run up to it was in
    /// memory from then on (a store numbers one run's signals in the order they commit). Signals
    /// delivered in this process do not move it: one may arrive after a wait looked, and another
    /// with a lower id may still be on its way, so a suspension counts only what was read.
    signals_loaded_through: SignalId,
    /// Signals this execution took (their consuming appends may not have committed yet).
    taken: HashSet<SignalId>,
    suspensions: HashMap<u64, Suspension>,
    next_suspension: u64,
    interrupt: Option<Interrupt>,
    /// The requested cancel or pause that stands ([`RunCore::request`]), whose reason is the
    /// cancelled run's error, or why it is paused.
    request: Option<Request>,
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
    /// How many of each deterministic helper (`ctx.now()`, …) each scope has used, which numbers
    /// their journal entries (`~now[0]`, `~now[1]`, …) the same way on every replay.
    helpers: HashMap<(StepPath, &'static str), u64>,
}

/// The [`Rare`] part of a run that has none yet.
static NO_RARE: std::sync::LazyLock<Rare> = std::sync::LazyLock::new(Rare::default);

impl RunCore {
    /// The core of a run whose journal folds to `state`.
    pub fn new(state: RunState, mode: Mode, limits: Limits) -> Self {
        let patches = state.patches();
        let rare = (!patches.is_empty()).then(|| Box::new(Rare { patches: patches.clone(), ..Rare::default() }));
        RunCore {
            cursor: ReplayCursor::new(&state),
            last_seq: state.last_seq(),
            mode,
            limits,
            in_flight: 0,
            rare,
            state,
        }
    }

    /// Its rare part, as it stands (empty when it has none).
    fn rare(&self) -> &Rare {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }

    /// Its rare part, to change (made on first use).
    fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// The run's folded journal as this worker loaded it.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// How far the body may go here.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// When the run times out (from its `started` event).
    pub fn deadline(&self) -> Option<Timestamp> {
        self.state.deadline()
    }

    /// The settings the core decides with.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Records why the run must stop; whether it stops at its next step boundary (a pause, a
    /// shutdown) rather than at once. The first reason wins, except that one that stops at once
    /// overrides one that waits for a boundary.
    pub fn interrupt(&mut self, why: Interrupt) -> bool {
        let at_boundary = why.lets_steps_finish();
        let replace = match &self.rare().interrupt {
            None => true,
            Some(current) => current.lets_steps_finish() && !at_boundary,
        };
        if replace {
            self.rare_mut().interrupt = Some(why);
        }
        at_boundary
    }

    /// A cancel or pause requested of the run: the interrupt it makes, to be given to
    /// [`interrupt`](Self::interrupt), with its reason kept for the run's ending when that
    /// interrupt is the one that stands (a cancel outranks a pause; a first cancel's reason gives
    /// way to a later cancel's, a first pause's reason stands).
    pub fn request(&mut self, request: &Request) -> Interrupt {
        let why = Self::interrupt_of(request);
        // As the store keeps them: a cancel replaces a pause (and an earlier cancel's reason);
        // a pause replaces nothing.
        let stands = match (&self.rare().interrupt, &why) {
            (None, _) => true,
            (Some(current), Interrupt::Cancelled) => *current == why || current.lets_steps_finish(),
            (Some(_), _) => false,
        };
        if stands {
            self.rare_mut().request = Some(request.clone());
        }
        why
    }

    /// The interrupt a requested cancel or pause makes.
    ///
    /// ```
    /// use cairn::run_core::RunCore;
    /// use cairn::{Interrupt, store::Request};
    /// let why = Request::Pause { reason: "deploy freeze".into() };
    /// assert_eq!(RunCore::interrupt_of(&why), Interrupt::Paused);
    /// ```
    pub fn interrupt_of(request: &Request) -> Interrupt {
        match request {
            Request::Cancel { .. } => Interrupt::Cancelled,
            Request::Pause { .. } => Interrupt::Paused,
        }
    }

    /// What run `id` (whose place among runs `lineage` describes) knows of itself.
    pub fn info(&self, id: &RunId, lineage: &Lineage) -> RunInfo {
        let (first, generation) = chain_position(id, lineage.continues);
        RunInfo {
            run_id: id.clone(),
            workflow: self.state.workflow().to_owned(),
            version: self.state.version(),
            deadline: self.deadline(),
            parent: lineage.parent.clone(),
            first_of_chain: RunId::new(first),
            generation,
        }
    }

    /// Why the run was interrupted, if it was.
    pub fn interruption(&self) -> Option<&Interrupt> {
        self.rare().interrupt.as_ref()
    }

    /// `Err` with the refusal if the run was interrupted (the body is refused what it asks for).
    pub fn admit(&mut self) -> Result<(), WorkflowError> {
        match self.rare().interrupt.clone() {
            Some(why) => {
                self.rare_mut().refused = true;
                Err(WorkflowError::Interrupted(why))
            }
            None => Ok(()),
        }
    }

    /// The error for the body when it must stop.
    pub fn interrupted(&mut self) -> WorkflowError {
        self.rare_mut().refused = true;
        WorkflowError::Interrupted(self.rare().interrupt.clone().unwrap_or(Interrupt::Cancelled))
    }

    /// Whether an interrupt stops appends at once (one that lets steps finish does not: a step
    /// that finished is committed).
    pub fn stops_appends(&self) -> bool {
        self.rare().interrupt.as_ref().is_some_and(|why| !why.lets_steps_finish())
    }

    /// After the body returned: the first journaled step it never asked for, if any, and how
    /// many journaled steps it did ask for.
    pub fn unreached(&self) -> (Result<(), NonDeterminism>, usize) {
        (self.cursor.finish(), self.cursor.replayed())
    }

    /// The body asks for `path`: checked against the journal, what is known of it.
    pub fn begin(&mut self, path: &StepPath, kind: StepKind) -> Result<Begun, Refused> {
        self.admit().map_err(Refused::Error)?;
        let replayed = self.cursor.request(path, kind);
        let record = self.state.step(path).filter(|_| matches!(replayed, Ok(Replayed::Known { .. })));
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
        if let Some(why) = stop {
            return Err(Refused::Interrupt(why));
        }
        let record = record.cloned();
        match replayed {
            Ok(Replayed::Known { ordinal }) => Ok(Begun { ordinal, record }),
            Ok(Replayed::New { ordinal }) => Ok(Begun { ordinal, record: None }),
            Err(error) => Err(cursor_refused(error)),
        }
    }

    /// The body will never ask for anything within `scope` (see [`ReplayCursor::skip_within`]).
    pub fn skip_within(&mut self, scope: &StepPath) {
        self.cursor.skip_within(scope);
    }

    /// The body marks `path` as a step its code no longer has.
    pub fn removed(&mut self, path: &StepPath) -> Result<(), Refused> {
        self.admit().map_err(Refused::Error)?;
        self.cursor.skip_removed(path).map(drop).map_err(cursor_refused)
    }

    /// The body evaluates patch marker `id`: the branch journaled for this run, or, the first
    /// time, the patched branch unless the body still replays what older code journaled; with
    /// the event to journal when it was decided now.
    pub fn patched(&mut self, id: &str) -> Result<(bool, Option<Event>), WorkflowError> {
        self.admit()?;
        if let Some(&applied) = self.rare().patches.get(id) {
            return Ok((applied, None));
        }
        let applied = self.cursor.past_journal();
        self.rare_mut().patches.insert(id.to_owned(), applied);
        Ok((applied, Some(Event::Patched { id: id.to_owned(), applied })))
    }

    /// The body starts the durable loop at `path`: its latest checkpoint, if the journal holds
    /// one, whose earlier iterations the cursor now skips and whose durable values the body sees.
    pub fn start_loop(&mut self, path: &StepPath) -> Result<Option<LoopRecord>, WorkflowError> {
        self.admit()?;
        let record = self.state.loop_record(path).cloned();
        if let Some(record) = &record {
            self.cursor.skip_iterations(path, record.next);
            self.rare_mut().vars.extend(record.vars.iter().map(|(name, value)| (name.clone(), value.clone())));
        }
        Ok(record)
    }

    /// Journals a loop's checkpoint with the run's next append, whatever that is. It replaces
    /// one of the same loop still waiting (iterations that journal nothing), taking over its
    /// trim. Lost if the run stops first: then a replay starts from the checkpoint before.
    pub fn defer_checkpoint(&mut self, mut checkpoint: Event) -> Result<(), WorkflowError> {
        self.admit()?;
        let same_loop = |event: &Event| match (event, &checkpoint) {
            (Event::LoopCheckpoint { path: a, .. }, Event::LoopCheckpoint { path: b, .. }) => a == b,
            _ => false,
        };
        if let Some(index) = self.rare().deferred.iter().position(same_loop) {
            let waiting = self.rare_mut().deferred.remove(index);
            if let (Some((_, older)), Event::LoopCheckpoint { trim: Some(newer), .. }) =
                (waiting.trim(), &mut checkpoint)
            {
                newer.after = newer.after.min(older.after);
            }
        }
        self.rare_mut().deferred.push(checkpoint);
        Ok(())
    }

    /// Every durable value as the body has set it.
    pub fn vars(&self) -> &BTreeMap<String, Box<RawValue>> {
        &self.rare().vars
    }

    /// Durable value `name` as this execution last set it.
    pub fn var(&self, name: &str) -> Option<&RawValue> {
        self.rare().vars.get(name).map(|value| &**value)
    }

    /// The body sets durable value `name`; the event to journal when the body runs past what
    /// the journal holds (while it replays, an earlier execution journaled the set).
    pub fn set_var(&mut self, name: &str, value: Box<RawValue>) -> Result<Option<Event>, WorkflowError> {
        self.admit()?;
        self.rare_mut().vars.insert(name.to_owned(), value.clone());
        Ok(self.cursor.past_journal().then(|| Event::VarSet { name: name.to_owned(), value }))
    }

    /// The journal's last entry so far, once the body runs past what the journal held.
    pub fn live_position(&self) -> Option<u64> {
        self.cursor.past_journal().then_some(self.last_seq)
    }

    /// The loop at `path` trimmed its iterations before `below`: forget what is kept of them.
    pub fn forget_iterations(&mut self, path: &StepPath, below: u64) {
        self.cursor.forget_iterations(path, below);
        if let Some(rare) = self.rare.as_deref_mut() {
            rare.helpers.retain(|(scope, _), _| scope.iteration_of(path).is_none_or(|i| i >= below));
        }
    }

    /// The number of the next `kind` helper used in `scope`.
    pub fn next_helper(&mut self, scope: &StepPath, kind: &'static str) -> u64 {
        let next = self.rare_mut().helpers.entry((scope.clone(), kind)).or_insert(0);
        *next += 1;
        *next - 1
    }

    /// A step body starts executing.
    pub fn start_work(&mut self) {
        self.in_flight += 1;
    }

    /// A step body is done; whether the driver should look again (only the last step finishing
    /// while something is parked, or while the run must stop, can change what it decides).
    pub fn end_work(&mut self) -> bool {
        self.in_flight -= 1;
        self.in_flight == 0 && (!self.rare().suspensions.is_empty() || self.rare().interrupt.is_some())
    }

    /// The append of `events` (after any deferred checkpoint) with `update`, numbered after the
    /// journal's end, which it moves on.
    pub fn prepare_append(
        &mut self,
        run: (&RunId, u64),
        events: Vec<Event>,
        update: RunUpdate,
        consume_signal: Option<SignalId>,
        at: Timestamp,
        batched: bool,
    ) -> Append {
        let events = match self.rare().deferred.is_empty() {
            true => events,
            false => std::mem::take(&mut self.rare_mut().deferred).into_iter().chain(events).collect(),
        };
        let after_seq = self.last_seq;
        self.last_seq += events.len() as u64;
        Append { run_id: run.0.clone(), epoch: run.1, after_seq, events, at, update, consume_signal, batched }
    }

    /// The body parks (a sleep, a retry's wait, a wait for a signal that has just looked at the
    /// signals in memory and found none); the key that ends it.
    pub fn park(&mut self, reason: SuspendReason, wake_at: Option<Timestamp>, waits_for_signal: bool) -> u64 {
        let key = self.rare().next_suspension;
        self.rare_mut().next_suspension += 1;
        let looked_through = waits_for_signal.then_some(self.rare().signals_loaded_through);
        self.rare_mut().suspensions.insert(key, Suspension { reason, wake_at, looked_through });
        key
    }

    /// The park `key` ended.
    pub fn unpark(&mut self, key: u64) {
        if let Some(rare) = self.rare.as_deref_mut() {
            rare.suspensions.remove(&key);
        }
    }

    /// Whether the run's unconsumed signals were loaded.
    pub fn signals_loaded(&self) -> bool {
        self.rare().signals.is_some()
    }

    /// The run's signals as the store holds them: the unconsumed ones this execution did not
    /// take become the ones waits look at.
    pub fn load_signals(&mut self, signals: Vec<SignalRecord>) {
        let newest = signals.iter().map(|s| s.id).max().unwrap_or(SignalId(0));
        let rare = self.rare_mut();
        rare.signals_loaded_through = rare.signals_loaded_through.max(newest);
        let unconsumed: Vec<SignalRecord> = signals
            .into_iter()
            .filter(|s| {
                s.consumed_seq.is_none() && !self.rare().taken.contains(&s.id) && !self.state.has_consumed(s.id)
            })
            .collect();
        self.rare_mut().signals = Some(unconsumed);
    }

    /// Takes the oldest unconsumed signal named `name` whose payload contains `filter`.
    pub fn take_signal(&mut self, name: &str, filter: Option<&serde_json::Value>) -> Option<SignalRecord> {
        let signals = self.rare.as_deref_mut()?.signals.as_mut()?;
        let position = signals.iter().position(|s| {
            s.name == name
                && filter.is_none_or(|filter| {
                    serde_json::from_str::<serde_json::Value>(s.payload.get())
                        .is_ok_and(|payload| cairn_journal::json_contains(&payload, filter))
                })
        })?;
        let signal = signals.remove(position);
        self.rare_mut().taken.insert(signal.id);
        Some(signal)
    }

    /// A signal delivered while the run executes here. Before the first load it is left to the
    /// load; one a wait took already (found in the store before its sender delivered it here) is
    /// not taken twice.
    pub fn deliver(&mut self, signal: SignalRecord) {
        let known = self.rare().taken.contains(&signal.id) || self.state.has_consumed(signal.id);
        if let Some(signals) = self.rare.as_deref_mut().and_then(|rare| rare.signals.as_mut())
            && !known
            && !signals.iter().any(|s| s.id == signal.id)
        {
            signals.push(signal);
        }
    }

    /// Whether the driver should stop the body now because of an interrupt: one that stops at
    /// once does; one that waits for a step boundary does once no step is in flight. `None`:
    /// the run is not interrupted.
    pub fn stops_now(&self) -> Option<bool> {
        self.rare().interrupt.as_ref().map(|why| !why.lets_steps_finish() || self.in_flight == 0)
    }

    /// Whether the run should suspend at `now`: nothing executing, something parked, and
    /// either a wait among them or the earliest wake-up beyond the grace period.
    pub fn suspension_plan(&self, now: Timestamp) -> Option<RunUpdate> {
        if self.in_flight > 0 || self.rare().suspensions.is_empty() {
            return None;
        }
        // Everything parked ends within the grace period: stay in memory (a wait among them is
        // woken by its signal without a round through the store).
        let soon = now + self.limits.suspend_grace;
        if self.rare().suspensions.values().all(|s| s.wake_at.is_some_and(|w| w <= soon)) {
            return None;
        }
        // The store wakes the run for any signal newer than what every parked wait looked at.
        let signals_after = self.rare().suspensions.values().filter_map(|s| s.looked_through).min();
        let earliest =
            self.rare().suspensions.values().filter(|s| s.wake_at.is_some()).min_by_key(|s| s.wake_at).copied();
        // A run with a deadline is woken by it at the latest, to time out.
        let wake_at = earliest.and_then(|s| s.wake_at).into_iter().chain(self.deadline()).min();
        let reason = earliest.map_or(SuspendReason::Waiting, |s| s.reason);
        Some(RunUpdate::Suspend { reason, wake_at, signals_after, now })
    }

    /// What to record for an execution that ended with `outcome` at `now`, or `None` when this
    /// worker may not write (its lease was lost, the store failed).
    pub fn record(&self, outcome: Outcome, now: Timestamp) -> Option<Ending> {
        let finish = |status: RunStatus, output: Option<Box<RawValue>>, error: Option<String>| RunUpdate::Finish {
            status,
            output,
            error,
            at: now,
        };
        let failed = |error: String| {
            Ending::Record(vec![Event::Failed { error: error.clone() }], finish(RunStatus::Failed, None, Some(error)))
        };
        let park = |error: String| Ending::Record(Vec::new(), RunUpdate::Park { error });
        // A run asked to stop at a step boundary that finished on its own anyway (its body
        // returned without being refused anything) records how it finished.
        let interrupt = match (&self.rare().interrupt, &outcome) {
            (Some(why), Outcome::Returned(_)) if why.lets_steps_finish() && !self.rare().refused => None,
            (interrupt, _) => interrupt.clone(),
        };
        match (interrupt, outcome) {
            (Some(Interrupt::Cancelled), _) => {
                let reason = match &self.rare().request {
                    Some(Request::Cancel { reason }) => reason.clone(),
                    _ => CANCELLED_BY_REQUEST.to_owned(),
                };
                Some(Ending::Record(
                    vec![Event::Cancelled { reason: reason.clone() }],
                    finish(RunStatus::Cancelled, None, Some(reason)),
                ))
            }
            (Some(Interrupt::TimedOut), _) => Some(failed(Interrupt::TimedOut.to_string())),
            (Some(why @ (Interrupt::NonDeterminism(_) | Interrupt::Poisoned { .. })), _) => Some(park(why.to_string())),
            (Some(Interrupt::Paused), _) => Some(park(match &self.rare().request {
                Some(Request::Pause { reason }) => reason.clone(),
                _ => PAUSED_BY_REQUEST.to_owned(),
            })),
            (Some(Interrupt::ShuttingDown), _) => Some(Ending::Record(Vec::new(), RunUpdate::Release)),
            (Some(_), _) | (None, Outcome::Interrupted) => None,
            (None, Outcome::Panicked(message)) => Some(park(body_panicked(&message))),
            (None, Outcome::Suspend(plan)) => Some(Ending::Record(Vec::new(), plan)),
            (None, Outcome::Returned(Ok(output))) => {
                let limit = self.limits.max_payload_bytes;
                match self.unreached().0 {
                    Err(error) => Some(park(error.to_string())),
                    Ok(()) if output.get().len() > limit => Some(failed(
                        WorkflowError::PayloadTooLarge { path: "output".into(), size: output.get().len(), limit }
                            .to_string(),
                    )),
                    Ok(()) => Some(Ending::Record(
                        vec![Event::Completed { output: output.clone() }],
                        finish(RunStatus::Completed, Some(output), None),
                    )),
                }
            }
            (None, Outcome::Returned(Err(WorkflowError::ContinueAsNew { input }))) => match self.unreached().0 {
                Err(error) => Some(park(error.to_string())),
                Ok(()) => Some(Ending::ContinueAsNew(input)),
            },
            (None, Outcome::Returned(Err(error))) => Some(failed(error.to_string())),
        }
    }
}

/// The refusal of a request the cursor refused; non-determinism interrupts the run.
fn cursor_refused(error: CursorError) -> Refused {
    match error {
        CursorError::DuplicatePath(path) => Refused::Error(WorkflowError::DuplicatePath(path)),
        CursorError::NonDeterminism(error) => Refused::Interrupt(Interrupt::NonDeterminism(error)),
        other => Refused::Error(WorkflowError::Failed(other.to_string())),
    }
}

/// What an operator is told when a run's ending is recorded: a run that failed or was parked is
/// one warning line with its error code (`CAIRN-E…`, when its error carries one).
pub(crate) struct EndingLog(Option<(&'static str, String)>);

/// The [`EndingLog`] of `update`; a park that a requested pause (`requested`) made is not a fault.
pub(crate) fn log_line(update: &cairn_store::RunUpdate, requested: bool) -> EndingLog {
    EndingLog(match update {
        cairn_store::RunUpdate::Finish { status: cairn_store::RunStatus::Failed, error, .. } => {
            Some(("failed", error.clone().unwrap_or_default()))
        }
        cairn_store::RunUpdate::Park { error } if !requested => Some(("parked", error.clone())),
        _ => None,
    })
}

impl EndingLog {
    /// Logs it, once the ending is recorded.
    pub(crate) fn log(self, run_id: &cairn_store::RunId, workflow: Option<&str>) {
        let Some((ended, error)) = self.0 else { return };
        let workflow = workflow.unwrap_or("");
        // A code only where the error has one: an error of the workflow's own (a step that
        // failed for good, an `Err` of the body) has none, and no `code=""` is logged for it.
        match error.strip_prefix('[').and_then(|rest| rest.split_once(']')) {
            Some((code, _)) => tracing::warn!(run_id = %run_id, workflow, code, "run {ended}: {error}"),
            None => tracing::warn!(run_id = %run_id, workflow, "run {ended}: {error}"),
        }
    }
}
