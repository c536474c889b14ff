//! `Store` for `SqliteStore`: reads on the reader threads, writes through the writer.

use crate::handle::SqliteStore;
use crate::prelude::*;
use crate::rows::{
    RULES, RUN_COLUMNS, RUN_SUMMARY_COLUMNS, SCHEDULE_COLUMNS, query_rows, raw, read_run, row_to_rule, row_to_run,
    row_to_schedule,
};
use crate::writer::{Command, backend};
use cairn_store::{EventStore, FlowStore, JournalStore, RunStore, ScheduleStore, SignalStore, WorkerStore};

impl RunStore for SqliteStore {
    fn create_run(&self, run: NewRun) -> StoreFuture<'_, CreatedRun> {
        Box::pin(self.send(|r| Command::Create(Box::new((run, r)))))
    }

    fn get_run<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Option<RunRecord>> {
        let id = id.clone();
        self.read(move |conn| read_run(conn, &id))
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, RunPage> {
        let filter = filter.clone();
        self.read(move |conn| {
            let size = filter.page_size();
            let Selection { from, conditions, order, mut values } = selection(conn, &filter)?;
            values.push(((size + 1) as i64).into());
            let columns = if filter.without_payloads { RUN_SUMMARY_COLUMNS.as_str() } else { RUN_COLUMNS };
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {columns} FROM {from}{conditions} ORDER BY {order} LIMIT ?"))
                .map_err(backend)?;
            let runs = query_rows(&mut stmt, rusqlite::params_from_iter(values), row_to_run)?;
            Ok(RunPage::cut(runs, size))
        })
    }

    fn count_runs<'a>(&'a self, filter: &'a RunFilter, at_most: u64) -> StoreFuture<'a, u64> {
        let filter = filter.clone();
        self.read(move |conn| {
            let Selection { from, conditions, mut values, .. } = selection(conn, &filter)?;
            values.push(i64::try_from(at_most).unwrap_or(i64::MAX).into());
            let mut stmt = conn
                .prepare_cached(&format!("SELECT count(*) FROM (SELECT 1 FROM {from}{conditions} LIMIT ?)"))
                .map_err(backend)?;
            let count: i64 = stmt.query_row(rusqlite::params_from_iter(values), |r| r.get(0)).map_err(backend)?;
            Ok(count.max(0) as u64)
        })
    }

    fn claim<'a>(&'a self, request: &'a ClaimRequest) -> StoreFuture<'a, Vec<RunRecord>> {
        let request = request.clone();
        Box::pin(self.send(|r| Command::Claim(request, r)))
    }

    fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>> {
        let request = request.clone();
        Box::pin(self.send(|r| Command::Heartbeat(request, r)))
    }

    fn cancel(&self, request: ControlRequest) -> StoreFuture<'_, CancelOutcome> {
        Box::pin(self.send(|r| Command::Cancel(request, r)))
    }

    fn pause(&self, request: ControlRequest) -> StoreFuture<'_, PauseOutcome> {
        Box::pin(self.send(|r| Command::Pause(request, r)))
    }

    fn resume(&self, request: ResumeRequest) -> StoreFuture<'_, ()> {
        Box::pin(self.send(|r| Command::Resume(request, r)))
    }

    fn start_with_signal(&self, run: NewRun, signal: StartSignal) -> StoreFuture<'_, (CreatedRun, SignalId)> {
        Box::pin(self.send(|r| Command::StartWithSignal(Box::new((run, signal, r)))))
    }

    fn prune(&self, request: PruneRequest) -> StoreFuture<'_, Vec<RunId>> {
        Box::pin(self.send(|r| Command::Prune(request, r)))
    }

    fn version_counts(&self) -> StoreFuture<'_, Vec<VersionCount>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(concat!(
                    "SELECT workflow, version, count(*) FROM runs WHERE ",
                    needs_worker!(),
                    " GROUP BY workflow, version ORDER BY workflow, version"
                ))
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(VersionCount {
                        key: WorkflowKey { name: r.get(0)?, version: r.get(1)? },
                        runs: r.get::<_, i64>(2)? as u64,
                    })
                })
                .map_err(backend)?;
            rows.collect::<rusqlite::Result<_>>().map_err(backend)
        })
    }

    fn workflow_counts(&self) -> StoreFuture<'_, Vec<WorkflowCount>> {
        self.read(|conn| {
            // Unended runs are counted where they are (`runs_open` holds them); ended ones come
            // from their counters.
            let mut stmt = conn
                .prepare_cached(concat!(
                    "SELECT workflow, status, runs FROM ended_counts WHERE runs > 0
                     UNION ALL
                     SELECT workflow, status, count(*) FROM runs WHERE ",
                    open_runs!(),
                    " GROUP BY workflow, status
                     ORDER BY 1, 2"
                ))
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))
                .map_err(backend)?;
            let mut counts = Vec::new();
            for row in rows {
                let (workflow, status, runs) = row.map_err(backend)?;
                counts.push(WorkflowCount {
                    workflow,
                    status: RunStatus::parse_stored(&status)?,
                    runs: runs.max(0) as u64,
                });
            }
            Ok(counts)
        })
    }

    fn next_wake_at<'a>(&'a self, workflows: &'a [WorkflowKey]) -> StoreFuture<'a, Option<Timestamp>> {
        let tags: Vec<String> = workflows.iter().map(WorkflowKey::tag).collect();
        let names: Vec<&str> = workflows.iter().map(|k| k.name.as_str()).collect();
        let names = serde_json::to_string(&names).map_err(|e| StoreError::InvalidInput(e.to_string()));
        self.read(move |conn| {
            let tags = serde_json::to_string(&tags).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
            let names = names?;
            // The schedules' minimum goes through their partial index (few rows: the unpaused).
            conn.prepare_cached(include_str!("../sql/statements/next_wake_at.sql"))
                .map_err(backend)?
                .query_row([tags, names], |r| r.get::<_, Option<i64>>(0))
                .map(|v| v.map(Timestamp::from_millis))
                .map_err(backend)
        })
    }
}

