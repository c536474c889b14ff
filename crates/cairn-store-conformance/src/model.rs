//! The reference every backend is checked against: a naive store over [`cairn_store::lifecycle`].
//!
//! It keeps runs in a sorted map and finds everything by scanning: no index, no counter, no
//! queue. A run's row changes only through the lifecycle's functions; what spans runs (which
//! runs a claim takes, which waiting runs are admitted, idempotency, debounce windows,
//! continuations, pruning) is written here as plainly as the contract says it. The model-based
//! test ([`crate::check_against_model`]) runs random operations on this model and on a backend,
//! and compares them after each one.

use cairn_journal::flow::{claim_rank, fair_seq};
use cairn_journal::{SignalId, Timestamp};
use cairn_store::lifecycle;
use cairn_store::*;
use std::collections::BTreeMap;

/// The naive store: runs, their signals, idempotency keys and concurrency rules.
#[derive(Debug, Default)]
pub struct Model {
    /// Every run, by id.
    pub runs: BTreeMap<RunId, RunRecord>,
    /// Each run's signals, in the order sent.
    pub signals: BTreeMap<RunId, Vec<SignalRecord>>,
    /// Concurrency rules by workflow.
    pub rules: BTreeMap<String, ConcurrencyRule>,
    next_signal: i64,
}

/// A run's concurrency group: its workflow and key.
type Group = (String, String);

/// Whether a claim's worker serves `run`'s workflow version.
fn serves(request: &ClaimRequest, run: &RunRecord) -> bool {
    request.workflows.iter().any(|k| k.name == run.workflow && k.version == run.version)
}

impl Model {
    /// [`RunStore::create_run`].
    pub fn create(&mut self, new: NewRun) -> Result<CreatedRun, StoreError> {
        new.check_debounce()?;
        if let Some(key) = &new.idempotency_key
            && let Some(existing) =
                self.runs.values().find(|r| r.workflow == new.workflow && r.idempotency_key.as_ref() == Some(key))
        {
            return Ok(CreatedRun { run: existing.clone(), created: false });
        }
        if let Some(debounce) = &new.debounce {
            let open = self.runs.values_mut().find(|r| {
                r.workflow == new.workflow && r.is_debouncing() && r.rare().debounce_key.as_ref() == Some(&debounce.key)
            });
            if let Some(open) = open
                && lifecycle::join_debounce(open, &new.input, new.created_at, debounce.quiet)
            {
                return Ok(CreatedRun { run: open.clone(), created: false });
            }
        }
        if self.runs.contains_key(&new.id) {
            return Err(StoreError::DuplicateRunId(new.id));
        }
        let seq = self.next_fair_seq(new.priority, new.fairness_key.as_deref().unwrap_or_default());
        let run = lifecycle::create(&new, self.rules.get(new.workflow.as_str()), seq);
        self.runs.insert(new.id.clone(), run);
        self.admit_all();
        let run = self.runs.get(&new.id).cloned().ok_or_else(|| StoreError::RunNotFound(new.id.clone()))?;
        Ok(CreatedRun { run, created: true })
    }

    /// Where a new ready run of `priority` and fairness `key` queues: one past the last ready run
    /// of its key, never behind the head of its priority ([`fair_seq`]).
    fn next_fair_seq(&self, priority: i32, key: &str) -> i64 {
        let ready = || {
            self.runs
                .values()
                .filter(move |r| r.status == RunStatus::Pending && r.waiting_for.is_none() && r.priority == priority)
        };
        let last = ready().filter(|r| r.fairness_key.as_deref().unwrap_or_default() == key).map(|r| r.fair_seq).max();
        let head = ready().min_by_key(|r| (r.fair_seq, r.created_at, r.id.clone())).map(|r| r.fair_seq);
        fair_seq(last, head)
    }

