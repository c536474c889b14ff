//! The run lifecycle as one table: which [`Phase`] each [`Operation`] leaves a run in, or why it
//! is refused. The row functions of [`lifecycle`](super) decide their refusals and their outcome
//! from it; the model-based test in `cairn-store-conformance` checks that every backend's rows
//! move as it says, records each (phase, operation) pair its sequences reach, and a test fails if
//! an allowed pair is never reached (after Temporal's `transition_coverage.rs`).
//!
//! ```
//! use cairn_store::lifecycle::{Operation, Phase, Refusal, next};
//! assert_eq!(next(Phase::Paused, Operation::Resume), Ok(Phase::Pending));
//! assert_eq!(next(Phase::Held, Operation::Cancel), Ok(Phase::Held)); // its worker ends it
//! assert_eq!(next(Phase::Suspended, Operation::Cancel), Ok(Phase::Ended));
//! assert_eq!(next(Phase::Ended, Operation::Signal), Err(Refusal::Ended));
//! assert_eq!(next(Phase::Running, Operation::Resume), Err(Refusal::NotPaused));
//! ```

use crate::types::{RunRecord, RunStatus};
use cairn_journal::Timestamp;

/// Where a run stands, as its transitions see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Pending: ready to claim, or waiting for a concurrency slot or a debounce window.
    Pending,
    /// Running under a lease still live: its worker holds it.
    Held,
    /// Running under a lease that ran out: its worker may still append, and a claim recovers it.
    Running,
    /// Suspended until a time or a signal.
    Suspended,
    /// Paused, by a request or parked by an error.
    Paused,
    /// Ended: completed, failed, cancelled or continued as a new run.
    Ended,
}

impl Phase {
    /// Every phase.
    pub const ALL: [Phase; 6] =
        [Phase::Pending, Phase::Held, Phase::Running, Phase::Suspended, Phase::Paused, Phase::Ended];

    /// The phase of `run` when leases are judged at `lease_now`.
    pub fn of(run: &RunRecord, lease_now: Timestamp) -> Phase {
        match run.status {
            RunStatus::Pending => Phase::Pending,
            RunStatus::Running if run.is_held_at(lease_now) => Phase::Held,
            RunStatus::Running => Phase::Running,
            RunStatus::Suspended => Phase::Suspended,
            RunStatus::Paused => Phase::Paused,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled | RunStatus::Continued => Phase::Ended,
        }
    }
}

/// What is done to a run: by a worker (a claim, its holder's heartbeats and appends) or by anyone
/// (a signal, a cancel, a pause, a resume).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// A worker takes it (a run already held is never taken).
    Claim,
    /// Its holder renews its lease.
    Heartbeat,
    /// Its holder journals a step.
    Progress,
    /// Its holder suspends it (a sleep, a wait, a backoff).
    Suspend,
    /// Its holder ends it (completed or failed).
    Finish,
    /// Its holder continues it as a new run.
    Continue,
    /// Its holder gives it back (a shutdown).
    Release,
    /// Its holder parks it (non-determinism, a panic, poison, a requested pause).
    Park,
    /// A signal is sent to it.
    Signal,
    /// It is cancelled.
    Cancel,
    /// It is paused.
    Pause,
    /// It is resumed.
    Resume,
    /// A claim finds it due but with no concurrency slot: it goes back to wait for one.
    Requeue,
}

impl Operation {
    /// Every operation.
    pub const ALL: [Operation; 13] = [
        Operation::Claim,
        Operation::Heartbeat,
        Operation::Progress,
        Operation::Suspend,
        Operation::Finish,
        Operation::Continue,
        Operation::Release,
        Operation::Park,
        Operation::Signal,
        Operation::Cancel,
        Operation::Pause,
        Operation::Resume,
        Operation::Requeue,
    ];

    /// Whether only the run's holder does it (its appends and heartbeats, fenced by its epoch:
    /// a holder whose run was taken over is refused whatever the phase says).
    pub fn by_holder(self) -> bool {
        matches!(
            self,
            Operation::Heartbeat
                | Operation::Progress
                | Operation::Suspend
                | Operation::Finish
                | Operation::Continue
                | Operation::Release
                | Operation::Park
        )
    }
}

/// Why an operation does not apply to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Refusal {
    /// The run has ended (`StoreError::RunFinished`).
    Ended,
    /// A resume of a run that is not paused (`StoreError::NotPaused`).
    NotPaused,
    /// No worker runs it: there is no holder to append or heartbeat (`StoreError::Fenced`, or a
    /// heartbeat's lease reported lost).
    NotRunning,
    /// A claim never takes it (or requeues it): it is held, paused or ended.
    NotClaimable,
}

/// What `operation` does to a run in phase `from`: the phase it leaves it in, or why it is
/// refused (and nothing changes).
pub fn next(from: Phase, operation: Operation) -> Result<Phase, Refusal> {
    use Operation as O;
    use Phase as P;
    match (from, operation) {
        (P::Pending | P::Running | P::Suspended, O::Claim) => Ok(P::Held),
        (P::Suspended, O::Requeue) => Ok(P::Pending),
        (_, O::Claim | O::Requeue) => Err(Refusal::NotClaimable),
        // A holder whose lease ran out unnoticed may still append; a heartbeat renews it.
        (P::Held | P::Running, O::Heartbeat) => Ok(P::Held),
        (P::Held | P::Running, O::Progress) => Ok(from),
        (P::Held | P::Running, O::Suspend) => Ok(P::Suspended),
        (P::Held | P::Running, O::Finish | O::Continue) => Ok(P::Ended),
        (P::Held | P::Running, O::Release) => Ok(P::Pending),
        (P::Held | P::Running, O::Park) => Ok(P::Paused),
        (_, O::Heartbeat | O::Progress | O::Suspend | O::Finish | O::Continue | O::Release | O::Park) => {
            Err(Refusal::NotRunning)
        }
        (P::Ended, O::Signal | O::Cancel | O::Pause | O::Resume) => Err(Refusal::Ended),
        (_, O::Signal) => Ok(from),
        // A held run's worker ends or parks it, told by its next heartbeat (or at once in its
        // own process); any other is cancelled or paused at once.
        (P::Held, O::Cancel | O::Pause) => Ok(P::Held),
        (_, O::Cancel) => Ok(P::Ended),
        (_, O::Pause) => Ok(P::Paused),
        (P::Paused, O::Resume) => Ok(P::Pending),
        (_, O::Resume) => Err(Refusal::NotPaused),
    }
}

/// Every pair the table allows: what the model-based test must reach.
pub fn allowed() -> Vec<(Phase, Operation)> {
    let pairs = Phase::ALL.into_iter().flat_map(|phase| Operation::ALL.into_iter().map(move |op| (phase, op)));
    pairs.filter(|(phase, op)| next(*phase, *op).is_ok()).collect()
}
