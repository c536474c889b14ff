//! The engine: a worker that claims ready runs, replays and executes them while it holds their
//! leases, heartbeats those leases, and wakes runs when their timers come due.

use crate::attach::Attachment;
use crate::client::Client;
use crate::clock::{Clock, SystemClock, wall_now};
use crate::ctx::Ctx;
use crate::error::{EngineError, Interrupt, WorkflowError};
use crate::registry::Registry;
use crate::run::{BodyFuture, Host, RunSetup, RunShared, drive};
use crate::run_core::{DEFAULT_MAX_PAYLOAD_BYTES, Ended, Limits, Lineage, Mode, PAUSED_BY_REQUEST, first_of_chain};
use cairn_journal::{FastMap, JournalEntry, RetryPolicy};
use cairn_store::{
    Append, ClaimRequest, ForgetWorkers, HeartbeatRequest, Notice, RunId, RunRecord, RunUpdate, SignalRecord, Store,
    WorkerRecord,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// Tunables of a worker. Every field has a sensible default.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) worker_id: String,
    pub(crate) lease: Duration,
    pub(crate) poll_interval: Duration,
    pub(crate) suspend_grace: Duration,
    pub(crate) max_active_runs: usize,
    pub(crate) max_payload_bytes: usize,
    pub(crate) max_recoveries: u32,
    pub(crate) shutdown_grace: Duration,
    pub(crate) max_retention: Option<Duration>,
    pub(crate) sweep_every: Option<Duration>,
}

/// How many times in a row a run's worker may die while executing it without committing anything
/// before the run is parked as poison.
pub const DEFAULT_MAX_RECOVERIES: u32 = 10;

/// How long a shutdown lets steps in flight finish by default.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

impl Default for Config {
    fn default() -> Self {
        Self {
            worker_id: format!("worker-{}-{}", std::process::id(), &uuid::Uuid::now_v7().simple().to_string()[20..]),
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_millis(500),
            suspend_grace: Duration::from_secs(1),
            max_active_runs: 1024,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            max_recoveries: DEFAULT_MAX_RECOVERIES,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            max_retention: None,
            sweep_every: Some(Duration::from_secs(60)),
        }
    }
}

