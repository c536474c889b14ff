//! The names from other crates that every module of this crate uses.

pub(crate) use cairn_journal::flow::{holds_slot, rate_forgets_before, rate_verdict};
pub(crate) use cairn_journal::{Event, EventKindName, JournalEntry, SignalId, Timestamp, Trim};
pub(crate) use cairn_store::{
    Append, CancelOutcome, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, EventPage, EventQuery,
    EventRecord, FireSchedule, ForgetWorkers, HeartbeatRequest, IdempotencyKey, LeaseStatus, NewRun, NewSignal,
    PageCursor, PauseOutcome, PauseSchedule, PruneRequest, PutSchedule, Request, ResumeRequest, RunConcurrency,
    RunFilter, RunId, RunPage, RunRare, RunRecord, RunStatus, RunUpdate, ScheduleRecord, ServedWorkflow,
    SetSubscriptions, SignalRecord, StartSignal, StoreError, StoreFuture, Subscription, SuspendReason, TakeRate,
    VersionCount, WaitingFor, WorkerRecord, WorkflowCount, WorkflowKey, WorkflowName,
};
pub(crate) use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};
pub(crate) use serde_json::value::RawValue;
pub(crate) use std::collections::HashMap;
pub(crate) use std::path::{Path, PathBuf};
pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Mutex};
pub(crate) use std::time::Duration;
pub(crate) use tokio::sync::{mpsc, oneshot};
