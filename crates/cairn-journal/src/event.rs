use crate::path::StepPath;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;

/// What a path in the journal stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// `ctx.step`: a body whose result is journaled.
    Step,
    /// `ctx.sleep` / `ctx.sleep_until`.
    Sleep,
    /// `ctx.wait_for_event`.
    Wait,
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StepKind::Step => "step",
            StepKind::Sleep => "sleep",
            StepKind::Wait => "wait",
        })
    }
}

/// The identity of one delivered signal, unique within a store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SignalId(pub i64);

/// One immutable fact about a run.
///
/// Payloads (`input`, `output`, signal payloads) stay raw JSON text, so replay hands a step's
/// journaled output back to the workflow without parsing it into an intermediate tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The run was created; always the first event.
    Started {
        /// Registered workflow name.
        workflow: String,
        /// Workflow version the run is pinned to.
        version: u32,
        /// The run's input.
        input: Box<RawValue>,
        /// When the run fails with a timeout if it has not ended (absent: no deadline).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline: Option<Timestamp>,
        /// Why it was started, when its starter gave a reason (a restart's; absent: none given).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A step's body returned a value, which is now the step's result forever.
    StepCompleted {
        /// The step's path.
        path: StepPath,
        /// Position among the steps of its scope, in the order the body asked for them.
        ordinal: u32,
        /// Which attempt succeeded, from 1.
        attempt: u32,
        /// The value, as JSON.
        output: Box<RawValue>,
        /// When the successful attempt began (absent in journals written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Timestamp>,
    },
    /// An attempt of a step failed.
    StepFailed {
        /// The step's path.
        path: StepPath,
        /// Position among the steps of its scope.
        ordinal: u32,
        /// Which attempt failed, from 1.
        attempt: u32,
        /// The error's message.
        error: String,
        /// When the next attempt may run; `None` when the step has failed for good.
        retry_at: Option<Timestamp>,
        /// When the failed attempt began (absent in journals written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Timestamp>,
    },
    /// A durable sleep began; its deadline is fixed from now on.
    TimerStarted {
        /// The sleep's path.
        path: StepPath,
        /// Position among the steps of its scope.
        ordinal: u32,
        /// When the sleep ends.
        wake_at: Timestamp,
    },
    /// A durable sleep ended.
    TimerFired {
        /// The sleep's path.
        path: StepPath,
    },
    /// The run began waiting for a signal.
    WaitStarted {
        /// The wait's path.
        path: StepPath,
        /// Position among the steps of its scope.
        ordinal: u32,
        /// Signal name waited for.
        event: String,
        /// JSON the payload must contain, if any (boxed: most waits have none, and an event is
        /// as large as its largest kind).
        filter: Option<Box<serde_json::Value>>,
        /// When the wait gives up; `None` waits forever.
        deadline: Option<Timestamp>,
    },
    /// A wait ended: with a consumed signal, or by timing out (`signal` is `None`).
    WaitCompleted {
        /// The wait's path.
        path: StepPath,
        /// The signal consumed, if one was.
        signal: Option<SignalId>,
        /// That signal's payload.
        payload: Option<Box<RawValue>>,
    },
    /// The body evaluated a patch marker (`Ctx::patched` in the `cairn` crate) for the first
    /// time: which branch it took is fixed for the rest of the run, on every replay. Not a step:
    /// it takes no position in its scope.
    Patched {
        /// The marker's id.
        id: String,
        /// `true` when the run takes the patched (new) branch.
        applied: bool,
    },
    /// The body set a durable value (`ctx.var` in the `cairn` crate): its latest value is
    /// what the run's journal says it is. Not a step: it takes no position in its scope.
    VarSet {
        /// The value's name (unique in the run).
        name: String,
        /// The new value, as JSON.
        value: Box<RawValue>,
    },
    /// A durable loop (`ctx.repeat` in the `cairn` crate) finished the iterations before `next`
    /// and carries `state` into it: a replay starts the loop there, not at iteration 0. Not a
    /// step: it takes no position in its scope.
    LoopCheckpoint {
        /// The loop's path; its iterations are the scopes `path[0]`, `path[1]`, ….
        path: StepPath,
        /// The next iteration to run.
        next: u64,
        /// The state carried into it, as JSON.
        state: Box<RawValue>,
        /// Older entries of this loop deleted as this one commits (see [`Trim`]; boxed: an event
        /// is as large as its largest kind).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trim: Option<Box<Trim>>,
        /// Every durable value of the run as the body had set it by then (what the trimmed
        /// `var_set` entries said), restored when the loop resumes here.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        vars: std::collections::BTreeMap<String, Box<RawValue>>,
    },
    /// The workflow body returned a value.
    Completed {
        /// The run's output.
        output: Box<RawValue>,
    },
    /// The workflow body returned an error, or the run could not go on.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// The run was cancelled.
    Cancelled {
        /// Why, as given by the canceller.
        reason: String,
    },
    /// The body asked to go on as a fresh run (`ctx.continue_as_new` in the `cairn` crate): this
    /// run ends here and the run `run` of the same workflow starts with `input`, its journal
    /// empty and its unconsumed signals moved over.
    Continued {
        /// The new run's id.
        run: String,
        /// Its input.
        input: Box<RawValue>,
    },
}