    /// Admits waiting runs wherever their group has room, oldest first.
    fn admit_all(&mut self) {
        let mut waiting: Vec<(Group, Timestamp, RunId)> = (self.runs.values())
            .filter(|r| r.waiting_for == Some(WaitingFor::Concurrency))
            .filter_map(|r| {
                Some(((r.workflow.to_string(), r.concurrency.as_ref()?.key.clone()), r.created_at, r.id.clone()))
            })
            .collect();
        waiting.sort();
        for (group, _, id) in waiting {
            let limit = self.rules.get(&group.0).map_or(u32::MAX, |rule| rule.limit);
            if self.held(&group) < limit
                && let Some(run) = self.runs.get_mut(&id)
            {
                lifecycle::admit(run);
            }
        }
    }

    /// How many runs of `group` hold a slot.
    fn held(&self, group: &Group) -> u32 {
        let of_group =
            |r: &&RunRecord| r.workflow == group.0 && r.concurrency.as_ref().is_some_and(|c| c.key == group.1);
        self.runs.values().filter(of_group).filter(|r| lifecycle::holds_a_slot(r)).count() as u32
    }

    /// Whether the current rule of `workflow` keeps a suspended run's slot.
    fn rule_hold(&self, workflow: &str) -> bool {
        self.rules.get(workflow).is_some_and(|rule| rule.hold_suspended)
    }

    /// [`RunStore::claim`], in two passes. First the due runs: ready pending runs, taken in claim
    /// order ([`claim_rank`]); woken suspended runs but those that must wait for a slot again
    /// ([`lifecycle::requeues`]), of which the `limit` earliest (by wake-up, then id) are
    /// considered; runs whose lease lapsed, of which the `limit` earliest (by expiry, then id)
    /// are. Of those, the first `limit` in claim order are claimed, equal ranks by id. Then the
    /// woken runs that must wait for a slot queue for one, and the second pass claims (as the
    /// first) those their groups admit, while the claim has room.
    pub fn claim(&mut self, request: &ClaimRequest) -> Vec<RunRecord> {
        let mut claimed = self.claim_due(request, request.limit);
        let woken: Vec<RunId> = (self.runs.values())
            .filter(|r| serves(request, r) && r.wake_at.is_some_and(|at| at <= request.now) && lifecycle::requeues(r))
            .map(|r| r.id.clone())
            .collect();
        for id in &woken {
            let hold = self.runs.get(id).is_some_and(|r| self.rule_hold(&r.workflow));
            if let Some(run) = self.runs.get_mut(id) {
                lifecycle::requeue(run, hold, request.now);
            }
        }
        self.admit_all();
        if !woken.is_empty() && claimed.len() < request.limit {
            let more = self.claim_due(request, request.limit - claimed.len());
            claimed.extend(more);
        }
        claimed
    }

    /// One pass of [`Model::claim`], taking at most `limit` runs.
    fn claim_due(&mut self, request: &ClaimRequest, limit: usize) -> Vec<RunRecord> {
        let mut due = Vec::new();
        for status in [RunStatus::Pending, RunStatus::Suspended, RunStatus::Running] {
            let mut arm: Vec<_> = (self.runs.values())
                .filter(|r| r.status == status && serves(request, r) && !lifecycle::requeues(r))
                .filter_map(|r| {
                    let at = lifecycle::due_at(r, request.now, request.lease_now)?;
                    let rank = claim_rank(r.priority, r.fair_seq, at.as_millis());
                    let order = if status == RunStatus::Pending { rank } else { claim_rank(0, 0, at.as_millis()) };
                    Some((order, r.id.clone(), rank))
                })
                .collect();
            arm.sort();
            due.extend(arm.into_iter().take(limit).map(|(_, id, rank)| (rank, id)));
        }
        due.sort();
        due.truncate(limit);
        let mut claimed = Vec::with_capacity(due.len());
        for (_, id) in due {
            if let Some(run) = self.runs.get_mut(&id) {
                lifecycle::claim(run, &request.owner, request.lease_until, request.now);
                claimed.push(run.clone());
            }
        }
        claimed
    }

