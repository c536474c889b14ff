//! One claimed run on this worker: loaded (its journal, its state, its body), driven, and
//! settled when it does not execute here.

use super::local::{Lease, Local, attached, lock, run_setup};
use crate::ctx::Ctx;
use crate::error::Interrupt;
use crate::run::{BodyFuture, RunShared, drive};
use crate::run_core::{Admission, Ended, Lineage, admission, first_of_chain, log_line};
use cairn_journal::JournalEntry;
use cairn_store::{Append, Request, RunId, RunRecord, RunUpdate};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::task::JoinSet;
use tracing::Instrument as _;

/// Starts the execution of one claimed run.
pub(crate) fn spawn_run(local: &Arc<Local>, tasks: &mut JoinSet<()>, run: RunRecord) {
    local.running.fetch_add(1, Ordering::SeqCst);
    lock(&local.loading).insert(run.id.clone(), (run.epoch, run.last_seq));
    // The claim set the lease; a store that did not say until when gets one lease from now.
    let until = run.lease_expires_at.unwrap_or_else(|| crate::clock::wall_now() + local.config.lease);
    lock(&local.leases).insert(run.id.clone(), Lease { epoch: run.epoch, until });
    let local = Arc::clone(local);
    // Boxed: the record is needed only until the run is loaded, and held inline it would size
    // the task of every run in flight for its whole life.
    let run = Box::new(run);
    tasks.spawn(async move {
        let (id, epoch) = (run.id.clone(), run.epoch);
        let ended = start_run(&local, run).await;
        local.run_finished(&id, epoch, ended);
    });
}

/// Records a row change (no events) for a claimed run that does not execute here: it is parked
/// or handed back before its body starts, or its task was stopped. `after_seq` is where its
/// journal ends. A park a requested pause made is no fault (`requested`): it is not logged as one.
pub(crate) async fn settle(
    local: &Local,
    run_id: &RunId,
    epoch: u64,
    after_seq: u64,
    update: RunUpdate,
    requested: bool,
) {
    let append = Append {
        run_id: run_id.clone(),
        epoch,
        after_seq,
        events: Vec::new(),
        at: local.clock.now(),
        update,
        consume_signal: None,
        batched: false,
    };
    let ending = log_line(&append.update, requested);
    match local.store.append(append).await {
        Ok(()) => ending.log(run_id, None),
        Err(error) => tracing::warn!("run {run_id}: cannot record that it stopped here: {error}"),
    }
}

/// A claimed run, loaded: its live state, its body ready to drive, and its span.
struct Loaded {
    shared: Arc<RunShared>,
    body: BodyFuture,
    span: tracing::Span,
}

/// Loads a claimed run (its journal, its state, its body); or how it ended without executing
/// (`Err`), when it is parked or handed back first.
async fn load_run(local: &Arc<Local>, run: Box<RunRecord>) -> Result<Loaded, Option<Ended>> {
    if run.recoveries > 0 {
        tracing::warn!(
            run_id = %run.id,
            recoveries = run.recoveries,
            "run {}: recovered from an expired lease (its worker stopped renewing it: it died, stalled or lost \
             the store), {} time(s) in a row without progress",
            run.id,
            run.recoveries
        );
        crate::telemetry::run_recovered(&run.workflow);
    }
    let admitted = admission(&run, local.config.max_recoveries);
    let mode = match &admitted {
        Admission::Execute(mode) => *mode,
        Admission::Pause(error) | Admission::Park(error) => {
            let (requested, error) = (matches!(admitted, Admission::Pause(_)), error.clone());
            settle(local, &run.id, run.epoch, run.last_seq, RunUpdate::Park { error: error.clone() }, requested).await;
            return Err(Some(Ended { status: cairn_store::RunStatus::Paused, output: None, error: Some(error) }));
        }
    };
    let journal = if run.last_seq <= 1 {
        Ok(vec![JournalEntry::new(1, run.created_at, run.started())])
    } else {
        local.store.read_journal_through(&run.id, run.last_seq).await
    };
    let journal = match journal {
        Ok(journal) => journal,
        Err(error) => {
            tracing::warn!("run {}: cannot read its journal: {error}", run.id);
            return Err(None);
        }
    };
    if local.draining.is_cancelled() {
        settle(local, &run.id, run.epoch, run.last_seq, RunUpdate::Release, false).await;
        return Err(None);
    }
    let registered = local.registry.get(&run.workflow, run.version).cloned().ok_or(None)?;
    let state = match cairn_journal::RunState::fold_owned(journal) {
        Ok(state) => state,
        Err(error) => {
            let error = format!("[CAIRN-E0106] the journal does not fold: {error}");
            settle(local, &run.id, run.epoch, run.last_seq, RunUpdate::Park { error }, false).await;
            return Err(None);
        }
    };
    // Nothing but `started` journaled: the run has not started yet (or its start was lost).
    let fresh = state.last_seq() == 1;
    let named = (run.id.clone(), run.workflow.clone());
    let shared = Arc::new(RunShared::new(named, Lineage::of(&run), run.epoch, run_setup(local, &state), state, mode));
    lock(&local.active).insert(run.id.clone(), Arc::clone(&shared));
    lock(&local.loading).remove(&run.id);
    if let Some(cancel @ Request::Cancel { .. }) = &run.pending {
        // Cancelled while another worker held it, which then went away: finish the cancel.
        shared.request(cancel);
    }
    if local.draining.is_cancelled() {
        shared.interrupt(Interrupt::ShuttingDown);
    }
    if !local.lease_held(&run.id) {
        // Its lease ran out while its journal loaded, unconfirmed: another worker may hold it.
        shared.interrupt(Interrupt::LeaseLost);
    }
    let span = crate::telemetry::run_span(&run);
    let RunRecord { input, .. } = *run;
    let body = (registered.body)(Ctx::new(Arc::clone(&shared)), input);
    let body: BodyFuture = if fresh && shared.limits_start() {
        let gate = Arc::clone(&shared);
        Box::pin(async move {
            gate.turn(None).await?;
            body.await
        })
    } else {
        body
    };
    Ok(Loaded { shared, body, span })
}

/// Loads a claimed run and drives its body; how it ended, if it ended here.
async fn start_run(local: &Arc<Local>, run: Box<RunRecord>) -> Option<Ended> {
    let created_at = run.created_at;
    // Boxed: loading is over before the run executes, and held inline its future (about 700
    // bytes) would size the task of every run in flight for its whole life.
    let Loaded { shared, body, span } = match Box::pin(load_run(local, run)).await {
        Ok(loaded) => loaded,
        Err(ended) => return ended,
    };
    let in_flight = crate::telemetry::InFlight::new(&shared.workflow);
    let ended = drive(Arc::clone(&shared), body).instrument(span.clone()).await;
    span.record("status", ended.as_ref().map_or("suspended", |ended| ended.status.as_str()));
    drop(in_flight);
    if let Some(ended) = &ended {
        let lasted = created_at.until(local.clock.now());
        crate::telemetry::run_ended(&shared.workflow, ended.status, lasted);
        // A child that continued as new goes on as its successor, which tells the parent when
        // it ends, naming the chain's first run (the child the parent waits for).
        let child_ended = ended.status.is_terminal() && ended.status != cairn_store::RunStatus::Continued;
        if let Some(parent) = shared.lineage.parent.as_ref().filter(|_| child_ended) {
            let first = first_of_chain(&shared.id, shared.lineage.continues);
            // Boxed: rare, and its future would otherwise size every run's task.
            Box::pin(attached(local).child_ended(parent, &first)).await;
        }
    }
    ended
}
