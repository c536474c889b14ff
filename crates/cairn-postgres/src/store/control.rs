//! The operations that take a transaction of their own: cancel, pause, resume, signal, debounce, schedules' firings, continuations, concurrency rules.

use super::handle::PostgresStore;
use super::listen::SIGNALLED;
use super::listen::{notify, notify_ended};
use super::prelude::*;
use super::rows::{ClaimValues, insert_events, row_to_run};
use super::sql::Sql;
use super::sql::backend;
use super::writer::{Job, append_one, create_batch, flow_places, placed};

/// Locks run `id` for the rest of the transaction; refused if it does not exist or has ended.
pub(super) async fn lock_unfinished(tx: &impl GenericClient, sql: &Sql, id: &RunId) -> Result<RunRecord, StoreError> {
    let run = lock_run(tx, sql, id).await?;
    if run.status.is_terminal() {
        return Err(StoreError::RunFinished { run_id: id.clone(), status: run.status });
    }
    Ok(run)
}

/// Buffers `signal` for its run (locked by the caller, and unfinished) in transaction `tx`, waking
/// the run if it waits, and tells listening processes at commit.
pub(super) async fn insert_signal(
    tx: &impl GenericClient,
    sql: &Sql,
    signal: &NewSignal,
) -> Result<SignalId, StoreError> {
    let statement = tx.prepare_cached(&sql.insert_signal).await.map_err(backend)?;
    let row = tx
        .query_one(
            &statement,
            &[&signal.run_id.as_str(), &signal.name, &signal.payload.get(), &signal.sent_at.as_millis()],
        )
        .await
        .map_err(backend)?;
    let id: i64 = row.try_get(0).map_err(backend)?;
    let statement = tx.prepare_cached(&sql.wake_waiting).await.map_err(backend)?;
    tx.execute(&statement, &[&signal.run_id.as_str(), &signal.sent_at.as_millis()]).await.map_err(backend)?;
    notify(tx, sql, &format!("{SIGNALLED}{}", signal.run_id)).await?;
    Ok(SignalId(id))
}

/// Locks run `id` for the rest of the transaction; refused if it does not exist.
pub(super) async fn lock_run(tx: &impl GenericClient, sql: &Sql, id: &RunId) -> Result<RunRecord, StoreError> {
    let statement = tx.prepare_cached(&sql.lock_run).await.map_err(backend)?;
    let row = tx.query_opt(&statement, &[&id.as_str()]).await.map_err(backend)?;
    row.as_ref().map(row_to_run).transpose()?.ok_or_else(|| StoreError::RunNotFound(id.clone()))
}

