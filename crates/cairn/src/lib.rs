//! Cairn: durable execution for Rust.
//!
//! A workflow is a plain `async fn(Ctx, Input) -> Result<Output, WorkflowError>`. Each
//! [`ctx.step`](Ctx::step) is journaled, so a run survives crashes and restarts: on replay a
//! completed step returns its journaled result without running again. Runs can
//! [sleep](Ctx::sleep) for days, [wait for signals](Ctx::wait_for_event), retry failed steps with
//! [backoff](RetryPolicy), and be listed, inspected, signalled and cancelled through a [`Client`].
//!
//! ```
//! use cairn::prelude::*;
//! use cairn::MemoryStore;
//! use std::time::Duration;
//!
//! async fn order(ctx: Ctx, amount: u64) -> Result<String, WorkflowError> {
//!     let reservation: String =
//!         ctx.step("reserve", || async { Ok::<_, StepError>("r-1".to_owned()) }).await?;
//!     let charged = ctx
//!         .step("charge", || async move { if amount > 100 { Err(StepError::terminal("declined")) } else { Ok(amount) } })
//!         .retry(RetryPolicy::exponential().attempts(3).base(Duration::from_millis(10)))
//!         .await;
//!     if charged.is_err() {
//!         ctx.step("release", || async { Ok::<_, StepError>(()) }).await?;
//!         return Err(WorkflowError::failed("payment declined"));
//!     }
//!     Ok(reservation)
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let engine = Engine::builder().store(MemoryStore::new()).register("order", 1, order).start().await?;
//! let ok = engine.client().start("order", &10u64).idempotency_key("order-1").await?;
//! assert_eq!(ok.result::<String>().await?, "r-1");
//! let again = engine.client().start("order", &10u64).idempotency_key("order-1").await?;
//! assert!(!again.created());
//! let declined = engine.client().start("order", &500u64).await?;
//! assert!(declined.result::<String>().await.is_err());
//! engine.shutdown().await;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

pub mod api;
mod attach;
mod child;
mod client;
mod clock;
mod continuations;
mod ctx;
mod engine;
mod error;
mod flow;
mod op_error;
mod panic;
mod registry;
mod repeat;
mod run;
pub mod run_core;
mod saga;
mod schedule;
mod schedules;
pub mod telemetry;
pub mod testing;
mod var;
mod workers;

pub use cairn_api::{DebounceOptions, StartOptions};
pub use cairn_journal::{RetryPolicy, StepPath, Timestamp};
#[cfg(feature = "sqlite")]
pub use cairn_sqlite::{Durability, SqliteOptions, SqliteStore};
pub use cairn_store::{
    CancelOutcome, ConcurrencyRule, Debounce, ErrorKind, EventId, EventName, IdempotencyKey, MemoryStore, NameError,
    PageCursor, PauseOutcome, RunConcurrency, RunFilter, RunId, RunPage, RunRecord, RunStatus, ScheduleName,
    SignalRecord, Store, StoreError, SuspendReason, WaitingFor, WorkflowCount, WorkflowName,
};
pub use child::Child;
pub use client::{
    Cancel, Client, DEFAULT_RETENTION, PRUNE_BATCH, Pause, Publish, Published, Restart, RunHandle, SWEEP_PAUSE_FACTOR,
    StartRun, parse_run_timeout,
};
pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use continuations::{Continuations, Transition};
pub use ctx::{Branch, Ctx, EventFilter, Step, step_attempt};
pub use engine::{DEFAULT_MAX_RECOVERIES, DEFAULT_SHUTDOWN_GRACE, Engine, EngineBuilder};
pub use error::{ClientError, EngineError, Interrupt, StepError, Terminal, WorkflowError};
pub use flow::RateLimit;
pub use op_error::{ControlError, ReadError, RestartError, SignalError, StartError};
pub use repeat::LoopOptions;
pub use run_core::{DEFAULT_MAX_PAYLOAD_BYTES, RunInfo};
pub use saga::Saga;
pub use schedule::{CatchUp, Firings, MAX_CATCH_UP, ON_TIME, Schedule, ScheduleSpec, schedule_run_id};
pub use uuid::Uuid;
pub use var::Var;
pub use workers::{LiveWorkers, StrandedPage, StrandedRun, StrandedVersion};

/// The journal layer, for tools that read journals: events and entries, paths, the checked fold,
/// the replay cursor, retry arithmetic, and the pure rules of flow control, topics and timelines.
pub mod journal {
    pub use cairn_journal::{
        Backoff, CursorError, Event, EventKindName, JournalEntry, LoopRecord, NonDeterminism, PathError, ReplayCursor,
        Replayed, RetryPolicy, RunPhase, RunState, SignalId, StepKind, StepPath, StepRecord, StepStatus, Timestamp,
        TransitionError, Trim, flow, json_contains, timeline, topic, vars,
    };
}

/// The store layer, for tools and backends: the [`Store`] trait and the
/// types of its calls, the run lifecycle, the in-memory and JSON-lines stores (and the SQLite
/// store's own items, feature `sqlite`; test wrappers, feature `test-util`).
pub mod store {
    pub use cairn_jsonl::JsonlStore;
    #[cfg(feature = "sqlite")]
    pub use cairn_sqlite::{
        Durability, SqliteOptions, SqliteStore, StatementCount, StatementCounts, sqlite_commit_floor_us,
    };
    pub use cairn_store::{
        Append, CancelOutcome, Cause, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, Debounce, ErrorKind,
        EventCursor, EventId, EventName, EventPage, EventQuery, EventRecord, EventRun, FireSchedule, ForgetWorkers,
        HeartbeatRequest, IdempotencyKey, LeaseStatus, MemoryStore, NameError, NewRun, NewSignal, Notice, PageCursor,
        PauseOutcome, PauseSchedule, PruneRequest, PutSchedule, Reason, Request, ResumeRequest, RunConcurrency,
        RunFilter, RunId, RunPage, RunRecord, RunStatus, RunUpdate, SPLIT_JOURNAL_AT, ScheduleName, ScheduleRecord,
        ServedWorkflow, SetSubscriptions, SignalId, SignalRecord, StartSignal, Store, StoreError, StoreFuture,
        Subscription, SuspendReason, TakeRate, Timestamp, VersionCount, WaitingFor, WorkerRecord, WorkflowCount,
        WorkflowKey, WorkflowName, journal_halves, lifecycle, metrics_names,
    };
    #[cfg(feature = "test-util")]
    pub use cairn_store::{Calls, CountingStore, Fault, Faults, FaultyStore};
    pub use cairn_store::{EventStore, FlowStore, JournalStore, RunStore, ScheduleStore, SignalStore, WorkerStore};
}

/// The common imports: `use cairn::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Client, ClientError, Ctx, Engine, EventFilter, RetryPolicy, RunId, StepError, Terminal, WorkflowError,
    };
}
