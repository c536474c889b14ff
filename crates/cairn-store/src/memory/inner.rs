//! The memory store's state behind its lock, and the changes it makes to it: runs and the
//! indexes that find the due ones, concurrency groups, debounce windows, signals, schedules.

use crate::lifecycle::{self, slot_state};
use crate::types::ConcurrencyRule;
use crate::types::{
    Append, ClaimRequest, CreatedRun, EventQuery, EventRecord, FireSchedule, IdempotencyKey, NewRun, NewSignal, RunId,
    RunRecord, RunStatus, RunUpdate, ScheduleRecord, SignalRecord, StoreError, WorkerRecord, WorkflowName,
};
use cairn_journal::flow::{claim_rank, fair_seq};
use cairn_journal::{Event, FastMap, FastSet, JournalEntry, SignalId, StepPath, Timestamp, Trim};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub(super) struct Inner {
    /// Boxed: the table grows by copying, and a run's record is large.
    pub(super) runs: FastMap<RunId, Box<RunRecord>>,
    pub(super) journals: FastMap<RunId, Vec<JournalEntry>>,
    pub(super) signals: FastMap<RunId, Vec<SignalRecord>>,
    pub(super) idempotency: FastMap<(WorkflowName, IdempotencyKey), RunId>,
    pub(super) next_signal: i64,
    /// Runs that are or will become claimable, by bucket and rank: the index claims and timers
    /// scan.
    pub(super) due: BTreeSet<(DuePlace, RunId)>,
    /// Ready pending runs by priority, fairness key and fairness sequence: where a new run of a
    /// key queues ([`fair_seq`]).
    pub(super) fair: FairIndex,
    pub(super) workers: BTreeMap<String, WorkerRecord>,
    /// Every workflow version a worker has served: first and last recorded.
    pub(super) served: BTreeMap<crate::types::WorkflowKey, (Timestamp, Timestamp)>,
    /// Topic subscriptions: the version each (workflow, pattern) starts.
    pub(super) subscriptions: BTreeMap<(String, String), u32>,
    /// Schedules by name.
    pub(super) schedules: BTreeMap<String, ScheduleRecord>,
    /// Concurrency rules by workflow.
    pub(super) rules: BTreeMap<String, ConcurrencyRule>,
    /// Slots held per concurrency group (workflow, key).
    pub(super) held: FastMap<(WorkflowName, String), u32>,
    /// Runs waiting for a slot: group, then creation order.
    pub(super) waiting: BTreeSet<(WorkflowName, String, Timestamp, RunId)>,
    /// Rate limits' grants within their windows, by bucket.
    pub(super) rates: FastMap<String, Vec<i64>>,
    /// The run debouncing under each (workflow, debounce key), until its window closes.
    pub(super) debouncing: FastMap<(WorkflowName, String), RunId>,
    /// Whether any run was placed under a concurrency rule (its rule may be gone since).
    pub(super) grouped: bool,
    /// Recorded events in list order (time, then id), and each id's time.
    pub(super) events: BTreeMap<(Timestamp, String), EventRecord>,
    pub(super) event_times: FastMap<String, Timestamp>,
}

/// Why a run may become claimable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Due {
    /// Pending since its creation time.
    Pending,
    /// Suspended until its `wake_at`.
    Timer,
    /// Running under a lease that expires.
    Lease,
}

/// A run's place in the `due` index: its bucket, then (for pending runs) its priority and
/// fairness sequence, then when it became or becomes due. Timers and leases are ordered by time
/// alone, so a scan of their bucket can stop at the first one not yet due. Runs due at the same
/// time (a claim leases hundreds until the same millisecond) are ordered by id, as the SQL
/// stores and the model order them: a lapsed lease is reclaimed in the same order everywhere.
type DuePlace = (Due, Reverse<i32>, i64, Timestamp);

pub(super) fn due_key(run: &RunRecord) -> Option<DuePlace> {
    match run.status {
        RunStatus::Pending if run.waiting_for.is_some() => None,
        RunStatus::Pending => Some((Due::Pending, Reverse(run.priority), run.fair_seq, run.created_at)),
        RunStatus::Suspended => run.wake_at.map(|w| (Due::Timer, Reverse(0), 0, w)),
        RunStatus::Running => run.lease_expires_at.map(|e| (Due::Lease, Reverse(0), 0, e)),
        _ => None,
    }
}

