//! The worker's loops: claiming ready runs, draining at shutdown, hearing the store's notices,
//! sweeping ended runs, heartbeating leases, and the chores of a start.

use super::local::{Local, attached, lock};
use super::runs::spawn_run;
use crate::attach::Attachment as _;
use crate::client::Client;
use crate::clock::wall_now;
use crate::error::Interrupt;
use crate::run::RunShared;
use cairn_journal::FastMap;
use cairn_store::{ClaimRequest, ForgetWorkers, HeartbeatRequest, Notice, RunId, Store};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::task::JoinSet;

/// Most runs taken by one claim.
const CLAIM_CHUNK: usize = 128;

pub(crate) async fn claim_loop(local: Arc<Local>) {
    let keys = local.registry.keys();
    let mut request = ClaimRequest {
        owner: local.config.worker_id.clone(),
        workflows: keys.clone(),
        now: local.clock.now(),
        lease_now: wall_now(),
        lease_until: wall_now(),
        limit: 0,
    };
    let mut tasks = JoinSet::new();
    let mut wakeups = local.store.wakeups();
    let client = attached(&local);
    loop {
        if local.draining.is_cancelled() {
            break;
        }
        let capacity = local.config.max_active_runs.saturating_sub(local.running.load(Ordering::SeqCst));
        // Claimed in chunks, so the first runs start while the next are still being claimed.
        let limit = capacity.min(CLAIM_CHUNK);
        let mut full_batch = capacity == 0;
        let mut more = false;
        if capacity > 0 && !keys.is_empty() {
            local.claiming.store(true, Ordering::SeqCst);
            local.refresh(&mut request, limit);
            match local.store.claim(&request).await {
                Ok(runs) => {
                    full_batch = runs.len() == capacity;
                    more = runs.len() == limit;
                    let now = local.clock.now();
                    for run in runs {
                        // Ready since its creation (never run yet) or its wake-up time.
                        if let Some(ready) = if run.last_seq <= 1 { Some(run.created_at) } else { run.wake_at } {
                            crate::telemetry::claim_lag(ready.until(now));
                        }
                        spawn_run(&local, &mut tasks, run);
                    }
                }
                Err(error) => tracing::warn!("claim failed: {error}"),
            }
        }
        local.at_capacity.store(full_batch, Ordering::SeqCst);
        while tasks.try_join_next().is_some() {}
        local.claiming.store(more, Ordering::SeqCst);
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        let next_wake = local.store.next_wake_at(&keys).await.ok().flatten();
        // Due already: a schedule's firing (a due run would have been claimed unless this worker
        // is full). Runs a firing started are claimed at once.
        if next_wake.is_some_and(|at| at <= local.clock.now()) && client.fire_due_schedules().await {
            continue;
        }
        // A wake-up already due while this worker is full waits for a run to end (which wakes
        // the claimer): sleeping until it would return at once, and the loop would spin on the
        // store until a slot frees.
        let next_wake = next_wake.filter(|at| !full_batch || *at > local.clock.now());
        let timer = async {
            match next_wake {
                Some(at) => local.clock.sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let remote = async {
            match wakeups.as_mut() {
                // A closed channel means no more remote wake-ups: fall back to polling.
                Some(receiver) => {
                    if receiver.changed().await.is_err() {
                        wakeups = None;
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = local.claimer.notified() => {}
            () = local.draining.cancelled() => break,
            () = tokio::time::sleep(local.config.poll_interval) => {}
            () = timer => {}
            () = remote => {}
        }
    }
    drain(&local, tasks).await;
}

/// Stops every run at its next step boundary, letting steps in flight finish and commit for up
/// to the drain's grace period; each run hands its lease back as it stops. Past the grace
/// period, step bodies see their cancellation tokens fire; what is still left is aborted, and
/// [`Engine::shutdown_within`] hands those leases back.
async fn drain(local: &Local, mut tasks: JoinSet<()>) {
    let active: Vec<Arc<RunShared>> = lock(&local.active).values().cloned().collect();
    for run in &active {
        run.interrupt(Interrupt::ShuttingDown);
    }
    let grace = *lock(&local.drain_for);
    let all_done = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, all_done).await.is_err() {
        let active: Vec<Arc<RunShared>> = lock(&local.active).values().cloned().collect();
        for run in &active {
            run.stop_steps();
        }
        // A run whose steps stopped hands its lease back at once; one stuck elsewhere is aborted.
        let _ =
            tokio::time::timeout(Duration::from_secs(1), async { while tasks.join_next().await.is_some() {} }).await;
        tasks.shutdown().await;
    }
}

/// Wakes the result waiters of runs that ended in other processes, and the waits of runs
/// executing here that other processes signalled (all of them when the store's reports lagged
/// behind), until shutdown.
pub(crate) async fn notices_loop(local: Arc<Local>, mut notices: tokio::sync::broadcast::Receiver<Notice>) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let notice = tokio::select! {
            notice = notices.recv() => notice,
            () = local.shutdown.cancelled() => return,
        };
        match notice {
            // A run this worker holds tells its watchers itself when it stops, with how it ended;
            // the store's report of its end (often the first to arrive) would only make them
            // read the store again.
            Ok(Notice::Ended(id)) if !local.holds(&id) => local.notify_watchers(&id, None),
            Ok(Notice::Ended(_)) => {}
            Ok(Notice::Signalled(id)) => {
                if let Some(run) = local.active(&id) {
                    run.signal_may_have_arrived();
                }
            }
            Ok(Notice::Missed) | Err(RecvError::Lagged(_)) => {
                let waiting: Vec<RunId> = lock(&local.waiters).keys().cloned().collect();
                for id in waiting {
                    local.notify_watchers(&id, None);
                }
                let active: Vec<Arc<RunShared>> = lock(&local.active).values().cloned().collect();
                for run in active {
                    run.signal_may_have_arrived();
                }
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Deletes ended runs past their retention every `every` (by the engine's clock), reporting what
/// it deleted, until the worker shuts down.
pub(crate) async fn sweep_loop(local: Arc<Local>, client: Client, every: Duration) {
    loop {
        tokio::select! {
            () = local.clock.sleep_until(local.clock.now() + every) => {}
            () = local.draining.cancelled() => break,
        }
        match client.sweep().await {
            Ok(deleted) if deleted.is_empty() => {}
            Ok(deleted) => tracing::info!(runs = deleted.len(), "swept ended runs past their retention"),
            Err(error) => tracing::warn!("sweeping ended runs failed: {error}"),
        }
    }
}

/// How long a dead worker's record is kept (for `cairn workers --all`) before a starting worker
/// deletes it.
const FORGET_DEAD_WORKERS_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Deletes the records of workers dead for a day.
async fn forget_dead_workers(store: &dyn Store) {
    let dead_before = Some(wall_now() - FORGET_DEAD_WORKERS_AFTER);
    if let Err(error) = store.forget_workers(&ForgetWorkers { ids: Vec::new(), dead_before }).await {
        tracing::warn!("could not forget dead workers: {error}");
    }
}

/// What a starting worker does once, beside claiming runs: forgets workers dead for a day, then
/// warns about stranded runs (unless it is already shutting down, when its own record is going).
pub(crate) async fn start_up_chores(local: Arc<Local>, client: Client) {
    forget_dead_workers(local.store.as_ref()).await;
    if !local.draining.is_cancelled() {
        warn_stranded(&client).await;
    }
}

/// Logs one warning per workflow version whose runs no live worker serves, with the run count.
async fn warn_stranded(client: &Client) {
    match client.stranded_versions().await {
        Ok(stranded) => {
            for version in stranded {
                let plural = if version.runs == 1 { "run" } else { "runs" };
                tracing::warn!(
                    "{} {plural} of `{}` version {} stranded: {}",
                    version.runs,
                    version.key.name,
                    version.key.version,
                    version.reason
                );
            }
        }
        Err(error) => tracing::warn!("could not look for stranded runs: {error}"),
    }
}

/// A heartbeat whose round trip takes more than this share of the lease is warned about: the
/// lease should be at least this many round trips long (README, "PostgreSQL in production").
const ROUND_TRIPS_PER_LEASE: u32 = 5;

/// How often a slow heartbeat is warned about at most.
const SLOW_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Renews this worker's leases every third of the lease, on a schedule of its own: a beat never
/// waits for the runs' work, and the store answers it on a connection of its own where it has
/// connections (PostgreSQL). A beat not answered before a lease it renews runs out is given
/// up, and every run whose lease ran out unconfirmed is stopped at once (its steps' tokens fire)
/// rather than racing the worker that may take it over.
pub(crate) async fn heartbeat_loop(local: Arc<Local>) {
    let every = (local.config.lease / 3).max(Duration::from_millis(10));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    let mut record: Option<tokio::task::JoinHandle<()>> = None;
    let mut warned: Option<tokio::time::Instant> = None;
    loop {
        // Woken when the earliest lease runs out as well, to stop its run in time.
        let expiry = local.earliest_lease_end();
        let expiry = tokio::time::Instant::now() + expiry.map_or(every, |until| wall_now().until(until));
        tokio::select! {
            _ = ticks.tick() => {
                // The worker's own record, on a task of its own: it never delays the leases.
                if record.as_ref().is_none_or(tokio::task::JoinHandle::is_finished) {
                    let local = Arc::clone(&local);
                    record = Some(tokio::spawn(async move { local.record_worker().await }));
                }
                beat(&local, &mut warned).await;
            }
            () = tokio::time::sleep_until(expiry) => {}
            () = local.shutdown.cancelled() => break,
        }
        stop_unconfirmed(&local);
    }
    // The shutdown forgets this worker's record once this loop ends: no refresh may land after.
    if let Some(record) = record {
        let _ = record.await;
    }
}

/// One heartbeat of every lease this worker holds, given up when a lease it renews runs out.
async fn beat(local: &Local, warned: &mut Option<tokio::time::Instant>) {
    let Some(first_expiry) = local.earliest_lease_end() else { return };
    let runs: Vec<(RunId, u64)> = lock(&local.leases).iter().map(|(id, lease)| (id.clone(), lease.epoch)).collect();
    let lease = local.config.lease;
    let sent = tokio::time::Instant::now();
    let request = HeartbeatRequest { owner: local.config.worker_id.clone(), runs, lease_until: wall_now() + lease };
    let deadline = sent + wall_now().until(first_expiry);
    let statuses = match tokio::time::timeout_at(deadline, local.store.heartbeat(&request)).await {
        Ok(Ok(statuses)) => statuses,
        Ok(Err(error)) => return tracing::warn!("heartbeat failed: {error}"),
        Err(_) => {
            return tracing::warn!(
                "heartbeat not answered within {:?}, before a lease it renews ran out",
                sent.elapsed()
            );
        }
    };
    let round_trip = sent.elapsed();
    crate::telemetry::heartbeat(round_trip);
    if round_trip * ROUND_TRIPS_PER_LEASE > lease && warned.is_none_or(|at| at.elapsed() >= SLOW_WARNING_EVERY) {
        *warned = Some(tokio::time::Instant::now());
        tracing::warn!(
            "a heartbeat took {round_trip:?}, more than a {ROUND_TRIPS_PER_LEASE}th of the {lease:?} lease: \
             runs may be taken over from this worker; choose a lease of at least {ROUND_TRIPS_PER_LEASE} \
             round trips to the store"
        );
    }
    // Each status speaks of the lease whose epoch was sent. The run may have been claimed here
    // again meanwhile (suspended, then woken): a status of the older lease says nothing of the
    // newer one.
    let sent: FastMap<&RunId, u64> = request.runs.iter().map(|(id, epoch)| (id, *epoch)).collect();
    let of_sent = |id: &RunId, epoch: u64| sent.get(id) == Some(&epoch);
    {
        let mut leases = lock(&local.leases);
        for status in statuses.iter().filter(|status| status.held) {
            if let Some(held) = leases.get_mut(&status.run_id).filter(|held| of_sent(&status.run_id, held.epoch)) {
                held.until = held.until.max(request.lease_until);
            }
        }
    }
    for status in statuses {
        let Some(run) = local.active(&status.run_id).filter(|run| of_sent(&run.id, run.epoch)) else { continue };
        if !status.held {
            run.interrupt(Interrupt::LeaseLost);
        } else if let Some(request) = &status.pending {
            run.request(request);
        }
    }
}

/// Stops each run whose lease ran out before a heartbeat confirmed it; its lease is forgotten
/// (another worker may take the run over now), so it is stopped once.
fn stop_unconfirmed(local: &Local) {
    let now = wall_now();
    let mut expired: Vec<RunId> = Vec::new();
    lock(&local.leases).retain(|id, lease| {
        let held = lease.until > now;
        if !held {
            expired.push(id.clone());
        }
        held
    });
    for id in expired {
        tracing::warn!(run_id = %id, "run {id}: its lease ran out before a heartbeat renewed it; stopping it here");
        if let Some(run) = local.active(&id) {
            run.interrupt(Interrupt::LeaseLost);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::engine::Config;
    use crate::engine::local::Lease;

    /// A run this worker holds tells its watchers how it ended itself; the store's report of
    /// its end does not wake them first to read the store again (which it did in most runs of a
    /// multi-threaded W1, 1.8 reads a run instead of 1). One held elsewhere is reported.
    #[tokio::test]
    async fn the_store_reports_the_end_of_runs_held_elsewhere_only() {
        let store = Arc::new(cairn_store::MemoryStore::new());
        let (clock, registry) = (Arc::new(crate::clock::SystemClock), crate::registry::Registry::default());
        let local = Arc::new(Local::new(store, clock, registry, Config::default(), false));
        let (held, elsewhere) = (RunId::new("held-here"), RunId::new("held-elsewhere"));
        // As a claim leaves it: leased and counted as running.
        lock(&local.leases).insert(held.clone(), Lease { epoch: 1, until: wall_now() + Duration::from_secs(60) });
        local.running.fetch_add(1, Ordering::SeqCst);
        let (mut held_watch, elsewhere_watch) = (local.watch(&held), local.watch(&elsewhere));
        let (notices, receiver) = tokio::sync::broadcast::channel(8);
        let reports = tokio::spawn(notices_loop(Arc::clone(&local), receiver));
        notices.send(Notice::Ended(held.clone())).unwrap();
        notices.send(Notice::Ended(elsewhere.clone())).unwrap();
        // Reports are handled in order: once the second is, the first was.
        assert!(matches!(elsewhere_watch.await, Ok(None)));
        assert!(held_watch.try_recv().is_err(), "the held run's watcher was woken by the report");
        // Its own stop tells it, with how it ended.
        local.run_finished(&held, 1, None);
        assert!(matches!(held_watch.await, Ok(None)));
        local.shutdown.cancel();
        reports.await.unwrap();
    }
}
