//! What Cairn reports through the [`metrics`] facade: counters, gauges and histograms of runs,
//! steps, signals, retention sweeps and claims. Install any `metrics` recorder (a Prometheus
//! exporter, say) and they appear there; without one they cost nothing. `cairn serve` installs
//! its own and serves them at `/metrics`.
//!
//! Each series is registered once (per workflow, step label and status) and recorded into
//! through its handle after that, so install the process's global recorder before starting
//! engines, or call [`describe`] after installing it: that renews the handles. A thread-local
//! recorder (`metrics::with_local_recorder`) sees only the series first registered under it.
//!
//! The same points are [`tracing`] spans: `workflow.run` (one per execution of a run on a worker:
//! `workflow.name`, `workflow.version`, `run_id`, `status`), `workflow.step` inside it (one per
//! attempt: `step.name`, `step.kind` `step`, `step.attempt`, `status`; and one per sleep or wait
//! for a signal while the run is on the worker: `step.kind` `sleep` or `wait`) and
//! `workflow.signal` (a wait consuming a signal: `event`). Every span carries `workflow.name` and
//! `run_id`. A run's spans share one trace across resumes and processes: its id is
//! [`run_trace_id`] of the run id. With the `opentelemetry` feature, each `workflow.run` span is
//! given a remote parent in that trace (`run_trace_parent`) when a `tracing-opentelemetry` layer
//! is installed, so an OTLP exporter sends every execution of a run into one trace.
//!
//! Runs and steps are labelled by workflow; steps also by their path with loop indices left out
//! (`expedition/analyze`, not `expedition[2]/analyze[5]`), so labels stay few.

use cairn_journal::{FastMap, StepPath};
use cairn_store::RunStatus;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, PoisonError, RwLock};
use std::time::Duration;

/// Runs started by this process (`workflow`).
pub const RUNS_STARTED: &str = "workflow_runs_started_total";
/// Runs that ended on this process (`workflow`, `status`: completed, failed or cancelled).
pub const RUNS_COMPLETED: &str = "workflow_runs_completed_total";
/// Runs executing on this worker now (`workflow`).
pub const RUNS_IN_FLIGHT: &str = "workflow_runs_in_flight";
/// From a run's creation to its end, for runs that ended on this worker (`workflow`).
pub const RUN_DURATION: &str = "workflow_run_duration_seconds";
/// One step attempt's duration, from its start to its journaled result (`workflow`, `step`).
pub const STEP_DURATION: &str = "workflow_step_duration_seconds";
/// Failed step attempts that will be retried (`workflow`, `step`).
pub const STEP_RETRIES: &str = "workflow_step_retries_total";
/// Signals delivered by this process (`workflow`, `event`).
pub const SIGNALS: &str = "workflow_signals_total";
/// Ended runs deleted by this process's retention sweeps and prunes.
pub const RETENTION_SWEPT: &str = "workflow_retention_swept_total";
/// How long a ready run waited to be claimed: from its creation (pending) or its wake-up time
/// (suspended) to its claim by this worker.
pub const CLAIM_LAG: &str = "cairn_claim_lag_seconds";

/// Runs started by schedules' firings on this worker (`schedule`).
pub const SCHEDULED_RUNS: &str = "cairn_schedule_runs_started_total";
/// Counter: runs held back by a flow rule (label `rule`: `concurrency` when a new run waits for
/// a slot, `rate` each time a rate limit suspends a start or a step, `debounce` when a
/// debounced start opens a window), by workflow.
pub const RUNS_DELAYED: &str = "cairn_runs_delayed_total";
/// Counter: appends the store refused because the run's lease had moved on to a later epoch
/// (another worker took the run over while this one still executed it), by workflow.
pub const FENCED_APPENDS: &str = "cairn_fenced_appends_total";
/// Counter: runs this worker claimed after their previous lease expired unrenewed (a worker
/// died, stalled or lost the database), by workflow.
pub const RUNS_RECOVERED: &str = "cairn_runs_recovered_total";
/// Histogram: the round trip of this worker's lease heartbeats, from the request to the store's
/// answer.
pub const HEARTBEAT_SECONDS: &str = "cairn_heartbeat_seconds";

