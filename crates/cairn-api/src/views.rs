//! What the API answers: runs, journal entries, signals, steps, workers and schedules, in the
//! shape the HTTP API and the `cairn` command's `--json` output share, so a tool reads either the
//! same way. Times are RFC 3339 in UTC with milliseconds; inputs, outputs and payloads are the
//! JSON they were given as.

use crate::values::{ControlOutcome, RunStatus, StepKind, StepPhase, SuspendReason};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run's summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunView {
    /// The run's id.
    pub id: String,
    /// Its workflow.
    pub workflow: String,
    /// The workflow version it runs on.
    pub version: u32,
    /// `pending`, `running`, `suspended`, `completed`, `failed`, `cancelled`, `paused` or
    /// `continued`.
    pub status: RunStatus,
    /// Why a suspended run waits: `sleeping`, `waiting`, `backing-off`, `rate-limited` or `debouncing`.
    pub suspend_reason: Option<SuspendReason>,
    /// When it was created.
    pub created_at: String,
    /// When its summary last changed.
    pub updated_at: String,
    /// When it ended.
    pub completed_at: Option<String>,
    /// When a suspended run is next due.
    pub wake_at: Option<String>,
    /// The key it was started with.
    pub idempotency_key: Option<String>,
    /// Why it failed, was cancelled or is parked; while a cancel waits for its worker, the
    /// reason given for it.
    pub error: Option<String>,
    /// How many journal entries it has.
    pub steps: u64,
    /// How many times in a row a worker died executing it.
    pub recoveries: u32,
    /// Whether a pause waits for its next step boundary.
    pub pause_requested: bool,
    /// Whether a cancel waits for the worker that holds it (its reason is the `error`).
    #[serde(default)]
    pub cancel_requested: bool,
    /// When it fails with a timeout if it has not ended.
    pub deadline: Option<String>,
    /// When it is deleted once ended.
    pub delete_after: Option<String>,
    /// The run it restarts.
    pub restarted_from: Option<String>,
    /// The run that started it as a child.
    #[serde(default)]
    pub parent: Option<String>,
    /// The run it continues (that run ended `continued` and started it).
    #[serde(default)]
    pub continued_from: Option<String>,
    /// The run it continued as (when it ended `continued`).
    #[serde(default)]
    pub continued_as: Option<String>,
    /// Why a run is held back by a flow rule: `concurrency` (a pending run: every slot of its
    /// concurrency group is held), `rate` (a suspended run: a rate limit holds back its start
    /// or its next step until its `wake_at`) or `debounce` (a suspended run: a debounced start
    /// that begins at its `wake_at` unless another start with its key pushes that back).
    #[serde(default)]
    pub waiting_for: Option<String>,
    /// Its key under its workflow's concurrency rule (`""` for a rule without a key).
    #[serde(default)]
    pub concurrency_key: Option<String>,
    /// Its priority: ready runs of a higher priority are claimed first.
    #[serde(default)]
    pub priority: i32,
    /// The key it is served fairly by within its priority.
    #[serde(default)]
    pub fairness_key: Option<String>,
    /// The debounce key it was started with.
    #[serde(default)]
    pub debounce_key: Option<String>,
}

/// A run as lists show it: its summary, and whether it is stranded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ListedRun {
    /// The summary.
    #[serde(flatten)]
    pub run: RunView,
    /// Whether the run needs a worker and no live worker serves its workflow version.
    pub stranded: bool,
    /// Why, when stranded.
    pub stranded_reason: Option<String>,
}

/// One run in full.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunDetail {
    /// The summary and stranded state.
    #[serde(flatten)]
    pub listed: ListedRun,
    /// Its input.
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub input: Value,
    /// Its output, once completed.
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub output: Value,
    /// The runs that restart it.
    pub restarts: Vec<String>,
    /// The runs it started as children, oldest first.
    #[serde(default)]
    pub children: Vec<String>,
}

/// A signal delivered to a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignalView {
    /// Its id (unique in the store).
    pub id: i64,
    /// Its name (the event a wait asks for).
    pub name: String,
    /// Its payload.
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub payload: Value,
    /// When it was delivered.
    pub sent_at: String,
    /// The journal entry that consumed it; `null` while buffered.
    pub consumed_seq: Option<u64>,
}

/// A journal entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EntryView {
    /// Its position in the run's journal (from 1).
    pub seq: u64,
    /// When it was committed.
    pub at: String,
    /// The same in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The event as journaled (`{"<kind>": {...}}`), the form `cairn::testing::replay` reads.
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub event: Value,
}

