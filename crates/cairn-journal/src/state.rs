use crate::event::{Event, EventKindName, JournalEntry, SignalId, StepKind, Trim};
use crate::maps::FastMap;
use crate::path::StepPath;
use crate::time::Timestamp;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Whether a run is still going, and how it ended if not.
#[derive(Debug, Clone)]
pub enum RunPhase {
    /// The run has not ended.
    Active,
    /// The body returned this output.
    Completed(Box<RawValue>),
    /// The run failed with this error.
    Failed(String),
    /// The run was cancelled for this reason.
    Cancelled(String),
    /// The run went on as the run with this id.
    Continued(String),
}

impl PartialEq for RunPhase {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (RunPhase::Active, RunPhase::Active) => true,
            (RunPhase::Completed(a), RunPhase::Completed(b)) => a.get() == b.get(),
            (RunPhase::Failed(a), RunPhase::Failed(b)) => a == b,
            (RunPhase::Cancelled(a), RunPhase::Cancelled(b)) => a == b,
            (RunPhase::Continued(a), RunPhase::Continued(b)) => a == b,
            _ => false,
        }
    }
}

/// Where one step stands according to the journal.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StepStatus {
    /// An attempt failed and another is due at `retry_at`.
    Retrying {
        /// How many attempts have failed.
        failed_attempts: u32,
        /// When the next attempt may start.
        retry_at: Timestamp,
        /// The last attempt's error.
        last_error: String,
    },
    /// The step has its result.
    Completed {
        /// The attempt that succeeded.
        attempt: u32,
        /// The journaled output.
        output: Box<RawValue>,
    },
    /// The step failed for good.
    Failed {
        /// Attempts made.
        attempts: u32,
        /// The last error.
        error: String,
    },
    /// A sleep whose deadline has not been marked as passed.
    Sleeping {
        /// The deadline.
        wake_at: Timestamp,
    },
    /// A sleep that has ended.
    Slept,
    /// A wait that has not ended.
    Waiting {
        /// Signal name.
        event: String,
        /// Containment filter.
        filter: Option<serde_json::Value>,
        /// When it times out.
        deadline: Option<Timestamp>,
    },
    /// A wait that ended; `payload` is `None` when it timed out.
    Received {
        /// The consumed signal.
        signal: Option<SignalId>,
        /// Its payload.
        payload: Option<Box<RawValue>>,
    },
}

/// One step of the run as the journal records it.
#[derive(Debug, Clone)]
pub struct StepRecord {
    /// What kind of step it is.
    pub kind: StepKind,
    /// Its position within its scope.
    pub ordinal: u32,
    /// Where it stands.
    pub status: StepStatus,
}

impl StepRecord {
    /// The output of a completed step.
    pub fn completed_output(&self) -> Option<&RawValue> {
        match &self.status {
            StepStatus::Completed { output, .. } => Some(output),
            _ => None,
        }
    }

    /// Whether the step needs nothing more (completed, failed for good, slept or received).
    pub fn is_settled(&self) -> bool {
        matches!(
            self.status,
            StepStatus::Completed { .. } | StepStatus::Failed { .. } | StepStatus::Slept | StepStatus::Received { .. }
        )
    }
}

/// An event that may not follow the journal so far.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// Sequence numbers must be dense: 1, 2, 3, …
    #[error("event #{found} follows #{last}: sequence numbers must be dense")]
    Gap {
        /// The last sequence number applied.
        last: u64,
        /// The one that came next.
        found: u64,
    },
    /// The first event must be `started`, and only the first.
    #[error("event #{seq}: `started` must be the first event and only the first")]
    StartedMisplaced {
        /// Sequence number.
        seq: u64,
    },
    /// Nothing may follow a terminal event.
    #[error("event #{seq} follows the end of the run")]
    AfterEnd {
        /// Sequence number.
        seq: u64,
    },
    /// The event does not fit the step's current state.
    #[error("event #{seq} ({kind}) does not fit step `{path}` in its current state ({state})")]
    StepConflict {
        /// Sequence number.
        seq: u64,
        /// Event kind.
        kind: &'static str,
        /// Step path.
        path: StepPath,
        /// The step's state before the event.
        state: String,
    },
    /// A patch marker is decided once per run.
    #[error("event #{seq} decides patch marker `{id}` a second time")]
    PatchRepeated {
        /// Sequence number.
        seq: u64,
        /// The marker.
        id: String,
    },
    /// A signal may be consumed once.
    #[error("event #{seq} consumes signal {signal:?} a second time")]
    SignalReused {
        /// Sequence number.
        seq: u64,
        /// The signal.
        signal: SignalId,
    },
}

