//! Sleeps and waits for signals: [`Ctx::sleep`], [`Ctx::sleep_until`], [`Ctx::wait_for_event`].

use super::context::{Ctx, decode};
use crate::error::WorkflowError;
use crate::run_core::Begun;
use cairn_journal::{Event, StepKind, StepPath, StepStatus, Timestamp};
use cairn_store::SuspendReason;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

/// Which signals a wait accepts besides the name: all, or those whose payload contains a JSON value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventFilter(Option<serde_json::Value>);

impl EventFilter {
    /// Any payload.
    pub fn any() -> Self {
        Self(None)
    }

    /// Payloads that contain `value` (JSON containment, as PostgreSQL's `@>`).
    pub fn matching(value: serde_json::Value) -> Self {
        Self(Some(value))
    }
}

impl Ctx {
    /// A durable sleep: the deadline is journaled; a long sleep holds no memory or task.
    pub fn sleep(
        &self,
        name: &str,
        duration: Duration,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send + 'static {
        let begun = self.begin(name, StepKind::Sleep);
        let deadline = self.shared.now() + duration;
        self.sleep_inner(begun, deadline)
    }

    /// A durable sleep until an instant.
    pub fn sleep_until(
        &self,
        name: &str,
        deadline: Timestamp,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send + 'static {
        let begun = self.begin(name, StepKind::Sleep);
        self.sleep_inner(begun, deadline)
    }

    fn sleep_inner(
        &self,
        begun: Result<(StepPath, Begun), WorkflowError>,
        deadline: Timestamp,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        let span = self.wait_span(&begun, "sleep");
        async move {
            let (path, Begun { ordinal, record }) = begun?;
            let wake_at = match record.map(|r| r.status) {
                Some(StepStatus::Slept) => return Ok(()),
                Some(StepStatus::Sleeping { wake_at }) => wake_at,
                _ => {
                    shared
                        .append(vec![Event::TimerStarted { path: path.clone(), ordinal, wake_at: deadline }], None)
                        .await?;
                    deadline
                }
            };
            shared.park(Some(wake_at), SuspendReason::Sleeping, None).await?;
            shared.append(vec![Event::TimerFired { path }], None).await
        }
        .instrument(span)
    }

    /// The span of the sleep or wait `begun` (`kind`), or none when the journal holds it over.
    fn wait_span(&self, begun: &Result<(StepPath, Begun), WorkflowError>, kind: &'static str) -> tracing::Span {
        match begun {
            Ok((path, Begun { record, .. }))
                if !record
                    .as_ref()
                    .is_some_and(|r| matches!(r.status, StepStatus::Slept | StepStatus::Received { .. })) =>
            {
                crate::telemetry::wait_span(&self.shared.workflow, &self.shared.id, path, kind)
            }
            _ => tracing::Span::none(),
        }
    }

    /// Waits for a signal named `name` whose payload matches `filter`, consuming the oldest such
    /// signal exactly once (signals sent before the wait are buffered). Returns `None` when
    /// `timeout` passes first.
    pub fn wait_for_event<T: DeserializeOwned + Send + 'static>(
        &self,
        name: &str,
        filter: EventFilter,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, WorkflowError>> + Send + 'static {
        self.wait_for_event_as(name, name, filter, timeout)
    }

    /// [`wait_for_event`](Ctx::wait_for_event) for signal `event` as the step named `step`, so
    /// one scope can wait for the same signal more than once.
    ///
    /// ```no_run
    /// # use cairn::prelude::*;
    /// # use std::time::Duration;
    /// async fn two_approvals(ctx: Ctx, (): ()) -> Result<(String, String), WorkflowError> {
    ///     let day = Duration::from_secs(86_400);
    ///     let first = ctx.wait_for_event_as("first-approval", "approve", EventFilter::any(), day).await?;
    ///     let second = ctx.wait_for_event_as("second-approval", "approve", EventFilter::any(), day).await?;
    ///     Ok((first.unwrap_or_default(), second.unwrap_or_default()))
    /// }
    /// ```
    pub fn wait_for_event_as<T: DeserializeOwned + Send + 'static>(
        &self,
        step: &str,
        event: &str,
        filter: EventFilter,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, WorkflowError>> + Send + 'static {
        let begun = self.begin(step, StepKind::Wait);
        let deadline = self.shared.now() + timeout;
        let shared = Arc::clone(&self.shared);
        let event = event.to_owned();
        let span = self.wait_span(&begun, "wait");
        async move {
            let (path, Begun { ordinal, record }) = begun?;
            let (event, filter, deadline) = match record.map(|r| r.status) {
                Some(StepStatus::Received { payload, .. }) => {
                    return payload.map(|p| decode(&path, p.get())).transpose();
                }
                Some(StepStatus::Waiting { event, filter, deadline }) => (event, filter, deadline),
                _ => {
                    let EventFilter(filter) = filter;
                    shared
                        .append(
                            vec![Event::WaitStarted {
                                path: path.clone(),
                                ordinal,
                                event: event.clone(),
                                filter: filter.clone().map(Box::new),
                                deadline: Some(deadline),
                            }],
                            None,
                        )
                        .await?;
                    (event, filter, Some(deadline))
                }
            };
            loop {
                // Taken before looking, so a signal arriving after the look wakes the park below.
                let changes = shared.watch_signals();
                let just_loaded = shared.load_signals().await?;
                let mut signal = shared.lock().take_signal(&event, filter.as_ref());
                if signal.is_none() && !just_loaded {
                    // Not among the signals known here: another process may have sent it.
                    shared.refresh_signals().await?;
                    signal = shared.lock().take_signal(&event, filter.as_ref());
                }
                if let Some(signal) = signal {
                    crate::telemetry::signal(&shared.workflow, &signal.name);
                    let span = crate::telemetry::signal_span(&shared.workflow, &shared.id, &signal.name, signal.id.0);
                    let value = decode(&path, signal.payload.get());
                    shared
                        .append(
                            vec![Event::WaitCompleted { path, signal: Some(signal.id), payload: Some(signal.payload) }],
                            Some(signal.id),
                        )
                        .instrument(span)
                        .await?;
                    return value.map(Some);
                }
                if deadline.is_some_and(|d| d <= shared.now()) {
                    shared.append(vec![Event::WaitCompleted { path, signal: None, payload: None }], None).await?;
                    return Ok(None);
                }
                shared.park(deadline, SuspendReason::Waiting, Some(changes)).await?;
            }
        }
        .instrument(span)
    }
}
