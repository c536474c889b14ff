//! The JSON forms of runs, journal entries and signals: one shape for the HTTP API and for the
//! `cairn` command's `--json` output, so a tool reads either the same way.

use cairn::journal::JournalEntry;
use cairn::{LiveWorkers, RunId, RunRecord, SignalRecord, Timestamp};
use serde_json::{Value, json};

/// A time as RFC 3339 in UTC with milliseconds (`2026-11-23T10:00:00.000Z`).
pub fn time(t: Timestamp) -> String {
    humantime::format_rfc3339_millis(t.to_system_time()).to_string()
}

fn opt_time(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, |t| Value::String(time(t)))
}

/// Stored JSON as a value (`null` if it does not parse, which a store never hands out).
pub fn raw_json(raw: &serde_json::value::RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// A run's summary: id, workflow, version, status, times, error, step count and lifecycle flags.
pub fn run_json(run: &RunRecord) -> Value {
    json!({
        "id": run.id.as_str(),
        "workflow": run.workflow,
        "version": run.version,
        "status": run.status.as_str(),
        "suspend_reason": run.suspend_reason.map(|r| r.as_str()),
        "created_at": time(run.created_at),
        "updated_at": time(run.updated_at),
        "completed_at": opt_time(run.completed_at),
        "wake_at": opt_time(run.wake_at),
        "idempotency_key": run.idempotency_key,
        "error": run.error,
        "steps": run.last_seq,
        "recoveries": run.recoveries,
        "pause_requested": run.pause_requested,
        "deadline": opt_time(run.deadline),
        "delete_after": opt_time(run.delete_after),
        "restarted_from": run.restarted_from.as_ref().map(RunId::as_str),
    })
}

/// A run as lists show it: its summary, and whether it is stranded (and why).
pub fn listed_json(run: &RunRecord, live: &LiveWorkers) -> Value {
    let mut summary = run_json(run);
    let reason = live.why_stranded(run);
    summary["stranded"] = json!(reason.is_some());
    summary["stranded_reason"] = json!(reason);
    summary
}

/// One run in full: the listed summary plus its input, output and the runs that restart it.
pub fn detail_json(run: &RunRecord, live: &LiveWorkers, restarts: &[RunId]) -> Value {
    let mut summary = listed_json(run, live);
    summary["input"] = raw_json(&run.input);
    summary["output"] = run.output.as_deref().map_or(Value::Null, raw_json);
    summary["restarts"] = json!(restarts.iter().map(RunId::as_str).collect::<Vec<_>>());
    summary
}

/// A signal: id, name, payload, when it was sent, and the journal entry that consumed it.
pub fn signal_json(signal: &SignalRecord) -> Value {
    json!({
        "id": signal.id.0,
        "name": signal.name,
        "payload": raw_json(&signal.payload),
        "sent_at": time(signal.sent_at),
        "consumed_seq": signal.consumed_seq,
    })
}

/// A journal entry: its sequence number, when it was committed, and the event as journaled
/// (the form `cairn::testing::replay` reads back).
pub fn entry_json(entry: &JournalEntry) -> Value {
    let event: Value = serde_json::from_str(&entry.event.to_json()).unwrap_or(Value::Null);
    json!({ "seq": entry.seq, "at": time(entry.at), "at_ms": entry.at.as_millis(), "event": event })
}
