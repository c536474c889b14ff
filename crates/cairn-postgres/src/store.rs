//! The PostgreSQL implementation of [`Store`].

use crate::schema::{MIGRATIONS, valid_schema_name};
use cairn_journal::flow::pointer_tokens;
use cairn_journal::{Event, EventKindName, JournalEntry, SignalId, Timestamp};
use cairn_store::{
    Append, CancelOutcome, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, FireSchedule, ForgetWorkers,
    HeartbeatRequest, LeaseStatus, NewRun, NewSignal, Notice, PauseOutcome, PauseSchedule, PruneRequest, PutSchedule,
    ResumeRequest, RunConcurrency, RunFilter, RunId, RunPage, RunRecord, RunStatus, RunUpdate, ScheduleRecord,
    SetSubscriptions, SignalRecord, StartSignal, Store, StoreError, StoreFuture, Subscription, SuspendReason, TakeRate,
    VersionCount, WaitingFor, WorkerRecord, WorkflowCount, WorkflowKey,
};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use serde_json::value::RawValue;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::AsyncMessage;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

/// How to reach the database and where to keep Cairn's tables.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// A libpq-style URL or key=value string, e.g. `postgres://user@host:5432/db`.
    pub url: String,
    /// Schema for Cairn's tables (created if missing). Default `cairn`.
    pub schema: String,
    /// Most pooled connections. Default 16.
    pub pool_size: usize,
}

impl PostgresOptions {
    /// Options for `url` with the default schema and pool size.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), schema: "cairn".into(), pool_size: 16 }
    }

    /// Use this schema.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Pool at most this many connections.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }
}

/// Runs, journals and signals in PostgreSQL, shared by any number of worker processes.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    sql: Arc<Sql>,
    jobs: mpsc::UnboundedSender<Job>,
    config: tokio_postgres::Config,
    /// Wake-ups and run endings heard on the schema's channel; the listener starts on first use.
    wakeups: Arc<Wakeups>,
    /// Held by every clone: the maintenance task ends once the last is dropped.
    alive: Arc<()>,
}

/// What the schema's notification channel reports, and the task listening to it (started on
/// first use; it ends with the last store clone).
struct Wakeups {
    /// Bumped when runs may have become ready.
    sender: watch::Sender<u64>,
    /// Runs that ended or were signalled.
    notices: tokio::sync::broadcast::Sender<Notice>,
    task: std::sync::OnceLock<tokio::task::AbortHandle>,
}

/// The payload of a notification that runs ended: this line, then one id per line.
const ENDED: &str = "ended";

/// The payload of a notification that a run was signalled: this line, then its id.
const SIGNALLED: &str = "signalled\n";

/// Most bytes of ids in one notification (PostgreSQL's payload limit is 8000 bytes).
const ENDED_PAYLOAD: usize = 7000;

impl Wakeups {
    fn new() -> Wakeups {
        Wakeups {
            sender: watch::Sender::new(0),
            notices: tokio::sync::broadcast::channel(4096).0,
            task: std::sync::OnceLock::new(),
        }
    }

    fn bump(&self) {
        self.sender.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// One notification's payload: a wake-up, a signalled run, or the runs that ended.
    fn received(&self, payload: &str) {
        // Nobody listening is fine.
        if let Some(ids) = payload.strip_prefix(ENDED) {
            for id in ids.lines().filter(|id| !id.is_empty()) {
                let _ = self.notices.send(Notice::Ended(RunId::new(id)));
            }
            return;
        }
        self.bump();
        if let Some(id) = payload.strip_prefix(SIGNALLED) {
            let _ = self.notices.send(Notice::Signalled(RunId::new(id)));
        }
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }
}

/// Where the writer task sends a job's outcome.
type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// A write waiting for the writer task.
enum Job {
    Append(Append, Reply<()>),
    Create(NewRun, Reply<CreatedRun>),
}

impl Job {
    fn run_id(&self) -> &RunId {
        match self {
            Job::Append(append, _) => &append.run_id,
            Job::Create(run, _) => &run.id,
        }
    }
}

/// Most queued jobs the writer gathers at a time (a round takes at most one per run).
const MAX_ROUND: usize = 2048;

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("schema", &self.sql.schema).finish()
    }
}

fn backend(error: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(error.to_string())
}

/// The flow columns a new run is inserted with, from its workflow's rule `r` (joined, maybe
/// absent): its key (the input's value at the rule's path as text, `''` without a path or value),
/// whether it keeps its slot while suspended, and that it enters waiting for a slot.
const FLOW_INSERT_COLUMNS: &str = "flow_key, flow_hold, waiting_for";

fn flow_values(input: &str) -> String {
    format!(
        "{},
         coalesce(r.hold, false),
         CASE WHEN r.workflow IS NOT NULL THEN 'concurrency' END",
        flow_key_sql(input)
    )
}

/// The concurrency key of a new run with `input` under its workflow's rule `r` (see
/// [`FLOW_INSERT_COLUMNS`]).
fn flow_key_sql(input: &str) -> String {
    format!(
        "CASE WHEN r.workflow IS NULL THEN NULL WHEN r.path IS NULL THEN ''
              ELSE coalesce({input}::jsonb #>> r.path, '') END"
    )
}

const RUN_COLUMNS: &str = "id, workflow, version, status, suspend_reason, input, output, error, idempotency_key, \
     created_at, updated_at, completed_at, wake_at, lease_owner, lease_expires_at, epoch, last_seq, cancel_requested, \
     pause_requested, recoveries, deadline_at, retention_ms, delete_after, restarted_from, parent, continued_from, \
     continued_as, flow_key, flow_hold, waiting_for, priority, fair_key, fair_seq, debounce_key, debounce_until";

/// [`RUN_COLUMNS`] of the table aliased `alias`.
fn run_columns_of(alias: &str) -> String {
    RUN_COLUMNS.split(", ").map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}

/// The `SET` of a run (aliased `u`) leaving a debounce window (it wakes or is paused): it held no
/// slot while it debounced (`flow_hold` false), and from now on keeps one while suspended as its
/// rule says.
fn hold_after_debounce(s: &str) -> String {
    format!(
        "flow_hold = CASE WHEN u.suspend_reason = 'debouncing'
             THEN coalesce((SELECT c.hold FROM {s}.concurrency_rules c WHERE c.workflow = u.workflow), false)
             ELSE u.flow_hold END"
    )
}

/// The fairness sequence of a new run of priority `priority` and key `key` (SQL expressions)
/// ([`cairn_journal::flow::fair_seq`]): one past the last ready run of its key and priority, and
/// never behind the head of its priority; both read from the front of a partial index. A
/// statement that inserts several runs of one key adds their rank among them.
fn fair_seq_sql(s: &str, priority: &str, key: &str) -> String {
    format!(
        "greatest(
             coalesce((SELECT f.fair_seq + 1 FROM {s}.runs f
                       WHERE f.status = 'pending' AND f.waiting_for IS NULL AND f.priority = {priority}
                         AND f.fair_key = {key}
                       ORDER BY f.fair_seq DESC LIMIT 1), 0),
             coalesce((SELECT f.fair_seq FROM {s}.runs f
                       WHERE f.status = 'pending' AND f.waiting_for IS NULL AND f.priority = {priority}
                       ORDER BY f.priority DESC, f.fair_seq LIMIT 1), 0))"
    )
}

/// Every statement, with the schema name filled in once.
struct Sql {
    schema: String,
    get_run: String,
    by_key: String,
    create_batch: String,
    flow_places: String,
    put_rule: String,
    delete_rule: String,
    admit_workflow: String,
    ensure_flow_triggers: String,
    rules: String,
    take_rate: String,
    insert_events: String,
    /// Deletes what a loop checkpoint trims: $1 run, ($2, $3] the range, $4 the iterations'
    /// path prefix, $5 the loop's path (its earlier checkpoints), and the values' sets.
    trim_loop: String,
    list: String,
    journal: String,
    signals: String,
    claim: String,
    refusal: String,
    recheck_signals: String,
    heartbeat: String,
    heartbeat_batch: String,
    flags: String,
    request_cancel: String,
    request_pause: String,
    pause_now: String,
    resume: String,
    insert_run: String,
    debounce_run: String,
    restart_journal: String,
    lock_by_key: String,
    insert_signal: String,
    wake_waiting: String,
    lock_run: String,
    continued_as: String,
    move_signals: String,
    cancel_now: String,
    next_wake: String,
    put_schedule: String,
    get_schedule: String,
    schedules: String,
    due_schedules: String,
    fire_schedule: String,
    pause_schedule: String,
    delete_schedule: String,
    notify: String,
    append_batch: String,
    progress: String,
    suspend: String,
    finish: String,
    release: String,
    park: String,
    prune_candidates: String,
    prune: String,
    record_worker: String,
    workers: String,
    forget_workers: String,
    set_subscriptions: String,
    subscriptions: String,
    version_counts: String,
    fold_ended_counts: String,
    vacuum_deltas: String,
    workflow_counts: String,
}

