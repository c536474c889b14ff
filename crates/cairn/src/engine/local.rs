//! What the worker side of an engine shares between its loops, its runs and its clients; what
//! it offers the runs it executes (`Host`, `RunSetup`) and the clients attached to it (`Attachment`).

use super::config::Config;
use crate::attach::{Attachment, Host};
use crate::client::Client;
use crate::clock::{Clock, wall_now};
use crate::registry::Registry;
use crate::run::{RunSetup, RunShared, WorkerSetup};
use crate::run_core::{Ended, InputCheck, Limits};
use cairn_journal::FastMap;
use cairn_store::{ClaimRequest, Request, RunId, SignalRecord, Store, Timestamp, WorkerRecord};
use serde_json::value::RawValue;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// What the worker side of an engine shares between its loops, its runs and its clients.
pub(crate) struct Local {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) registry: Registry,
    pub(super) config: Config,
    pub(super) active: Mutex<FastMap<RunId, Arc<RunShared>>>,
    /// Runs claimed and still loading their journals: `(epoch, last_seq)` to hand their leases
    /// back with if the worker stops first.
    pub(super) loading: Mutex<FastMap<RunId, (u64, u64)>>,
    /// The lease this worker holds on each run it claimed (loading or executing), as far as the
    /// store last confirmed: its epoch and until when. Heartbeats renew these; a run whose lease
    /// runs out unconfirmed is stopped (see `heartbeat_loop`).
    pub(super) leases: Mutex<FastMap<RunId, Lease>>,
    pub(super) running: AtomicUsize,
    /// The last claim took as many runs as there was room for: more may be waiting.
    pub(super) at_capacity: AtomicBool,
    /// The claim loop is taking runs: a claim is under way, or the last one was full.
    pub(super) claiming: AtomicBool,
    /// The store reports runs ending or signalled in other processes (see
    /// [`Host::notices_reported`]).
    remote_notices: bool,
    pub(super) claimer: Notify,
    pub(super) waiters: Mutex<FastMap<RunId, Vec<oneshot::Sender<Option<Ended>>>>>,
    /// Fired when the worker starts shutting down: stop claiming, stop runs at step boundaries.
    pub(super) draining: CancellationToken,
    /// How long the drain lets steps in flight finish (set by the shutdown).
    pub(super) drain_for: Mutex<Duration>,
    /// Fired once every run has stopped: the heartbeat and notice loops end.
    pub(super) shutdown: CancellationToken,
    /// This worker's record in the store as of its start; [`Local::worker_record`] brings its
    /// times up to date.
    worker: WorkerRecord,
    /// What its runs share, while any holds it ([`run_setup`]).
    worker_setup: Mutex<Weak<WorkerSetup>>,
}

/// A lease this worker holds: the run's epoch, and until when the store last confirmed it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    pub(crate) epoch: u64,
    pub(crate) until: Timestamp,
}

