use crate::lifecycle::{self, slot_state};
use crate::store::{Store, StoreFuture};
use crate::types::{
    Append, CancelOutcome, ClaimRequest, ControlRequest, CreatedRun, FireSchedule, ForgetWorkers, HeartbeatRequest,
    LeaseStatus, NewRun, NewSignal, PauseOutcome, PauseSchedule, PruneRequest, PutSchedule, ResumeRequest, RunFilter,
    RunId, RunPage, RunRecord, RunStatus, RunUpdate, ScheduleRecord, SetSubscriptions, SignalRecord, StartSignal,
    StoreError, Subscription, VersionCount, WorkerRecord, WorkflowCount, WorkflowKey,
};
use crate::types::{ConcurrencyRule, TakeRate};
use cairn_journal::flow::WaitingFor;
use cairn_journal::flow::{claim_rank, fair_seq, rate_forgets_before, rate_verdict};
use cairn_journal::{Event, FastMap, FastSet, JournalEntry, SignalId, StepPath, Timestamp, Trim};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

/// A store in process memory: fast, shared by clones of one value, gone when the process exits.
///
/// For tests and benchmarks; it follows the same contract as the durable stores.
///
/// ```
/// # tokio_test_block_on(async {
/// use cairn_store::{MemoryStore, Store, RunId};
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

#[derive(Debug, Default)]
struct Inner {
    /// Boxed: the table grows by copying, and a run's record is large.
    runs: FastMap<RunId, Box<RunRecord>>,
    journals: FastMap<RunId, Vec<JournalEntry>>,
    signals: FastMap<RunId, Vec<SignalRecord>>,
    idempotency: FastMap<(String, String), RunId>,
    next_signal: i64,
    /// Runs that are or will become claimable, by bucket and rank: the index claims and timers
    /// scan.
    due: BTreeSet<(DuePlace, RunId)>,
    /// Ready pending runs by priority, fairness key and fairness sequence: where a new run of a
    /// key queues ([`fair_seq`]).
    fair: BTreeSet<(i32, String, i64, RunId)>,
    workers: BTreeMap<String, WorkerRecord>,
    /// Topic subscriptions: the version each (workflow, pattern) starts.
    subscriptions: BTreeMap<(String, String), u32>,
    /// Schedules by name.
    schedules: BTreeMap<String, ScheduleRecord>,
    /// Concurrency rules by workflow.
    rules: BTreeMap<String, ConcurrencyRule>,
    /// Slots held per concurrency group (workflow, key).
    held: FastMap<(String, String), u32>,
    /// Runs waiting for a slot: group, then creation order.
    waiting: BTreeSet<(String, String, Timestamp, RunId)>,
    /// Rate limits' grants within their windows, by bucket.
    rates: FastMap<String, Vec<i64>>,
    /// The run debouncing under each (workflow, debounce key), until its window closes.
    debouncing: FastMap<(String, String), RunId>,
    /// Whether any run was placed under a concurrency rule (its rule may be gone since).
    grouped: bool,
}

/// Why a run may become claimable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// Pending since its creation time.
    Pending,
    /// Suspended until its `wake_at`.
    Timer,
    /// Running under a lease that expires.
    Lease,
}

/// A run's place in the `due` index: its bucket, then (for pending runs) its priority and
/// fairness sequence, then when it became or becomes due. Timers and leases are ordered by time
/// alone, so a scan of their bucket can stop at the first one not yet due.
type DuePlace = (Due, Reverse<i32>, i64, Timestamp);

fn due_key(run: &RunRecord) -> Option<DuePlace> {
    match run.status {
        RunStatus::Pending if run.waiting_for.is_some() => None,
        RunStatus::Pending => Some((Due::Pending, Reverse(run.priority), run.fair_seq, run.created_at)),
        RunStatus::Suspended => run.wake_at.map(|w| (Due::Timer, Reverse(0), 0, w)),
        RunStatus::Running => run.lease_expires_at.map(|e| (Due::Lease, Reverse(0), 0, e)),
        _ => None,
    }
}

/// A ready pending run's entry in the fairness index.
fn fair_entry(run: &RunRecord, id: &RunId) -> (i32, String, i64, RunId) {
    (run.priority, run.fairness_key.clone().unwrap_or_default(), run.fair_seq, id.clone())
}

