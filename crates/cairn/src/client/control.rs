//! Steering runs: signal, cancel (with the children a run waits for), pause, resume, restart,
//! prune and sweep.

use super::handle::{Client, DEFAULT_RETENTION};
use super::start::{RunHandle, check_signal_name};
use crate::clock::wall_now;
use crate::error::ClientError;
use crate::op_error::{ControlError, RestartError, SignalError};
use crate::run_core::{CANCELLED_BY_REQUEST, CHILD_ENDED, PAUSED_BY_REQUEST, Queue, awaited, first_of_chain};
use cairn_journal::{SignalId, StepPath};
use cairn_store::{
    CancelOutcome, ControlRequest, NewRun, NewSignal, PauseOutcome, PruneRequest, Reason, Request, ResumeRequest,
    RunFilter, RunId, RunRecord, SignalRecord, StoreError,
};
use serde::Serialize;
use serde_json::value::RawValue;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

/// How many times as long as a batch took [`Client::sweep`] pauses before the next.
pub const SWEEP_PAUSE_FACTOR: u32 = 8;

/// Most runs [`Client::prune`] deletes in one store transaction.
pub const PRUNE_BATCH: usize = 1_000;

impl Client {
    /// Delivers a signal. It is kept until a matching wait consumes it, even if the run is not
    /// waiting yet.
    pub async fn signal<P: Serialize + ?Sized>(
        &self,
        id: &RunId,
        name: &str,
        payload: &P,
    ) -> Result<SignalId, SignalError> {
        let payload =
            serde_json::value::to_raw_value(payload).map_err(|e| SignalError::InvalidPayload(e.to_string()))?;
        self.signal_raw(id, name, payload).await
    }

    /// Delivers a signal with a raw JSON payload.
    pub async fn signal_raw(&self, id: &RunId, name: &str, payload: Box<RawValue>) -> Result<SignalId, SignalError> {
        self.check_payload(&payload)?;
        check_signal_name(name)?;
        let sent_at = self.clock.now();
        let signal_id = self
            .store
            .send_signal(NewSignal { run_id: id.clone(), name: name.to_owned(), payload: payload.clone(), sent_at })
            .await?;
        if let Some(local) = &self.local {
            local.deliver(
                id,
                SignalRecord { id: signal_id, name: name.to_owned(), payload, sent_at, consumed_seq: None },
            );
            local.wake_claimer();
        }
        Ok(signal_id)
    }

    /// Cancels a run. A run no worker holds is cancelled at once; a running one is stopped by
    /// its worker, whose step code sees its cancellation token fire. The children it waits for
    /// ([`Ctx::child`](crate::ctx::Ctx::child), not detached ones) are cancelled too, and theirs. A
    /// run that continued as new: the newest run of its chain is the one cancelled.
    ///
    /// [`because`](Cancel::because) gives a reason (a [`Reason`]: 1 to 1,000 characters), which
    /// the run's `cancelled` event journals and its error shows, as do its awaited children's.
    /// A reason that breaks its rule is refused ([`ControlError::InvalidName`]) and nothing is
    /// cancelled.
    ///
    /// ```no_run
    /// # async fn example(client: cairn::Client, id: cairn::store::RunId) -> Result<(), cairn::ControlError> {
    /// client.cancel(&id).await?;
    /// client.cancel(&id).because("the customer called it off").await?;
    /// # Ok(()) }
    /// ```
    pub fn cancel<'a>(&'a self, id: &'a RunId) -> Cancel<'a> {
        Cancel { client: self, id, reason: None }
    }

