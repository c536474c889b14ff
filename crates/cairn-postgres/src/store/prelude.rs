//! The names from other crates that every module here uses.

pub(crate) use cairn_journal::flow::pointer_tokens;
pub(crate) use cairn_journal::{Event, EventKindName, JournalEntry, SignalId, Timestamp};
pub(crate) use cairn_store::{
    Append, CancelOutcome, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, EventPage, EventQuery,
    EventRecord, FireSchedule, ForgetWorkers, HeartbeatRequest, LeaseStatus, NewRun, NewSignal, Notice, PauseOutcome,
    PauseSchedule, PruneRequest, PutSchedule, Request, ResumeRequest, RunConcurrency, RunFilter, RunId, RunPage,
    RunRare, RunRecord, RunStatus, RunUpdate, ScheduleRecord, ServedWorkflow, SetSubscriptions, SignalRecord,
    StartSignal, StoreError, StoreFuture, Subscription, SuspendReason, TakeRate, VersionCount, WaitingFor,
    WorkerRecord, WorkflowCount, WorkflowKey,
};
pub(crate) use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
pub(crate) use serde_json::value::RawValue;
pub(crate) use std::collections::{HashMap, HashSet, VecDeque};
pub(crate) use std::sync::Arc;
pub(crate) use tokio::sync::{mpsc, oneshot, watch};
pub(crate) use tokio_postgres::AsyncMessage;
pub(crate) use tokio_postgres::types::ToSql;
pub(crate) use tokio_postgres::{NoTls, Row};