/// What the worker side of an engine shares between its loops, its runs and its clients.
pub(crate) struct Local {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) registry: Registry,
    pub(crate) config: Config,
    active: Mutex<FastMap<RunId, Arc<RunShared>>>,
    /// Runs claimed and still loading their journals: `(epoch, last_seq)` to hand their leases
    /// back with if the worker stops first.
    loading: Mutex<FastMap<RunId, (u64, u64)>>,
    running: AtomicUsize,
    /// The last claim took as many runs as there was room for: more may be waiting.
    at_capacity: AtomicBool,
    /// The claim loop is taking runs: a claim is under way, or the last one was full.
    claiming: AtomicBool,
    /// The store reports runs ending or signalled in other processes (see
    /// [`Local::notices_reported`]).
    remote_notices: bool,
    claimer: Notify,
    waiters: Mutex<FastMap<RunId, Vec<oneshot::Sender<Option<Ended>>>>>,
    /// Fired when the worker starts shutting down: stop claiming, stop runs at step boundaries.
    draining: CancellationToken,
    /// How long the drain lets steps in flight finish (set by the shutdown).
    drain_for: Mutex<Duration>,
    /// Fired once every run has stopped: the heartbeat and notice loops end.
    shutdown: CancellationToken,
    /// This worker's record in the store as of its start; [`Local::worker_record`] brings its
    /// times up to date.
    worker: WorkerRecord,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Local {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        registry: Registry,
        config: Config,
        remote_notices: bool,
    ) -> Local {
        let started = wall_now();
        let worker = WorkerRecord {
            id: config.worker_id.clone(),
            host: crate::workers::host_name(),
            pid: std::process::id(),
            started_at: started,
            last_seen: started,
            live_until: started + config.lease,
            serves: registry.keys(),
        };
        Local {
            store,
            clock,
            registry,
            drain_for: Mutex::new(config.shutdown_grace),
            config,
            active: Mutex::new(FastMap::default()),
            loading: Mutex::new(FastMap::default()),
            running: AtomicUsize::new(0),
            at_capacity: AtomicBool::new(false),
            claiming: AtomicBool::new(false),
            remote_notices,
            claimer: Notify::new(),
            waiters: Mutex::new(FastMap::default()),
            draining: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            worker,
        }
    }

    /// This worker's record in the store, as of now: live for one lease from now.
    fn worker_record(&self) -> WorkerRecord {
        let now = wall_now();
        WorkerRecord { last_seen: now, live_until: now + self.config.lease, ..self.worker.clone() }
    }

    /// Records (or refreshes) this worker in the store; a failure is logged, not fatal: the
    /// worker still works, it is only missing from `cairn workers` until the next heartbeat.
    async fn record_worker(&self) {
        if let Err(error) = self.store.record_worker(&self.worker_record()).await {
            tracing::warn!("could not record this worker in the store: {error}");
        }
    }

    /// Wakes the claim loop: something may be ready.
    pub(crate) fn wake_claimer(&self) {
        self.claimer.notify_one();
    }

    /// Whether the claim loop is still taking ready runs: a pending run this worker can execute
    /// is likely to be claimed here soon (and its watchers told).
    pub(crate) fn claiming(&self) -> bool {
        self.claiming.load(Ordering::SeqCst)
    }

    /// Whether the store tells this worker about runs ending or signalled in other processes,
    /// so result waiters and waits in memory are woken instead of polling.
    pub(crate) fn notices_reported(&self) -> bool {
        self.remote_notices
    }

    /// The live run with this id, if this worker executes it now.
    pub(crate) fn active(&self, id: &RunId) -> Option<Arc<RunShared>> {
        lock(&self.active).get(id).cloned()
    }

    /// A receiver that fires when this worker stops executing `id`: with how it ended if it
    /// ended here, `None` if it suspended or stopped (look at the store then).
    pub(crate) fn watch(&self, id: &RunId) -> oneshot::Receiver<Option<Ended>> {
        let (sender, receiver) = oneshot::channel();
        let mut waiters = lock(&self.waiters);
        let list = waiters.entry(id.clone()).or_default();
        list.retain(|s| !s.is_closed());
        list.push(sender);
        receiver
    }

    /// Tells everyone watching `id` how it ended, or (with `None`) to look again.
    pub(crate) fn notify_watchers(&self, id: &RunId, ended: Option<Ended>) {
        if let Some(list) = lock(&self.waiters).remove(id) {
            for sender in list {
                let _ = sender.send(ended.clone());
            }
        }
    }

    pub(crate) fn run_finished(&self, id: &RunId, ended: Option<Ended>) {
        lock(&self.active).remove(id);
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.notify_watchers(id, ended);
        // A freed slot matters only if the last claim was cut short by capacity; new, woken and
        // signalled runs wake the claimer themselves.
        if self.at_capacity.load(Ordering::SeqCst) {
            self.wake_claimer();
        }
    }

    /// Brings a claim request's clocks and limit up to date.
    fn refresh(&self, request: &mut ClaimRequest, limit: usize) {
        let lease_now = wall_now();
        request.now = self.clock.now();
        request.lease_now = lease_now;
        request.lease_until = lease_now + self.config.lease;
        request.limit = limit;
    }
}

/// Most runs taken by one claim.
const CLAIM_CHUNK: usize = 128;

/// Starts the execution of one claimed run.
fn spawn_run(local: &Arc<Local>, tasks: &mut JoinSet<()>, run: RunRecord) {
    local.running.fetch_add(1, Ordering::SeqCst);
    lock(&local.loading).insert(run.id.clone(), (run.epoch, run.last_seq));
    let local = Arc::clone(local);
    // Boxed: the record is needed only until the run is loaded, and held inline it would size
    // the task of every run in flight for its whole life.
    let run = Box::new(run);
    tasks.spawn(async move {
        let id = run.id.clone();
        let ended = start_run(&local, run).await;
        lock(&local.loading).remove(&id);
        local.run_finished(&id, ended);
    });
}