/// Registers the descriptions of Cairn's metrics with the installed recorder (its `# HELP`
/// lines); call it once after installing one.
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(RUNS_STARTED, "Runs started by this process.");
    describe_counter!(RUNS_COMPLETED, "Runs that ended on this process, by status.");
    describe_gauge!(RUNS_IN_FLIGHT, "Runs executing on this worker now.");
    describe_histogram!(RUN_DURATION, Unit::Seconds, "From a run's creation to its end.");
    describe_histogram!(STEP_DURATION, Unit::Seconds, "One step attempt, from its start to its journaled result.");
    describe_counter!(STEP_RETRIES, "Failed step attempts that will be retried.");
    describe_counter!(SIGNALS, "Signals delivered by this process.");
    describe_counter!(SCHEDULED_RUNS, "Runs started by schedules' firings on this worker.");
    describe_counter!(RUNS_DELAYED, "Runs held back by a concurrency limit, a rate limit or a debounce, by rule.");
    describe_counter!(RETENTION_SWEPT, "Ended runs deleted by retention sweeps and prunes.");
    describe_histogram!(CLAIM_LAG, Unit::Seconds, "From a run being ready to its claim by this worker.");
    describe_counter!(FENCED_APPENDS, "Appends refused because the run's lease had moved on to another worker.");
    describe_counter!(RUNS_RECOVERED, "Runs claimed after their previous lease expired unrenewed.");
    describe_histogram!(HEARTBEAT_SECONDS, Unit::Seconds, "The round trip of a lease heartbeat.");
    use cairn_store::metrics_names::{BATCH_SIZE, COMMIT_SECONDS};
    describe_histogram!(COMMIT_SECONDS, Unit::Seconds, "One store write transaction, from its start to its commit.");
    describe_histogram!(BATCH_SIZE, "Writes committed together in one store transaction.");
    // Handles registered with an earlier recorder (or none) are registered again.
    RECORDER_GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Bumped by [`describe`] (called once a recorder is installed): handles cached before belong to
/// the recorder that was installed then, or to none.
static RECORDER_GENERATION: AtomicU64 = AtomicU64::new(0);

/// The metric handles of one workflow (and of its steps, by label), registered once with the
/// installed recorder and recorded into thereafter. Building a metric's key and registering it
/// costs a few allocations and a lookup in the recorder: once per step attempt, that was about
/// 1,200 instructions of a step's 18,000 on the memory store, with no recorder installed at all.
#[derive(Default)]
struct WorkflowHandles {
    generation: u64,
    started: Option<metrics::Counter>,
    in_flight: Option<metrics::Gauge>,
    duration: Option<metrics::Histogram>,
    /// By terminal status.
    completed: FastMap<&'static str, metrics::Counter>,
    /// Step durations and retries by step label.
    steps: FastMap<String, StepHandles>,
}

#[derive(Default)]
struct StepHandles {
    duration: Option<metrics::Histogram>,
    /// Registered at the first retry only, so a step that never retried has no retries series.
    retries: Option<metrics::Counter>,
}

/// Every workflow's handles, shared by the engines of this process (as the recorder is).
static HANDLES: LazyLock<RwLock<FastMap<String, WorkflowHandles>>> = LazyLock::new(RwLock::default);

/// Records with `workflow`'s handles: `record` answers `None` while a handle it needs is missing,
/// and then `register` adds what it needs for the installed recorder. The common case takes a
/// read lock, hashes twice and allocates nothing.
fn with_handles<T>(
    workflow: &str,
    record: impl Fn(&WorkflowHandles) -> Option<T>,
    register: impl FnOnce(&mut WorkflowHandles),
) -> Option<T> {
    let generation = RECORDER_GENERATION.load(Ordering::SeqCst);
    {
        let all = HANDLES.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(handles) = all.get(workflow)
            && handles.generation == generation
            && let Some(done) = record(handles)
        {
            return Some(done);
        }
    }
    let mut all = HANDLES.write().unwrap_or_else(PoisonError::into_inner);
    let handles = all.entry(workflow.to_owned()).or_default();
    if handles.generation != generation {
        *handles = WorkflowHandles { generation, ..WorkflowHandles::default() };
    }
    register(handles);
    record(handles)
}

