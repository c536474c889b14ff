//! Runs as stores keep them: ids, statuses, the run record, and what a new run is created from.

use cairn_journal::SignalId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A run's identity: caller-given or generated, unique in a store forever.
///
/// Shared, not copied: a clone (the engine, the stores' indexes and the telemetry each keep the
/// ids of the runs they track) counts a reference instead of allocating the text again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(std::sync::Arc<str>);

impl RunId {
    /// Wraps an id; see [`RunId::validate`] for what is accepted from callers.
    pub fn new(id: impl Into<String>) -> Self {
        Self(std::sync::Arc::from(id.into()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The most characters a caller-given id may have.
    pub const MAX_CHARS: usize = 200;
    /// The characters a caller-given id may not hold besides control characters.
    pub const FORBIDDEN: &'static [char] = &['/'];

    /// Checks a caller-given id: 1 to 200 characters, no control characters, no `/`.
    pub fn validate(id: &str) -> Result<RunId, StoreError> {
        if !super::names::keeps(id, Self::MAX_CHARS, Self::FORBIDDEN) {
            return Err(StoreError::InvalidInput(format!(
                "run id {id:?} must be 1 to 200 characters without control characters or `/`"
            )));
        }
        Ok(RunId(std::sync::Arc::from(id)))
    }
}

impl Serialize for RunId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RunId, D::Error> {
        String::deserialize(deserializer).map(RunId::new)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for RunId {
    fn from(value: &str) -> Self {
        RunId(std::sync::Arc::from(value))
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
    /// input and push its wake-up back ([`Debounce`](crate::Debounce)).
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

/// Everything a store can refuse or fail with. Its text starts with its [code](StoreError::code)
/// in brackets when it has one; each code is written once, in `code`.
///
/// ```
/// use cairn_store::{RunId, StoreError};
/// let missing = StoreError::RunNotFound(RunId::new("r-1"));
/// assert_eq!(missing.to_string(), "[CAIRN-E0301] no run with id `r-1`");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The appender's lease epoch is stale: another worker claimed the run.
    Fenced {
        /// The run.
        run_id: RunId,
        /// Epoch the appender held.
        held: u64,
        /// Epoch in the store.
        current: u64,
    },
    /// The journal does not end where the appender thought.
    SequenceConflict {
        /// The run.
        run_id: RunId,
        /// What the appender expected.
        expected: u64,
        /// What the store holds.
        actual: u64,
    },
    /// A signal was consumed already or belongs to another run.
    SignalUnavailable(SignalId),
    /// No such run.
    RunNotFound(RunId),
    /// The id is taken.
    DuplicateRunId(RunId),
    /// The run has ended.
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
    /// No schedule has that name.
    ScheduleNotFound(String),
    /// The request itself was malformed.
    InvalidInput(String),
    /// Stored data could not be read back.
    Corrupt(String),
    /// The backend failed (IO, SQL, closed): the message says how, with the cause's text and
    /// its sources', and [`StoreError::cause`] is the driver's or the file system's error when
    /// there is one. It is not also the [`source`](std::error::Error::source): the message
    /// already says it, and an error chain prints each cause once.
    Backend {
        /// What failed, and why.
        message: String,
        /// The driver's or the file system's error.
        source: Option<Cause>,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(code) = self.code() {
            write!(f, "[{code}] ")?;
        }
        match self {
            StoreError::Fenced { run_id, held, current } => {
                write!(f, "lease lost on run `{run_id}`: epoch {held} is stale (now {current}); this worker must stop")
            }
            StoreError::SequenceConflict { run_id, expected, actual } => {
                write!(f, "journal of run `{run_id}` ends at #{actual}, not #{expected}")
            }
            StoreError::SignalUnavailable(id) => write!(f, "signal {id:?} is not available to consume"),
            StoreError::RunNotFound(id) => write!(f, "no run with id `{id}`"),
            StoreError::DuplicateRunId(id) => write!(f, "a run with id `{id}` already exists"),
            StoreError::RunFinished { run_id, status } => write!(f, "run `{run_id}` has already ended ({status})"),
            StoreError::NotPaused { run_id, status } => write!(f, "run `{run_id}` is not paused (it is {status})"),
            StoreError::ScheduleNotFound(name) => write!(f, "no schedule named `{name}`"),
            StoreError::InvalidInput(message) => write!(f, "invalid input: {message}"),
            StoreError::Corrupt(message) => write!(f, "corrupt data in store: {message}"),
            StoreError::Backend { message, .. } => write!(f, "store backend error: {message}"),
        }
    }
}

/// No source: a backend failure's message holds its cause's text (see [`StoreError::Backend`]).
impl std::error::Error for StoreError {}

/// What kind of failure an error is: what a caller branches on, and what the HTTP API maps to a
/// status. Not `#[non_exhaustive]`, so a mapping over it is checked for completeness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// What the request names does not exist (a workflow, a version, a run, a schedule).
    NotFound,
    /// The request is malformed or asks for something impossible (an input, a name, a rule).
    Invalid,
    /// A payload is over the size limit.
    TooLarge,
    /// The request conflicts with what is stored (an id taken, a run ended or not paused, a lease
    /// moved on).
    Conflict,
    /// The store failed or could not be reached; the same request may succeed later.
    Unavailable,
    /// Stored data could not be read back.
    Corrupt,
}

/// `error`'s text followed by its sources' (`a: b: c`), each once.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// The cause of a [`StoreError::Backend`]: the driver's or the file system's error, shared so
/// that errors stay `Clone`, and compared by its message.
#[derive(Clone)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// Keeps `error` as a cause.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause(std::sync::Arc::new(error))
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Cause) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Cause {}

impl StoreError {
    /// A backend failure described by `message` alone.
    pub fn backend(message: impl Into<String>) -> StoreError {
        StoreError::Backend { message: message.into(), source: None }
    }

    /// A backend failure caused by `cause` (a driver's or an IO error), while doing `context`:
    /// the message is `"{context}: {cause}"`, and `cause` is its [`cause`](StoreError::cause).
    ///
    /// ```
    /// use cairn_store::StoreError;
    /// use std::error::Error as _;
    /// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    /// let error = StoreError::caused_by("connecting to 127.0.0.1:5432", io);
    /// assert_eq!(error.to_string(), "store backend error: connecting to 127.0.0.1:5432: connection refused");
    /// // The driver's error is kept, to inspect or downcast; it is not the source, as the
    /// // message already says it.
    /// let cause = error.cause().and_then(|c| c.downcast_ref::<std::io::Error>());
    /// assert_eq!(cause.map(|io| io.kind()), Some(std::io::ErrorKind::ConnectionRefused));
    /// assert!(error.source().is_none());
    /// ```
    pub fn caused_by(context: impl fmt::Display, cause: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Backend { message: format!("{context}: {}", chain(&cause)), source: Some(Cause::new(cause)) }
    }

    /// A backend failure that is `cause` itself: the message is its text and its sources' (a
    /// driver's "error connecting to server" says why only in its source), and it is its
    /// [`cause`](StoreError::cause).
    pub fn from_cause(cause: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Backend { message: chain(&cause), source: Some(Cause::new(cause)) }
    }

    /// The driver's or the file system's error a [`Backend`](StoreError::Backend) failure was
    /// made from, when there is one.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            StoreError::Backend { source: Some(cause), .. } => Some(&*cause.0),
            _ => None,
        }
    }

    /// What kind of failure this is.
    ///
    /// ```
    /// use cairn_store::{ErrorKind, RunId, StoreError};
    /// assert_eq!(StoreError::RunNotFound(RunId::new("r")).kind(), ErrorKind::NotFound);
    /// assert_eq!(StoreError::backend("connection refused").kind(), ErrorKind::Unavailable);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::RunNotFound(_) | StoreError::ScheduleNotFound(_) => ErrorKind::NotFound,
            StoreError::InvalidInput(_) => ErrorKind::Invalid,
            StoreError::Fenced { .. }
            | StoreError::SequenceConflict { .. }
            | StoreError::SignalUnavailable(_)
            | StoreError::DuplicateRunId(_)
            | StoreError::RunFinished { .. }
            | StoreError::NotPaused { .. } => ErrorKind::Conflict,
            StoreError::Corrupt(_) => ErrorKind::Corrupt,
            StoreError::Backend { .. } => ErrorKind::Unavailable,
        }
    }

    /// The stable code of this error (`CAIRN-E0301`), if it has one.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            StoreError::Fenced { .. } => Some("CAIRN-E0201"),
            StoreError::RunNotFound(_) => Some("CAIRN-E0301"),
            StoreError::DuplicateRunId(_) => Some("CAIRN-E0302"),
            StoreError::RunFinished { .. } => Some("CAIRN-E0303"),
            StoreError::NotPaused { .. } => Some("CAIRN-E0305"),
            StoreError::ScheduleNotFound(_) => Some("CAIRN-E0310"),
            StoreError::SequenceConflict { .. }
            | StoreError::SignalUnavailable(_)
            | StoreError::InvalidInput(_)
            | StoreError::Corrupt(_)
            | StoreError::Backend { .. } => None,
        }
    }
}
