//! The pure core of Cairn: what a run's journal holds and what it means.
//!
//! Nothing here does IO, spawns tasks or reads a clock. Every state change of a run is an immutable
//! [`Event`] appended to the run's journal with a dense sequence number; the run's state is a
//! [`fold`](RunState::fold) over those events, checked by explicit transition rules. The
//! [`ReplayCursor`] compares what a workflow body asks for with what the journal holds and reports
//! a [`NonDeterminism`] error when they differ.
//!
//! ```
//! use cairn_journal::{Event, JournalEntry, RunState, StepPath, Timestamp, RunPhase};
//! use serde_json::value::RawValue;
//!
//! let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
//! let path = StepPath::root().child("charge").unwrap();
//! let journal = vec![
//!     JournalEntry::new(1, Timestamp::from_millis(0), Event::Started {
//!         workflow: "order".into(), version: 1, input: raw("{}"), deadline: None, reason: None,
//!     }),
//!     JournalEntry::new(2, Timestamp::from_millis(5), Event::StepCompleted {
//!         path: path.clone(), ordinal: 0, attempt: 1, output: raw("42"), started_at: None,
//!     }),
//! ];
//! let state = RunState::fold(&journal).unwrap();
//! assert_eq!(state.phase(), &RunPhase::Active);
//! assert_eq!(state.step(&path).unwrap().completed_output().unwrap().get(), "42");
//! ```

mod event;
mod filter;
pub mod flow;
mod maps;
mod path;
mod payload;
mod replay;
mod retry;
mod state;
mod time;
pub mod timeline;
pub mod topic;

pub use event::{Event, EventKindName, JournalEntry, SignalId, StepKind, Trim};
pub use filter::json_contains;
pub use maps::{FastMap, FastSet};
pub use path::{PathError, StepPath};
pub use payload::{MAX_NESTING, MAX_NUMBER_CHARS, PayloadFault, check_payload};
pub use replay::{CursorError, NonDeterminism, ReplayCursor, Replayed};
pub use retry::{Backoff, RetryPolicy};
pub use state::{LoopRecord, RunPhase, RunState, StepRecord, StepStatus, TransitionError, vars};
pub use time::Timestamp;
