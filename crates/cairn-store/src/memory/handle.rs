//! [`MemoryStore`]: the handle, and `Store` over its state.

use super::inner::{Due, Inner, due_key, group_of};
use crate::lifecycle::{self};
use crate::store::StoreFuture;
use crate::store::{EventStore, FlowStore, JournalStore, RunStore, ScheduleStore, SignalStore, WorkerStore};
use crate::types::{
    Append, CancelOutcome, ClaimRequest, ControlRequest, CreatedRun, EventPage, EventQuery, EventRecord, FireSchedule,
    ForgetWorkers, HeartbeatRequest, LeaseStatus, NewRun, NewSignal, PauseOutcome, PauseSchedule, PruneRequest,
    PutSchedule, ResumeRequest, RunFilter, RunId, RunPage, RunRecord, RunStatus, ScheduleRecord, ServedWorkflow,
    SetSubscriptions, SignalRecord, StartSignal, StoreError, Subscription, VersionCount, WorkerRecord, WorkflowCount,
    WorkflowKey,
};
use crate::types::{ConcurrencyRule, TakeRate};
use cairn_journal::flow::WaitingFor;
use cairn_journal::flow::{rate_forgets_before, rate_verdict};
use cairn_journal::{Event, FastSet, JournalEntry, SignalId, Timestamp};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

