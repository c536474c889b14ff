//! `Store` for `PostgresStore`: what the engine and clients call.

use super::control::writer_outcome;
use super::handle::PostgresStore;
use super::maintain::status_counts;
use super::prelude::*;
use super::rows::{ClaimValues, raw, row_to_event, row_to_schedule, tags};
use super::sql::backend;
use super::sql::{RUN_COLUMNS, RUN_SUMMARY_COLUMNS};
use super::writer::{Job, journal_range};
use cairn_store::{EventStore, FlowStore, JournalStore, RunStore, ScheduleStore, SignalStore, WorkerStore};

/// A regular expression that finds a NUL written as a JSON escape (`\u0000`, after an even
/// number of backslashes) in JSON text.
const NUL_ESCAPE: &str = r"(^|[^\\])(\\\\)*\\u0000";

/// The ASCII capitals and their lower case, for `translate`.
const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";

/// A parameter's value.
type Value = Box<dyn ToSql + Sync + Send>;

/// What a list of runs reads: its `FROM`, its ` WHERE …` (empty without conditions), its
/// `ORDER BY` and its parameters' values, in order.
struct Selection {
    from: &'static str,
    conditions: String,
    order: &'static str,
    values: Vec<Value>,
}

/// `values` as the parameters of a statement.
fn params(values: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|value| value.as_ref() as &(dyn ToSql + Sync)).collect()
}

impl PostgresStore {
    /// The first value of an input filter that the input index holds, as its `(path, kind, value)`
    /// key, made by `input_keys`, the function migration 21's trigger makes each run's keys with,
    /// so both sides are written alike. `None` when the filter holds no such value (it is not an
    /// object, or holds only arrays, empty objects or long values), or when some run's input had
    /// too many values to index (a key of kind `many`): the list then reads every run.
    async fn input_leaf(&self, needle: &str) -> Result<Option<(String, String, String)>, StoreError> {
        let query = "SELECT l.p, l.k, l.v FROM input_keys($1) AS k, unnest(k.paths, k.kinds, k.vals) AS l(p, k, v)
                     WHERE NOT EXISTS (SELECT 1 FROM run_inputs WHERE path = '' AND kind = 'many') LIMIT 1";
        let rows = self.rows(query, &[&needle]).await?;
        rows.first()
            .map(|row| {
                Ok((
                    row.try_get(0).map_err(backend)?,
                    row.try_get(1).map_err(backend)?,
                    row.try_get(2).map_err(backend)?,
                ))
            })
            .transpose()
    }

