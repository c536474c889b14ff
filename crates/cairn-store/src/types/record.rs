//! A run's record as stores keep it ([`RunRecord`], its [`RunRare`] fields apart), and the
//! control request that waits for its worker ([`Request`]).

use super::flow::*;
use super::names::{IdempotencyKey, WorkflowName};
use super::run::{RunId, RunStatus, StoreError, SuspendReason};
use cairn_journal::flow::WaitingFor;
use cairn_journal::{Event, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::Duration;

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
#[serde(from = "RunRecordWire", into = "RunRecordWire")]
pub struct RunRecord {
    /// Identity.
    pub id: RunId,
    /// Workflow name.
    pub workflow: WorkflowName,
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
    pub idempotency_key: Option<IdempotencyKey>,
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
    /// How long the run is kept once it has ended (`None`: forever, unless a sweeper's maximum
    /// applies).
    #[serde(default)]
    pub retention: Option<Duration>,
    /// When a sweeper may delete the ended run: its end plus its retention.
    #[serde(default)]
    pub delete_after: Option<Timestamp>,
    /// Its deadline, lineage and debounce key, kept apart because most runs have none of them
    /// (`None` then): read them with [`rare`](RunRecord::rare), change them with
    /// [`rare_mut`](RunRecord::rare_mut).
    pub rare: Option<Box<RunRare>>,
}

/// What few runs have, kept apart from the [`RunRecord`] so that the record of every other run
/// stays small (it is cloned by every claim and read, and held by every handle): its deadline,
/// its lineage, its debounce key. (Not its retention: every run started through a client has
/// one.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunRare {
    /// When the run fails with a timeout if it has not ended (journaled in its `started` event).
    pub deadline: Option<Timestamp>,
    /// The run this one restarts (it began with a prefix of that run's journal).
    pub restarted_from: Option<RunId>,
    /// The run that started this one as its child (`ctx.child` in the `cairn` crate).
    pub parent: Option<RunId>,
    /// The run this one continues (`ctx.continue_as_new` in the `cairn` crate): that run ended
    /// with status `continued` and started this one.
    pub continued_from: Option<RunId>,
    /// The run this one continued as (set when it ended with status `continued`).
    pub continued_as: Option<RunId>,
    /// The debounce key it was started with ([`Debounce`](crate::Debounce)), kept once it has begun.
    pub debounce_key: Option<String>,
    /// The latest it starts while it debounces: its first start plus that start's maximum wait
    /// (`None`: no maximum).
    pub debounce_until: Option<Timestamp>,
}

/// A run with none of the rare fields ([`RunRecord::rare`] of one whose `rare` is `None`).
static NO_RARE: RunRare = RunRare {
    deadline: None,
    restarted_from: None,
    parent: None,
    continued_from: None,
    continued_as: None,
    debounce_key: None,
    debounce_until: None,
};

impl RunRare {
    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        *self == NO_RARE
    }

    /// As a [`RunRecord::rare`] keeps it: boxed, or `None` when it holds nothing.
    pub fn boxed(self) -> Option<Box<RunRare>> {
        (!self.is_empty()).then(|| Box::new(self))
    }
}

/// A [`RunRecord`] as JSONL files keep it: every field at the top level, as before the rare
/// ones moved to [`RunRare`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunRecordWire {
    /// Identity.
    id: RunId,
    /// Workflow name.
    workflow: String,
    /// Pinned workflow version.
    version: u32,
    /// Status.
    status: RunStatus,
    /// Why it is suspended, when it is.
    suspend_reason: Option<SuspendReason>,
    /// Input JSON.
    input: Box<RawValue>,
    /// Output JSON once completed.
    output: Option<Box<RawValue>>,
    /// Error once failed, or why it is paused.
    error: Option<String>,
    /// The caller's idempotency key.
    idempotency_key: Option<String>,
    /// Creation time.
    created_at: Timestamp,
    /// Last change.
    updated_at: Timestamp,
    /// When it ended.
    completed_at: Option<Timestamp>,
    /// When a suspended run becomes ready again.
    wake_at: Option<Timestamp>,
    /// Lease holder.
    lease_owner: Option<String>,
    /// Lease expiry.
    lease_expires_at: Option<Timestamp>,
    /// Fencing epoch: bumped by every claim.
    epoch: u64,
    /// The journal's last sequence number.
    last_seq: u64,
    /// A cancel or pause that waits for the worker holding the run, with its reason (`None`
    /// once the run has ended, and whenever nothing waits).
    #[serde(default)]
    pending: Option<Request>,
    /// How many times in a row the run was reclaimed from an expired lease (its worker died or
    /// stalled) without committing anything since: the engine parks it as poison past a limit.
    #[serde(default)]
    recoveries: u32,
    /// When the run fails with a timeout if it has not ended (journaled in its `started` event).
    #[serde(default)]
    deadline: Option<Timestamp>,
    /// How long the run is kept once it has ended (`None`: forever, unless a sweeper's maximum
    /// applies).
    #[serde(default)]
    retention: Option<Duration>,
    /// When a sweeper may delete the ended run: its end plus its retention.
    #[serde(default)]
    delete_after: Option<Timestamp>,
    /// The run this one restarts (it began with a prefix of that run's journal).
    #[serde(default)]
    restarted_from: Option<RunId>,
    /// The run that started this one as its child (`ctx.child` in the `cairn` crate).
    #[serde(default)]
    parent: Option<RunId>,
    /// The run this one continues (`ctx.continue_as_new` in the `cairn` crate): that run ended
    /// with status `continued` and started this one.
    #[serde(default)]
    continued_from: Option<RunId>,
    /// The run this one continued as (set when it ended with status `continued`).
    #[serde(default)]
    continued_as: Option<RunId>,
    /// Its place under its workflow's [concurrency rule](ConcurrencyRule), fixed when it was
    /// created (`None`: its workflow had none then, and it is never limited).
    #[serde(default)]
    concurrency: Option<RunConcurrency>,
    /// Why a pending run may not be claimed yet (`None`: it may).
    #[serde(default)]
    waiting_for: Option<WaitingFor>,
    /// Its priority, set at start: workers claim ready runs of higher priority first.
    #[serde(default)]
    priority: i32,
    /// The key it is served fairly by among the ready runs of its priority (`None`: it shares
    /// the key of every run without one).
    #[serde(default)]
    fairness_key: Option<String>,
    /// Its place among the ready runs of its priority, assigned by the store when it is created
    /// ([`cairn_journal::flow::fair_seq`]): workers claim in this order within a priority.
    #[serde(default)]
    fair_seq: i64,
    /// The debounce key it was started with ([`Debounce`]), kept once it has begun.
    #[serde(default)]
    debounce_key: Option<String>,
    /// The latest it starts while it debounces: its first start plus that start's maximum wait
    /// (`None`: no maximum).
    #[serde(default)]
    debounce_until: Option<Timestamp>,
}