/// A store in process memory: fast, shared by clones of one value, gone when the process exits.
///
/// For tests and benchmarks; it follows the same contract as the durable stores.
///
/// ```
/// # tokio_test_block_on(async {
/// use cairn_store::{MemoryStore, RunId, RunStore};
/// let store = MemoryStore::new();
/// assert!(store.get_run(&RunId::new("nope")).await.unwrap().is_none());
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts back a run as a durable store recorded it: for a store that keeps its own files and
    /// serves from memory (`cairn-jsonl`'s `JsonlStore`, when it opens). Concurrency groups are
    /// counted by [`restore_concurrency`](Self::restore_concurrency), called once every run is back.
    pub fn restore(&self, run: RunRecord, journal: Vec<JournalEntry>, signals: Vec<SignalRecord>) {
        let mut inner = self.lock();
        if let Some(key) = &run.idempotency_key {
            inner.idempotency.insert((run.workflow.clone(), key.clone()), run.id.clone());
        }
        inner.next_signal = signals.iter().map(|s| s.id.0).fold(inner.next_signal, i64::max);
        inner.journals.insert(run.id.clone(), journal);
        inner.signals.insert(run.id.clone(), signals);
        if let (true, Some(key)) = (run.is_debouncing(), &run.rare().debounce_key) {
            inner.debouncing.insert((run.workflow.clone(), key.clone()), run.id.clone());
        }
        let (id, place) = (run.id.clone(), due_key(&run));
        inner.grouped |= run.concurrency.is_some();
        // A restored run's version counts as served, as SQL stores' migration counts their runs'.
        inner.note_served(
            crate::types::WorkflowKey { name: run.workflow.to_string(), version: run.version },
            run.created_at,
        );
        inner.runs.insert(id.clone(), Box::new(run));
        inner.move_due(&id, None, place);
    }

    /// Counts the slots the restored runs hold and queues the pending ones again, each group's
    /// admitted in creation order up to its limit (used when a file store opens: admissions
    /// are not written to the files of the runs they admit).
    pub fn restore_concurrency(&self, rules: Vec<ConcurrencyRule>) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        inner.rules = rules.into_iter().map(|r| (r.workflow.clone(), r)).collect();
        let mut groups = BTreeSet::new();
        for (id, run) in inner.runs.iter_mut().filter(|(_, run)| run.concurrency.is_some()) {
            let group = group_of(run);
            if run.status == RunStatus::Pending {
                let before = due_key(run);
                run.waiting_for = Some(WaitingFor::Concurrency);
                if let Some(place) = before {
                    inner.due.remove(&(place, id.clone()));
                    inner.fair.remove(run, id);
                }
                inner.waiting.insert((group.0.clone(), group.1.clone(), run.created_at, id.clone()));
            } else if lifecycle::holds_a_slot(run) {
                *inner.held.entry(group.clone()).or_default() += 1;
            }
            groups.insert(group);
        }
        for group in groups {
            inner.admit(&group);
        }
    }

    /// Puts back the schedules a durable store recorded (used when a file store opens).
    pub fn restore_schedules(&self, schedules: Vec<ScheduleRecord>) {
        self.lock().schedules.extend(schedules.into_iter().map(|s| (s.name.clone(), s)));
    }

    /// Restores recorded events (as [`EventStore::record_event`] records them, in order).
    pub fn restore_events(&self, events: Vec<EventRecord>) {
        let mut inner = self.lock();
        for event in &events {
            inner.record_event(event);
        }
    }

    /// The record of event `id`, if it is recorded.
    pub fn event(&self, id: &str) -> Option<EventRecord> {
        let inner = self.lock();
        let at = inner.event_times.get(id)?;
        inner.events.get(&(*at, id.to_owned())).cloned()
    }

    /// How many events are recorded.
    pub fn event_count(&self) -> usize {
        self.lock().events.len()
    }

    /// Every recorded event, oldest first.
    pub fn all_events(&self) -> Vec<EventRecord> {
        self.lock().events.values().cloned().collect()
    }

    /// The newest run of `id`'s chain of continuations, where a signal sent to `id` goes.
    pub fn newest(&self, id: &RunId) -> RunId {
        self.lock().newest(id)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied change: every method checks
        // before it mutates. So a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl RunStore for MemoryStore {
    fn create_run(&self, run: NewRun) -> StoreFuture<'_, CreatedRun> {
        let result = self.lock().create(run);
        Box::pin(async move { result })
    }

    fn get_run<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Option<RunRecord>> {
        let result = self.lock().run(id);
        Box::pin(async move { Ok(result) })
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, RunPage> {
        let inner = self.lock();
        let mut runs: Vec<RunRecord> =
            inner.runs.values().filter(|r| filter.matches(r)).map(|r| RunRecord::clone(r)).collect();
        drop(inner);
        runs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        let page = RunPage::cut(runs, filter.page_size());
        let page = if filter.without_payloads { page.without_payloads() } else { page };
        Box::pin(async move { Ok(page) })
    }

    fn claim<'a>(&'a self, request: &'a ClaimRequest) -> StoreFuture<'a, Vec<RunRecord>> {
        let tags: FastSet<(&str, u32)> = request.workflows.iter().map(|k| (k.name.as_str(), k.version)).collect();
        let mut inner = self.lock();
        let mut claimed = inner.claim_due(request, &tags, request.limit);
        // Then woken runs that gave their slot up (or whose debounce window closed) wait for one
        // again, and those their groups admit at once are claimed while the claim has room. Only
        // a run placed under a rule can: none, no scan.
        if inner.grouped {
            let woken = inner.due_runs(Due::Timer, Some(request.now), &tags, usize::MAX, &lifecycle::requeues);
            // Oldest first: a group with room (so nobody waiting before) admits each as it
            // queues, and must admit the oldest.
            let mut woken: Vec<(Timestamp, RunId)> =
                woken.into_iter().filter_map(|(_, id)| Some((inner.runs.get(&id)?.created_at, id))).collect();
            woken.sort_unstable();
            for (_, id) in &woken {
                let hold = inner.rule_hold(id);
                let _ = inner.modify(id, |run| lifecycle::requeue(run, hold, request.now));
            }
            if !woken.is_empty() && claimed.len() < request.limit {
                let more = inner.claim_due(request, &tags, request.limit - claimed.len());
                claimed.extend(more);
            }
        }
        Box::pin(async move { Ok(claimed) })
    }

    fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>> {
        let mut inner = self.lock();
        let statuses = request
            .runs
            .iter()
            .map(|(id, epoch)| {
                let status =
                    inner.modify(id, |run| lifecycle::heartbeat(run, &request.owner, *epoch, request.lease_until));
                status.unwrap_or(LeaseStatus { run_id: id.clone(), held: false, pending: None })
            })
            .collect();
        Box::pin(async move { Ok(statuses) })
    }

    fn cancel(&self, request: ControlRequest) -> StoreFuture<'_, CancelOutcome> {
        let result = (|| {
            let mut inner = self.lock();
            let (outcome, last_seq) = inner.modify(&request.run_id, |run| {
                lifecycle::cancel(run, &request.reason, request.at, request.lease_now).map(|o| (o, run.last_seq))
            })??;
            if outcome == CancelOutcome::Cancelled {
                let cancelled = Event::Cancelled { reason: request.reason };
                inner
                    .journals
                    .entry(request.run_id)
                    .or_default()
                    .push(JournalEntry::new(last_seq, request.at, cancelled));
            }
            Ok(outcome)
        })();
        Box::pin(async move { result })
    }

    fn pause(&self, request: ControlRequest) -> StoreFuture<'_, PauseOutcome> {
        let mut inner = self.lock();
        let hold = inner.rule_hold(&request.run_id);
        let result = inner
            .modify(&request.run_id, |run| lifecycle::pause(run, &request.reason, request.at, request.lease_now, hold));
        Box::pin(async move { result? })
    }

    fn resume(&self, request: ResumeRequest) -> StoreFuture<'_, ()> {
        let result = self.lock().modify(&request.run_id, |run| lifecycle::resume(run, request.at));
        Box::pin(async move { result? })
    }

    fn start_with_signal(&self, run: NewRun, signal: StartSignal) -> StoreFuture<'_, (CreatedRun, SignalId)> {
        let result = (|| {
            run.check_signal_start()?;
            let mut inner = self.lock();
            let existing = match inner.by_key(&run)? {
                Some(existing) => Some(existing),
                None => inner.run(&run.id),
            };
            let sent_at = run.created_at;
            let created = match existing {
                Some(existing) => run.existing_to_signal(existing)?,
                None => inner.create(run)?,
            };
            let new = NewSignal { run_id: created.run.id.clone(), name: signal.name, payload: signal.payload, sent_at };
            let id = inner.signal(new)?;
            Ok((created, id))
        })();
        Box::pin(async move { result })
    }

    fn prune(&self, request: PruneRequest) -> StoreFuture<'_, Vec<RunId>> {
        let mut inner = self.lock();
        let mut doomed: Vec<RunId> =
            inner.runs.values().filter(|run| request.selects(run)).map(|run| run.id.clone()).collect();
        doomed.sort();
        doomed.truncate(request.limit);
        if !request.dry_run {
            for id in &doomed {
                if let Some(run) = inner.runs.remove(id)
                    && let Some(key) = run.idempotency_key
                {
                    inner.idempotency.remove(&(run.workflow.clone(), key));
                }
                inner.journals.remove(id);
                inner.signals.remove(id);
            }
            if let Some(before) = request.events_before {
                inner.forget_events(before, request.limit);
            }
        }
        drop(inner);
        Box::pin(async move { Ok(doomed) })
    }

    fn version_counts(&self) -> StoreFuture<'_, Vec<VersionCount>> {
        let mut counts: BTreeMap<WorkflowKey, u64> = BTreeMap::new();
        for run in self.lock().runs.values().filter(|run| run.status.needs_worker()) {
            *counts.entry(WorkflowKey { name: run.workflow.to_string(), version: run.version }).or_default() += 1;
        }
        let counts = counts.into_iter().map(|(key, runs)| VersionCount { key, runs }).collect();
        Box::pin(async move { Ok(counts) })
    }

    fn workflow_counts(&self) -> StoreFuture<'_, Vec<WorkflowCount>> {
        let mut counts: BTreeMap<(String, &'static str), (RunStatus, u64)> = BTreeMap::new();
        for run in self.lock().runs.values() {
            counts.entry((run.workflow.to_string(), run.status.as_str())).or_insert((run.status, 0)).1 += 1;
        }
        let counts = counts
            .into_iter()
            .map(|((workflow, _), (status, runs))| WorkflowCount { workflow, status, runs })
            .collect();
        Box::pin(async move { Ok(counts) })
    }

    fn next_wake_at<'a>(&'a self, workflows: &'a [WorkflowKey]) -> StoreFuture<'a, Option<Timestamp>> {
        let tags: FastSet<(&str, u32)> = workflows.iter().map(|k| (k.name.as_str(), k.version)).collect();
        let inner = self.lock();
        let timer = inner.due_runs(Due::Timer, None, &tags, 1, &|_| true).first().map(|(at, _)| *at);
        let names: FastSet<&str> = workflows.iter().map(|k| k.name.as_str()).collect();
        let firing = (inner.schedules.values())
            .filter(|s| !s.paused && names.contains(s.workflow.as_str()))
            .filter_map(|s| s.next_fire_at)
            .min();
        let next = timer.into_iter().chain(firing).min();
        Box::pin(async move { Ok(next) })
    }
}