/// Each durable value's latest value in `journal`, by name, from its `var_set` entries and the
/// loop checkpoints that hold the values trimmed (values that are not JSON are left out; a store
/// keeps only JSON).
///
/// ```
/// use cairn_journal::{Event, JournalEntry, Timestamp, vars};
/// use serde_json::value::RawValue;
/// let set = |v: &str| Event::VarSet { name: "n".into(), value: RawValue::from_string(v.into()).unwrap() };
/// let at = Timestamp::from_millis(0);
/// let journal = [JournalEntry::new(2, at, set("1")), JournalEntry::new(3, at, set("2"))];
/// assert_eq!(vars(&journal)["n"], 2);
/// ```
pub fn vars<'a>(journal: impl IntoIterator<Item = &'a JournalEntry>) -> BTreeMap<String, serde_json::Value> {
    let mut latest = BTreeMap::new();
    let mut set = |name: &String, value: &RawValue| {
        if let Ok(value) = serde_json::from_str(value.get()) {
            latest.insert(name.clone(), value);
        }
    };
    for entry in journal {
        match &entry.event {
            Event::VarSet { name, value } => set(name, value),
            Event::LoopCheckpoint { vars, .. } => vars.iter().for_each(|(name, value)| set(name, value)),
            _ => {}
        }
    }
    latest
}

/// A run's state: the fold of its journal.
#[derive(Debug, Clone)]
pub struct RunState {
    workflow: String,
    version: u32,
    input: Option<Box<RawValue>>,
    deadline: Option<Timestamp>,
    phase: RunPhase,
    /// Replay looks every step up here (the paths come from workflow code, not from outside).
    steps: FastMap<StepPath, StepRecord>,
    last_seq: u64,
    /// What most journals never hold, made on first use ([`Rare`]): a run in flight keeps its
    /// state for its whole life, thousands at once.
    rare: Option<Box<Rare>>,
}

/// The part of a [`RunState`] that most journals never fill: consumed signals, patches,
/// durable values and loops.
#[derive(Debug, Clone, Default)]
struct Rare {
    consumed_signals: HashSet<SignalId>,
    patches: HashMap<String, bool>,
    /// Each durable value's latest value.
    vars: BTreeMap<String, Box<RawValue>>,
    /// Each durable loop's latest checkpoint.
    loops: HashMap<StepPath, LoopRecord>,
    /// Ranges `(after, through]` where the journal's checkpoints deleted entries: gaps there are
    /// expected.
    trimmed: Vec<(u64, u64)>,
}

/// The [`Rare`] part of a state that has none yet.
static NO_RARE: std::sync::LazyLock<Rare> = std::sync::LazyLock::new(Rare::default);

/// A durable loop as its latest checkpoint left it.
#[derive(Debug, Clone)]
pub struct LoopRecord {
    /// The next iteration to run.
    pub next: u64,
    /// The state carried into it.
    pub state: Box<RawValue>,
    /// The checkpoint's own entry.
    pub seq: u64,
    /// What the loop's checkpoints have trimmed so far (`None`: nothing yet).
    pub trim: Option<Trim>,
    /// The run's durable values as they were at the checkpoint.
    pub vars: BTreeMap<String, Box<RawValue>>,
    /// `(next, seq)` of each of the loop's checkpoints still in the journal, oldest first, this
    /// one last: every entry of the iterations before `next` is before `seq`. A loop resumed
    /// from this record trims its kept iterations by these, as the execution that journaled
    /// them would have.
    pub kept: Vec<(u64, u64)>,
}

impl Default for RunState {
    fn default() -> Self {
        Self::new()
    }
}

