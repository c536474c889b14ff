//! The API's answers ([`cairn_api::views`]: one shape for the HTTP API, the light client and
//! the `cairn` command's `--json` output, so a tool reads any of them the same way), built from
//! the engine's records.

use crate::client::{Published, RunHandle};
use crate::schedule::{CatchUp, Schedule, ScheduleSpec, schedule_run_id};
use crate::workers::{LiveWorkers, StrandedVersion};
use cairn_api::ScheduleBody;
use cairn_api::values::{
    ControlOutcome, RunStatus as RunStatusValue, StepKind as StepKindValue, StepPhase,
    SuspendReason as SuspendReasonValue,
};
use cairn_api::views::{
    AttemptView, EntryView, EventPage, EventRunView, EventView, ListedRun, Outcome, Pruned, PublishedEvent, RunDetail,
    RunView, ScheduleView, ServedView, SignalView, StartedRun, StepView, Steps, StrandedView, WorkerView, Workers,
    WorkflowView, Workflows,
};
use cairn_journal::{JournalEntry, Timestamp};
use cairn_store::{CancelOutcome, PauseOutcome, Request, RunId, RunRecord, SignalRecord};
use serde_json::Value;

/// A time as RFC 3339 in UTC with milliseconds (`2026-11-23T10:00:00.000Z`). RFC 3339 ends with
/// the year 9999: a later time (a run kept for `u32::MAX` days has one) shows as its last
/// millisecond, `9999-12-31T23:59:59.999Z`, and one before 1970 as `1970-01-01T00:00:00.000Z`.
///
/// ```
/// use cairn::Timestamp;
/// assert_eq!(cairn::api::views::time(Timestamp::from_millis(1_000)), "1970-01-01T00:00:01.000Z");
/// assert_eq!(cairn::api::views::time(Timestamp::from_millis(i64::MAX)), "9999-12-31T23:59:59.999Z");
/// ```
pub fn time(t: Timestamp) -> String {
    /// 9999-12-31T23:59:59.999Z in milliseconds since 1970.
    const LAST: i64 = 253_402_300_799_999;
    let t = Timestamp::from_millis(t.as_millis().clamp(0, LAST));
    humantime::format_rfc3339_millis(t.to_system_time()).to_string()
}

/// Stored JSON as a value (`null` if it does not parse, which a store never hands out).
pub fn raw_json(raw: &serde_json::value::RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// The input filter of `(field, value)` pairs (each field a dotted path, as `--input` and the
/// light client give them): [`input_filter`] of `input.<field>=<value>`; `None` for no pair.
///
/// ```
/// let pairs = [("address.city".to_owned(), "Oslo".to_owned())];
/// assert_eq!(cairn::api::views::input_fields(&pairs), Ok(Some(serde_json::json!({"address": {"city": "Oslo"}}))));
/// assert_eq!(cairn::api::views::input_fields(&[]), Ok(None));
/// ```
pub fn input_fields(pairs: &[(String, String)]) -> Result<Option<Value>, String> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let named: Vec<(String, &str)> =
        pairs.iter().map(|(field, value)| (format!("input.{field}"), value.as_str())).collect();
    input_filter(named.iter().map(|(name, value)| (name.as_str(), *value))).map(Some)
}

/// Why a list's parameter `name` is refused: it is none of the list's, and not an input filter.
pub fn unknown_parameter(name: &str) -> String {
    format!("unknown parameter {name:?} (filters on the input are `input.<field>=<value>`)")
}

