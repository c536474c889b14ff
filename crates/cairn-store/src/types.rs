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

    /// Checks a caller-given id: 1 to 200 bytes, no control characters, no `/`.
    pub fn validate(id: &str) -> Result<RunId, StoreError> {
        if id.is_empty() || id.len() > 200 || id.chars().any(|c| c.is_control() || c == '/') {
            return Err(StoreError::InvalidInput(format!(
                "run id {id:?} must be 1 to 200 bytes without control characters or `/`"
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
    /// A cancellation waits for the lease holder.
    pub cancel_requested: bool,
    /// A pause waits for the lease holder (it parks the run at its next step boundary).
    #[serde(default)]
    pub pause_requested: bool,
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

/// A run's place under its workflow's concurrency rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunConcurrency {
    /// The key its input gave (`""` under a rule without a key): runs of one workflow with equal
    /// keys share the rule's slots.
    pub key: String,
    /// Whether it keeps its slot while suspended.
    pub hold_suspended: bool,
}

impl RunConcurrency {
    /// From a row's `flow_key` and `flow_hold` columns.
    pub fn stored(key: Option<String>, hold_suspended: bool) -> Option<RunConcurrency> {
        key.map(|key| RunConcurrency { key, hold_suspended })
    }

    /// The place under `rule` of a run with `input`.
    pub fn of(rule: &ConcurrencyRule, input: &RawValue) -> RunConcurrency {
        RunConcurrency {
            key: cairn_journal::flow::key_in(input, rule.key.as_deref()),
            hold_suspended: rule.hold_suspended,
        }
    }
}

/// At most `limit` runs of `workflow` hold a slot at once, per value of `key` in their inputs
/// (or for the whole workflow, without a key), across every worker sharing the store. A run
/// holds a slot from when it is admitted until it ends, is paused, or suspends (unless
/// `hold_suspended`); the others wait in creation order ([`WaitingFor::Concurrency`]) and are
/// admitted, by the store, as slots free up. A rule applies to runs created after it was stored.
///
/// ```
/// use cairn_store::ConcurrencyRule;
/// let rule = ConcurrencyRule::per_key("charge", "/customer", 2).hold_suspended();
/// assert_eq!((rule.limit, rule.key.as_deref(), rule.hold_suspended), (2, Some("/customer"), true));
/// assert!(ConcurrencyRule::per_workflow("charge", 0).check().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcurrencyRule {
    /// The workflow it limits.
    pub workflow: String,
    /// A JSON pointer (`/customer`) into each run's input: runs with equal values there share
    /// the slots. `None`: all runs of the workflow share them.
    pub key: Option<String>,
    /// How many runs at most hold a slot at once, per key.
    pub limit: u32,
    /// Whether a suspended (sleeping, waiting) run keeps its slot.
    pub hold_suspended: bool,
}

impl ConcurrencyRule {
    /// At most `limit` runs of `workflow` at once.
    pub fn per_workflow(workflow: impl Into<String>, limit: u32) -> ConcurrencyRule {
        ConcurrencyRule { workflow: workflow.into(), key: None, limit, hold_suspended: false }
    }

    /// At most `limit` runs of `workflow` at once per value at `pointer` in their inputs.
    pub fn per_key(workflow: impl Into<String>, pointer: impl Into<String>, limit: u32) -> ConcurrencyRule {
        ConcurrencyRule { workflow: workflow.into(), key: Some(pointer.into()), limit, hold_suspended: false }
    }

    /// Suspended runs keep their slots.
    pub fn hold_suspended(mut self) -> ConcurrencyRule {
        self.hold_suspended = true;
        self
    }

    /// Why the rule cannot be stored, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.workflow.is_empty() {
            return Err("a concurrency rule needs a workflow".into());
        }
        if self.limit == 0 {
            return Err(format!("the concurrency limit of {} must be at least 1", self.workflow));
        }
        if let Some(pointer) = &self.key {
            cairn_journal::flow::pointer_tokens(pointer).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
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
            cancel_requested: false,
            pause_requested: false,
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
        started_event(&self.workflow, self.version, &self.input, self.deadline)
    }
}

/// A run's `started` event.
fn started_event(workflow: &str, version: u32, input: &RawValue, deadline: Option<Timestamp>) -> Event {
    Event::Started { workflow: workflow.to_owned(), version, input: input.to_owned(), deadline }
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
    /// The run that starts this one as its child.
    pub parent: Option<RunId>,
    /// The run this one continues (it is created by that run's [`RunUpdate::Continue`]).
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
    /// Starts with equal keys (of one workflow) collapse: 1 to 200 bytes, no control characters.
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
    fn refuse_clash<const N: usize>(clash: [(bool, &str); N]) -> Result<(), StoreError> {
        match clash.into_iter().find(|(clashes, _)| *clashes) {
            Some((_, what)) => Err(StoreError::InvalidInput(format!("a debounced start cannot have {what}"))),
            None => Ok(()),
        }
    }

    /// The run's first journal event.
    pub fn started(&self) -> Event {
        started_event(&self.workflow, self.version, &self.input, self.deadline)
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

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only this workflow.
    pub workflow: Option<String>,
    /// Only this status.
    pub status: Option<RunStatus>,
    /// Created at or after.
    pub created_after: Option<Timestamp>,
    /// Created before.
    pub created_before: Option<Timestamp>,
    /// Only restarts of this run.
    pub restarted_from: Option<RunId>,
    /// Only children of this run.
    pub parent: Option<RunId>,
    /// Only stranded runs, given the workflow versions live workers serve: runs that
    /// [need a worker](RunStatus::needs_worker) whose `(workflow, version)` is not in this list.
    pub stranded: Option<Vec<WorkflowKey>>,
    /// Only runs whose input contains this JSON, as PostgreSQL's `@>` (see
    /// [`cairn_journal::json_contains`]): `{"customer": 42}` keeps runs whose input has
    /// `"customer": 42` among its fields.
    pub input_contains: Option<serde_json::Value>,
    /// Page size (default 100, at most 1000).
    pub limit: Option<usize>,
    /// Continue after this cursor (from [`RunPage::next_cursor`]).
    pub cursor: Option<PageCursor>,
}

impl RunFilter {
    /// The page size in force.
    pub fn page_size(&self) -> usize {
        self.limit.unwrap_or(100).clamp(1, 1000)
    }

    /// The [`stranded`](RunFilter::stranded) list as `name@version` tags, the form SQL stores
    /// match on.
    pub fn stranded_tags(&self) -> Option<Vec<String>> {
        self.stranded.as_ref().map(|keys| keys.iter().map(WorkflowKey::tag).collect())
    }

    /// Whether `run` passes the filter (the cursor included).
    pub fn matches(&self, run: &RunRecord) -> bool {
        self.workflow.as_ref().is_none_or(|w| &run.workflow == w)
            && self.status.is_none_or(|s| run.status == s)
            && self.created_after.is_none_or(|t| run.created_at >= t)
            && self.created_before.is_none_or(|t| run.created_at < t)
            && self.restarted_from.as_ref().is_none_or(|r| run.restarted_from.as_ref() == Some(r))
            && self.parent.as_ref().is_none_or(|p| run.parent.as_ref() == Some(p))
            && self.stranded.as_ref().is_none_or(|served| {
                run.status.needs_worker() && !served.iter().any(|k| k.name == run.workflow && k.version == run.version)
            })
            && self.cursor.as_ref().is_none_or(|c| (run.created_at, &run.id) < (c.created_at, &c.id))
            && self.input_contains.as_ref().is_none_or(|needle| {
                serde_json::from_str(run.input.get()).is_ok_and(|input| cairn_journal::json_contains(&input, needle))
            })
    }

    /// [`input_contains`](RunFilter::input_contains) as JSON text, the form SQL stores take.
    pub fn input_json(&self) -> Option<String> {
        self.input_contains.as_ref().map(serde_json::Value::to_string)
    }
}

/// A worker as it records itself in the store, refreshed with its heartbeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRecord {
    /// Its lease identity.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub last_seen: Timestamp,
    /// Until when it counts as live without another heartbeat (its last heartbeat plus its lease).
    pub live_until: Timestamp,
    /// The workflow versions it executes, sorted.
    pub serves: Vec<WorkflowKey>,
}

impl WorkerRecord {
    /// Whether it counts as live at `now` (wall-clock time, as leases).
    pub fn is_live_at(&self, now: Timestamp) -> bool {
        self.live_until > now
    }

    /// [`serves`](WorkerRecord::serves) as a JSON array of `name@version` tags, as SQL stores keep it.
    pub fn serves_json(&self) -> String {
        serde_json::Value::from(self.serves.iter().map(WorkflowKey::tag).collect::<Vec<_>>()).to_string()
    }

    /// Reads [`serves_json`](WorkerRecord::serves_json) back.
    pub fn parse_serves(text: &str) -> Result<Vec<WorkflowKey>, StoreError> {
        let tags: Vec<String> = serde_json::from_str(text)
            .map_err(|_| StoreError::Corrupt(format!("a worker's workflow list is unreadable: {text}")))?;
        WorkerRecord::serves_from_tags(&tags)
    }

    /// The workflow versions a worker serves, from their `name@version` tags as stores keep them.
    pub fn serves_from_tags(tags: &[String]) -> Result<Vec<WorkflowKey>, StoreError> {
        tags.iter()
            .map(|tag| {
                WorkflowKey::parse_tag(tag)
                    .ok_or_else(|| StoreError::Corrupt(format!("a worker serves an unreadable {tag:?}")))
            })
            .collect()
    }
}

/// Which worker records [`Store::forget_workers`](crate::Store::forget_workers) deletes.
#[derive(Debug, Clone, Default)]
pub struct ForgetWorkers {
    /// These workers (one that shut down).
    pub ids: Vec<String>,
    /// Also every worker not live since this time.
    pub dead_before: Option<Timestamp>,
}

impl ForgetWorkers {
    /// Whether `worker` is to be forgotten.
    pub fn selects(&self, worker: &WorkerRecord) -> bool {
        self.ids.contains(&worker.id) || self.dead_before.is_some_and(|t| worker.live_until < t)
    }
}

/// A workflow's subscription to the events of every topic `pattern` matches (see
/// [`cairn_journal::topic`]): each event published to such a topic starts one run of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Subscription {
    /// The subscribed workflow.
    pub workflow: String,
    /// The topic pattern, e.g. `user.*`.
    pub pattern: String,
    /// The version of the workflow an event starts (the newest its declaring worker registered).
    pub version: u32,
}

/// What [`Store::set_subscriptions`](crate::Store::set_subscriptions) writes: the subscriptions
/// of `workflows` become exactly `subscriptions` (an engine declares those of every workflow it
/// registers, so a subscription dropped from the code is dropped from the store).
#[derive(Debug, Clone, Default)]
pub struct SetSubscriptions {
    /// The workflows whose subscriptions are replaced.
    pub workflows: Vec<String>,
    /// Their subscriptions; each names one of `workflows`.
    pub subscriptions: Vec<Subscription>,
}

impl SetSubscriptions {
    /// Whether `stored` (every subscription a store holds) already has exactly these for
    /// `workflows`, so that setting them would change nothing.
    pub fn is_held_by(&self, stored: &[Subscription]) -> bool {
        let mut held: Vec<&Subscription> = stored.iter().filter(|s| self.workflows.contains(&s.workflow)).collect();
        let mut wanted: Vec<&Subscription> = self.subscriptions.iter().collect();
        held.sort();
        wanted.sort();
        held == wanted
    }
}

/// How many runs of one workflow version [need a worker](RunStatus::needs_worker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionCount {
    /// The workflow version.
    pub key: WorkflowKey,
    /// How many of its runs are pending, running or suspended.
    pub runs: u64,
}

