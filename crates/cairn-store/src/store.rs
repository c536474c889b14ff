//! The trait every backend implements, and what it hands back.

use crate::types::*;
use cairn_journal::{SignalId, Timestamp};
use std::future::Future;
use std::pin::Pin;

/// A boxed future returned by [`Store`] methods, so the trait can be used as `Arc<dyn Store>`.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Durable storage for runs, journals and signals: the sum of one trait per concern, which
/// every backend implements (a type that implements them all is a `Store`).
///
/// Every method is atomic: it changes everything it describes or nothing. Implementations must
/// pass the shared conformance suite (`cairn-store-conformance`), organised by the same concerns.
/// Calling a method needs its trait in scope (`use cairn_store::{RunStore, JournalStore};`).
pub trait Store: RunStore + JournalStore + SignalStore + ScheduleStore + FlowStore + EventStore + WorkerStore {}

impl<T: RunStore + JournalStore + SignalStore + ScheduleStore + FlowStore + EventStore + WorkerStore + ?Sized> Store
    for T
{
}

/// Runs and their lifecycle: create, read, list and count runs; claim, heartbeat, cancel, pause, resume and prune them.
///
/// Part of [`Store`]; every method is atomic.
pub trait RunStore: Send + Sync + 'static {
    /// Creates a run and its `started` event, or returns the run that already has the same
    /// `(workflow, idempotency_key)` with `created: false`.
    fn create_run(&self, run: NewRun) -> StoreFuture<'_, CreatedRun>;

    /// One run's summary row.
    fn get_run<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Option<RunRecord>>;

    /// Runs matching `filter`, newest first, one page at a time.
    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, RunPage>;

    /// How many runs `filter` selects (its cursor included, its page size ignored), counting
    /// no further than `at_most`: the answer is `at_most` when at least that many match. SQL
    /// stores count in one statement; this default reads the pages.
    fn count_runs<'a>(&'a self, filter: &'a RunFilter, at_most: u64) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let mut filter = RunFilter { limit: Some(1000), ..filter.clone() };
            let mut counted = 0u64;
            while counted < at_most {
                let page = self.list_runs(&filter).await?;
                counted += page.runs.len() as u64;
                match page.next_cursor {
                    Some(cursor) => filter.cursor = Some(cursor),
                    None => break,
                }
            }
            Ok(counted.min(at_most))
        })
    }

    /// Leases up to `request.limit` ready runs of the given workflows to `request.owner`: pending
    /// runs, suspended runs whose `wake_at` has passed, and running runs whose lease expired.
    /// Each claim bumps the run's epoch, fencing any previous holder.
    fn claim<'a>(&'a self, request: &'a ClaimRequest) -> StoreFuture<'a, Vec<RunRecord>>;

    /// Extends leases still held; reports for each run whether it is held and whether a
    /// cancellation was requested.
    fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>>;

    /// Cancels a run: at once if no live worker holds it, otherwise by flagging it for its worker.
    fn cancel(&self, request: ControlRequest) -> StoreFuture<'_, CancelOutcome>;

    /// Pauses a run so no worker claims it: at once if no live worker holds it (status `paused`,
    /// `request.reason` as its error), otherwise by flagging it for its worker, which parks it at
    /// its next step boundary. Pausing a paused run changes nothing.
    fn pause(&self, request: ControlRequest) -> StoreFuture<'_, PauseOutcome>;

    /// Releases a paused run (by an operator or a parked error): it becomes `pending`, its error
    /// and its recovery count cleared, ready for any worker to replay it. Refused
    /// ([`StoreError::NotPaused`]) for a run in another state.
    fn resume(&self, request: ResumeRequest) -> StoreFuture<'_, ()>;

    /// Creates `run` if it does not exist (by id, or by idempotency key) and buffers `signal` for
    /// it, in one atomic operation, so a caller never races a run into existence. An existing
    /// unfinished run of the same workflow gets the signal (`created: false`); a finished one
    /// refuses it ([`StoreError::RunFinished`]) and nothing is stored.
    fn start_with_signal(&self, run: NewRun, signal: StartSignal) -> StoreFuture<'_, (CreatedRun, SignalId)>;

    /// Deletes up to `request.limit` ended runs (completed, failed or cancelled) past their
    /// retention (or ended before `request.ended_before`), with their journals and signals, in
    /// one transaction, and up to as many events published before `request.events_before`;
    /// returns the runs' ids (with `dry_run`, the ids it would delete, deleting nothing). Never a run
    /// that has not ended. Safe to run from many workers at once: each run is deleted once, and
    /// claims are not blocked.
    fn prune(&self, request: PruneRequest) -> StoreFuture<'_, Vec<RunId>>;

    /// For each workflow version with runs that [need a worker](RunStatus::needs_worker), how
    /// many, by `(workflow, version)`.
    fn version_counts(&self) -> StoreFuture<'_, Vec<VersionCount>>;

    /// How many runs each workflow has in each status, ordered by workflow then status name,
    /// without counts of 0. SQL stores keep the ended statuses' counts as runs end and are
    /// deleted, so this does not scan the runs that have ended.
    fn workflow_counts(&self) -> StoreFuture<'_, Vec<WorkflowCount>>;

    /// The earliest `wake_at` among suspended runs of these workflows, or `next_fire_at` among
    /// the unpaused schedules of their names.
    fn next_wake_at<'a>(&'a self, workflows: &'a [WorkflowKey]) -> StoreFuture<'a, Option<Timestamp>>;
}

