//! Runs as stores keep them: ids, statuses, the run record, and what a new run is created from.

use super::flow::*;
use cairn_journal::flow::{WaitingFor, debounce_until, debounce_wake};
use cairn_journal::{Event, SignalId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;
use std::time::Duration;

/// A run's identity: caller-given or generated, unique in a store forever.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    /// Wraps an id; see [`RunId::validate`] for what is accepted from callers.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The most characters a caller-given id may have.
    pub const MAX_CHARS: usize = 200;
    /// The characters a caller-given id may not hold besides control characters.
    pub const FORBIDDEN: &'static [char] = &['/'];

    /// Checks a caller-given id: 1 to 200 characters, no control characters, no `/`.
    pub fn validate(id: &str) -> Result<RunId, StoreError> {
        if !super::names::keeps(id, Self::MAX_CHARS, Self::FORBIDDEN) {
            return Err(StoreError::InvalidInput(format!(
                "run id {id:?} must be 1 to 200 characters without control characters or `/`"
            )));
        }
        Ok(RunId(id.to_owned()))
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for RunId {
    fn from(value: &str) -> Self {
        RunId(value.to_owned())
    }
}

/// A workflow name with one version: what a worker can execute.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkflowKey {
    /// Registered name.
    pub name: String,
    /// Version.
    pub version: u32,
}

impl WorkflowKey {
    /// `name@version`, the form stores match on.
    pub fn tag(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }

    /// Reads a [`tag`](WorkflowKey::tag) back (the version follows the last `@`).
    pub fn parse_tag(tag: &str) -> Option<WorkflowKey> {
        let (name, version) = tag.rsplit_once('@')?;
        Some(WorkflowKey { name: name.to_owned(), version: version.parse().ok()? })
    }
}

/// Where a run stands. The names are the lowercase names of the design brief.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Created, not yet claimed by a worker.
    Pending,
    /// A worker holds it.
    Running,
    /// Waiting for time or a signal; no worker holds it.
    Suspended,
    /// Finished with an output.
    Completed,
    /// Finished with an error.
    Failed,
    /// Cancelled.
    Cancelled,
    /// Parked until an operator acts (e.g. after a non-determinism error).
    Paused,
    /// Ended by handing over to a fresh run of the same workflow (`continued_as`).
    Continued,
}

impl RunStatus {
    /// All statuses.
    pub const ALL: [RunStatus; 8] = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Suspended,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::Paused,
        RunStatus::Continued,
    ];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Suspended => "suspended",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Paused => "paused",
            RunStatus::Continued => "continued",
        }
    }

    /// Parses a lowercase name.
    pub fn parse(text: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Parses a name a person or a client gave: an unknown one is an error that lists the
    /// known ones.
    pub fn parse_given(text: &str) -> Result<RunStatus, String> {
        RunStatus::parse(text).ok_or_else(|| {
            let known: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!("unknown status {text:?}; expected one of {}", known.join(", "))
        })
    }

    /// Parses a name read back from a store: an unknown one means the store is corrupt.
    pub fn parse_stored(text: &str) -> Result<RunStatus, StoreError> {
        RunStatus::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown status {text}")))
    }

    /// Whether the run has ended for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled | RunStatus::Continued)
    }

    /// Whether a run in this status needs a worker that serves its version to go on: pending,
    /// running or suspended (not ended, and not paused, which waits for an operator instead).
    pub fn needs_worker(self) -> bool {
        matches!(self, RunStatus::Pending | RunStatus::Running | RunStatus::Suspended)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a suspended run is suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuspendReason {
    /// In a durable sleep.
    Sleeping,
    /// Waiting for a signal.
    Waiting,
    /// Waiting to retry a failed step.
    BackingOff,
    /// Waiting for its turn under a rate limit (to start, or to run a step).
    RateLimited,
    /// A debounced start that has not begun: later starts with its debounce key replace its
    /// input and push its wake-up back ([`Debounce`]).
    Debouncing,
}

impl SuspendReason {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SuspendReason::Sleeping => "sleeping",
            SuspendReason::Waiting => "waiting",
            SuspendReason::BackingOff => "backing-off",
            SuspendReason::RateLimited => "rate-limited",
            SuspendReason::Debouncing => "debouncing",
        }
    }

    /// Parses a kebab-case name.
    pub fn parse(text: &str) -> Option<SuspendReason> {
        [
            SuspendReason::Sleeping,
            SuspendReason::Waiting,
            SuspendReason::BackingOff,
            SuspendReason::RateLimited,
            SuspendReason::Debouncing,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// A control request that waits for the worker holding a run: the worker cancels the run, or
/// parks it at its next step boundary, for the reason given. A cancel outranks a pause.
///
/// ```
/// use cairn_store::Request;
/// let cancel = Request::Cancel { reason: "wrong customer".into() };
/// assert_eq!((cancel.kind(), cancel.reason()), ("cancel", "wrong customer"));
/// assert_eq!(Request::from_parts(Some("pause"), Some("deploy freeze".into())).unwrap(),
///     Some(Request::Pause { reason: "deploy freeze".into() }));
/// assert_eq!(Request::from_parts(None, None).unwrap(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Request {
    /// Cancel the run: it ends `cancelled`, with `reason` as its error.
    Cancel {
        /// Why: journaled in its `cancelled` event.
        reason: String,
    },
    /// Pause the run: it is parked at its next step boundary, with `reason` as why.
    Pause {
        /// Why: the paused run's error.
        reason: String,
    },
}

impl Request {
    /// `cancel` or `pause`, as SQL stores keep it.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Cancel { .. } => "cancel",
            Request::Pause { .. } => "pause",
        }
    }

    /// The reason given for it.
    pub fn reason(&self) -> &str {
        match self {
            Request::Cancel { reason } | Request::Pause { reason } => reason,
        }
    }

    /// Whether it is a cancel.
    pub fn is_cancel(&self) -> bool {
        matches!(self, Request::Cancel { .. })
    }

    /// Reads a request back from a store's `kind` and `reason` columns: none when `kind` is
    /// null; an unknown kind means the store is corrupt.
    pub fn from_parts(kind: Option<&str>, reason: Option<String>) -> Result<Option<Request>, StoreError> {
        let reason = reason.unwrap_or_default();
        match kind {
            None => Ok(None),
            Some("cancel") => Ok(Some(Request::Cancel { reason })),
            Some("pause") => Ok(Some(Request::Pause { reason })),
            Some(other) => Err(StoreError::Corrupt(format!("unknown control request {other:?}"))),
        }
    }
}