/// How many runs of one workflow have one status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowCount {
    /// The workflow.
    pub workflow: String,
    /// The status.
    pub status: RunStatus,
    /// How many of its runs have it (never 0 in [`Store::workflow_counts`](crate::Store::workflow_counts)).
    pub runs: u64,
}

/// Where a page ended: the `(created_at, id)` of its last run (pages run newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    /// Creation time of the last run listed.
    pub created_at: Timestamp,
    /// Its id.
    pub id: RunId,
}

impl PageCursor {
    /// The opaque text form, for APIs and the CLI.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.created_at.as_millis(), self.id)
    }

    /// Parses [`PageCursor::encode`]'s text.
    pub fn decode(text: &str) -> Result<PageCursor, StoreError> {
        let bad = || StoreError::InvalidInput(format!("invalid page cursor {text:?}"));
        let (millis, id) = text.split_once(':').ok_or_else(bad)?;
        let millis = millis.parse::<i64>().map_err(|_| bad())?;
        Ok(PageCursor { created_at: Timestamp::from_millis(millis), id: RunId::new(id) })
    }
}

/// One page of runs.
#[derive(Debug, Clone)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<RunRecord>,
    /// Where the next page starts, if there may be one.
    pub next_cursor: Option<PageCursor>,
}

impl RunPage {
    /// A page from `runs` fetched with one more than `size` (newest first): the extra run, if
    /// any, only tells that another page follows.
    pub fn cut(mut runs: Vec<RunRecord>, size: usize) -> RunPage {
        let next_cursor = (runs.len() > size && size > 0).then(|| {
            let last = &runs[size - 1];
            PageCursor { created_at: last.created_at, id: last.id.clone() }
        });
        runs.truncate(size);
        RunPage { runs, next_cursor }
    }
}