impl Sql {
    fn new(schema: &str) -> Sql {
        let s = format!("\"{schema}\"");
        // One statement per append, so a step commits in one round trip: the run-row update checks
        // the lease epoch, the journal's end and (when the append consumes a signal) that the
        // signal is still free; the signal and journal writes happen only if it matched.
        let append = |set: &str| {
            format!(
                "WITH upd AS (
                     UPDATE {s}.runs SET last_seq = $1, updated_at = $2, recoveries = 0{set}
                     WHERE id = $3 AND epoch = $4 AND last_seq = $5
                       AND ($6::bigint IS NULL OR EXISTS (
                           SELECT 1 FROM {s}.signals g WHERE g.id = $6 AND g.run_id = $3 AND g.consumed_seq IS NULL))
                     RETURNING id),
                 sig AS (
                     UPDATE {s}.signals SET consumed_seq = $7
                     WHERE id = $6 AND run_id = $3 AND EXISTS (SELECT 1 FROM upd) RETURNING id),
                 ins AS (
                     INSERT INTO {s}.journal (run_id, seq, at, kind, path, data)
                     SELECT $3, e.seq, $2, e.kind, e.path, e.data
                     FROM unnest($8::bigint[], $9::text[], $10::text[], $11::text[]) AS e(seq, kind, path, data)
                     WHERE EXISTS (SELECT 1 FROM upd) RETURNING 1)
                 SELECT count(*) FROM upd"
            )
        };
        // Ended runs past their retention (or ended before $2), through the two partial indexes.
        let candidates = format!(
            "(SELECT id FROM {s}.runs WHERE delete_after <= $1 AND status IN ('completed', 'failed', 'cancelled', 'continued')
              UNION
              SELECT id FROM {s}.runs WHERE $2::bigint IS NOT NULL AND completed_at < $2
                AND status IN ('completed', 'failed', 'cancelled', 'continued'))"
        );
        Sql {
            // Rows another sweeper (or anything else) holds are skipped, so sweepers never wait for
            // each other or for claims, and each run is deleted once.
            prune: format!(
                "WITH doomed AS (
                     SELECT id FROM {s}.runs WHERE id IN {candidates} ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED),
                 j AS (DELETE FROM {s}.journal WHERE run_id IN (SELECT id FROM doomed)),
                 g AS (DELETE FROM {s}.signals WHERE run_id IN (SELECT id FROM doomed))
                 DELETE FROM {s}.runs WHERE id IN (SELECT id FROM doomed) RETURNING id"
            ),
            prune_candidates: format!("SELECT id FROM {candidates} AS c ORDER BY id LIMIT $3"),
            record_worker: format!(
                "INSERT INTO {s}.workers (id, host, pid, started_at, last_seen, live_until, serves)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
                     started_at = excluded.started_at, last_seen = excluded.last_seen,
                     live_until = excluded.live_until, serves = excluded.serves"
            ),
            workers: format!(
                "SELECT id, host, pid, started_at, last_seen, live_until, serves FROM {s}.workers ORDER BY id"
            ),
            forget_workers: format!("DELETE FROM {s}.workers WHERE id = ANY($1) OR live_until < $2"),
            // One statement: the subscriptions of workflows $1 not among the new ones ($2, $3, $4)
            // go, the new ones are added or updated; a reader sees the old set or the new one.
            set_subscriptions: format!(
                "WITH wanted AS (SELECT * FROM unnest($2::text[], $3::text[], $4::int[]) AS w(workflow, pattern, version)),
                 gone AS (
                     DELETE FROM {s}.subscriptions o WHERE o.workflow = ANY($1)
                       AND NOT EXISTS (SELECT 1 FROM wanted w WHERE w.workflow = o.workflow AND w.pattern = o.pattern))
                 INSERT INTO {s}.subscriptions (workflow, pattern, version) SELECT workflow, pattern, version FROM wanted
                 ON CONFLICT (workflow, pattern) DO UPDATE SET version = excluded.version"
            ),
            subscriptions: format!(
                "SELECT workflow, pattern, version FROM {s}.subscriptions ORDER BY workflow, pattern"
            ),
            version_counts: format!(
                "SELECT workflow, version, count(*) FROM {s}.runs WHERE status IN ('pending', 'running', 'suspended')
                 GROUP BY workflow, version ORDER BY workflow, version"
            ),
            // Concurrent folds never count a delta twice: a row one has deleted is skipped by the
            // other; counters are upserted in key order, so two folds never deadlock.
            vacuum_deltas: format!("VACUUM {s}.ended_deltas"),
            fold_ended_counts: format!(
                "WITH moved AS (DELETE FROM {s}.ended_deltas RETURNING workflow, status, runs)
                 INSERT INTO {s}.ended_counts AS c (workflow, status, runs)
                 SELECT workflow, status, sum(runs) FROM moved GROUP BY workflow, status ORDER BY workflow, status
                 ON CONFLICT (workflow, status) DO UPDATE SET runs = c.runs + excluded.runs"
            ),
            workflow_counts: format!(
                "SELECT workflow, status, sum(runs)::BIGINT FROM (
                     SELECT workflow, status, runs FROM {s}.ended_counts
                     UNION ALL SELECT workflow, status, runs FROM {s}.ended_deltas
                     UNION ALL SELECT workflow, 'pending', count(*) FROM {s}.runs WHERE status = 'pending' GROUP BY workflow
                     UNION ALL SELECT workflow, 'running', count(*) FROM {s}.runs WHERE status = 'running' GROUP BY workflow
                     UNION ALL SELECT workflow, 'suspended', count(*) FROM {s}.runs WHERE status = 'suspended' GROUP BY workflow
                     UNION ALL SELECT workflow, 'paused', count(*) FROM {s}.runs WHERE status = 'paused' GROUP BY workflow
                 ) counts GROUP BY workflow, status HAVING sum(runs) > 0 ORDER BY workflow, status COLLATE \"C\""
            ),
            schema: schema.to_owned(),
            get_run: format!("SELECT {RUN_COLUMNS} FROM {s}.runs WHERE id = $1"),
            by_key: format!("SELECT {RUN_COLUMNS} FROM {s}.runs WHERE workflow = $1 AND idempotency_key = $2"),
            // New runs skip any id or idempotency-key conflict (the caller looks the winner up);
            // only inserted runs get their `started` entry; one notification wakes idle workers
            // when anything was inserted. Each (priority, key) of the batch looks its place up
            // once, before the insert (MATERIALIZED): looked up per run, each look walked back
            // over the index entries of the runs this statement had inserted before it
            // (invisible to it), and W1 ran at half speed. A batch's first runs of each limited
            // group take its free slots before they are inserted (`flow_take`, in group order)
            // and go in admitted; slots taken for runs not inserted go back (`flow_give`); the
            // rest go in waiting. The last branch only makes the notification and the give-backs
            // run (a CTE that reads is run only as far as something reads it, and nothing reads
            // past an empty `ins`).
            create_batch: format!(
                "WITH i AS (
                     SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bigint[],
                                          $14::bigint[], $15::bigint[], $16::bigint[], $17::text[], $18::text[],
                                          $19::text[], $20::int[], $21::text[]) WITH ORDINALITY
                         AS i(id, workflow, version, input, key, created_at, last_seq, deadline_at, retention_ms,
                              restarted_from, parent, continued_from, priority, fair_key, ord)),
                 places AS MATERIALIZED (
                     SELECT k.priority, k.fair_key, {fair_seq} AS first
                     FROM (SELECT DISTINCT priority, fair_key FROM i) AS k),
                 keyed AS MATERIALIZED (
                     SELECT i.*, {flow_key} AS fkey, coalesce(r.hold, false) AS hold
                     FROM i LEFT JOIN {s}.concurrency_rules r ON r.workflow = i.workflow),
                 nth AS (
                     SELECT k.*, row_number() OVER (PARTITION BY k.workflow, k.fkey ORDER BY k.ord) AS nth FROM keyed k),
                 taken AS MATERIALIZED (
                     SELECT g.workflow, g.fkey, {s}.flow_take(g.workflow, g.fkey, g.n::int) AS n
                     FROM (SELECT workflow, fkey, count(*) AS n FROM keyed WHERE fkey IS NOT NULL
                           GROUP BY workflow, fkey ORDER BY workflow, fkey) AS g),
                 ins AS (
                     INSERT INTO {s}.runs (id, workflow, version, status, input, idempotency_key, created_at, updated_at,
                         last_seq, deadline_at, retention_ms, restarted_from, parent, continued_from, {FLOW_INSERT_COLUMNS},
                         priority, fair_key, fair_seq)
                     SELECT k.id, k.workflow, k.version, 'pending', k.input, k.key, k.created_at, k.created_at,
                         k.last_seq, k.deadline_at, k.retention_ms, k.restarted_from, k.parent, k.continued_from,
                         k.fkey, k.hold, CASE WHEN k.fkey IS NOT NULL AND k.nth > t.n THEN 'concurrency' END,
                         k.priority, k.fair_key,
                         p.first + row_number() OVER (PARTITION BY k.priority, k.fair_key ORDER BY k.ord) - 1
                     FROM nth k JOIN places p ON p.priority = k.priority AND p.fair_key = k.fair_key
                         LEFT JOIN taken t ON t.workflow = k.workflow AND t.fkey = k.fkey
                     ON CONFLICT DO NOTHING
                     RETURNING id, workflow, flow_key, flow_key IS NOT NULL AND waiting_for IS NULL AS admitted,
                         fair_seq),
                 gave AS (
                     SELECT {s}.flow_give(t.workflow, t.fkey, (t.n - count(a.id))::int)
                     FROM taken t LEFT JOIN ins a ON a.workflow = t.workflow AND a.flow_key = t.fkey AND a.admitted
                     GROUP BY t.workflow, t.fkey, t.n HAVING t.n > count(a.id)),
                 {journal},
                 woke AS (SELECT pg_notify($13, '') FROM (SELECT 1 FROM ins LIMIT 1) AS any_new)
                 SELECT ins.id, ins.flow_key IS NOT NULL, ins.fair_seq FROM ins
                 UNION ALL
                 SELECT NULL, NULL, NULL FROM (SELECT (SELECT count(*) FROM woke) + (SELECT count(*) FROM gave) AS n) AS forced
                 WHERE forced.n < 0",
                journal = journal_cte(&s, 7, "ins"),
                flow_key = flow_key_sql("i.input"),
                fair_seq = fair_seq_sql(&s, "k.priority", "k.fair_key")
            ),
            trim_loop: format!(
                "DELETE FROM {s}.journal WHERE run_id = $1 AND seq > $2 AND seq <= $3
                     AND (left(path, length($4)) = $4 OR (kind = 'loop_checkpoint' AND path = $5)
                          OR kind = 'var_set')"
            ),
            insert_events: format!(
                "INSERT INTO {s}.journal (run_id, seq, at, kind, path, data)
                 SELECT $1, seq, $2, kind, path, data
                 FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[]) AS e(seq, kind, path, data)"
            ),
            // Conditions are added per list (see `list_runs`), so the planner sees only those a
            // filter has and can use the index that serves them.
            list: format!("SELECT {RUN_COLUMNS} FROM {s}.runs"),
            journal: format!(
                "SELECT seq, at, data FROM {s}.journal WHERE run_id = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq"
            ),
            signals: format!(
                "SELECT id, name, payload, sent_at, consumed_seq FROM {s}.signals WHERE run_id = $1 ORDER BY id"
            ),
            // Woken runs that gave their slot up when they suspended wait for one again, as do
            // debounced runs whose window closed, which from then on keep their slot while
            // suspended as their rule says (the update's trigger admits them where their group
            // has room; a later claim takes them).
            claim: format!(
                "WITH requeued AS (
                     UPDATE {s}.runs u SET status = 'pending', waiting_for = 'concurrency', suspend_reason = NULL,
                         wake_at = NULL, updated_at = $3,
                         {hold}
                     WHERE id IN (SELECT id FROM {s}.runs
                                  WHERE status = 'suspended' AND wake_at <= $3 AND flow_key IS NOT NULL AND NOT flow_hold
                                    AND (workflow || '@' || version) = ANY($5)
                                  FOR UPDATE SKIP LOCKED)
                     RETURNING 1),
                 pending AS (
                     SELECT id, priority, fair_seq, created_at AS due FROM {s}.runs
                     WHERE status = 'pending' AND waiting_for IS NULL AND (workflow || '@' || version) = ANY($5)
                     ORDER BY priority DESC, fair_seq, created_at
                     LIMIT $6
                     FOR UPDATE SKIP LOCKED),
                 woken AS (
                     SELECT id, priority, fair_seq, wake_at AS due FROM {s}.runs
                     WHERE status = 'suspended' AND wake_at <= $3 AND (flow_key IS NULL OR flow_hold)
                       AND (workflow || '@' || version) = ANY($5)
                     ORDER BY wake_at
                     LIMIT $6
                     FOR UPDATE SKIP LOCKED),
                 lapsed AS (
                     SELECT id, priority, fair_seq, lease_expires_at AS due FROM {s}.runs
                     WHERE status = 'running' AND lease_expires_at <= $4 AND (workflow || '@' || version) = ANY($5)
                     ORDER BY lease_expires_at
                     LIMIT $6
                     FOR UPDATE SKIP LOCKED),
                 ready AS (
                     SELECT id FROM (SELECT * FROM pending UNION ALL SELECT * FROM woken UNION ALL SELECT * FROM lapsed) c
                     ORDER BY priority DESC, fair_seq, due
                     LIMIT $6)
                 UPDATE {s}.runs r SET status = 'running', suspend_reason = NULL, wake_at = NULL, lease_owner = $1,
                     lease_expires_at = $2, epoch = r.epoch + 1, updated_at = $3,
                     recoveries = CASE WHEN r.status = 'running' THEN r.recoveries + 1 ELSE r.recoveries END
                 FROM ready WHERE r.id = ready.id
                 RETURNING {}",
                run_columns_of("r"),
                hold = hold_after_debounce(&s)
            ),
            refusal: format!("SELECT epoch, last_seq FROM {s}.runs WHERE id = $1"),
            // After a run suspended to wait: a signal committed while the suspending statement
            // waited for the run's row (its snapshot predates the signal) wakes it now.
            recheck_signals: format!(
                "UPDATE {s}.runs SET wake_at = $2
                 WHERE id = $1 AND epoch = $3 AND status = 'suspended' AND (wake_at IS NULL OR wake_at > $2)
                   AND EXISTS (SELECT 1 FROM {s}.signals g
                               WHERE g.run_id = $1 AND g.consumed_seq IS NULL AND g.id > $4)"
            ),
            heartbeat: format!(
                "UPDATE {s}.runs SET lease_expires_at = $1
                 WHERE id = $2 AND epoch = $3 AND lease_owner = $4 AND status = 'running'
                 RETURNING cancel_requested, pause_requested"
            ),
            // Every lease of one worker in one statement, without waiting: rows another
            // transaction holds (an append round under way) are skipped and beaten one by one
            // afterwards, so this never waits while holding other rows (no deadlock with rounds).
            heartbeat_batch: format!(
                "WITH free AS (SELECT id FROM {s}.runs WHERE id = ANY($2) FOR UPDATE SKIP LOCKED),
                 beat AS (
                     UPDATE {s}.runs r SET lease_expires_at = $1
                     FROM unnest($2::text[], $3::bigint[]) AS h(id, epoch)
                     WHERE r.id = h.id AND r.id IN (SELECT id FROM free) AND r.epoch = h.epoch
                       AND r.lease_owner = $4 AND r.status = 'running'
                     RETURNING r.id)
                 SELECT r.id, r.id IN (SELECT id FROM beat), r.cancel_requested, r.pause_requested
                 FROM {s}.runs r WHERE r.id IN (SELECT id FROM free)"
            ),
            flags: format!("SELECT cancel_requested, pause_requested FROM {s}.runs WHERE id = $1"),
            request_cancel: format!("UPDATE {s}.runs SET cancel_requested = true WHERE id = $1"),
            request_pause: format!("UPDATE {s}.runs SET pause_requested = true WHERE id = $1"),
            pause_now: format!(
                "UPDATE {s}.runs u SET epoch = epoch + 1, status = 'paused', error = $2, updated_at = $3,
                     pause_requested = false, suspend_reason = NULL, wake_at = NULL, lease_owner = NULL,
                     lease_expires_at = NULL, waiting_for = NULL, {}
                 WHERE id = $1",
                hold_after_debounce(&s)
            ),
            resume: format!(
                "UPDATE {s}.runs SET status = 'pending', error = NULL, recoveries = 0, updated_at = $2,
                     waiting_for = CASE WHEN flow_key IS NOT NULL THEN 'concurrency' END
                 WHERE id = $1"
            ),
            insert_run: format!(
                "INSERT INTO {s}.runs (id, workflow, version, status, input, idempotency_key, created_at, updated_at,
                     last_seq, deadline_at, retention_ms, restarted_from, parent, continued_from, {FLOW_INSERT_COLUMNS},
                     priority, fair_key, fair_seq)
                 SELECT $1, $2, $3, 'pending', $4, $5, $6, $6, $7, $8, $9, $10, $11, $12, {flow_values}, $13, $14, {fair_seq}
                 FROM (SELECT $2::text AS workflow) AS i LEFT JOIN {s}.concurrency_rules r ON r.workflow = i.workflow
                 ON CONFLICT DO NOTHING RETURNING id, flow_key IS NOT NULL, fair_seq",
                flow_values = flow_values("$4::text"),
                fair_seq = fair_seq_sql(&s, "$13::int", "$14::text")
            ),
            // A debounced start: a new run debouncing under its key, or (the arbiter is the unique
            // partial index of debouncing runs) the one already debouncing there takes its input
            // and wakes $13 (quiet after now), capped by its window's maximum wait. A run whose
            // claim is under way leaves the index when that claim commits, and the insert then
            // goes ahead. `created` tells which (`xmax` is 0 only for a row this statement
            // inserted). A debouncing run holds no concurrency slot and waits for none (see
            // `claim`).
            debounce_run: format!(
                "INSERT INTO {s}.runs AS t (id, workflow, version, status, suspend_reason, wake_at, input, created_at,
                     updated_at, last_seq, deadline_at, retention_ms, {FLOW_INSERT_COLUMNS}, priority, fair_key, fair_seq,
                     debounce_key, debounce_until)
                 SELECT $1, $2, $3, 'suspended', 'debouncing', $4, $5, $6, $6, 1, $7, $8, {flow_key}, false, NULL,
                     $9, $10, {fair_seq}, $11, $12
                 FROM (SELECT $2::text AS workflow) AS i LEFT JOIN {s}.concurrency_rules r ON r.workflow = i.workflow
                 ON CONFLICT (workflow, debounce_key) WHERE status = 'suspended' AND suspend_reason = 'debouncing'
                 DO UPDATE SET input = excluded.input, updated_at = excluded.updated_at,
                     wake_at = least($13, t.debounce_until)
                 RETURNING {}, t.xmax = 0 AS created",
                run_columns_of("t"),
                flow_key = flow_key_sql("$5::text"),
                fair_seq = fair_seq_sql(&s, "$9::int", "$10::text")
            ),
            restart_journal: format!("UPDATE {s}.journal SET data = $2 WHERE run_id = $1 AND seq = 1"),
            flow_places: format!(
                "SELECT id, flow_key, flow_hold, waiting_for FROM {s}.runs WHERE id = ANY($1) AND flow_key IS NOT NULL"
            ),
            put_rule: format!(
                "INSERT INTO {s}.concurrency_rules (workflow, key, path, lim, hold) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (workflow) DO UPDATE
                     SET key = excluded.key, path = excluded.path, lim = excluded.lim, hold = excluded.hold"
            ),
            delete_rule: format!("DELETE FROM {s}.concurrency_rules WHERE workflow = $1"),
            // The flow triggers exist once the store has a rule (schema migrations 15 and 18).
            ensure_flow_triggers: format!(
                "SELECT {s}.ensure_flow_triggers() WHERE EXISTS (SELECT 1 FROM {s}.concurrency_rules)"
            ),
            admit_workflow: format!(
                "SELECT {s}.flow_admit(workflow, flow_key)
                 FROM (SELECT DISTINCT workflow, flow_key FROM {s}.runs WHERE workflow = $1 AND waiting_for IS NOT NULL) g"
            ),
            rules: format!("SELECT workflow, key, lim, hold FROM {s}.concurrency_rules ORDER BY workflow"),
            take_rate: format!("SELECT {s}.take_rate($1, $2, $3, $4)"),
            lock_by_key: format!(
                "SELECT {RUN_COLUMNS} FROM {s}.runs WHERE workflow = $1 AND idempotency_key = $2 FOR UPDATE"
            ),
            insert_signal: format!(
                "INSERT INTO {s}.signals (run_id, name, payload, sent_at) VALUES ($1, $2, $3, $4) RETURNING id"
            ),
            wake_waiting: format!(
                "UPDATE {s}.runs SET wake_at = least(coalesce(wake_at, $2), $2)
                 WHERE id = $1 AND status = 'suspended' AND suspend_reason = 'waiting'"
            ),
            lock_run: format!("SELECT {RUN_COLUMNS} FROM {s}.runs WHERE id = $1 FOR UPDATE"),
            continued_as: format!("UPDATE {s}.runs SET continued_as = $2 WHERE id = $1"),
            move_signals: format!("UPDATE {s}.signals SET run_id = $1 WHERE run_id = $2 AND consumed_seq IS NULL"),
            cancel_now: format!(
                "UPDATE {s}.runs SET cancel_requested = true, epoch = epoch + 1, last_seq = $2, updated_at = $3,
                     status = 'cancelled', suspend_reason = NULL, error = $4, completed_at = $3, wake_at = NULL,
                     lease_owner = NULL, lease_expires_at = NULL, delete_after = $3 + retention_ms, waiting_for = NULL
                 WHERE id = $1"
            ),
            put_schedule: format!(
                "INSERT INTO {s}.schedules AS o (name, workflow, spec, input, next_fire_at, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6)
                 ON CONFLICT (name) DO UPDATE SET workflow = excluded.workflow, input = excluded.input,
                     next_fire_at = CASE WHEN o.spec = excluded.spec THEN o.next_fire_at ELSE excluded.next_fire_at END,
                     spec = excluded.spec, updated_at = excluded.updated_at
                 RETURNING {SCHEDULE_COLUMNS}"
            ),
            get_schedule: format!("SELECT {SCHEDULE_COLUMNS} FROM {s}.schedules WHERE name = $1"),
            schedules: format!("SELECT {SCHEDULE_COLUMNS} FROM {s}.schedules ORDER BY name"),
            due_schedules: format!(
                "SELECT {SCHEDULE_COLUMNS} FROM {s}.schedules
                 WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at <= $1 AND workflow = ANY($2)
                 ORDER BY next_fire_at LIMIT $3"
            ),
            fire_schedule: format!(
                "UPDATE {s}.schedules SET next_fire_at = $3, last_fired_at = coalesce($4, last_fired_at), updated_at = $5
                 WHERE name = $1 AND NOT paused AND next_fire_at = $2"
            ),
            pause_schedule: format!(
                "UPDATE {s}.schedules SET paused = $2, updated_at = $4,
                     next_fire_at = CASE WHEN $2 THEN next_fire_at ELSE $3 END
                 WHERE name = $1 AND paused <> $2"
            ),
            delete_schedule: format!("DELETE FROM {s}.schedules WHERE name = $1"),
            // The schedules' minimum goes through their partial index (few rows: the unpaused).
            next_wake: format!(
                "SELECT min(at) FROM (
                     SELECT min(wake_at) AS at FROM {s}.runs WHERE status = 'suspended' AND wake_at IS NOT NULL
                       AND (workflow || '@' || version) = ANY($1)
                     UNION ALL
                     SELECT min(next_fire_at) FROM {s}.schedules WHERE NOT paused AND next_fire_at IS NOT NULL
                       AND workflow = ANY($2)) AS due"
            ),
            // The channel is the schema's name: one channel per Cairn installation.
            notify: "SELECT pg_notify($1, $2)".to_owned(),
            append_batch: format!(
                "WITH input AS (
                     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[],
                                          $12::bool[], $13::text[], $14::text[], $15::text[], $16::bigint[])
                         AS i(id, epoch, after_seq, new_last, at, finish, status, output, error, completed_at)),
                 upd AS (
                     UPDATE {s}.runs r SET last_seq = i.new_last, updated_at = i.at, recoveries = 0,
                         status = CASE WHEN i.finish THEN i.status ELSE r.status END,
                         suspend_reason = CASE WHEN i.finish THEN NULL ELSE r.suspend_reason END,
                         output = CASE WHEN i.finish THEN i.output ELSE r.output END,
                         error = CASE WHEN i.finish THEN i.error ELSE r.error END,
                         completed_at = CASE WHEN i.finish THEN i.completed_at ELSE r.completed_at END,
                         delete_after = CASE WHEN i.finish THEN i.completed_at + r.retention_ms ELSE r.delete_after END,
                         wake_at = CASE WHEN i.finish THEN NULL ELSE r.wake_at END,
                         lease_owner = CASE WHEN i.finish THEN NULL ELSE r.lease_owner END,
                         lease_expires_at = CASE WHEN i.finish THEN NULL ELSE r.lease_expires_at END
                     FROM input i
                     WHERE r.id = i.id AND r.epoch = i.epoch AND r.last_seq = i.after_seq
                     RETURNING r.id),
                 {journal}
                 SELECT id FROM upd",
                journal = journal_cte(&s, 6, "upd")
            ),
            progress: append(""),
            suspend: append(&format!(
                ", status = 'suspended', suspend_reason = $12, lease_owner = NULL, lease_expires_at = NULL,
                 wake_at = CASE WHEN cancel_requested OR pause_requested OR ($13::bigint IS NOT NULL AND EXISTS (
                         SELECT 1 FROM {s}.signals g WHERE g.run_id = {s}.runs.id AND g.consumed_seq IS NULL AND g.id > $13))
                     THEN $14 ELSE $15::bigint END"
            )),
            finish: append(
                ", status = $12, suspend_reason = NULL, output = $13, error = $14, completed_at = $15, wake_at = NULL,
                 lease_owner = NULL, lease_expires_at = NULL, delete_after = $15 + retention_ms",
            ),
            release: append(
                ", status = 'pending', suspend_reason = NULL, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL",
            ),
            park: append(
                ", status = 'paused', suspend_reason = NULL, error = $12, wake_at = NULL, lease_owner = NULL,
                 lease_expires_at = NULL, pause_requested = false",
            ),
        }
    }
}