impl RunState {
    /// The state before any event.
    pub fn new() -> Self {
        Self {
            workflow: String::new(),
            version: 0,
            input: None,
            deadline: None,
            phase: RunPhase::Active,
            steps: HashMap::default(),
            last_seq: 0,
            rare: None,
        }
    }

    /// Its rare part, as it stands (empty when it has none).
    fn rare(&self) -> &Rare {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }

    /// Its rare part, to change (made on first use).
    fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Folds a whole journal, checking every transition.
    pub fn fold<'a>(entries: impl IntoIterator<Item = &'a JournalEntry>) -> Result<RunState, TransitionError> {
        RunState::fold_owned(entries.into_iter().cloned())
    }

    /// Checks whether `event` may come next, without changing anything.
    pub fn check(&self, seq: u64, event: &Event) -> Result<(), TransitionError> {
        if seq != self.last_seq + 1 && !self.trimmed_between(self.last_seq, seq) {
            return Err(TransitionError::Gap { last: self.last_seq, found: seq });
        }
        if matches!(event, Event::Started { .. }) != (self.last_seq == 0) {
            return Err(TransitionError::StartedMisplaced { seq });
        }
        if self.phase != RunPhase::Active {
            return Err(TransitionError::AfterEnd { seq });
        }
        let conflict = |path: &StepPath, existing: Option<&StepRecord>| TransitionError::StepConflict {
            seq,
            kind: EventKindName::kind_name(event),
            path: path.clone(),
            state: existing.map_or_else(|| "absent".to_owned(), |r| format!("{:?}", r.status)),
        };
        match event {
            Event::StepCompleted { path, ordinal, attempt, .. } | Event::StepFailed { path, ordinal, attempt, .. } => {
                match self.steps.get(path) {
                    None => {}
                    Some(
                        r @ StepRecord {
                            kind: StepKind::Step,
                            status: StepStatus::Retrying { failed_attempts, .. },
                            ..
                        },
                    ) if r.ordinal == *ordinal && *attempt > *failed_attempts => {}
                    existing => return Err(conflict(path, existing)),
                }
            }
            Event::TimerStarted { path, .. } | Event::WaitStarted { path, .. } => {
                if let Some(existing) = self.steps.get(path) {
                    return Err(conflict(path, Some(existing)));
                }
            }
            Event::TimerFired { path } => match self.steps.get(path) {
                Some(StepRecord { status: StepStatus::Sleeping { .. }, .. }) => {}
                existing => return Err(conflict(path, existing)),
            },
            Event::WaitCompleted { path, signal, .. } => {
                match self.steps.get(path) {
                    Some(StepRecord { status: StepStatus::Waiting { .. }, .. }) => {}
                    existing => return Err(conflict(path, existing)),
                }
                if let Some(signal) = signal
                    && self.rare().consumed_signals.contains(signal)
                {
                    return Err(TransitionError::SignalReused { seq, signal: *signal });
                }
            }
            Event::Patched { id, .. } => {
                if self.rare().patches.contains_key(id) {
                    return Err(TransitionError::PatchRepeated { seq, id: id.clone() });
                }
            }
            Event::Started { .. }
            | Event::VarSet { .. }
            | Event::LoopCheckpoint { .. }
            | Event::Completed { .. }
            | Event::Failed { .. }
            | Event::Cancelled { .. }
            | Event::Continued { .. } => {}
        }
        Ok(())
    }

    /// Applies one journal entry after [checking](RunState::check) it.
    pub fn apply(&mut self, entry: &JournalEntry) -> Result<(), TransitionError> {
        self.check(entry.seq, &entry.event)?;
        self.record(entry.clone());
        Ok(())
    }

    /// Applies one journal entry after [checking](RunState::check) it, taking its event instead
    /// of copying what the state keeps of it.
    pub fn apply_owned(&mut self, entry: JournalEntry) -> Result<(), TransitionError> {
        self.check(entry.seq, &entry.event)?;
        self.record(entry);
        Ok(())
    }

    /// Folds a whole journal that the caller no longer needs, checking every transition: as
    /// [`fold`](RunState::fold), without copying payloads and paths.
    ///
    /// ```
    /// use cairn_journal::{Event, JournalEntry, RunState, Timestamp};
    /// use serde_json::value::RawValue;
    /// let input = RawValue::from_string("1".into()).unwrap();
    /// let started = Event::Started { workflow: "w".into(), version: 1, input, deadline: None, reason: None };
    /// let state = RunState::fold_owned(vec![JournalEntry::new(1, Timestamp::from_millis(0), started)]).unwrap();
    /// assert_eq!(state.workflow(), "w");
    /// ```
    pub fn fold_owned(entries: impl IntoIterator<Item = JournalEntry>) -> Result<RunState, TransitionError> {
        let entries: Vec<JournalEntry> = entries.into_iter().collect();
        let mut state = RunState::new();
        state.steps.reserve(entries.len());
        // The ranges trimmed by checkpoints, known before the gaps they left are met.
        for (_, trim) in entries.iter().filter_map(|e| e.event.trim()) {
            state.add_trim(trim.since, trim.through);
        }
        for entry in entries {
            state.apply_owned(entry)?;
        }
        Ok(state)
    }

    /// Records a checked entry.
    fn record(&mut self, JournalEntry { seq, event, .. }: JournalEntry) {
        self.last_seq = seq;
        match event {
            Event::Started { workflow, version, input, deadline, .. } => {
                self.workflow = workflow;
                self.version = version;
                self.input = Some(input);
                self.deadline = deadline;
            }
            Event::StepCompleted { path, ordinal, attempt, output, .. } => {
                self.set_step(path, StepKind::Step, ordinal, StepStatus::Completed { attempt, output });
            }
            Event::StepFailed { path, ordinal, attempt, error, retry_at, .. } => {
                let status = match retry_at {
                    Some(retry_at) => StepStatus::Retrying { failed_attempts: attempt, retry_at, last_error: error },
                    None => StepStatus::Failed { attempts: attempt, error },
                };
                self.set_step(path, StepKind::Step, ordinal, status);
            }
            Event::TimerStarted { path, ordinal, wake_at } => {
                self.set_step(path, StepKind::Sleep, ordinal, StepStatus::Sleeping { wake_at });
            }
            Event::TimerFired { path } => {
                if let Some(record) = self.steps.get_mut(&path) {
                    record.status = StepStatus::Slept;
                }
            }
            Event::WaitStarted { path, ordinal, event, filter, deadline } => {
                self.set_step(
                    path,
                    StepKind::Wait,
                    ordinal,
                    StepStatus::Waiting { event, filter: filter.map(|filter| *filter), deadline },
                );
            }
            Event::WaitCompleted { path, signal, payload } => {
                if let Some(signal) = signal {
                    self.rare_mut().consumed_signals.insert(signal);
                }
                if let Some(record) = self.steps.get_mut(&path) {
                    record.status = StepStatus::Received { signal, payload };
                }
            }
            Event::Patched { id, applied } => {
                self.rare_mut().patches.insert(id, applied);
            }
            Event::LoopCheckpoint { path, next, state, trim, vars } => {
                let trim = trim.map(|trim| *trim);
                if let Some(trim) = trim {
                    self.add_trim(trim.since, trim.through);
                }
                self.rare_mut().vars.extend(vars.iter().map(|(name, value)| (name.clone(), value.clone())));
                match self.rare_mut().loops.entry(path) {
                    std::collections::hash_map::Entry::Occupied(mut entry) => {
                        let record = entry.get_mut();
                        // Earlier checkpoints this one's trim deleted are gone from the journal.
                        let through = trim.map_or(0, |trim| trim.through);
                        record.kept.retain(|&(_, at)| at > through);
                        record.kept.push((next, seq));
                        (record.next, record.state, record.seq, record.trim, record.vars) =
                            (next, state, seq, trim, vars);
                    }
                    std::collections::hash_map::Entry::Vacant(entry) => {
                        entry.insert(LoopRecord { next, state, seq, trim, vars, kept: vec![(next, seq)] });
                    }
                }
            }
            Event::VarSet { name, value } => {
                self.rare_mut().vars.insert(name, value);
            }
            Event::Completed { output } => self.phase = RunPhase::Completed(output),
            Event::Failed { error } => self.phase = RunPhase::Failed(error),
            Event::Cancelled { reason } => self.phase = RunPhase::Cancelled(reason),
            Event::Continued { run, .. } => self.phase = RunPhase::Continued(run),
        }
    }

    fn set_step(&mut self, path: StepPath, kind: StepKind, ordinal: u32, status: StepStatus) {
        self.steps.insert(path, StepRecord { kind, ordinal, status });
    }

    /// The workflow name from the `started` event.
    pub fn workflow(&self) -> &str {
        &self.workflow
    }

    /// The pinned workflow version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The run's input, once started.
    pub fn input(&self) -> Option<&RawValue> {
        self.input.as_deref()
    }

    /// When the run times out, if it has a deadline.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.deadline
    }

    /// Whether the run has ended, and how.
    pub fn phase(&self) -> &RunPhase {
        &self.phase
    }

    /// The last sequence number applied (0 before any event).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// One step by path.
    pub fn step(&self, path: &StepPath) -> Option<&StepRecord> {
        self.steps.get(path)
    }

    /// All steps, in no particular order.
    pub fn steps(&self) -> impl Iterator<Item = (&StepPath, &StepRecord)> {
        self.steps.iter()
    }

    /// The patch markers decided so far: id → whether the run takes the patched branch.
    pub fn patches(&self) -> &HashMap<String, bool> {
        &self.rare().patches
    }

    /// Notes that entries in `after + 1 ..= through` may be missing, merged with a range that
    /// starts at the same place (a loop's later checkpoint extends its range).
    fn add_trim(&mut self, after: u64, through: u64) {
        match self.rare_mut().trimmed.iter_mut().find(|(a, _)| *a == after) {
            Some((_, t)) => *t = (*t).max(through),
            None => self.rare_mut().trimmed.push((after, through)),
        }
    }

    /// Whether every entry strictly between `last` and `next` lies in a trimmed range.
    fn trimmed_between(&self, last: u64, next: u64) -> bool {
        let mut covered = last;
        // Ranges may come in any order; extend the covered prefix until nothing extends it.
        loop {
            let reach =
                self.rare().trimmed.iter().filter(|(a, t)| *a <= covered && *t > covered).map(|(_, t)| *t).max();
            match reach {
                Some(through) => covered = through,
                None => return covered + 1 >= next,
            }
        }
    }

    /// The durable loop at `path` as its latest checkpoint left it.
    pub fn loop_record(&self, path: &StepPath) -> Option<&LoopRecord> {
        self.rare().loops.get(path)
    }

    /// Each durable value's latest value, by name.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.rare().vars.iter().map(|(name, value)| (name.as_str(), value.as_ref()))
    }

    /// Whether a signal has been consumed by this run.
    pub fn has_consumed(&self, signal: SignalId) -> bool {
        self.rare().consumed_signals.contains(&signal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }
    fn p(s: &str) -> StepPath {
        StepPath::parse(s).unwrap()
    }
    fn started() -> Event {
        Event::Started { workflow: "w".into(), version: 1, input: raw("null"), deadline: None, reason: None }
    }
    fn fold(events: Vec<Event>) -> Result<RunState, TransitionError> {
        let entries: Vec<_> = events
            .into_iter()
            .enumerate()
            .map(|(i, e)| JournalEntry::new(i as u64 + 1, Timestamp::from_millis(i as i64), e))
            .collect();
        RunState::fold(&entries)
    }
    fn completed(path: &str, attempt: u32) -> Event {
        Event::StepCompleted { path: p(path), ordinal: 0, attempt, output: raw("1"), started_at: None }
    }
    fn failed(path: &str, attempt: u32, retry: Option<i64>) -> Event {
        Event::StepFailed {
            path: p(path),
            ordinal: 0,
            attempt,
            error: "boom".into(),
            retry_at: retry.map(Timestamp::from_millis),
            started_at: None,
        }
    }

    #[test]
    fn first_event_must_be_started() {
        assert!(matches!(fold(vec![completed("a", 1)]), Err(TransitionError::StartedMisplaced { seq: 1 })));
        assert!(matches!(fold(vec![started(), started()]), Err(TransitionError::StartedMisplaced { seq: 2 })));
    }

    #[test]
    fn gaps_are_refused() {
        let mut s = fold(vec![started()]).unwrap();
        let e = JournalEntry::new(3, Timestamp::from_millis(0), completed("a", 1));
        assert_eq!(s.apply(&e), Err(TransitionError::Gap { last: 1, found: 3 }));
    }

    #[test]
    fn step_completes_once() {
        assert!(fold(vec![started(), completed("a", 1)]).is_ok());
        assert!(matches!(
            fold(vec![started(), completed("a", 1), completed("a", 2)]),
            Err(TransitionError::StepConflict { seq: 3, .. })
        ));
    }

    #[test]
    fn retries_count_up_then_complete_or_fail() {
        let s = fold(vec![started(), failed("a", 1, Some(10)), failed("a", 2, Some(20)), completed("a", 3)]).unwrap();
        assert!(matches!(s.step(&p("a")).unwrap().status, StepStatus::Completed { attempt: 3, .. }));
        let s = fold(vec![started(), failed("a", 1, Some(10)), failed("a", 2, None)]).unwrap();
        assert!(matches!(s.step(&p("a")).unwrap().status, StepStatus::Failed { attempts: 2, .. }));
        // An attempt number may not go backwards, and a failed-for-good step takes nothing more.
        assert!(fold(vec![started(), failed("a", 2, Some(10)), failed("a", 1, Some(20))]).is_err());
        assert!(fold(vec![started(), failed("a", 1, None), completed("a", 2)]).is_err());
    }

    #[test]
    fn retry_must_keep_its_ordinal() {
        let moved = Event::StepCompleted { path: p("a"), ordinal: 1, attempt: 2, output: raw("1"), started_at: None };
        assert!(fold(vec![started(), failed("a", 1, Some(5)), moved]).is_err());
    }

    #[test]
    fn timers_start_then_fire() {
        let start = Event::TimerStarted { path: p("t"), ordinal: 0, wake_at: Timestamp::from_millis(9) };
        let fire = Event::TimerFired { path: p("t") };
        assert!(fold(vec![started(), start.clone(), fire.clone()]).is_ok());
        assert!(fold(vec![started(), fire.clone()]).is_err());
        assert!(fold(vec![started(), start.clone(), fire.clone(), fire]).is_err());
        assert!(fold(vec![started(), start.clone(), start]).is_err());
    }

    #[test]
    fn waits_consume_a_signal_once() {
        let wait = |path: &str| Event::WaitStarted {
            path: p(path),
            ordinal: 0,
            event: "go".into(),
            filter: None,
            deadline: None,
        };
        let got = |path: &str, id: i64| Event::WaitCompleted {
            path: p(path),
            signal: Some(SignalId(id)),
            payload: Some(raw("{}")),
        };
        let s = fold(vec![started(), wait("w1"), got("w1", 7)]).unwrap();
        assert!(s.has_consumed(SignalId(7)));
        assert!(matches!(
            fold(vec![started(), wait("w1"), got("w1", 7), wait("w2"), got("w2", 7)]),
            Err(TransitionError::SignalReused { .. })
        ));
        assert!(fold(vec![started(), got("w1", 1)]).is_err());
        let timeout = Event::WaitCompleted { path: p("w1"), signal: None, payload: None };
        assert!(fold(vec![started(), wait("w1"), timeout]).is_ok());
    }

    #[test]
    fn nothing_follows_the_end() {
        for end in [
            Event::Completed { output: raw("1") },
            Event::Failed { error: "x".into() },
            Event::Cancelled { reason: "y".into() },
            Event::Continued { run: "r~1".into(), input: raw("2") },
        ] {
            let s = fold(vec![started(), end.clone()]).unwrap();
            assert_ne!(s.phase(), &RunPhase::Active);
            assert!(matches!(fold(vec![started(), end, completed("a", 1)]), Err(TransitionError::AfterEnd { seq: 3 })));
        }
    }

    #[test]
    fn a_patch_is_decided_once() {
        let patch = |applied| Event::Patched { id: "fix".into(), applied };
        let s = fold(vec![started(), patch(false), completed("a", 1)]).unwrap();
        assert_eq!(s.patches().get("fix"), Some(&false));
        assert!(matches!(
            fold(vec![started(), patch(true), patch(true)]),
            Err(TransitionError::PatchRepeated { seq: 3, .. })
        ));
    }

    #[test]
    fn vars_keep_their_latest_value() {
        let set = |name: &str, value: &str| Event::VarSet {
            name: name.into(),
            value: RawValue::from_string(value.into()).unwrap(),
        };
        let s = fold(vec![started(), set("n", "1"), completed("a", 1), set("n", "2"), set("label", r#""x""#)]).unwrap();
        let vars: Vec<(&str, &str)> = s.vars().map(|(name, value)| (name, value.get())).collect();
        assert_eq!(vars, [("label", r#""x""#), ("n", "2")]);
        assert!(s.step(&p("a")).is_some(), "a set takes no step's place");
        let mut ended = fold(vec![started(), Event::Failed { error: "no".into() }]).unwrap();
        let late = JournalEntry::new(3, Timestamp::from_millis(0), set("n", "3"));
        assert!(matches!(ended.apply(&late), Err(TransitionError::AfterEnd { seq: 3 })));
    }

    /// A step `before`, then a loop of `n` iterations of one step each, beside a step `side` between iterations 1
    /// and 2, checkpointed after every iteration and trimmed to the last `keep`, as the engine
    /// writes it; then the store's deletions.
    fn trimmed_loop(n: u64, keep: u64) -> (Vec<JournalEntry>, Vec<JournalEntry>) {
        let mut events = vec![started(), completed("before", 1)];
        let since = events.len() as u64;
        let mut ends = vec![since; n as usize + 1];
        let mut trimmed_through = since;
        for i in 0..n {
            events.push(completed(&format!("tick[{i}]/work"), 1));
            if i == 1 {
                events.push(completed("side", 1));
            }
            ends[i as usize + 1] = events.len() as u64;
            let cutoff = (i + 1).saturating_sub(keep);
            let through = ends[cutoff as usize];
            let trim = (through > since).then_some(Trim { since, after: trimmed_through, through });
            trimmed_through = trimmed_through.max(through);
            events.push(Event::LoopCheckpoint {
                path: p("tick"),
                next: i + 1,
                state: raw(&(i + 1).to_string()),
                trim: trim.map(Box::new),
                vars: Default::default(),
            });
        }
        let whole: Vec<JournalEntry> = events
            .into_iter()
            .enumerate()
            .map(|(i, e)| JournalEntry::new(i as u64 + 1, Timestamp::from_millis(0), e))
            .collect();
        let mut kept = whole.clone();
        Trim::apply_all(&mut kept);
        (whole, kept)
    }

    #[test]
    fn trimmed_loops_fold_with_their_gaps_and_only_those() {
        let (whole, kept) = trimmed_loop(50, 3);
        for journal in [&whole, &kept] {
            let state = RunState::fold(journal).unwrap();
            let record = state.loop_record(&p("tick")).unwrap();
            assert_eq!((record.next, record.state.get(), record.seq), (50, "50", whole.len() as u64));
            assert!(state.step(&p("side")).is_some(), "entries outside the loop are kept");
            assert!(state.step(&p("tick[49]/work")).is_some() && state.step(&p("tick[47]/work")).is_some());
        }
        // Started, before, side, and the last three iterations with the checkpoints around each.
        assert_eq!(kept.len(), 10, "{kept:?}");
        assert!(RunState::fold(&kept).unwrap().step(&p("tick[10]/work")).is_none());
        // A gap no checkpoint declares is still refused.
        let mut broken = kept.clone();
        broken.retain(|e| !matches!(&e.event, Event::StepCompleted { path, .. } if path.as_str() == "before"));
        assert!(matches!(RunState::fold(&broken), Err(TransitionError::Gap { .. })));
        let mut broken = kept;
        broken.remove(broken.len() - 2);
        assert!(matches!(RunState::fold(&broken), Err(TransitionError::Gap { .. })));
    }

    #[test]
    fn kinds_cannot_be_mixed_on_one_path() {
        let start = Event::TimerStarted { path: p("a"), ordinal: 0, wake_at: Timestamp::from_millis(9) };
        assert!(fold(vec![started(), start, completed("a", 1)]).is_err());
    }
}
