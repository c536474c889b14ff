//! Each step of a run over time, read off its journal: when it began and ended, every attempt of
//! a step body with its error, how long a sleep or a wait lasted and how it ended. What
//! `GET …/steps` lists and a dashboard draws as bars.

use crate::event::{Event, JournalEntry, StepKind};
use crate::path::StepPath;
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::HashMap;

/// Where a step stands, as the journal tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A step body failed and is due again at its `retry_at`.
    Retrying,
    /// A step body succeeded.
    Completed,
    /// A step body failed for good.
    Failed,
    /// A sleep that has not ended.
    Sleeping,
    /// A sleep that ended.
    Slept,
    /// A wait for a signal that has not ended.
    Waiting,
    /// A wait that got its signal.
    Received,
    /// A wait whose deadline passed first.
    TimedOut,
    /// A step, sleep or wait the run ended before (cancelled, failed or continued as a new
    /// run): it ended with the run.
    Abandoned,
}

impl Phase {
    /// The snake_case name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Retrying => "retrying",
            Phase::Completed => "completed",
            Phase::Failed => "failed",
            Phase::Sleeping => "sleeping",
            Phase::Slept => "slept",
            Phase::Waiting => "waiting",
            Phase::Received => "received",
            Phase::TimedOut => "timed_out",
            Phase::Abandoned => "abandoned",
        }
    }
}

/// One attempt of a step body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// Its number, from 1.
    pub attempt: u32,
    /// When it began (journals written before step timings: when it ended).
    pub started_at: Timestamp,
    /// When its result was committed.
    pub ended_at: Timestamp,
    /// Its error, if it failed.
    pub error: Option<String>,
    /// When the next attempt was due, if it failed and was to be retried.
    pub retry_at: Option<Timestamp>,
}

/// One step's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepTiming {
    /// Its path.
    pub path: StepPath,
    /// What it is.
    pub kind: StepKind,
    /// Where it stands.
    pub phase: Phase,
    /// When it began: its first attempt, or when the sleep or wait was journaled.
    pub started_at: Timestamp,
    /// When it ended, once it has.
    pub ended_at: Option<Timestamp>,
    /// A step body's attempts, in order (empty for sleeps and waits).
    pub attempts: Vec<Attempt>,
    /// A sleep's end, or a wait's deadline.
    pub until: Option<Timestamp>,
    /// The signal a wait asks for.
    pub event: Option<String>,
}

