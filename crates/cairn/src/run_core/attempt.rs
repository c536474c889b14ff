//! What an attempt of a step comes to: a pure decision from its outcome, its retry policy and
//! the time, which the driver carries out (journal it, then return, back off or fail).

use crate::error::StepError;
use cairn_journal::{RetryPolicy, StepPath, Timestamp};
use cairn_store::RunId;

/// What an attempt comes to. The driver journals the attempt (`step_completed`, or
/// `step_failed` with the retry time if any) before it acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// The step completed: it returns its output.
    Completed,
    /// The attempt failed and the policy allows another: it runs at this time (the run may
    /// suspend until then).
    RetryAt(Timestamp),
    /// The step failed for good: its error was terminal, or no attempt is left.
    Failed,
}

/// What `attempt` of step `path` of run `run` comes to at `now`: completed (`Ok`), or after
/// `error`, another attempt at a time from the retry `policy` (its jitter seeded by the run, the
/// step and the attempt, so a replay computes the same time) or a failure for good.
///
/// ```
/// use cairn::run_core::{AttemptEnd, end_attempt};
/// use cairn::{RetryPolicy, RunId, StepError, StepPath, Timestamp};
/// use std::time::Duration;
/// let (run, path, now) = (RunId::new("r"), StepPath::parse("charge").unwrap(), Timestamp::from_millis(10));
/// let policy = RetryPolicy::exponential().attempts(3).base(Duration::from_secs(1));
/// let down = StepError::retryable("card service down");
/// assert!(matches!(end_attempt(&run, &path, 1, Err(&down), &policy, now), AttemptEnd::RetryAt(_)));
/// assert_eq!(end_attempt(&run, &path, 3, Err(&down), &policy, now), AttemptEnd::Failed);
/// let declined = StepError::terminal("card declined");
/// assert_eq!(end_attempt(&run, &path, 1, Err(&declined), &policy, now), AttemptEnd::Failed);
/// assert_eq!(end_attempt(&run, &path, 1, Ok(()), &policy, now), AttemptEnd::Completed);
/// ```
pub fn end_attempt(
    run: &RunId,
    path: &StepPath,
    attempt: u32,
    outcome: Result<(), &StepError>,
    policy: &RetryPolicy,
    now: Timestamp,
) -> AttemptEnd {
    let Err(error) = outcome else { return AttemptEnd::Completed };
    if !error.is_retryable() {
        return AttemptEnd::Failed;
    }
    let seed = RetryPolicy::seed((run.as_str(), path.as_str(), attempt));
    match policy.delay_after(attempt, seed) {
        Some(delay) => AttemptEnd::RetryAt(now + delay),
        None => AttemptEnd::Failed,
    }
}