/// A run's summary row: everything listing needs, kept in step with the journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Identity.
    pub id: RunId,
    /// Workflow name.
    pub workflow: String,
    /// Pinned workflow version.
    pub version: u32,
    /// Status.
    pub status: RunStatus,
    /// Why it is suspended, when it is.
    pub suspend_reason: Option<SuspendReason>,
    /// Input JSON.
    pub input: Box<RawValue>,
    /// Output JSON once completed.
    pub output: Option<Box<RawValue>>,
    /// Error once failed, or why it is paused.
    pub error: Option<String>,
    /// The caller's idempotency key.
    pub idempotency_key: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// When it ended.
    pub completed_at: Option<Timestamp>,
    /// When a suspended run becomes ready again.
    pub wake_at: Option<Timestamp>,
    /// Lease holder.
    pub lease_owner: Option<String>,
    /// Lease expiry.
    pub lease_expires_at: Option<Timestamp>,
    /// Fencing epoch: bumped by every claim.
    pub epoch: u64,
    /// The journal's last sequence number.
    pub last_seq: u64,
    /// A cancel or pause that waits for the worker holding the run, with its reason (`None`
    /// once the run has ended, and whenever nothing waits).
    #[serde(default)]
    pub pending: Option<Request>,
    /// How many times in a row the run was reclaimed from an expired lease (its worker died or
    /// stalled) without committing anything since: the engine parks it as poison past a limit.
    #[serde(default)]
    pub recoveries: u32,
    /// When the run fails with a timeout if it has not ended (journaled in its `started` event).
    #[serde(default)]
    pub deadline: Option<Timestamp>,
    /// How long the run is kept once it has ended (`None`: forever, unless a sweeper's maximum
    /// applies).
    #[serde(default)]
    pub retention: Option<Duration>,
    /// When a sweeper may delete the ended run: its end plus its retention.
    #[serde(default)]
    pub delete_after: Option<Timestamp>,
    /// The run this one restarts (it began with a prefix of that run's journal).
    #[serde(default)]
    pub restarted_from: Option<RunId>,
    /// The run that started this one as its child (`ctx.child` in the `cairn` crate).
    #[serde(default)]
    pub parent: Option<RunId>,
    /// The run this one continues (`ctx.continue_as_new` in the `cairn` crate): that run ended
    /// with status `continued` and started this one.
    #[serde(default)]
    pub continued_from: Option<RunId>,
    /// The run this one continued as (set when it ended with status `continued`).
    #[serde(default)]
    pub continued_as: Option<RunId>,
    /// Its place under its workflow's [concurrency rule](ConcurrencyRule), fixed when it was
    /// created (`None`: its workflow had none then, and it is never limited).
    #[serde(default)]
    pub concurrency: Option<RunConcurrency>,
    /// Why a pending run may not be claimed yet (`None`: it may).
    #[serde(default)]
    pub waiting_for: Option<WaitingFor>,
    /// Its priority, set at start: workers claim ready runs of higher priority first.
    #[serde(default)]
    pub priority: i32,
    /// The key it is served fairly by among the ready runs of its priority (`None`: it shares
    /// the key of every run without one).
    #[serde(default)]
    pub fairness_key: Option<String>,
    /// Its place among the ready runs of its priority, assigned by the store when it is created
    /// ([`cairn_journal::flow::fair_seq`]): workers claim in this order within a priority.
    #[serde(default)]
    pub fair_seq: i64,
    /// The debounce key it was started with ([`Debounce`]), kept once it has begun.
    #[serde(default)]
    pub debounce_key: Option<String>,
    /// The latest it starts while it debounces: its first start plus that start's maximum wait
    /// (`None`: no maximum).
    #[serde(default)]
    pub debounce_until: Option<Timestamp>,
}

