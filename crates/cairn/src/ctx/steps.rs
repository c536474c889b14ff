//! Steps: [`Ctx::step`], its retries and timeouts, and how one attempt runs and is journaled.

use super::context::{Ctx, decode};
use crate::error::{StepError, WorkflowError};
use crate::run_core::{AttemptEnd, Begun, end_attempt};
use cairn_journal::{Event, RetryPolicy, StepKind, StepPath, StepStatus, Timestamp};
use cairn_store::SuspendReason;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::cell::Cell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tracing::Instrument as _;

type Running<'a, T> = Pin<Box<dyn Future<Output = Result<T, WorkflowError>> + Send + 'a>>;

/// A durable step being configured; await it to run it. Made by [`Ctx::step`].
#[must_use = "a step does nothing until awaited"]
pub struct Step<'a, T, F> {
    /// Moved into the running future when the step starts.
    ctx: Option<Ctx>,
    begun: Option<Result<(StepPath, Begun), WorkflowError>>,
    body: Option<Box<F>>,
    policy: RetryPolicy,
    timeout: Option<Duration>,
    running: Option<Running<'a, T>>,
    _output: PhantomData<fn() -> T>,
}

impl<T, F> Step<'_, T, F> {
    /// The context the step was made in and its name (for a saga's compensation next to it).
    /// `None` when the step cannot run (awaiting it returns why).
    pub(crate) fn place(&self) -> Option<(Ctx, String)> {
        match &self.begun {
            Some(Ok((path, _))) => Some((self.ctx.clone()?, path.name().to_owned())),
            _ => None,
        }
    }

    /// How failed attempts are retried (default: [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Fails an attempt (retryably) that runs longer than `limit`.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }
}

impl<'a, T, F, Fut, E> Future for Step<'a, T, F>
where
    T: Serialize + DeserializeOwned + Send + 'a,
    F: FnMut() -> Fut + Send + 'a,
    Fut: Future<Output = Result<T, E>> + Send + 'a,
    E: Into<StepError> + 'a,
{
    type Output = Result<T, WorkflowError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.running.is_none() {
            let begun = this.begun.take().unwrap_or_else(|| Err(WorkflowError::failed("step polled after completion")));
            let (path, Begun { ordinal, record }) = match begun {
                Ok(begun) => begun,
                Err(error) => return Poll::Ready(Err(error)),
            };
            // A step the journal holds as settled (replay) returns at once, without the future
            // that runs, retries and journals a body; one backing off resumes at its next attempt.
            let retry = match record.map(|r| r.status) {
                Some(StepStatus::Completed { output, .. }) => return Poll::Ready(decode(&path, output.get())),
                Some(StepStatus::Failed { attempts, error }) => {
                    return Poll::Ready(Err(WorkflowError::StepFailed { path, attempts, message: error }));
                }
                Some(StepStatus::Retrying { failed_attempts, retry_at, .. }) => Some((failed_attempts + 1, retry_at)),
                _ => None,
            };
            let body = this.body.take();
            let Some(ctx) = this.ctx.take() else {
                return Poll::Ready(Err(WorkflowError::failed("step polled after completion")));
            };
            let policy = this.policy.clone();
            let timeout = this.timeout;
            this.running = Some(Box::pin(run_step(ctx, (path, ordinal, retry), body, policy, timeout)));
        }
        match this.running.as_mut() {
            Some(running) => running.as_mut().poll(cx),
            None => Poll::Pending,
        }
    }
}