/// Removes `id`'s entry from `map` if `keep_out` says it is the one to remove.
fn remove_if<V>(map: &mut FastMap<RunId, V>, id: &RunId, keep_out: impl FnOnce(&V) -> bool) {
    if map.get(id).is_some_and(keep_out) {
        map.remove(id);
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
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
            leases: Mutex::new(FastMap::default()),
            running: AtomicUsize::new(0),
            at_capacity: AtomicBool::new(false),
            claiming: AtomicBool::new(false),
            remote_notices,
            claimer: Notify::new(),
            waiters: Mutex::new(FastMap::default()),
            draining: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            worker,
            worker_setup: Mutex::new(Weak::new()),
        }
    }

    /// This worker's record in the store, as of now: live for one lease from now.
    fn worker_record(&self) -> WorkerRecord {
        let now = wall_now();
        WorkerRecord { last_seen: now, live_until: now + self.config.lease, ..self.worker.clone() }
    }

    /// Records (or refreshes) this worker in the store; a failure is logged, not fatal: the
    /// worker still works, it is only missing from `cairn workers` until the next heartbeat.
    pub(crate) async fn record_worker(&self) {
        if let Err(error) = self.store.record_worker(&self.worker_record()).await {
            tracing::warn!("could not record this worker in the store: {error}");
        }
    }

    /// Records the versions this worker serves in the store's registry, which outlives it (what
    /// lets a client refuse a start of a workflow nobody serves). A failure is logged: a start
    /// of these versions from a client without them may then be refused until a worker records
    /// them.
    pub(crate) async fn record_served(&self) {
        if self.worker.serves.is_empty() {
            return;
        }
        if let Err(error) = self.store.record_served(&self.worker.serves, wall_now()).await {
            tracing::warn!("could not record the workflows this worker serves: {error}");
        }
    }

    /// Says at info that this worker started, with its id and the versions it serves (a client
    /// without workflows says nothing).
    pub(crate) fn log_started(&self) {
        if !self.worker.serves.is_empty() {
            let serves: Vec<String> = self.worker.serves.iter().map(|key| key.tag()).collect();
            tracing::info!(worker = %self.worker.id, serves = %serves.join(", "), "worker started");
        }
    }

    /// The live run with this id, if this worker executes it now.
    pub(crate) fn active(&self, id: &RunId) -> Option<Arc<RunShared>> {
        lock(&self.active).get(id).cloned()
    }

    /// Whether this worker holds `id`'s lease (it is loading or executing it): then it tells
    /// the run's watchers when the run stops here, whoever ends it.
    pub(crate) fn holds(&self, id: &RunId) -> bool {
        lock(&self.leases).contains_key(id)
    }

    /// When the first of this worker's leases runs out unless renewed (none: it holds none).
    pub(crate) fn earliest_lease_end(&self) -> Option<Timestamp> {
        lock(&self.leases).values().map(|lease| lease.until).min()
    }

    /// Whether this worker's lease on run `id` is confirmed until after now (a run it does not
    /// hold has none).
    pub(crate) fn lease_held(&self, id: &RunId) -> bool {
        lock(&self.leases).get(id).is_some_and(|lease| lease.until > wall_now())
    }

    /// The execution of run `id` under lease `epoch` ended here (`ended`: how the run ended, if
    /// it did). Only that execution's entries go: the run may already execute here again under a
    /// newer lease (a suspension woken at once by a signal is claimed again while the execution
    /// that suspended it is still finishing), and removing that one's would stop it unseen.
    pub(crate) fn run_finished(&self, id: &RunId, epoch: u64, ended: Option<Ended>) {
        remove_if(&mut lock(&self.active), id, |run| run.epoch == epoch);
        remove_if(&mut lock(&self.loading), id, |(loading, _)| *loading == epoch);
        remove_if(&mut lock(&self.leases), id, |lease| lease.epoch == epoch);
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.notify_watchers(id, ended);
        // A freed slot matters only if the last claim was cut short by capacity; new, woken and
        // signalled runs wake the claimer themselves.
        if self.at_capacity.load(Ordering::SeqCst) {
            self.wake_claimer();
        }
    }

    /// Brings a claim request's clocks and limit up to date.
    pub(crate) fn refresh(&self, request: &mut ClaimRequest, limit: usize) {
        let lease_now = wall_now();
        request.now = self.clock.now();
        request.lease_now = lease_now;
        request.lease_until = lease_now + self.config.lease;
        request.limit = limit;
    }
}

/// A client attached to this worker.
pub(crate) fn attached(local: &Arc<Local>) -> Client {
    let (store, clock) = (Arc::clone(&local.store), Arc::clone(&local.clock));
    Client::attached(Arc::clone(local) as Arc<dyn Attachment>, store, clock, local.config.max_payload_bytes)
}

impl Host for Local {
    fn wake_claimer(&self) {
        self.claimer.notify_one();
    }

    fn notices_reported(&self) -> bool {
        self.remote_notices
    }

    fn successor(&self, workflow: &str) -> (Option<u32>, Option<InputCheck>) {
        let latest = self.registry.latest(workflow);
        let check = latest.and_then(|version| self.registry.get(workflow, version));
        (latest, check.map(|registered| Arc::clone(&registered.check_input)))
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

    fn default_run_timeout(&self) -> Option<Duration> {
        self.config.default_run_timeout
    }

    fn claiming(&self) -> bool {
        self.claiming.load(Ordering::SeqCst)
    }

    fn watch(&self, id: &RunId) -> oneshot::Receiver<Option<Ended>> {
        let (sender, receiver) = oneshot::channel();
        let mut waiters = lock(&self.waiters);
        let list = waiters.entry(id.clone()).or_default();
        list.retain(|s| !s.is_closed());
        list.push(sender);
        receiver
    }

    fn notify_watchers(&self, id: &RunId, ended: Option<Ended>) {
        if let Some(list) = lock(&self.waiters).remove(id) {
            for sender in list {
                let _ = sender.send(ended.clone());
            }
        }
    }

    fn runs_here(&self, id: &RunId) -> bool {
        self.active(id).is_some()
    }

    fn request(&self, id: &RunId, request: &Request) {
        if let Some(run) = self.active(id) {
            run.request(request);
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
    // Made once while any run holds it (`Local` keeps it weakly: it holds a client of `Local`).
    let worker = {
        let mut kept = lock(&local.worker_setup);
        kept.upgrade().unwrap_or_else(|| {
            let setup = Arc::new(WorkerSetup {
                client: attached(local),
                host: Arc::clone(local) as Arc<dyn Host>,
                poll_interval: local.config.poll_interval,
                limits: Limits {
                    max_payload_bytes: local.config.max_payload_bytes,
                    suspend_grace: local.config.suspend_grace,
                },
            });
            *kept = Arc::downgrade(&setup);
            setup
        })
    };
    RunSetup {
        worker,
        step_defaults: registry.step_defaults(workflow),
        rate_turns: registry.rate_limits(workflow).iter().map(|limit| limit.turns_of(state.input())).collect(),
    }
}