    /// The runs `filter` selects (its page size aside); `None` when none can match. Only the
    /// conditions the filter has, so the planner can pick the index that serves them.
    async fn selection(&self, filter: &RunFilter) -> Result<Option<Selection>, StoreError> {
        let input = filter.input_json();
        // An input filter with a value the input index holds reads the runs that hold that
        // value from `run_inputs` (migration 21), in list order; its columns `at` and `run`
        // are the run's `created_at` and `id`.
        let leaf = match &input {
            // Every input kept the payload rules, so a value that breaks them (a NUL, a lone
            // surrogate, a number out of range, none of which `jsonb` reads) matches no run.
            Some(needle) if cairn_journal::check_payload(needle).is_err() => return Ok(None),
            Some(needle) => self.input_leaf(needle).await?,
            None => None,
        };
        // PostgreSQL's text holds no NUL, so no id or error holds one.
        let nul = |text: &Option<String>| text.as_deref().is_some_and(|text| text.contains('\0'));
        if nul(&filter.id_prefix) || nul(&filter.error_contains) {
            return Ok(None);
        }
        let (created_at, id) = if leaf.is_some() { ("at", "run") } else { ("created_at", "id") };
        let mut conditions: Vec<String> = Vec::new();
        let mut values: Vec<Value> = Vec::new();
        // A condition over the next parameter number(s), and the parameters' values.
        macro_rules! add {
            ($condition:expr, $($value:expr),+) => {{
                conditions.push($condition(values.len() + 1));
                $(values.push(Box::new($value));)+
            }};
        }
        let leaf_is_some = leaf.is_some();
        if let Some((path, kind, value)) = leaf {
            add!(|n| format!("path = ${n} AND kind = ${} AND value = ${}", n + 1, n + 2), path, kind, value);
        }
        if let Some(workflow) = &filter.workflow {
            add!(|n| format!("workflow = ${n}"), workflow.clone());
        }
        // A literal (one of a fixed set), so a partial index on that status can serve it.
        if let Some(status) = filter.status {
            conditions.push(format!("status = '{}'", status.as_str()));
        }
        if let Some(after) = filter.created_after {
            add!(|n| format!("{created_at} >= ${n}"), after.as_millis());
        }
        if let Some(before) = filter.created_before {
            add!(|n| format!("{created_at} < ${n}"), before.as_millis());
        }
        if let Some(cursor) = &filter.cursor {
            let (at, run) = (cursor.created_at.as_millis(), cursor.id.as_str().to_owned());
            add!(|n| format!("({created_at}, {id}) < (${n}, ${}::text)", n + 1), at, run);
        }
        if let Some(parent) = &filter.parent {
            add!(|n| format!("parent = ${n}"), parent.as_str().to_owned());
        }
        if let Some(original) = &filter.restarted_from {
            add!(|n| format!("restarted_from = ${n}"), original.as_str().to_owned());
        }
        if let Some(tags) = filter.stranded_tags() {
            let condition = |n: usize| {
                format!(
                    "status IN ('pending', 'running', 'suspended') AND NOT (workflow || '@' || version) = ANY(${n})"
                )
            };
            add!(condition, tags);
        }
        if let Some(needle) = input {
            // An input from an earlier build may hold a NUL, which `jsonb` cannot read (and
            // `@>` can never match): such a run is passed over rather than failing the list.
            // The index holds no such input (its trigger reads every input it keys as `jsonb`).
            let containment = |n: usize| match leaf_is_some {
                true => format!("input::jsonb @> (${n}::text)::jsonb"),
                false => {
                    format!("CASE WHEN input ~ '{NUL_ESCAPE}' THEN false ELSE input::jsonb @> (${n}::text)::jsonb END")
                }
            };
            add!(containment, needle);
        }
        // `starts_with` compares code points whatever the database's collation (a range of
        // the id index would hold only under the C collation).
        if let Some(prefix) = &filter.id_prefix {
            add!(|n| format!("starts_with(runs.id, ${n})"), prefix.clone());
        }
        // ASCII letters lowered as the needle's were (`lower` would follow the collation).
        if let Some(needle) = filter.error_needle() {
            add!(|n| format!("strpos(translate(error, '{UPPER}', '{LOWER}'), ${n}) > 0"), needle);
        }
        let conditions =
            if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) };
        Ok(Some(match leaf_is_some {
            // The value's index rows drive, in list order, each run read by its id; the
            // `OFFSET 0` fences the run's read, which fixes that plan and halves the work of
            // planning it (0.5 against 3.0 ms for the plain join on a 1,000,000-run schema).
            true => Selection {
                from: "run_inputs CROSS JOIN LATERAL (SELECT * FROM runs WHERE runs.id = run_inputs.run OFFSET 0) AS runs",
                conditions,
                order: "at DESC, run DESC",
                values,
            },
            false => Selection { from: "runs", conditions, order: "created_at DESC, id DESC", values },
        }))
    }
}

