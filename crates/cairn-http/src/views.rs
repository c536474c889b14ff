//! The JSON forms of runs, journal entries and signals: one shape for the HTTP API and for the
//! `cairn` command's `--json` output, so a tool reads either the same way. Times are RFC 3339 in
//! UTC with milliseconds; inputs, outputs and payloads are the JSON they were given as.

use cairn::journal::JournalEntry;
use cairn::{CancelOutcome, LiveWorkers, PauseOutcome, RunId, RunRecord, SignalRecord, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A time as RFC 3339 in UTC with milliseconds (`2026-11-23T10:00:00.000Z`).
pub fn time(t: Timestamp) -> String {
    humantime::format_rfc3339_millis(t.to_system_time()).to_string()
}

/// Stored JSON as a value (`null` if it does not parse, which a store never hands out).
pub fn raw_json(raw: &serde_json::value::RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// The input filter `input.<field>=<value>` parameters ask for, as one JSON object: a dotted
/// field nests (`input.address.city=Oslo` → `{"address": {"city": "Oslo"}}`), a value is JSON when
/// it parses as JSON and a string otherwise. A parameter not under `input.` is refused.
///
/// ```
/// let filter = cairn_http::views::input_filter([("input.customer", "42"), ("input.address.city", "Oslo")]);
/// assert_eq!(filter, Ok(serde_json::json!({"customer": 42, "address": {"city": "Oslo"}})));
/// assert!(cairn_http::views::input_filter([("colour", "red")]).is_err());
/// ```
pub fn input_filter<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Value, String> {
    let mut filter = Value::Object(serde_json::Map::new());
    for (name, text) in pairs {
        let path = name
            .strip_prefix("input.")
            .filter(|path| !path.is_empty() && path.split('.').all(|field| !field.is_empty()))
            .ok_or_else(|| format!("unknown parameter {name:?} (filters on the input are `input.<field>=<value>`)"))?;
        let value = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()));
        let mut slot = &mut filter;
        for field in path.split('.') {
            let Value::Object(map) = slot else {
                return Err(format!("{name:?} sets a field inside a value another parameter set"));
            };
            slot = map.entry(field.to_owned()).or_insert_with(|| Value::Object(serde_json::Map::new()));
        }
        if slot.as_object().is_some_and(|m| !m.is_empty()) {
            return Err(format!("{name:?} sets a value where another parameter set fields"));
        }
        *slot = value;
    }
    Ok(filter)
}

/// A run's summary.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    /// The run's id.
    pub id: String,
    /// Its workflow.
    pub workflow: String,
    /// The workflow version it runs on.
    pub version: u32,
    /// `pending`, `running`, `suspended`, `completed`, `failed`, `cancelled` or `paused`.
    pub status: String,
    /// Why a suspended run waits: `sleeping`, `waiting`, `backing-off`, `rate-limited` or `debouncing`.
    pub suspend_reason: Option<String>,
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
    /// Why it failed, was cancelled or is parked.
    pub error: Option<String>,
    /// How many journal entries it has.
    pub steps: u64,
    /// How many times in a row a worker died executing it.
    pub recoveries: u32,
    /// Whether a pause waits for its next step boundary.
    pub pause_requested: bool,
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunDetail {
    /// The summary and stranded state.
    #[serde(flatten)]
    pub listed: ListedRun,
    /// Its input.
    #[schema(value_type = Object)]
    pub input: Value,
    /// Its output, once completed.
    #[schema(value_type = Object)]
    pub output: Value,
    /// The runs that restart it.
    pub restarts: Vec<String>,
    /// The runs it started as children, oldest first.
    #[serde(default)]
    pub children: Vec<String>,
}

/// A signal delivered to a run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SignalView {
    /// Its id (unique in the store).
    pub id: i64,
    /// Its name (the event a wait asks for).
    pub name: String,
    /// Its payload.
    #[schema(value_type = Object)]
    pub payload: Value,
    /// When it was delivered.
    pub sent_at: String,
    /// The journal entry that consumed it; `null` while buffered.
    pub consumed_seq: Option<u64>,
}

/// A journal entry.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EntryView {
    /// Its position in the run's journal (from 1).
    pub seq: u64,
    /// When it was committed.
    pub at: String,
    /// The same in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The event as journaled (`{"<kind>": {...}}`), the form `cairn::testing::replay` reads.
    #[schema(value_type = Object)]
    pub event: Value,
}