impl PostgresStore {
    pub(super) async fn cancel_inner(&self, request: ControlRequest) -> Result<CancelOutcome, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        let run = lock_unfinished(&tx, sql, &request.run_id).await?;
        let live = run.is_held_at(request.lease_now);
        if live {
            let statement = tx.prepare_cached(&sql.request_cancel).await.map_err(backend)?;
            tx.execute(&statement, &[&request.run_id.as_str(), &request.reason]).await.map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            return Ok(CancelOutcome::Requested);
        }
        let seq = run.last_seq + 1;
        let statement = tx.prepare_cached(&sql.cancel_now).await.map_err(backend)?;
        tx.execute(&statement, &[&request.run_id.as_str(), &(seq as i64), &request.at.as_millis(), &request.reason])
            .await
            .map_err(backend)?;
        let cancelled = Event::Cancelled { reason: request.reason.clone() };
        insert_events(&tx, sql, &request.run_id, run.last_seq, request.at, &[cancelled]).await?;
        tx.commit().await.map_err(backend)?;
        notify_ended(&client, sql, std::slice::from_ref(&request.run_id)).await;
        Ok(CancelOutcome::Cancelled)
    }

    pub(super) async fn pause_inner(&self, request: ControlRequest) -> Result<PauseOutcome, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        let run = lock_unfinished(&tx, sql, &request.run_id).await?;
        if run.status == RunStatus::Paused {
            return Ok(PauseOutcome::Paused);
        }
        let live = run.is_held_at(request.lease_now);
        let outcome = if live {
            let statement = tx.prepare_cached(&sql.request_pause).await.map_err(backend)?;
            tx.execute(&statement, &[&request.run_id.as_str(), &request.reason]).await.map_err(backend)?;
            PauseOutcome::Requested
        } else {
            let statement = tx.prepare_cached(&sql.pause_now).await.map_err(backend)?;
            tx.execute(&statement, &[&request.run_id.as_str(), &request.reason, &request.at.as_millis()])
                .await
                .map_err(backend)?;
            PauseOutcome::Paused
        };
        tx.commit().await.map_err(backend)?;
        Ok(outcome)
    }

    pub(super) async fn resume_inner(&self, request: ResumeRequest) -> Result<(), StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        let run = lock_unfinished(&tx, sql, &request.run_id).await?;
        if run.status != RunStatus::Paused {
            return Err(StoreError::NotPaused { run_id: request.run_id, status: run.status });
        }
        let statement = tx.prepare_cached(&sql.resume).await.map_err(backend)?;
        tx.execute(&statement, &[&request.run_id.as_str(), &request.at.as_millis()]).await.map_err(backend)?;
        notify(&tx, sql, "").await?;
        tx.commit().await.map_err(backend)
    }

    pub(super) async fn signal_inner(&self, mut signal: NewSignal) -> Result<SignalId, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let mut target = lock_run(&tx, &self.sql, &signal.run_id).await?;
        // A run that continued as a fresh one: the signal goes to the newest of its chain (each
        // locked in turn, so a hand-over under way finishes first and its signals move with it).
        while let (RunStatus::Continued, Some(next)) = (target.status, &target.rare().continued_as) {
            target = lock_run(&tx, &self.sql, next).await?;
        }
        if target.status.is_terminal() {
            return Err(StoreError::RunFinished { run_id: target.id, status: target.status });
        }
        signal.run_id = target.id;
        let id = insert_signal(&tx, &self.sql, &signal).await?;
        tx.commit().await.map_err(backend)?;
        Ok(id)
    }

    /// A debounced start in one transaction: the run debouncing under its key, new or joined
    /// (`debounce_run`), with its `started` event written or rewritten to the latest input.
    pub(super) async fn debounce_inner(&self, run: NewRun) -> Result<CreatedRun, StoreError> {
        run.check_debounce()?;
        let record = RunRecord::of(&run);
        let Some(debounce) = &run.debounce else {
            return Err(StoreError::InvalidInput("not a debounced start".into()));
        };
        let quiet_after = (run.created_at + debounce.quiet).as_millis();
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        let statement = tx.prepare_cached(&sql.debounce_run).await.map_err(backend)?;
        let params: [&(dyn ToSql + Sync); 13] = [
            &run.id.as_str(),
            &run.workflow.as_str(),
            &(run.version as i32),
            &record.wake_at.map(Timestamp::as_millis),
            &run.input.get(),
            &run.created_at.as_millis(),
            &run.deadline.map(Timestamp::as_millis),
            &run.retention_ms(),
            &run.priority,
            &run.fairness_key.as_deref().unwrap_or_default(),
            &debounce.key,
            &record.rare().debounce_until.map(Timestamp::as_millis),
            &quiet_after,
        ];
        let row = tx.query_one(&statement, &params).await.map_err(|error| {
            // The arbiter covers the debounce key only: a clash on the id is an error.
            match error.code() {
                Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => StoreError::DuplicateRunId(run.id.clone()),
                _ => backend(error),
            }
        })?;
        let stored = row_to_run(&row)?;
        let created: bool = row.try_get("created").map_err(backend)?;
        if created {
            insert_events(&tx, sql, &run.id, 0, run.created_at, &run.initial_journal()).await?;
            notify(&tx, sql, "").await?;
        } else {
            let statement = tx.prepare_cached(&sql.restart_journal).await.map_err(backend)?;
            tx.execute(&statement, &[&stored.id.as_str(), &stored.started().to_json()]).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)?;
        Ok(CreatedRun { run: stored, created })
    }

    /// Fires a due schedule in one transaction: moves `next_fire_at` on (if it is still `due`: a
    /// concurrent firer's update waits for this one and then matches nothing), then creates its
    /// runs, finding those an earlier firing of the same time created.
    pub(super) async fn fire_inner(&self, fire: FireSchedule) -> Result<Option<Vec<CreatedRun>>, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        let statement = tx.prepare_cached(&sql.fire_schedule).await.map_err(backend)?;
        let (next, last) = (fire.next_fire_at.map(Timestamp::as_millis), fire.last_fired_at.map(Timestamp::as_millis));
        let params: [&(dyn ToSql + Sync); 6] =
            [&fire.name, &fire.due.as_millis(), &next, &last, &fire.now.as_millis(), &fire.manual];
        if tx.execute(&statement, &params).await.map_err(backend)? == 0 {
            return Ok(None);
        }
        let runs: Vec<&NewRun> = fire.runs.iter().collect();
        let mut created = Vec::with_capacity(runs.len());
        for outcome in create_batch(&tx, sql, &runs).await? {
            created.push(match outcome {
                Err(StoreError::DuplicateRunId(id)) => {
                    CreatedRun { run: lock_run(&tx, sql, &id).await?, created: false }
                }
                other => other?,
            });
        }
        tx.commit().await.map_err(backend)?;
        Ok(Some(created))
    }

    /// A run's hand-over to its successor (`append` finishes the run as `continued`) in one
    /// transaction of its own, outside the group-commit writer: it is the run's last append, sent
    /// once every earlier one has committed.
    pub(super) async fn continue_inner(&self, append: Append, successor: NewRun) -> Result<(), StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        append_one(&tx, sql, &append).await?;
        let from = append.run_id.as_str();
        let statement = tx.prepare_cached(&sql.continued_as).await.map_err(backend)?;
        tx.execute(&statement, &[&from, &successor.id.as_str()]).await.map_err(backend)?;
        match create_batch(&tx, sql, &[&successor]).await?.pop() {
            Some(Ok(CreatedRun { created: true, .. })) => {}
            Some(Err(error)) => return Err(error),
            _ => return Err(StoreError::DuplicateRunId(successor.id)),
        }
        let statement = tx.prepare_cached(&sql.move_signals).await.map_err(backend)?;
        tx.execute(&statement, &[&successor.id.as_str(), &from]).await.map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        notify_ended(&client, sql, std::slice::from_ref(&append.run_id)).await;
        Ok(())
    }

    /// Changes `workflow`'s concurrency rule by `statement` and admits, in the same transaction,
    /// what every group of the workflow now has room for; tells idle workers. The rows changed.
    pub(super) async fn change_rule(
        &self,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
        workflow: &str,
    ) -> Result<u64, StoreError> {
        let sql = &self.sql;
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let prepared = tx.prepare_cached(statement).await.map_err(backend)?;
        let changed = tx.execute(&prepared, params).await.map_err(backend)?;
        tx.execute(&sql.ensure_flow_triggers, &[]).await.map_err(backend)?;
        let admit = tx.prepare_cached(&sql.admit_workflow).await.map_err(backend)?;
        tx.query(&admit, &[&workflow]).await.map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        notify(&client, sql, "").await?;
        Ok(changed)
    }

    /// Signal-with-start in one transaction. Concurrent callers with one id or key serialize on
    /// the insert (the losers wait for the winner's commit, then find its run).
    pub(super) async fn start_with_signal_inner(
        &self,
        run: NewRun,
        signal: StartSignal,
    ) -> Result<(CreatedRun, SignalId), StoreError> {
        run.check_signal_start()?;
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        let statement = tx.prepare_cached(&sql.insert_run).await.map_err(backend)?;
        let fair_key = run.fairness_key.as_deref().unwrap_or_default();
        let params: [&(dyn ToSql + Sync); 14] = [
            &run.id.as_str(),
            &run.workflow.as_str(),
            &(run.version as i32),
            &run.input.get(),
            &run.idempotency_key.as_deref(),
            &run.created_at.as_millis(),
            &(run.last_seq() as i64),
            &run.deadline.map(Timestamp::as_millis),
            &run.retention_ms(),
            &run.restarted_from.as_ref().map(RunId::as_str),
            &run.parent.as_ref().map(RunId::as_str),
            &run.continued_from.as_ref().map(RunId::as_str),
            &run.priority,
            &fair_key,
        ];
        let created = if let Some(row) = tx.query_opt(&statement, &params).await.map_err(backend)? {
            insert_events(&tx, sql, &run.id, 0, run.created_at, &run.initial_journal()).await?;
            notify(&tx, sql, "").await?;
            let grouped: &[&str] = if row.try_get(1).map_err(backend)? { &[run.id.as_str()] } else { &[] };
            let mut places = flow_places(&tx, sql, grouped).await?;
            let fair_seq = row.try_get(2).map_err(backend)?;
            CreatedRun { run: placed(RunRecord::of(&run), fair_seq, &mut places), created: true }
        } else {
            let by_key = match &run.idempotency_key {
                Some(key) => {
                    let statement = tx.prepare_cached(&sql.lock_by_key).await.map_err(backend)?;
                    let row =
                        tx.query_opt(&statement, &[&run.workflow.as_str(), &key.as_str()]).await.map_err(backend)?;
                    row.as_ref().map(row_to_run).transpose()?
                }
                None => None,
            };
            let existing = match by_key {
                Some(existing) => existing,
                None => lock_run(&tx, sql, &run.id).await?,
            };
            run.existing_to_signal(existing)?
        };
        let new = NewSignal {
            run_id: created.run.id.clone(),
            name: signal.name,
            payload: signal.payload,
            sent_at: run.created_at,
        };
        let id = insert_signal(&tx, sql, &new).await?;
        tx.commit().await.map_err(backend)?;
        Ok((created, id))
    }

    /// One pass of a claim (`Sql::claim`): the runs it claimed, and how many woken runs it
    /// queued for a concurrency slot again.
    pub(super) async fn claim_pass(
        &self,
        values: &ClaimValues,
        request: &ClaimRequest,
    ) -> Result<(Vec<RunRecord>, i64), StoreError> {
        let rows = self.rows(&self.sql.claim, &values.params(request)).await?;
        let requeued = match rows.first() {
            Some(row) => row.try_get::<_, i64>(row.len() - 1).map_err(backend)?,
            None => 0,
        };
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            // The row of nulls a pass that claimed nothing answers.
            if row.try_get::<_, Option<&str>>(0).map_err(backend)?.is_some() {
                claimed.push(row_to_run(row)?);
            }
        }
        Ok((claimed, requeued))
    }

    pub(super) async fn query_runs(
        &self,
        text: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.rows(text, params).await?.iter().map(row_to_run).collect()
    }

    /// Records `event`, or adds its runs to the record of its id ([`EventRecord::runs_over`])
    /// under a row lock, so concurrent publishes of one id lose no run.
    pub(super) async fn record_event_inner(&self, event: &EventRecord) -> Result<(), StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let encode = |runs: Vec<cairn_store::EventRun>| serde_json::to_string(&runs).map_err(StoreError::from_cause);
        let statement = tx
            .prepare_cached(
                "INSERT INTO events (id, topic, payload, published_at, runs) VALUES ($1, $2, $3, $4, $5)
                    ON CONFLICT (id) DO NOTHING",
            )
            .await
            .map_err(backend)?;
        let params: [&(dyn ToSql + Sync); 5] = [
            &event.id,
            &event.topic,
            &event.payload.get(),
            &event.published_at.as_millis(),
            &encode(event.runs_over(vec![]))?,
        ];
        if tx.execute(&statement, &params).await.map_err(backend)? == 0 {
            let statement =
                tx.prepare_cached("SELECT runs FROM events WHERE id = $1 FOR UPDATE").await.map_err(backend)?;
            let runs: String =
                tx.query_one(&statement, &[&event.id]).await.map_err(backend)?.try_get(0).map_err(backend)?;
            let kept = serde_json::from_str(&runs).map_err(StoreError::from_cause)?;
            let statement = tx.prepare_cached("UPDATE events SET runs = $2 WHERE id = $1").await.map_err(backend)?;
            tx.execute(&statement, &[&event.id, &encode(event.runs_over(kept))?]).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    /// The rows statement `text` answers, on a pooled connection.
    pub(super) async fn rows(&self, text: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        let statement = client.prepare_cached(text).await.map_err(backend)?;
        client.query(&statement, params).await.map_err(backend)
    }
}

/// The outcome of a job handed to the writer task.
pub(super) async fn writer_outcome<T>(
    sent: Result<(), mpsc::error::SendError<Job>>,
    outcome: oneshot::Receiver<Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let stopped = || StoreError::backend("the PostgreSQL writer task has stopped");
    sent.map_err(|_| stopped())?;
    outcome.await.map_err(|_| stopped())?
}