impl RunStore for PostgresStore {
    fn create_run(&self, run: NewRun) -> StoreFuture<'_, CreatedRun> {
        if run.debounce.is_some() {
            return Box::pin(self.debounce_inner(run));
        }
        let (reply, outcome) = oneshot::channel();
        let sent = self.jobs.send(Job::Create(run, reply));
        Box::pin(writer_outcome(sent, outcome))
    }

    fn get_run<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Option<RunRecord>> {
        Box::pin(async move { Ok(self.query_runs(&self.sql.get_run, &[&id.as_str()]).await?.pop()) })
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, RunPage> {
        Box::pin(async move {
            let size = filter.page_size();
            let Some(Selection { from, conditions, order, mut values }) = self.selection(filter).await? else {
                return Ok(RunPage::cut(Vec::new(), size));
            };
            values.push(Box::new((size + 1) as i64));
            let columns = if filter.without_payloads { RUN_SUMMARY_COLUMNS.as_str() } else { RUN_COLUMNS };
            let text = format!("SELECT {columns} FROM {from}{conditions} ORDER BY {order} LIMIT ${}", values.len());
            let runs = self.query_runs(&text, &params(&values)).await?;
            Ok(RunPage::cut(runs, size))
        })
    }

    fn count_runs<'a>(&'a self, filter: &'a RunFilter, at_most: u64) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let Some(Selection { from, conditions, mut values, .. }) = self.selection(filter).await? else {
                return Ok(0);
            };
            values.push(Box::new(i64::try_from(at_most).unwrap_or(i64::MAX)));
            let text =
                format!("SELECT count(*) FROM (SELECT 1 FROM {from}{conditions} LIMIT ${}) AS selected", values.len());
            let rows = self.rows(&text, &params(&values)).await?;
            let count: i64 = rows.first().map(|row| row.try_get(0)).transpose().map_err(backend)?.unwrap_or(0);
            Ok(count.max(0) as u64)
        })
    }

    fn claim<'a>(&'a self, request: &'a ClaimRequest) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async move {
            // This process executes runs: its leases will need their heartbeat connection.
            let _ = self.beats.ready(&self.config, &self.sql);
            let mut values = ClaimValues::of(request);
            let (mut claimed, requeued) = self.claim_pass(&values, request).await?;
            // Runs the pass requeued and their groups admitted are claimed while there is room.
            if requeued > 0 && claimed.len() < request.limit {
                values.limit = (request.limit - claimed.len()) as i64;
                claimed.extend(self.claim_pass(&values, request).await?.0);
            }
            Ok(claimed)
        })
    }

    fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>> {
        Box::pin(super::beats::heartbeat(&self.beats, &self.pool, (&self.config, &self.sql), request))
    }

    fn cancel(&self, request: ControlRequest) -> StoreFuture<'_, CancelOutcome> {
        Box::pin(self.cancel_inner(request))
    }

    fn pause(&self, request: ControlRequest) -> StoreFuture<'_, PauseOutcome> {
        Box::pin(self.pause_inner(request))
    }

    fn resume(&self, request: ResumeRequest) -> StoreFuture<'_, ()> {
        Box::pin(self.resume_inner(request))
    }

    fn start_with_signal(&self, run: NewRun, signal: StartSignal) -> StoreFuture<'_, (CreatedRun, SignalId)> {
        Box::pin(self.start_with_signal_inner(run, signal))
    }

    fn prune(&self, request: PruneRequest) -> StoreFuture<'_, Vec<RunId>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let text = if request.dry_run { &self.sql.prune_candidates } else { &self.sql.prune };
            let statement = client.prepare_cached(text).await.map_err(backend)?;
            let params: [&(dyn ToSql + Sync); 3] = [
                &request.now.as_millis(),
                &request.ended_before.map(Timestamp::as_millis),
                &i64::try_from(request.limit).unwrap_or(i64::MAX),
            ];
            let rows = client.query(&statement, &params).await.map_err(backend)?;
            if let Some(before) = request.events_before.filter(|_| !request.dry_run) {
                let statement = client.prepare_cached(&self.sql.prune_events).await.map_err(backend)?;
                let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
                client.execute(&statement, &[&before.as_millis(), &limit]).await.map_err(backend)?;
            }
            rows.iter().map(|row| row.try_get::<_, String>(0).map(RunId::new).map_err(backend)).collect()
        })
    }

    fn workflow_counts(&self) -> StoreFuture<'_, Vec<WorkflowCount>> {
        Box::pin(async move {
            // The background task (`maintain`) keeps the deltas to add few.
            let mut client = self.pool.get().await.map_err(backend)?;
            let rows = status_counts(&mut client, &self.sql).await.map_err(backend)?;
            rows.iter()
                .map(|row| {
                    let status: String = row.try_get(1).map_err(backend)?;
                    Ok(WorkflowCount {
                        workflow: row.try_get(0).map_err(backend)?,
                        status: RunStatus::parse_stored(&status)?,
                        runs: row.try_get::<_, i64>(2).map_err(backend)?.max(0) as u64,
                    })
                })
                .collect()
        })
    }

    fn version_counts(&self) -> StoreFuture<'_, Vec<VersionCount>> {
        Box::pin(async move {
            let rows = self.rows(&self.sql.version_counts, &[]).await?;
            rows.iter()
                .map(|row| {
                    Ok(VersionCount {
                        key: WorkflowKey {
                            name: row.try_get(0).map_err(backend)?,
                            version: row.try_get::<_, i32>(1).map_err(backend)?.max(0) as u32,
                        },
                        runs: row.try_get::<_, i64>(2).map_err(backend)?.max(0) as u64,
                    })
                })
                .collect()
        })
    }

    fn next_wake_at<'a>(&'a self, workflows: &'a [WorkflowKey]) -> StoreFuture<'a, Option<Timestamp>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.next_wake).await.map_err(backend)?;
            let names: Vec<&str> = workflows.iter().map(|k| k.name.as_str()).collect();
            let row = client.query_one(&statement, &[&tags(workflows), &names]).await.map_err(backend)?;
            Ok(row.try_get::<_, Option<i64>>(0).map_err(backend)?.map(Timestamp::from_millis))
        })
    }
}