/// The entries of a loop's history that a [`Event::LoopCheckpoint`] deletes: among the entries
/// numbered `after + 1 ..= through`, those within an iteration of the loop (`path[i]/…`), the
/// loop's earlier checkpoints and every `var_set` (the checkpoint holds every value as it was
/// after them). Entries of anything else in that range stay. Earlier checkpoints
/// deleted the loop's entries in `since + 1 ..= after` the same way, so a journal read back
/// afterwards may have gaps anywhere in `since + 1 ..= through`, which the fold accepts because
/// the checkpoint declares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trim {
    /// The last entry before the loop began trimming.
    pub since: u64,
    /// The last entry before the range this checkpoint deletes.
    pub after: u64,
    /// The last entry of that range (equal to `after`: nothing new to delete).
    pub through: u64,
}

impl Trim {
    /// Whether `entry` is deleted by this trim of the loop at `path`.
    ///
    /// ```
    /// use cairn_journal::{Event, JournalEntry, StepPath, Timestamp, Trim};
    /// let p = |s| StepPath::parse(s).unwrap();
    /// let fired = |seq, path| JournalEntry::new(seq, Timestamp::from_millis(0), Event::TimerFired { path: p(path) });
    /// let trim = Trim { since: 0, after: 1, through: 3 };
    /// assert!(trim.deletes(&p("tick"), &fired(2, "tick[7]/nap")));
    /// assert!(!trim.deletes(&p("tick"), &fired(4, "tick[8]/nap")), "after the range");
    /// assert!(!trim.deletes(&p("tick"), &fired(3, "ticker[1]/nap")), "another loop");
    /// ```
    pub fn deletes(&self, loop_path: &StepPath, entry: &JournalEntry) -> bool {
        if entry.seq <= self.after || entry.seq > self.through {
            return false;
        }
        match &entry.event {
            Event::LoopCheckpoint { path, .. } => path == loop_path,
            Event::VarSet { .. } => true,
            event => event.path().is_some_and(|path| path.iteration_of(loop_path).is_some()),
        }
    }

    /// The prefix every path within an iteration of the loop at `loop_path` starts with, for
    /// stores that delete by prefix: `loop_path` and `[`.
    pub fn iteration_prefix(loop_path: &StepPath) -> String {
        format!("{loop_path}[")
    }

    /// Deletes from `journal` what the trims of its checkpoints delete (for stores that keep the
    /// whole history and trim as they load it).
    pub fn apply_all(journal: &mut Vec<JournalEntry>) {
        let trims: Vec<(StepPath, Trim)> =
            journal.iter().filter_map(|e| e.event.deletion()).map(|(path, trim)| (path.clone(), trim)).collect();
        if !trims.is_empty() {
            journal.retain(|entry| !trims.iter().any(|(path, trim)| trim.deletes(path, entry)));
        }
    }
}

