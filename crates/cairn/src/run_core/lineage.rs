//! A run's place among runs: its chain of continuations (`order-7`, `order-7~1`, …), what its
//! successor and children inherit (parent, retention, queue), and how a parent recognises the
//! children it waits for.

use crate::error::WorkflowError;
use cairn_journal::{Event, Timestamp};
use cairn_store::{NewRun, RunId, RunRecord, RunUpdate, WorkflowName};
use serde_json::value::RawValue;
use std::sync::Arc;

/// The signal a child's end sends its parent (payload `{"child": id}`), which wakes the wait.
pub(crate) const CHILD_ENDED: &str = "~child-ended";

/// Where a payload error about a continued run's input points.
pub(crate) const CONTINUED_INPUT: &str = "input of the continued run";

/// The scope of each child a run waits for (`~child[n]`).
pub(crate) const AWAITED: &str = "~child";
/// The scope of each child a run starts and does not wait for (`~spawn[n]`).
pub(crate) const DETACHED: &str = "~spawn";

/// The child a journal entry says its run started and waits for: the output of the `start` step
/// of an `~child[n]` scope.
pub(crate) fn awaited(event: &cairn_journal::Event) -> Option<RunId> {
    match event {
        cairn_journal::Event::StepCompleted { path, output, .. }
            if path.name() == "start" && path.parent().name().strip_prefix(AWAITED)?.starts_with('[') =>
        {
            serde_json::from_str(output.get()).ok()
        }
        _ => None,
    }
}

/// What a run's successor inherits when the run continues as new (and its children, their
/// priority and fairness key).
#[derive(Debug, Clone, Default)]
pub struct Lineage {
    /// The run's parent, if it is a child.
    pub parent: Option<RunId>,
    /// How long it is kept once ended.
    pub retention: Option<std::time::Duration>,
    /// Whether it continues another run (its id is then `{first}~{n}`).
    pub continues: bool,
    /// Its priority and fairness key.
    pub(crate) queue: Queue,
}

/// Where a run queues for a worker: its priority and its fairness key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Queue {
    /// Higher is claimed first.
    pub(crate) priority: i32,
    /// Served fairly against other keys within its priority.
    pub(crate) fairness_key: Option<String>,
}

impl Queue {
    /// Where `run` queues.
    pub(crate) fn of(run: &RunRecord) -> Queue {
        Queue { priority: run.priority, fairness_key: run.fairness_key.clone() }
    }

    /// Gives `run` this place in the queue.
    pub(crate) fn apply(&self, run: &mut NewRun) {
        (run.priority, run.fairness_key) = (self.priority, self.fairness_key.clone());
    }
}

impl Lineage {
    /// The lineage recorded on a run's row.
    pub fn of(run: &RunRecord) -> Lineage {
        Lineage {
            parent: run.rare().parent.clone(),
            retention: run.retention,
            continues: run.rare().continued_from.is_some(),
            queue: Queue::of(run),
        }
    }
}

/// The first run of `id`'s chain of continuations, and how many hand-overs led to `id`: run
/// `order-7` continues as `order-7~1`, which continues as `order-7~2`, and so on.
///
/// Only a run that `continues` another has a generation; any other id (even one ending in `~3`)
/// is the first of its chain.
pub(crate) fn chain_position(id: &RunId, continues: bool) -> (&str, u64) {
    let id = id.as_str();
    if continues
        && let Some((first, n)) = id.rsplit_once('~')
        && let Ok(n) = n.parse::<u64>()
    {
        return (first, n);
    }
    (id, 0)
}

/// The first run of the chain of continuations of run `id` (which `continues` another or not):
/// the child a parent waits for, whichever run of the chain ends.
pub(crate) fn first_of_chain(id: &RunId, continues: bool) -> RunId {
    RunId::new(chain_position(id, continues).0)
}

/// The id of the run that `id` continues as.
pub(crate) fn successor_id(id: &RunId, continues: bool) -> RunId {
    let (first, n) = chain_position(id, continues);
    RunId::new(format!("{first}~{}", n + 1))
}

/// A registered workflow's check of an input (for a run that continues as new).
pub type InputCheck = Arc<dyn Fn(&RawValue) -> Result<(), String> + Send + Sync>;

/// The hand-over of run `id` of `workflow` (which `lineage` describes, with `deadline`) to the
/// run it continues as, with `input`, at `now`: version `version` of the workflow (the newest
/// this worker registers; `None`: it registers none), whose input check `check_input` is.
pub(crate) fn successor(
    (id, workflow): (&RunId, &WorkflowName),
    lineage: &Lineage,
    deadline: Option<Timestamp>,
    (input, max_payload_bytes): (String, usize),
    (version, check_input): (Option<u32>, Option<&InputCheck>),
    now: Timestamp,
) -> Result<(Vec<Event>, RunUpdate), WorkflowError> {
    let payload = |message: String| WorkflowError::Payload { path: CONTINUED_INPUT.into(), message };
    if input.len() > max_payload_bytes {
        return Err(WorkflowError::PayloadTooLarge {
            path: CONTINUED_INPUT.into(),
            size: input.len(),
            limit: max_payload_bytes,
        });
    }
    let input = RawValue::from_string(input).map_err(|e| payload(e.to_string()))?;
    let version = version.ok_or_else(|| payload("the workflow is not registered".into()))?;
    if let Some(check) = check_input {
        check(&input).map_err(payload)?;
    }
    let successor = successor_id(id, lineage.continues);
    let mut run = NewRun::new(successor.clone(), workflow.clone(), version, input.clone(), now);
    run.deadline = deadline;
    run.retention = lineage.retention;
    run.parent = lineage.parent.clone();
    run.continued_from = Some(id.clone());
    lineage.queue.apply(&mut run);
    let events = vec![Event::Continued { run: successor.to_string(), input }];
    Ok((events, RunUpdate::Continue { successor: Box::new(run), at: now }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successors_number_the_chain_from_its_first_run() {
        let next = |id: &str, continues| successor_id(&RunId::new(id), continues).to_string();
        assert_eq!(next("meter", false), "meter~1");
        assert_eq!(next("meter~1", true), "meter~2");
        assert_eq!(next("meter~9", true), "meter~10");
        // Only a run that continues another has a generation in its id.
        assert_eq!(next("job~3", false), "job~3~1");
        assert_eq!(next("a~b", true), "a~b~1");
        assert_eq!(chain_position(&RunId::new("p:~child[0]~2"), true), ("p:~child[0]", 2));
    }
}