impl JournalStore for PostgresStore {
    fn read_journal<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<JournalEntry>> {
        Box::pin(journal_range(self.pool.clone(), Arc::clone(&self.sql), id.clone(), (1, u64::MAX)))
    }

    fn read_journal_through<'a>(&'a self, id: &'a RunId, last_seq: u64) -> StoreFuture<'a, Vec<JournalEntry>> {
        let range = |bounds| journal_range(self.pool.clone(), Arc::clone(&self.sql), id.clone(), bounds);
        Box::pin(async move {
            let Some([first, second]) = cairn_store::journal_halves(last_seq) else {
                return range((1, last_seq)).await;
            };
            // A long journal is read in halves on two connections at once, the second half
            // received and decoded on another task.
            let second = tokio::spawn(range(second));
            let mut entries = range(first).await?;
            let second = second.await.map_err(|e| StoreError::caused_by("reading a journal", e))??;
            entries.extend(second);
            Ok(entries)
        })
    }

    fn append(&self, append: Append) -> StoreFuture<'_, ()> {
        if let RunUpdate::Continue { successor, at } = append.update {
            let update = RunUpdate::Finish { status: RunStatus::Continued, output: None, error: None, at };
            return Box::pin(self.continue_inner(Append { update, ..append }, *successor));
        }
        let (reply, outcome) = oneshot::channel();
        // Submitted now, not when first polled: appends to one run reach the writer in call order.
        let sent = self.jobs.send(Job::Append(append, reply));
        Box::pin(writer_outcome(sent, outcome))
    }
}

impl SignalStore for PostgresStore {
    fn signals<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<SignalRecord>> {
        Box::pin(async move {
            let rows = self.rows(&self.sql.signals, &[&id.as_str()]).await?;
            rows.iter()
                .map(|row| {
                    Ok(SignalRecord {
                        id: SignalId(row.try_get(0).map_err(backend)?),
                        name: row.try_get(1).map_err(backend)?,
                        payload: raw(row.try_get(2).map_err(backend)?)?,
                        sent_at: Timestamp::from_millis(row.try_get(3).map_err(backend)?),
                        consumed_seq: row.try_get::<_, Option<i64>>(4).map_err(backend)?.map(|s| s as u64),
                    })
                })
                .collect()
        })
    }

    fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId> {
        Box::pin(self.signal_inner(signal))
    }
}

impl ScheduleStore for PostgresStore {
    fn put_schedule<'a>(&'a self, put: &'a PutSchedule) -> StoreFuture<'a, ScheduleRecord> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.put_schedule).await.map_err(backend)?;
            let next = put.next_fire_at.map(Timestamp::as_millis);
            let params: [&(dyn ToSql + Sync); 6] =
                [&put.name, &put.workflow.as_str(), &put.spec, &put.input.get(), &next, &put.now.as_millis()];
            row_to_schedule(&client.query_one(&statement, &params).await.map_err(backend)?)
        })
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<ScheduleRecord>> {
        Box::pin(async move { self.rows(&self.sql.schedules, &[]).await?.iter().map(row_to_schedule).collect() })
    }

    fn due_schedules<'a>(
        &'a self,
        workflows: &'a [String],
        now: Timestamp,
        limit: usize,
    ) -> StoreFuture<'a, Vec<ScheduleRecord>> {
        Box::pin(async move {
            let params: [&(dyn ToSql + Sync); 3] = [&now.as_millis(), &workflows, &(limit as i64)];
            self.rows(&self.sql.due_schedules, &params).await?.iter().map(row_to_schedule).collect()
        })
    }

    fn fire_schedule(&self, fire: FireSchedule) -> StoreFuture<'_, Option<Vec<CreatedRun>>> {
        Box::pin(self.fire_inner(fire))
    }

    fn pause_schedule<'a>(&'a self, change: &'a PauseSchedule) -> StoreFuture<'a, ScheduleRecord> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.pause_schedule).await.map_err(backend)?;
            let next = change.next_fire_at.map(Timestamp::as_millis);
            let params: [&(dyn ToSql + Sync); 4] = [&change.name, &change.paused, &next, &change.now.as_millis()];
            client.execute(&statement, &params).await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.get_schedule).await.map_err(backend)?;
            let row = client.query_opt(&statement, &[&change.name]).await.map_err(backend)?;
            row.as_ref()
                .map(row_to_schedule)
                .transpose()?
                .ok_or_else(|| StoreError::ScheduleNotFound(change.name.clone()))
        })
    }

    fn delete_schedule<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.delete_schedule).await.map_err(backend)?;
            Ok(client.execute(&statement, &[&name]).await.map_err(backend)? > 0)
        })
    }
}