/// A run's journal: read it, and append to it under the run's lease.
///
/// Part of [`Store`]; every method is atomic.
pub trait JournalStore: Send + Sync + 'static {
    /// A run's whole journal in sequence order.
    fn read_journal<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<cairn_journal::JournalEntry>>;

    /// A run's journal entries 1 to `last_seq`, in sequence order: what a worker that holds the
    /// run's lease loads (no entry beyond `last_seq` exists then). Knowing the length up front, a
    /// backend may read a long journal in parts at once; by default this is
    /// [`read_journal`](JournalStore::read_journal) cut at `last_seq`.
    fn read_journal_through<'a>(
        &'a self,
        id: &'a RunId,
        last_seq: u64,
    ) -> StoreFuture<'a, Vec<cairn_journal::JournalEntry>> {
        Box::pin(async move {
            let mut journal = self.read_journal(id).await?;
            journal.retain(|entry| entry.seq <= last_seq);
            Ok(journal)
        })
    }

    /// Appends events and updates the run row, if the caller still holds epoch `append.epoch` and
    /// the journal still ends at `append.after_seq`.
    fn append(&self, append: Append) -> StoreFuture<'_, ()>;
}

/// Signals: deliver them, and read a run's.
///
/// Part of [`Store`]; every method is atomic.
pub trait SignalStore: Send + Sync + 'static {
    /// A run's signals, oldest first; consumed ones carry the journal sequence that consumed them.
    fn signals<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<SignalRecord>>;

    /// Delivers a signal to a run (buffered until a wait consumes it) and wakes the run if it waits.
    fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId>;
}

/// Schedules: store, list, fire, pause and delete them.
///
/// Part of [`Store`]; every method is atomic.
pub trait ScheduleStore: Send + Sync + 'static {
    /// Creates or updates a schedule (see [`PutSchedule`]); the schedule as stored after.
    fn put_schedule<'a>(&'a self, schedule: &'a PutSchedule) -> StoreFuture<'a, ScheduleRecord>;

    /// Every schedule, by name.
    fn schedules(&self) -> StoreFuture<'_, Vec<ScheduleRecord>>;

    /// Up to `limit` unpaused schedules of `workflows` whose `next_fire_at` is at or before
    /// `now`, earliest first.
    fn due_schedules<'a>(
        &'a self,
        workflows: &'a [String],
        now: Timestamp,
        limit: usize,
    ) -> StoreFuture<'a, Vec<ScheduleRecord>>;

    /// Fires a due schedule (see [`FireSchedule`]): the runs it created or found, or `None` if it
    /// was no longer due at `due` (fired elsewhere, paused, moved or deleted) and nothing changed.
    fn fire_schedule(&self, fire: FireSchedule) -> StoreFuture<'_, Option<Vec<CreatedRun>>>;

    /// Pauses or resumes a schedule; refused with [`StoreError::ScheduleNotFound`] if there is
    /// none of that name.
    fn pause_schedule<'a>(&'a self, change: &'a PauseSchedule) -> StoreFuture<'a, ScheduleRecord>;

    /// Deletes a schedule (the runs it started stay); whether there was one.
    fn delete_schedule<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool>;
}

/// Flow control: concurrency rules and rate limits.
///
/// Part of [`Store`]; every method is atomic.
pub trait FlowStore: Send + Sync + 'static {
    /// Stores a concurrency rule (replacing the workflow's earlier one), and admits the runs
    /// waiting for its slots that its limit now lets in. Runs keep the key they were created
    /// with.
    fn put_concurrency<'a>(&'a self, rule: &'a ConcurrencyRule) -> StoreFuture<'a, ()>;

    /// Deletes a workflow's concurrency rule, admitting every run that waited for its slots;
    /// whether there was one.
    fn delete_concurrency<'a>(&'a self, workflow: &'a str) -> StoreFuture<'a, bool>;

    /// Every concurrency rule, by workflow.
    fn concurrency_rules(&self) -> StoreFuture<'_, Vec<ConcurrencyRule>>;

    /// Takes a turn under a rate limit: if the bucket has granted fewer than `take.limit` turns
    /// in the `take.period` before `take.now`, records a grant at `take.now` and returns `None`;
    /// else records nothing and returns when the next turn frees up
    /// ([`cairn_journal::flow::rate_verdict`]). Atomic across every process sharing the store, so
    /// no window of `period` ever holds more than `limit` grants of one bucket.
    fn take_rate<'a>(&'a self, take: &'a TakeRate) -> StoreFuture<'a, Option<Timestamp>>;
}

