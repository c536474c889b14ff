//! What a new run is created from ([`NewRun`], its [`Debounce`]), the record it starts as
//! ([`RunRecord::of`]), and what creating it answers ([`CreatedRun`]).

use super::names::{IdempotencyKey, WorkflowName};
use super::record::{RunRare, RunRecord, started_event};
use super::run::{RunId, RunStatus, StoreError, SuspendReason};
use cairn_journal::flow::{debounce_until, debounce_wake};
use cairn_journal::{Event, Timestamp};
use serde_json::value::RawValue;
use std::time::Duration;

/// A run to create.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// Its id.
    pub id: RunId,
    /// Workflow name.
    pub workflow: WorkflowName,
    /// Version to pin.
    pub version: u32,
    /// Input JSON.
    pub input: Box<RawValue>,
    /// Same key and workflow → the existing run.
    pub idempotency_key: Option<IdempotencyKey>,
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
/// ([`SuspendReason::Debouncing`], shown as waiting for [`WaitingFor::Debounce`](cairn_journal::flow::WaitingFor::Debounce)) and begins
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
    pub fn new(id: RunId, workflow: WorkflowName, version: u32, input: Box<RawValue>, created_at: Timestamp) -> Self {
        NewRun {
            id,
            workflow,
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

/// The result of [`RunStore::create_run`](crate::RunStore::create_run).
#[derive(Debug, Clone)]
pub struct CreatedRun {
    /// The run, new or existing.
    pub run: RunRecord,
    /// `false` when the idempotency key matched an existing run.
    pub created: bool,
}

impl RunRecord {
    /// The summary row of a run just created from `run`: pending, or suspended until its
    /// debounce window closes ([`NewRun::debounce`]).
    pub fn of(run: &NewRun) -> RunRecord {
        let debounce_until = run.debounce.as_ref().and_then(|d| debounce_until(run.created_at, d.max_wait));
        let rare = RunRare {
            deadline: run.deadline,
            restarted_from: run.restarted_from.clone(),
            parent: run.parent.clone(),
            continued_from: run.continued_from.clone(),
            continued_as: None,
            debounce_key: run.debounce.as_ref().map(|d| d.key.clone()),
            debounce_until,
        };
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
            concurrency: None,
            waiting_for: None,
            priority: run.priority,
            fairness_key: run.fairness_key.clone(),
            fair_seq: 0,
            retention: run.retention,
            delete_after: None,
            rare: rare.boxed(),
        }
    }
}