impl FlowStore for PostgresStore {
    fn put_concurrency<'a>(&'a self, rule: &'a ConcurrencyRule) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            rule.check().map_err(StoreError::InvalidInput)?;
            let path =
                rule.key.as_deref().map(pointer_tokens).transpose().map_err(|e| StoreError::InvalidInput(e.0))?;
            let limit = i32::try_from(rule.limit).unwrap_or(i32::MAX);
            let params: [&(dyn ToSql + Sync); 5] = [&rule.workflow, &rule.key, &path, &limit, &rule.hold_suspended];
            self.change_rule(&self.sql.put_rule, &params, &rule.workflow).await.map(|_| ())
        })
    }

    fn delete_concurrency<'a>(&'a self, workflow: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { Ok(self.change_rule(&self.sql.delete_rule, &[&workflow], workflow).await? > 0) })
    }

    fn take_rate<'a>(&'a self, take: &'a TakeRate) -> StoreFuture<'a, Option<Timestamp>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.take_rate).await.map_err(backend)?;
            let limit = i32::try_from(take.limit).unwrap_or(i32::MAX);
            let params: [&(dyn ToSql + Sync); 4] = [&take.bucket, &limit, &take.period_ms(), &take.now.as_millis()];
            let row = client.query_one(&statement, &params).await.map_err(backend)?;
            Ok(row.try_get::<_, Option<i64>>(0).map_err(backend)?.map(Timestamp::from_millis))
        })
    }

    fn concurrency_rules(&self) -> StoreFuture<'_, Vec<ConcurrencyRule>> {
        Box::pin(async move {
            let rows = self.rows(&self.sql.rules, &[]).await?;
            rows.iter()
                .map(|row| {
                    Ok(ConcurrencyRule {
                        workflow: row.try_get(0).map_err(backend)?,
                        key: row.try_get(1).map_err(backend)?,
                        limit: u32::try_from(row.try_get::<_, i32>(2).map_err(backend)?).unwrap_or(0),
                        hold_suspended: row.try_get(3).map_err(backend)?,
                    })
                })
                .collect()
        })
    }
}

impl EventStore for PostgresStore {
    fn record_event<'a>(&'a self, event: &'a EventRecord) -> StoreFuture<'a, ()> {
        Box::pin(self.record_event_inner(event))
    }

    fn events<'a>(&'a self, query: &'a EventQuery) -> StoreFuture<'a, EventPage> {
        Box::pin(async move {
            let cursor = query.cursor.as_ref();
            let limit = i64::try_from(query.limit.saturating_add(1)).unwrap_or(i64::MAX);
            let params: [&(dyn ToSql + Sync); 4] =
                [&query.topic, &cursor.map(|c| c.published_at.as_millis()), &cursor.map(|c| c.id.as_str()), &limit];
            let text = if query.topic.is_some() { &self.sql.events_of_topic } else { &self.sql.events };
            let rows = self.rows(text, &params).await?;
            let events = rows.iter().map(row_to_event).collect::<Result<Vec<_>, _>>()?;
            Ok(EventPage::cut(events, query.limit))
        })
    }