impl JournalStore for SqliteStore {
    fn read_journal<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<JournalEntry>> {
        self.read_journal_range(id, (1, i64::MAX), 0)
    }

    fn read_journal_through<'a>(&'a self, id: &'a RunId, last_seq: u64) -> StoreFuture<'a, Vec<JournalEntry>> {
        let seq = |seq: u64| i64::try_from(seq).unwrap_or(i64::MAX);
        let capacity = usize::try_from(last_seq).unwrap_or(0).min(1 << 20);
        let Some([(_, middle), (_, last)]) = cairn_store::journal_halves(last_seq) else {
            return self.read_journal_range(id, (1, seq(last_seq)), capacity);
        };
        // A long journal is read in halves on both reader threads at once; both jobs are queued
        // here, before either is awaited. The first half's vector takes the second's entries
        // without growing.
        let first = self.read_journal_range(id, (1, seq(middle)), capacity);
        let second = self.read_journal_range(id, (seq(middle) + 1, seq(last)), capacity - capacity / 2);
        Box::pin(async move {
            let mut entries = first.await?;
            entries.extend(second.await?);
            Ok(entries)
        })
    }

    fn append(&self, append: Append) -> StoreFuture<'_, ()> {
        let encoded = append.events.iter().map(Event::to_json).collect();
        let inline = !append.batched;
        Box::pin(self.send_as(|r| Command::Append(append, encoded, r), inline))
    }
}

impl SignalStore for SqliteStore {
    fn signals<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<SignalRecord>> {
        let id = id.clone();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, name, payload, sent_at, consumed_seq FROM signals WHERE run_id = ?1 ORDER BY id",
                )
                .map_err(backend)?;
            let rows = stmt
                .query_map([id.as_str()], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, Option<i64>>(4)?,
                    ))
                })
                .map_err(backend)?;
            let mut out = Vec::new();
            for row in rows {
                let (sid, name, payload, sent_at, consumed) = row.map_err(backend)?;
                out.push(SignalRecord {
                    id: SignalId(sid),
                    name,
                    payload: raw(payload)?,
                    sent_at: Timestamp::from_millis(sent_at),
                    consumed_seq: consumed.map(|c| c as u64),
                });
            }
            Ok(out)
        })
    }

    fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId> {
        Box::pin(self.send(|r| Command::Signal(signal, r)))
    }
}