/// Every step of the journal `entries` (in journal order), in the order each first appears.
/// Once the journal says the run ended, no step stays open: those that had not ended are
/// [`Abandoned`](Phase::Abandoned) when the run ended.
///
/// ```
/// use cairn_journal::{Event, JournalEntry, StepPath, Timestamp, timeline};
/// let at = Timestamp::from_millis;
/// let path = StepPath::parse("charge").unwrap();
/// let raw = |s: &str| serde_json::value::RawValue::from_string(s.into()).unwrap();
/// let entries = vec![
///     JournalEntry { seq: 1, at: at(10), event: Event::StepFailed { path: path.clone(), ordinal: 0, attempt: 1,
///         error: "declined".into(), retry_at: Some(at(50)), started_at: Some(at(5)) } },
///     JournalEntry { seq: 2, at: at(70), event: Event::StepCompleted { path: path.clone(), ordinal: 0, attempt: 2,
///         output: raw("1"), started_at: Some(at(60)) } },
/// ];
/// let steps = timeline::steps(&entries);
/// assert_eq!(steps[0].attempts.len(), 2);
/// assert_eq!((steps[0].started_at, steps[0].ended_at), (at(5), Some(at(70))));
/// ```
pub fn steps(entries: &[JournalEntry]) -> Vec<StepTiming> {
    let mut order: Vec<StepTiming> = Vec::new();
    let mut index: HashMap<&StepPath, usize> = HashMap::new();
    for entry in entries {
        let at = entry.at;
        if entry.event.is_terminal() {
            for step in order.iter_mut().filter(|step| step.ended_at.is_none()) {
                step.phase = Phase::Abandoned;
                step.ended_at = Some(at);
            }
            continue;
        }
        // A loop's checkpoint carries the loop's path but is no step.
        let Some(path) = entry.event.path().filter(|_| !matches!(entry.event, Event::LoopCheckpoint { .. })) else {
            continue;
        };
        let slot = *index.entry(path).or_insert_with(|| {
            let (kind, until, event) = match &entry.event {
                Event::TimerStarted { wake_at, .. } => (StepKind::Sleep, Some(*wake_at), None),
                Event::WaitStarted { event, deadline, .. } => (StepKind::Wait, *deadline, Some(event.clone())),
                _ => (StepKind::Step, None, None),
            };
            let phase = match kind {
                StepKind::Sleep => Phase::Sleeping,
                StepKind::Wait => Phase::Waiting,
                StepKind::Step => Phase::Retrying,
            };
            let started_at = match &entry.event {
                Event::StepCompleted { started_at, .. } | Event::StepFailed { started_at, .. } => {
                    started_at.unwrap_or(at)
                }
                _ => at,
            };
            order.push(StepTiming {
                path: path.clone(),
                kind,
                phase,
                started_at,
                ended_at: None,
                attempts: Vec::new(),
                until,
                event,
            });
            order.len() - 1
        });
        let step = &mut order[slot];
        match &entry.event {
            Event::StepCompleted { attempt, started_at, .. } => {
                let started_at = started_at.unwrap_or(at);
                step.attempts.push(Attempt {
                    attempt: *attempt,
                    started_at,
                    ended_at: at,
                    error: None,
                    retry_at: None,
                });
                step.phase = Phase::Completed;
                step.ended_at = Some(at);
            }
            Event::StepFailed { attempt, error, retry_at, started_at, .. } => {
                let started_at = started_at.unwrap_or(at);
                let error = Some(error.clone());
                step.attempts.push(Attempt { attempt: *attempt, started_at, ended_at: at, error, retry_at: *retry_at });
                if retry_at.is_none() {
                    step.phase = Phase::Failed;
                    step.ended_at = Some(at);
                }
            }
            Event::TimerFired { .. } => {
                step.phase = Phase::Slept;
                step.ended_at = Some(at);
            }
            Event::WaitCompleted { signal, .. } => {
                step.phase = if signal.is_some() { Phase::Received } else { Phase::TimedOut };
                step.ended_at = Some(at);
            }
            _ => {}
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SignalId;
    use serde_json::value::RawValue;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    fn p(s: &str) -> StepPath {
        StepPath::parse(s).unwrap()
    }

    fn entry(seq: u64, ms: i64, event: Event) -> JournalEntry {
        JournalEntry { seq, at: at(ms), event }
    }

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn an_ended_run_leaves_no_step_open() {
        let wait =
            Event::WaitStarted { path: p("ok"), ordinal: 1, event: "approve".into(), filter: None, deadline: None };
        let failed = Event::StepFailed {
            path: p("a"),
            ordinal: 0,
            attempt: 1,
            error: "boom".into(),
            retry_at: Some(at(900)),
            started_at: Some(at(4)),
        };
        let journal = vec![
            entry(
                1,
                0,
                Event::Started { workflow: "w".into(), version: 1, input: raw("null"), deadline: None, reason: None },
            ),
            entry(2, 10, failed),
            entry(3, 12, Event::TimerStarted { path: p("nap"), ordinal: 2, wake_at: at(100) }),
            entry(4, 13, Event::TimerFired { path: p("nap") }),
            entry(5, 20, wait),
            entry(6, 30, Event::Cancelled { reason: "no longer needed".into() }),
        ];
        let ended = steps(&journal);
        let phases: Vec<_> = ended.iter().map(|s| (s.path.to_string(), s.phase, s.ended_at)).collect();
        assert_eq!(
            phases,
            [
                ("a".to_owned(), Phase::Abandoned, Some(at(30))),
                ("nap".to_owned(), Phase::Slept, Some(at(13))),
                ("ok".to_owned(), Phase::Abandoned, Some(at(30))),
            ]
        );
        // While the run goes on, the same steps are open.
        let open = steps(&journal[..5]);
        assert_eq!((open[0].phase, open[2].phase, open[2].ended_at), (Phase::Retrying, Phase::Waiting, None));
    }

    #[test]
    fn steps_sleeps_and_waits_in_first_appearance_order() {
        let journal = vec![
            entry(
                1,
                0,
                Event::Started { workflow: "w".into(), version: 1, input: raw("null"), deadline: None, reason: None },
            ),
            entry(
                2,
                10,
                Event::StepFailed {
                    path: p("a"),
                    ordinal: 0,
                    attempt: 1,
                    error: "boom".into(),
                    retry_at: Some(at(40)),
                    started_at: Some(at(4)),
                },
            ),
            entry(3, 12, Event::TimerStarted { path: p("nap"), ordinal: 1, wake_at: at(100) }),
            entry(
                4,
                13,
                Event::WaitStarted {
                    path: p("ok"),
                    ordinal: 2,
                    event: "approve".into(),
                    filter: None,
                    deadline: Some(at(500)),
                },
            ),
            entry(
                5,
                45,
                Event::StepFailed {
                    path: p("a"),
                    ordinal: 0,
                    attempt: 2,
                    error: "again".into(),
                    retry_at: None,
                    started_at: Some(at(41)),
                },
            ),
            entry(6, 101, Event::TimerFired { path: p("nap") }),
            entry(7, 120, Event::WaitCompleted { path: p("ok"), signal: Some(SignalId(3)), payload: Some(raw("1")) }),
            // An old journal's completion without a start time, and a wait open when the run ends.
            entry(
                8,
                130,
                Event::StepCompleted { path: p("old"), ordinal: 3, attempt: 1, output: raw("2"), started_at: None },
            ),
            entry(
                9,
                140,
                Event::WaitStarted {
                    path: p("again"),
                    ordinal: 4,
                    event: "approve".into(),
                    filter: None,
                    deadline: Some(at(200)),
                },
            ),
            entry(10, 200, Event::Completed { output: raw("null") }),
        ];
        let steps = steps(&journal);
        let paths: Vec<String> = steps.iter().map(|s| s.path.to_string()).collect();
        assert_eq!(paths, ["a", "nap", "ok", "old", "again"]);

        let a = &steps[0];
        assert_eq!((a.kind, a.phase, a.started_at, a.ended_at), (StepKind::Step, Phase::Failed, at(4), Some(at(45))));
        assert_eq!(a.attempts.len(), 2);
        assert_eq!(
            a.attempts[0],
            Attempt {
                attempt: 1,
                started_at: at(4),
                ended_at: at(10),
                error: Some("boom".into()),
                retry_at: Some(at(40))
            }
        );
        assert_eq!((a.attempts[1].attempt, a.attempts[1].retry_at), (2, None));

        let nap = &steps[1];
        assert_eq!(
            (nap.kind, nap.phase, nap.started_at, nap.ended_at, nap.until),
            (StepKind::Sleep, Phase::Slept, at(12), Some(at(101)), Some(at(100)))
        );
        assert!(nap.attempts.is_empty());

        let ok = &steps[2];
        assert_eq!(
            (ok.kind, ok.phase, ok.ended_at, ok.event.as_deref()),
            (StepKind::Wait, Phase::Received, Some(at(120)), Some("approve"))
        );

        let old = &steps[3];
        assert_eq!((old.phase, old.started_at, old.ended_at), (Phase::Completed, at(130), Some(at(130))));

        // The run ended while it waited: the wait ended with it.
        let again = &steps[4];
        assert_eq!((again.phase, again.ended_at, again.until), (Phase::Abandoned, Some(at(200)), Some(at(200))));
    }

    #[test]
    fn a_step_still_retrying_and_a_wait_that_timed_out() {
        let journal = vec![
            entry(
                1,
                5,
                Event::StepFailed {
                    path: p("x"),
                    ordinal: 0,
                    attempt: 1,
                    error: "e".into(),
                    retry_at: Some(at(9)),
                    started_at: Some(at(1)),
                },
            ),
            entry(
                2,
                6,
                Event::WaitStarted { path: p("w"), ordinal: 1, event: "e".into(), filter: None, deadline: Some(at(8)) },
            ),
            entry(3, 8, Event::WaitCompleted { path: p("w"), signal: None, payload: None }),
        ];
        let steps = steps(&journal);
        assert_eq!((steps[0].phase, steps[0].ended_at), (Phase::Retrying, None));
        for phase in [steps[0].phase, steps[1].phase] {
            assert_eq!(serde_json::to_value(phase).unwrap(), phase.as_str(), "as_str is the serialized name");
        }
        assert_eq!((steps[1].phase, steps[1].ended_at), (Phase::TimedOut, Some(at(8))));
    }
}
