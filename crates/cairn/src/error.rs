//! Errors: what step bodies return, what workflow bodies see, what clients get.

use cairn_journal::{NonDeterminism, PathError, StepPath};
use cairn_store::{ErrorKind, NameError, RunId, RunStatus, StoreError};
use std::fmt;

/// The error a step body returns: retryable unless marked [terminal](StepError::terminal).
///
/// Any `std::error::Error` converts into a retryable `StepError` that keeps it as its
/// [`source`](StepError::source), so step bodies can use `?` on ordinary errors; `.terminal()`
/// on a `Result` ([`Terminal`]) marks its error terminal on the way.
///
/// ```
/// use cairn::{StepError, Terminal};
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset");
/// let retry: StepError = io.into();
/// assert!(retry.is_retryable());
/// assert_eq!(retry.source().map(|s| s.to_string()), Some("connection reset".into()));
/// let stop = StepError::terminal("card declined");
/// assert!(!stop.is_retryable());
/// let declined: Result<(), std::io::Error> = Err(std::io::Error::other("card declined"));
/// let marked = declined.terminal().unwrap_err();
/// assert!(!marked.is_retryable() && marked.source().is_some());
/// ```
#[derive(Debug, Clone)]
pub struct StepError {
    message: String,
    retryable: bool,
    source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

impl StepError {
    /// A failure worth another attempt.
    pub fn retryable(message: impl fmt::Display) -> Self {
        Self { message: message.to_string(), retryable: true, source: None }
    }

    /// A failure that ends retrying at once, whatever the policy allows.
    pub fn terminal(message: impl fmt::Display) -> Self {
        Self { message: message.to_string(), retryable: false, source: None }
    }

    /// The same failure, ending retrying at once.
    pub fn into_terminal(self) -> Self {
        Self { retryable: false, ..self }
    }

    /// Whether the policy may try again.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The message (what the journal records of the attempt).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error it was made from, when it was converted from one.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

/// Two step errors are equal when they say the same and retry alike (their sources are not
/// compared).
impl PartialEq for StepError {
    fn eq(&self, other: &Self) -> bool {
        (&self.message, self.retryable) == (&other.message, other.retryable)
    }
}

impl Eq for StepError {}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for StepError {
    fn from(error: E) -> Self {
        StepError { message: error.to_string(), retryable: true, source: Some(std::sync::Arc::new(error)) }
    }
}

/// `.terminal()` on a step body's `Result`: its error, if any, ends retrying at once (after
/// restate's `TerminalErrorExt`).
///
/// ```no_run
/// # use cairn::{Ctx, StepError, Terminal, WorkflowError};
/// # async fn charge_card() -> Result<u32, std::io::Error> { Ok(1) }
/// async fn charge(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
///     // A declined card will not be accepted on a retry.
///     ctx.step("charge", || async { Ok::<_, StepError>(charge_card().await.terminal()?) }).await
/// }
/// ```
pub trait Terminal<T> {
    /// The result, its error made terminal.
    fn terminal(self) -> Result<T, StepError>;
}

impl<T, E: Into<StepError>> Terminal<T> for Result<T, E> {
    fn terminal(self) -> Result<T, StepError> {
        self.map_err(|error| error.into().into_terminal())
    }
}

/// Why a run must stop executing here. Workflow code should propagate it with `?`; the engine
/// handles it whatever the body returns afterwards.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Interrupt {
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
    /// This worker lost the run's lease; another worker owns it now.
    #[error("[CAIRN-E0201] this worker lost the run's lease")]
    LeaseLost,
    /// The body diverged from the journal; the run is parked.
    #[error(transparent)]
    NonDeterminism(#[from] NonDeterminism),
    /// The store failed; the run will be retried from its journal.
    #[error("store failure: {0}")]
    Store(StoreError),
    /// The run was paused: it stops at its next step boundary (steps in flight finish and are
    /// committed) and is parked until resumed.
    #[error("the run was paused")]
    Paused,
    /// The worker is shutting down: the run stops at its next step boundary (steps in flight
    /// finish within the shutdown's grace period) and its lease is handed back.
    #[error("the worker is shutting down")]
    ShuttingDown,
    /// The run's workers died while executing it too many times in a row: it is parked as poison
    /// instead of executing the step that crashed them.
    #[error(
        "[CAIRN-E0109] parked as poison: the run's worker died {recoveries} times in a row without committing anything{}",
        match path { Some(path) => format!(", each time at or before `{path}`"), None => ", before reaching any new step".to_owned() }
    )]
    Poisoned {
        /// The first new step the run reached (where the crashes happen), if it reached one.
        path: Option<StepPath>,
        /// Claims from an expired lease in a row without progress.
        recoveries: u32,
    },
    /// The run's deadline (see [`StartRun::timeout`](crate::client::StartRun::timeout)) passed: it
    /// fails with this error.
    #[error("[CAIRN-E0110] the run timed out: its deadline passed before it finished")]
    TimedOut,
    /// A replay check ([`crate::testing::replay`]) reached a step its journal does not hold
    /// settled: a live run would execute or wait for it now.
    #[error("the replay check stopped at `{path}`, where the journal ends")]
    ReplayChecked {
        /// The step.
        path: StepPath,
    },
}