/// Published events and the topic subscriptions that start runs for them.
///
/// Part of [`Store`]; every method is atomic.
pub trait EventStore: Send + Sync + 'static {
    /// Records a published event with the runs it started. An id recorded before keeps its
    /// topic, payload and time and gains the runs of workflows it had none of
    /// ([`EventRecord::runs_over`]): a publish retried with its id records nothing twice.
    fn record_event<'a>(&'a self, event: &'a EventRecord) -> StoreFuture<'a, ()>;

    /// The recorded events `query` selects, newest first (by time, then id), a page of at most
    /// `query.limit`. Events past their retention are deleted by [`prune`](RunStore::prune).
    fn events<'a>(&'a self, query: &'a EventQuery) -> StoreFuture<'a, EventPage>;

    /// Replaces the topic subscriptions of `request.workflows` with `request.subscriptions`, in
    /// one operation.
    fn set_subscriptions<'a>(&'a self, request: &'a SetSubscriptions) -> StoreFuture<'a, ()>;

    /// Every topic subscription, ordered by workflow then pattern.
    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>>;
}

/// Workers and maintenance: the worker registry, the served-workflow registry, and the wake-ups and notices a shared store sends.
///
/// Part of [`Store`]; every method is atomic.
pub trait WorkerStore: Send + Sync + 'static {
    /// Records a worker, or refreshes its record (same id): when it starts and with each of its
    /// heartbeats.
    fn record_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()>;

    /// Every recorded worker, live or not, by id.
    fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>>;

    /// Deletes the worker records `request` selects; returns how many it deleted.
    fn forget_workers<'a>(&'a self, request: &'a ForgetWorkers) -> StoreFuture<'a, u64>;

    /// Records that a worker serves the workflow versions `serves` (when it starts, at `at`):
    /// the registry [`served_workflows`](WorkerStore::served_workflows) reads, which outlives the
    /// workers, so that a start of a workflow no worker has ever served can be refused.
    fn record_served<'a>(&'a self, serves: &'a [WorkflowKey], at: Timestamp) -> StoreFuture<'a, ()>;

    /// Every workflow version a worker has ever served on this store (recorded by
    /// [`record_served`](WorkerStore::record_served)), by name then version, with when it was first
    /// and last recorded.
    fn served_workflows(&self) -> StoreFuture<'_, Vec<ServedWorkflow>>;

    /// For stores shared between processes: a receiver that changes whenever another process may
    /// have made runs ready (a new run, a signal, a cancellation), so idle workers need not poll.
    /// `None` (the default): workers rely on local notifications and polling.
    fn wakeups(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// For stores shared between processes: runs that ended (completed, failed, cancelled or
    /// parked) and runs that were signalled, wherever that happened, so result waiters and
    /// waits in memory need not poll. A receiver that lags, like [`Notice::Missed`], means
    /// anything may have happened. `None` (the default): waiters poll.
    fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        None
    }
}

/// Journals at least this long are read by SQL backends in two halves at once (see
/// [`JournalStore::read_journal_through`]).
pub const SPLIT_JOURNAL_AT: u64 = 2_000;

/// The sequence ranges (first, last) a journal of entries 1 to `last_seq` is read in: two halves
/// from [`SPLIT_JOURNAL_AT`] entries on, else `None` (read it whole).
///
/// ```
/// assert_eq!(cairn_store::journal_halves(10), None);
/// assert_eq!(cairn_store::journal_halves(5_001), Some([(1, 2_500), (2_501, 5_001)]));
/// ```
pub fn journal_halves(last_seq: u64) -> Option<[(u64, u64); 2]> {
    let middle = last_seq / 2;
    (last_seq >= SPLIT_JOURNAL_AT).then_some([(1, middle), (middle + 1, last_seq)])
}

/// What [`WorkerStore::notices`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// This run ended.
    Ended(RunId),
    /// This run was sent a signal.
    Signalled(RunId),
    /// Reports may have been missed (the store reconnected, say): anything may have happened.
    Missed,
}