/// A CTE inserting the journal rows of [`JournalColumns`] bound as parameters `$first…$first+5`,
/// only for runs whose id the CTE `gate` returned.
fn journal_cte(s: &str, first: usize, gate: &str) -> String {
    let p = |i: usize| first + i;
    format!(
        "journal_rows AS (
             INSERT INTO {s}.journal (run_id, seq, at, kind, path, data)
             SELECT e.run_id, e.seq, e.at, e.kind, e.path, e.data
             FROM unnest(${}::text[], ${}::bigint[], ${}::bigint[], ${}::text[], ${}::text[], ${}::text[])
                 AS e(run_id, seq, at, kind, path, data)
             WHERE e.run_id IN (SELECT id FROM {gate}))",
        p(0),
        p(1),
        p(2),
        p(3),
        p(4),
        p(5)
    )
}

const SCHEDULE_COLUMNS: &str =
    "name, workflow, spec, input, paused, next_fire_at, last_fired_at, created_at, updated_at";

fn row_to_schedule(row: &Row) -> Result<ScheduleRecord, StoreError> {
    let ts = |i: usize| -> Result<Option<Timestamp>, StoreError> {
        Ok(row.try_get::<_, Option<i64>>(i).map_err(backend)?.map(Timestamp::from_millis))
    };
    Ok(ScheduleRecord {
        name: row.try_get(0).map_err(backend)?,
        workflow: row.try_get(1).map_err(backend)?,
        spec: row.try_get(2).map_err(backend)?,
        input: raw(row.try_get(3).map_err(backend)?)?,
        paused: row.try_get(4).map_err(backend)?,
        next_fire_at: ts(5)?,
        last_fired_at: ts(6)?,
        created_at: Timestamp::from_millis(row.try_get(7).map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get(8).map_err(backend)?),
    })
}