    /// [`JournalStore::append`] (only events' count matters to the model: it keeps no journal).
    pub fn append(&mut self, append: Append) -> Result<(), StoreError> {
        let run = self.runs.get(&append.run_id).ok_or_else(|| StoreError::RunNotFound(append.run_id.clone()))?;
        lifecycle::check_append(run, append.epoch, append.after_seq)?;
        if let RunUpdate::Continue { successor, .. } = &append.update
            && self.runs.contains_key(&successor.id)
        {
            return Err(StoreError::DuplicateRunId(successor.id.clone()));
        }
        let signals = self.signals.entry(append.run_id.clone()).or_default();
        let unconsumed = |s: &&SignalRecord| s.consumed_seq.is_none();
        if let Some(id) = append.consume_signal
            && !signals.iter().filter(unconsumed).any(|s| s.id == id)
        {
            return Err(StoreError::SignalUnavailable(id));
        }
        let wake_now = match &append.update {
            RunUpdate::Suspend { signals_after: Some(after), .. } => {
                signals.iter().filter(unconsumed).any(|s| s.id > *after && Some(s.id) != append.consume_signal)
            }
            _ => false,
        };
        if let Some((id, seq)) = append.consumed()
            && let Some(signal) = signals.iter_mut().find(|s| s.id == id)
        {
            signal.consumed_seq = Some(seq);
        }
        let successor = match &append.update {
            RunUpdate::Continue { successor, .. } => Some(successor.as_ref().clone()),
            _ => None,
        };
        let last_seq = append.after_seq + append.events.len() as u64;
        if let Some(run) = self.runs.get_mut(&append.run_id) {
            lifecycle::progress(run, last_seq, append.at);
            lifecycle::apply(run, append.update, wake_now);
        }
        // The slot the run gave up admits a waiting run before its successor is created.
        self.admit_all();
        if let Some(successor) = successor {
            let id = successor.id.clone();
            self.create(successor)?;
            let (unconsumed, consumed) = (self.signals.remove(&append.run_id).unwrap_or_default().into_iter())
                .partition(|s| s.consumed_seq.is_none());
            self.signals.insert(append.run_id, consumed);
            self.signals.insert(id, unconsumed);
        }
        self.admit_all();
        Ok(())
    }

    /// [`RunStore::heartbeat`].
    pub fn heartbeat(&mut self, request: &HeartbeatRequest) -> Vec<LeaseStatus> {
        (request.runs.iter())
            .map(|(id, epoch)| match self.runs.get_mut(id) {
                Some(run) => lifecycle::heartbeat(run, &request.owner, *epoch, request.lease_until),
                None => LeaseStatus { run_id: id.clone(), held: false, pending: None },
            })
            .collect()
    }

    /// The newest run of `id`'s chain of continuations.
    fn newest(&self, id: &RunId) -> RunId {
        let mut id = id.clone();
        while let Some(next) = self.runs.get(&id).and_then(|r| r.rare().continued_as.clone()) {
            id = next;
        }
        id
    }

    /// [`SignalStore::send_signal`].
    pub fn signal(&mut self, signal: NewSignal) -> Result<SignalId, StoreError> {
        let run_id = self.newest(&signal.run_id);
        let run = self.runs.get_mut(&run_id).ok_or_else(|| StoreError::RunNotFound(run_id.clone()))?;
        lifecycle::signal(run, signal.sent_at)?;
        self.next_signal += 1;
        let id = SignalId(self.next_signal);
        let record = SignalRecord {
            id,
            name: signal.name,
            payload: signal.payload,
            sent_at: signal.sent_at,
            consumed_seq: None,
        };
        self.signals.entry(run_id).or_default().push(record);
        self.admit_all();
        Ok(id)
    }

