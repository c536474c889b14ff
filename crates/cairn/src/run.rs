//! One run executing on this worker: the async driver of its [`RunCore`]. The core decides (what
//! the journal says of a step, what to append, when to suspend, how the run ends); the driver
//! carries it out: it appends to the store, sleeps on the clock, wakes the run's waits, fires the
//! cancellation tokens of its steps, and records how the execution ended.

use crate::attach::Host;
use crate::client::Client;
use crate::clock::Clock;
use crate::error::{Interrupt, WorkflowError};
use crate::flow::RateTurns;
use crate::run_core::{
    Begun, Ended, Ending, Limits, Lineage, Mode, Outcome, Refused, RunCore, RunInfo, encode, successor,
};
use cairn_journal::{Event, NonDeterminism, RunState, SignalId, StepKind, StepPath, Timestamp};
use cairn_store::{Request, RunId, RunStatus, RunUpdate, SignalRecord, Store, StoreError, SuspendReason, WorkflowName};
use serde_json::value::RawValue;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// A workflow body's future, type-erased: its output as JSON.
pub(crate) type BodyFuture = Pin<Box<dyn Future<Output = Result<Box<RawValue>, WorkflowError>> + Send + 'static>>;

/// What a workflow's steps use unless they say otherwise.
#[derive(Clone, Debug, Default)]
pub(crate) struct StepDefaults {
    /// The retry policy (default: [`cairn_journal::RetryPolicy::default`]).
    pub(crate) retry: Option<cairn_journal::RetryPolicy>,
    /// A timeout for each attempt (default: none).
    pub(crate) timeout: Option<Duration>,
}

/// Everything a run needs from its worker, gathered by the worker when it loads the run: what
/// every run of the worker shares, what every run of its workflow shares, and its own.
pub(crate) struct RunSetup {
    /// The worker's client, the worker and its settings: one for all its runs.
    pub(crate) worker: Arc<WorkerSetup>,
    /// What the workflow's steps use unless they say otherwise: one for all its runs.
    pub(crate) step_defaults: Arc<StepDefaults>,
    /// The turns the workflow's rate limits give the run (by its input).
    pub(crate) rate_turns: Vec<RateTurns>,
}

/// What every run of a worker shares ([`RunSetup::worker`]).
pub(crate) struct WorkerSetup {
    /// A client attached to the worker, over its store and clock (children start through it).
    pub(crate) client: Client,
    /// The worker itself.
    pub(crate) host: Arc<dyn Host>,
    /// How often a wait looks for signals from other processes when the store does not report
    /// them.
    pub(crate) poll_interval: Duration,
    /// The payload limit and suspension grace.
    pub(crate) limits: Limits,
}

/// A run this worker holds the lease of.
pub(crate) struct RunShared {
    pub(crate) id: RunId,
    /// What its successor inherits, should it continue as new.
    pub(crate) lineage: Lineage,
    /// Its workflow's name (shared with its record's).
    pub(crate) workflow: WorkflowName,
    pub(crate) epoch: u64,
    /// The worker's store, clock, client and settings.
    pub(crate) setup: RunSetup,
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
    /// Appends sent to the store and not answered yet. A run stopped at once is driven until
    /// they are answered, so a refusal (a fenced append) reaches its step and is logged.
    appending: AtomicUsize,
    core: Mutex<RunCore>,
}

/// Counts an append in [`RunShared::appending`] while it is in flight.
struct Appending<'a>(&'a RunShared);

impl Drop for Appending<'_> {
    fn drop(&mut self) {
        if self.0.appending.fetch_sub(1, Ordering::SeqCst) == 1 && self.0.stop.is_cancelled() {
            // The driver waits for the last append of a run stopped at once.
            self.0.changed.notify_one();
        }
    }
}

/// Decrements the in-flight count when a step body is done (or dropped).
pub(crate) struct InFlight<'a>(&'a RunShared);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let worth_a_look = self.0.lock().end_work();
        if worth_a_look {
            self.0.changed.notify_one();
        }
    }
}

/// Ends a park when dropped.
struct Registration<'a> {
    shared: &'a RunShared,
    key: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.shared.lock().unpark(self.key);
    }
}

impl RunShared {
    pub(crate) fn new(
        (id, workflow): (RunId, WorkflowName),
        lineage: Lineage,
        epoch: u64,
        setup: RunSetup,
        state: RunState,
        mode: Mode,
    ) -> Self {
        let stop = CancellationToken::new();
        Self {
            id,
            lineage,
            workflow,
            epoch,
            halt: stop.child_token(),
            stop,
            changed: Notify::new(),
            signals_changed: std::sync::OnceLock::new(),
            appending: AtomicUsize::new(0),
            core: Mutex::new(RunCore::new(state, mode, setup.worker.limits)),
            setup,
        }
    }