/// Records a row change (no events) for a claimed run that does not execute here: it is parked
/// or handed back before its body starts, or its task was stopped. `after_seq` is where its
/// journal ends.
async fn settle(local: &Local, run_id: &RunId, epoch: u64, after_seq: u64, update: RunUpdate) {
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
    if let Err(error) = local.store.append(append).await {
        tracing::warn!("run {run_id}: cannot record that it stopped here: {error}");
    }
}

/// A claimed run, loaded: its live state, its body ready to drive, and its span.
struct Loaded {
    shared: Arc<RunShared>,
    body: BodyFuture,
    span: tracing::Span,
}

/// A client attached to this worker.
pub(crate) fn attached(local: &Arc<Local>) -> Client {
    let (store, clock) = (Arc::clone(&local.store), Arc::clone(&local.clock));
    Client::attached(Arc::clone(local) as Arc<dyn Attachment>, store, clock, local.config.max_payload_bytes)
}

impl Host for Local {
    fn wake_claimer(&self) {
        Local::wake_claimer(self);
    }

    fn notices_reported(&self) -> bool {
        Local::notices_reported(self)
    }
}

impl Attachment for Local {
    fn latest(&self, workflow: &str) -> Option<u32> {
        self.registry.latest(workflow)
    }

    fn registers(&self, workflow: &str, version: u32) -> bool {
        self.registry.get(workflow, version).is_some()
    }

    fn workflow_names(&self) -> Vec<String> {
        self.registry.names()
    }

    fn check_input(&self, workflow: &str, version: u32, input: &RawValue) -> Option<Result<(), String>> {
        self.registry.get(workflow, version).map(|registered| (registered.check_input)(input))
    }

    fn retention(&self, workflow: &str) -> Option<Duration> {
        self.registry.retention(workflow)
    }

    fn max_retention(&self) -> Option<Duration> {
        self.config.max_retention
    }

    fn wake_claimer(&self) {
        Local::wake_claimer(self);
    }

    fn claiming(&self) -> bool {
        Local::claiming(self)
    }

    fn notices_reported(&self) -> bool {
        Local::notices_reported(self)
    }

    fn watch(&self, id: &RunId) -> oneshot::Receiver<Option<Ended>> {
        Local::watch(self, id)
    }

    fn notify_watchers(&self, id: &RunId, ended: Option<Ended>) {
        Local::notify_watchers(self, id, ended);
    }

    fn runs_here(&self, id: &RunId) -> bool {
        self.active(id).is_some()
    }

    fn interrupt(&self, id: &RunId, why: Interrupt) {
        if let Some(run) = self.active(id) {
            run.interrupt(why);
        }
    }

    fn deliver(&self, id: &RunId, signal: SignalRecord) {
        if let Some(run) = self.active(id) {
            run.deliver(signal);
        }
    }

    fn signal_may_have_arrived(&self, id: &RunId) {
        if let Some(run) = self.active(id) {
            run.signal_may_have_arrived();
        }
    }
}

/// What a run of `state`'s workflow needs from this worker.
pub(crate) fn run_setup(local: &Arc<Local>, state: &cairn_journal::RunState) -> RunSetup {
    let workflow = state.workflow();
    let registry = &local.registry;
    let latest = registry.latest(workflow);
    RunSetup {
        store: Arc::clone(&local.store),
        clock: Arc::clone(&local.clock),
        client: attached(local),
        host: Arc::clone(local) as Arc<dyn Host>,
        poll_interval: local.config.poll_interval,
        limits: Limits { max_payload_bytes: local.config.max_payload_bytes, suspend_grace: local.config.suspend_grace },
        step_defaults: registry.step_defaults(workflow),
        rate_turns: registry.rate_limits(workflow).iter().map(|limit| limit.turns_of(state.input())).collect(),
        successor: (
            latest,
            latest.and_then(|version| registry.get(workflow, version)).map(|r| Arc::clone(&r.check_input)),
        ),
    }
}