/// The input filter `input.<field>=<value>` parameters ask for, as one JSON object: a dotted
/// field nests (`input.address.city=Oslo` → `{"address": {"city": "Oslo"}}`), a value is JSON when
/// it parses as JSON and a string otherwise. A parameter not under `input.` is refused.
///
/// ```
/// let filter = cairn::api::views::input_filter([("input.customer", "42"), ("input.address.city", "Oslo")]);
/// assert_eq!(filter, Ok(serde_json::json!({"customer": 42, "address": {"city": "Oslo"}})));
/// assert!(cairn::api::views::input_filter([("colour", "red")]).is_err());
/// ```
pub fn input_filter<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Value, String> {
    let mut filter = Value::Object(serde_json::Map::new());
    for (name, text) in pairs {
        let path = name
            .strip_prefix("input.")
            .filter(|path| !path.is_empty() && path.split('.').all(|field| !field.is_empty()))
            .ok_or_else(|| unknown_parameter(name))?;
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
pub fn run_view(run: &RunRecord) -> RunView {
    let cancel = run.pending.as_ref().filter(|request| request.is_cancel());
    RunView {
        id: run.id.to_string(),
        workflow: run.workflow.to_string(),
        version: run.version,
        status: status_value(run.status),
        suspend_reason: run.suspend_reason.map(suspend_reason_value),
        created_at: time(run.created_at),
        updated_at: time(run.updated_at),
        completed_at: run.completed_at.map(time),
        wake_at: run.wake_at.map(time),
        idempotency_key: run.idempotency_key.as_deref().map(str::to_owned),
        // While a cancel waits for its worker, the reason given for it.
        error: run.error.clone().or_else(|| cancel.map(|c| c.reason().to_owned())),
        steps: run.last_seq,
        recoveries: run.recoveries,
        pause_requested: matches!(run.pending, Some(Request::Pause { .. })),
        cancel_requested: cancel.is_some(),
        deadline: run.rare().deadline.map(time),
        delete_after: run.delete_after.map(time),
        restarted_from: run.rare().restarted_from.as_ref().map(RunId::to_string),
        parent: run.rare().parent.as_ref().map(RunId::to_string),
        continued_from: run.rare().continued_from.as_ref().map(RunId::to_string),
        continued_as: run.rare().continued_as.as_ref().map(RunId::to_string),
        waiting_for: run.held_back_by().map(|w| w.to_string()),
        concurrency_key: run.concurrency.as_ref().map(|c| c.key.clone()),
        priority: run.priority,
        fairness_key: run.fairness_key.clone(),
        debounce_key: run.rare().debounce_key.clone(),
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

/// A run just started, as its start created or found it.
pub fn started(handle: &RunHandle) -> StartedRun {
    StartedRun { run: run_view(handle.record()), created: handle.created() }
}

/// The view of a prune that found `runs`.
pub fn pruned(runs: &[RunId], dry_run: bool) -> Pruned {
    Pruned { deleted: if dry_run { 0 } else { runs.len() }, dry_run, runs: runs.iter().map(RunId::to_string).collect() }
}

/// The view of `published`, an event published to `topic`.
pub fn published(topic: &str, published: &Published) -> PublishedEvent {
    let (runs, already_started) = published.runs.iter().map(started).partition(|run| run.created);
    PublishedEvent { id: published.event_id.clone(), topic: topic.to_owned(), runs, already_started }
}

/// A page of published events.
pub fn event_page(page: &cairn_store::EventPage) -> EventPage {
    let event = |event: &cairn_store::EventRecord| EventView {
        id: event.id.clone(),
        topic: event.topic.clone(),
        payload: raw_json(&event.payload),
        published_at: time(event.published_at),
        runs: (event.runs.iter())
            .map(|run| EventRunView { workflow: run.workflow.clone(), id: run.run.to_string() })
            .collect(),
    };
    EventPage {
        events: page.events.iter().map(event).collect(),
        next_cursor: page.next_cursor.as_ref().map(cairn_store::EventCursor::encode),
    }
}

/// A run's steps over time, with its journal and durable values.
pub fn steps(run: &RunId, journal: &[JournalEntry]) -> Steps {
    Steps {
        run: run.to_string(),
        steps: step_views(journal),
        journal: journal.iter().map(entry).collect(),
        vars: cairn_journal::vars(journal),
    }
}

/// Each step of a journal over time.
fn step_views(journal: &[JournalEntry]) -> Vec<StepView> {
    let millis = |from: Timestamp, to: Timestamp| to.as_millis() - from.as_millis();
    cairn_journal::timeline::steps(journal)
        .into_iter()
        .map(|step| StepView {
            path: step.path.to_string(),
            kind: step_kind_value(step.kind),
            phase: step_phase_value(step.phase),
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

/// What a cancel did.
pub fn cancelled(run: &RunId, outcome: CancelOutcome) -> Outcome {
    let outcome = match outcome {
        CancelOutcome::Cancelled => ControlOutcome::Cancelled,
        CancelOutcome::Requested => ControlOutcome::CancelRequested,
    };
    outcome_of(run, outcome)
}

/// What a pause did.
pub fn paused(run: &RunId, outcome: PauseOutcome) -> Outcome {
    let outcome = match outcome {
        PauseOutcome::Paused => ControlOutcome::Paused,
        PauseOutcome::Requested => ControlOutcome::PauseRequested,
    };
    outcome_of(run, outcome)
}

/// A resume.
pub fn resumed(run: &RunId) -> Outcome {
    outcome_of(run, ControlOutcome::Resumed)
}

fn outcome_of(run: &RunId, outcome: ControlOutcome) -> Outcome {
    Outcome { run: run.to_string(), outcome }
}

/// A store's run status as the API names it (a match, so a new status cannot go unnamed).
fn status_value(status: cairn_store::RunStatus) -> RunStatusValue {
    use cairn_store::RunStatus as S;
    match status {
        S::Pending => RunStatusValue::Pending,
        S::Running => RunStatusValue::Running,
        S::Suspended => RunStatusValue::Suspended,
        S::Completed => RunStatusValue::Completed,
        S::Failed => RunStatusValue::Failed,
        S::Cancelled => RunStatusValue::Cancelled,
        S::Paused => RunStatusValue::Paused,
        S::Continued => RunStatusValue::Continued,
    }
}

fn suspend_reason_value(reason: cairn_store::SuspendReason) -> SuspendReasonValue {
    use cairn_store::SuspendReason as R;
    match reason {
        R::Sleeping => SuspendReasonValue::Sleeping,
        R::Waiting => SuspendReasonValue::Waiting,
        R::BackingOff => SuspendReasonValue::BackingOff,
        R::RateLimited => SuspendReasonValue::RateLimited,
        R::Debouncing => SuspendReasonValue::Debouncing,
    }
}

fn step_kind_value(kind: cairn_journal::StepKind) -> StepKindValue {
    use cairn_journal::StepKind as K;
    match kind {
        K::Step => StepKindValue::Step,
        K::Sleep => StepKindValue::Sleep,
        K::Wait => StepKindValue::Wait,
    }
}

fn step_phase_value(phase: cairn_journal::timeline::Phase) -> StepPhase {
    use cairn_journal::timeline::Phase as P;
    match phase {
        P::Retrying => StepPhase::Retrying,
        P::Completed => StepPhase::Completed,
        P::Failed => StepPhase::Failed,
        P::Sleeping => StepPhase::Sleeping,
        P::Slept => StepPhase::Slept,
        P::Waiting => StepPhase::Waiting,
        P::Received => StepPhase::Received,
        P::TimedOut => StepPhase::TimedOut,
        P::Abandoned => StepPhase::Abandoned,
    }
}

/// Per-status counts grouped by workflow, and every workflow a worker has `served` (with no
/// runs, its counts are empty), by name.
pub fn workflows(counts: &[cairn_store::WorkflowCount], served: &[cairn_store::ServedWorkflow]) -> Workflows {
    let mut workflows: std::collections::BTreeMap<&str, WorkflowView> = std::collections::BTreeMap::new();
    let view =
        |name: &str| WorkflowView { name: name.to_owned(), runs: Default::default(), total: 0, versions: Vec::new() };
    for count in counts {
        let workflow = workflows.entry(&count.workflow).or_insert_with(|| view(&count.workflow));
        workflow.runs.insert(count.status.as_str().to_owned(), count.runs);
        workflow.total += count.runs;
    }
    for served in served {
        let workflow = workflows.entry(&served.key.name).or_insert_with(|| view(&served.key.name));
        if let Err(at) = workflow.versions.binary_search(&served.key.version) {
            workflow.versions.insert(at, served.key.version);
        }
    }
    Workflows { workflows: workflows.into_values().collect() }
}

/// `worker` as of `now` (wall-clock time).
pub fn worker(worker: &cairn_store::WorkerRecord, now: Timestamp) -> WorkerView {
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

/// The live workers and the stranded versions as of `now`.
pub fn workers(live: &LiveWorkers, stranded: &[StrandedVersion], now: Timestamp) -> Workers {
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

/// A schedule as the API shows it (a spec it cannot read shows as no cron and no interval).
pub fn schedule_view(record: &cairn_store::ScheduleRecord) -> ScheduleView {
    let spec = ScheduleSpec::parse_stored(&record.spec).ok();
    ScheduleView {
        name: record.name.clone(),
        workflow: record.workflow.to_string(),
        cron: spec.as_ref().map(|s| s.cron.clone()).unwrap_or_default(),
        time_zone: spec.as_ref().and_then(|s| s.time_zone.clone()),
        every_ms: spec.as_ref().and_then(|s| s.every_ms),
        catch_up: spec.as_ref().map(|s| s.catch_up.to_string()).unwrap_or_default(),
        input: raw_json(&record.input),
        paused: record.paused,
        next_fire_at: record.next_fire_at.map(time),
        last_fired_at: record.last_fired_at.map(time),
        last_run: record.last_fired_at.map(|at| schedule_run_id(&record.name, at).to_string()),
        created_at: time(record.created_at),
        updated_at: time(record.updated_at),
    }
}

/// The schedule `name` that `body` describes; why not, if a field is not valid.
pub fn schedule(body: &ScheduleBody, name: &str) -> Result<Schedule, String> {
    let catch_up = body.catch_up.as_deref().map(CatchUp::parse).transpose()?.unwrap_or_default();
    let every_ms = match &body.every {
        Some(every) => {
            let every = humantime::parse_duration(every).map_err(|e| format!("every {every:?}: {e}"))?;
            Some(u64::try_from(every.as_millis()).unwrap_or(u64::MAX))
        }
        None => None,
    };
    let spec = ScheduleSpec { cron: body.cron.clone(), time_zone: body.time_zone.clone(), every_ms, catch_up };
    let schedule = Schedule::with_spec(name, &body.workflow, spec).input(&body.input.clone().unwrap_or(Value::Null));
    Ok(if body.allow_unknown == Some(true) { schedule.allow_unknown() } else { schedule })
}