impl ScheduleStore for SqliteStore {
    fn put_schedule<'a>(&'a self, put: &'a PutSchedule) -> StoreFuture<'a, ScheduleRecord> {
        let put = put.clone();
        Box::pin(self.send(|r| Command::PutSchedule(Box::new((put, r)))))
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<ScheduleRecord>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!("SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY name"))
                .map_err(backend)?;
            query_rows(&mut stmt, [], row_to_schedule)
        })
    }

    fn due_schedules<'a>(
        &'a self,
        workflows: &'a [String],
        now: Timestamp,
        limit: usize,
    ) -> StoreFuture<'a, Vec<ScheduleRecord>> {
        let names = serde_json::to_string(workflows).map_err(|e| StoreError::InvalidInput(e.to_string()));
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {SCHEDULE_COLUMNS} FROM schedules
                     WHERE paused = 0 AND next_fire_at IS NOT NULL AND next_fire_at <= ?1
                       AND workflow IN (SELECT value FROM json_each(?2))
                     ORDER BY next_fire_at LIMIT ?3"
                ))
                .map_err(backend)?;
            query_rows(&mut stmt, params![now.as_millis(), names?, limit as i64], row_to_schedule)
        })
    }

    fn fire_schedule(&self, fire: FireSchedule) -> StoreFuture<'_, Option<Vec<CreatedRun>>> {
        Box::pin(self.send(|r| Command::FireSchedule(fire, r)))
    }

    fn pause_schedule<'a>(&'a self, change: &'a PauseSchedule) -> StoreFuture<'a, ScheduleRecord> {
        let change = change.clone();
        Box::pin(self.send(|r| Command::PauseSchedule(Box::new((change, r)))))
    }

    fn delete_schedule<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool> {
        let name = name.to_owned();
        let deleted = self.send(|r| Command::DeleteSchedule(name, r));
        Box::pin(async move { Ok(deleted.await? > 0) })
    }
}

impl FlowStore for SqliteStore {
    fn put_concurrency<'a>(&'a self, rule: &'a ConcurrencyRule) -> StoreFuture<'a, ()> {
        let rule = rule.clone();
        Box::pin(self.send(|r| Command::PutConcurrency(rule, r)))
    }

    fn delete_concurrency<'a>(&'a self, workflow: &'a str) -> StoreFuture<'a, bool> {
        let workflow = workflow.to_owned();
        let deleted = self.send(|r| Command::DeleteConcurrency(workflow, r));
        Box::pin(async move { Ok(deleted.await? > 0) })
    }

    fn take_rate<'a>(&'a self, take: &'a TakeRate) -> StoreFuture<'a, Option<Timestamp>> {
        Box::pin(self.send(|r| Command::TakeRate(take.clone(), r)))
    }

    fn concurrency_rules(&self) -> StoreFuture<'_, Vec<ConcurrencyRule>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(&format!("{RULES} ORDER BY workflow")).map_err(backend)?;
            let rows = stmt.query_map([], row_to_rule).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
    }
}