/// A run's summary.
pub fn run_view(run: &RunRecord) -> RunView {
    RunView {
        id: run.id.to_string(),
        workflow: run.workflow.clone(),
        version: run.version,
        status: run.status.as_str().to_owned(),
        suspend_reason: run.suspend_reason.map(|r| r.as_str().to_owned()),
        created_at: time(run.created_at),
        updated_at: time(run.updated_at),
        completed_at: run.completed_at.map(time),
        wake_at: run.wake_at.map(time),
        idempotency_key: run.idempotency_key.clone(),
        error: run.error.clone(),
        steps: run.last_seq,
        recoveries: run.recoveries,
        pause_requested: run.pause_requested,
        deadline: run.deadline.map(time),
        delete_after: run.delete_after.map(time),
        restarted_from: run.restarted_from.as_ref().map(RunId::to_string),
        parent: run.parent.as_ref().map(RunId::to_string),
        continued_from: run.continued_from.as_ref().map(RunId::to_string),
        continued_as: run.continued_as.as_ref().map(RunId::to_string),
        waiting_for: run.held_back_by().map(|w| w.to_string()),
        concurrency_key: run.concurrency.as_ref().map(|c| c.key.clone()),
        priority: run.priority,
        fairness_key: run.fairness_key.clone(),
        debounce_key: run.debounce_key.clone(),
    }
}

/// A run as lists show it.
pub fn listed(run: &RunRecord, live: &LiveWorkers) -> ListedRun {
    let stranded_reason = live.why_stranded(run);
    ListedRun { run: run_view(run), stranded: stranded_reason.is_some(), stranded_reason }
}

/// One run in full.
pub fn detail(run: &RunRecord, live: &LiveWorkers, restarts: &[RunId], children: &[RunRecord]) -> RunDetail {
    RunDetail {
        listed: listed(run, live),
        input: raw_json(&run.input),
        output: run.output.as_deref().map_or(Value::Null, raw_json),
        restarts: restarts.iter().map(RunId::to_string).collect(),
        children: children.iter().map(|c| c.id.to_string()).collect(),
    }
}

/// A signal.
pub fn signal(signal: &SignalRecord) -> SignalView {
    SignalView {
        id: signal.id.0,
        name: signal.name.clone(),
        payload: raw_json(&signal.payload),
        sent_at: time(signal.sent_at),
        consumed_seq: signal.consumed_seq,
    }
}

/// A journal entry.
pub fn entry(entry: &JournalEntry) -> EntryView {
    EntryView {
        seq: entry.seq,
        at: time(entry.at),
        at_ms: entry.at.as_millis(),
        event: serde_json::from_str(&entry.event.to_json()).unwrap_or(Value::Null),
    }
}

/// A run just started (or found by its idempotency key).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StartedRun {
    /// The run's summary.
    #[serde(flatten)]
    pub run: RunView,
    /// `false` when the idempotency key matched an existing run, or when a debounced start
    /// joined the run still debouncing under its key.
    pub created: bool,
}

/// A run just started, as its start created or found it.
pub fn started(handle: &cairn::RunHandle) -> StartedRun {
    StartedRun { run: run_view(handle.record()), created: handle.created() }
}

/// What a prune did (`POST /v1/runs/prune`, `cairn runs prune --json`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Pruned {
    /// How many ended runs were deleted (0 on a dry run).
    pub deleted: usize,
    /// Whether this was a dry run, deleting nothing.
    pub dry_run: bool,
    /// The runs deleted (on a dry run: that would be).
    pub runs: Vec<String>,
}

/// The view of a prune that found `runs`.
pub fn pruned(runs: &[RunId], dry_run: bool) -> Pruned {
    Pruned { deleted: if dry_run { 0 } else { runs.len() }, dry_run, runs: runs.iter().map(RunId::to_string).collect() }
}

/// What a publish did (`POST /v1/events/{topic}`, `cairn events publish --json`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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

/// The view of `published`, an event published to `topic`.
pub fn published(topic: &str, published: &cairn::Published) -> PublishedEvent {
    let (runs, already_started) = published.runs.iter().map(started).partition(|run| run.created);
    PublishedEvent { id: published.event_id.clone(), topic: topic.to_owned(), runs, already_started }
}

/// One page of runs, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunPage {
    /// The runs.
    pub runs: Vec<ListedRun>,
    /// Pass as `cursor` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// One attempt of a step body.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StepView {
    /// Its path (`name`, `scope/name[3]`).
    pub path: String,
    /// `step`, `sleep` or `wait`.
    pub kind: String,
    /// `retrying`, `completed`, `failed`, `sleeping`, `slept`, `waiting`, `received` or `timed_out`.
    pub phase: String,
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Steps {
    /// The run's id.
    pub run: String,
    /// Each step in the order it first appears in the journal.
    pub steps: Vec<StepView>,
    /// The journal's entries in order.
    pub journal: Vec<EntryView>,
    /// The run's durable values (`ctx.var`), each as last set, by name.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub vars: std::collections::BTreeMap<String, Value>,
}

