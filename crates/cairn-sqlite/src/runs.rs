//! The writer's run lifecycle: create, claim, append, heartbeat, signal, pause, resume, cancel.

use crate::prelude::*;
use crate::rows::{CLAIM, RUN_COLUMNS, claim_params, claim_tags, query_rows, row_to_run};
use crate::writer::{Failure, Writer, clean};

impl Writer {
    pub(super) fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, Failure> {
        let mut stmt = self.conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?;
        let run = stmt.query_row([id.as_str()], row_to_run).optional()?;
        run.transpose().map_err(clean)
    }

    /// The run holding `run`'s idempotency key, if any.
    pub(super) fn by_key(&self, run: &NewRun) -> Result<Option<RunRecord>, Failure> {
        let Some(key) = &run.idempotency_key else { return Ok(None) };
        let mut stmt = self
            .conn
            .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE workflow = ?1 AND idempotency_key = ?2"))?;
        let existing = stmt.query_row([run.workflow.as_str(), key], row_to_run).optional()?;
        existing.transpose().map_err(clean)
    }

    pub(super) fn create(&mut self, run: &NewRun) -> Result<CreatedRun, Failure> {
        run.check_debounce().map_err(clean)?;
        if let Some(existing) = self.by_key(run)? {
            return Ok(CreatedRun { run: existing, created: false });
        }
        if let Some(joined) = self.join_debounce(run)? {
            return Ok(joined);
        }
        let at = run.created_at.as_millis();
        let mut record = RunRecord::of(run);
        let debouncing = record.is_debouncing();
        let rule = self.concurrency_rule(&run.workflow)?;
        let place = rule.as_ref().map(|rule| RunConcurrency {
            // A debouncing run holds no slot and waits for none until its window closes (see
            // `claim`).
            hold_suspended: rule.hold_suspended && !debouncing,
            ..RunConcurrency::of(rule, &run.input)
        });
        let waits = match (&rule, &place) {
            (Some(rule), Some(place)) if !debouncing => !self.take_slot(&run.workflow, &place.key, rule.limit)?,
            _ => false,
        };
        let fair_key = run.fairness_key.as_deref().unwrap_or_default();
        // Read apart from the insert: an INSERT … RETURNING cost W1 about 25 % more than both.
        let fair_seq: i64 = self
            .conn
            .prepare_cached(include_str!("../sql/statements/create_fair_seq.sql"))?
            .query_row(params![run.priority, fair_key], |r| r.get(0))?;
        let inserted =
            self.conn.prepare_cached(include_str!("../sql/statements/create_insert.sql"))?.execute(params![
                run.id.as_str(),
                run.workflow.as_str(),
                run.version,
                run.input.get(),
                run.idempotency_key.as_deref(),
                at,
                run.last_seq() as i64,
                run.deadline.map(Timestamp::as_millis),
                run.retention_ms(),
                run.restarted_from.as_ref().map(RunId::as_str),
                run.parent.as_ref().map(RunId::as_str),
                run.continued_from.as_ref().map(RunId::as_str),
                place.as_ref().map(|p| p.key.as_str()),
                place.as_ref().is_some_and(|p| p.hold_suspended),
                run.priority,
                fair_key,
                fair_seq,
                record.status.as_str(),
                record.suspend_reason.map(SuspendReason::as_str),
                record.wake_at.map(Timestamp::as_millis),
                record.rare().debounce_key,
                record.rare().debounce_until.map(Timestamp::as_millis),
                waits,
            ])?;
        if inserted == 0 {
            // A slot taken for it must be given back: the transaction is undone.
            let dirty = place.is_some() && !waits && !debouncing;
            return Err(Failure { error: StoreError::DuplicateRunId(run.id.clone()), dirty });
        }
        // Only an object's keys are indexed: any other input costs no statement (see
        // migration 21).
        if run.input.get().trim_start().starts_with('{') {
            self.conn.prepare_cached(include_str!("../sql/statements/index_input.sql"))?.execute(params![
                run.input.get(),
                at,
                run.id.as_str()
            ])?;
        }
        for (i, event) in run.initial_journal().iter().enumerate() {
            self.insert_event(&run.id, i as u64 + 1, run.created_at, event, &event.to_json())?;
        }
        record.fair_seq = fair_seq;
        record.waiting_for = waits.then_some(WaitingFor::Concurrency);
        record.concurrency = place;
        Ok(CreatedRun { run: record, created: true })
    }