fn raw(text: String) -> Result<Box<RawValue>, StoreError> {
    RawValue::from_string(text).map_err(|e| StoreError::Corrupt(format!("stored JSON is invalid: {e}")))
}

fn row_to_run(row: &Row) -> Result<RunRecord, StoreError> {
    let get_ts = |i: usize| -> Result<Option<Timestamp>, StoreError> {
        Ok(row.try_get::<_, Option<i64>>(i).map_err(backend)?.map(Timestamp::from_millis))
    };
    let status: String = row.try_get(3).map_err(backend)?;
    let reason: Option<String> = row.try_get(4).map_err(backend)?;
    Ok(RunRecord {
        id: RunId::new(row.try_get::<_, String>(0).map_err(backend)?),
        workflow: row.try_get(1).map_err(backend)?,
        version: u32::try_from(row.try_get::<_, i32>(2).map_err(backend)?).unwrap_or(0),
        status: RunStatus::parse_stored(&status)?,
        suspend_reason: reason.as_deref().and_then(SuspendReason::parse),
        input: raw(row.try_get(5).map_err(backend)?)?,
        output: row.try_get::<_, Option<String>>(6).map_err(backend)?.map(raw).transpose()?,
        error: row.try_get(7).map_err(backend)?,
        idempotency_key: row.try_get(8).map_err(backend)?,
        created_at: Timestamp::from_millis(row.try_get(9).map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get(10).map_err(backend)?),
        completed_at: get_ts(11)?,
        wake_at: get_ts(12)?,
        lease_owner: row.try_get(13).map_err(backend)?,
        lease_expires_at: get_ts(14)?,
        epoch: row.try_get::<_, i64>(15).map_err(backend)? as u64,
        last_seq: row.try_get::<_, i64>(16).map_err(backend)? as u64,
        cancel_requested: row.try_get(17).map_err(backend)?,
        pause_requested: row.try_get(18).map_err(backend)?,
        recoveries: u32::try_from(row.try_get::<_, i32>(19).map_err(backend)?).unwrap_or(0),
        deadline: get_ts(20)?,
        retention: row
            .try_get::<_, Option<i64>>(21)
            .map_err(backend)?
            .map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        delete_after: get_ts(22)?,
        restarted_from: row.try_get::<_, Option<String>>(23).map_err(backend)?.map(RunId::new),
        parent: row.try_get::<_, Option<String>>(24).map_err(backend)?.map(RunId::new),
        continued_from: row.try_get::<_, Option<String>>(25).map_err(backend)?.map(RunId::new),
        continued_as: row.try_get::<_, Option<String>>(26).map_err(backend)?.map(RunId::new),
        concurrency: RunConcurrency::stored(row.try_get(27).map_err(backend)?, row.try_get(28).map_err(backend)?),
        waiting_for: WaitingFor::stored(row.try_get::<_, Option<&str>>(29).map_err(backend)?)
            .map_err(StoreError::Corrupt)?,
        priority: row.try_get(30).map_err(backend)?,
        fairness_key: Some(row.try_get::<_, String>(31).map_err(backend)?).filter(|key| !key.is_empty()),
        fair_seq: row.try_get(32).map_err(backend)?,
        debounce_key: row.try_get(33).map_err(backend)?,
        debounce_until: get_ts(34)?,
    })
}

/// The claim statement's parameters that are not fields of its request, as it binds them.
struct ClaimValues {
    lease_until: i64,
    now: i64,
    lease_now: i64,
    tags: Vec<String>,
    limit: i64,
}

impl ClaimValues {
    fn of(request: &ClaimRequest) -> ClaimValues {
        ClaimValues {
            lease_until: request.lease_until.as_millis(),
            now: request.now.as_millis(),
            lease_now: request.lease_now.as_millis(),
            tags: tags(&request.workflows),
            limit: request.limit as i64,
        }
    }

    /// `$1` to `$6` of `Sql::claim`.
    fn params<'a>(&'a self, request: &'a ClaimRequest) -> [&'a (dyn ToSql + Sync); 6] {
        [&request.owner, &self.lease_until, &self.now, &self.lease_now, &self.tags, &self.limit]
    }
}