/// A run just started (or found by its idempotency key).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartedRun {
    /// The run's summary.
    #[serde(flatten)]
    pub run: RunView,
    /// `false` when the idempotency key matched an existing run, or when a debounced start
    /// joined the run still debouncing under its key.
    pub created: bool,
}

/// What a prune did (`POST /v1/runs/prune`, `cairn runs prune --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pruned {
    /// How many ended runs were deleted (0 on a dry run).
    pub deleted: usize,
    /// Whether this was a dry run, deleting nothing.
    pub dry_run: bool,
    /// The runs deleted (on a dry run: that would be).
    pub runs: Vec<String>,
}

/// What a publish did (`POST /v1/events/{topic}`, `cairn events publish --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PublishedEvent {
    /// The event's id (given, or generated).
    pub id: String,
    /// The topic it was published to.
    pub topic: String,
    /// The runs this publish started, one per subscribed workflow (none when the id was
    /// published before, or no workflow subscribes to the topic).
    pub runs: Vec<StartedRun>,
    /// Runs an earlier publish of the same id started, which were not started again.
    pub already_started: Vec<StartedRun>,
}

/// A published event as recorded (`GET /v1/events`), with the runs it started.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventView {
    /// Its id.
    pub id: String,
    /// The topic it was published to.
    pub topic: String,
    /// Its payload, the input of the runs it started.
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub payload: Value,
    /// When it was first published.
    pub published_at: String,
    /// The runs it started, one per workflow subscribed when it was published (a publish retried
    /// with its id adds those of workflows that subscribed since).
    pub runs: Vec<EventRunView>,
}

/// A run an event started.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventRunView {
    /// Its workflow.
    pub workflow: String,
    /// The run's id.
    pub id: String,
}

/// One page of published events, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventPage {
    /// The events.
    pub events: Vec<EventView>,
    /// Pass as `cursor` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// One page of runs, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunPage {
    /// The runs.
    pub runs: Vec<ListedRun>,
    /// Pass as `cursor` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// One attempt of a step body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptView {
    /// Its number, from 1.
    pub attempt: u32,
    /// When it began.
    pub started_at: String,
    /// When its result was committed.
    pub ended_at: String,
    /// How long it took, in milliseconds.
    pub duration_ms: i64,
    /// Its error, if it failed.
    pub error: Option<String>,
    /// When the next attempt was due, if it failed and was to be retried.
    pub retry_at: Option<String>,
}

/// One step over time.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepView {
    /// Its path (`name`, `scope/name[3]`).
    pub path: String,
    /// `step`, `sleep` or `wait`.
    pub kind: StepKind,
    /// `retrying`, `completed`, `failed`, `sleeping`, `slept`, `waiting`, `received`, `timed_out`, or
    /// `abandoned` (the run ended before it did).
    pub phase: StepPhase,
    /// When it began: its first attempt, or when the sleep or wait was journaled.
    pub started_at: String,
    /// When it ended, once it has.
    pub ended_at: Option<String>,
    /// How long it took, once ended, in milliseconds (retries and their backoff included).
    pub duration_ms: Option<i64>,
    /// A step body's attempts (empty for sleeps and waits).
    pub attempts: Vec<AttemptView>,
    /// A sleep's end, or a wait's deadline.
    pub until: Option<String>,
    /// The signal a wait asks for.
    pub event: Option<String>,
}

/// A run's steps over time, and its journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Steps {
    /// The run's id.
    pub run: String,
    /// Each step in the order it first appears in the journal.
    pub steps: Vec<StepView>,
    /// The journal's entries in order.
    pub journal: Vec<EntryView>,
    /// The run's durable values (`ctx.var`), each as last set, by name.
    #[serde(default)]
    pub vars: std::collections::BTreeMap<String, Value>,
}

/// A run's signals.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Signals {
    /// The run's id.
    pub run: String,
    /// Its signals in the order they were delivered.
    pub signals: Vec<SignalView>,
}

/// A signal delivered.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignalSent {
    /// The run's id.
    pub run: String,
    /// The signal's id.
    pub signal: i64,
    /// Its name.
    pub event: String,
}

/// What a cancel, pause or resume did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Outcome {
    /// The run's id.
    pub run: String,
    /// `cancelled`, `cancel-requested` (a worker stops it at its next heartbeat), `paused`,
    /// `pause-requested` (at its next step boundary) or `resumed`.
    pub outcome: ControlOutcome,
}