/// A signal kept for a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SignalRecord {
    /// Identity, increasing in delivery order.
    pub id: SignalId,
    /// Signal name.
    pub name: String,
    /// Payload JSON.
    pub payload: Box<RawValue>,
    /// Delivery time.
    pub sent_at: Timestamp,
    /// The journal sequence of the wait that consumed it.
    pub consumed_seq: Option<u64>,
}

/// A signal to deliver.
#[derive(Debug, Clone)]
pub struct NewSignal {
    /// Target run.
    pub run_id: RunId,
    /// Signal name.
    pub name: String,
    /// Payload JSON.
    pub payload: Box<RawValue>,
    /// Delivery time (the engine's clock): a waiting run wakes at this instant.
    pub sent_at: Timestamp,
}

/// A request to cancel or pause a run.
#[derive(Debug, Clone)]
pub struct ControlRequest {
    /// Target run.
    pub run_id: RunId,
    /// Why: journaled when cancelling, the run's error while it is paused.
    pub reason: String,
    /// Now, by the engine's clock.
    pub at: Timestamp,
    /// Now, by the wall clock leases are measured with.
    pub lease_now: Timestamp,
}

/// A signal that [`Store::start_with_signal`](crate::Store::start_with_signal) buffers for the
/// run it creates or finds.
#[derive(Debug, Clone)]
pub struct StartSignal {
    /// Signal name.
    pub name: String,
    /// Payload JSON.
    pub payload: Box<RawValue>,
}