/// Loads a claimed run (its journal, its state, its body); or how it ended without executing
/// (`Err`), when it is parked or handed back first.
async fn load_run(local: &Arc<Local>, run: Box<RunRecord>) -> Result<Loaded, Option<Ended>> {
    let max = local.config.max_recoveries;
    if run.pause_requested || run.recoveries > max.saturating_add(1) {
        // Paused while its worker went away, or a poison run whose last replay crashed its worker
        // before it reached a new step: park it without running anything.
        let error = if run.pause_requested {
            PAUSED_BY_REQUEST.to_owned()
        } else {
            Interrupt::Poisoned { path: None, recoveries: run.recoveries }.to_string()
        };
        settle(local, &run.id, run.epoch, run.last_seq, RunUpdate::Park { error: error.clone() }).await;
        return Err(Some(Ended { status: cairn_store::RunStatus::Paused, output: None, error: Some(error) }));
    }
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
        settle(local, &run.id, run.epoch, run.last_seq, RunUpdate::Release).await;
        return Err(None);
    }
    let registered = local.registry.get(&run.workflow, run.version).cloned().ok_or(None)?;
    let state = match cairn_journal::RunState::fold_owned(journal) {
        Ok(state) => state,
        Err(error) => {
            let error = format!("[CAIRN-E0106] the journal does not fold: {error}");
            settle(local, &run.id, run.epoch, run.last_seq, RunUpdate::Park { error }).await;
            return Err(None);
        }
    };
    let mode = if run.recoveries > max { Mode::Poisoned(run.recoveries) } else { Mode::Live };
    // Nothing but `started` journaled: the run has not started yet (or its start was lost).
    let fresh = state.last_seq() == 1;
    let shared =
        Arc::new(RunShared::new(run.id.clone(), Lineage::of(&run), run.epoch, run_setup(local, &state), state, mode));
    lock(&local.active).insert(run.id.clone(), Arc::clone(&shared));
    lock(&local.loading).remove(&run.id);
    if run.cancel_requested {
        // Cancelled while another worker held it, which then went away: finish the cancel.
        shared.interrupt(Interrupt::Cancelled);
    }
    if local.draining.is_cancelled() {
        shared.interrupt(Interrupt::ShuttingDown);
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
    let Loaded { shared, body, span } = match load_run(local, run).await {
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

async fn claim_loop(local: Arc<Local>) {
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
async fn notices_loop(local: Arc<Local>, mut notices: tokio::sync::broadcast::Receiver<Notice>) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let notice = tokio::select! {
            notice = notices.recv() => notice,
            () = local.shutdown.cancelled() => return,
        };
        match notice {
            Ok(Notice::Ended(id)) => local.notify_watchers(&id, None),
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
async fn sweep_loop(local: Arc<Local>, client: Client, every: Duration) {
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
async fn start_up_chores(local: Arc<Local>, client: Client) {
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

async fn heartbeat_loop(local: Arc<Local>) {
    let every = (local.config.lease / 3).max(Duration::from_millis(10));
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = local.shutdown.cancelled() => break,
        }
        local.record_worker().await;
        let runs: Vec<(RunId, u64)> = lock(&local.active).values().map(|r| (r.id.clone(), r.epoch)).collect();
        if runs.is_empty() {
            continue;
        }
        let request = HeartbeatRequest {
            owner: local.config.worker_id.clone(),
            runs,
            lease_until: wall_now() + local.config.lease,
        };
        match local.store.heartbeat(&request).await {
            Ok(statuses) => {
                for status in statuses {
                    let Some(run) = local.active(&status.run_id) else { continue };
                    if !status.held {
                        run.interrupt(Interrupt::LeaseLost);
                    } else if status.cancel_requested {
                        run.interrupt(Interrupt::Cancelled);
                    } else if status.pause_requested {
                        run.interrupt(Interrupt::Paused);
                    }
                }
            }
            Err(error) => tracing::warn!("heartbeat failed: {error}"),
        }
    }
}

/// Configures and starts an [`Engine`]. Made by [`Engine::builder`].
#[must_use = "call .start() to run the engine"]
pub struct EngineBuilder {
    store: Option<Arc<dyn Store>>,
    clock: Arc<dyn Clock>,
    registry: Registry,
    duplicate: Option<(String, u32)>,
    config: Config,
    schedules: Vec<crate::schedule::Schedule>,
    concurrency: Vec<cairn_store::ConcurrencyRule>,
}

impl EngineBuilder {
    /// The store runs are kept in (required).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The store, already shared.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The clock for sleeps, timeouts and backoff (default: the system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Registers `body` as version `version` of workflow `name`. New runs use the highest
    /// registered version; a run keeps the version it started with.
    pub fn register<I, O, F, Fut>(mut self, name: &str, version: u32, body: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(Ctx, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + Send + 'static,
    {
        if !self.registry.insert(name, version, body) && self.duplicate.is_none() {
            self.duplicate = Some((name.to_owned(), version));
        }
        self
    }

    /// Subscribes workflow `name` (registered with this builder) to the events of every topic
    /// `pattern` matches: `user.signup`, or `user.*` (`*` is any one segment; see
    /// [`cairn_journal::topic`]). Each event [published](crate::client::Client::publish) to a matching
    /// topic starts one run of the workflow's newest registered version, with the event's payload
    /// as input. The engine declares its workflows' subscriptions in the store when it starts,
    /// replacing what an earlier deploy declared for them, so any client of the store can publish.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    /// use serde_json::{Value, json};
    ///
    /// async fn welcome(ctx: Ctx, user: Value) -> Result<String, WorkflowError> {
    ///     ctx.step("greet", || async { Ok::<_, StepError>(format!("welcome {}", user["name"])) }).await
    /// }
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("welcome", 1, welcome)
    ///     .subscribe("welcome", "user.*")
    ///     .start()
    ///     .await?;
    /// let published = engine.client().publish("user.signup", &json!({"name": "Ada"})).id("evt-1").await?;
    /// assert_eq!(published.runs.len(), 1);
    /// let greeting: String = published.runs[0].result().await?;
    /// assert_eq!(greeting, "welcome \"Ada\"");
    /// // The same event again starts nothing new.
    /// let again = engine.client().publish("user.signup", &json!({"name": "Ada"})).id("evt-1").await?;
    /// assert_eq!(again.started().count(), 0);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn subscribe(mut self, name: &str, pattern: &str) -> Self {
        self.registry.subscribe(name, pattern);
        self
    }

    /// The retry policy of every step of workflow `name` (every version) that does not set its
    /// own with [`Step::retry`](crate::ctx::Step::retry) (default: [`RetryPolicy::default`]).
    pub fn default_retry(mut self, name: &str, policy: RetryPolicy) -> Self {
        self.registry.set_step_defaults(name, |defaults| defaults.retry = Some(policy));
        self
    }

    /// A timeout for each attempt of every step of workflow `name` that does not set its own
    /// with [`Step::timeout`](crate::ctx::Step::timeout) (default: none).
    pub fn default_step_timeout(mut self, name: &str, limit: Duration) -> Self {
        self.registry.set_step_defaults(name, |defaults| defaults.timeout = Some(limit));
        self
    }

    /// This worker's identity in leases (default: `worker-<pid>-<random>`).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.config.worker_id = id.into();
        self
    }

    /// How long a claimed run stays leased without a heartbeat (default 30 s). A crashed worker's
    /// runs resume elsewhere after this long.
    pub fn lease_duration(mut self, lease: Duration) -> Self {
        self.config.lease = lease.max(Duration::from_millis(30));
        self
    }

    /// How often the worker looks for ready runs it was not told about (default 500 ms).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.config.poll_interval = every;
        self
    }

    /// Sleeps and backoffs ending within this long stay in memory instead of suspending (default 1 s).
    pub fn suspend_grace(mut self, grace: Duration) -> Self {
        self.config.suspend_grace = grace;
        self
    }

    /// Most runs executing at once on this worker (default 1024).
    pub fn max_active_runs(mut self, runs: usize) -> Self {
        self.config.max_active_runs = runs.max(1);
        self
    }

    /// Largest input, step output, signal payload or run output in bytes (default 4 MiB).
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.config.max_payload_bytes = bytes;
        self
    }

    /// How many times in a row a run's worker may die while executing it without committing
    /// anything (default 10). A run reclaimed more often than that is parked as poison
    /// (`[CAIRN-E0109]`, naming the step it reaches) instead of crash-looping every worker.
    pub fn max_recoveries(mut self, recoveries: u32) -> Self {
        self.config.max_recoveries = recoveries;
        self
    }

    /// How long ended runs of workflow `name` (every version) are kept before a sweeper deletes
    /// them (default [`DEFAULT_RETENTION`](crate::client::DEFAULT_RETENTION), 30 days); a run's own
    /// [`retention`](crate::client::StartRun::retention) overrides it.
    pub fn retention(mut self, name: &str, keep: Duration) -> Self {
        self.registry.set_retention(name, keep);
        self
    }

    /// The longest any ended run is kept, whatever its workflow or its start asked for (default:
    /// no maximum). Runs this engine's client starts are clamped to it, and its sweeper deletes
    /// ended runs older than it whoever started them.
    pub fn max_retention(mut self, keep: Duration) -> Self {
        self.config.max_retention = Some(keep);
        self
    }

    /// How often the worker deletes ended runs past their retention (default every minute;
    /// `None`: never, e.g. when a dedicated process or `cairn runs prune` does it). Many workers
    /// may sweep one store at once.
    pub fn sweep_every(mut self, every: Option<Duration>) -> Self {
        self.config.sweep_every = every;
        self
    }

    /// Declares a schedule of a workflow registered with this builder: the engine creates it in
    /// the store when it starts, or updates it (see [`Client::put_schedule`]: a paused schedule
    /// stays paused, and its next firing stays unless its spec changed). Every worker serving the
    /// workflow fires it when due, whichever declared it; each firing starts one run.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{CatchUp, MemoryStore, Schedule};
    /// # async fn cleanup(_ctx: Ctx, (): ()) -> Result<(), WorkflowError> { Ok(()) }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("cleanup", 1, cleanup)
    ///     .schedule(Schedule::cron("hourly-cleanup", "cleanup", ["0 * * * *"]).catch_up(CatchUp::Skip))
    ///     .start()
    ///     .await?;
    /// assert_eq!(engine.client().schedules().await?.len(), 1);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn schedule(mut self, schedule: crate::schedule::Schedule) -> Self {
        self.schedules.push(schedule);
        self
    }

    /// Limits how often runs of a registered workflow start, or how often a named step of it
    /// runs, across every worker sharing the store (see [`RateLimit`](crate::flow::RateLimit)); work
    /// over the limit is suspended until its turn (`waiting_for: rate`), never dropped. Checked
    /// at start (`[CAIRN-E0314]`). A later limit for the same workflow and step wins.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{MemoryStore, RateLimit};
    /// use std::time::Duration;
    /// # async fn sync(_ctx: Ctx, _input: serde_json::Value) -> Result<(), WorkflowError> { Ok(()) }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("sync", 1, sync)
    ///     // At most 100 syncs start per minute, and each customer's API calls twice a second.
    ///     .rate_limit(RateLimit::starts("sync", 100, Duration::from_secs(60)))
    ///     .rate_limit(RateLimit::step("sync", "call-api", 2, Duration::from_secs(1)).per_key("/customer"))
    ///     .start()
    ///     .await?;
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn rate_limit(mut self, limit: crate::flow::RateLimit) -> Self {
        self.registry.set_rate_limit(limit);
        self
    }

    /// Limits how many runs of a registered workflow hold a slot at once, across every worker
    /// sharing the store (stored at start, replacing the workflow's earlier rule). Runs over the
    /// limit wait, in creation order, and start as slots free up; `cairn runs list` shows them
    /// `waiting_for: concurrency`. One rule per workflow: a later call for the same workflow wins.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{ConcurrencyRule, MemoryStore};
    /// # async fn charge(_ctx: Ctx, _input: serde_json::Value) -> Result<(), WorkflowError> { Ok(()) }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("charge", 1, charge)
    ///     // At most 2 charges per customer at once.
    ///     .concurrency(ConcurrencyRule::per_key("charge", "/customer", 2))
    ///     .start()
    ///     .await?;
    /// assert_eq!(engine.client().concurrency_rules().await?[0].limit, 2);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn concurrency(mut self, rule: cairn_store::ConcurrencyRule) -> Self {
        self.concurrency.retain(|r| r.workflow != rule.workflow);
        self.concurrency.push(rule);
        self
    }

    /// How long [`Engine::shutdown`] lets steps in flight finish (default 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.config.shutdown_grace = grace;
        self
    }

    /// Starts the worker's loops on the current Tokio runtime.
    pub async fn start(self) -> Result<Engine, EngineError> {
        let store = self.store.ok_or(EngineError::NoStore)?;
        if let Some((name, version)) = self.duplicate {
            return Err(EngineError::DuplicateWorkflow { name, version });
        }
        self.registry.check_settings()?;
        self.registry.check_rate_limits()?;
        for schedule in &self.schedules {
            schedule.check().map_err(|e| EngineError::InvalidSchedule(e.to_string()))?;
            if self.registry.latest(&schedule.workflow).is_none() {
                let message =
                    format!("schedule `{}` starts `{}`, which is not registered", schedule.name, schedule.workflow);
                return Err(EngineError::InvalidSchedule(message));
            }
        }
        for rule in &self.concurrency {
            rule.check().map_err(EngineError::InvalidConcurrency)?;
            if self.registry.latest(&rule.workflow).is_none() {
                let message = format!("a concurrency rule limits `{}`, which is not registered", rule.workflow);
                return Err(EngineError::InvalidConcurrency(message));
            }
        }
        tokio::runtime::Handle::try_current().map_err(|_| EngineError::NoRuntime)?;
        // Read first: most starts declare what the store already holds, and then write nothing.
        let declared = self.registry.subscriptions();
        if !declared.is_held_by(&store.subscriptions().await.map_err(EngineError::Store)?) {
            store.set_subscriptions(&declared).await.map_err(EngineError::Store)?;
        }
        if !self.concurrency.is_empty() {
            let held = store.concurrency_rules().await.map_err(EngineError::Store)?;
            for rule in self.concurrency.iter().filter(|rule| !held.contains(rule)) {
                store.put_concurrency(rule).await.map_err(EngineError::Store)?;
            }
        }
        let notices = store.notices();
        let local = Arc::new(Local::new(store, self.clock, self.registry, self.config, notices.is_some()));
        local.record_worker().await;
        let client = attached(&local);
        client.declare_schedules(&self.schedules).await.map_err(|e| match e {
            crate::error::ClientError::Store(error) => EngineError::Store(error),
            other => EngineError::InvalidSchedule(other.to_string()),
        })?;
        let claimer = tokio::spawn(claim_loop(Arc::clone(&local)));
        let heartbeat = tokio::spawn(heartbeat_loop(Arc::clone(&local)));
        if let Some(notices) = notices {
            tokio::spawn(notices_loop(Arc::clone(&local), notices));
        }
        if let Some(every) = local.config.sweep_every {
            tokio::spawn(sweep_loop(Arc::clone(&local), client.clone(), every));
        }
        // Housekeeping off the start path: the worker claims runs meanwhile.
        tokio::spawn(start_up_chores(Arc::clone(&local), client.clone()));
        Ok(Engine { client, local, loops: Mutex::new(Some((claimer, heartbeat))) })
    }
}