thread_local! {
    /// A step label being put together (see [`with_step_label`]), reused so labelling allocates
    /// nothing once warm.
    static LABEL: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Calls `f` with `path`'s label, its path without loop indices (`a[2]/b[5]` → `a/b`), without
/// allocating once warm.
fn with_step_label<T>(path: &StepPath, f: impl FnOnce(&str) -> T) -> T {
    if !path.as_str().contains('[') {
        return f(path.as_str());
    }
    LABEL.with_borrow_mut(|label| {
        label.clear();
        push_step_label(path, label);
        f(label)
    })
}

/// A step's label, character by character: its path without loop indices (`a[2]/b[5]` →
/// `a/b`).
fn label_chars(path: &StepPath) -> impl Iterator<Item = char> + '_ {
    let mut in_index = false;
    path.as_str().chars().filter(move |&c| match c {
        '[' => {
            in_index = true;
            false
        }
        ']' => {
            in_index = false;
            false
        }
        _ => !in_index,
    })
}

/// Appends a step's label to `label`.
fn push_step_label(path: &StepPath, label: &mut String) {
    label.extend(label_chars(path));
}

/// Whether `label` is `path`'s label, compared without writing it out.
fn is_label_of(path: &StepPath, label: &str) -> bool {
    label_chars(path).eq(label.chars())
}

/// The span of one execution of `run` on this worker (a child of the run's trace parent, with
/// the `opentelemetry` feature and a `tracing-opentelemetry` layer).
pub(crate) fn run_span(run: &cairn_store::RunRecord) -> tracing::Span {
    let span = tracing::debug_span!(
        "workflow.run",
        "workflow.name" = %run.workflow,
        "workflow.version" = run.version,
        run_id = %run.id,
        status = tracing::field::Empty,
    );
    #[cfg(feature = "opentelemetry")]
    if !span.is_disabled() {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        // Refused only when no OpenTelemetry layer sees the span: then there is no trace to join.
        let _ = span.set_parent(run_trace_parent(run.id.as_str()));
    }
    span
}