    async fn cancel_tree(&self, id: &RunId, reason: &str) -> Result<CancelOutcome, ControlError> {
        let id = &self.newest_of::<ControlError>(id).await?.id;
        let outcome = self.cancel_one(id, reason).await?;
        let mut parents = vec![id.clone()];
        while let Some(parent) = parents.pop() {
            for child in self.awaited_children(&parent).await? {
                match self.cancel_one(&child, reason).await {
                    Ok(_) | Err(ControlError::RunFinished { .. }) => parents.push(child),
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(outcome)
    }

    /// The unended children `id` started to wait for (read from its journal: the `start` steps
    /// of its `~child[n]` scopes), with the runs their chains continued as.
    async fn awaited_children(&self, id: &RunId) -> Result<Vec<RunId>, StoreError> {
        let children = self.every_run(RunFilter { parent: Some(id.clone()), ..RunFilter::default() }).await?;
        let unended: Vec<RunRecord> = children.into_iter().filter(|r| !r.status.is_terminal()).collect();
        if unended.is_empty() {
            return Ok(Vec::new());
        }
        let awaited: Vec<RunId> =
            self.store.read_journal(id).await?.iter().filter_map(|entry| awaited(&entry.event)).collect();
        let awaits =
            |child: &RunRecord| awaited.contains(&first_of_chain(&child.id, child.rare().continued_from.is_some()));
        Ok(unended.into_iter().filter(awaits).map(|r| r.id).collect())
    }

    /// Wakes `parent`, which may wait for its child `child` to end.
    pub(crate) async fn child_ended(&self, parent: &RunId, child: &RunId) {
        let payload = serde_json::json!({ "child": child.as_str() });
        match self.signal(parent, CHILD_ENDED, &payload).await {
            Ok(_) | Err(SignalError::RunFinished { .. } | SignalError::RunNotFound(_)) => {}
            // The parent looks at its child again within the hour anyway.
            Err(error) => tracing::warn!("run {child} ended but could not wake its parent {parent}: {error}"),
        }
    }

    async fn cancel_one(&self, id: &RunId, reason: &str) -> Result<CancelOutcome, ControlError> {
        let outcome = self.store.cancel(self.control(id, reason)).await?;
        if let Some(local) = &self.local {
            match outcome {
                CancelOutcome::Requested => {
                    local.request(id, &Request::Cancel { reason: reason.to_owned() });
                }
                CancelOutcome::Cancelled => local.notify_watchers(id, None),
            }
        }
        if outcome == CancelOutcome::Cancelled
            && let Ok(Some(run)) = self.store.get_run(id).await
        {
            let lasted = run.created_at.until(run.completed_at.unwrap_or(run.updated_at));
            crate::telemetry::run_ended(&run.workflow, run.status, lasted);
            if let Some(parent) = &run.rare().parent {
                self.child_ended(parent, &first_of_chain(id, run.rare().continued_from.is_some())).await;
            }
        }
        Ok(outcome)
    }

    /// Starts a new run that restarts run `id` from step `from`: same workflow, version and
    /// input, and the original's journal up to (not including) the first entry of `from` (a step
    /// path, or a scope: the first entry of any step under it). Steps before that point are not
    /// executed again; `from` and everything after it are. The new run (a new id) records the
    /// original in `restarted_from`, and listing with
    /// [`RunFilter::restarted_from`](cairn_store::RunFilter::restarted_from) finds the restarts of
    /// a run. A run with a deadline gets one as far from the restart as the original's was from
    /// its start. Only a run that has ended (completed, failed or cancelled) can be restarted;
    /// a `from` its journal does not hold is refused ([`RestartError::UnknownStep`]) and nothing
    /// is created.
    ///
    /// [`because`](Restart::because) gives a reason (a [`Reason`]: 1 to 1,000 characters), which
    /// the new run's `started` event journals. A reason that breaks its rule is refused
    /// ([`RestartError::InvalidName`]) and nothing is created.
    pub fn restart<'a>(&'a self, id: &'a RunId, from: &'a str) -> Restart<'a> {
        Restart { client: self, id, from, reason: None }
    }

    async fn restart_from(&self, id: &RunId, from: &str, reason: Option<&str>) -> Result<RunHandle, RestartError> {
        let original = self.run_of::<RestartError>(id).await?;
        if !original.status.is_terminal() {
            return Err(RestartError::NotEnded { run_id: id.clone(), status: original.status });
        }
        let unknown = || RestartError::UnknownStep { run_id: id.clone(), path: from.to_owned() };
        let from_path = StepPath::parse(from).map_err(|_| unknown())?;
        if from_path.is_root() {
            return Err(unknown());
        }
        let journal = self.store.read_journal(id).await?;
        let at =
            journal.iter().position(|e| e.event.path().is_some_and(|p| p.is_within(&from_path))).ok_or_else(unknown)?;
        let now = self.clock.now();
        let mut run = NewRun::new(
            RunId::new(uuid::Uuid::now_v7().to_string()),
            original.workflow.clone(),
            original.version,
            original.input.clone(),
            now,
        );
        run.prefix = journal[1..at].iter().map(|e| e.event.clone()).collect();
        run.restarted_from = Some(id.clone());
        run.reason = reason.map(str::to_owned);
        run.retention = original.retention;
        Queue::of(&original).apply(&mut run);
        run.deadline = original.rare().deadline.map(|deadline| now + original.created_at.until(deadline));
        Ok(self.create(run).await?)
    }

    /// Deletes ended runs (completed, failed, cancelled) past their retention, with their
    /// journals and signals, in batches of [`PRUNE_BATCH`] runs per transaction; with
    /// `older_than`, also every ended run that ended longer ago than that. An engine's
    /// [maximum retention](crate::engine::EngineBuilder::max_retention) applies too. Returns the ids
    /// deleted; with `dry_run`, the ids it would delete, deleting nothing. Runs that have not
    /// ended are never deleted. Engines do this by themselves every
    /// [sweep interval](crate::engine::EngineBuilder::sweep_every).
    pub async fn prune(&self, older_than: Option<Duration>, dry_run: bool) -> Result<Vec<RunId>, ClientError> {
        self.prune_batches(older_than, dry_run, 0, &mut |_| {}).await
    }

    /// [`prune`](Client::prune), calling `deleted` with the size of each batch as it is
    /// committed (for a progress report).
    pub async fn prune_reporting(
        &self,
        older_than: Option<Duration>,
        dry_run: bool,
        deleted: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Vec<RunId>, ClientError> {
        self.prune_batches(older_than, dry_run, 0, deleted).await
    }

    /// What an engine's sweeper does every [sweep interval](crate::engine::EngineBuilder::sweep_every):
    /// [`prune`](Client::prune) of runs past their retention, pausing after each full batch
    /// [`SWEEP_PAUSE_FACTOR`] times as long as the batch took, so a large backlog takes at most
    /// a ninth of the store's time (on SQLite, of its one writer) from the runs executing
    /// meanwhile. Returns the ids deleted.
    pub async fn sweep(&self) -> Result<Vec<RunId>, ClientError> {
        self.prune_batches(None, false, SWEEP_PAUSE_FACTOR, &mut |_| {}).await
    }

    /// Prunes in batches of [`PRUNE_BATCH`], pausing `pause_factor` times each full batch's
    /// duration before the next.
    async fn prune_batches(
        &self,
        older_than: Option<Duration>,
        dry_run: bool,
        pause_factor: u32,
        report: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Vec<RunId>, ClientError> {
        let now = self.clock.now();
        let max = self.local.as_ref().and_then(|l| l.max_retention());
        let ended_before = [older_than, max].into_iter().flatten().min().map(|keep| now - keep);
        // Published events are kept as long as a run is by default, or less by either limit.
        let events_before =
            [older_than, max, Some(DEFAULT_RETENTION)].into_iter().flatten().min().map(|keep| now - keep);
        let limit = if dry_run { usize::MAX / 2 } else { PRUNE_BATCH };
        let mut deleted = Vec::new();
        loop {
            let began = std::time::Instant::now();
            let batch = self.store.prune(PruneRequest { now, ended_before, events_before, limit, dry_run }).await?;
            if !dry_run {
                crate::telemetry::swept(batch.len());
            }
            report(batch.len());
            let full = batch.len() == limit;
            deleted.extend(batch);
            if dry_run || !full {
                return Ok(deleted);
            }
            // Real time, not the engine's clock: this paces the store's work.
            tokio::time::sleep(began.elapsed() * pause_factor).await;
        }
    }

    /// A request to cancel or pause `id` now, for `reason`.
    fn control(&self, id: &RunId, reason: &str) -> ControlRequest {
        ControlRequest { run_id: id.clone(), reason: reason.to_owned(), at: self.clock.now(), lease_now: wall_now() }
    }

    /// Pauses a run: no worker claims it until it is [resumed](Client::resume). A run no worker
    /// holds is paused at once; a running one stops at its next step boundary (steps in flight
    /// finish and are committed, no new step starts), told at once in this process or by its
    /// worker's next heartbeat elsewhere. Pausing a paused run changes nothing.
    pub fn pause<'a>(&'a self, id: &'a RunId) -> Pause<'a> {
        Pause { client: self, id, reason: None }
    }

    async fn pause_now(&self, id: &RunId, reason: &str) -> Result<PauseOutcome, ControlError> {
        let outcome = self.store.pause(self.control(id, reason)).await?;
        if let Some(local) = &self.local {
            match outcome {
                PauseOutcome::Requested => {
                    local.request(id, &Request::Pause { reason: reason.to_owned() });
                }
                PauseOutcome::Paused => local.notify_watchers(id, None),
            }
        }
        Ok(outcome)
    }

    /// Releases a paused run: paused by [`Client::pause`], or parked by an error (a
    /// non-determinism, a panicking body, poison) once fixed code is deployed. Any worker that
    /// serves its version replays it from its journal; if the code still does not match, it is
    /// parked again with the same error. A run that is not paused is refused
    /// ([`ControlError::NotPaused`]) and nothing changes.
    pub async fn resume(&self, id: &RunId) -> Result<(), ControlError> {
        self.store.resume(ResumeRequest { run_id: id.clone(), at: self.clock.now() }).await?;
        if let Some(local) = &self.local {
            local.wake_claimer();
        }
        Ok(())
    }
}

/// A cancel of one run ([`Client::cancel`]): await it, optionally [`because`](Self::because) a
/// reason first.
#[must_use = "a cancel does nothing until awaited"]
pub struct Cancel<'a> {
    client: &'a Client,
    id: &'a RunId,
    reason: Option<String>,
}

/// `because` and `reason` on a request that may give a reason, `$what` saying where it goes.
macro_rules! with_reason {
    ($request:ident, $what:literal) => {
        impl $request<'_> {
            #[doc = concat!("For `reason` (a [`Reason`]: 1 to 1,000 characters), ", $what, ".")]
            pub fn because(mut self, reason: impl Into<String>) -> Self {
                self.reason = Some(reason.into());
                self
            }

            /// For `reason` when one is given.
            pub fn reason(mut self, reason: Option<String>) -> Self {
                self.reason = reason;
                self
            }
        }
    };
}

with_reason!(Cancel, "journaled in the run's `cancelled` event and shown as its error");

/// The reason a cancel or pause was given, checked, or `default` without one.
fn reason_or<'r>(reason: &'r Option<String>, default: &'static str) -> Result<&'r str, ControlError> {
    match reason {
        Some(reason) => Reason::check(reason).map_err(ControlError::InvalidName).map(|()| reason.as_str()),
        None => Ok(default),
    }
}
with_reason!(Restart, "journaled in the new run's `started` event");

impl<'a> IntoFuture for Cancel<'a> {
    type Output = Result<CancelOutcome, ControlError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let reason = reason_or(&self.reason, CANCELLED_BY_REQUEST)?;
            self.client.cancel_tree(self.id, reason).await
        })
    }
}

/// A pause of one run ([`Client::pause`]): await it, optionally [`because`](Self::because) a
/// reason first.
#[must_use = "a pause does nothing until awaited"]
pub struct Pause<'a> {
    client: &'a Client,
    id: &'a RunId,
    reason: Option<String>,
}

with_reason!(Pause, "shown as the paused run's error (a running run keeps it until its worker parks it)");

impl<'a> IntoFuture for Pause<'a> {
    type Output = Result<PauseOutcome, ControlError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let reason = reason_or(&self.reason, PAUSED_BY_REQUEST)?;
            self.client.pause_now(self.id, reason).await
        })
    }
}

/// A restart of one run from a step ([`Client::restart`]): await it, optionally
/// [`because`](Self::because) a reason first.
#[must_use = "a restart does nothing until awaited"]
pub struct Restart<'a> {
    client: &'a Client,
    id: &'a RunId,
    from: &'a str,
    reason: Option<String>,
}

impl<'a> IntoFuture for Restart<'a> {
    type Output = Result<RunHandle, RestartError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            if let Some(reason) = &self.reason {
                Reason::check(reason).map_err(RestartError::InvalidName)?;
            }
            self.client.restart_from(self.id, self.from, self.reason.as_deref()).await
        })
    }
}