/// What `POST /v1/runs/bulk` did to one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkRun {
    /// The run's id.
    pub run: String,
    /// Its workflow.
    pub workflow: String,
    /// What the action did, as `Outcome::outcome` says it, when it was done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ControlOutcome>,
    /// Why it was refused (`run_finished`, `not_paused`, …), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::error::ErrorDetail>,
}

/// What `POST /v1/runs/bulk` did: each run it selected, newest first, and whether the filter
/// selected more than its limit (send it again to go on).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkResult {
    /// The action.
    pub action: crate::requests::BulkAction,
    /// Each run acted on, in list order.
    pub runs: Vec<BulkRun>,
    /// How many were done.
    pub done: usize,
    /// How many were refused.
    pub refused: usize,
    /// More runs matched than the limit.
    pub more: bool,
}

/// A restart: the new run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Restarted {
    /// The new run's id.
    pub run: String,
    /// The run it restarts.
    pub restarted_from: String,
    /// The step it runs again from.
    pub from_step: String,
}

/// One workflow's runs by status.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkflowView {
    /// The workflow's name.
    pub name: String,
    /// How many of its runs have each status (statuses with none are left out).
    pub runs: std::collections::BTreeMap<String, u64>,
    /// How many runs it has in all.
    pub total: u64,
    /// The versions workers have served, oldest first (empty for a workflow with runs that no
    /// worker recorded serving).
    #[serde(default)]
    pub versions: Vec<u32>,
}

/// How many runs a filter selects (`GET /v1/run-count`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunCount {
    /// How many, up to the `at_most` asked for.
    pub count: u64,
    /// Counting stopped at `at_most`: at least `count` runs match.
    pub capped: bool,
}

/// Every workflow with runs in the store or served by a worker, by name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Workflows {
    /// The workflows.
    pub workflows: Vec<WorkflowView>,
}

/// A workflow version a worker serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServedView {
    /// The workflow.
    pub workflow: String,
    /// Its version.
    pub version: u32,
}

/// A worker as the store records it (`cairn workers --json` prints a list of these).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerView {
    /// Its lease identity.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// When it started.
    pub started_at: String,
    /// Its last heartbeat.
    pub last_seen: String,
    /// Until when it counts as live without another heartbeat.
    pub live_until: String,
    /// Whether it is live now.
    pub live: bool,
    /// The workflow versions it executes.
    pub serves: Vec<ServedView>,
}

/// A workflow version whose runs no live worker serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StrandedView {
    /// The workflow.
    pub workflow: String,
    /// Its version.
    pub version: u32,
    /// How many of its runs are pending, running or suspended.
    pub runs: u64,
    /// Why they are stranded.
    pub reason: String,
}

/// The live workers and the stranded workflow versions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Workers {
    /// The live workers.
    pub workers: Vec<WorkerView>,
    /// Each workflow version with runs that no live worker serves.
    pub stranded: Vec<StrandedView>,
}

/// What the dashboard's runs page shows, as one live update: a page of runs, the workflows with
/// their counts, and the workers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunsSnapshot {
    /// The runs that match the stream's filter, newest first.
    pub runs: RunPage,
    /// Every workflow with runs, with its counts by status.
    pub workflows: Workflows,
    /// The live workers and the stranded versions.
    pub workers: Workers,
}

/// What the dashboard's run page shows, as one live update.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunSnapshot {
    /// The run.
    pub run: RunDetail,
    /// Its steps over time and its journal.
    pub steps: Steps,
    /// Its signals.
    pub signals: Signals,
}

/// A schedule: what it starts, when it fires, and where it stands.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScheduleView {
    /// Unique name.
    pub name: String,
    /// The workflow each firing starts.
    pub workflow: String,
    /// Cron expressions (empty for an interval).
    pub cron: Vec<String>,
    /// The time zone of the cron expressions.
    pub time_zone: Option<String>,
    /// The interval in milliseconds, for an interval schedule.
    pub every_ms: Option<u64>,
    /// What it does about missed firings: `skip`, `once` or `all:N`.
    pub catch_up: String,
    /// Each run's input.
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub input: Value,
    /// Whether it is paused.
    pub paused: bool,
    /// Its next firing (RFC 3339), if it fires again.
    pub next_fire_at: Option<String>,
    /// The time of the last firing it started a run for.
    pub last_fired_at: Option<String>,
    /// The id of the run the last firing started (`<name>@<time>`).
    pub last_run: Option<String>,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
}

/// Every schedule, by name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Schedules {
    /// The schedules.
    pub schedules: Vec<ScheduleView>,
}