/// FNV-1a (64 bits) of `text`, from `offset`.
fn fnv(text: &str, offset: u64) -> u64 {
    text.bytes().fold(offset, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The trace id of run `run_id`'s spans: the same in every process, so every execution of a run
/// (after a suspension, a crash or a deploy, on any worker) adds to one trace. Two FNV-1a hashes
/// of the id with different offsets; never all zero.
///
/// ```
/// let id = cairn::telemetry::run_trace_id("order-42");
/// assert_eq!(id, cairn::telemetry::run_trace_id("order-42"));
/// assert_ne!(id, cairn::telemetry::run_trace_id("order-43"));
/// ```
pub fn run_trace_id(run_id: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&fnv(run_id, 0xcbf2_9ce4_8422_2325).to_be_bytes());
    id[8..].copy_from_slice(&fnv(run_id, 0x6c62_272e_07bb_0142).to_be_bytes());
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// The remote parent every `workflow.run` span of run `run_id` gets: span context in
/// [`run_trace_id`]'s trace, sampled, with a span id also made from the run id. That parent
/// span is never exported itself (no process sees a run whole), so a trace viewer shows the
/// executions of a run as the children of one missing root.
#[cfg(feature = "opentelemetry")]
pub fn run_trace_parent(run_id: &str) -> opentelemetry::Context {
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState};
    let span = fnv(run_id, 0x84222325_cbf29ce4).max(1);
    let context = SpanContext::new(
        TraceId::from_bytes(run_trace_id(run_id)),
        SpanId::from_bytes(span.to_be_bytes()),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    opentelemetry::Context::new().with_remote_span_context(context)
}

/// The span of one attempt of step `path` of run `run_id` (of `workflow`).
pub(crate) fn step_span(workflow: &str, run_id: &cairn_store::RunId, path: &StepPath, attempt: u32) -> tracing::Span {
    tracing::debug_span!(
        "workflow.step",
        "workflow.name" = %workflow,
        run_id = %run_id,
        "step.name" = %path,
        "step.kind" = "step",
        "step.attempt" = attempt,
        status = tracing::field::Empty,
    )
}

/// The span of a sleep or a wait for a signal (`kind`: `sleep` or `wait`) at `path`: from when
/// the body reaches it until it ends, or until the run suspends on it (a resumed run that finds
/// it over in its journal opens none).
pub(crate) fn wait_span(
    workflow: &str,
    run_id: &cairn_store::RunId,
    path: &StepPath,
    kind: &'static str,
) -> tracing::Span {
    tracing::debug_span!(
        "workflow.step",
        "workflow.name" = %workflow,
        run_id = %run_id,
        "step.name" = %path,
        "step.kind" = kind,
    )
}

/// The span of a wait consuming signal `event`.
pub(crate) fn signal_span(workflow: &str, run_id: &cairn_store::RunId, event: &str, id: i64) -> tracing::Span {
    tracing::debug_span!(
        "workflow.signal",
        "workflow.name" = %workflow,
        run_id = %run_id,
        event = %event,
        "signal.id" = id,
    )
}

/// A run of `workflow` was held back by a flow rule.
pub(crate) fn delayed(workflow: &str, rule: cairn_store::WaitingFor) {
    metrics::counter!(RUNS_DELAYED, "workflow" => workflow.to_owned(), "rule" => rule.as_str()).increment(1);
}

pub(crate) fn run_started(workflow: &str) {
    with_handles(
        workflow,
        |h| h.started.as_ref().map(|c| c.increment(1)),
        |h| {
            h.started.get_or_insert_with(|| metrics::counter!(RUNS_STARTED, "workflow" => workflow.to_owned()));
        },
    );
}

pub(crate) fn run_ended(workflow: &str, status: RunStatus, lasted: Duration) {
    if !status.is_terminal() {
        return;
    }
    let status = status.as_str();
    with_handles(
        workflow,
        |h| {
            let (completed, duration) = (h.completed.get(status)?, h.duration.as_ref()?);
            completed.increment(1);
            duration.record(lasted.as_secs_f64());
            Some(())
        },
        |h| {
            h.completed.entry(status).or_insert_with(
                || metrics::counter!(RUNS_COMPLETED, "workflow" => workflow.to_owned(), "status" => status),
            );
            h.duration.get_or_insert_with(|| metrics::histogram!(RUN_DURATION, "workflow" => workflow.to_owned()));
        },
    );
}

pub(crate) fn step_attempt(workflow: &str, path: &StepPath, lasted: Duration, retried: bool) {
    let generation = RECORDER_GENERATION.load(Ordering::SeqCst);
    let seconds = lasted.as_secs_f64();
    // Most attempts: the label this thread recorded last, compared without writing it out.
    if !retried && LAST_STEP.with_borrow(|last| last.record(generation, workflow, path, seconds)) {
        return;
    }
    with_step_label(path, |label| {
        let record = |h: &WorkflowHandles| {
            let step = h.steps.get(label)?;
            let retries = if retried { Some(step.retries.as_ref()?) } else { None };
            let duration = step.duration.as_ref()?;
            duration.record(seconds);
            if let Some(retries) = retries {
                retries.increment(1);
            }
            Some(duration.clone())
        };
        let register = |h: &mut WorkflowHandles| {
            let step = h.steps.entry(label.to_owned()).or_default();
            step.duration.get_or_insert_with(
                || metrics::histogram!(STEP_DURATION, "workflow" => workflow.to_owned(), "step" => label.to_owned()),
            );
            if retried {
                step.retries.get_or_insert_with(
                    || metrics::counter!(STEP_RETRIES, "workflow" => workflow.to_owned(), "step" => label.to_owned()),
                );
            }
        };
        if let Some(duration) = with_handles(workflow, record, register) {
            LAST_STEP.with_borrow_mut(|last| last.remember(generation, workflow, label, duration));
        }
    });
}

thread_local! {
    /// The step-duration handle this thread recorded into last: a run's steps (and its
    /// neighbours') mostly repeat the same labels, so most attempts skip the shared lookup.
    static LAST_STEP: RefCell<LastStep> = const { RefCell::new(LastStep { handle: None, workflow: String::new(), label: String::new() }) };
}

/// See [`LAST_STEP`].
struct LastStep {
    /// With the recorder generation it was registered under.
    handle: Option<(u64, metrics::Histogram)>,
    workflow: String,
    label: String,
}

impl LastStep {
    /// Records into the remembered handle if it is `workflow`'s and `path`'s label's; whether it
    /// was.
    fn record(&self, generation: u64, workflow: &str, path: &StepPath, seconds: f64) -> bool {
        match &self.handle {
            Some((at, handle)) if *at == generation && is_label_of(path, &self.label) && self.workflow == workflow => {
                handle.record(seconds);
                true
            }
            _ => false,
        }
    }

    fn remember(&mut self, generation: u64, workflow: &str, label: &str, handle: metrics::Histogram) {
        self.workflow.clear();
        self.workflow.push_str(workflow);
        self.label.clear();
        self.label.push_str(label);
        self.handle = Some((generation, handle));
    }
}

pub(crate) fn signal(workflow: &str, event: &str) {
    metrics::counter!(SIGNALS, "workflow" => workflow.to_owned(), "event" => event.to_owned()).increment(1);
}

pub(crate) fn schedule_fired(schedule: &str, workflow: &str, started: usize) {
    if started > 0 {
        metrics::counter!(SCHEDULED_RUNS, "schedule" => schedule.to_owned()).increment(started as u64);
        metrics::counter!(RUNS_STARTED, "workflow" => workflow.to_owned()).increment(started as u64);
    }
}

pub(crate) fn swept(runs: usize) {
    metrics::counter!(RETENTION_SWEPT).increment(runs as u64);
}

pub(crate) fn fenced_append(workflow: &str) {
    metrics::counter!(FENCED_APPENDS, "workflow" => workflow.to_owned()).increment(1);
}

pub(crate) fn run_recovered(workflow: &str) {
    metrics::counter!(RUNS_RECOVERED, "workflow" => workflow.to_owned()).increment(1);
}

pub(crate) fn heartbeat(round_trip: Duration) {
    metrics::histogram!(HEARTBEAT_SECONDS).record(round_trip.as_secs_f64());
}

pub(crate) fn claim_lag(lag: Duration) {
    metrics::histogram!(CLAIM_LAG).record(lag.as_secs_f64());
}

/// Counts a run in [`RUNS_IN_FLIGHT`] while it lives.
pub(crate) struct InFlight(metrics::Gauge);

impl InFlight {
    pub(crate) fn new(workflow: &str) -> InFlight {
        let gauge = with_handles(
            workflow,
            |h| h.in_flight.clone(),
            |h| {
                h.in_flight.get_or_insert_with(|| metrics::gauge!(RUNS_IN_FLIGHT, "workflow" => workflow.to_owned()));
            },
        )
        .unwrap_or_else(metrics::Gauge::noop);
        gauge.increment(1.0);
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_labels_leave_out_loop_indices() {
        let path = StepPath::root().child("expedition[2]").unwrap().child("analyze[15]").unwrap();
        assert_eq!(with_step_label(&path, str::to_owned), "expedition/analyze");
        assert_eq!(with_step_label(&StepPath::root().child("charge").unwrap(), str::to_owned), "charge");
    }

    #[test]
    fn a_label_compared_in_place_agrees_with_the_label_written_out() {
        let root = StepPath::root();
        let paths = [
            root.child("s[3]").unwrap(),
            root.child("charge").unwrap(),
            root.child("expedition[2]").unwrap().child("analyze[15]").unwrap(),
            root.child("é[1]").unwrap().child("ü").unwrap(),
        ];
        let labels = ["s", "s[3]", "charge", "charg", "chargee", "expedition/analyze", "expedition", "é/ü", ""];
        for path in &paths {
            let written = with_step_label(path, str::to_owned);
            for label in labels.iter().copied().chain([written.as_str()]) {
                assert_eq!(is_label_of(path, label), label == written, "{path} against {label:?}");
            }
        }
    }
}