/// A run's steps over time, with its journal and durable values.
pub fn steps(run: &RunId, journal: &[JournalEntry]) -> Steps {
    Steps {
        run: run.to_string(),
        steps: step_views(journal),
        journal: journal.iter().map(entry).collect(),
        vars: cairn::journal::vars(journal),
    }
}

/// Each step of a journal over time.
fn step_views(journal: &[JournalEntry]) -> Vec<StepView> {
    let millis = |from: Timestamp, to: Timestamp| to.as_millis() - from.as_millis();
    cairn::journal::timeline::steps(journal)
        .into_iter()
        .map(|step| StepView {
            path: step.path.to_string(),
            kind: step.kind.to_string(),
            phase: step.phase.as_str().to_owned(),
            started_at: time(step.started_at),
            ended_at: step.ended_at.map(time),
            duration_ms: step.ended_at.map(|end| millis(step.started_at, end)),
            attempts: step
                .attempts
                .iter()
                .map(|a| AttemptView {
                    attempt: a.attempt,
                    started_at: time(a.started_at),
                    ended_at: time(a.ended_at),
                    duration_ms: millis(a.started_at, a.ended_at),
                    error: a.error.clone(),
                    retry_at: a.retry_at.map(time),
                })
                .collect(),
            until: step.until.map(time),
            event: step.event,
        })
        .collect()
}

/// A run's signals.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Signals {
    /// The run's id.
    pub run: String,
    /// Its signals in the order they were delivered.
    pub signals: Vec<SignalView>,
}

/// A signal delivered.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SignalSent {
    /// The run's id.
    pub run: String,
    /// The signal's id.
    pub signal: i64,
    /// Its name.
    pub event: String,
}

/// What a cancel, pause or resume did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Outcome {
    /// The run's id.
    pub run: String,
    /// `cancelled`, `cancel-requested` (a worker stops it at its next heartbeat), `paused`,
    /// `pause-requested` (at its next step boundary) or `resumed`.
    pub outcome: String,
}

impl Outcome {
    fn new(run: &RunId, outcome: &str) -> Self {
        Outcome { run: run.to_string(), outcome: outcome.to_owned() }
    }

    /// What a cancel did.
    pub fn cancel(run: &RunId, outcome: CancelOutcome) -> Self {
        let outcome = match outcome {
            CancelOutcome::Cancelled => "cancelled",
            CancelOutcome::Requested => "cancel-requested",
        };
        Outcome::new(run, outcome)
    }

    /// What a pause did.
    pub fn pause(run: &RunId, outcome: PauseOutcome) -> Self {
        let outcome = match outcome {
            PauseOutcome::Paused => "paused",
            PauseOutcome::Requested => "pause-requested",
        };
        Outcome::new(run, outcome)
    }

    /// A resume.
    pub fn resumed(run: &RunId) -> Self {
        Outcome::new(run, "resumed")
    }
}

/// A restart: the new run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Restarted {
    /// The new run's id.
    pub run: String,
    /// The run it restarts.
    pub restarted_from: String,
    /// The step it runs again from.
    pub from_step: String,
}

/// One workflow's runs by status.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkflowView {
    /// The workflow's name.
    pub name: String,
    /// How many of its runs have each status (statuses with none are left out).
    pub runs: std::collections::BTreeMap<String, u64>,
    /// How many runs it has in all.
    pub total: u64,
}

/// Every workflow with runs in the store, by name.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Workflows {
    /// The workflows.
    pub workflows: Vec<WorkflowView>,
}

/// Groups per-status counts (ordered by workflow) by workflow.
pub fn workflows(counts: &[cairn::WorkflowCount]) -> Workflows {
    let mut workflows: Vec<WorkflowView> = Vec::new();
    for count in counts {
        if workflows.last().is_none_or(|w| w.name != count.workflow) {
            workflows.push(WorkflowView { name: count.workflow.clone(), runs: Default::default(), total: 0 });
        }
        if let Some(view) = workflows.last_mut() {
            view.runs.insert(count.status.as_str().to_owned(), count.runs);
            view.total += count.runs;
        }
    }
    Workflows { workflows }
}

/// A workflow version a worker serves.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ServedView {
    /// The workflow.
    pub workflow: String,
    /// Its version.
    pub version: u32,
}