    fn set_subscriptions<'a>(&'a self, request: &'a SetSubscriptions) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.set_subscriptions).await.map_err(backend)?;
            let workflows: Vec<&str> = request.subscriptions.iter().map(|s| s.workflow.as_str()).collect();
            let patterns: Vec<&str> = request.subscriptions.iter().map(|s| s.pattern.as_str()).collect();
            let versions: Vec<i32> =
                request.subscriptions.iter().map(|s| i32::try_from(s.version).unwrap_or(i32::MAX)).collect();
            let params: [&(dyn ToSql + Sync); 4] = [&request.workflows, &workflows, &patterns, &versions];
            client.execute(&statement, &params).await.map_err(backend)?;
            Ok(())
        })
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        Box::pin(async move {
            let rows = self.rows(&self.sql.subscriptions, &[]).await?;
            rows.iter()
                .map(|row| {
                    Ok(Subscription {
                        workflow: row.try_get(0).map_err(backend)?,
                        pattern: row.try_get(1).map_err(backend)?,
                        version: row.try_get::<_, i32>(2).map_err(backend)?.max(0) as u32,
                    })
                })
                .collect()
        })
    }
}

impl WorkerStore for PostgresStore {
    fn wakeups(&self) -> Option<watch::Receiver<u64>> {
        self.listen();
        Some(self.wakeups.sender.subscribe())
    }

    fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        self.listen();
        Some(self.wakeups.notices.subscribe())
    }

    fn record_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.record_worker).await.map_err(backend)?;
            let serves = tags(&worker.serves);
            let params: [&(dyn ToSql + Sync); 7] = [
                &worker.id,
                &worker.host,
                &i32::try_from(worker.pid).unwrap_or(i32::MAX),
                &worker.started_at.as_millis(),
                &worker.last_seen.as_millis(),
                &worker.live_until.as_millis(),
                &serves,
            ];
            client.execute(&statement, &params).await.map_err(backend)?;
            Ok(())
        })
    }

    fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>> {
        Box::pin(async move {
            let rows = self.rows(&self.sql.workers, &[]).await?;
            rows.iter()
                .map(|row| {
                    let serves = WorkerRecord::serves_from_tags(&row.try_get::<_, Vec<String>>(6).map_err(backend)?)?;
                    Ok(WorkerRecord {
                        id: row.try_get(0).map_err(backend)?,
                        host: row.try_get(1).map_err(backend)?,
                        pid: row.try_get::<_, i32>(2).map_err(backend)?.max(0) as u32,
                        started_at: Timestamp::from_millis(row.try_get(3).map_err(backend)?),
                        last_seen: Timestamp::from_millis(row.try_get(4).map_err(backend)?),
                        live_until: Timestamp::from_millis(row.try_get(5).map_err(backend)?),
                        serves,
                    })
                })
                .collect()
        })
    }

    fn forget_workers<'a>(&'a self, request: &'a ForgetWorkers) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.forget_workers).await.map_err(backend)?;
            let params: [&(dyn ToSql + Sync); 2] = [&request.ids, &request.dead_before.map(Timestamp::as_millis)];
            client.execute(&statement, &params).await.map_err(backend)
        })
    }

    fn record_served<'a>(&'a self, serves: &'a [WorkflowKey], at: Timestamp) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.record_served).await.map_err(backend)?;
            let names: Vec<&str> = serves.iter().map(|key| key.name.as_str()).collect();
            let versions: Vec<i32> = serves.iter().map(|key| i32::try_from(key.version).unwrap_or(i32::MAX)).collect();
            client.execute(&statement, &[&names, &versions, &at.as_millis()]).await.map_err(backend)?;
            Ok(())
        })
    }

    fn served_workflows(&self) -> StoreFuture<'_, Vec<ServedWorkflow>> {
        Box::pin(async move {
            let rows = self.rows(&self.sql.served_workflows, &[]).await?;
            rows.iter()
                .map(|row| {
                    Ok(ServedWorkflow {
                        key: WorkflowKey {
                            name: row.try_get(0).map_err(backend)?,
                            version: row.try_get::<_, i32>(1).map_err(backend)?.max(0) as u32,
                        },
                        first_served: Timestamp::from_millis(row.try_get(2).map_err(backend)?),
                        last_served: Timestamp::from_millis(row.try_get(3).map_err(backend)?),
                    })
                })
                .collect()
        })
    }
}