impl JournalStore for MemoryStore {
    fn read_journal<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<JournalEntry>> {
        let result = self.lock().journals.get(id).cloned().unwrap_or_default();
        Box::pin(async move { Ok(result) })
    }

    fn append(&self, append: Append) -> StoreFuture<'_, ()> {
        let result = self.lock().append(append);
        Box::pin(async move { result })
    }
}

impl SignalStore for MemoryStore {
    fn signals<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<SignalRecord>> {
        let result = self.lock().signals.get(id).cloned().unwrap_or_default();
        Box::pin(async move { Ok(result) })
    }

    fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId> {
        let result = self.lock().signal(signal);
        Box::pin(async move { result })
    }
}

impl ScheduleStore for MemoryStore {
    fn put_schedule<'a>(&'a self, put: &'a PutSchedule) -> StoreFuture<'a, ScheduleRecord> {
        let mut inner = self.lock();
        let record = match inner.schedules.get_mut(&put.name) {
            Some(existing) => {
                if existing.spec != put.spec {
                    existing.next_fire_at = put.next_fire_at;
                }
                existing.workflow = put.workflow.clone();
                existing.spec = put.spec.clone();
                existing.input = put.input.clone();
                existing.updated_at = put.now;
                existing.clone()
            }
            None => {
                let record = ScheduleRecord {
                    name: put.name.clone(),
                    workflow: put.workflow.clone(),
                    spec: put.spec.clone(),
                    input: put.input.clone(),
                    paused: false,
                    next_fire_at: put.next_fire_at,
                    last_fired_at: None,
                    created_at: put.now,
                    updated_at: put.now,
                };
                inner.schedules.insert(put.name.clone(), record.clone());
                record
            }
        };
        Box::pin(async move { Ok(record) })
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<ScheduleRecord>> {
        let all = self.lock().schedules.values().cloned().collect();
        Box::pin(async move { Ok(all) })
    }

    fn due_schedules<'a>(
        &'a self,
        workflows: &'a [String],
        now: Timestamp,
        limit: usize,
    ) -> StoreFuture<'a, Vec<ScheduleRecord>> {
        let mut due: Vec<ScheduleRecord> = (self.lock().schedules.values())
            .filter(|s| {
                !s.paused && s.next_fire_at.is_some_and(|at| at <= now) && workflows.iter().any(|w| *w == s.workflow)
            })
            .cloned()
            .collect();
        due.sort_by_key(|s| s.next_fire_at);
        due.truncate(limit);
        Box::pin(async move { Ok(due) })
    }

    fn fire_schedule(&self, fire: FireSchedule) -> StoreFuture<'_, Option<Vec<CreatedRun>>> {
        let result = self.lock().fire(fire);
        Box::pin(async move { result })
    }

    fn pause_schedule<'a>(&'a self, change: &'a PauseSchedule) -> StoreFuture<'a, ScheduleRecord> {
        let result = match self.lock().schedules.get_mut(&change.name) {
            Some(schedule) => {
                if schedule.paused != change.paused {
                    schedule.paused = change.paused;
                    if !change.paused {
                        schedule.next_fire_at = change.next_fire_at;
                    }
                    schedule.updated_at = change.now;
                }
                Ok(schedule.clone())
            }
            None => Err(StoreError::ScheduleNotFound(change.name.clone())),
        };
        Box::pin(async move { result })
    }

    fn delete_schedule<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool> {
        let deleted = self.lock().schedules.remove(name).is_some();
        Box::pin(async move { Ok(deleted) })
    }
}