impl RunRecord {
    /// Whether a worker holds the run under a lease still running at `lease_now` (a request to
    /// cancel or pause it must then wait for that worker).
    pub fn is_held_at(&self, lease_now: Timestamp) -> bool {
        self.status == RunStatus::Running && self.lease_expires_at.is_some_and(|e| e > lease_now)
    }

    /// The summary row of a run just created from `run`: pending, or suspended until its
    /// debounce window closes ([`NewRun::debounce`]).
    pub fn of(run: &NewRun) -> RunRecord {
        let debounce_until = run.debounce.as_ref().and_then(|d| debounce_until(run.created_at, d.max_wait));
        RunRecord {
            id: run.id.clone(),
            workflow: run.workflow.clone(),
            version: run.version,
            status: if run.debounce.is_some() { RunStatus::Suspended } else { RunStatus::Pending },
            suspend_reason: run.debounce.as_ref().map(|_| SuspendReason::Debouncing),
            input: run.input.clone(),
            output: None,
            error: None,
            idempotency_key: run.idempotency_key.clone(),
            created_at: run.created_at,
            updated_at: run.created_at,
            completed_at: None,
            wake_at: run.debounce.as_ref().map(|d| debounce_wake(run.created_at, d.quiet, debounce_until)),
            lease_owner: None,
            lease_expires_at: None,
            epoch: 0,
            last_seq: run.last_seq(),
            pending: None,
            recoveries: 0,
            deadline: run.deadline,
            retention: run.retention,
            delete_after: None,
            restarted_from: run.restarted_from.clone(),
            parent: run.parent.clone(),
            continued_from: run.continued_from.clone(),
            continued_as: None,
            concurrency: None,
            waiting_for: None,
            priority: run.priority,
            fairness_key: run.fairness_key.clone(),
            fair_seq: 0,
            debounce_key: run.debounce.as_ref().map(|d| d.key.clone()),
            debounce_until,
        }
    }

    /// Why a run that has not ended is held back by a flow rule, if it is: waiting for a
    /// concurrency slot, suspended until a rate limit lets it go on, or debouncing.
    pub fn held_back_by(&self) -> Option<WaitingFor> {
        self.waiting_for.or(match self.suspend_reason {
            Some(SuspendReason::RateLimited) => Some(WaitingFor::Rate),
            Some(SuspendReason::Debouncing) => Some(WaitingFor::Debounce),
            _ => None,
        })
    }

    /// Whether it is a debounced start that has not begun (later starts with its key join it).
    pub fn is_debouncing(&self) -> bool {
        self.status == RunStatus::Suspended && self.suspend_reason == Some(SuspendReason::Debouncing)
    }

    /// The run's first journal event, rebuilt from the row (a new run's journal holds nothing
    /// else, so a worker need not read it).
    pub fn started(&self) -> Event {
        started_event(&self.workflow, self.version, &self.input, self.deadline, None)
    }
}

/// A run's `started` event.
pub(super) fn started_event(
    workflow: &str,
    version: u32,
    input: &RawValue,
    deadline: Option<Timestamp>,
    reason: Option<&str>,
) -> Event {
    let reason = reason.map(str::to_owned);
    Event::Started { workflow: workflow.to_owned(), version, input: input.to_owned(), deadline, reason }
}