/// A running worker plus a [`Client`] for its store (an `Engine` derefs to its client).
///
/// ```
/// use cairn::prelude::*;
/// use cairn::MemoryStore;
///
/// async fn double(ctx: Ctx, n: u64) -> Result<u64, WorkflowError> {
///     ctx.step("double", || async move { Ok::<_, StepError>(n * 2) }).await
/// }
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let engine = Engine::builder().store(MemoryStore::new()).register("double", 1, double).start().await?;
/// let run = engine.client().start("double", &21u64).await?;
/// let answer: u64 = run.result().await?;
/// assert_eq!(answer, 42);
/// engine.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Engine {
    client: Client,
    local: Arc<Local>,
    loops: Mutex<Option<(tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>)>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("worker_id", &self.local.config.worker_id).finish()
    }
}

impl Engine {
    /// A builder with default settings.
    pub fn builder() -> EngineBuilder {
        EngineBuilder {
            store: None,
            clock: Arc::new(SystemClock),
            registry: Registry::default(),
            duplicate: None,
            config: Config::default(),
            schedules: Vec::new(),
            concurrency: Vec::new(),
        }
    }

    /// A client for this engine's store that knows its workflows.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// This worker's lease identity.
    pub fn worker_id(&self) -> &str {
        &self.local.config.worker_id
    }