impl From<RunRecordWire> for RunRecord {
    fn from(w: RunRecordWire) -> Self {
        let mut run = RunRecord {
            id: w.id,
            workflow: WorkflowName::read_back(&w.workflow),
            version: w.version,
            status: w.status,
            suspend_reason: w.suspend_reason,
            input: w.input,
            output: w.output,
            error: w.error,
            idempotency_key: w.idempotency_key.as_deref().map(IdempotencyKey::read_back),
            created_at: w.created_at,
            updated_at: w.updated_at,
            completed_at: w.completed_at,
            wake_at: w.wake_at,
            lease_owner: w.lease_owner,
            lease_expires_at: w.lease_expires_at,
            epoch: w.epoch,
            last_seq: w.last_seq,
            pending: w.pending,
            recoveries: w.recoveries,
            concurrency: w.concurrency,
            waiting_for: w.waiting_for,
            priority: w.priority,
            fairness_key: w.fairness_key,
            fair_seq: w.fair_seq,
            retention: w.retention,
            delete_after: w.delete_after,
            rare: None,
        };
        run.set_rare(RunRare {
            deadline: w.deadline,
            restarted_from: w.restarted_from,
            parent: w.parent,
            continued_from: w.continued_from,
            continued_as: w.continued_as,
            debounce_key: w.debounce_key,
            debounce_until: w.debounce_until,
        });
        run
    }
}

impl From<RunRecord> for RunRecordWire {
    fn from(run: RunRecord) -> Self {
        let rare = run.rare.map(|rare| *rare).unwrap_or_default();
        RunRecordWire {
            retention: run.retention,
            delete_after: run.delete_after,
            id: run.id,
            workflow: run.workflow.to_string(),
            version: run.version,
            status: run.status,
            suspend_reason: run.suspend_reason,
            input: run.input,
            output: run.output,
            error: run.error,
            idempotency_key: run.idempotency_key.map(IdempotencyKey::into_string),
            created_at: run.created_at,
            updated_at: run.updated_at,
            completed_at: run.completed_at,
            wake_at: run.wake_at,
            lease_owner: run.lease_owner,
            lease_expires_at: run.lease_expires_at,
            epoch: run.epoch,
            last_seq: run.last_seq,
            pending: run.pending,
            recoveries: run.recoveries,
            concurrency: run.concurrency,
            waiting_for: run.waiting_for,
            priority: run.priority,
            fairness_key: run.fairness_key,
            fair_seq: run.fair_seq,
            deadline: rare.deadline,
            restarted_from: rare.restarted_from,
            parent: rare.parent,
            continued_from: rare.continued_from,
            continued_as: rare.continued_as,
            debounce_key: rare.debounce_key,
            debounce_until: rare.debounce_until,
        }
    }
}

impl RunRecord {
    /// Its deadline, lineage and debounce key (all `None` for most runs).
    pub fn rare(&self) -> &RunRare {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }

    /// Its rare fields, to change (made on first use).
    pub fn rare_mut(&mut self) -> &mut RunRare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Sets its rare fields (kept only if any is set).
    pub fn set_rare(&mut self, rare: RunRare) {
        self.rare = rare.boxed();
    }

    /// Whether a worker holds the run under a lease still running at `lease_now` (a request to
    /// cancel or pause it must then wait for that worker).
    pub fn is_held_at(&self, lease_now: Timestamp) -> bool {
        self.status == RunStatus::Running && self.lease_expires_at.is_some_and(|e| e > lease_now)
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
        started_event(&self.workflow, self.version, &self.input, self.rare().deadline, None)
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