/// A request to release a paused run.
#[derive(Debug, Clone)]
pub struct ResumeRequest {
    /// Target run.
    pub run_id: RunId,
    /// Now, by the engine's clock.
    pub at: Timestamp,
}

/// Which ended runs [`Store::prune`](crate::Store::prune) deletes.
#[derive(Debug, Clone)]
pub struct PruneRequest {
    /// Now, by the engine's clock: runs whose `delete_after` is not later are deleted.
    pub now: Timestamp,
    /// Also every ended run that ended before this, whatever its retention (an engine's maximum
    /// retention, or `cairn runs prune --older-than`).
    pub ended_before: Option<Timestamp>,
    /// Most runs deleted (one transaction).
    pub limit: usize,
    /// List the runs that would be deleted without deleting anything.
    pub dry_run: bool,
}

impl PruneRequest {
    /// Whether `run` is to be deleted: it has ended, and its retention (or `ended_before`) passed.
    pub fn selects(&self, run: &RunRecord) -> bool {
        run.status.is_terminal()
            && (run.delete_after.is_some_and(|at| at <= self.now)
                || self.ended_before.is_some_and(|before| run.completed_at.is_some_and(|at| at < before)))
    }
}

/// What [`Store::pause`](crate::Store::pause) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseOutcome {
    /// No live worker held the run (or it was paused already): it is paused now.
    Paused,
    /// A worker holds the run: it is flagged, and the worker parks it at its next step boundary.
    Requested,
}

/// What [`Store::cancel`](crate::Store::cancel) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// No live worker held the run: it is cancelled now.
    Cancelled,
    /// A worker holds the run: it is flagged, and the worker cancels it.
    Requested,
}

/// One execution asks a rate limit's bucket for its turn ([`Store::take_rate`](crate::Store::take_rate)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeRate {
    /// The bucket (`cairn_journal::flow::rate_bucket`): what is limited, and the key.
    pub bucket: String,
    /// At most this many grants in any window of `period`.
    pub limit: u32,
    /// The window.
    pub period: Duration,
    /// The asker's time: the grant is recorded at it.
    pub now: Timestamp,
}