    /// Shuts down gracefully within the grace period set with
    /// [`EngineBuilder::shutdown_grace`] (default 30 s); see [`Engine::shutdown_within`].
    pub async fn shutdown(&self) {
        self.shutdown_within(self.local.config.shutdown_grace).await;
    }

    /// Stops claiming, stops every run at its next step boundary (steps in flight may finish and
    /// commit for up to `grace`; past it their cancellation tokens fire and their results are
    /// discarded), and hands every lease back, including those of runs still loading their
    /// journals, so another worker (or the next start) resumes them at once rather than after
    /// the lease expires. Runs lose nothing: the journal has every committed step.
    ///
    /// ```
    /// # use cairn::prelude::*;
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(cairn::MemoryStore::new()).start().await?;
    /// engine.shutdown_within(std::time::Duration::from_secs(5)).await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn shutdown_within(&self, grace: Duration) {
        *lock(&self.local.drain_for) = grace;
        self.local.draining.cancel();
        let loops = lock(&self.loops).take();
        if let Some((claimer, heartbeat)) = loops {
            // The claim loop returns once its runs have stopped (or were aborted after the grace).
            let _ = claimer.await;
            self.local.shutdown.cancel();
            let _ = heartbeat.await;
            let me = ForgetWorkers { ids: vec![self.local.config.worker_id.clone()], dead_before: None };
            if let Err(error) = self.local.store.forget_workers(&me).await {
                tracing::warn!("could not remove this worker's record: {error}");
            }
        }
        // Runs aborted mid-way: hand their leases back here.
        let active: Vec<Arc<RunShared>> = lock(&self.local.active).drain().map(|(_, run)| run).collect();
        for run in active {
            if let Err(error) = run.release().await {
                tracing::warn!("run {}: could not hand its lease back: {error}", run.id);
            }
            self.local.notify_watchers(&run.id, None);
        }
        let loading: Vec<(RunId, (u64, u64))> = lock(&self.local.loading).drain().collect();
        for (run_id, (epoch, after_seq)) in loading {
            settle(&self.local, &run_id, epoch, after_seq, RunUpdate::Release).await;
            self.local.notify_watchers(&run_id, None);
        }
    }
}