impl FlowStore for MemoryStore {
    fn put_concurrency<'a>(&'a self, rule: &'a ConcurrencyRule) -> StoreFuture<'a, ()> {
        let result = rule.check().map_err(StoreError::InvalidInput).map(|()| {
            let mut inner = self.lock();
            inner.rules.insert(rule.workflow.clone(), rule.clone());
            inner.admit_workflow(&rule.workflow);
        });
        Box::pin(async move { result })
    }

    fn delete_concurrency<'a>(&'a self, workflow: &'a str) -> StoreFuture<'a, bool> {
        let mut inner = self.lock();
        let deleted = inner.rules.remove(workflow).is_some();
        inner.admit_workflow(workflow);
        Box::pin(async move { Ok(deleted) })
    }

    fn concurrency_rules(&self) -> StoreFuture<'_, Vec<ConcurrencyRule>> {
        let rules = self.lock().rules.values().cloned().collect();
        Box::pin(async move { Ok(rules) })
    }

    fn take_rate<'a>(&'a self, take: &'a TakeRate) -> StoreFuture<'a, Option<Timestamp>> {
        let (now, period) = (take.now.as_millis(), take.period_ms());
        let mut inner = self.lock();
        let granted = inner.rates.entry(take.bucket.clone()).or_default();
        granted.retain(|at| *at > rate_forgets_before(now, period));
        let verdict = rate_verdict(granted, take.limit, period, now);
        if verdict.is_none() {
            granted.push(now);
        }
        Box::pin(async move { Ok(verdict.map(Timestamp::from_millis)) })
    }
}

