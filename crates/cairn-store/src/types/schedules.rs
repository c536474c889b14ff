//! Schedules as stores keep them, and the requests that change them.

use super::names::WorkflowName;
use super::new_run::*;
use cairn_journal::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A schedule as a store keeps it: which workflow it starts with what input, and when it fires
/// next. When it fires is the engine's business (`spec`, opaque JSON to the store); the store
/// keeps `next_fire_at` indexed, so due schedules are found without reading any other.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// Unique name.
    pub name: String,
    /// The workflow each firing starts.
    pub workflow: WorkflowName,
    /// When it fires and how it catches up, as the engine wrote it (JSON).
    pub spec: String,
    /// Each run's input.
    pub input: Box<RawValue>,
    /// A paused schedule does not fire.
    pub paused: bool,
    /// The next firing not started yet (`None`: it fires no more).
    pub next_fire_at: Option<Timestamp>,
    /// The firing time of the last run it started.
    pub last_fired_at: Option<Timestamp>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// Creates schedule `name`, or updates its definition: its workflow, spec and input are
/// replaced; whether it is paused is kept; `next_fire_at` is replaced only when the spec
/// changed (or it is new), so redeclaring a schedule unchanged moves nothing.
#[derive(Debug, Clone)]
pub struct PutSchedule {
    /// Unique name.
    pub name: String,
    /// The workflow each firing starts.
    pub workflow: WorkflowName,
    /// When it fires (JSON, the engine's).
    pub spec: String,
    /// Each run's input.
    pub input: Box<RawValue>,
    /// Its first firing under this spec.
    pub next_fire_at: Option<Timestamp>,
    /// Now.
    pub now: Timestamp,
}

/// Fires schedule `name` if it is still due at `due` (no other worker fired it meanwhile, and it
/// is not paused): starts `runs` (each at most once: their ids are derived from the firing
/// times, and an existing id is skipped) and moves `next_fire_at` on, all or nothing.
#[derive(Debug, Clone)]
pub struct FireSchedule {
    /// The schedule.
    pub name: String,
    /// Its `next_fire_at` as the firer read it.
    pub due: Timestamp,
    /// Where `next_fire_at` goes.
    pub next_fire_at: Option<Timestamp>,
    /// The firing time of the last run started (`last_fired_at`), if any.
    pub last_fired_at: Option<Timestamp>,
    /// The runs to start.
    pub runs: Vec<NewRun>,
    /// Now.
    pub now: Timestamp,
    /// A firing asked for now (a trigger): it fires whether the schedule is paused or due, and
    /// leaves its `next_fire_at` (and `due`) alone.
    pub manual: bool,
}

/// Pauses or resumes schedule `name`; resuming sets its next firing (what it missed while
/// paused is not started).
#[derive(Debug, Clone)]
pub struct PauseSchedule {
    /// The schedule.
    pub name: String,
    /// Paused, or resumed.
    pub paused: bool,
    /// On resume, its next firing.
    pub next_fire_at: Option<Timestamp>,
    /// Now.
    pub now: Timestamp,
}
