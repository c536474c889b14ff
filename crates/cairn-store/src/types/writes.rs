//! What callers ask a store to change: claims, appends, heartbeats, signals, control requests, pruning.

use super::new_run::*;
use super::record::*;
use super::run::*;
use cairn_journal::{Event, SignalId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

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

/// A signal that [`RunStore::start_with_signal`](crate::RunStore::start_with_signal) buffers for the
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

/// Which ended runs [`RunStore::prune`](crate::RunStore::prune) deletes.
#[derive(Debug, Clone)]
pub struct PruneRequest {
    /// Now, by the engine's clock: runs whose `delete_after` is not later are deleted.
    pub now: Timestamp,
    /// Also every ended run that ended before this, whatever its retention (an engine's maximum
    /// retention, or `cairn runs prune --older-than`).
    pub ended_before: Option<Timestamp>,
    /// Also the recorded events published before this ([`EventStore::events`](crate::EventStore::events)),
    /// up to `limit` of them.
    pub events_before: Option<Timestamp>,
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

/// What [`RunStore::pause`](crate::RunStore::pause) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseOutcome {
    /// No live worker held the run (or it was paused already): it is paused now.
    Paused,
    /// A worker holds the run: it is flagged, and the worker parks it at its next step boundary.
    Requested,
}

/// What [`RunStore::cancel`](crate::RunStore::cancel) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// No live worker held the run: it is cancelled now.
    Cancelled,
    /// A worker holds the run: it is flagged, and the worker cancels it.
    Requested,
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
    /// A cancel or pause that waits for the worker, with its reason.
    pub pending: Option<Request>,
}