/// A run to create.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// Its id.
    pub id: RunId,
    /// Workflow name.
    pub workflow: String,
    /// Version to pin.
    pub version: u32,
    /// Input JSON.
    pub input: Box<RawValue>,
    /// Same key and workflow → the existing run.
    pub idempotency_key: Option<String>,
    /// Creation time.
    pub created_at: Timestamp,
    /// When the run fails with a timeout if it has not ended.
    pub deadline: Option<Timestamp>,
    /// How long the run is kept once it has ended (`None`: forever).
    pub retention: Option<Duration>,
    /// The run this one restarts.
    pub restarted_from: Option<RunId>,
    /// Why it is started, journaled in its `started` event (a restart's reason).
    pub reason: Option<String>,
    /// The run that starts this one as its child.
    pub parent: Option<RunId>,
    /// The run this one continues (it is created by that run's [`RunUpdate::Continue`](crate::RunUpdate::Continue)).
    pub continued_from: Option<RunId>,
    /// Workers claim ready runs of higher priority first (default 0).
    pub priority: i32,
    /// Within a priority, ready runs are served fairly between keys (start-time fair queuing),
    /// so a key with a long backlog cannot starve one with a few runs; runs without a key share
    /// one. Checked by [`cairn_journal::flow::check_fairness_key`].
    pub fairness_key: Option<String>,
    /// Events the journal holds after `started` from the outset (a restart's copy of the
    /// original's journal up to the restart point). Stores write them as given.
    pub prefix: Vec<Event>,
    /// Debounce it: collapse it into the run of its workflow still debouncing under the same
    /// key, if there is one (checked by [`NewRun::check_debounce`]).
    pub debounce: Option<Debounce>,
}

/// A debounced start: starts of one workflow with the same key inside a window collapse into
/// one run, which gets the latest start's input. That run is created suspended
/// ([`SuspendReason::Debouncing`], shown as waiting for [`WaitingFor::Debounce`]) and begins
/// once the key has been quiet for `quiet` after its latest start, or at its first start plus
/// `max_wait`, whichever comes first ([`cairn_journal::flow::debounce_wake`]). Every worker
/// sharing the store sees one window per key: the store collapses starts atomically. Once the
/// run has begun, the next start opens a new window.
///
/// ```
/// use cairn_store::Debounce;
/// use std::time::Duration;
/// let debounce = Debounce::new("order-7", Duration::from_secs(2)).max_wait(Duration::from_secs(60));
/// assert_eq!(debounce.max_wait, Some(Duration::from_secs(60)));
/// assert!(Debounce::new("", Duration::from_secs(2)).check().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debounce {
    /// Starts with equal keys (of one workflow) collapse: 1 to 200 characters, no control characters.
    pub key: String,
    /// How long the key must be quiet (no further start) before the run begins.
    pub quiet: Duration,
    /// The longest the run waits after the first start of its window (`None`: no limit).
    pub max_wait: Option<Duration>,
}

impl Debounce {
    /// Debounce under `key` until it has been quiet for `quiet`.
    pub fn new(key: impl Into<String>, quiet: Duration) -> Debounce {
        Debounce { key: key.into(), quiet, max_wait: None }
    }

    /// Begin no later than `max_wait` after the window's first start.
    pub fn max_wait(mut self, max_wait: Duration) -> Debounce {
        self.max_wait = Some(max_wait);
        self
    }

    /// Checks the key, the quiet time and the maximum wait
    /// ([`cairn_journal::flow::check_debounce`]).
    pub fn check(&self) -> Result<(), String> {
        cairn_journal::flow::check_debounce(&self.key, self.quiet, self.max_wait)
    }
}

impl NewRun {
    /// A run with no deadline, no retention, no restart link and no journal prefix.
    pub fn new(
        id: RunId,
        workflow: impl Into<String>,
        version: u32,
        input: Box<RawValue>,
        created_at: Timestamp,
    ) -> Self {
        NewRun {
            id,
            workflow: workflow.into(),
            version,
            input,
            idempotency_key: None,
            created_at,
            deadline: None,
            retention: None,
            restarted_from: None,
            reason: None,
            parent: None,
            continued_from: None,
            priority: 0,
            fairness_key: None,
            prefix: Vec::new(),
            debounce: None,
        }
    }