    /// Joins a debounced `run` to the run still debouncing under its key, if there is one
    /// (`runs_debouncing`): that run takes `run`'s input (its `started` event too) and wakes
    /// `quiet` from now, capped by its window's maximum wait.
    pub(super) fn join_debounce(&mut self, run: &NewRun) -> Result<Option<CreatedRun>, Failure> {
        let Some(debounce) = &run.debounce else { return Ok(None) };
        let quiet_after = (run.created_at + debounce.quiet).as_millis();
        let joined: Option<String> = self
            .conn
            .prepare_cached(include_str!("../sql/statements/join_debounce.sql"))?
            .query_row(
                params![run.workflow.as_str(), debounce.key, run.input.get(), run.created_at.as_millis(), quiet_after],
                |r| r.get(0),
            )
            .optional()?;
        let Some(id) = joined else { return Ok(None) };
        let joined = self.status_of(&RunId::new(id))?;
        self.conn
            .prepare_cached("UPDATE journal SET data = ?2 WHERE run_id = ?1 AND seq = 1")?
            .execute(params![joined.id.as_str(), joined.started().to_json()])?;
        Ok(Some(CreatedRun { run: joined, created: false }))
    }

    pub(super) fn insert_event(
        &self,
        run_id: &RunId,
        seq: u64,
        at: Timestamp,
        event: &Event,
        json: &str,
    ) -> Result<(), Failure> {
        self.conn
            .prepare_cached("INSERT INTO journal (run_id, seq, at, kind, path, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?
            .execute(params![
                run_id.as_str(),
                seq as i64,
                at.as_millis(),
                event.kind_name(),
                event.path().map(|p| p.as_str()),
                json
            ])?;
        Ok(())
    }

    pub(super) fn claim(&mut self, request: &ClaimRequest) -> Result<Vec<RunRecord>, Failure> {
        let tags = claim_tags(request).map_err(clean)?;
        let mut claimed = self.claim_due(request, &tags, request.limit)?;
        // Then woken runs that gave their slot up when they suspended wait for one again, as do
        // debounced runs whose window closed, which from then on keep their slot while suspended
        // as their rule says; their groups admit them at once where they have room, and those
        // are claimed while the claim has room (`Model::claim` in the conformance suite).
        let requeued: Vec<(String, String)> = self
            .conn
            .prepare_cached(concat!(
                "UPDATE runs INDEXED BY runs_timer
                 SET status = 'pending', waiting_for = 'concurrency', suspend_reason = NULL, wake_at = NULL,
                     updated_at = ?1, ",
                hold_after_debounce!(),
                "
                 WHERE status = 'suspended' AND wake_at <= ?1 AND flow_key IS NOT NULL AND flow_hold = 0
                   AND (workflow || '@' || version) IN (SELECT value FROM json_each(?2))
                 RETURNING workflow, flow_key"
            ))?
            .query_map(params![request.now.as_millis(), tags], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for (workflow, key) in requeued.iter().collect::<std::collections::BTreeSet<_>>() {
            self.admit(workflow, key)?;
        }
        if !requeued.is_empty() && claimed.len() < request.limit {
            let more = self.claim_due(request, &tags, request.limit - claimed.len())?;
            claimed.extend(more);
        }
        Ok(claimed)
    }

    /// One pass of a claim ([`CLAIM`]), taking at most `limit` runs.
    fn claim_due(&mut self, request: &ClaimRequest, tags: &str, limit: usize) -> Result<Vec<RunRecord>, Failure> {
        let mut stmt = self.conn.prepare_cached(&CLAIM)?;
        let claimed = query_rows(&mut stmt, claim_params(request, tags, limit), row_to_run)
            .map_err(|error| Failure { error, dirty: true })?;
        drop(stmt);
        for run in &claimed {
            self.make_head(run)?;
        }
        Ok(claimed)
    }

    /// Makes claimed `run`'s head (migration 25) from its row as the claim left it, in place of
    /// the head of a lease that lapsed.
    fn make_head(&self, run: &RunRecord) -> Result<(), Failure> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO run_heads (id, epoch, last_seq, updated_at, recoveries) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                run.id.as_str(),
                run.epoch as i64,
                run.last_seq as i64,
                run.updated_at.as_millis(),
                run.recoveries
            ])?;
        Ok(())
    }

    /// Deletes run `id`'s head, once its row holds what the head held (see `held_at_end!` and
    /// `fold_head!`).
    fn drop_head(&self, id: &RunId) -> Result<(), Failure> {
        self.conn.prepare_cached("DELETE FROM run_heads WHERE id = ?1")?.execute([id.as_str()])?;
        Ok(())
    }

    pub(super) fn append(&mut self, append: &Append, encoded: &[String]) -> Result<(), Failure> {
        let new_last = (append.after_seq + append.events.len() as u64) as i64;
        // Every variant checks the lease (its epoch, and that the run is running) and the journal's
        // end, and moves the journal's end forward.
        let (sql, extra): (&str, Vec<Box<dyn rusqlite::ToSql>>) = match &append.update {
            // A step moves the run's head only (migration 25): the epoch there is the claim's,
            // and a run has a head only while it runs.
            RunUpdate::Progress => (
                "UPDATE run_heads SET last_seq = ?1, updated_at = ?2, recoveries = 0
                 WHERE id = ?3 AND epoch = ?4 AND last_seq = ?5",
                Vec::new(),
            ),
            RunUpdate::Suspend { reason, wake_at, signals_after, now } => (
                concat!(
                    "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = 'suspended',
                         suspend_reason = ?6, lease_owner = NULL, lease_expires_at = NULL,
                         wake_at = CASE WHEN request IS NOT NULL OR (?7 IS NOT NULL AND EXISTS (
                                 SELECT 1 FROM signals s WHERE s.run_id = runs.id AND s.consumed_seq IS NULL AND s.id > ?7))
                             THEN ?8 ELSE ?9 END
                     WHERE ",
                    held_at_end!(),
                    " RETURNING workflow, flow_key, flow_hold"
                ),
                vec![
                    Box::new(reason.as_str()),
                    Box::new(signals_after.map(|s| s.0)),
                    Box::new(now.as_millis()),
                    Box::new(wake_at.map(Timestamp::as_millis)),
                ],
            ),
            RunUpdate::Finish { status, output, error, at } => (
                concat!(
                    "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = ?6, suspend_reason = NULL,
                         output = ?7, error = ?8, completed_at = ?9, wake_at = NULL, lease_owner = NULL,
                         lease_expires_at = NULL, delete_after = ?9 + retention_ms, request = NULL, request_reason = NULL
                     WHERE ",
                    held_at_end!(),
                    " RETURNING workflow, flow_key, flow_hold"
                ),
                vec![
                    Box::new(status.as_str()),
                    Box::new(output.as_ref().map(|o| o.get().to_owned())),
                    Box::new(error.clone()),
                    Box::new(at.as_millis()),
                ],
            ),
            RunUpdate::Continue { successor, at } => (
                concat!(
                    "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = 'continued',
                         suspend_reason = NULL, error = NULL, continued_as = ?6, completed_at = ?7, wake_at = NULL,
                         lease_owner = NULL, lease_expires_at = NULL, delete_after = ?7 + retention_ms, request = NULL,
                         request_reason = NULL
                     WHERE ",
                    held_at_end!(),
                    " RETURNING workflow, flow_key, flow_hold"
                ),
                vec![Box::new(successor.id.as_str().to_owned()), Box::new(at.as_millis())],
            ),
            RunUpdate::Release => (
                concat!(
                    "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = 'pending',
                         suspend_reason = NULL, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL
                     WHERE ",
                    held_at_end!()
                ),
                Vec::new(),
            ),
            RunUpdate::Park { error } => (
                concat!(
                    "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = 'paused',
                         suspend_reason = NULL, error = ?6, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL, ",
                    clear_pause!(),
                    " WHERE ",
                    held_at_end!(),
                    " RETURNING workflow, flow_key, flow_hold"
                ),
                vec![Box::new(error.clone())],
            ),
        };
        let (at, run_id, epoch, after_seq) =
            (append.at.as_millis(), append.run_id.as_str(), append.epoch as i64, append.after_seq as i64);
        let mut bound: Vec<&dyn rusqlite::ToSql> = vec![&new_last, &at, &run_id, &epoch, &after_seq];
        bound.extend(extra.iter().map(|p| p.as_ref()));
        let mut statement = self.conn.prepare_cached(sql)?;
        // A change that takes the run off its lease returns its workflow (an end counts in the
        // ended counts) and its concurrency group (it gives its slot back, unless it suspends
        // under a rule that keeps it).
        let (changed, moved): (usize, Option<(String, Option<String>, bool)>) = match &append.update {
            RunUpdate::Progress | RunUpdate::Release => (statement.execute(bound.as_slice())?, None),
            _ => {
                let row =
                    statement.query_row(bound.as_slice(), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()?;
                (usize::from(row.is_some()), row)
            }
        };
        drop(statement);
        if changed == 0 {
            return Err(clean(self.append_refusal(append)?));
        }
        if !matches!(append.update, RunUpdate::Progress) {
            self.drop_head(&append.run_id)?;
        }
        if let Some((workflow, key, hold)) = moved {
            let keeps = hold && matches!(append.update, RunUpdate::Suspend { .. });
            if let (Some(key), false) = (&key, keeps) {
                self.release_slot(&workflow, key)?;
            }
            match &append.update {
                RunUpdate::Finish { status, .. } => self.count_ended(workflow, *status, 1),
                RunUpdate::Continue { .. } => self.count_ended(workflow, RunStatus::Continued, 1),
                _ => {}
            }
        }
        if let Some((signal, consumed_at)) = append.consumed() {
            let consumed_at = consumed_at as i64;
            let consumed = self
                .conn
                .prepare_cached(
                    "UPDATE signals SET consumed_seq = ?1 WHERE id = ?2 AND run_id = ?3 AND consumed_seq IS NULL",
                )?
                .execute(params![consumed_at, signal.0, append.run_id.as_str()])?;
            if consumed == 0 {
                return Err(Failure { error: StoreError::SignalUnavailable(signal), dirty: true });
            }
        }
        for (i, (event, json)) in append.events.iter().zip(encoded).enumerate() {
            self.insert_event(&append.run_id, append.after_seq + 1 + i as u64, append.at, event, json)?;
        }
        for (path, trim) in append.events.iter().filter_map(Event::deletion) {
            // Within the range (the primary key bounds the scan): the loop's iterations by path
            // prefix, its earlier checkpoints, and the values' sets (the checkpoint holds them).
            self.conn.prepare_cached(include_str!("../sql/statements/trim_loop.sql"))?.execute(params![
                append.run_id.as_str(),
                trim.after as i64,
                trim.through as i64,
                Trim::iteration_prefix(path),
                path.as_str()
            ])?;
        }
        if let RunUpdate::Continue { successor, .. } = &append.update {
            // The run's row and journal are written: a refused successor undoes them.
            self.create(successor).map_err(|failure| Failure { dirty: true, ..failure })?;
            self.conn
                .prepare_cached("UPDATE signals SET run_id = ?1 WHERE run_id = ?2 AND consumed_seq IS NULL")?
                .execute(params![successor.id.as_str(), append.run_id.as_str()])?;
        }
        Ok(())
    }

    pub(super) fn append_refusal(&self, append: &Append) -> Result<StoreError, Failure> {
        let found: Option<(i64, i64, String)> = self
            .conn
            .prepare_cached(concat!("SELECT epoch, ", folded!("last_seq"), ", status FROM runs WHERE id = ?1"))?
            .query_row([append.run_id.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        Ok(match found {
            None => StoreError::RunNotFound(append.run_id.clone()),
            Some((epoch, _, status)) if epoch as u64 != append.epoch || status != "running" => {
                StoreError::Fenced { run_id: append.run_id.clone(), held: append.epoch, current: epoch as u64 }
            }
            Some((_, last, _)) => StoreError::SequenceConflict {
                run_id: append.run_id.clone(),
                expected: append.after_seq,
                actual: last as u64,
            },
        })
    }

    pub(super) fn heartbeat(&mut self, request: &HeartbeatRequest) -> Result<Vec<LeaseStatus>, Failure> {
        let mut out = Vec::with_capacity(request.runs.len());
        for (run_id, epoch) in &request.runs {
            type Pending = (Option<String>, Option<String>);
            let held: Option<Pending> = self
                .conn
                .prepare_cached(include_str!("../sql/statements/heartbeat.sql"))?
                .query_row(
                    params![request.lease_until.as_millis(), run_id.as_str(), *epoch as i64, request.owner],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let (held, (kind, reason)) = match held {
                Some(pending) => (true, pending),
                None => {
                    let pending: Option<Pending> = self
                        .conn
                        .prepare_cached("SELECT request, request_reason FROM runs WHERE id = ?1")?
                        .query_row([run_id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()?;
                    (false, pending.unwrap_or_default())
                }
            };
            let pending = Request::from_parts(kind.as_deref(), reason).map_err(clean)?;
            out.push(LeaseStatus { run_id: run_id.clone(), held, pending });
        }
        Ok(out)
    }

    pub(super) fn status_of(&self, run_id: &RunId) -> Result<RunRecord, Failure> {
        self.get_run(run_id)?.ok_or_else(|| clean(StoreError::RunNotFound(run_id.clone())))
    }

    pub(super) fn signal(&mut self, signal: &NewSignal) -> Result<SignalId, Failure> {
        let mut target = self.status_of(&signal.run_id)?;
        // A run that continued as a fresh one: the signal goes to the newest of its chain.
        while let (RunStatus::Continued, Some(next)) = (target.status, &target.rare().continued_as) {
            target = self.status_of(next)?;
        }
        if target.status.is_terminal() {
            return Err(clean(StoreError::RunFinished { run_id: target.id, status: target.status }));
        }
        let (run_id, sent_at) = (target.id.as_str(), signal.sent_at.as_millis());
        let id: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO signals (run_id, name, payload, sent_at) VALUES (?1, ?2, ?3, ?4) RETURNING id",
            )?
            .query_row(params![run_id, signal.name, signal.payload.get(), sent_at], |r| r.get(0))?;
        self.conn.prepare_cached(include_str!("../sql/statements/signal.sql"))?.execute(params![run_id, sent_at])?;
        Ok(SignalId(id))
    }

    pub(super) fn pause(&mut self, request: &ControlRequest) -> Result<PauseOutcome, Failure> {
        let run = self.unfinished(&request.run_id)?;
        if run.status == RunStatus::Paused {
            return Ok(PauseOutcome::Paused);
        }
        if run.is_held_at(request.lease_now) {
            self.conn
                .prepare_cached(
                    "UPDATE runs SET request = 'pause', request_reason = ?2 WHERE id = ?1 AND request IS NULL",
                )?
                .execute([request.run_id.as_str(), &request.reason])?;
            return Ok(PauseOutcome::Requested);
        }
        self.conn
            .prepare_cached(concat!(
                "UPDATE runs SET epoch = epoch + 1, status = 'paused', error = ?2, updated_at = ?3, ",
                fold_head!(),
                ", ",
                clear_pause!(),
                ",
                     suspend_reason = NULL, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL, waiting_for = NULL, ",
                hold_after_debounce!(),
                "
                 WHERE id = ?1"
            ))?
            .execute(params![request.run_id.as_str(), request.reason, request.at.as_millis()])?;
        if run.status == RunStatus::Running {
            self.drop_head(&run.id)?;
        }
        self.release_held(&run)?;
        Ok(PauseOutcome::Paused)
    }

    pub(super) fn resume(&mut self, request: &ResumeRequest) -> Result<(), Failure> {
        let run = self.unfinished(&request.run_id)?;
        if run.status != RunStatus::Paused {
            return Err(clean(StoreError::NotPaused { run_id: request.run_id.clone(), status: run.status }));
        }
        self.conn
            .prepare_cached(include_str!("../sql/statements/resume.sql"))?
            .execute(params![request.run_id.as_str(), request.at.as_millis()])?;
        if let Some(place) = &run.concurrency {
            self.admit(&run.workflow, &place.key)?;
        }
        Ok(())
    }

    pub(super) fn start_with_signal(
        &mut self,
        run: &NewRun,
        signal: &StartSignal,
    ) -> Result<(CreatedRun, SignalId), Failure> {
        run.check_signal_start().map_err(clean)?;
        let existing = match self.by_key(run)? {
            Some(existing) => Some(existing),
            None => self.get_run(&run.id)?,
        };
        let created = match existing {
            Some(existing) => run.existing_to_signal(existing).map_err(clean)?,
            None => self.create(run)?,
        };
        let new = NewSignal {
            run_id: created.run.id.clone(),
            name: signal.name.clone(),
            payload: signal.payload.clone(),
            sent_at: run.created_at,
        };
        // A new run's writes roll back with a failed signal.
        let id = self.signal(&new).map_err(|failure| Failure { dirty: failure.dirty || created.created, ..failure })?;
        Ok((created, id))
    }

    /// The run `id`, refused if it does not exist or has ended.
    pub(super) fn unfinished(&self, id: &RunId) -> Result<RunRecord, Failure> {
        let run = self.status_of(id)?;
        if run.status.is_terminal() {
            return Err(clean(StoreError::RunFinished { run_id: id.clone(), status: run.status }));
        }
        Ok(run)
    }

    pub(super) fn cancel(&mut self, request: &ControlRequest) -> Result<CancelOutcome, Failure> {
        let run = self.unfinished(&request.run_id)?;
        let live = run.is_held_at(request.lease_now);
        if live {
            self.conn
                .prepare_cached("UPDATE runs SET request = 'cancel', request_reason = ?2 WHERE id = ?1")?
                .execute([request.run_id.as_str(), &request.reason])?;
            return Ok(CancelOutcome::Requested);
        }
        let seq = run.last_seq + 1;
        self.conn.prepare_cached(include_str!("../sql/statements/cancel.sql"))?.execute(params![
            request.run_id.as_str(),
            seq as i64,
            request.at.as_millis(),
            request.reason,
            run.recoveries
        ])?;
        if run.status == RunStatus::Running {
            self.drop_head(&run.id)?;
        }
        self.release_held(&run)?;
        self.count_ended(run.workflow.into_string(), RunStatus::Cancelled, 1);
        let cancelled = Event::Cancelled { reason: request.reason.clone() };
        self.insert_event(&request.run_id, seq, request.at, &cancelled, &cancelled.to_json())?;
        Ok(CancelOutcome::Cancelled)
    }
}