fn tags(workflows: &[WorkflowKey]) -> Vec<String> {
    workflows.iter().map(WorkflowKey::tag).collect()
}

/// Journal rows as column arrays, the shape `unnest` takes them in.
#[derive(Default)]
struct JournalColumns<'a> {
    run_ids: Vec<&'a str>,
    seqs: Vec<i64>,
    ats: Vec<i64>,
    kinds: Vec<&'static str>,
    paths: Vec<Option<&'a str>>,
    data: Vec<String>,
}

impl<'a> JournalColumns<'a> {
    /// The six columns as statement parameters, in the order [`journal_cte`] binds them.
    fn params(&self) -> [&(dyn ToSql + Sync); 6] {
        [&self.run_ids, &self.seqs, &self.ats, &self.kinds, &self.paths, &self.data]
    }

    /// Adds `events` of `run_id` as entries `after_seq + 1…`.
    fn push(&mut self, run_id: &'a RunId, after_seq: u64, at: Timestamp, events: &'a [Event]) {
        for (i, event) in events.iter().enumerate() {
            self.run_ids.push(run_id.as_str());
            self.seqs.push((after_seq + 1 + i as u64) as i64);
            self.ats.push(at.as_millis());
            self.kinds.push(event.kind_name());
            self.paths.push(event.path().map(|p| p.as_str()));
            self.data.push(event.to_json());
        }
    }

    fn of(run_id: &'a RunId, after_seq: u64, at: Timestamp, events: &'a [Event]) -> Self {
        let mut columns = JournalColumns::default();
        columns.push(run_id, after_seq, at, events);
        columns
    }
}

/// Inserts `events` as journal entries `after_seq + 1…` in one statement.
async fn insert_events(
    client: &impl GenericClient,
    sql: &Sql,
    run_id: &RunId,
    after_seq: u64,
    at: Timestamp,
    events: &[Event],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let rows = JournalColumns::of(run_id, after_seq, at, events);
    let statement = client.prepare_cached(&sql.insert_events).await.map_err(backend)?;
    client
        .execute(&statement, &[&run_id.as_str(), &at.as_millis(), &rows.seqs, &rows.kinds, &rows.paths, &rows.data])
        .await
        .map_err(backend)?;
    Ok(())
}

impl PostgresStore {
    /// Connects, creates the schema if needed and applies pending migrations. Safe when several
    /// processes start at once: migrations run under a transaction-scoped advisory lock.
    pub async fn connect(options: PostgresOptions) -> Result<PostgresStore, StoreError> {
        if !valid_schema_name(&options.schema) {
            return Err(StoreError::InvalidInput(format!(
                "schema name {:?} must be letters, digits and `_`, starting with a letter or `_`",
                options.schema
            )));
        }
        let config: tokio_postgres::Config =
            options.url.parse().map_err(|e| StoreError::InvalidInput(format!("database URL: {e}")))?;
        let manager =
            Manager::from_config(config.clone(), NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager).max_size(options.pool_size.max(1)).build().map_err(backend)?;
        let sql = Arc::new(Sql::new(&options.schema));
        let (jobs, queue) = mpsc::unbounded_channel();
        let store = PostgresStore {
            pool: pool.clone(),
            sql: Arc::clone(&sql),
            jobs,
            config,
            wakeups: Arc::new(Wakeups::new()),
            alive: Arc::new(()),
        };
        store.migrate().await?;
        tokio::spawn(maintain(pool.clone(), Arc::clone(&sql), Arc::downgrade(&store.alive)));
        tokio::spawn(writer(pool, sql, queue));
        Ok(store)
    }

    /// Starts listening on the schema's channel, once.
    fn listen(&self) {
        self.wakeups.task.get_or_init(|| {
            let listener = listen(self.config.clone(), self.sql.schema.clone(), Arc::downgrade(&self.wakeups));
            tokio::spawn(listener).abort_handle()
        });
    }

    /// The schema holding Cairn's tables.
    pub fn schema(&self) -> &str {
        &self.sql.schema
    }

    /// The median time, in microseconds, of `commits` one-row `INSERT` transactions (one round
    /// trip each, `BEGIN`/`COMMIT` included) into a scratch table of this schema: the floor a
    /// durable step cannot go below on this server. Used by `cairn bench`.
    pub async fn commit_floor_us(&self, commits: usize) -> Result<f64, StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        let table = format!("\"{}\".floor", self.sql.schema);
        client
            .batch_execute(&format!("CREATE TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY, value TEXT NOT NULL)"))
            .await
            .map_err(backend)?;
        let mut samples = Vec::with_capacity(commits);
        for i in 0..commits.max(1) {
            let start = std::time::Instant::now();
            client
                .batch_execute(&format!("BEGIN; INSERT INTO {table} VALUES ({i}, '{{\"step\":1}}'); COMMIT;"))
                .await
                .map_err(backend)?;
            samples.push(start.elapsed().as_secs_f64() * 1e6);
        }
        client.batch_execute(&format!("DROP TABLE {table}")).await.map_err(backend)?;
        samples.sort_by(f64::total_cmp);
        Ok(samples[samples.len() / 2])
    }

    /// The plan PostgreSQL runs for a claim like `request`, executed (`EXPLAIN (ANALYZE,
    /// BUFFERS)`, with the time each step took) in a transaction that is then rolled back, so
    /// nothing is claimed. Used by `cairn bench`.
    pub async fn explain_claim(&self, request: &ClaimRequest) -> Result<Vec<String>, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let values = ClaimValues::of(request);
        let explain = format!("EXPLAIN (ANALYZE, BUFFERS) {}", self.sql.claim);
        let plan = tx.query(&explain, &values.params(request)).await.map_err(backend)?;
        tx.rollback().await.map_err(backend)?;
        plan.iter().map(|row| row.try_get::<_, String>(0).map_err(backend)).collect()
    }

    /// How often each statement has run in this database so far, from `pg_stat_statements`, for
    /// the statements that name this store's schema and for transaction control (`BEGIN`,
    /// `COMMIT`, …, whoever sent them); `None` when the extension is not installed here. Taken
    /// before and after a workload, the difference counts its statements; since Cairn never
    /// pipelines, each statement is also one round trip. Used by `cairn bench`.
    pub async fn statement_calls(&self) -> Result<Option<Vec<(String, i64)>>, StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        let installed = client
            .query_one("SELECT to_regclass('pg_stat_statements') IS NOT NULL", &[])
            .await
            .map_err(backend)?
            .try_get::<_, bool>(0)
            .map_err(backend)?;
        if !installed {
            return Ok(None);
        }
        let rows = client
            .query(
                "SELECT query, sum(calls)::bigint FROM pg_stat_statements
                 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND (strpos(query, $1) > 0 OR query LIKE '%pg_notify%' OR query ~* '^\\s*(BEGIN|START TRANSACTION|COMMIT|ROLLBACK)')
                 GROUP BY query",
                &[&format!("\"{}\"", self.sql.schema)],
            )
            .await
            // Installed but not loaded (`shared_preload_libraries`): no counts.
            .ok();
        let Some(rows) = rows else { return Ok(None) };
        rows.iter()
            .map(|row| Ok((row.try_get(0).map_err(backend)?, row.try_get(1).map_err(backend)?)))
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// Drops this store's schema and everything in it. For benchmarks and tests that made a
    /// schema of their own; never call it on a schema that holds runs you want.
    pub async fn drop_schema(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        client.batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.sql.schema)).await.map_err(backend)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let schema = format!("\"{}\"", self.sql.schema);
        let tx = client.transaction().await.map_err(backend)?;
        // One lock for all of Cairn's migrations in this database, held until commit.
        tx.batch_execute("SELECT pg_advisory_xact_lock(7171171717)").await.map_err(backend)?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             CREATE TABLE IF NOT EXISTS {schema}.migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());"
        ))
        .await
        .map_err(backend)?;
        let row = tx
            .query_one(&format!("SELECT coalesce(max(version), 0) FROM {schema}.migrations"), &[])
            .await
            .map_err(backend)?;
        let current: i32 = row.try_get(0).map_err(backend)?;
        let known = MIGRATIONS.len() as i32;
        if current > known {
            return Err(StoreError::Backend(format!(
                "schema {schema} is at migration {current}; this build knows {known}: upgrade Cairn"
            )));
        }
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            tx.batch_execute(&migration.replace("{schema}", &schema)).await.map_err(backend)?;
            tx.execute(&format!("INSERT INTO {schema}.migrations (version) VALUES ($1)"), &[&(index as i32 + 1)])
                .await
                .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }
}

/// Tells every listening worker, at commit, that runs may have become ready (`payload` empty,
/// or [`SIGNALLED`] and the run's id).
async fn notify(client: &impl GenericClient, sql: &Sql, payload: &str) -> Result<(), StoreError> {
    let statement = client.prepare_cached(&sql.notify).await.map_err(backend)?;
    client.execute(&statement, &[&sql.schema, &payload]).await.map_err(backend)?;
    Ok(())
}

/// Tells every listening process that these runs ended (after they committed; a report lost to a
/// crash here only makes waiters fall back to reading the store).
async fn notify_ended(client: &impl GenericClient, sql: &Sql, ids: &[RunId]) {
    if ids.is_empty() {
        return;
    }
    let Ok(statement) = client.prepare_cached(&sql.notify).await else { return };
    let mut payload = String::from(ENDED);
    for (i, id) in ids.iter().enumerate() {
        payload.push('\n');
        payload.push_str(id.as_str());
        if i + 1 == ids.len() || payload.len() + ids[i + 1].as_str().len() >= ENDED_PAYLOAD {
            let _ = client.execute(&statement, &[&sql.schema, &payload]).await;
            payload.truncate(ENDED.len());
        }
    }
}