impl TakeRate {
    /// The period in whole milliseconds, at least 1.
    pub fn period_ms(&self) -> i64 {
        i64::try_from(self.period.as_millis()).unwrap_or(i64::MAX).max(1)
    }
}

/// A worker asks for ready runs.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The worker's identity.
    pub owner: String,
    /// Workflows (with versions) it can execute.
    pub workflows: Vec<WorkflowKey>,
    /// Now, by the engine's clock: suspended runs with `wake_at <= now` are ready.
    pub now: Timestamp,
    /// Now, by the wall clock: leases that expired before it are reclaimed.
    pub lease_now: Timestamp,
    /// The new leases' expiry.
    pub lease_until: Timestamp,
    /// How many runs at most.
    pub limit: usize,
}

/// How an append changes the run row besides its last sequence number.
#[derive(Debug, Clone)]
pub enum RunUpdate {
    /// The run goes on under the same lease.
    Progress,
    /// The run suspends and its lease is released.
    Suspend {
        /// Why.
        reason: SuspendReason,
        /// When to wake it (`None`: only a signal or cancellation wakes it).
        wake_at: Option<Timestamp>,
        /// Wake it at once instead if a signal newer than this arrived meanwhile (`Some(SignalId(0))`
        /// counts every unconsumed signal); `None` ignores signals.
        signals_after: Option<SignalId>,
        /// Now, by the engine's clock (the wake time when woken at once).
        now: Timestamp,
    },
    /// The run ends.
    Finish {
        /// `Completed`, `Failed` or `Cancelled`.
        status: RunStatus,
        /// Output when completed.
        output: Option<Box<RawValue>>,
        /// Error when failed, reason when cancelled.
        error: Option<String>,
        /// When it ended.
        at: Timestamp,
    },
    /// The run ends with status `continued` and hands over to `successor` (a fresh run of the same
    /// workflow, `continued_from` this one), all or nothing: the successor is created and every
    /// signal this run has not consumed moves to it. Signals sent to this run afterwards go to
    /// the newest run of its chain.
    Continue {
        /// The run to create.
        successor: Box<NewRun>,
        /// When this run ended.
        at: Timestamp,
    },
    /// The worker stops executing the run without it having ended (e.g. on shutdown): the lease
    /// is released and the run is ready for any worker at once (status `pending`).
    Release,
    /// The run is parked (status `paused`) with this error; the lease is released.
    Park {
        /// Why.
        error: String,
    },
}

/// Events to append to one run, and how its row changes, all or nothing.
#[derive(Debug, Clone)]
pub struct Append {
    /// Target run.
    pub run_id: RunId,
    /// The appender's lease epoch; a mismatch is [`StoreError::Fenced`].
    pub epoch: u64,
    /// The journal's last sequence number as the appender knows it.
    pub after_seq: u64,
    /// The events, numbered `after_seq + 1…`.
    pub events: Vec<Event>,
    /// When they happened.
    pub at: Timestamp,
    /// The row change.
    pub update: RunUpdate,
    /// A signal the appended wait consumes.
    pub consume_signal: Option<SignalId>,
    /// The appender sends other appends of this run at about the same time (concurrent branches
    /// or items): a store that commits a lone append on the caller's thread when it is idle
    /// (SQLite) queues this one instead, so it commits in one transaction with the others.
    pub batched: bool,
}

impl Append {
    /// The signal this append consumes and the sequence number of the event that consumes it
    /// (the `wait_completed` naming it, or the append's last event).
    pub fn consumed(&self) -> Option<(SignalId, u64)> {
        let signal = self.consume_signal?;
        let position =
            self.events.iter().position(|e| matches!(e, Event::WaitCompleted { signal: Some(s), .. } if *s == signal));
        let last = self.after_seq + self.events.len() as u64;
        Some((signal, position.map_or(last, |i| self.after_seq + 1 + i as u64)))
    }
}

/// A worker extends its leases.
#[derive(Debug, Clone)]
pub struct HeartbeatRequest {
    /// The worker.
    pub owner: String,
    /// Runs with the epoch it holds them at.
    pub runs: Vec<(RunId, u64)>,
    /// New expiry.
    pub lease_until: Timestamp,
}

