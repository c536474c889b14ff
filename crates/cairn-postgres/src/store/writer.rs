//! The writer: creates and appends from many callers gathered into rounds, each committed in one transaction.

use super::listen::{notify, notify_ended};
use super::prelude::*;
use super::rows::{JournalColumns, row_to_run};
use super::sql::Sql;
use super::sql::backend;

/// Where the writer task sends a job's outcome.
pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// A write waiting for the writer task.
pub(super) enum Job {
    Append(Append, Reply<()>),
    Create(NewRun, Reply<CreatedRun>),
}

impl Job {
    pub(super) fn run_id(&self) -> &RunId {
        match self {
            Job::Append(append, _) => &append.run_id,
            Job::Create(run, _) => &run.id,
        }
    }
}

/// Most queued jobs the writer gathers at a time (a round takes at most one per run).
pub(super) const MAX_ROUND: usize = 2048;

/// Creates `runs` (distinct ids) in one statement on `client` (a connection or an open
/// transaction); per run, the run or why it was refused. A run whose idempotency key is taken
/// comes back as the existing run with `created: false`.
pub(super) async fn create_batch(
    client: &impl GenericClient,
    sql: &Sql,
    runs: &[&NewRun],
) -> Result<Vec<Result<CreatedRun, StoreError>>, StoreError> {
    let initial: Vec<Vec<Event>> = runs.iter().map(|run| run.initial_journal()).collect();
    let mut rows = JournalColumns::default();
    for (run, events) in runs.iter().zip(&initial) {
        rows.push(&run.id, 0, run.created_at, events);
    }
    let last_seqs: Vec<i64> = runs.iter().map(|r| r.last_seq() as i64).collect();
    let deadlines: Vec<Option<i64>> = runs.iter().map(|r| r.deadline.map(Timestamp::as_millis)).collect();
    let retentions: Vec<Option<i64>> = runs.iter().map(|r| r.retention_ms()).collect();
    let restarted: Vec<Option<&str>> = runs.iter().map(|r| r.restarted_from.as_ref().map(RunId::as_str)).collect();
    let parents: Vec<Option<&str>> = runs.iter().map(|r| r.parent.as_ref().map(RunId::as_str)).collect();
    let continued: Vec<Option<&str>> = runs.iter().map(|r| r.continued_from.as_ref().map(RunId::as_str)).collect();
    let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    let workflows: Vec<&str> = runs.iter().map(|r| r.workflow.as_str()).collect();
    let versions: Vec<i32> = runs.iter().map(|r| r.version as i32).collect();
    let inputs: Vec<&str> = runs.iter().map(|r| r.input.get()).collect();
    let keys: Vec<Option<&str>> = runs.iter().map(|r| r.idempotency_key.as_deref()).collect();
    let created_ats: Vec<i64> = runs.iter().map(|r| r.created_at.as_millis()).collect();
    let priorities: Vec<i32> = runs.iter().map(|r| r.priority).collect();
    let fair_keys: Vec<&str> = runs.iter().map(|r| r.fairness_key.as_deref().unwrap_or_default()).collect();
    let statement = client.prepare_cached(&sql.create_batch).await.map_err(backend)?;
    let runs_params: [&(dyn ToSql + Sync); 6] = [&ids, &workflows, &versions, &inputs, &keys, &created_ats];
    let more: [&(dyn ToSql + Sync); 9] =
        [&sql.schema, &last_seqs, &deadlines, &retentions, &restarted, &parents, &continued, &priorities, &fair_keys];
    let params: Vec<&(dyn ToSql + Sync)> = runs_params.into_iter().chain(rows.params()).chain(more).collect();
    let inserted = client.query(&statement, &params).await.map_err(backend)?;
    let mut grouped = Vec::new();
    let mut fair_seqs = HashMap::with_capacity(inserted.len());
    for row in &inserted {
        let id: &str = row.try_get(0).map_err(backend)?;
        if row.try_get::<_, bool>(1).map_err(backend)? {
            grouped.push(id);
        }
        fair_seqs.insert(id, row.try_get::<_, i64>(2).map_err(backend)?);
    }
    let mut places = flow_places(client, sql, &grouped).await?;
    let mut outcomes = Vec::with_capacity(runs.len());
    for run in runs {
        let outcome = if let Some(fair_seq) = fair_seqs.get(run.id.as_str()) {
            Ok(CreatedRun { run: placed(RunRecord::of(run), *fair_seq, &mut places), created: true })
        } else {
            // The id or the idempotency key is taken; the key's owner, if any, is the answer.
            let existing = match &run.idempotency_key {
                Some(key) => {
                    let statement = client.prepare_cached(&sql.by_key).await.map_err(backend)?;
                    let row = client
                        .query_opt(&statement, &[&run.workflow.as_str(), &key.as_str()])
                        .await
                        .map_err(backend)?;
                    row.as_ref().map(row_to_run).transpose()?
                }
                None => None,
            };
            match existing {
                Some(run) => Ok(CreatedRun { run, created: false }),
                None => Err(StoreError::DuplicateRunId(run.id.clone())),
            }
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// Where new runs of limited workflows stand (admitted at once or waiting: their inserts'
/// triggers decided), by id; nothing to read for no runs.
pub(super) async fn flow_places(
    client: &impl GenericClient,
    sql: &Sql,
    ids: &[&str],
) -> Result<HashMap<String, (RunConcurrency, Option<WaitingFor>)>, StoreError> {
    let mut places = HashMap::new();
    if ids.is_empty() {
        return Ok(places);
    }
    let statement = client.prepare_cached(&sql.flow_places).await.map_err(backend)?;
    for row in client.query(&statement, &[&ids]).await.map_err(backend)? {
        let id: String = row.try_get(0).map_err(backend)?;
        let place = RunConcurrency::stored(row.try_get(1).map_err(backend)?, row.try_get(2).map_err(backend)?);
        let waiting =
            WaitingFor::stored(row.try_get::<_, Option<&str>>(3).map_err(backend)?).map_err(StoreError::Corrupt)?;
        if let Some(place) = place {
            places.insert(id, (place, waiting));
        }
    }
    Ok(places)
}

/// `run` with the fairness sequence its insert gave it and its place from `places`, if it has one.
pub(super) fn placed(
    mut run: RunRecord,
    fair_seq: i64,
    places: &mut HashMap<String, (RunConcurrency, Option<WaitingFor>)>,
) -> RunRecord {
    run.fair_seq = fair_seq;
    if let Some((place, waiting)) = places.remove(run.id.as_str()) {
        (run.concurrency, run.waiting_for) = (Some(place), waiting);
    }
    run
}

/// Executes one append as one statement on `client` (a connection or an open transaction).
pub(super) async fn append_one(client: &impl GenericClient, sql: &Sql, append: &Append) -> Result<(), StoreError> {
    let new_last = (append.after_seq + append.events.len() as u64) as i64;
    let (at, epoch, after) = (append.at.as_millis(), append.epoch as i64, append.after_seq as i64);
    let run_id = append.run_id.as_str();
    let signal = append.consume_signal.map(|s| s.0);
    let consumed_at = append.consumed().map_or(new_last, |(_, seq)| seq as i64);
    let rows = JournalColumns::of(&append.run_id, append.after_seq, append.at, &append.events);
    let (text, extra): (&str, Vec<Box<dyn ToSql + Sync + Send>>) = match &append.update {
        RunUpdate::Progress => (&sql.progress, Vec::new()),
        RunUpdate::Suspend { reason, wake_at, signals_after, now } => (
            &sql.suspend,
            vec![
                Box::new(reason.as_str()),
                Box::new(signals_after.map(|s| s.0)),
                Box::new(now.as_millis()),
                Box::new(wake_at.map(Timestamp::as_millis)),
            ],
        ),
        RunUpdate::Finish { status, output, error, at } => (
            &sql.finish,
            vec![
                Box::new(status.as_str()),
                Box::new(output.as_ref().map(|o| o.get().to_owned())),
                Box::new(error.clone()),
                Box::new(at.as_millis()),
            ],
        ),
        RunUpdate::Release => (&sql.release, Vec::new()),
        RunUpdate::Park { error } => (&sql.park, vec![Box::new(error.clone())]),
        // `PostgresStore::append` commits a hand-over by itself, as a finish.
        RunUpdate::Continue { .. } => {
            return Err(StoreError::InvalidInput("a hand-over does not go through the writer".into()));
        }
    };
    let mut bound: Vec<&(dyn ToSql + Sync)> = vec![
        &new_last,
        &at,
        &run_id,
        &epoch,
        &after,
        &signal,
        &consumed_at,
        &rows.seqs,
        &rows.kinds,
        &rows.paths,
        &rows.data,
    ];
    bound.extend(extra.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)));
    let statement = client.prepare_cached(text).await.map_err(backend)?;
    let row = client.query_one(&statement, &bound).await.map_err(backend)?;
    if row.try_get::<_, i64>(0).map_err(backend)? == 1 {
        if let RunUpdate::Suspend { signals_after: Some(after), now, .. } = &append.update {
            // A fresh snapshot, taken while this transaction (or, alone, the committed suspend)
            // holds the row: a signal that slipped past the suspend's snapshot is seen here, and
            // any later one finds the run suspended and wakes it itself.
            let statement = client.prepare_cached(&sql.recheck_signals).await.map_err(backend)?;
            let woken =
                client.execute(&statement, &[&run_id, &now.as_millis(), &epoch, &after.0]).await.map_err(backend)?;
            if woken > 0 {
                notify(client, sql, "").await?;
            }
        }
        for (path, trim) in append.events.iter().filter_map(Event::deletion) {
            // After the append (in its transaction when in a round): a trim left undone keeps
            // history the fold accepts anyway.
            let statement = client.prepare_cached(&sql.trim_loop).await.map_err(backend)?;
            let (after, through) = (trim.after as i64, trim.through as i64);
            let prefix = cairn_journal::Trim::iteration_prefix(path);
            client.execute(&statement, &[&run_id, &after, &through, &prefix, &path.as_str()]).await.map_err(backend)?;
        }
        return Ok(());
    }
    Err(refusal(client, sql, append).await?)
}

/// Why an append that matched nothing was refused (read after the fact; nothing was written).
pub(super) async fn refusal(client: &impl GenericClient, sql: &Sql, append: &Append) -> Result<StoreError, StoreError> {
    let statement = client.prepare_cached(&sql.refusal).await.map_err(backend)?;
    let row = client.query_opt(&statement, &[&append.run_id.as_str()]).await.map_err(backend)?;
    let run_id = append.run_id.clone();
    Ok(match row {
        None => StoreError::RunNotFound(run_id),
        Some(row) => {
            let current = row.try_get::<_, i64>(0).map_err(backend)? as u64;
            let actual = row.try_get::<_, i64>(1).map_err(backend)? as u64;
            let status = row.try_get::<_, &str>(2).map_err(backend)?;
            if current != append.epoch || status != "running" {
                StoreError::Fenced { run_id, held: append.epoch, current }
            } else if actual != append.after_seq {
                StoreError::SequenceConflict { run_id, expected: append.after_seq, actual }
            } else {
                StoreError::SignalUnavailable(append.consume_signal.unwrap_or(SignalId(0)))
            }
        }
    })
}

/// A run's journal entries with sequence numbers in `first..=last`, in order.
pub(super) async fn journal_range(
    pool: Pool,
    sql: Arc<Sql>,
    id: RunId,
    (first, last): (u64, u64),
) -> Result<Vec<JournalEntry>, StoreError> {
    let (first, last) = (i64::try_from(first).unwrap_or(i64::MAX), i64::try_from(last).unwrap_or(i64::MAX));
    let client = pool.get().await.map_err(backend)?;
    let statement = client.prepare_cached(&sql.journal).await.map_err(backend)?;
    let rows = client.query(&statement, &[&id.as_str(), &first, &last]).await.map_err(backend)?;
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get(0).map_err(backend)?;
            let at: i64 = row.try_get(1).map_err(backend)?;
            let data: &str = row.try_get(2).map_err(backend)?;
            let event = Event::from_json(data)
                .map_err(|e| StoreError::Corrupt(format!("run {id} event #{seq} is unreadable: {e}")))?;
            Ok(JournalEntry::new(seq as u64, Timestamp::from_millis(at), event))
        })
        .collect()
}

