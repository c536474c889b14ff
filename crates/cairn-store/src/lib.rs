//! Cairn's storage layer: one [`Store`] trait and the backends behind it.
//!
//! A store keeps runs (one summary row each), their journals (dense, append-only) and their
//! signals. Every state change of a run is an [`Append`]: journal events plus the matching update
//! of the summary row, checked against the appender's lease epoch and the journal's last sequence
//! number, committed together. Backends group appends from many runs into one transaction.
//!
//! * [`MemoryStore`]: everything in process memory, for tests and benchmarks.
//! * `SqliteStore`, in the `cairn-sqlite` crate (re-exported by `cairn`): one file, WAL, one
//!   writer thread that group-commits.
//! * `JsonlStore`, in the `cairn-jsonl` crate (re-exported by `cairn::store`): one append-only
//!   JSON-lines file per run under a data directory; no native dependency, human-readable,
//!   single-writer.
//!
//! Every backend passes the conformance suite in the `cairn-store-conformance` crate.

#[cfg(any(test, feature = "test-util"))]
#[macro_use]
mod delegate;
#[cfg(any(test, feature = "test-util"))]
mod counting;
#[cfg(any(test, feature = "test-util"))]
mod faulty;
pub mod lifecycle;
mod memory;
mod store;
mod types;

/// Test and diagnostic wrappers (feature `test-util`): a store that counts its calls, and one
/// that fails on cue.
#[cfg(any(test, feature = "test-util"))]
pub use counting::{Calls, CountingStore};
#[cfg(any(test, feature = "test-util"))]
pub use faulty::{Fault, Faults, FaultyStore};
pub use memory::MemoryStore;
pub use store::{
    EventStore, FlowStore, JournalStore, Notice, RunStore, SPLIT_JOURNAL_AT, ScheduleStore, SignalStore, Store,
    StoreFuture, WorkerStore, journal_halves,
};
pub use types::{
    Append, CancelOutcome, Cause, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, Debounce, ErrorKind,
    EventCursor, EventId, EventName, EventPage, EventQuery, EventRecord, EventRun, FireSchedule, ForgetWorkers,
    HeartbeatRequest, IdempotencyKey, LeaseStatus, NameError, NewRun, NewSignal, PageCursor, PauseOutcome,
    PauseSchedule, PruneRequest, PutSchedule, Reason, Request, ResumeRequest, RunConcurrency, RunFilter, RunId,
    RunPage, RunRare, RunRecord, RunStatus, RunUpdate, ScheduleName, ScheduleRecord, ServedWorkflow, SetSubscriptions,
    SignalRecord, StartSignal, StoreError, Subscription, SuspendReason, TakeRate, VersionCount, WorkerRecord,
    WorkflowCount, WorkflowKey, WorkflowName,
};

pub mod metrics_names;
pub use cairn_journal::flow::WaitingFor;
pub use cairn_journal::{SignalId, Timestamp};