impl EventStore for SqliteStore {
    fn set_subscriptions<'a>(&'a self, request: &'a SetSubscriptions) -> StoreFuture<'a, ()> {
        let request = request.clone();
        Box::pin(self.send(|r| Command::SetSubscriptions(request, r)))
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT workflow, pattern, version FROM subscriptions ORDER BY workflow, pattern")
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| Ok(Subscription { workflow: r.get(0)?, pattern: r.get(1)?, version: r.get(2)? }))
                .map_err(backend)?;
            rows.collect::<rusqlite::Result<_>>().map_err(backend)
        })
    }

    fn record_event<'a>(&'a self, event: &'a EventRecord) -> StoreFuture<'a, ()> {
        let event = event.clone();
        Box::pin(self.send(|r| Command::RecordEvent(Box::new((event, r)))))
    }

    fn events<'a>(&'a self, query: &'a EventQuery) -> StoreFuture<'a, EventPage> {
        let query = query.clone();
        self.read(move |conn| {
            let mut conditions = Vec::new();
            if query.topic.is_some() {
                conditions.push("topic = ?1");
            }
            if query.cursor.is_some() {
                conditions.push("(published_at, id) < (?2, ?3)");
            }
            let sql = format!(
                "SELECT id, topic, payload, published_at, runs FROM events {} {}
                    ORDER BY published_at DESC, id DESC LIMIT ?4",
                if conditions.is_empty() { "" } else { "WHERE" },
                conditions.join(" AND ")
            );
            let cursor = query.cursor.as_ref();
            let limit = i64::try_from(query.limit.saturating_add(1)).unwrap_or(i64::MAX);
            let params = params![query.topic, cursor.map(|c| c.published_at.as_millis()), cursor.map(|c| &c.id), limit];
            let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
            let rows = stmt
                .query_map(params, |r| {
                    Ok((r.get::<_, String>(0)?, r.get(1)?, r.get::<_, String>(2)?, r.get(3)?, r.get::<_, String>(4)?))
                })
                .map_err(backend)?;
            let mut events = Vec::new();
            for row in rows {
                let (id, topic, payload, at, runs) = row.map_err(backend)?;
                events.push(EventRecord {
                    id,
                    topic,
                    payload: RawValue::from_string(payload).map_err(StoreError::from_cause)?,
                    published_at: Timestamp::from_millis(at),
                    runs: serde_json::from_str(&runs).map_err(StoreError::from_cause)?,
                });
            }
            Ok(EventPage::cut(events, query.limit))
        })
    }
}

impl WorkerStore for SqliteStore {
    fn record_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()> {
        let worker = worker.clone();
        Box::pin(self.send(|r| Command::RecordWorker(worker, r)))
    }

    fn record_served<'a>(&'a self, serves: &'a [WorkflowKey], at: Timestamp) -> StoreFuture<'a, ()> {
        let serves = serves.to_vec();
        Box::pin(self.send(|r| Command::RecordServed(serves, at, r)))
    }

    fn served_workflows(&self) -> StoreFuture<'_, Vec<ServedWorkflow>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT name, version, first_served, last_served FROM served_workflows ORDER BY name, version",
                )
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(ServedWorkflow {
                        key: WorkflowKey { name: r.get(0)?, version: r.get(1)? },
                        first_served: Timestamp::from_millis(r.get(2)?),
                        last_served: Timestamp::from_millis(r.get(3)?),
                    })
                })
                .map_err(backend)?;
            rows.collect::<rusqlite::Result<_>>().map_err(backend)
        })
    }

    fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, host, pid, started_at, last_seen, live_until, serves FROM workers ORDER BY id",
                )
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        WorkerRecord {
                            id: r.get(0)?,
                            host: r.get(1)?,
                            pid: r.get(2)?,
                            started_at: Timestamp::from_millis(r.get(3)?),
                            last_seen: Timestamp::from_millis(r.get(4)?),
                            live_until: Timestamp::from_millis(r.get(5)?),
                            serves: Vec::new(),
                        },
                        r.get::<_, String>(6)?,
                    ))
                })
                .map_err(backend)?;
            let mut workers = Vec::new();
            for row in rows {
                let (mut worker, serves) = row.map_err(backend)?;
                worker.serves = WorkerRecord::parse_serves(&serves)?;
                workers.push(worker);
            }
            Ok(workers)
        })
    }

    fn forget_workers<'a>(&'a self, request: &'a ForgetWorkers) -> StoreFuture<'a, u64> {
        let request = request.clone();
        Box::pin(self.send(|r| Command::ForgetWorkers(request, r)))
    }
}

/// What a list of runs reads: its `FROM`, its ` WHERE …` (empty without conditions), its
/// `ORDER BY` and the values of its parameters, in order.
struct Selection {
    from: &'static str,
    conditions: String,
    order: &'static str,
    values: Vec<rusqlite::types::Value>,
}