/// A short, stable name for each event kind, as stored in a `kind` column.
pub trait EventKindName {
    /// The kind's name, e.g. `step_completed`.
    fn kind_name(&self) -> &'static str;
}

impl EventKindName for Event {
    fn kind_name(&self) -> &'static str {
        match self {
            Event::Started { .. } => "started",
            Event::StepCompleted { .. } => "step_completed",
            Event::StepFailed { .. } => "step_failed",
            Event::TimerStarted { .. } => "timer_started",
            Event::TimerFired { .. } => "timer_fired",
            Event::WaitStarted { .. } => "wait_started",
            Event::WaitCompleted { .. } => "wait_completed",
            Event::Patched { .. } => "patched",
            Event::VarSet { .. } => "var_set",
            Event::LoopCheckpoint { .. } => "loop_checkpoint",
            Event::Completed { .. } => "completed",
            Event::Failed { .. } => "failed",
            Event::Cancelled { .. } => "cancelled",
            Event::Continued { .. } => "continued",
        }
    }
}

impl Event {
    /// The step path this event is about, if it is about a step.
    pub fn path(&self) -> Option<&StepPath> {
        match self {
            Event::StepCompleted { path, .. }
            | Event::StepFailed { path, .. }
            | Event::TimerStarted { path, .. }
            | Event::TimerFired { path }
            | Event::WaitStarted { path, .. }
            | Event::WaitCompleted { path, .. }
            | Event::LoopCheckpoint { path, .. } => Some(path),
            _ => None,
        }
    }

    /// A [`Event::LoopCheckpoint`]'s trim, with the loop's path (what the fold reads).
    pub fn trim(&self) -> Option<(&StepPath, Trim)> {
        match self {
            Event::LoopCheckpoint { path, trim: Some(trim), .. } => Some((path, **trim)),
            _ => None,
        }
    }

    /// What a store deletes as it commits this event: a checkpoint's trim whose range
    /// `after + 1 ..= through` is not empty, with the loop's path.
    pub fn deletion(&self) -> Option<(&StepPath, Trim)> {
        self.trim().filter(|(_, trim)| trim.through > trim.after)
    }

    /// Whether this event ends the run.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Event::Completed { .. } | Event::Failed { .. } | Event::Cancelled { .. } | Event::Continued { .. }
        )
    }

    /// The event as JSON text, the form stores keep.
    pub fn to_json(&self) -> String {
        // Serializing this enum cannot fail: every field is a string, number, path or valid JSON.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses the JSON text written by [`Event::to_json`].
    pub fn from_json(text: &str) -> Result<Event, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// An event with its place in the journal.
#[derive(Debug, Clone)]
pub struct JournalEntry {
    /// Dense sequence number within the run, from 1.
    pub seq: u64,
    /// When the event was appended.
    pub at: Timestamp,
    /// What happened.
    pub event: Event,
}

impl JournalEntry {
    /// Bundles an event with its sequence number and time.
    pub fn new(seq: u64, at: Timestamp, event: Event) -> Self {
        Self { seq, at, event }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_keeps_raw_payloads_verbatim() {
        let event = Event::StepCompleted {
            path: StepPath::parse("a/b[2]").unwrap(),
            ordinal: 3,
            attempt: 1,
            output: RawValue::from_string(r#"{"x": [1, 2]}"#.into()).unwrap(),
            started_at: Some(Timestamp::from_millis(7)),
        };
        let text = event.to_json();
        let back = Event::from_json(&text).unwrap();
        match back {
            Event::StepCompleted { path, ordinal, attempt, output, started_at } => {
                assert_eq!(started_at, Some(Timestamp::from_millis(7)));
                assert_eq!(path.as_str(), "a/b[2]");
                assert_eq!((ordinal, attempt), (3, 1));
                assert_eq!(output.get(), r#"{"x": [1, 2]}"#);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(event.kind_name(), "step_completed");
    }
}