    /// [`RunStore::cancel`].
    pub fn cancel(&mut self, request: ControlRequest) -> Result<CancelOutcome, StoreError> {
        let run = self.runs.get_mut(&request.run_id).ok_or_else(|| StoreError::RunNotFound(request.run_id.clone()))?;
        let outcome = lifecycle::cancel(run, &request.reason, request.at, request.lease_now)?;
        self.admit_all();
        Ok(outcome)
    }

    /// [`RunStore::pause`].
    pub fn pause(&mut self, request: ControlRequest) -> Result<PauseOutcome, StoreError> {
        let hold = self.runs.get(&request.run_id).is_some_and(|r| self.rule_hold(&r.workflow));
        let run = self.runs.get_mut(&request.run_id).ok_or_else(|| StoreError::RunNotFound(request.run_id.clone()))?;
        let outcome = lifecycle::pause(run, &request.reason, request.at, request.lease_now, hold)?;
        self.admit_all();
        Ok(outcome)
    }

    /// [`RunStore::resume`].
    pub fn resume(&mut self, request: ResumeRequest) -> Result<(), StoreError> {
        let run = self.runs.get_mut(&request.run_id).ok_or_else(|| StoreError::RunNotFound(request.run_id.clone()))?;
        lifecycle::resume(run, request.at)?;
        self.admit_all();
        Ok(())
    }

    /// [`FlowStore::put_concurrency`].
    pub fn put_concurrency(&mut self, rule: &ConcurrencyRule) -> Result<(), StoreError> {
        rule.check().map_err(StoreError::InvalidInput)?;
        self.rules.insert(rule.workflow.clone(), rule.clone());
        self.admit_all();
        Ok(())
    }

    /// [`FlowStore::delete_concurrency`].
    pub fn delete_concurrency(&mut self, workflow: &str) -> bool {
        let deleted = self.rules.remove(workflow).is_some();
        self.admit_all();
        deleted
    }

    /// [`RunStore::prune`]: the ended runs past their retention, by id, up to the limit.
    pub fn prune(&mut self, request: &PruneRequest) -> Vec<RunId> {
        let mut doomed: Vec<RunId> = self.runs.values().filter(|r| request.selects(r)).map(|r| r.id.clone()).collect();
        doomed.truncate(request.limit);
        if !request.dry_run {
            for id in &doomed {
                self.runs.remove(id);
                self.signals.remove(id);
            }
        }
        doomed
    }

    /// [`RunStore::list_runs`] without a filter: every run, newest first.
    pub fn list(&self) -> Vec<RunRecord> {
        let mut runs: Vec<RunRecord> = self.runs.values().cloned().collect();
        runs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        runs
    }

    /// [`RunStore::workflow_counts`].
    pub fn workflow_counts(&self) -> Vec<(String, RunStatus, u64)> {
        let mut counts: BTreeMap<(String, &str), (RunStatus, u64)> = BTreeMap::new();
        for run in self.runs.values() {
            counts.entry((run.workflow.to_string(), run.status.as_str())).or_insert((run.status, 0)).1 += 1;
        }
        counts.into_iter().map(|((workflow, _), (status, runs))| (workflow, status, runs)).collect()
    }

    /// [`RunStore::version_counts`].
    pub fn version_counts(&self) -> Vec<(WorkflowKey, u64)> {
        let mut counts: BTreeMap<WorkflowKey, u64> = BTreeMap::new();
        for run in self.runs.values().filter(|r| r.status.needs_worker()) {
            *counts.entry(WorkflowKey { name: run.workflow.to_string(), version: run.version }).or_default() += 1;
        }
        counts.into_iter().collect()
    }

    /// [`RunStore::next_wake_at`] (the model holds no schedules).
    pub fn next_wake_at(&self, workflows: &[WorkflowKey]) -> Option<Timestamp> {
        let serves = |r: &&RunRecord| workflows.iter().any(|k| k.name == r.workflow && k.version == r.version);
        self.runs.values().filter(serves).filter(|r| r.status == RunStatus::Suspended).filter_map(|r| r.wake_at).min()
    }
}