/// The ready pending runs by priority, fairness key and fairness sequence. Keys are numbered
/// as they first appear (`0` for none), so the index compares integers, not text: a store of
/// 20,000 runs spent a tenth of W1's time in `memcmp` on the keys' text.
#[derive(Debug, Default)]
pub(super) struct FairIndex {
    entries: BTreeSet<(i32, u32, i64, RunId)>,
    keys: FastMap<String, u32>,
}

impl FairIndex {
    /// The number of fairness key `key` (`None` for one never seen).
    fn number(&self, key: &str) -> Option<u32> {
        if key.is_empty() { Some(0) } else { self.keys.get(key).copied() }
    }

    /// Adds ready pending run `id`.
    pub(super) fn insert(&mut self, run: &RunRecord, id: &RunId) {
        let key = run.fairness_key.as_deref().unwrap_or_default();
        let number = match self.number(key) {
            Some(number) => number,
            None => {
                let number = u32::try_from(self.keys.len() + 1).unwrap_or(u32::MAX);
                self.keys.insert(key.to_owned(), number);
                number
            }
        };
        self.entries.insert((run.priority, number, run.fair_seq, id.clone()));
    }

    /// Removes run `id`, if it is there.
    pub(super) fn remove(&mut self, run: &RunRecord, id: &RunId) {
        if let Some(number) = self.number(run.fairness_key.as_deref().unwrap_or_default()) {
            self.entries.remove(&(run.priority, number, run.fair_seq, id.clone()));
        }
    }

    /// The last fairness sequence of a ready run of `priority` and `key`.
    fn last(&self, priority: i32, key: &str) -> Option<i64> {
        let number = self.number(key)?;
        let of_key = (priority, number, i64::MIN, RunId::new(""))..(priority, number, i64::MAX, RunId::new(""));
        self.entries.range(of_key).next_back().map(|entry| entry.2)
    }
}

/// The earliest place of a bucket (or of a priority's pending runs).
fn first_place(due: Due, priority: i32) -> (DuePlace, RunId) {
    ((due, Reverse(priority), i64::MIN, Timestamp::from_millis(i64::MIN)), RunId::new(""))
}

/// A grouped run's concurrency group: its workflow and key.
pub(super) fn group_of(run: &RunRecord) -> (WorkflowName, String) {
    (run.workflow.clone(), run.concurrency.as_ref().map(|c| c.key.clone()).unwrap_or_default())
}

impl Inner {
    /// Records `event`, or adds its runs to the record of its id ([`EventRecord::runs_over`]).
    pub(super) fn record_event(&mut self, event: &EventRecord) {
        match self.event_times.get(&event.id) {
            Some(at) => {
                if let Some(kept) = self.events.get_mut(&(*at, event.id.clone())) {
                    kept.runs = event.runs_over(std::mem::take(&mut kept.runs));
                }
            }
            None => {
                let mut event = event.clone();
                event.runs = event.runs_over(Vec::new());
                self.event_times.insert(event.id.clone(), event.published_at);
                self.events.insert((event.published_at, event.id.clone()), event);
            }
        }
    }

    /// The events `query` selects, newest first, one more than its limit at most.
    pub(super) fn events(&self, query: &EventQuery) -> Vec<EventRecord> {
        let selected = self.events.values().rev().filter(|event| query.selects(event));
        selected.take(query.limit.saturating_add(1)).cloned().collect()
    }

    /// Deletes up to `limit` events published before `before`.
    pub(super) fn forget_events(&mut self, before: Timestamp, limit: usize) {
        let doomed: Vec<(Timestamp, String)> =
            self.events.keys().take_while(|(at, _)| *at < before).take(limit).cloned().collect();
        for key in doomed {
            self.event_times.remove(&key.1);
            self.events.remove(&key);
        }
    }

    /// Counts `key` as served at `at`: its first and last times widened to take it in.
    pub(super) fn note_served(&mut self, key: crate::types::WorkflowKey, at: Timestamp) {
        let (first, last) = self.served.entry(key).or_insert((at, at));
        (*first, *last) = ((*first).min(at), (*last).max(at));
    }

    /// A copy of run `id`'s record.
    pub(super) fn run(&self, id: &RunId) -> Option<RunRecord> {
        self.runs.get(id).map(|run| RunRecord::clone(run))
    }