/// Runs a step's body until an attempt succeeds or the step fails for good, journaling each
/// attempt. `retry` is the attempt to resume at and when, for a step the journal holds as backing
/// off; without it, attempt 1 runs now.
async fn run_step<T, F, Fut, E>(
    ctx: Ctx,
    (path, ordinal, retry): (StepPath, u32, Option<(u32, Timestamp)>),
    body: Option<Box<F>>,
    policy: RetryPolicy,
    timeout: Option<Duration>,
) -> Result<T, WorkflowError>
where
    T: Serialize + DeserializeOwned,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Into<StepError>,
{
    let shared = &ctx.shared;
    let mut attempt = 1;
    if let Some((next, retry_at)) = retry {
        attempt = next;
        shared.park(Some(retry_at), SuspendReason::BackingOff, None).await?;
    }
    let mut body = body.ok_or_else(|| WorkflowError::failed("step body missing"))?;
    loop {
        shared.lock().admit()?;
        // Each attempt waits for its turn under a rate limit on its name, before it counts as
        // work in flight (so the run can suspend while it waits); it starts when granted.
        let started_at = if shared.rate_limited() { shared.turn(Some(&path)).await? } else { shared.now() };
        let in_flight = shared.start_work();
        let deadline = timeout.map(|t| started_at + t);
        // Ends when dropped: after the attempt's result is journaled.
        let span = crate::telemetry::step_span(&shared.workflow, &shared.id, &path, attempt);
        let attempt_result: Result<T, StepError> = tokio::select! {
            biased;
            () = shared.stop.cancelled() => return Err(shared.lock().interrupted()),
            result = with_attempt(attempt, attempt_of(&mut body)).instrument(span.clone()) => result,
            () = async {
                match deadline {
                    Some(at) => shared.clock().sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => Err(StepError::retryable(format!("timed out after {:?}", timeout.unwrap_or_default()))),
        };
        let now = shared.now();
        let end = end_attempt(&shared.id, &path, attempt, attempt_result.as_ref().map(|_| ()), &policy, now);
        crate::telemetry::step_attempt(&shared.workflow, &path, started_at.until(now), end != AttemptEnd::Completed);
        let error = match attempt_result {
            Ok(value) => {
                let output = shared.encode(path.as_str(), &value)?;
                span.record("status", "completed");
                let completed =
                    vec![Event::StepCompleted { path, ordinal, attempt, output, started_at: Some(started_at) }];
                shared.append_at(completed, None, now, ctx.batched).instrument(span).await?;
                drop(in_flight);
                return Ok(value);
            }
            Err(error) => error,
        };
        let retry_at = match end {
            AttemptEnd::RetryAt(at) => Some(at),
            AttemptEnd::Completed | AttemptEnd::Failed => None,
        };
        span.record("status", if retry_at.is_some() { "retrying" } else { "failed" });
        let failed = Event::StepFailed {
            path: path.clone(),
            ordinal,
            attempt,
            error: error.message().to_owned(),
            retry_at,
            started_at: Some(started_at),
        };
        shared.append(vec![failed], None).instrument(span).await?;
        drop(in_flight);
        match retry_at {
            None => return Err(WorkflowError::StepFailed { path, attempts: attempt, message: error.message().into() }),
            Some(at) => {
                shared.park(Some(at), SuspendReason::BackingOff, None).await?;
                attempt += 1;
            }
        }
    }
}

thread_local! {
    /// The attempt of the step body this thread is polling, while it polls it.
    static ATTEMPT: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Polls `body` with `attempt` as [`step_attempt`]'s answer. A thread-local set around each
/// poll, not a `tokio::task_local!` scope: the same answer for the body and what it awaits, for
/// about a tenth of the instructions (a scope's poll was 115 of a W1 step's).
async fn with_attempt<F: Future>(attempt: u32, body: F) -> F::Output {
    /// Puts back the attempt the thread had before the poll, on return or unwind.
    struct Restore(Option<u32>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ATTEMPT.set(self.0);
        }
    }
    let mut body = std::pin::pin!(body);
    std::future::poll_fn(|cx| {
        let _restore = Restore(ATTEMPT.replace(Some(attempt)));
        body.as_mut().poll(cx)
    })
    .await
}

/// The attempt of the step body this code runs in: 1 for its first, then counted across
/// retries, and across restarts of the worker too (the journal holds the attempts before).
/// `None` outside a step body, and in tasks a body spawns.
///
/// A body can use it to behave differently on a retry, or to report which attempt did the work,
/// without keeping a counter of its own (one in process memory starts from zero after a restart).
///
/// ```no_run
/// # use cairn::{Ctx, StepError, WorkflowError};
/// async fn charge(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
///     ctx.step("charge", || async {
///         let attempt = cairn::step_attempt().unwrap_or(1);
///         if attempt < 3 { Err(StepError::retryable("the card service is down")) } else { Ok(attempt) }
///     })
///     .await
/// }
/// ```
pub fn step_attempt() -> Option<u32> {
    ATTEMPT.get()
}

/// One attempt of a step body; a panic in it is a failed (retryable) attempt.
async fn attempt_of<T, F, Fut, E>(body: &mut F) -> Result<T, StepError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Into<StepError>,
{
    let panicked = |message: String| StepError::retryable(format!("[CAIRN-E0107] the step body panicked: {message}"));
    match crate::panic::catch_call(body) {
        Ok(attempt) => match crate::panic::caught(attempt).await {
            Ok(result) => result.map_err(Into::into),
            Err(message) => Err(panicked(message)),
        },
        Err(message) => Err(panicked(message)),
    }
}

impl Ctx {
    /// A durable step: runs `body` and journals its result; on replay returns the journaled
    /// result without calling `body`.
    ///
    /// The step's place in the run is taken when `step` is called, so steps created together
    /// (e.g. collected for `join_all`) replay correctly whatever order they finish in. Chain
    /// [`retry`](Step::retry) and [`timeout`](Step::timeout) before awaiting.
    pub fn step<'a, T, F, Fut, E>(&self, name: &str, body: F) -> Step<'a, T, F>
    where
        T: Serialize + DeserializeOwned + Send + 'a,
        F: FnMut() -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, E>> + Send + 'a,
        E: Into<StepError> + 'a,
    {
        Step {
            ctx: Some(self.clone()),
            begun: Some(self.begin(name, StepKind::Step)),
            body: Some(Box::new(body)),
            policy: self.shared.step_defaults().retry.clone().unwrap_or_default(),
            timeout: self.shared.step_defaults().timeout,
            running: None,
            _output: PhantomData,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_body_knows_its_attempt_across_awaits_and_nothing_else_does() {
        let seen = with_attempt(3, async {
            let before = step_attempt();
            tokio::task::yield_now().await;
            let spawned = tokio::spawn(async { step_attempt() }).await.unwrap();
            let nested = with_attempt(4, async { step_attempt() }).await;
            (before, step_attempt(), spawned, nested, step_attempt())
        })
        .await;
        assert_eq!(seen, (Some(3), Some(3), None, Some(4), Some(3)));
        assert_eq!(step_attempt(), None, "outside the body");
        let panicked = crate::panic::caught(with_attempt(5, async { panic!("in the body") })).await;
        assert!(panicked.is_err());
        assert_eq!(step_attempt(), None, "put back after a panic");
    }
}
