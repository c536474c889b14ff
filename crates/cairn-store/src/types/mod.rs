//! The types stores take and give back, by concern: runs (`run`), pages and counts (`lists`),
//! flow control (`flow`), workers and subscriptions (`workers`), the changes callers ask for
//! (`writes`), schedules (`schedules`); and the errors a store answers with (here).

use cairn_journal::flow::{WaitingFor, debounce_until, debounce_wake};
use cairn_journal::{Event, SignalId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;
use std::time::Duration;

mod flow;
mod lists;
mod run;
mod schedules;
mod workers;
mod writes;

pub use flow::*;
pub use lists::*;
pub use run::*;
pub use schedules::*;
pub use workers::*;
pub use writes::*;

/// Everything a store can refuse or fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The appender's lease epoch is stale: another worker claimed the run.
    #[error("[CAIRN-E0201] lease lost on run `{run_id}`: epoch {held} is stale (now {current}); this worker must stop")]
    Fenced {
        /// The run.
        run_id: RunId,
        /// Epoch the appender held.
        held: u64,
        /// Epoch in the store.
        current: u64,
    },
    /// The journal does not end where the appender thought.
    #[error("journal of run `{run_id}` ends at #{actual}, not #{expected}")]
    SequenceConflict {
        /// The run.
        run_id: RunId,
        /// What the appender expected.
        expected: u64,
        /// What the store holds.
        actual: u64,
    },
    /// A signal was consumed already or belongs to another run.
    #[error("signal {0:?} is not available to consume")]
    SignalUnavailable(SignalId),
    /// No such run.
    #[error("[CAIRN-E0301] no run with id `{0}`")]
    RunNotFound(RunId),
    /// The id is taken.
    #[error("[CAIRN-E0302] a run with id `{0}` already exists")]
    DuplicateRunId(RunId),
    /// The run has ended.
    #[error("[CAIRN-E0303] run `{run_id}` has already ended ({status})")]
    RunFinished {
        /// The run.
        run_id: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// The run is not paused, so it cannot be resumed.
    #[error("[CAIRN-E0305] run `{run_id}` is not paused (it is {status})")]
    NotPaused {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// No schedule has that name.
    #[error("[CAIRN-E0310] no schedule named `{0}`")]
    ScheduleNotFound(String),
    /// The request itself was malformed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Stored data could not be read back.
    #[error("corrupt data in store: {0}")]
    Corrupt(String),
    /// The backend failed (IO, SQL, closed).
    #[error("store backend error: {0}")]
    Backend(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_is_held_when_its_workflows_have_exactly_its_subscriptions() {
        let sub = |workflow: &str, pattern: &str| Subscription {
            workflow: workflow.into(),
            pattern: pattern.into(),
            version: 1,
        };
        let declared = SetSubscriptions {
            workflows: vec!["a".into(), "b".into()],
            subscriptions: vec![sub("a", "x.*"), sub("a", "y")],
        };
        // Other workflows' subscriptions do not matter; order does not either.
        assert!(declared.is_held_by(&[sub("c", "z"), sub("a", "y"), sub("a", "x.*")]));
        assert!(!declared.is_held_by(&[sub("a", "x.*")]), "one missing");
        assert!(!declared.is_held_by(&[sub("a", "x.*"), sub("a", "y"), sub("b", "old")]), "one to drop");
        assert!(
            !declared.is_held_by(&[sub("a", "x.*"), Subscription { version: 2, ..sub("a", "y") }]),
            "another version"
        );
        assert!(SetSubscriptions { workflows: vec!["a".into()], subscriptions: vec![] }.is_held_by(&[sub("b", "q")]));
    }
}