/// A worker as the store records it (`cairn workers --json` prints a list of these).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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

/// `worker` as of `now` (wall-clock time).
pub fn worker(worker: &cairn::store::WorkerRecord, now: Timestamp) -> WorkerView {
    WorkerView {
        id: worker.id.clone(),
        host: worker.host.clone(),
        pid: worker.pid,
        started_at: time(worker.started_at),
        last_seen: time(worker.last_seen),
        live_until: time(worker.live_until),
        live: worker.is_live_at(now),
        serves: worker.serves.iter().map(|k| ServedView { workflow: k.name.clone(), version: k.version }).collect(),
    }
}

/// A workflow version whose runs no live worker serves.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Workers {
    /// The live workers.
    pub workers: Vec<WorkerView>,
    /// Each workflow version with runs that no live worker serves.
    pub stranded: Vec<StrandedView>,
}

/// The live workers and the stranded versions as of `now`.
pub fn workers(live: &LiveWorkers, stranded: &[cairn::StrandedVersion], now: Timestamp) -> Workers {
    Workers {
        workers: live.workers.iter().map(|w| worker(w, now)).collect(),
        stranded: stranded
            .iter()
            .map(|s| StrandedView {
                workflow: s.key.name.clone(),
                version: s.key.version,
                runs: s.runs,
                reason: s.reason.clone(),
            })
            .collect(),
    }
}

/// What the dashboard's runs page shows, as one live update: a page of runs, the workflows with
/// their counts, and the workers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunsSnapshot {
    /// The runs that match the stream's filter, newest first.
    pub runs: RunPage,
    /// Every workflow with runs, with its counts by status.
    pub workflows: Workflows,
    /// The live workers and the stranded versions.
    pub workers: Workers,
}

/// What the dashboard's run page shows, as one live update.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunSnapshot {
    /// The run.
    pub run: RunDetail,
    /// Its steps over time and its journal.
    pub steps: Steps,
    /// Its signals.
    pub signals: Signals,
}

/// A schedule: what it starts, when it fires, and where it stands.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
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
    #[schema(value_type = Object)]
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Schedules {
    /// The schedules.
    pub schedules: Vec<ScheduleView>,
}

/// A schedule as the API shows it (a spec it cannot read shows as no cron and no interval).
pub fn schedule_view(record: &cairn::store::ScheduleRecord) -> ScheduleView {
    let spec = cairn::ScheduleSpec::parse_stored(&record.spec).ok();
    ScheduleView {
        name: record.name.clone(),
        workflow: record.workflow.clone(),
        cron: spec.as_ref().map(|s| s.cron.clone()).unwrap_or_default(),
        time_zone: spec.as_ref().and_then(|s| s.time_zone.clone()),
        every_ms: spec.as_ref().and_then(|s| s.every_ms),
        catch_up: spec.as_ref().map(|s| s.catch_up.to_string()).unwrap_or_default(),
        input: raw_json(&record.input),
        paused: record.paused,
        next_fire_at: record.next_fire_at.map(time),
        last_fired_at: record.last_fired_at.map(time),
        last_run: record.last_fired_at.map(|at| cairn::schedule_run_id(&record.name, at).to_string()),
        created_at: time(record.created_at),
        updated_at: time(record.updated_at),
    }
}

/// What `PUT /v1/schedules/{name}` takes (and `cairn schedules put`): cron expressions or an
/// interval, not both.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScheduleBody {
    /// The workflow each firing starts.
    pub workflow: String,
    /// Cron expressions (5 fields, or 6 with seconds first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cron: Vec<String>,
    /// The IANA time zone of the cron expressions (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// An interval instead (`30s`, `5m`, `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// Each run's input (default `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// `skip`, `once` (the default) or `all:N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
}

impl ScheduleBody {
    /// The schedule `name` this body describes; why not, if a field is not valid.
    pub fn schedule(&self, name: &str) -> Result<cairn::Schedule, String> {
        let catch_up = self.catch_up.as_deref().map(cairn::CatchUp::parse).transpose()?.unwrap_or_default();
        let every_ms = match &self.every {
            Some(every) => {
                let every = humantime::parse_duration(every).map_err(|e| format!("every {every:?}: {e}"))?;
                Some(u64::try_from(every.as_millis()).unwrap_or(u64::MAX))
            }
            None => None,
        };
        let spec =
            cairn::ScheduleSpec { cron: self.cron.clone(), time_zone: self.time_zone.clone(), every_ms, catch_up };
        Ok(cairn::Schedule::with_spec(name, &self.workflow, spec).input(&self.input.clone().unwrap_or(Value::Null)))
    }
}