impl EventStore for MemoryStore {
    fn record_event<'a>(&'a self, event: &'a EventRecord) -> StoreFuture<'a, ()> {
        self.lock().record_event(event);
        Box::pin(async move { Ok(()) })
    }

    fn events<'a>(&'a self, query: &'a EventQuery) -> StoreFuture<'a, EventPage> {
        let events = self.lock().events(query);
        Box::pin(async move { Ok(EventPage::cut(events, query.limit)) })
    }

    fn set_subscriptions<'a>(&'a self, request: &'a SetSubscriptions) -> StoreFuture<'a, ()> {
        let mut inner = self.lock();
        inner.subscriptions.retain(|(workflow, _), _| !request.workflows.contains(workflow));
        for s in &request.subscriptions {
            inner.subscriptions.insert((s.workflow.clone(), s.pattern.clone()), s.version);
        }
        drop(inner);
        Box::pin(async move { Ok(()) })
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        let subscriptions = (self.lock().subscriptions.iter())
            .map(|((workflow, pattern), version)| Subscription {
                workflow: workflow.clone(),
                pattern: pattern.clone(),
                version: *version,
            })
            .collect();
        Box::pin(async move { Ok(subscriptions) })
    }
}

impl WorkerStore for MemoryStore {
    fn record_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()> {
        self.lock().workers.insert(worker.id.clone(), worker.clone());
        Box::pin(async move { Ok(()) })
    }

    fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>> {
        let workers = self.lock().workers.values().cloned().collect();
        Box::pin(async move { Ok(workers) })
    }

    fn record_served<'a>(&'a self, serves: &'a [WorkflowKey], at: Timestamp) -> StoreFuture<'a, ()> {
        let mut inner = self.lock();
        for key in serves {
            inner.note_served(key.clone(), at);
        }
        drop(inner);
        Box::pin(async move { Ok(()) })
    }

    fn served_workflows(&self) -> StoreFuture<'_, Vec<ServedWorkflow>> {
        let served = (self.lock().served.iter())
            .map(|(key, (first, last))| ServedWorkflow { key: key.clone(), first_served: *first, last_served: *last })
            .collect();
        Box::pin(async move { Ok(served) })
    }

    fn forget_workers<'a>(&'a self, request: &'a ForgetWorkers) -> StoreFuture<'a, u64> {
        let mut inner = self.lock();
        let before = inner.workers.len();
        inner.workers.retain(|_, worker| !request.selects(worker));
        let forgotten = (before - inner.workers.len()) as u64;
        drop(inner);
        Box::pin(async move { Ok(forgotten) })
    }
}