/// A lease's state after a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseStatus {
    /// The run.
    pub run_id: RunId,
    /// Whether the worker still holds it.
    pub held: bool,
    /// Whether cancellation was requested.
    pub cancel_requested: bool,
    /// Whether a pause was requested.
    pub pause_requested: bool,
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
    /// The backend failed (IO, SQL, closed).
    #[error("store backend error: {0}")]
    Backend(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_is_held_when_its_workflows_have_exactly_its_subscriptions() {
        let sub = |workflow: &str, pattern: &str| Subscription {
            workflow: workflow.into(),
            pattern: pattern.into(),
            version: 1,
        };
        let declared = SetSubscriptions {
            workflows: vec!["a".into(), "b".into()],
            subscriptions: vec![sub("a", "x.*"), sub("a", "y")],
        };
        // Other workflows' subscriptions do not matter; order does not either.
        assert!(declared.is_held_by(&[sub("c", "z"), sub("a", "y"), sub("a", "x.*")]));
        assert!(!declared.is_held_by(&[sub("a", "x.*")]), "one missing");
        assert!(!declared.is_held_by(&[sub("a", "x.*"), sub("a", "y"), sub("b", "old")]), "one to drop");
        assert!(
            !declared.is_held_by(&[sub("a", "x.*"), Subscription { version: 2, ..sub("a", "y") }]),
            "another version"
        );
        assert!(SetSubscriptions { workflows: vec!["a".into()], subscriptions: vec![] }.is_held_by(&[sub("b", "q")]));
    }
}

/// A schedule as a store keeps it: which workflow it starts with what input, and when it fires
/// next. When it fires is the engine's business (`spec`, opaque JSON to the store); the store
/// keeps `next_fire_at` indexed, so due schedules are found without reading any other.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// Unique name.
    pub name: String,
    /// The workflow each firing starts.
    pub workflow: String,
    /// When it fires and how it catches up, as the engine wrote it (JSON).
    pub spec: String,
    /// Each run's input.
    pub input: Box<RawValue>,
    /// A paused schedule does not fire.
    pub paused: bool,
    /// The next firing not started yet (`None`: it fires no more).
    pub next_fire_at: Option<Timestamp>,
    /// The firing time of the last run it started.
    pub last_fired_at: Option<Timestamp>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// Creates schedule `name`, or updates its definition: its workflow, spec and input are
/// replaced; whether it is paused is kept; `next_fire_at` is replaced only when the spec
/// changed (or it is new), so redeclaring a schedule unchanged moves nothing.
#[derive(Debug, Clone)]
pub struct PutSchedule {
    /// Unique name.
    pub name: String,
    /// The workflow each firing starts.
    pub workflow: String,
    /// When it fires (JSON, the engine's).
    pub spec: String,
    /// Each run's input.
    pub input: Box<RawValue>,
    /// Its first firing under this spec.
    pub next_fire_at: Option<Timestamp>,
    /// Now.
    pub now: Timestamp,
}

/// Fires schedule `name` if it is still due at `due` (no other worker fired it meanwhile, and it
/// is not paused): starts `runs` (each at most once: their ids are derived from the firing
/// times, and an existing id is skipped) and moves `next_fire_at` on, all or nothing.
#[derive(Debug, Clone)]
pub struct FireSchedule {
    /// The schedule.
    pub name: String,
    /// Its `next_fire_at` as the firer read it.
    pub due: Timestamp,
    /// Where `next_fire_at` goes.
    pub next_fire_at: Option<Timestamp>,
    /// The firing time of the last run started (`last_fired_at`), if any.
    pub last_fired_at: Option<Timestamp>,
    /// The runs to start.
    pub runs: Vec<NewRun>,
    /// Now.
    pub now: Timestamp,
}

/// Pauses or resumes schedule `name`; resuming sets its next firing (what it missed while
/// paused is not started).
#[derive(Debug, Clone)]
pub struct PauseSchedule {
    /// The schedule.
    pub name: String,
    /// Paused, or resumed.
    pub paused: bool,
    /// On resume, its next firing.
    pub next_fire_at: Option<Timestamp>,
    /// Now.
    pub now: Timestamp,
}