/// The group-commit writer: drains queued jobs into rounds (at most one job per run per round, so
/// a run's writes keep their order) and commits each round as one transaction: new runs in one
/// statement, plain progress and finishing appends in another, other appends one statement each.
/// A lone job commits by itself in one statement. If a round's transaction fails as a whole,
/// every job of the round is retried alone.
pub(super) async fn writer(pool: Pool, sql: Arc<Sql>, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut pending: VecDeque<Job> = VecDeque::new();
    // Runs with a job in a round under way: their next jobs wait, so each run's writes keep
    // their order and concurrent rounds never touch the same rows.
    let mut busy: HashSet<RunId> = HashSet::new();
    let mut rounds: tokio::task::JoinSet<Vec<RunId>> = tokio::task::JoinSet::new();
    // The round under way that creates runs, if any: new runs wait for it, since a run's fairness
    // place is one past the last committed of its key, and two rounds creating at once would both
    // read the same last one (and give two runs one place).
    let mut creating: Option<tokio::task::Id> = None;
    let mut open = true;
    loop {
        while open && pending.len() < MAX_ROUND {
            match queue.try_recv() {
                Ok(job) => pending.push_back(job),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        if rounds.len() < ROUNDS_IN_FLIGHT {
            let mut round = Round::default();
            let mut later = VecDeque::new();
            // Where each run's append sits in this round.
            let mut in_round: HashMap<RunId, usize> = HashMap::new();
            for job in pending.drain(..) {
                if creating.is_some() && matches!(job, Job::Create(..)) {
                    later.push_back(job);
                    continue;
                }
                if busy.contains(job.run_id()) {
                    // The run's next append joins the one it follows in this round (one run's
                    // concurrent items or branches commit together); anything else waits.
                    if let Job::Append(append, _) = &job
                        && let Some((earlier, replies)) =
                            in_round.get(&append.run_id).and_then(|&i| round.appends.get_mut(i))
                        && follows(earlier, append)
                        && let Job::Append(append, reply) = job
                    {
                        earlier.events.extend(append.events);
                        (earlier.update, earlier.at) = (append.update, append.at);
                        replies.push(reply);
                    } else {
                        later.push_back(job);
                    }
                    continue;
                }
                busy.insert(job.run_id().clone());
                match job {
                    Job::Create(run, reply) => round.creates.push((run, reply)),
                    Job::Append(append, reply) => {
                        in_round.insert(append.run_id.clone(), round.appends.len());
                        round.appends.push((append, vec![reply]));
                    }
                }
            }
            pending = later;
            if !round.is_empty() {
                let creates = !round.creates.is_empty();
                let task = rounds.spawn(round.commit(pool.clone(), Arc::clone(&sql)));
                if creates {
                    creating = Some(task.id());
                }
                continue;
            }
        }
        if !open && rounds.is_empty() && pending.is_empty() {
            return;
        }
        tokio::select! {
            Some(done) = rounds.join_next_with_id(), if !rounds.is_empty() => {
                let task = done.as_ref().map_or_else(tokio::task::JoinError::id, |(task, _)| *task);
                if creating == Some(task) {
                    creating = None;
                }
                // A round that panicked leaves its runs busy; their callers see the writer gone.
                if let Ok((_, runs)) = done {
                    for run in runs {
                        busy.remove(&run);
                    }
                }
            }
            job = queue.recv(), if open => match job {
                Some(job) => pending.push_back(job),
                None => open = false,
            },
        }
    }
}

/// Whether `next` can be merged into `earlier`, an append of the same run in the round being
/// gathered: it continues the journal right after it, under the same lease, and neither is more
/// than plain progress (the last may finish the run). The merged append carries the later time.
pub(super) fn follows(earlier: &Append, next: &Append) -> bool {
    earlier.epoch == next.epoch
        && next.after_seq == earlier.after_seq + earlier.events.len() as u64
        && matches!(earlier.update, RunUpdate::Progress)
        && matches!(next.update, RunUpdate::Progress | RunUpdate::Finish { .. })
        && earlier.consume_signal.is_none()
        && next.consume_signal.is_none()
}

/// Rounds committing at once: while one waits for PostgreSQL, the next is gathered and sent.
pub(super) const ROUNDS_IN_FLIGHT: usize = 2;

/// The jobs of one round, each with where its outcome goes.
#[derive(Default)]
pub(super) struct Round {
    pub(super) creates: Vec<(NewRun, Reply<CreatedRun>)>,
    /// Each append with its callers: more than one where later appends of a run were merged in.
    pub(super) appends: Vec<(Append, Vec<Reply<()>>)>,
}

impl Round {
    pub(super) fn is_empty(&self) -> bool {
        self.creates.is_empty() && self.appends.is_empty()
    }

    /// Commits the round (see `commit_round`; a lone job in one statement; each job alone if
    /// the creates' transaction failed), answers its callers, reports the runs that ended, and
    /// gives back the ids of its runs.
    pub(super) async fn commit(self, pool: Pool, sql: Arc<Sql>) -> Vec<RunId> {
        let began = std::time::Instant::now();
        let new_runs: Vec<&NewRun> = self.creates.iter().map(|(run, _)| run).collect();
        let writes: Vec<&Append> = self.appends.iter().map(|(append, _)| append).collect();
        let committed = if new_runs.len() + writes.len() > 1 {
            commit_round(&pool, &sql, &new_runs, &writes).await.ok()
        } else {
            None
        };
        let (created, appended) = match committed {
            Some(outcomes) => outcomes,
            None => each_alone(&pool, &sql, &new_runs, &writes).await,
        };
        cairn_store::metrics_names::committed(new_runs.len() + writes.len(), began.elapsed());
        let ended: Vec<RunId> = writes
            .iter()
            .zip(&appended)
            .filter(|(append, outcome)| {
                outcome.is_ok() && matches!(append.update, RunUpdate::Finish { .. } | RunUpdate::Park { .. })
            })
            .map(|(append, _)| append.run_id.clone())
            .collect();
        let mut runs = Vec::with_capacity(new_runs.len() + writes.len());
        // A caller may have stopped waiting; nothing to do then.
        for ((run, reply), outcome) in self.creates.into_iter().zip(created) {
            runs.push(run.id);
            let _ = reply.send(outcome);
        }
        for ((append, replies), outcome) in self.appends.into_iter().zip(appended) {
            runs.push(append.run_id);
            for reply in replies {
                let _ = reply.send(outcome.clone());
            }
        }
        if !ended.is_empty()
            && let Ok(client) = pool.get().await
        {
            notify_ended(&client, &sql, &ended).await;
        }
        runs
    }
}

/// Outcomes of a round's creates and appends, in order.
pub(super) type RoundOutcomes = (Vec<Result<CreatedRun, StoreError>>, Vec<Result<(), StoreError>>);

/// Each job in its own statement (and so its own transaction).
pub(super) async fn each_alone(pool: &Pool, sql: &Sql, runs: &[&NewRun], appends: &[&Append]) -> RoundOutcomes {
    let mut created = Vec::with_capacity(runs.len());
    for run in runs {
        let outcome = match pool.get().await {
            Ok(client) => create_batch(&client, sql, &[run]).await.and_then(|mut one| {
                one.pop().unwrap_or_else(|| Err(StoreError::backend("a create came back without an outcome")))
            }),
            Err(error) => Err(backend(error)),
        };
        created.push(outcome);
    }
    let mut appended = Vec::with_capacity(appends.len());
    for append in appends {
        let outcome = match pool.get().await {
            Ok(client) => append_one(&client, sql, append).await,
            Err(error) => Err(backend(error)),
        };
        appended.push(outcome);
    }
    (created, appended)
}

/// Whether `append` goes in the round's one batched statement: progress and finishing appends
/// that consume no signal and delete nothing.
fn batchable(append: &Append) -> bool {
    matches!(append.update, RunUpdate::Progress | RunUpdate::Finish { .. })
        && append.consume_signal.is_none()
        && !append.events.iter().any(|e| e.deletion().is_some())
}

/// One round: its creates in one transaction, then its appends, each in a statement that is its
/// own transaction (the batchable ones together in one): no transaction holds a run's row for a
/// network round trip (`BEGIN` … `COMMIT` held it until `COMMIT` arrived, and a heartbeat of
/// that run waited for it: with 300 ms each way, seconds when a round had several statements),
/// and a round of batched appends alone (most rounds) is one round trip instead of three. `Err`
/// means nothing was written (the creates' transaction failed before any append went out);
/// otherwise each append has its own outcome.
pub(super) async fn commit_round(
    pool: &Pool,
    sql: &Sql,
    runs: &[&NewRun],
    round: &[&Append],
) -> Result<RoundOutcomes, StoreError> {
    let mut client = pool.get().await.map_err(backend)?;
    let created = if runs.is_empty() {
        Vec::new()
    } else {
        let tx = client.transaction().await.map_err(backend)?;
        let created = create_batch(&tx, sql, runs).await?;
        tx.commit().await.map_err(backend)?;
        created
    };
    Ok((created, append_round(&client, sql, round).await))
}

/// A round's appends: the batchable ones in one statement, the others one statement each, sent
/// together; each one's outcome.
async fn append_round(client: &impl GenericClient, sql: &Sql, round: &[&Append]) -> Vec<Result<(), StoreError>> {
    let batch: Vec<&Append> = round.iter().copied().filter(|a| batchable(a)).collect();
    let applied = if batch.is_empty() { Ok(HashSet::new()) } else { append_batch(client, sql, &batch).await };
    // The others alone, sent together (pipelined on the connection).
    let others =
        futures::future::join_all(round.iter().filter(|a| !batchable(a)).map(|a| append_one(client, sql, a))).await;
    let mut others = others.into_iter();
    let mut outcomes = Vec::with_capacity(round.len());
    for append in round {
        let outcome = match (batchable(append), &applied) {
            (false, _) => others.next().unwrap_or_else(|| Err(StoreError::backend("an append went missing"))),
            (true, Err(error)) => Err(error.clone()),
            (true, Ok(applied)) if applied.contains(append.run_id.as_str()) => Ok(()),
            (true, Ok(_)) => refusal(client, sql, append).await.and_then(Err),
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// The batchable appends of a round in one statement: the runs it applied.
async fn append_batch(
    client: &impl GenericClient,
    sql: &Sql,
    batch: &[&Append],
) -> Result<HashSet<String>, StoreError> {
    let ids: Vec<&str> = batch.iter().map(|a| a.run_id.as_str()).collect();
    let epochs: Vec<i64> = batch.iter().map(|a| a.epoch as i64).collect();
    let afters: Vec<i64> = batch.iter().map(|a| a.after_seq as i64).collect();
    let lasts: Vec<i64> = batch.iter().map(|a| (a.after_seq + a.events.len() as u64) as i64).collect();
    let ats: Vec<i64> = batch.iter().map(|a| a.at.as_millis()).collect();
    let (mut finishes, mut statuses, mut outputs, mut errors, mut completions) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for append in batch {
        match &append.update {
            RunUpdate::Finish { status, output, error, at } => {
                finishes.push(true);
                statuses.push(Some(status.as_str()));
                outputs.push(output.as_ref().map(|o| o.get()));
                errors.push(error.as_deref());
                completions.push(Some(at.as_millis()));
            }
            _ => {
                finishes.push(false);
                statuses.push(None);
                outputs.push(None);
                errors.push(None);
                completions.push(None);
            }
        }
    }
    let mut rows = JournalColumns::default();
    for append in batch {
        rows.push(&append.run_id, append.after_seq, append.at, &append.events);
    }
    let statement = client.prepare_cached(&sql.append_batch).await.map_err(backend)?;
    let runs_params: [&(dyn ToSql + Sync); 5] = [&ids, &epochs, &afters, &lasts, &ats];
    let ends: [&(dyn ToSql + Sync); 5] = [&finishes, &statuses, &outputs, &errors, &completions];
    let params: Vec<&(dyn ToSql + Sync)> = runs_params.into_iter().chain(rows.params()).chain(ends).collect();
    let rows = client.query(&statement, &params).await.map_err(backend)?;
    rows.iter().map(|row| row.try_get::<_, String>(0).map_err(backend)).collect()
}