    /// The run's core, to ask it directly (its decisions and what it keeps) where nothing
    /// else needs doing around the question.
    pub(crate) fn lock(&self) -> MutexGuard<'_, RunCore> {
        // Nothing panics while holding this lock except on a bug; keep going with the data as is.
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the run knows of itself.
    pub(crate) fn info(&self) -> RunInfo {
        self.lock().info(&self.id, &self.lineage)
    }

    /// What the run's steps use unless they say otherwise.
    pub(crate) fn step_defaults(&self) -> &StepDefaults {
        &self.setup.step_defaults
    }

    /// The worker's clock.
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.setup.worker.client.clock
    }

    /// The worker's store.
    fn store(&self) -> &dyn Store {
        &*self.setup.worker.client.store
    }

    /// A client attached to the worker.
    pub(crate) fn client(&self) -> &Client {
        &self.setup.worker.client
    }

    /// Whether the run's workflow has rate limits at all (else [`turn`](Self::turn) is now).
    pub(crate) fn rate_limited(&self) -> bool {
        !self.setup.rate_turns.is_empty()
    }

    /// Whether a rate limit holds back this run's start.
    pub(crate) fn limits_start(&self) -> bool {
        self.setup.rate_turns.iter().any(|turns| turns.step.is_none())
    }

    /// Waits for this run's turn under its workflow's rate limit on starts (`step` `None`) or on
    /// the steps named `step`, suspended while the limit holds it back; when the turn was
    /// granted (now, for what no limit holds back).
    pub(crate) async fn turn(&self, step: Option<&StepPath>) -> Result<Timestamp, WorkflowError> {
        // A step's limit is named by its last segment.
        let name = step.map(StepPath::name);
        let Some(turns) = self.setup.rate_turns.iter().find(|turns| turns.step.as_deref() == name) else {
            return Ok(self.now());
        };
        if self.lock().mode() == Mode::ReplayCheck {
            return Ok(self.now());
        }
        // Boxed, as a park is: rare, and held inline its future would size every step's.
        Box::pin(self.wait_for_turn(turns)).await
    }

    /// Takes turns from the store until one is granted, parked while the limit holds the run back.
    async fn wait_for_turn(&self, turns: &RateTurns) -> Result<Timestamp, WorkflowError> {
        loop {
            self.lock().admit()?;
            let take = turns.at(self.now());
            match self.store().take_rate(&take).await {
                Ok(None) => return Ok(take.now),
                Ok(Some(at)) => {
                    crate::telemetry::delayed(&self.workflow, cairn_store::WaitingFor::Rate);
                    self.park(Some(at), SuspendReason::RateLimited, None).await?;
                }
                Err(error) => {
                    self.interrupt(Interrupt::Store(error));
                    return Err(self.lock().interrupted());
                }
            }
        }
    }

    pub(crate) fn now(&self) -> Timestamp {
        self.setup.worker.client.clock.now()
    }

    /// Records why the run must stop and stops it: at once (step code sees its cancellation
    /// token fire), or at its next step boundary for a pause or a shutdown (see
    /// [`RunCore::interrupt`]).
    pub(crate) fn interrupt(&self, why: Interrupt) {
        let at_boundary = self.lock().interrupt(why);
        if at_boundary {
            self.halt.cancel();
        } else {
            self.stop.cancel();
        }
        self.changed.notify_one();
    }

    /// A cancel or pause requested of the run, with the reason it ends or is parked with.
    pub(crate) fn request(&self, request: &Request) {
        let why = self.lock().request(request);
        self.interrupt(why);
    }

    /// Fires the step bodies' cancellation tokens of a run that is stopping at its next step
    /// boundary but whose steps did not finish in time (a shutdown's grace period ran out).
    pub(crate) fn stop_steps(&self) {
        self.stop.cancel();
    }

    /// The body's error for a refusal of the core: an interrupt stops the run first.
    fn refused(&self, refused: Refused) -> WorkflowError {
        match refused {
            Refused::Error(error) => error,
            Refused::Interrupt(why) => {
                self.interrupt(why);
                self.lock().interrupted()
            }
        }
    }

    /// The body asks for `path`: check it against the journal and return what is known.
    pub(crate) fn begin(&self, path: &StepPath, kind: StepKind) -> Result<Begun, WorkflowError> {
        let begun = self.lock().begin(path, kind);
        begun.map_err(|refused| self.refused(refused))
    }

    /// The body's error for a divergence from the journal: the run parks with it.
    pub(crate) fn diverged(&self, error: NonDeterminism) -> WorkflowError {
        self.refused(Refused::Interrupt(Interrupt::NonDeterminism(error)))
    }

    /// The body evaluates patch marker `id` (see [`RunCore::patched`]).
    pub(crate) async fn patched(&self, id: &str) -> Result<bool, WorkflowError> {
        let (applied, event) = self.lock().patched(id)?;
        if let Some(event) = event {
            self.append(vec![event], None).await?;
        }
        Ok(applied)
    }

    /// `value` as JSON for the journal, within the engine's payload limit; `what` (a step path,
    /// `var <name>`) names it in the error.
    pub(crate) fn encode<T: serde::Serialize + ?Sized>(
        &self,
        what: &str,
        value: &T,
    ) -> Result<Box<RawValue>, WorkflowError> {
        encode(what, value, self.setup.worker.limits.max_payload_bytes)
    }

    /// The body sets durable value `name` (see [`RunCore::set_var`]).
    pub(crate) async fn set_var(&self, name: &str, value: Box<RawValue>) -> Result<(), WorkflowError> {
        let event = self.lock().set_var(name, value)?;
        if let Some(event) = event {
            self.append(vec![event], None).await?;
        }
        Ok(())
    }

    /// The body marks `path` as a step its code no longer has (see [`Ctx::removed`](crate::ctx::Ctx::removed)).
    pub(crate) fn removed(&self, path: &StepPath) -> Result<(), WorkflowError> {
        let removed = self.lock().removed(path);
        removed.map_err(|refused| self.refused(refused))
    }

    pub(crate) fn start_work(&self) -> InFlight<'_> {
        self.lock().start_work();
        InFlight(self)
    }

    /// Appends events while the run goes on (also while it stops at a step boundary: a step
    /// that finished is committed). Any store failure interrupts the run.
    pub(crate) async fn append(&self, events: Vec<Event>, consume: Option<SignalId>) -> Result<(), WorkflowError> {
        self.append_at(events, consume, self.now(), false).await
    }

    /// [`append`](Self::append) journaled at `at` (a time the caller read anyway), `batched`
    /// when other appends of the run go out at about the same time (see
    /// [`Append::batched`](cairn_store::Append::batched)).
    pub(crate) async fn append_at(
        &self,
        events: Vec<Event>,
        consume: Option<SignalId>,
        at: Timestamp,
        batched: bool,
    ) -> Result<(), WorkflowError> {
        let (stopping, mode) = {
            let core = self.lock();
            (core.stops_appends(), core.mode())
        };
        if stopping {
            return Err(self.lock().interrupted());
        }
        if mode == Mode::ReplayCheck {
            return Ok(());
        }
        // The first step the events name (a shared path: a reference count, no copy), so a
        // refused append can say which step it was.
        let step = events.iter().find_map(Event::path).cloned();
        self.append_raw(events, RunUpdate::Progress, consume, at, batched).await.map_err(|error| {
            self.interrupt(match error {
                StoreError::Fenced { held, current, .. } => {
                    self.fenced(step.as_ref().map_or("", StepPath::as_str), held, current);
                    Interrupt::LeaseLost
                }
                other => Interrupt::Store(other),
            });
            self.lock().interrupted()
        })
    }

    /// Says that the store refused an append of `step` (if it was one's) because the run's
    /// lease moved on from this worker's epoch `held` to `current`: at warn, and in
    /// [`FENCED_APPENDS`](crate::telemetry::FENCED_APPENDS).
    fn fenced(&self, step: &str, held: u64, current: u64) {
        tracing::warn!(
            run_id = %self.id,
            step,
            epoch = held,
            current_epoch = current,
            "run {}: append{}{step} refused: its lease moved on from this worker's epoch {held} to epoch {current} \
             (another worker took the run over); stopping it here",
            self.id,
            if step.is_empty() { "" } else { " of step " },
        );
        crate::telemetry::fenced_append(&self.workflow);
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
            let mut core = self.lock();
            let append = core.prepare_append((&self.id, self.epoch), events, update, consume, at, batched);
            self.store().append(append)
        };
        self.appending.fetch_add(1, Ordering::SeqCst);
        let _appending = Appending(self);
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
            return self.lock().admit();
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
        let key = self.lock().park(reason, wake_at, signals.is_some());
        let _registration = Registration { shared: self, key };
        self.changed.notify_one();
        let sleep = async {
            match wake_at {
                Some(at) => self.clock().sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let signal = async {
            match signals.as_mut() {
                // Without reports from the store, signals from other processes are looked for
                // every poll interval while a wait stays in memory.
                Some(receiver) if self.setup.worker.host.notices_reported() => {
                    if receiver.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                Some(receiver) => {
                    let _ = tokio::time::timeout(self.setup.worker.poll_interval, receiver.changed()).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            () = self.halt.cancelled() => {}
            () = signal => {}
        }
        self.lock().admit()
    }

    /// A receiver that sees every later change of the run's signals (see [`RunShared::park`]).
    pub(crate) fn watch_signals(&self) -> watch::Receiver<u64> {
        self.signals_changed.get_or_init(|| watch::Sender::new(0)).subscribe()
    }

    /// Loads the run's unconsumed signals once; `true` if this call read them from the store.
    pub(crate) async fn load_signals(&self) -> Result<bool, WorkflowError> {
        if self.lock().signals_loaded() {
            return Ok(false);
        }
        self.refresh_signals().await?;
        Ok(true)
    }

    /// Reads the run's unconsumed signals from the store again (another process may have sent
    /// some), keeping out those this execution took already.
    pub(crate) async fn refresh_signals(&self) -> Result<(), WorkflowError> {
        let signals = self.store().signals(&self.id).await.map_err(|e| {
            self.interrupt(Interrupt::Store(e));
            self.lock().interrupted()
        })?;
        self.lock().load_signals(signals);
        Ok(())
    }

    /// A signal delivered in this process while the run executes here.
    pub(crate) fn deliver(&self, signal: SignalRecord) {
        self.lock().deliver(signal);
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

    /// The hand-over to the run this one continues as, with `input`: the newest version of the
    /// workflow this worker registers, the same parent, deadline and retention.
    fn successor(&self, input: String, now: Timestamp) -> Result<(Vec<Event>, RunUpdate), WorkflowError> {
        let (version, check) = self.setup.worker.host.successor(&self.workflow);
        let deadline = self.lock().deadline();
        successor(
            (&self.id, &self.workflow),
            &self.lineage,
            deadline,
            (input, self.setup.worker.limits.max_payload_bytes),
            (version, check.as_ref()),
            now,
        )
    }
}

/// Drives a run's body until it returns, suspends or is interrupted, then records the outcome;
/// how the run ended, if it ended here.
pub(crate) async fn drive(shared: Arc<RunShared>, body: BodyFuture) -> Option<Ended> {
    let outcome = execute(&shared, body).await;
    // Boxed: the ending is recorded once, at the end; held inline its future would size the
    // task of every run in flight for its whole life.
    Box::pin(record_ending(&shared, outcome)).await
}

/// Drives the body until it returns, panics, must stop or suspends.
async fn execute(shared: &RunShared, body: BodyFuture) -> Outcome {
    let mut body = Box::pin(crate::panic::caught(body));
    let deadline_at = shared.lock().deadline();
    // Interrupts the run at its deadline; never completes.
    let deadline = async {
        if let Some(at) = deadline_at {
            shared.clock().sleep_until(at).await;
            shared.interrupt(Interrupt::TimedOut);
        }
        std::future::pending::<()>().await
    };
    tokio::pin!(deadline);
    if deadline_at.is_some_and(|at| at <= shared.now()) {
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
                let core = shared.lock();
                match core.stops_now() {
                    // Appends in flight are answered first (see `RunShared::appending`).
                    Some(true) if shared.appending.load(Ordering::SeqCst) > 0 => continue,
                    // A pause or a shutdown lets steps in flight finish and commit first.
                    Some(true) => break Outcome::Interrupted,
                    Some(false) => continue,
                    None => {}
                }
                if let Some(plan) = core.suspension_plan(shared.now()) {
                    break Outcome::Suspend(plan);
                }
            }
        }
    };
    drop(body);
    outcome
}

/// Records how the execution ended (`outcome`), unless this worker may no longer write.
async fn record_ending(shared: &RunShared, outcome: Outcome) -> Option<Ended> {
    let now = shared.now();
    let ending = shared.lock().record(outcome, now)?;
    let (mut events, mut update) = match ending {
        Ending::Record(events, update) => (events, update),
        Ending::ContinueAsNew(input) => shared.successor(input, now).unwrap_or_else(|error| {
            let error = error.to_string();
            (
                vec![Event::Failed { error: error.clone() }],
                RunUpdate::Finish { status: RunStatus::Failed, output: None, error: Some(error), at: now },
            )
        }),
    };
    if let RunUpdate::Continue { successor, at } = &update
        && let Ok(Some(_)) = shared.store().get_run(&successor.id).await
    {
        // Someone created a run with this id: the chain cannot go on under it.
        let error = format!("[CAIRN-E0116] the run cannot continue as new: run id `{}` is taken", successor.id);
        let at = *at;
        events = vec![Event::Failed { error: error.clone() }];
        update = RunUpdate::Finish { status: RunStatus::Failed, output: None, error: Some(error), at };
    }
    let ended = Ended::of(&update);
    let ending = crate::run_core::log_line(&update, matches!(shared.lock().interruption(), Some(Interrupt::Paused)));
    // A suspension's wake-up time is news to the claim loop, which may be sleeping towards a
    // later one.
    let suspends = matches!(update, RunUpdate::Suspend { .. });
    match shared.append_raw(events, update, None, shared.now(), false).await {
        Ok(()) => {
            ending.log(&shared.id, Some(&shared.workflow));
            if suspends {
                shared.setup.worker.host.wake_claimer();
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
