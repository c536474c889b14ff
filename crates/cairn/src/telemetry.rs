//! What Cairn reports through the [`metrics`] facade: counters, gauges and histograms of runs,
//! steps, signals, retention sweeps and claims. Install any `metrics` recorder (a Prometheus
//! exporter, say) and they appear there; without one they cost nothing. `cairn serve` installs
//! its own and serves them at `/metrics`.
//!
//! The same points are [`tracing`] spans: `workflow.run` (one per execution of a run on a worker:
//! `workflow.name`, `workflow.version`, `run_id`, `status`), `workflow.step` inside it (one per
//! attempt: `step.name`, `step.kind`, `step.attempt`, `status`) and `workflow.signal` (a wait
//! consuming a signal: `event`). An exporter can derive a run's trace from `run_id`, so its spans
//! share one trace across resumes and processes.
//!
//! Runs and steps are labelled by workflow; steps also by their path with loop indices left out
//! (`expedition/analyze`, not `expedition[2]/analyze[5]`), so labels stay few.

use cairn_journal::StepPath;
use cairn_store::RunStatus;
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
    use cairn_store::metrics_names::{BATCH_SIZE, COMMIT_SECONDS};
    describe_histogram!(COMMIT_SECONDS, Unit::Seconds, "One store write transaction, from its start to its commit.");
    describe_histogram!(BATCH_SIZE, "Writes committed together in one store transaction.");
}

/// A step's path without loop indices: `a[2]/b[5]` → `a/b`.
pub(crate) fn step_label(path: &StepPath) -> String {
    let mut label = String::with_capacity(path.as_str().len());
    let mut in_index = false;
    for c in path.as_str().chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => label.push(c),
            _ => {}
        }
    }
    label
}

/// The span of one execution of `run` on this worker.
pub(crate) fn run_span(run: &cairn_store::RunRecord) -> tracing::Span {
    tracing::debug_span!(
        "workflow.run",
        "workflow.name" = %run.workflow,
        "workflow.version" = run.version,
        run_id = %run.id,
        status = tracing::field::Empty,
    )
}

/// The span of one attempt of step `path`.
pub(crate) fn step_span(path: &StepPath, attempt: u32) -> tracing::Span {
    tracing::debug_span!(
        "workflow.step",
        "step.name" = %path,
        "step.kind" = "step",
        "step.attempt" = attempt,
        status = tracing::field::Empty,
    )
}

/// The span of a wait consuming signal `event`.
pub(crate) fn signal_span(event: &str, id: i64) -> tracing::Span {
    tracing::debug_span!("workflow.signal", event = %event, "signal.id" = id)
}

/// A run of `workflow` was held back by a flow rule.
pub(crate) fn delayed(workflow: &str, rule: cairn_store::WaitingFor) {
    metrics::counter!(RUNS_DELAYED, "workflow" => workflow.to_owned(), "rule" => rule.as_str()).increment(1);
}

pub(crate) fn run_started(workflow: &str) {
    metrics::counter!(RUNS_STARTED, "workflow" => workflow.to_owned()).increment(1);
}

pub(crate) fn run_ended(workflow: &str, status: RunStatus, lasted: Duration) {
    if status.is_terminal() {
        metrics::counter!(RUNS_COMPLETED, "workflow" => workflow.to_owned(), "status" => status.as_str()).increment(1);
        metrics::histogram!(RUN_DURATION, "workflow" => workflow.to_owned()).record(lasted.as_secs_f64());
    }
}

pub(crate) fn step_attempt(workflow: &str, path: &StepPath, lasted: Duration, retried: bool) {
    let step = step_label(path);
    if retried {
        metrics::counter!(STEP_RETRIES, "workflow" => workflow.to_owned(), "step" => step.clone()).increment(1);
    }
    metrics::histogram!(STEP_DURATION, "workflow" => workflow.to_owned(), "step" => step).record(lasted.as_secs_f64());
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

pub(crate) fn claim_lag(lag: Duration) {
    metrics::histogram!(CLAIM_LAG).record(lag.as_secs_f64());
}

/// Counts a run in [`RUNS_IN_FLIGHT`] while it lives.
pub(crate) struct InFlight(metrics::Gauge);

impl InFlight {
    pub(crate) fn new(workflow: &str) -> InFlight {
        let gauge = metrics::gauge!(RUNS_IN_FLIGHT, "workflow" => workflow.to_owned());
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
        assert_eq!(step_label(&path), "expedition/analyze");
        assert_eq!(step_label(&StepPath::root().child("charge").unwrap()), "charge");
    }
}
