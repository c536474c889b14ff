//! The types stores take and give back, by concern: runs (`run`), pages and counts (`lists`),
//! flow control (`flow`), workers and subscriptions (`workers`), the changes callers ask for
//! (`writes`), schedules (`schedules`), published events (`events`); and the errors a store answers with (here).

mod events;
mod flow;
mod lists;
mod names;
mod new_run;
mod record;
mod run;
mod schedules;
mod workers;
mod writes;

pub use events::{EventCursor, EventPage, EventQuery, EventRecord, EventRun};
pub use flow::{ConcurrencyRule, RunConcurrency, TakeRate};
pub use lists::{PageCursor, RunFilter, RunPage, VersionCount, WorkflowCount};
pub use names::{EventId, EventName, IdempotencyKey, NameError, Reason, ScheduleName, WorkflowName};
pub use new_run::{CreatedRun, Debounce, NewRun};
pub use record::{Request, RunRare, RunRecord};
pub use run::{Cause, ErrorKind, RunId, RunStatus, StoreError, SuspendReason, WorkflowKey};
pub use schedules::{FireSchedule, PauseSchedule, PutSchedule, ScheduleRecord};
pub use workers::{ForgetWorkers, ServedWorkflow, SetSubscriptions, Subscription, WorkerRecord};
pub use writes::{
    Append, CancelOutcome, ClaimRequest, ControlRequest, HeartbeatRequest, LeaseStatus, NewSignal, PauseOutcome,
    PruneRequest, ResumeRequest, RunUpdate, SignalRecord, StartSignal,
};