/// The runs `filter` selects (its page size aside). Only the conditions the filter has, so the
/// planner can pick the index that serves them (`? IS NULL OR …` conditions would hide every
/// index but the ordering one).
fn selection(conn: &Connection, filter: &RunFilter) -> Result<Selection, StoreError> {
    let mut conditions: Vec<&str> = Vec::new();
    let mut values: Vec<rusqlite::types::Value> = Vec::new();
    let text = |t: &str| rusqlite::types::Value::Text(t.to_owned());
    // An input filter with a value the input index holds reads the runs that hold that value
    // from `run_inputs` (migration 20), in list order; its columns `at` and `run` are the run's
    // `created_at` and `id`.
    let needle = filter.input_json();
    let leaf = match &needle {
        Some(needle) => input_leaf(conn, needle)?,
        None => None,
    };
    let (created_at, id) = if leaf.is_some() { ("at", "run") } else { ("created_at", "id") };
    let (from, order) = match leaf {
        Some((path, kind, value)) => {
            conditions.push("path = ? AND kind = ? AND value = ?");
            values.extend([path.into(), kind.into(), value]);
            ("run_inputs CROSS JOIN runs ON runs.id = run_inputs.run", "at DESC, run DESC")
        }
        None => ("runs", "created_at DESC, id DESC"),
    };
    if let Some(workflow) = &filter.workflow {
        conditions.push("workflow = ?");
        values.push(text(workflow));
    }
    // A literal (one of a fixed set), so a partial index on that status can serve it
    // (`runs_open` for pending, running and suspended).
    let status = filter.status.map(|status| format!("status = '{}'", status.as_str()));
    if let Some(status) = &status {
        conditions.push(status);
    }
    let (after, before, cursor) =
        (format!("{created_at} >= ?"), format!("{created_at} < ?"), format!("({created_at}, {id}) < (?, ?)"));
    if let Some(at) = filter.created_after {
        conditions.push(&after);
        values.push(at.as_millis().into());
    }
    if let Some(at) = filter.created_before {
        conditions.push(&before);
        values.push(at.as_millis().into());
    }
    if let Some(PageCursor { created_at, id }) = &filter.cursor {
        conditions.push(&cursor);
        values.extend([created_at.as_millis().into(), text(id.as_str())]);
    }
    if let Some(original) = &filter.restarted_from {
        conditions.push("restarted_from = ?");
        values.push(text(original.as_str()));
    }
    if let Some(parent) = &filter.parent {
        conditions.push("parent = ?");
        values.push(text(parent.as_str()));
    }
    if let Some(tags) = filter.stranded_tags() {
        conditions.push(concat!(
            needs_worker!(),
            " AND (workflow || '@' || version) NOT IN (SELECT value FROM json_each(?))"
        ));
        values.push(serde_json::Value::from(tags).to_string().into());
    }
    if let Some(needle) = needle {
        conditions.push("cairn_json_contains(input, ?)");
        values.push(needle.into());
    }
    // Ids compare as UTF-8 bytes (SQLite's BINARY), so a prefix is a range of the id index.
    if let Some(prefix) = &filter.id_prefix {
        conditions.push("runs.id >= ?");
        values.push(text(prefix));
        if let Some(end) = filter.id_prefix_end() {
            conditions.push("runs.id < ?");
            values.push(end.into());
        }
    }
    // SQLite's `lower` lowers ASCII letters only, as the needle was.
    if let Some(needle) = filter.error_needle() {
        conditions.push("instr(lower(error), ?) > 0");
        values.push(needle.into());
    }
    let conditions = match conditions.is_empty() {
        true => String::new(),
        false => format!(" WHERE {}", conditions.join(" AND ")),
    };
    Ok(Selection { from, conditions, order, values })
}

/// The first value of an input filter that the input index holds, as its `(path, kind, value)`
/// key: the selection migration 20's triggers make of each run's input, made of the filter's
/// JSON, so both sides are written alike. `None` when the filter holds no such value (it is not
/// an object, or holds only arrays, empty objects or long texts), or when some run's input had
/// too many values to index (a key of kind `many`): the list then reads every run.
fn input_leaf(conn: &Connection, needle: &str) -> Result<Option<(String, String, rusqlite::types::Value)>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT fullkey, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END,
                    CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom
                    ELSE 0 END
             FROM json_tree(?1)
             WHERE json_type(?1) = 'object' AND type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0
               AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)
               AND NOT EXISTS (SELECT 1 FROM run_inputs WHERE path = '' AND kind = 'many')
             LIMIT 1",
        )
        .map_err(backend)?;
    stmt.query_row([needle], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional().map_err(backend)
}