    /// Refuses a debounced run whose [`Debounce`] fails its check, or that also carries what a
    /// debounced start cannot: an idempotency key (a collapsed start has no run of its own to
    /// find again), a journal prefix (a restart), a parent or a run it continues.
    pub fn check_debounce(&self) -> Result<(), StoreError> {
        let Some(debounce) = &self.debounce else { return Ok(()) };
        debounce.check().map_err(StoreError::InvalidInput)?;
        let clash = [
            (self.idempotency_key.is_some(), "an idempotency key"),
            (!self.prefix.is_empty() || self.restarted_from.is_some(), "a restart"),
            (self.parent.is_some(), "a parent run"),
            (self.continued_from.is_some(), "a continued run"),
        ];
        Self::refuse_clash(clash)
    }

    /// Refuses a debounced run for signal-with-start: a signal needs a run of its own start.
    pub fn check_signal_start(&self) -> Result<(), StoreError> {
        Self::refuse_clash([(self.debounce.is_some(), "a signal")])
    }

    /// The refusal of a debounced start for the first clash that holds.
    pub(super) fn refuse_clash<const N: usize>(clash: [(bool, &str); N]) -> Result<(), StoreError> {
        match clash.into_iter().find(|(clashes, _)| *clashes) {
            Some((_, what)) => Err(StoreError::InvalidInput(format!("a debounced start cannot have {what}"))),
            None => Ok(()),
        }
    }

    /// The run's first journal event.
    pub fn started(&self) -> Event {
        started_event(&self.workflow, self.version, &self.input, self.deadline, self.reason.as_deref())
    }

    /// The retention as stored: whole milliseconds.
    pub fn retention_ms(&self) -> Option<i64> {
        self.retention.map(|keep| i64::try_from(keep.as_millis()).unwrap_or(i64::MAX))
    }

    /// The run's whole initial journal: `started`, then the prefix.
    pub fn initial_journal(&self) -> Vec<Event> {
        let mut events = Vec::with_capacity(1 + self.prefix.len());
        events.push(self.started());
        events.extend(self.prefix.iter().cloned());
        events
    }

    /// The last sequence number of the initial journal.
    pub fn last_seq(&self) -> u64 {
        1 + self.prefix.len() as u64
    }

    /// For signal-with-start: `existing`, the run that holds this run's id or idempotency key,
    /// as the run to signal (`created: false`). Refused if it belongs to another workflow (the id
    /// is taken) or has ended.
    pub fn existing_to_signal(&self, existing: RunRecord) -> Result<CreatedRun, StoreError> {
        if existing.workflow != self.workflow {
            return Err(StoreError::DuplicateRunId(self.id.clone()));
        }
        if existing.status.is_terminal() {
            return Err(StoreError::RunFinished { run_id: existing.id, status: existing.status });
        }
        Ok(CreatedRun { run: existing, created: false })
    }
}

/// The result of [`Store::create_run`](crate::Store::create_run).
#[derive(Debug, Clone)]
pub struct CreatedRun {
    /// The run, new or existing.
    pub run: RunRecord,
    /// `false` when the idempotency key matched an existing run.
    pub created: bool,
}

/// Everything a store can refuse or fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The appender's lease epoch is stale: another worker claimed the run.
    #[error("[CAIRN-E0201] lease lost on run `{run_id}`: epoch {held} is stale (now {current}); this worker must stop")]
    Fenced {
        /// The run.
        run_id: RunId,
        /// Epoch the appender held.
        held: u64,
        /// Epoch in the store.
        current: u64,
    },
    /// The journal does not end where the appender thought.
    #[error("journal of run `{run_id}` ends at #{actual}, not #{expected}")]
    SequenceConflict {
        /// The run.
        run_id: RunId,
        /// What the appender expected.
        expected: u64,
        /// What the store holds.
        actual: u64,
    },
    /// A signal was consumed already or belongs to another run.
    #[error("signal {0:?} is not available to consume")]
    SignalUnavailable(SignalId),
    /// No such run.
    #[error("[CAIRN-E0301] no run with id `{0}`")]
    RunNotFound(RunId),
    /// The id is taken.
    #[error("[CAIRN-E0302] a run with id `{0}` already exists")]
    DuplicateRunId(RunId),
    /// The run has ended.
    #[error("[CAIRN-E0303] run `{run_id}` has already ended ({status})")]
    RunFinished {
        /// The run.
        run_id: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// The run is not paused, so it cannot be resumed.
    #[error("[CAIRN-E0305] run `{run_id}` is not paused (it is {status})")]
    NotPaused {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// No schedule has that name.
    #[error("[CAIRN-E0310] no schedule named `{0}`")]
    ScheduleNotFound(String),
    /// The request itself was malformed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Stored data could not be read back.
    #[error("corrupt data in store: {0}")]
    Corrupt(String),
    /// The backend failed (IO, SQL, closed): the message says how, with the cause's text, and
    /// the cause (the driver's or the file system's error), when there is one, is the source.
    #[error("store backend error: {message}")]
    Backend {
        /// What failed, and why.
        message: String,
        /// The driver's or the file system's error.
        #[source]
        source: Option<Cause>,
    },
}

/// What kind of failure an error is: what a caller branches on, and what the HTTP API maps to a
/// status. Not `#[non_exhaustive]`, so a mapping over it is checked for completeness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// What the request names does not exist (a workflow, a version, a run, a schedule).
    NotFound,
    /// The request is malformed or asks for something impossible (an input, a name, a rule).
    Invalid,
    /// A payload is over the size limit.
    TooLarge,
    /// The request conflicts with what is stored (an id taken, a run ended or not paused, a lease
    /// moved on).
    Conflict,
    /// The store failed or could not be reached; the same request may succeed later.
    Unavailable,
    /// Stored data could not be read back.
    Corrupt,
}