impl Interrupt {
    /// Whether steps in flight may finish and commit first (a pause, a shutdown), as opposed to
    /// an interrupt that stops them at once (their cancellation tokens fire).
    pub fn lets_steps_finish(&self) -> bool {
        matches!(self, Interrupt::Paused | Interrupt::ShuttingDown)
    }
}

/// What a workflow body sees go wrong, and what it returns to fail a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// A step failed for good: its retries were exhausted or it returned a terminal error. The
    /// body may compensate (saga) or propagate.
    #[error("step `{path}` failed after {attempts} attempt(s): {message}")]
    StepFailed {
        /// The step.
        path: StepPath,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        message: String,
    },
    /// The workflow's own failure.
    #[error("{0}")]
    Failed(String),
    /// A step name was not a valid path segment.
    #[error(transparent)]
    InvalidPath(#[from] PathError),
    /// Two steps of this run used one path.
    #[error("[CAIRN-E0102] two steps in this run use the path `{0}`: give each a unique name (use `name[i]` in loops)")]
    DuplicatePath(StepPath),
    /// A value could not be encoded or decoded as JSON.
    #[error("[CAIRN-E0104] payload of `{path}` does not (de)serialize: {message}")]
    Payload {
        /// Where (the step path, or `input` / `output`).
        path: String,
        /// The serde error.
        message: String,
    },
    /// A value is larger than the engine's payload limit; nothing was stored.
    #[error("[CAIRN-E0105] payload of `{path}` is {size} bytes, over the {limit}-byte limit; nothing was stored")]
    PayloadTooLarge {
        /// Where.
        path: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The run must stop here; propagate this.
    #[error(transparent)]
    Interrupted(#[from] Interrupt),
    /// Branches of a [`Ctx::join`](crate::ctx::Ctx::join) failed: each by name, with its error.
    #[error("[CAIRN-E0111] {} branch(es) failed: {}", failures.len(), failures.iter().map(|(name, error)| format!("`{name}`: {error}")).collect::<Vec<_>>().join("; "))]
    BranchesFailed {
        /// Each failed branch's name and error, in the order the branches were given.
        failures: Vec<(String, String)>,
    },
    /// A child run awaited with [`Ctx::child`](crate::ctx::Ctx::child) did not complete.
    #[error("[CAIRN-E0115] child run `{child}` ended {status}: {error}")]
    ChildFailed {
        /// The child's id.
        child: String,
        /// How it ended (`failed` or `cancelled`).
        status: String,
        /// Its error.
        error: String,
    },
    /// A [`Ctx::saga`](crate::ctx::Ctx::saga)'s body failed and every compensation ran.
    #[error("[CAIRN-E0112] {error}; compensated: {}", undone.join(", "))]
    Compensated {
        /// The body's error.
        error: String,
        /// The steps undone, in the order their compensations ran (last step first).
        undone: Vec<String>,
    },
    /// Not a failure: the body asked to go on as a fresh run ([`Ctx::continue_as_new`](crate::ctx::Ctx::continue_as_new)).
    /// Returned from the body, it ends the run as `continued` and starts the next one; caught
    /// and dropped, it does nothing.
    #[error("[CAIRN-E0116] the run continues as a new run: return this from the workflow body")]
    ContinueAsNew {
        /// The new run's input, as JSON text.
        input: String,
    },
    /// A [`Ctx::saga`](crate::ctx::Ctx::saga)'s body failed and some compensations failed for good
    /// (the others ran).
    #[error("[CAIRN-E0113] {error}; {} compensation(s) failed: {}", failures.len(), failures.iter().map(|(name, error)| format!("`undo-{name}`: {error}")).collect::<Vec<_>>().join("; "))]
    CompensationFailed {
        /// The body's error.
        error: String,
        /// Each step whose compensation failed, with the compensation's error.
        failures: Vec<(String, String)>,
    },
}

impl WorkflowError {
    /// The workflow's own failure with a message.
    pub fn failed(message: impl fmt::Display) -> Self {
        WorkflowError::Failed(message.to_string())
    }
}

/// What a [`Client`](crate::client::Client) call can fail with. Its text starts with its
/// [code](ClientError::code) in brackets when it has one; each code is written once, in `code`.
///
/// ```
/// use cairn::{ClientError, RunId};
/// let missing = ClientError::RunNotFound(RunId::new("r-1"));
/// assert_eq!(missing.to_string(), "[CAIRN-E0301] no run with id `r-1`");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// No workflow of that name is registered with this engine.
    UnknownWorkflow(String),
    /// The workflow is registered, but not in that version.
    UnknownVersion {
        /// Name.
        name: String,
        /// Version asked for.
        version: u32,
    },
    /// The input or payload is not what the workflow accepts.
    InvalidPayload(String),
    /// The input or payload is over the size limit.
    PayloadTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// No such run.
    RunNotFound(RunId),
    /// The id is taken.
    DuplicateRunId(RunId),
    /// The run has already ended.
    RunFinished {
        /// The run.
        run_id: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// The run is not paused, so it cannot be resumed.
    NotPaused {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// A restart was asked of a run that has not ended.
    NotEnded {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// A restart was asked from a step the run's journal does not hold.
    UnknownStep {
        /// The run.
        run_id: RunId,
        /// The path asked for.
        path: String,
    },
    /// The run ended without an output.
    RunDidNotComplete {
        /// The run.
        run_id: RunId,
        /// `failed`, `cancelled` or `paused`.
        status: RunStatus,
        /// Its error or reason.
        message: String,
    },
    /// A topic to publish to is not valid.
    InvalidTopic(cairn_journal::topic::TopicError),
    /// An event id is empty, over 200 bytes or holds a control character.
    InvalidEventId(String),
    /// No schedule has that name.
    ScheduleNotFound(String),
    /// A schedule's name, cron expression, time zone, interval or catch-up policy is not valid.
    InvalidSchedule(String),
    /// A concurrency rule's limit is 0, its key is not a JSON pointer, or it has no workflow.
    InvalidConcurrency(String),
    /// A fairness key is empty, over 200 bytes or holds a control character.
    InvalidFairnessKey(String),
    /// A debounced start's key, quiet time or maximum wait is not valid, or it also asked for
    /// what a debounced start cannot have (an idempotency key, a signal).
    InvalidDebounce(String),
    /// A workflow name, an event name or an idempotency key breaks its rule (see
    /// [`WorkflowName`](cairn_store::WorkflowName), [`EventName`](cairn_store::EventName),
    /// [`IdempotencyKey`](cairn_store::IdempotencyKey), [`Reason`](cairn_store::Reason)). Nothing
    /// was stored.
    InvalidName(NameError),
    /// A start's timeout is not a duration from 1 ms to 10 years (`30m`, `2h`).
    InvalidTimeout(String),
    /// A schedule's time zone is not in the time zone database.
    UnknownTimeZone(String),
    /// The store failed.
    Store(StoreError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = match self {
            // Their own text carries their code.
            ClientError::InvalidTopic(error) => return fmt::Display::fmt(error, f),
            ClientError::Store(error) => return fmt::Display::fmt(error, f),
            _ => self.as_store(),
        };
        if let Some(store) = store {
            return fmt::Display::fmt(&store, f);
        }
        if let Some(code) = self.code() {
            write!(f, "[{code}] ")?;
        }
        match self {
            ClientError::UnknownWorkflow(name) => {
                write!(f, "unknown workflow `{name}`: not registered here, and no worker has served it on this store")
            }
            ClientError::UnknownVersion { name, version } => write!(f, "workflow `{name}` has no version {version}"),
            ClientError::InvalidPayload(message) => write!(f, "invalid payload: {message}"),
            ClientError::PayloadTooLarge { size, limit } => {
                write!(f, "payload is {size} bytes, over the {limit}-byte limit")
            }
            ClientError::NotEnded { run_id, status } => {
                write!(f, "run `{run_id}` is {status}: only a completed, failed or cancelled run can be restarted")
            }
            ClientError::UnknownStep { run_id, path } => {
                write!(f, "run `{run_id}` has no step `{path}` in its journal to restart from")
            }
            ClientError::RunDidNotComplete { run_id, status, message } => {
                write!(f, "run `{run_id}` ended {status}: {message}")
            }
            ClientError::InvalidEventId(id) => {
                write!(f, "event id {id:?} must be 1 to 200 characters without control characters")
            }
            ClientError::InvalidSchedule(message) => write!(f, "invalid schedule: {message}"),
            ClientError::InvalidConcurrency(message) => write!(f, "invalid concurrency rule: {message}"),
            ClientError::InvalidFairnessKey(message) => write!(f, "invalid fairness key: {message}"),
            ClientError::InvalidDebounce(message) => write!(f, "invalid debounce: {message}"),
            ClientError::InvalidName(error) => write!(f, "{error}"),
            ClientError::InvalidTimeout(message) => write!(f, "invalid timeout: {message}"),
            ClientError::UnknownTimeZone(zone) => write!(f, "unknown time zone {zone:?}"),
            // Written above, by what they wrap or stand for.
            ClientError::InvalidTopic(_)
            | ClientError::Store(_)
            | ClientError::RunNotFound(_)
            | ClientError::DuplicateRunId(_)
            | ClientError::RunFinished { .. }
            | ClientError::NotPaused { .. }
            | ClientError::ScheduleNotFound(_) => Ok(()),
        }
    }
}

/// No source: what a client error wraps (a store error, a topic's) is written in its message,
/// causes included, and an error chain prints each cause once.
impl std::error::Error for ClientError {}

impl From<StoreError> for ClientError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::RunNotFound(id) => ClientError::RunNotFound(id),
            StoreError::DuplicateRunId(id) => ClientError::DuplicateRunId(id),
            StoreError::RunFinished { run_id, status } => ClientError::RunFinished { run_id, status },
            StoreError::NotPaused { run_id, status } => ClientError::NotPaused { run_id, status },
            StoreError::InvalidInput(message) => ClientError::InvalidPayload(message),
            StoreError::ScheduleNotFound(name) => ClientError::ScheduleNotFound(name),
            other => ClientError::Store(other),
        }
    }
}

impl ClientError {
    /// The store's refusal this error stands for, when it is one the store makes too (no such
    /// run, an id taken, a run ended or not paused, no such schedule): its code and text are the
    /// store's, written once there.
    fn as_store(&self) -> Option<StoreError> {
        Some(match self {
            ClientError::RunNotFound(id) => StoreError::RunNotFound(id.clone()),
            ClientError::DuplicateRunId(id) => StoreError::DuplicateRunId(id.clone()),
            ClientError::RunFinished { run_id, status } => {
                StoreError::RunFinished { run_id: run_id.clone(), status: *status }
            }
            ClientError::NotPaused { run_id, status } => {
                StoreError::NotPaused { run_id: run_id.clone(), status: *status }
            }
            ClientError::ScheduleNotFound(name) => StoreError::ScheduleNotFound(name.clone()),
            _ => return None,
        })
    }

    /// What kind of failure this is (the HTTP API answers with the status of its kind).
    ///
    /// ```
    /// use cairn::{ClientError, ErrorKind, RunId};
    /// assert_eq!(ClientError::RunNotFound(RunId::new("r")).kind(), ErrorKind::NotFound);
    /// assert_eq!(ClientError::InvalidEventId(String::new()).kind(), ErrorKind::Invalid);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            ClientError::UnknownWorkflow(_)
            | ClientError::UnknownVersion { .. }
            | ClientError::RunNotFound(_)
            | ClientError::ScheduleNotFound(_)
            | ClientError::UnknownStep { .. }
            | ClientError::UnknownTimeZone(_) => ErrorKind::NotFound,
            ClientError::InvalidPayload(_)
            | ClientError::InvalidTopic(_)
            | ClientError::InvalidEventId(_)
            | ClientError::InvalidSchedule(_)
            | ClientError::InvalidConcurrency(_)
            | ClientError::InvalidFairnessKey(_)
            | ClientError::InvalidDebounce(_)
            | ClientError::InvalidName(_)
            | ClientError::InvalidTimeout(_) => ErrorKind::Invalid,
            ClientError::PayloadTooLarge { .. } => ErrorKind::TooLarge,
            ClientError::DuplicateRunId(_)
            | ClientError::RunFinished { .. }
            | ClientError::NotPaused { .. }
            | ClientError::NotEnded { .. }
            | ClientError::RunDidNotComplete { .. } => ErrorKind::Conflict,
            ClientError::Store(error) => error.kind(),
        }
    }

    /// A stable snake_case name of what went wrong (`run_not_found`): the HTTP API's
    /// `error.code`.
    pub fn name(&self) -> &'static str {
        match self {
            ClientError::UnknownWorkflow(_) => "unknown_workflow",
            ClientError::UnknownVersion { .. } => "unknown_version",
            ClientError::InvalidPayload(_) => "invalid_payload",
            ClientError::PayloadTooLarge { .. } => "payload_too_large",
            ClientError::RunNotFound(_) => "run_not_found",
            ClientError::DuplicateRunId(_) => "duplicate_run_id",
            ClientError::RunFinished { .. } => "run_finished",
            ClientError::NotPaused { .. } => "not_paused",
            ClientError::NotEnded { .. } => "not_ended",
            ClientError::UnknownStep { .. } => "unknown_step",
            ClientError::RunDidNotComplete { .. } => "run_did_not_complete",
            ClientError::InvalidTopic(_) => "invalid_topic",
            ClientError::InvalidEventId(_) => "invalid_event_id",
            ClientError::ScheduleNotFound(_) => "schedule_not_found",
            ClientError::InvalidSchedule(_) => "invalid_schedule",
            ClientError::InvalidConcurrency(_) => "invalid_concurrency",
            ClientError::InvalidFairnessKey(_) => "invalid_fairness_key",
            ClientError::InvalidDebounce(_) => "invalid_debounce",
            ClientError::InvalidName(error) => error.code,
            ClientError::InvalidTimeout(_) => "invalid_timeout",
            ClientError::UnknownTimeZone(_) => "unknown_time_zone",
            ClientError::Store(StoreError::Fenced { .. }) => "lease_lost",
            ClientError::Store(StoreError::SequenceConflict { .. }) => "sequence_conflict",
            ClientError::Store(StoreError::SignalUnavailable(_)) => "signal_unavailable",
            ClientError::Store(_) => "store_error",
        }
    }

    /// The stable code of this error (`CAIRN-E0301`; see `docs/errors.md`), if it has one.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            ClientError::UnknownWorkflow(_) | ClientError::UnknownVersion { .. } => Some("CAIRN-E0304"),
            ClientError::InvalidPayload(_) => Some("CAIRN-E0104"),
            ClientError::PayloadTooLarge { .. } => Some("CAIRN-E0105"),
            // The store's refusals, with the store's codes.
            ClientError::RunNotFound(_)
            | ClientError::DuplicateRunId(_)
            | ClientError::RunFinished { .. }
            | ClientError::NotPaused { .. }
            | ClientError::ScheduleNotFound(_) => self.as_store().and_then(|store| store.code()),
            ClientError::NotEnded { .. } => Some("CAIRN-E0306"),
            ClientError::UnknownStep { .. } => Some("CAIRN-E0307"),
            ClientError::InvalidTopic(_) => Some(cairn_journal::topic::TopicError::CODE),
            ClientError::InvalidEventId(_) => Some("CAIRN-E0309"),
            ClientError::InvalidSchedule(_) => Some("CAIRN-E0311"),
            ClientError::InvalidConcurrency(_) => Some("CAIRN-E0312"),
            ClientError::InvalidFairnessKey(_) => Some("CAIRN-E0313"),
            ClientError::InvalidDebounce(_) => Some("CAIRN-E0315"),
            ClientError::InvalidName(_) => Some("CAIRN-E0316"),
            ClientError::InvalidTimeout(_) => Some("CAIRN-E0317"),
            ClientError::UnknownTimeZone(_) => Some("CAIRN-E0318"),
            ClientError::RunDidNotComplete { .. } => None,
            ClientError::Store(error) => error.code(),
        }
    }
}