    /// Changes a run through `change`, keeping in step the `due` index
    /// and its concurrency group's slots and queue (admitting waiting runs as slots free up).
    pub(super) fn modify<T>(&mut self, id: &RunId, change: impl FnOnce(&mut RunRecord) -> T) -> Result<T, StoreError> {
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
            self.debouncing.remove(&(run.workflow.clone(), run.rare().debounce_key.clone().unwrap_or_default()));
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
    pub(super) fn move_due(&mut self, id: &RunId, before: Option<DuePlace>, after: Option<DuePlace>) {
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
            if pending(&after) {
                self.fair.insert(run, id);
            } else {
                self.fair.remove(run, id);
            }
        }
    }

    /// The fairness sequence of a new ready run of `priority` and `key` ([`fair_seq`]).
    fn next_fair_seq(&self, priority: i32, key: &str) -> i64 {
        let last = self.fair.last(priority, key);
        let head = (self.due.range(first_place(Due::Pending, priority)..).next())
            .filter(|(place, _)| place.0 == Due::Pending && place.1 == Reverse(priority))
            .map(|(place, _)| place.2);
        fair_seq(last, head)
    }

    /// Whether the concurrency rule of run `id`'s workflow keeps a suspended run's slot.
    pub(super) fn rule_hold(&self, id: &RunId) -> bool {
        self.runs.get(id).and_then(|run| self.rules.get(run.workflow.as_str())).is_some_and(|rule| rule.hold_suspended)
    }

    /// Admits the runs waiting for `group`'s slots, oldest first, while it has free ones.
    pub(super) fn admit(&mut self, group: &(WorkflowName, String)) {
        let limit = self.rules.get(group.0.as_str()).map_or(u32::MAX, |rule| rule.limit);
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
    pub(super) fn admit_workflow(&mut self, workflow: &str) {
        let groups: BTreeSet<(WorkflowName, String)> =
            self.waiting.iter().filter(|w| w.0 == workflow).map(|w| (w.0.clone(), w.1.clone())).collect();
        for group in groups {
            self.admit(&group);
        }
    }

    /// Claims up to `limit` due runs of `tags` for `request`: the ready pending runs in claim
    /// order, and the `limit` earliest of the woken runs (but those that must wait for a slot
    /// again) and of the lapsed leases, the first `limit` of all those in claim order
    /// ([`claim_rank`], equal ranks by id).
    pub(super) fn claim_due(
        &mut self,
        request: &ClaimRequest,
        tags: &FastSet<(&str, u32)>,
        limit: usize,
    ) -> Vec<RunRecord> {
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
    pub(super) fn due_runs(
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

    pub(super) fn append(&mut self, append: Append) -> Result<(), StoreError> {
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
    pub(super) fn newest(&self, id: &RunId) -> RunId {
        let mut id = id;
        while let Some(next) = self.runs.get(id).and_then(|run| run.rare().continued_as.as_ref()) {
            id = next;
        }
        id.clone()
    }

    /// Creates a run, or finds the one with the same `(workflow, idempotency key)`.
    pub(super) fn create(&mut self, run: NewRun) -> Result<CreatedRun, StoreError> {
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
        let record = lifecycle::create(&run, self.rules.get(run.workflow.as_str()), fair_seq);
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
            self.idempotency.insert((run.workflow.clone(), key), run.id.clone());
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
    pub(super) fn by_key(&self, run: &NewRun) -> Result<Option<RunRecord>, StoreError> {
        let Some(key) = &run.idempotency_key else { return Ok(None) };
        let Some(existing) = self.idempotency.get(&(run.workflow.clone(), key.clone())) else { return Ok(None) };
        let existing = self
            .run(existing)
            .ok_or_else(|| StoreError::Corrupt(format!("idempotency key {key:?} points at a missing run")))?;
        Ok(Some(existing))
    }

    /// Buffers a signal for an unfinished run, waking it if it waits.
    pub(super) fn signal(&mut self, mut signal: NewSignal) -> Result<SignalId, StoreError> {
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

impl Inner {
    /// Fires a schedule if it is still due at `fire.due` (see [`FireSchedule`]).
    pub(super) fn fire(&mut self, fire: FireSchedule) -> Result<Option<Vec<CreatedRun>>, StoreError> {
        let due = |s: &ScheduleRecord| fire.manual || (!s.paused && s.next_fire_at == Some(fire.due));
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
            if !fire.manual {
                schedule.next_fire_at = fire.next_fire_at;
            }
            schedule.last_fired_at = fire.last_fired_at.or(schedule.last_fired_at);
            schedule.updated_at = fire.now;
        }
        Ok(Some(created))
    }
}