/// Keeps a connection listening on the schema's channel and bumps the wake-up counter on each
/// notification (and once after every (re)connection, since notifications sent meanwhile were
/// missed). The connection is driven here, so aborting this task closes it; it also ends when
/// the last store clone is gone.
async fn listen(config: tokio_postgres::Config, channel: String, wakeups: std::sync::Weak<Wakeups>) {
    // `false` once the stores are gone.
    let deliver = |payload: Option<&str>| match wakeups.upgrade() {
        Some(wakeups) => {
            match payload {
                Some(payload) => wakeups.received(payload),
                // (Re)connected: anything may have happened meanwhile.
                None => {
                    wakeups.bump();
                    let _ = wakeups.notices.send(Notice::Missed);
                }
            }
            true
        }
        None => false,
    };
    loop {
        if let Ok((client, mut connection)) = config.connect(NoTls).await {
            let statement = format!("LISTEN \"{channel}\"");
            let listen = client.batch_execute(&statement);
            tokio::pin!(listen);
            let mut listening = false;
            loop {
                tokio::select! {
                    done = &mut listen, if !listening => {
                        if done.is_err() || !deliver(None) {
                            break;
                        }
                        listening = true;
                    }
                    message = std::future::poll_fn(|cx| connection.poll_message(cx)) => match message {
                        Some(Ok(AsyncMessage::Notification(note))) => {
                            if !deliver(Some(note.payload())) {
                                return;
                            }
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    },
                }
            }
        }
        if wakeups.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Creates `runs` (distinct ids) in one statement on `client` (a connection or an open
/// transaction); per run, the run or why it was refused. A run whose idempotency key is taken
/// comes back as the existing run with `created: false`.
async fn create_batch(
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
                    let row = client.query_opt(&statement, &[&run.workflow, key]).await.map_err(backend)?;
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
async fn flow_places(
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
fn placed(
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
async fn append_one(client: &impl GenericClient, sql: &Sql, append: &Append) -> Result<(), StoreError> {
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
async fn refusal(client: &impl GenericClient, sql: &Sql, append: &Append) -> Result<StoreError, StoreError> {
    let statement = client.prepare_cached(&sql.refusal).await.map_err(backend)?;
    let row = client.query_opt(&statement, &[&append.run_id.as_str()]).await.map_err(backend)?;
    let run_id = append.run_id.clone();
    Ok(match row {
        None => StoreError::RunNotFound(run_id),
        Some(row) => {
            let current = row.try_get::<_, i64>(0).map_err(backend)? as u64;
            let actual = row.try_get::<_, i64>(1).map_err(backend)? as u64;
            if current != append.epoch {
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
async fn journal_range(
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
async fn writer(pool: Pool, sql: Arc<Sql>, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut pending: VecDeque<Job> = VecDeque::new();
    // Runs with a job in a round under way: their next jobs wait, so each run's writes keep
    // their order and concurrent rounds never touch the same rows.
    let mut busy: HashSet<RunId> = HashSet::new();
    let mut rounds: tokio::task::JoinSet<Vec<RunId>> = tokio::task::JoinSet::new();
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
                rounds.spawn(round.commit(pool.clone(), Arc::clone(&sql)));
                continue;
            }
        }
        if !open && rounds.is_empty() && pending.is_empty() {
            return;
        }
        tokio::select! {
            Some(done) = rounds.join_next(), if !rounds.is_empty() => {
                // A round that panicked leaves its runs busy; their callers see the writer gone.
                if let Ok(runs) = done {
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
fn follows(earlier: &Append, next: &Append) -> bool {
    earlier.epoch == next.epoch
        && next.after_seq == earlier.after_seq + earlier.events.len() as u64
        && matches!(earlier.update, RunUpdate::Progress)
        && matches!(next.update, RunUpdate::Progress | RunUpdate::Finish { .. })
        && earlier.consume_signal.is_none()
        && next.consume_signal.is_none()
}

/// How often the ended-status deltas are folded into their counters in the background.
const FOLD_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// Every how many folds the deltas table is vacuumed.
const VACUUM_EVERY_FOLDS: u32 = 5;

/// Folds the ended-status deltas into their counters every [`FOLD_EVERY`] and vacuums their
/// table now and then, until the store is dropped: `workflow_counts` then never has many deltas
/// to fold, nor the dead rows of folded ones to skip (1,000,000 runs ending unread made its first
/// call 1.4 s and later ones 300 ms, until autovacuum came by).
async fn maintain(pool: Pool, sql: Arc<Sql>, alive: std::sync::Weak<()>) {
    let mut folds = 0u32;
    loop {
        tokio::time::sleep(FOLD_EVERY).await;
        if alive.strong_count() == 0 {
            return;
        }
        let Ok(mut client) = pool.get().await else { continue };
        let folded = match client.prepare_cached(&sql.fold_ended_counts).await {
            Ok(statement) => client.execute(&statement, &[]).await.map(drop),
            Err(error) => Err(error),
        };
        // Counting marks the dead index entries it meets, so the next count skips them.
        let folded = match folded {
            Ok(()) => status_counts(&mut client, &sql).await.map(drop),
            Err(error) => Err(error),
        };
        folds += 1;
        let vacuumed = if folds.is_multiple_of(VACUUM_EVERY_FOLDS) {
            client.batch_execute(&sql.vacuum_deltas).await
        } else {
            Ok(())
        };
        if let Err(error) = folded.and(vacuumed) {
            // A schema being dropped (tests, benches) or a server going away: the next round retries.
            tracing::debug!("cairn-postgres maintenance: {error}");
        }
    }
}

/// The rows of `sql.workflow_counts`. Through plain index scans, not bitmap ones: a plain scan
/// marks the dead entries it meets in the unended statuses' partial indexes (every run passes
/// through `pending` and `running`, so until autovacuum comes by those indexes hold an entry per
/// run that ever had the status), and later counts skip them; bitmap scans visit them every time
/// (200,000 runs just ended: 147 ms a count, then 20 ms; with bitmap scans 20 ms every time).
async fn status_counts(
    client: &mut deadpool_postgres::Client,
    sql: &Sql,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.batch_execute("SET LOCAL enable_bitmapscan = off").await?;
    let statement = tx.prepare_cached(&sql.workflow_counts).await?;
    let rows = tx.query(&statement, &[]).await?;
    tx.commit().await?;
    Ok(rows)
}

/// Rounds committing at once: while one waits for PostgreSQL, the next is gathered and sent.
const ROUNDS_IN_FLIGHT: usize = 2;

/// The jobs of one round, each with where its outcome goes.
#[derive(Default)]
struct Round {
    creates: Vec<(NewRun, Reply<CreatedRun>)>,
    /// Each append with its callers: more than one where later appends of a run were merged in.
    appends: Vec<(Append, Vec<Reply<()>>)>,
}

impl Round {
    fn is_empty(&self) -> bool {
        self.creates.is_empty() && self.appends.is_empty()
    }

    /// Commits the round (one transaction; a lone job in one statement; each job alone if the
    /// transaction failed), answers its callers, reports the runs that ended, and gives back the
    /// ids of its runs.
    async fn commit(self, pool: Pool, sql: Arc<Sql>) -> Vec<RunId> {
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
type RoundOutcomes = (Vec<Result<CreatedRun, StoreError>>, Vec<Result<(), StoreError>>);

/// Each job in its own statement (and so its own transaction).
async fn each_alone(pool: &Pool, sql: &Sql, runs: &[&NewRun], appends: &[&Append]) -> RoundOutcomes {
    let mut created = Vec::with_capacity(runs.len());
    for run in runs {
        let outcome = match pool.get().await {
            Ok(client) => create_batch(&client, sql, &[run]).await.and_then(|mut one| {
                one.pop().unwrap_or_else(|| Err(StoreError::Backend("a create came back without an outcome".into())))
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

/// One round in one transaction; `Err` means it was rolled back and nothing was written.
async fn commit_round(
    pool: &Pool,
    sql: &Sql,
    runs: &[&NewRun],
    round: &[&Append],
) -> Result<RoundOutcomes, StoreError> {
    let mut client = pool.get().await.map_err(backend)?;
    let tx = client.transaction().await.map_err(backend)?;
    let created = if runs.is_empty() { Vec::new() } else { create_batch(&tx, sql, runs).await? };
    // Progress and finishing appends that consume no signal go in one batched statement.
    let batchable = |a: &Append| {
        matches!(a.update, RunUpdate::Progress | RunUpdate::Finish { .. })
            && a.consume_signal.is_none()
            && !a.events.iter().any(|e| e.deletion().is_some())
    };
    let batch: Vec<&Append> = round.iter().copied().filter(|a| batchable(a)).collect();
    let mut applied: HashSet<String> = HashSet::new();
    if !batch.is_empty() {
        let ids: Vec<&str> = batch.iter().map(|a| a.run_id.as_str()).collect();
        let epochs: Vec<i64> = batch.iter().map(|a| a.epoch as i64).collect();
        let afters: Vec<i64> = batch.iter().map(|a| a.after_seq as i64).collect();
        let lasts: Vec<i64> = batch.iter().map(|a| (a.after_seq + a.events.len() as u64) as i64).collect();
        let ats: Vec<i64> = batch.iter().map(|a| a.at.as_millis()).collect();
        let (mut finishes, mut statuses, mut outputs, mut errors, mut completions) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for append in &batch {
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
        for append in &batch {
            rows.push(&append.run_id, append.after_seq, append.at, &append.events);
        }
        let statement = tx.prepare_cached(&sql.append_batch).await.map_err(backend)?;
        let runs_params: [&(dyn ToSql + Sync); 5] = [&ids, &epochs, &afters, &lasts, &ats];
        let ends: [&(dyn ToSql + Sync); 5] = [&finishes, &statuses, &outputs, &errors, &completions];
        let params: Vec<&(dyn ToSql + Sync)> = runs_params.into_iter().chain(rows.params()).chain(ends).collect();
        let rows = tx.query(&statement, &params).await.map_err(backend)?;
        for row in rows {
            applied.insert(row.try_get::<_, String>(0).map_err(backend)?);
        }
    }
    let mut outcomes = Vec::with_capacity(round.len());
    for append in round {
        let outcome = if batchable(append) {
            if applied.contains(append.run_id.as_str()) { Ok(()) } else { Err(refusal(&tx, sql, append).await?) }
        } else {
            match append_one(&tx, sql, append).await {
                Err(StoreError::Backend(message)) => return Err(StoreError::Backend(message)),
                other => other,
            }
        };
        outcomes.push(outcome);
    }
    tx.commit().await.map_err(backend)?;
    Ok((created, outcomes))
}

/// Locks run `id` for the rest of the transaction; refused if it does not exist or has ended.
async fn lock_unfinished(tx: &impl GenericClient, sql: &Sql, id: &RunId) -> Result<RunRecord, StoreError> {
    let run = lock_run(tx, sql, id).await?;
    if run.status.is_terminal() {
        return Err(StoreError::RunFinished { run_id: id.clone(), status: run.status });
    }
    Ok(run)
}

/// Buffers `signal` for its run (locked by the caller, and unfinished) in transaction `tx`, waking
/// the run if it waits, and tells listening processes at commit.
async fn insert_signal(tx: &impl GenericClient, sql: &Sql, signal: &NewSignal) -> Result<SignalId, StoreError> {
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
async fn lock_run(tx: &impl GenericClient, sql: &Sql, id: &RunId) -> Result<RunRecord, StoreError> {
    let statement = tx.prepare_cached(&sql.lock_run).await.map_err(backend)?;
    let row = tx.query_opt(&statement, &[&id.as_str()]).await.map_err(backend)?;
    row.as_ref().map(row_to_run).transpose()?.ok_or_else(|| StoreError::RunNotFound(id.clone()))
}

impl PostgresStore {
    async fn cancel_inner(&self, request: ControlRequest) -> Result<CancelOutcome, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        let run = lock_unfinished(&tx, sql, &request.run_id).await?;
        let live = run.is_held_at(request.lease_now);
        if live {
            let statement = tx.prepare_cached(&sql.request_cancel).await.map_err(backend)?;
            tx.execute(&statement, &[&request.run_id.as_str()]).await.map_err(backend)?;
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

    async fn pause_inner(&self, request: ControlRequest) -> Result<PauseOutcome, StoreError> {
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
            tx.execute(&statement, &[&request.run_id.as_str()]).await.map_err(backend)?;
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

    async fn resume_inner(&self, request: ResumeRequest) -> Result<(), StoreError> {
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

    async fn signal_inner(&self, mut signal: NewSignal) -> Result<SignalId, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let mut target = lock_run(&tx, &self.sql, &signal.run_id).await?;
        // A run that continued as a fresh one: the signal goes to the newest of its chain (each
        // locked in turn, so a hand-over under way finishes first and its signals move with it).
        while let (RunStatus::Continued, Some(next)) = (target.status, &target.continued_as) {
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
    async fn debounce_inner(&self, run: NewRun) -> Result<CreatedRun, StoreError> {
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
            &run.workflow,
            &(run.version as i32),
            &record.wake_at.map(Timestamp::as_millis),
            &run.input.get(),
            &run.created_at.as_millis(),
            &run.deadline.map(Timestamp::as_millis),
            &run.retention_ms(),
            &run.priority,
            &run.fairness_key.as_deref().unwrap_or_default(),
            &debounce.key,
            &record.debounce_until.map(Timestamp::as_millis),
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
    async fn fire_inner(&self, fire: FireSchedule) -> Result<Option<Vec<CreatedRun>>, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let sql = &self.sql;
        let statement = tx.prepare_cached(&sql.fire_schedule).await.map_err(backend)?;
        let (next, last) = (fire.next_fire_at.map(Timestamp::as_millis), fire.last_fired_at.map(Timestamp::as_millis));
        let params: [&(dyn ToSql + Sync); 5] = [&fire.name, &fire.due.as_millis(), &next, &last, &fire.now.as_millis()];
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
    async fn continue_inner(&self, append: Append, successor: NewRun) -> Result<(), StoreError> {
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
    async fn change_rule(
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
    async fn start_with_signal_inner(
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
            &run.workflow,
            &(run.version as i32),
            &run.input.get(),
            &run.idempotency_key,
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
                    let row = tx.query_opt(&statement, &[&run.workflow, key]).await.map_err(backend)?;
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

    /// One lease extended by itself (waiting for the row if need be): whether it is held, and
    /// whether a cancellation and a pause were requested.
    async fn heartbeat_one(
        &self,
        client: &impl GenericClient,
        run_id: &RunId,
        epoch: u64,
        request: &HeartbeatRequest,
    ) -> Result<(bool, bool, bool), StoreError> {
        let beat = client.prepare_cached(&self.sql.heartbeat).await.map_err(backend)?;
        let params: [&(dyn ToSql + Sync); 4] =
            [&request.lease_until.as_millis(), &run_id.as_str(), &(epoch as i64), &request.owner];
        if let Some(row) = client.query_opt(&beat, &params).await.map_err(backend)? {
            return Ok((true, row.try_get(0).map_err(backend)?, row.try_get(1).map_err(backend)?));
        }
        let flags = client.prepare_cached(&self.sql.flags).await.map_err(backend)?;
        match client.query_opt(&flags, &[&run_id.as_str()]).await.map_err(backend)? {
            Some(row) => Ok((false, row.try_get(0).map_err(backend)?, row.try_get(1).map_err(backend)?)),
            None => Ok((false, false, false)),
        }
    }

    async fn query_runs(&self, text: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<RunRecord>, StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        let statement = client.prepare_cached(text).await.map_err(backend)?;
        let rows = client.query(&statement, params).await.map_err(backend)?;
        rows.iter().map(row_to_run).collect()
    }
}

/// The outcome of a job handed to the writer task.
async fn writer_outcome<T>(
    sent: Result<(), mpsc::error::SendError<Job>>,
    outcome: oneshot::Receiver<Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let stopped = || StoreError::Backend("the PostgreSQL writer task has stopped".into());
    sent.map_err(|_| stopped())?;
    outcome.await.map_err(|_| stopped())?
}

impl Store for PostgresStore {
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
            let status = filter.status.map(RunStatus::as_str);
            let cursor = filter.cursor.as_ref().map(|c| (c.created_at.as_millis(), c.id.as_str()));
            let (after, before) =
                (filter.created_after.map(Timestamp::as_millis), filter.created_before.map(Timestamp::as_millis));
            let restarted_from = filter.restarted_from.as_ref().map(RunId::as_str);
            let parent = filter.parent.as_ref().map(RunId::as_str);
            let (stranded, input) = (filter.stranded_tags(), filter.input_json());
            let limit = (size + 1) as i64;
            let mut conditions: Vec<String> = Vec::new();
            let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
            // A condition over the next parameter number(s), and the parameters' values.
            macro_rules! add {
                ($condition:expr, $($value:expr),+) => {{
                    conditions.push($condition(params.len() + 1));
                    $(params.push($value);)+
                }};
            }
            if let Some(workflow) = &filter.workflow {
                add!(|n| format!("workflow = ${n}"), workflow);
            }
            // A literal (one of a fixed set), so a partial index on that status can serve it.
            if let Some(status) = &status {
                conditions.push(format!("status = '{status}'"));
            }
            if let Some(after) = &after {
                add!(|n| format!("created_at >= ${n}"), after);
            }
            if let Some(before) = &before {
                add!(|n| format!("created_at < ${n}"), before);
            }
            if let Some((at, id)) = &cursor {
                add!(|n| format!("(created_at, id) < (${n}, ${}::text)", n + 1), at, id);
            }
            if let Some(parent) = &parent {
                add!(|n| format!("parent = ${n}"), parent);
            }
            if let Some(original) = &restarted_from {
                add!(|n| format!("restarted_from = ${n}"), original);
            }
            if let Some(tags) = &stranded {
                let condition = |n: usize| {
                    format!(
                        "status IN ('pending', 'running', 'suspended') AND NOT (workflow || '@' || version) = ANY(${n})"
                    )
                };
                add!(condition, tags);
            }
            if let Some(needle) = &input {
                add!(|n| format!("input::jsonb @> (${n}::text)::jsonb"), needle);
            }
            let conditions =
                if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) };
            params.push(&limit);
            let text =
                format!("{}{conditions} ORDER BY created_at DESC, id DESC LIMIT ${}", self.sql.list, params.len());
            let runs = self.query_runs(&text, &params).await?;
            Ok(RunPage::cut(runs, size))
        })
    }

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
            let second = second.await.map_err(|e| StoreError::Backend(format!("reading a journal: {e}")))??;
            entries.extend(second);
            Ok(entries)
        })
    }

    fn signals<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<SignalRecord>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.signals).await.map_err(backend)?;
            let rows = client.query(&statement, &[&id.as_str()]).await.map_err(backend)?;
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

    fn claim<'a>(&'a self, request: &'a ClaimRequest) -> StoreFuture<'a, Vec<RunRecord>> {
        Box::pin(async move {
            let values = ClaimValues::of(request);
            self.query_runs(&self.sql.claim, &values.params(request)).await
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

    fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let until = request.lease_until.as_millis();
            let ids: Vec<&str> = request.runs.iter().map(|(id, _)| id.as_str()).collect();
            let epochs: Vec<i64> = request.runs.iter().map(|(_, epoch)| *epoch as i64).collect();
            let batch = client.prepare_cached(&self.sql.heartbeat_batch).await.map_err(backend)?;
            let rows = client.query(&batch, &[&until, &ids, &epochs, &request.owner]).await.map_err(backend)?;
            let mut answered = std::collections::HashMap::with_capacity(rows.len());
            for row in &rows {
                let id: String = row.try_get(0).map_err(backend)?;
                let flags = (
                    row.try_get(1).map_err(backend)?,
                    row.try_get(2).map_err(backend)?,
                    row.try_get(3).map_err(backend)?,
                );
                answered.insert(id, flags);
            }
            let mut out = Vec::with_capacity(request.runs.len());
            for (run_id, epoch) in &request.runs {
                let (held, cancel_requested, pause_requested) = match answered.get(run_id.as_str()) {
                    Some(answer) => *answer,
                    None => self.heartbeat_one(&client, run_id, *epoch, request).await?,
                };
                out.push(LeaseStatus { run_id: run_id.clone(), held, cancel_requested, pause_requested });
            }
            Ok(out)
        })
    }

    fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId> {
        Box::pin(self.signal_inner(signal))
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

    fn wakeups(&self) -> Option<watch::Receiver<u64>> {
        self.listen();
        Some(self.wakeups.sender.subscribe())
    }

    fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        self.listen();
        Some(self.wakeups.notices.subscribe())
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
            rows.iter().map(|row| row.try_get::<_, String>(0).map(RunId::new).map_err(backend)).collect()
        })
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
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.workers).await.map_err(backend)?;
            let rows = client.query(&statement, &[]).await.map_err(backend)?;
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
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.subscriptions).await.map_err(backend)?;
            let rows = client.query(&statement, &[]).await.map_err(backend)?;
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
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.version_counts).await.map_err(backend)?;
            let rows = client.query(&statement, &[]).await.map_err(backend)?;
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

    fn put_schedule<'a>(&'a self, put: &'a PutSchedule) -> StoreFuture<'a, ScheduleRecord> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.put_schedule).await.map_err(backend)?;
            let next = put.next_fire_at.map(Timestamp::as_millis);
            let params: [&(dyn ToSql + Sync); 6] =
                [&put.name, &put.workflow, &put.spec, &put.input.get(), &next, &put.now.as_millis()];
            row_to_schedule(&client.query_one(&statement, &params).await.map_err(backend)?)
        })
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<ScheduleRecord>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.schedules).await.map_err(backend)?;
            client.query(&statement, &[]).await.map_err(backend)?.iter().map(row_to_schedule).collect()
        })
    }

    fn due_schedules<'a>(
        &'a self,
        workflows: &'a [String],
        now: Timestamp,
        limit: usize,
    ) -> StoreFuture<'a, Vec<ScheduleRecord>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.due_schedules).await.map_err(backend)?;
            let params: [&(dyn ToSql + Sync); 3] = [&now.as_millis(), &workflows, &(limit as i64)];
            client.query(&statement, &params).await.map_err(backend)?.iter().map(row_to_schedule).collect()
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
            let client = self.pool.get().await.map_err(backend)?;
            let statement = client.prepare_cached(&self.sql.rules).await.map_err(backend)?;
            let rows = client.query(&statement, &[]).await.map_err(backend)?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
mod tests {
    use crate::PostgresStore;
    use crate::testing::{raw_client, test_store};
    use cairn_journal::Timestamp;
    use cairn_store::{ClaimRequest, NewRun, RunId, RunRecord, Store, WorkflowKey};

    /// Creates runs `ids` of workflow `w` and claims them for owner `me`, leased until `lease_until`.
    async fn claimed(store: &PostgresStore, ids: &[&str], lease_until: i64) -> Vec<RunRecord> {
        let t = Timestamp::from_millis;
        for id in ids {
            let input = serde_json::value::RawValue::from_string("{}".to_owned()).unwrap();
            let new = NewRun::new(RunId::new(*id), "w", 1, input, t(1));
            store.create_run(new).await.unwrap();
        }
        let claim = ClaimRequest {
            owner: "me".into(),
            workflows: vec![WorkflowKey { name: "w".into(), version: 1 }],
            now: t(10),
            lease_now: t(10),
            lease_until: t(lease_until),
            limit: ids.len(),
        };
        let runs = store.claim(&claim).await.unwrap();
        assert_eq!(runs.len(), ids.len());
        runs
    }

    /// A signal committed while a suspending append waits for the run's row (so after the
    /// append's snapshot was taken) still wakes the run: the race a signal sender and a run that
    /// starts waiting can run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_signal_racing_a_suspend_still_wakes_the_run() {
        use cairn_journal::SignalId;
        use cairn_store::{Append, RunUpdate, SuspendReason};
        let Some((store, schema)) = test_store("signal_race").await else { return };
        let t = Timestamp::from_millis;
        let id = RunId::new("raced");
        let run = claimed(&store, &["raced"], 1_000_000).await.remove(0);
        // The signal sender holds the run's row (as `send_signal` does) …
        let sender = raw_client(&schema.url).await;
        let s = format!("\"{}\"", schema.name);
        sender.batch_execute(&format!("BEGIN; SELECT 1 FROM {s}.runs WHERE id = 'raced' FOR UPDATE")).await.unwrap();
        // … while the run suspends to wait: its statement queues behind the lock.
        let suspend = Append {
            run_id: id.clone(),
            epoch: run.epoch,
            after_seq: run.last_seq,
            events: Vec::new(),
            at: t(20),
            update: RunUpdate::Suspend {
                reason: SuspendReason::Waiting,
                wake_at: Some(t(3_600_000)),
                signals_after: Some(SignalId(0)),
                now: t(20),
            },
            consume_signal: None,
            batched: false,
        };
        let appended = tokio::spawn({
            let store = store.clone();
            async move { store.append(suspend).await }
        });
        let mut polls = 0;
        loop {
            let waiting: i64 = sender
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0",
                    &[&s],
                )
                .await
                .unwrap()
                .get(0);
            if waiting > 0 {
                break;
            }
            polls += 1;
            assert!(polls < 500, "the suspending statement never waited for the row");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // The signal commits now, after the suspend's snapshot, before it gets the row.
        sender
            .batch_execute(&format!(
                "INSERT INTO {s}.signals (run_id, name, payload, sent_at) VALUES ('raced', 'go', '{{}}', 15); COMMIT"
            ))
            .await
            .unwrap();
        appended.await.unwrap().unwrap();
        let stored = store.get_run(&id).await.unwrap().unwrap();
        assert_eq!(stored.wake_at, Some(t(20)), "the signal must wake the run at once");
    }

    /// A heartbeat never waits for one run's row while holding others: rows another transaction
    /// holds are skipped by the batched statement (whose other leases are extended and committed
    /// at once) and extended one by one afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn heartbeats_skip_rows_held_elsewhere_then_extend_them() {
        use cairn_store::HeartbeatRequest;
        let Some((store, schema)) = test_store("heartbeat_skip").await else { return };
        let t = Timestamp::from_millis;
        let runs: Vec<(RunId, u64)> =
            claimed(&store, &["held", "free"], 1_000).await.into_iter().map(|r| (r.id, r.epoch)).collect();
        let other = raw_client(&schema.url).await;
        let s = format!("\"{}\"", schema.name);
        other.batch_execute(&format!("BEGIN; SELECT 1 FROM {s}.runs WHERE id = 'held' FOR UPDATE")).await.unwrap();
        let beat = tokio::spawn({
            let store = store.clone();
            let request = HeartbeatRequest { owner: "me".into(), runs, lease_until: t(2_000_000) };
            async move { store.heartbeat(&request).await }
        });
        let lease = async |id: &str| -> Option<i64> {
            let query = format!("SELECT lease_expires_at FROM {s}.runs WHERE id = $1");
            other.query_one(&query, &[&id]).await.unwrap().get(0)
        };
        // The free run's lease is extended (and committed) while the held one is still waited for.
        let mut polls = 0;
        while lease("free").await != Some(2_000_000) {
            polls += 1;
            assert!(polls < 500, "the free run's lease was not extended while another row was held");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(!beat.is_finished(), "the held run cannot have been extended yet");
        other.batch_execute("COMMIT").await.unwrap();
        let statuses = beat.await.unwrap().unwrap();
        assert!(statuses.iter().all(|s| s.held && !s.cancel_requested), "{statuses:?}");
        assert_eq!(lease("held").await, Some(2_000_000));
    }

    /// Two sweepers on one database (two stores, as two workers) delete every prunable run
    /// exactly once between them, and neither waits for a row another session holds: it skips it,
    /// and a later sweep takes it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_sweepers_delete_each_run_once_and_skip_held_rows() {
        use cairn_store::PruneRequest;
        let Some((store, schema)) = test_store("sweepers").await else { return };
        let other_store =
            crate::PostgresStore::connect(crate::PostgresOptions::new(&schema.url).schema(&schema.name)).await.unwrap();
        let s = format!("\"{}\"", schema.name);
        let setup = raw_client(&schema.url).await;
        setup
            .batch_execute(&format!(
                "INSERT INTO {s}.runs (id, workflow, version, status, input, created_at, updated_at, completed_at,
                     last_seq, delete_after)
                 SELECT 'r' || lpad(g::text, 5, '0'), 'w', 1, 'completed', '{{}}', 1, 1, 2, 2, 10
                 FROM generate_series(1, 3000) g;
                 INSERT INTO {s}.journal (run_id, seq, at, kind, data)
                 SELECT id, seq, 1, 'started', '{{}}' FROM {s}.runs, generate_series(1, 2) seq;
                 INSERT INTO {s}.signals (run_id, name, payload, sent_at) SELECT id, 'x', '1', 1 FROM {s}.runs;"
            ))
            .await
            .unwrap();
        // Another session holds one of them (as a sweeper mid-batch would).
        let locker = raw_client(&schema.url).await;
        locker.batch_execute(&format!("BEGIN; SELECT 1 FROM {s}.runs WHERE id = 'r00007' FOR UPDATE")).await.unwrap();
        let sweep = |store: crate::PostgresStore| async move {
            let mut deleted = Vec::new();
            loop {
                let request =
                    PruneRequest { now: Timestamp::from_millis(100), ended_before: None, limit: 100, dry_run: false };
                let batch = store.prune(request).await.unwrap();
                if batch.is_empty() {
                    return deleted;
                }
                deleted.extend(batch);
            }
        };
        // The bound only turns a sweeper waiting for the held row (a hang) into a failure.
        let both = async { tokio::join!(tokio::spawn(sweep(store.clone())), tokio::spawn(sweep(other_store))) };
        let (a, b) = tokio::time::timeout(std::time::Duration::from_secs(120), both)
            .await
            .expect("a sweeper waited for a row another session holds");
        let mut all: Vec<RunId> = a.unwrap().into_iter().chain(b.unwrap()).collect();
        let total = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), total, "a run was deleted by both sweepers");
        assert_eq!(total, 2_999, "every run but the held one");
        assert!(!all.contains(&RunId::new("r00007")));
        locker.batch_execute("COMMIT").await.unwrap();
        assert_eq!(sweep(store.clone()).await, [RunId::new("r00007")]);
        for table in ["runs", "journal", "signals"] {
            let left: i64 = setup.query_one(&format!("SELECT count(*) FROM {s}.{table}"), &[]).await.unwrap().get(0);
            assert_eq!(left, 0, "{table} rows left");
        }
    }

    /// The connection listening for wake-ups closes when the last clone of its store is dropped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn listener_ends_with_the_store() {
        let Some((store, schema)) = test_store("listen_end").await else { return };
        let client = raw_client(&schema.url).await;
        let listeners = async || -> i64 {
            let query = "SELECT count(*) FROM pg_stat_activity WHERE query = $1";
            client.query_one(query, &[&format!("LISTEN \"{}\"", schema.name)]).await.unwrap().get(0)
        };
        let mut wakeups = store.wakeups().unwrap();
        let clone = store.clone();
        // The first bump comes once the connection listens.
        wakeups.changed().await.unwrap();
        assert_eq!(listeners().await, 1);
        drop(store);
        drop(clone);
        // The counter's sender goes with the store, so the receiver sees it closed …
        assert!(wakeups.changed().await.is_err());
        // … and the backend leaves once the closed connection reaches it.
        let mut polls = 0;
        while listeners().await > 0 {
            polls += 1;
            assert!(polls < 300, "the LISTEN connection outlived its store");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}