/// The engine could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No store was given to the builder.
    #[error("no store configured: call `.store(...)` on the builder")]
    NoStore,
    /// A workflow name and version were registered twice.
    #[error("workflow `{name}` version {version} is registered twice")]
    DuplicateWorkflow {
        /// Name.
        name: String,
        /// Version.
        version: u32,
    },
    /// `Engine::start` was called outside a Tokio runtime.
    #[error("the engine must be started inside a Tokio runtime")]
    NoRuntime,
    /// A subscription's topic pattern is not valid.
    #[error(transparent)]
    InvalidTopic(cairn_journal::topic::TopicError),
    /// A setting (a subscription, step defaults) names a workflow that is not registered.
    #[error("[CAIRN-E0304] workflow `{name}` is given {setting} but is not registered")]
    NotRegistered {
        /// The workflow.
        name: String,
        /// What it was given.
        setting: String,
    },
    /// [`Continuations`](crate::continuations::Continuations) that cannot run: a step defined twice, a missing
    /// start step, an invalid step name.
    #[error("[CAIRN-E0114] invalid continuations: {0}")]
    InvalidContinuations(String),
    /// A declared schedule is not valid, or starts a workflow the builder does not register.
    #[error("[CAIRN-E0311] invalid schedule: {0}")]
    InvalidSchedule(String),
    /// A declared concurrency rule is not valid, or limits a workflow the builder does not register.
    #[error("[CAIRN-E0312] invalid concurrency rule: {0}")]
    InvalidConcurrency(String),
    /// A declared rate limit is not valid, or limits a workflow the builder does not register.
    #[error("[CAIRN-E0314] invalid rate limit: {0}")]
    InvalidRateLimit(String),
    /// The store refused the worker's subscriptions, schedules or concurrency rules.
    #[error("could not declare this worker's topic subscriptions, schedules or concurrency rules: {0}")]
    Store(StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code an error gives is the one its message starts with, so `code()` and the text
    /// cannot drift apart.
    #[test]
    fn each_code_is_the_one_the_message_carries() {
        let id = RunId::new("r");
        let errors = [
            ClientError::UnknownWorkflow("w".into()),
            ClientError::UnknownVersion { name: "w".into(), version: 2 },
            ClientError::InvalidPayload("x".into()),
            ClientError::PayloadTooLarge { size: 2, limit: 1 },
            ClientError::RunNotFound(id.clone()),
            ClientError::DuplicateRunId(id.clone()),
            ClientError::RunFinished { run_id: id.clone(), status: RunStatus::Completed },
            ClientError::NotPaused { run_id: id.clone(), status: RunStatus::Running },
            ClientError::NotEnded { run_id: id.clone(), status: RunStatus::Running },
            ClientError::UnknownStep { run_id: id.clone(), path: "a".into() },
            ClientError::InvalidEventId(String::new()),
            ClientError::ScheduleNotFound("s".into()),
            ClientError::InvalidSchedule("s".into()),
            ClientError::InvalidConcurrency("c".into()),
            ClientError::InvalidFairnessKey("k".into()),
            ClientError::InvalidDebounce("d".into()),
            ClientError::InvalidName(cairn_store::WorkflowName::new("").unwrap_err()),
            ClientError::InvalidTimeout("t".into()),
            ClientError::UnknownTimeZone("Mars/Olympus".into()),
            ClientError::Store(StoreError::Fenced { run_id: id, held: 1, current: 2 }),
        ];
        for error in errors {
            let code = error.code().unwrap_or_else(|| panic!("{error:?} has a code"));
            assert!(error.to_string().starts_with(&format!("[{code}]")), "{error}: {code}");
        }
        let store = ClientError::Store(StoreError::backend("connection refused"));
        assert_eq!((store.code(), store.kind(), store.name()), (None, ErrorKind::Unavailable, "store_error"));
    }
}