/// The earliest place of a bucket (or of a priority's pending runs).
fn first_place(due: Due, priority: i32) -> (DuePlace, RunId) {
    ((due, Reverse(priority), i64::MIN, Timestamp::from_millis(i64::MIN)), RunId::new(""))
}

/// A grouped run's concurrency group: its workflow and key.
fn group_of(run: &RunRecord) -> (String, String) {
    (run.workflow.clone(), run.concurrency.as_ref().map(|c| c.key.clone()).unwrap_or_default())
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts back a run as a durable store recorded it (used when a file store opens).
    pub(crate) fn restore(&self, run: RunRecord, journal: Vec<JournalEntry>, signals: Vec<SignalRecord>) {
        let mut inner = self.lock();
        if let Some(key) = &run.idempotency_key {
            inner.idempotency.insert((run.workflow.clone(), key.clone()), run.id.clone());
        }
        inner.next_signal = signals.iter().map(|s| s.id.0).fold(inner.next_signal, i64::max);
        inner.journals.insert(run.id.clone(), journal);
        inner.signals.insert(run.id.clone(), signals);
        if let (true, Some(key)) = (run.is_debouncing(), &run.debounce_key) {
            inner.debouncing.insert((run.workflow.clone(), key.clone()), run.id.clone());
        }
        let (id, place) = (run.id.clone(), due_key(&run));
        inner.grouped |= run.concurrency.is_some();
        inner.runs.insert(id.clone(), Box::new(run));
        inner.move_due(&id, None, place);
    }

    /// Counts the slots the restored runs hold and queues the pending ones again, each group's
    /// admitted in creation order up to its limit (used when a file store opens: admissions
    /// are not written to the files of the runs they admit).
    pub(crate) fn restore_concurrency(&self, rules: Vec<ConcurrencyRule>) {
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
                    inner.fair.remove(&fair_entry(run, id));
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
    pub(crate) fn restore_schedules(&self, schedules: Vec<ScheduleRecord>) {
        self.lock().schedules.extend(schedules.into_iter().map(|s| (s.name.clone(), s)));
    }

    /// The newest run of `id`'s chain of continuations, where a signal sent to `id` goes.
    pub(crate) fn newest(&self, id: &RunId) -> RunId {
        self.lock().newest(id)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied change: every method checks
        // before it mutates. So a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Inner {
    /// A copy of run `id`'s record.
    fn run(&self, id: &RunId) -> Option<RunRecord> {
        self.runs.get(id).map(|run| RunRecord::clone(run))
    }

    /// Changes a run through `change`, keeping in step the `due` index
    /// and its concurrency group's slots and queue (admitting waiting runs as slots free up).
    fn modify<T>(&mut self, id: &RunId, change: impl FnOnce(&mut RunRecord) -> T) -> Result<T, StoreError> {
        let run = self.runs.get_mut(id).ok_or_else(|| StoreError::RunNotFound(id.clone()))?;
        let before = due_key(run);
        let slot_before = slot_state(run);
        let debounced = run.is_debouncing();
        let out = change(run);
        let after = due_key(run);
        let slot_after = slot_state(run);
        let moved = (slot_before != slot_after).then(|| (group_of(run), run.created_at));
        if debounced && !run.is_debouncing() {
            // Its window closed (it began, or was cancelled or paused).
            self.debouncing.remove(&(run.workflow.clone(), run.debounce_key.clone().unwrap_or_default()));
        }
        self.move_due(id, before, after);
        if let (Some((group, created_at)), Some((held, waited)), Some((holds, waits))) =
            (moved, slot_before, slot_after)
        {
            let released = held && !holds;
            if released && let Some(count) = self.held.get_mut(&group) {
                *count = count.saturating_sub(1);
            }
            let entry = (group.0.clone(), group.1.clone(), created_at, id.clone());
            match (waited, waits) {
                (true, false) => {
                    self.waiting.remove(&entry);
                }
                (false, true) => {
                    self.waiting.insert(entry);
                }
                _ => {}
            }
            if released || (!waited && waits) {
                self.admit(&group);
            }
        }
        Ok(out)
    }

    /// Moves run `id` (already changed) from `before` to `after` in the `due` index, and in or
    /// out of the fairness index as it becomes or stops being a ready pending run.
    fn move_due(&mut self, id: &RunId, before: Option<DuePlace>, after: Option<DuePlace>) {
        if before == after {
            return;
        }
        if let Some(place) = before {
            self.due.remove(&(place, id.clone()));
        }
        if let Some(place) = after {
            self.due.insert((place, id.clone()));
        }
        let pending = |place: &Option<DuePlace>| place.is_some_and(|p| p.0 == Due::Pending);
        if pending(&before) != pending(&after)
            && let Some(run) = self.runs.get(id)
        {
            let entry = fair_entry(run, id);
            if pending(&after) {
                self.fair.insert(entry);
            } else {
                self.fair.remove(&entry);
            }
        }
    }

    /// The fairness sequence of a new ready run of `priority` and `key` ([`fair_seq`]).
    fn next_fair_seq(&self, priority: i32, key: &str) -> i64 {
        let of_key =
            (priority, key.to_owned(), i64::MIN, RunId::new(""))..(priority, key.to_owned(), i64::MAX, RunId::new(""));
        let last = self.fair.range(of_key).next_back().map(|entry| entry.2);
        let head = (self.due.range(first_place(Due::Pending, priority)..).next())
            .filter(|(place, _)| place.0 == Due::Pending && place.1 == Reverse(priority))
            .map(|(place, _)| place.2);
        fair_seq(last, head)
    }

    /// Whether the concurrency rule of run `id`'s workflow keeps a suspended run's slot.
    fn rule_hold(&self, id: &RunId) -> bool {
        self.runs.get(id).and_then(|run| self.rules.get(&run.workflow)).is_some_and(|rule| rule.hold_suspended)
    }

    /// Admits the runs waiting for `group`'s slots, oldest first, while it has free ones.
    fn admit(&mut self, group: &(String, String)) {
        let limit = self.rules.get(&group.0).map_or(u32::MAX, |rule| rule.limit);
        loop {
            let held = self.held.get(group).copied().unwrap_or(0);
            if held >= limit {
                return;
            }
            let start = (group.0.clone(), group.1.clone(), Timestamp::from_millis(i64::MIN), RunId::new(""));
            let Some(next) = self.waiting.range(start..).next().filter(|w| w.0 == group.0 && w.1 == group.1).cloned()
            else {
                return;
            };
            self.waiting.remove(&next);
            if let Some(run) = self.runs.get_mut(&next.3) {
                let before = due_key(run);
                lifecycle::admit(run);
                let after = due_key(run);
                self.move_due(&next.3, before, after);
            }
            *self.held.entry(group.clone()).or_default() = held + 1;
        }
    }

    /// Admits whatever every group of `workflow` has room for (after its rule changed).
    fn admit_workflow(&mut self, workflow: &str) {
        let groups: BTreeSet<(String, String)> =
            self.waiting.iter().filter(|w| w.0 == workflow).map(|w| (w.0.clone(), w.1.clone())).collect();
        for group in groups {
            self.admit(&group);
        }
    }

    /// Claims up to `limit` due runs of `tags` for `request`: the ready pending runs in claim
    /// order, and the `limit` earliest of the woken runs (but those that must wait for a slot
    /// again) and of the lapsed leases, the first `limit` of all those in claim order
    /// ([`claim_rank`], equal ranks by id).
    fn claim_due(&mut self, request: &ClaimRequest, tags: &FastSet<(&str, u32)>, limit: usize) -> Vec<RunRecord> {
        let all = |_: &RunRecord| true;
        let mut ready = self.due_runs(Due::Pending, None, tags, limit, &all);
        ready.extend(self.due_runs(Due::Timer, Some(request.now), tags, limit, &|r| !lifecycle::requeues(r)));
        ready.extend(self.due_runs(Due::Lease, Some(request.lease_now), tags, limit, &all));
        let rank = |at: Timestamp, id: &RunId| {
            let run = self.runs.get(id);
            claim_rank(run.map_or(0, |r| r.priority), run.map_or(0, |r| r.fair_seq), at.as_millis())
        };
        let mut ready: Vec<_> = ready.into_iter().map(|(at, id)| (rank(at, &id), id)).collect();
        ready.sort_unstable();
        ready.truncate(limit);
        let mut claimed = Vec::with_capacity(ready.len());
        for (_, id) in ready {
            let run = self.modify(&id, |run| {
                lifecycle::claim(run, &request.owner, request.lease_until, request.now);
                run.clone()
            });
            claimed.extend(run.ok());
        }
        claimed
    }

    /// Up to `limit` runs of `tags` in one `due` bucket that are due by `by`, earliest first.
    fn due_runs(
        &self,
        due: Due,
        by: Option<Timestamp>,
        tags: &FastSet<(&str, u32)>,
        limit: usize,
        keep: &dyn Fn(&RunRecord) -> bool,
    ) -> Vec<(Timestamp, RunId)> {
        let start = first_place(due, if due == Due::Pending { i32::MAX } else { 0 });
        self.due
            .range(start..)
            .take_while(|(place, _)| place.0 == due && by.is_none_or(|by| place.3 <= by))
            .filter(|(_, id)| {
                self.runs.get(id).is_some_and(|r| tags.contains(&(r.workflow.as_str(), r.version)) && keep(r))
            })
            .take(limit)
            .map(|(place, id)| (place.3, id.clone()))
            .collect()
    }

    fn append(&mut self, append: Append) -> Result<(), StoreError> {
        let run = self.runs.get(&append.run_id).ok_or_else(|| StoreError::RunNotFound(append.run_id.clone()))?;
        lifecycle::check_append(run, append.epoch, append.after_seq)?;
        if let RunUpdate::Continue { successor, .. } = &append.update
            && self.runs.contains_key(&successor.id)
        {
            return Err(StoreError::DuplicateRunId(successor.id.clone()));
        }
        // The run's signals matter only to an append that consumes one or suspends after some.
        let needs_signals = append.consume_signal.is_some()
            || matches!(append.update, RunUpdate::Suspend { signals_after: Some(_), .. });
        let signals = if needs_signals { self.signals.get(&append.run_id).map_or(&[][..], Vec::as_slice) } else { &[] };
        if let Some(id) = append.consume_signal
            && !signals.iter().any(|s| s.id == id && s.consumed_seq.is_none())
        {
            return Err(StoreError::SignalUnavailable(id));
        }
        let new_last = append.after_seq + append.events.len() as u64;
        let wake_now = match &append.update {
            RunUpdate::Suspend { signals_after: Some(after), .. } => {
                signals.iter().any(|s| s.consumed_seq.is_none() && s.id > *after && Some(s.id) != append.consume_signal)
            }
            _ => false,
        };
        if let Some((id, consumed_at)) = append.consumed() {
            let signal = self.signals.get_mut(&append.run_id).and_then(|list| list.iter_mut().find(|s| s.id == id));
            if let Some(signal) = signal {
                signal.consumed_seq = Some(consumed_at);
            }
        }
        let journal = match self.journals.get_mut(&append.run_id) {
            Some(journal) => journal,
            None => self.journals.entry(append.run_id.clone()).or_default(),
        };
        let trims: Vec<(StepPath, Trim)> =
            append.events.iter().filter_map(Event::deletion).map(|(path, trim)| (path.clone(), trim)).collect();
        for (i, event) in append.events.into_iter().enumerate() {
            journal.push(JournalEntry::new(append.after_seq + 1 + i as u64, append.at, event));
        }
        for (path, trim) in trims {
            journal.retain(|entry| !trim.deletes(&path, entry));
        }
        let (at, update) = (append.at, append.update);
        if matches!(update, RunUpdate::Progress) {
            // A step's progress moves the run in no index (`modify` would find nothing to do).
            if let Some(run) = self.runs.get_mut(&append.run_id) {
                lifecycle::progress(run, new_last, at);
            }
            return Ok(());
        }
        let successor = match &update {
            RunUpdate::Continue { successor, .. } => Some(successor.as_ref().clone()),
            _ => None,
        };
        self.modify(&append.run_id, |run| {
            lifecycle::progress(run, new_last, at);
            lifecycle::apply(run, update, wake_now);
        })?;
        if let Some(successor) = successor {
            self.hand_over(&append.run_id, successor)?;
        }
        Ok(())
    }

    /// Creates the run `from` continues as and moves `from`'s unconsumed signals to it.
    fn hand_over(&mut self, from: &RunId, successor: NewRun) -> Result<(), StoreError> {
        let id = successor.id.clone();
        self.create(successor)?;
        let signals = self.signals.entry(from.clone()).or_default();
        let (unconsumed, consumed) = std::mem::take(signals).into_iter().partition(|s| s.consumed_seq.is_none());
        *signals = consumed;
        self.signals.insert(id, unconsumed);
        Ok(())
    }

    /// The newest run of `id`'s chain of continuations (`id` itself if it did not continue).
    fn newest(&self, id: &RunId) -> RunId {
        let mut id = id;
        while let Some(next) = self.runs.get(id).and_then(|run| run.continued_as.as_ref()) {
            id = next;
        }
        id.clone()
    }

    /// Creates a run, or finds the one with the same `(workflow, idempotency key)`.
    fn create(&mut self, run: NewRun) -> Result<CreatedRun, StoreError> {
        run.check_debounce()?;
        if let Some(existing) = self.by_key(&run)? {
            return Ok(CreatedRun { run: existing, created: false });
        }
        if let Some(joined) = self.join_debounce(&run)? {
            return Ok(joined);
        }
        if self.runs.contains_key(&run.id) {
            return Err(StoreError::DuplicateRunId(run.id));
        }
        let fair_seq = self.next_fair_seq(run.priority, run.fairness_key.as_deref().unwrap_or_default());
        let record = lifecycle::create(&run, self.rules.get(&run.workflow), fair_seq);
        if let Some(debounce) = &run.debounce {
            self.debouncing.insert((run.workflow.clone(), debounce.key.clone()), run.id.clone());
        }
        let group = record.concurrency.as_ref().map(|place| (run.workflow.clone(), place.key.clone()));
        self.grouped |= group.is_some();
        if let (Some(group), true) = (&group, record.waiting_for.is_some()) {
            self.waiting.insert((group.0.clone(), group.1.clone(), run.created_at, run.id.clone()));
        }
        // Room for a typical run's journal, so appends rarely reallocate under the lock.
        let mut journal = Vec::with_capacity(16 + run.prefix.len());
        for (i, event) in run.initial_journal().into_iter().enumerate() {
            journal.push(JournalEntry::new(i as u64 + 1, run.created_at, event));
        }
        self.journals.insert(run.id.clone(), journal);
        if let Some(key) = run.idempotency_key {
            self.idempotency.insert((run.workflow, key), run.id.clone());
        }
        let place = due_key(&record);
        self.runs.insert(run.id.clone(), Box::new(record));
        self.move_due(&run.id, None, place);
        if let Some(group) = group {
            self.admit(&group);
        }
        let record = self.run(&run.id).ok_or_else(|| StoreError::RunNotFound(run.id.clone()))?;
        Ok(CreatedRun { run: record, created: true })
    }

    /// Joins a debounced `run` to the run still debouncing under its key, if there is one: that
    /// run takes `run`'s input (its `started` event too) and wakes `quiet` from now, capped by
    /// its window's maximum wait.
    fn join_debounce(&mut self, run: &NewRun) -> Result<Option<CreatedRun>, StoreError> {
        let Some(debounce) = &run.debounce else { return Ok(None) };
        let Some(id) = self.debouncing.get(&(run.workflow.clone(), debounce.key.clone())).cloned() else {
            return Ok(None);
        };
        let joined = self.modify(&id, |open| {
            lifecycle::join_debounce(open, &run.input, run.created_at, debounce.quiet).then(|| open.clone())
        })?;
        let Some(joined) = joined else { return Ok(None) };
        if let Some(started) = self.journals.get_mut(&id).and_then(|journal| journal.first_mut()) {
            started.event = joined.started();
        }
        Ok(Some(CreatedRun { run: joined, created: false }))
    }

    /// The run holding `run`'s idempotency key, if any.
    fn by_key(&self, run: &NewRun) -> Result<Option<RunRecord>, StoreError> {
        let Some(key) = &run.idempotency_key else { return Ok(None) };
        let Some(existing) = self.idempotency.get(&(run.workflow.clone(), key.clone())) else { return Ok(None) };
        let existing = self
            .run(existing)
            .ok_or_else(|| StoreError::Corrupt(format!("idempotency key {key:?} points at a missing run")))?;
        Ok(Some(existing))
    }

    /// Buffers a signal for an unfinished run, waking it if it waits.
    fn signal(&mut self, mut signal: NewSignal) -> Result<SignalId, StoreError> {
        signal.run_id = self.newest(&signal.run_id);
        let sent_at = signal.sent_at;
        self.modify(&signal.run_id, |run| lifecycle::signal(run, sent_at))??;
        self.next_signal += 1;
        let id = SignalId(self.next_signal);
        self.signals.entry(signal.run_id).or_default().push(SignalRecord {
            id,
            name: signal.name,
            payload: signal.payload,
            sent_at: signal.sent_at,
            consumed_seq: None,
        });
        Ok(id)
    }
}

impl Store for MemoryStore {
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
        Box::pin(async move { Ok(page) })
    }

    fn read_journal<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<JournalEntry>> {
        let result = self.lock().journals.get(id).cloned().unwrap_or_default();
        Box::pin(async move { Ok(result) })
    }

    fn signals<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<SignalRecord>> {
        let result = self.lock().signals.get(id).cloned().unwrap_or_default();
        Box::pin(async move { Ok(result) })
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

    fn append(&self, append: Append) -> StoreFuture<'_, ()> {
        let result = self.lock().append(append);
        Box::pin(async move { result })
    }

    fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>> {
        let mut inner = self.lock();
        let statuses = request
            .runs
            .iter()
            .map(|(id, epoch)| {
                let status =
                    inner.modify(id, |run| lifecycle::heartbeat(run, &request.owner, *epoch, request.lease_until));
                status.unwrap_or(LeaseStatus {
                    run_id: id.clone(),
                    held: false,
                    cancel_requested: false,
                    pause_requested: false,
                })
            })
            .collect();
        Box::pin(async move { Ok(statuses) })
    }

    fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId> {
        let result = self.lock().signal(signal);
        Box::pin(async move { result })
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
                    inner.idempotency.remove(&(run.workflow, key));
                }
                inner.journals.remove(id);
                inner.signals.remove(id);
            }
        }
        drop(inner);
        Box::pin(async move { Ok(doomed) })
    }

    fn record_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()> {
        self.lock().workers.insert(worker.id.clone(), worker.clone());
        Box::pin(async move { Ok(()) })
    }

    fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>> {
        let workers = self.lock().workers.values().cloned().collect();
        Box::pin(async move { Ok(workers) })
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

    fn forget_workers<'a>(&'a self, request: &'a ForgetWorkers) -> StoreFuture<'a, u64> {
        let mut inner = self.lock();
        let before = inner.workers.len();
        inner.workers.retain(|_, worker| !request.selects(worker));
        let forgotten = (before - inner.workers.len()) as u64;
        drop(inner);
        Box::pin(async move { Ok(forgotten) })
    }

    fn version_counts(&self) -> StoreFuture<'_, Vec<VersionCount>> {
        let mut counts: BTreeMap<WorkflowKey, u64> = BTreeMap::new();
        for run in self.lock().runs.values().filter(|run| run.status.needs_worker()) {
            *counts.entry(WorkflowKey { name: run.workflow.clone(), version: run.version }).or_default() += 1;
        }
        let counts = counts.into_iter().map(|(key, runs)| VersionCount { key, runs }).collect();
        Box::pin(async move { Ok(counts) })
    }

    fn workflow_counts(&self) -> StoreFuture<'_, Vec<WorkflowCount>> {
        let mut counts: BTreeMap<(String, &'static str), (RunStatus, u64)> = BTreeMap::new();
        for run in self.lock().runs.values() {
            counts.entry((run.workflow.clone(), run.status.as_str())).or_insert((run.status, 0)).1 += 1;
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
            .filter(|s| !s.paused && s.next_fire_at.is_some_and(|at| at <= now) && workflows.contains(&s.workflow))
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

impl Inner {
    /// Fires a schedule if it is still due at `fire.due` (see [`FireSchedule`]).
    fn fire(&mut self, fire: FireSchedule) -> Result<Option<Vec<CreatedRun>>, StoreError> {
        let due = |s: &ScheduleRecord| !s.paused && s.next_fire_at == Some(fire.due);
        if !self.schedules.get(&fire.name).is_some_and(due) {
            return Ok(None);
        }
        let mut created = Vec::with_capacity(fire.runs.len());
        for run in fire.runs {
            created.push(match self.runs.get(&run.id) {
                // Started by an earlier firing of the same time (its id says so).
                Some(existing) => CreatedRun { run: RunRecord::clone(existing), created: false },
                None => self.create(run)?,
            });
        }
        if let Some(schedule) = self.schedules.get_mut(&fire.name) {
            schedule.next_fire_at = fire.next_fire_at;
            schedule.last_fired_at = fire.last_fired_at.or(schedule.last_fired_at);
            schedule.updated_at = fire.now;
        }
        Ok(Some(created))
    }
}