/// `error`'s text followed by its sources' (`a: b: c`), each once.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// The cause of a [`StoreError::Backend`]: the driver's or the file system's error, shared so
/// that errors stay `Clone`, and compared by its message.
#[derive(Clone)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// Keeps `error` as a cause.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause(std::sync::Arc::new(error))
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Cause) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

impl StoreError {
    /// A backend failure described by `message` alone.
    pub fn backend(message: impl Into<String>) -> StoreError {
        StoreError::Backend { message: message.into(), source: None }
    }

    /// A backend failure caused by `cause` (a driver's or an IO error), while doing `context`:
    /// the message is `"{context}: {cause}"`, and `cause` is the source.
    ///
    /// ```
    /// use cairn_store::StoreError;
    /// use std::error::Error as _;
    /// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    /// let error = StoreError::caused_by("connecting to 127.0.0.1:5432", io);
    /// assert_eq!(error.to_string(), "store backend error: connecting to 127.0.0.1:5432: connection refused");
    /// assert_eq!(error.source().map(|s| s.to_string()).as_deref(), Some("connection refused"));
    /// ```
    pub fn caused_by(context: impl fmt::Display, cause: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Backend { message: format!("{context}: {}", chain(&cause)), source: Some(Cause::new(cause)) }
    }

    /// A backend failure that is `cause` itself: the message is its text and its sources' (a
    /// driver's "error connecting to server" says why only in its source), and it is the source.
    pub fn from_cause(cause: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Backend { message: chain(&cause), source: Some(Cause::new(cause)) }
    }

    /// What kind of failure this is.
    ///
    /// ```
    /// use cairn_store::{ErrorKind, RunId, StoreError};
    /// assert_eq!(StoreError::RunNotFound(RunId::new("r")).kind(), ErrorKind::NotFound);
    /// assert_eq!(StoreError::backend("connection refused").kind(), ErrorKind::Unavailable);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::RunNotFound(_) | StoreError::ScheduleNotFound(_) => ErrorKind::NotFound,
            StoreError::InvalidInput(_) => ErrorKind::Invalid,
            StoreError::Fenced { .. }
            | StoreError::SequenceConflict { .. }
            | StoreError::SignalUnavailable(_)
            | StoreError::DuplicateRunId(_)
            | StoreError::RunFinished { .. }
            | StoreError::NotPaused { .. } => ErrorKind::Conflict,
            StoreError::Corrupt(_) => ErrorKind::Corrupt,
            StoreError::Backend { .. } => ErrorKind::Unavailable,
        }
    }

    /// The stable code of this error (`CAIRN-E0301`), if it has one.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            StoreError::Fenced { .. } => Some("CAIRN-E0201"),
            StoreError::RunNotFound(_) => Some("CAIRN-E0301"),
            StoreError::DuplicateRunId(_) => Some("CAIRN-E0302"),
            StoreError::RunFinished { .. } => Some("CAIRN-E0303"),
            StoreError::NotPaused { .. } => Some("CAIRN-E0305"),
            StoreError::ScheduleNotFound(_) => Some("CAIRN-E0310"),
            StoreError::SequenceConflict { .. }
            | StoreError::SignalUnavailable(_)
            | StoreError::InvalidInput(_)
            | StoreError::Corrupt(_)
            | StoreError::Backend { .. } => None,
        }
    }
}
