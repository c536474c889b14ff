//! The embedded SQLite backend: one file, WAL, one writer thread that group-commits.

use crate::{
    Append, CancelOutcome, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, FireSchedule, ForgetWorkers,
    HeartbeatRequest, LeaseStatus, NewRun, NewSignal, PageCursor, PauseOutcome, PauseSchedule, PruneRequest,
    PutSchedule, ResumeRequest, RunConcurrency, RunFilter, RunId, RunPage, RunRecord, RunStatus, RunUpdate,
    ScheduleRecord, SetSubscriptions, SignalRecord, StartSignal, Store, StoreError, StoreFuture, Subscription,
    SuspendReason, TakeRate, VersionCount, WaitingFor, WorkerRecord, WorkflowCount, WorkflowKey,
};
use cairn_journal::flow::{holds_slot, rate_forgets_before, rate_verdict};
use cairn_journal::{Event, EventKindName, JournalEntry, SignalId, Timestamp, Trim};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: a committed step survives power loss. The default.
    #[default]
    Full,
    /// `synchronous=NORMAL`: a committed step survives a process crash; the last commits may be
    /// lost if the machine loses power. Several times cheaper per commit.
    Normal,
}

impl Durability {
    /// `full` or `normal`.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Normal => "normal",
        }
    }
}

/// Options for [`SqliteStore::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Commit durability.
    pub durability: Durability,
    /// How long a writer waits for another process's write lock.
    pub busy_timeout: Duration,
    /// Most commands folded into one transaction.
    pub max_batch: usize,
    /// When the writer is idle, let the caller commit its own command on its thread instead of
    /// handing it to the writer thread: one command alone skips two thread hand-offs. Under load
    /// every command goes through the writer thread and its group commit.
    pub inline_when_idle: bool,
    /// Count the statements the store's connections execute, by SQL text, and how often SQLite
    /// had to compile each again ([`SqliteStore::statements`]). For tests and diagnostics: each
    /// statement then costs a callback.
    pub count_statements: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Full,
            busy_timeout: Duration::from_secs(10),
            max_batch: 4096,
            inline_when_idle: true,
            count_statements: false,
        }
    }
}

/// How often one SQL text was executed by a [`SqliteStore`] opened with
/// [`SqliteOptions::count_statements`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatementCount {
    /// Times a statement with this text began (a trigger's body counts as a statement of its own,
    /// named `-- TRIGGER <name>`).
    pub executions: u64,
    /// Times SQLite compiled it again instead of reusing the cached compilation (a schema change,
    /// or a bound value the plan depended on): each costs about as much as preparing it anew.
    pub reprepares: u64,
    /// Virtual-machine instructions its executions ran (`SQLITE_STMTSTATUS_VM_STEP`), triggers
    /// included: a measure of the work it did that no clock disturbs.
    pub vm_steps: u64,
}

/// The statements a [`SqliteStore`] executed, by SQL text; clones share the counts, which go on
/// counting.
///
/// ```
/// use cairn_store::{SqliteOptions, SqliteStore};
/// let dir = tempfile::tempdir()?;
/// let options = SqliteOptions { count_statements: true, ..SqliteOptions::default() };
/// let store = SqliteStore::open_with(dir.path().join("cairn.db"), options)?;
/// let counts = store.statements().expect("counting");
/// assert_eq!(counts.reprepares(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct StatementCounts(Arc<Mutex<HashMap<String, StatementCount>>>);

impl StatementCounts {
    /// Every SQL text executed so far, with its counts.
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, StatementCount> {
        self.lock().iter().map(|(sql, count)| (sql.clone(), *count)).collect()
    }

    /// Statements executed so far, all texts together.
    pub fn executions(&self) -> u64 {
        self.lock().values().map(|c| c.executions).sum()
    }

    /// Virtual-machine instructions run so far, all texts together.
    pub fn vm_steps(&self) -> u64 {
        self.lock().values().map(|c| c.vm_steps).sum()
    }

    /// Re-compilations so far, all texts together.
    pub fn reprepares(&self) -> u64 {
        self.lock().values().map(|c| c.reprepares).sum()
    }

    /// Forgets every count (to count one stretch of work).
    pub fn reset(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, StatementCount>> {
        // Counts are only ever added to: a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes `conn` report each statement it runs to these counts.
    fn watch(&self, conn: &mut Connection) -> Result<(), StoreError> {
        use rusqlite::StatementStatus;
        use rusqlite::trace::{TraceEvent, TraceEventCodes};
        let counts = self.clone();
        // This connection's statements' instruction counters as their current runs began: a
        // counter is cumulative over a cached statement's life, so a run's share is what it
        // gains. Kept per connection: two readers run the same SQL text at once.
        let mut began: HashMap<String, u64> = HashMap::new();
        conn.trace_v2(
            TraceEventCodes::SQLITE_TRACE_STMT | TraceEventCodes::SQLITE_TRACE_PROFILE,
            Some(move |event: TraceEvent<'_>| {
                let counter = |status| u64::try_from(status).unwrap_or(0);
                match event {
                    TraceEvent::Stmt(statement, sql) => {
                        // The statement's own count of its re-compilations (a cached statement
                        // keeps its counter for as long as it stays cached).
                        let reprepared = counter(statement.get_status(StatementStatus::RePrepare));
                        let steps = counter(statement.get_status(StatementStatus::VmStep));
                        match began.get_mut(sql) {
                            Some(before) => *before = steps,
                            None => drop(began.insert(sql.to_owned(), steps)),
                        }
                        counts.add(sql, |count| {
                            count.executions += 1;
                            count.reprepares = count.reprepares.max(reprepared);
                        });
                    }
                    TraceEvent::Profile(statement, _) => {
                        let sql = statement.sql();
                        let steps = counter(statement.get_status(StatementStatus::VmStep));
                        let before = began.get(sql.as_ref()).copied().unwrap_or(0);
                        counts.add(&sql, |count| count.vm_steps += steps.saturating_sub(before));
                    }
                    _ => {}
                }
            }),
        )
        .map_err(backend)
    }

    fn add(&self, sql: &str, change: impl FnOnce(&mut StatementCount)) {
        let mut counts = self.lock();
        match counts.get_mut(sql) {
            Some(count) => change(count),
            None => change(counts.entry(sql.to_owned()).or_default()),
        }
    }
}

/// Cairn's embedded default store: one SQLite file in WAL mode.
///
/// All writes go through one writer thread, which folds every command waiting in its queue into a
/// single transaction (group commit), so a thousand runs stepping at once share one `fsync`.
/// Reads use separate connections and never wait for the writer. Several processes may open the
/// same file (a worker and the `cairn` CLI, say); SQLite's file lock serializes their writes.
///
/// ```no_run
/// use cairn_store::{SqliteStore, SqliteOptions, Durability};
/// let store = SqliteStore::open("cairn.db")?;
/// let fast = SqliteStore::open_with("fast.db", SqliteOptions { durability: Durability::Normal, ..Default::default() })?;
/// # Ok::<(), cairn_store::StoreError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SqliteStore {
    commands: mpsc::UnboundedSender<Command>,
    writer: Arc<WriterSlot>,
    reads: std::sync::mpsc::Sender<ReadJob>,
    path: Arc<PathBuf>,
    /// What the connections executed, when the options asked for it.
    statements: Option<StatementCounts>,
    /// Dropped with the last clone, which stops the checkpoint thread.
    _checkpoints: Arc<std::sync::mpsc::Sender<()>>,
}

/// How often the checkpoint thread copies the WAL back into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);

/// A read to run on one of the reader threads' connections.
type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

/// How many reader threads (each with its own read-only connection) a store keeps.
const READER_THREADS: usize = 2;

/// A run's journal entries with sequence numbers in a range.
const JOURNAL_RANGE: &str =
    "SELECT seq, at, data FROM journal WHERE run_id = ?1 AND seq BETWEEN ?2 AND ?3 ORDER BY seq";

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// What [`Store::start_with_signal`] gives: the run, and its signal's id.
type StartedWithSignal = (CreatedRun, SignalId);

/// A job for the writer thread. Each carries the [`Answer`] of its own result type, so a caller
/// is answered with exactly the type it waits for.
enum Command {
    /// Boxed, as are the other commands whose result is a whole record: the hot ones (appends)
    /// stay small on the writer's channel.
    Create(Box<(NewRun, Answer<CreatedRun>)>),
    Claim(ClaimRequest, Answer<Vec<RunRecord>>),
    /// The append and its events already encoded as JSON (by the caller's thread, not the writer's).
    Append(Append, Vec<String>, Answer<()>),
    Heartbeat(HeartbeatRequest, Answer<Vec<LeaseStatus>>),
    Signal(NewSignal, Answer<SignalId>),
    Cancel(ControlRequest, Answer<CancelOutcome>),
    Pause(ControlRequest, Answer<PauseOutcome>),
    Resume(ResumeRequest, Answer<()>),
    StartWithSignal(Box<(NewRun, StartSignal, Answer<StartedWithSignal>)>),
    Prune(PruneRequest, Answer<Vec<RunId>>),
    RecordWorker(WorkerRecord, Answer<()>),
    ForgetWorkers(ForgetWorkers, Answer<u64>),
    SetSubscriptions(SetSubscriptions, Answer<()>),
    PutSchedule(Box<(PutSchedule, Answer<ScheduleRecord>)>),
    FireSchedule(FireSchedule, Answer<Option<Vec<CreatedRun>>>),
    PauseSchedule(Box<(PauseSchedule, Answer<ScheduleRecord>)>),
    DeleteSchedule(String, Answer<u64>),
    PutConcurrency(ConcurrencyRule, Answer<()>),
    DeleteConcurrency(String, Answer<u64>),
    TakeRate(TakeRate, Answer<Option<Timestamp>>),
}

/// A command's caller and what the command's application gave it. The writer keeps the result
/// until the command's transaction has committed: a batch that is rolled back and retried one
/// command at a time answers each caller once, with what its own retry gave.
struct Answer<T> {
    reply: Reply<T>,
    result: Option<Result<T, StoreError>>,
}

impl<T> Answer<T> {
    fn new(reply: Reply<T>) -> Self {
        Answer { reply, result: None }
    }

    /// Keeps what an application gave. A failure that may have written part of its change is
    /// not kept but returned: its whole transaction rolls back.
    fn keep(&mut self, applied: Result<T, Failure>) -> Result<(), Failure> {
        match applied {
            Ok(value) => self.result = Some(Ok(value)),
            Err(Failure { error, dirty: false }) => self.result = Some(Err(error)),
            Err(dirty) => return Err(dirty),
        }
        Ok(())
    }

    /// Answers the caller: with `failed` when the command's transaction did not commit, else
    /// with what its application kept. A caller that stopped waiting is not answered.
    fn send(self, failed: Option<StoreError>) {
        let value = match (failed, self.result) {
            (Some(error), _) => Err(error),
            (None, Some(result)) => result,
            (None, None) => Err(StoreError::Backend("the SQLite writer committed a command it did not apply".into())),
        };
        let _ = self.reply.send(value);
    }
}

/// A command's failure; `dirty` when it may have written part of its change before failing.
struct Failure {
    error: StoreError,
    dirty: bool,
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Self {
        Failure { error: backend(e), dirty: true }
    }
}

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn clean(error: StoreError) -> Failure {
    Failure { error, dirty: false }
}

/// The triggers that kept concurrency groups' slots from migration 11 to 16 (migration 17 drops
/// them: the writer keeps the slots itself). A macro, so migration 11's text stays as it shipped.
macro_rules! flow_triggers {
    () => {
        "
CREATE TRIGGER IF NOT EXISTS runs_flow_insert AFTER INSERT ON runs WHEN new.flow_key IS NOT NULL
BEGIN
    INSERT INTO flow_admit (workflow, key) VALUES (new.workflow, new.flow_key);
END;
CREATE TRIGGER IF NOT EXISTS runs_flow_update AFTER UPDATE OF status, waiting_for ON runs
WHEN old.flow_key IS NOT NULL AND ((old.waiting_for IS NULL AND new.waiting_for IS NOT NULL)
    OR (old.waiting_for IS NULL AND (old.status IN ('pending', 'running') OR (old.status = 'suspended' AND old.flow_hold = 1))
        AND NOT (new.waiting_for IS NULL
                 AND (new.status IN ('pending', 'running') OR (new.status = 'suspended' AND new.flow_hold = 1)))))
BEGIN
    UPDATE concurrency_slots SET held = held - 1 WHERE workflow = old.workflow AND key = old.flow_key
        AND old.waiting_for IS NULL AND (old.status IN ('pending', 'running') OR (old.status = 'suspended' AND old.flow_hold = 1));
    INSERT INTO flow_admit (workflow, key) VALUES (old.workflow, old.flow_key);
END;
"
    };
}

/// The `SET` of a run leaving a debounce window (it wakes or is paused): it held no slot while
/// it debounced (`flow_hold` 0), and from now on keeps one while suspended as its rule says.
macro_rules! hold_after_debounce {
    () => {
        "flow_hold = CASE WHEN suspend_reason = 'debouncing'
             THEN coalesce((SELECT hold FROM concurrency_rules r WHERE r.workflow = runs.workflow), 0)
             ELSE flow_hold END"
    };
}

/// The condition of the partial index `runs_open` (migration 18). SQLite reads a partial index
/// for a query whose condition implies the index's: `status = 'running'` implies this one (an
/// equality implies an `OR` that holds it), an `IN` list does not, so a query with one names
/// this condition as well. Equalities, not `IN`: SQLite tests an `IN` list of more than two
/// values in an index's condition by building a temporary table each time a row is written.
macro_rules! open_runs {
    () => {
        "(status = 'pending' OR status = 'running' OR status = 'suspended' OR status = 'paused')"
    };
}

/// The schema as migrations in order: a database at `PRAGMA user_version` n has the first n
/// applied. Never edit one that has shipped: add another.
const MIGRATIONS: &[&str] = &[
    "
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY NOT NULL,
    workflow TEXT NOT NULL,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    suspend_reason TEXT,
    input TEXT NOT NULL,
    output TEXT,
    error TEXT,
    idempotency_key TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    completed_at INTEGER,
    wake_at INTEGER,
    lease_owner TEXT,
    lease_expires_at INTEGER,
    epoch INTEGER NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_idempotency ON runs(workflow, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_wake ON runs(status, wake_at);
CREATE INDEX IF NOT EXISTS runs_lease ON runs(status, lease_expires_at);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at, id);
CREATE INDEX IF NOT EXISTS runs_workflow_created ON runs(workflow, created_at, id);
CREATE TABLE IF NOT EXISTS journal (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    kind TEXT NOT NULL,
    path TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS signals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    payload TEXT NOT NULL,
    sent_at INTEGER NOT NULL,
    consumed_seq INTEGER
);
CREATE INDEX IF NOT EXISTS signals_run ON signals(run_id, id);
",
    // 2: pause requests and the recovery count (poison runs).
    "
ALTER TABLE runs ADD COLUMN pause_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;
",
    // 3: run deadlines, retention, restarts.
    "
ALTER TABLE runs ADD COLUMN deadline_at INTEGER;
ALTER TABLE runs ADD COLUMN retention_ms INTEGER;
ALTER TABLE runs ADD COLUMN delete_after INTEGER;
ALTER TABLE runs ADD COLUMN restarted_from TEXT;
CREATE INDEX IF NOT EXISTS runs_delete_after ON runs(delete_after) WHERE delete_after IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_completed ON runs(completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_restarted_from ON runs(restarted_from) WHERE restarted_from IS NOT NULL;
",
    // 4: workers and the workflow versions they serve (a JSON array of `name@version` tags).
    "
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    live_until INTEGER NOT NULL,
    serves TEXT NOT NULL
);
",
    // 5: runs per workflow in each ended status, kept by the writer as runs end and are deleted
    // (what `workflow_counts` reads instead of scanning every ended run). Not by triggers: a
    // trigger on `runs` made every write statement on it dearer and cost W1 about 45 %.
    "
CREATE TABLE IF NOT EXISTS ended_counts (
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    runs INTEGER NOT NULL,
    PRIMARY KEY (workflow, status)
) WITHOUT ROWID;
INSERT INTO ended_counts (workflow, status, runs)
    SELECT workflow, status, count(*) FROM runs WHERE status IN ('completed', 'failed', 'cancelled')
    GROUP BY workflow, status;
",
    // 6: the topic patterns each workflow subscribes to (events published to a matching topic
    // start a run of it).
    "
CREATE TABLE IF NOT EXISTS subscriptions (
    workflow TEXT NOT NULL,
    pattern TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (workflow, pattern)
) WITHOUT ROWID;
",
    // 7: a workflow's failed, cancelled or paused runs, newest first, without scanning its other
    // runs. Partial indexes: a run pays for one only while it has that status (full indexes on
    // status cost W1 about 12 %); lists name the status as a literal so the planner can use them.
    "
CREATE INDEX IF NOT EXISTS runs_failed ON runs(workflow, created_at, id) WHERE status = 'failed';
CREATE INDEX IF NOT EXISTS runs_cancelled ON runs(workflow, created_at, id) WHERE status = 'cancelled';
CREATE INDEX IF NOT EXISTS runs_paused ON runs(workflow, created_at, id) WHERE status = 'paused';
",
    // 8: child runs' parents.
    "
ALTER TABLE runs ADD COLUMN parent TEXT;
CREATE INDEX IF NOT EXISTS runs_parent ON runs(parent) WHERE parent IS NOT NULL;
",
    // 9: continuations (`continue_as_new`): the run a run continues, and the one it continued as.
    "
ALTER TABLE runs ADD COLUMN continued_from TEXT;
ALTER TABLE runs ADD COLUMN continued_as TEXT;
",
    // 10: schedules; the partial index holds the ones that will fire, by when.
    "
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT PRIMARY KEY NOT NULL,
    workflow TEXT NOT NULL,
    spec TEXT NOT NULL,
    input TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_fire_at INTEGER,
    last_fired_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS schedules_due ON schedules(next_fire_at) WHERE paused = 0 AND next_fire_at IS NOT NULL;
",
    // 11: concurrency limits. A run of a limited workflow has a `flow_key` (its group is
    // workflow and key), enters as `waiting_for = 'concurrency'`, and is admitted (`waiting_for`
    // cleared) by `flow_admit` in creation order while its group holds fewer slots than the
    // rule's limit. The triggers fire only for rows with a `flow_key` changing status or
    // `waiting_for`: a store without rules pays for nothing but the columns. The claim reads
    // pending runs through `runs_ready`, which leaves waiting runs out.
    concat!(
        "
ALTER TABLE runs ADD COLUMN flow_key TEXT;
ALTER TABLE runs ADD COLUMN flow_hold INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN waiting_for TEXT;
CREATE INDEX IF NOT EXISTS runs_ready ON runs(created_at) WHERE status = 'pending' AND waiting_for IS NULL;
CREATE INDEX IF NOT EXISTS runs_waiting ON runs(workflow, flow_key, created_at, id) WHERE waiting_for IS NOT NULL;
CREATE TABLE IF NOT EXISTS concurrency_rules (
    workflow TEXT PRIMARY KEY NOT NULL,
    key TEXT,
    lim INTEGER NOT NULL,
    hold INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS concurrency_slots (
    workflow TEXT NOT NULL,
    key TEXT NOT NULL,
    held INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow, key)
) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS flow_admit (workflow, key) AS SELECT NULL, NULL WHERE 0;
CREATE TRIGGER IF NOT EXISTS flow_admit INSTEAD OF INSERT ON flow_admit
BEGIN
    INSERT OR IGNORE INTO concurrency_slots (workflow, key, held) VALUES (new.workflow, new.key, 0);
    UPDATE runs SET waiting_for = NULL WHERE id IN (
        SELECT id FROM runs WHERE workflow = new.workflow AND flow_key = new.key AND waiting_for IS NOT NULL
        ORDER BY created_at, id
        LIMIT max(0, coalesce((SELECT lim FROM concurrency_rules WHERE workflow = new.workflow), 1000000000)
                     - (SELECT held FROM concurrency_slots WHERE workflow = new.workflow AND key = new.key)));
    UPDATE concurrency_slots SET held = held + changes() WHERE workflow = new.workflow AND key = new.key;
END;
",
        flow_triggers!()
    ),
    // 12: the triggers on `runs` go until a store has a concurrency rule (`flow_triggers!`): even
    // with a WHEN that is false for every row, they made each insert and status update dearer
    // (timed from Python on a migrated file: an insert 8 -> 25 us, claim + finish 14 -> 38 us)
    // and W1 about 10 % slower.
    "
DROP TRIGGER IF EXISTS runs_flow_insert;
DROP TRIGGER IF EXISTS runs_flow_update;
",
    // 13: priority with fairness. A ready run's place in the claim order is its priority, then
    // its fairness sequence (`cairn_journal::flow::fair_seq`, assigned at insert from
    // `runs_fair`: the last ready run of its key, and the head of its priority in `runs_ready`),
    // then its creation: the claim reads the first runs of `runs_ready` in that order.
    "
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN fair_key TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN fair_seq INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS runs_ready;
CREATE INDEX runs_ready ON runs(priority DESC, fair_seq, created_at) WHERE status = 'pending' AND waiting_for IS NULL;
CREATE INDEX runs_fair ON runs(priority, fair_key, fair_seq) WHERE status = 'pending' AND waiting_for IS NULL;
",
    // 14: rate limits: the grants each bucket made within its window (older ones are deleted as
    // the bucket is next asked).
    "
CREATE TABLE IF NOT EXISTS rate_grants (bucket TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rate_grants_bucket ON rate_grants(bucket, at);
",
    // 15: debounce. A debounced run waits `suspended` with reason `debouncing` until its
    // `wake_at`; a start with its workflow and key while it does joins it (`runs_debouncing`
    // finds it, and keeps the window one per key). `debounce_until` caps its wake-ups.
    "
ALTER TABLE runs ADD COLUMN debounce_key TEXT;
ALTER TABLE runs ADD COLUMN debounce_until INTEGER;
CREATE UNIQUE INDEX runs_debouncing ON runs(workflow, debounce_key)
    WHERE status = 'suspended' AND suspend_reason = 'debouncing';
",
    // 16: a run cancelled or paused while it waited for a concurrency slot kept `waiting_for`,
    // and a later admission gave it a slot nobody would free. Such runs leave the queue, each
    // group's count is taken again from its runs, and groups with room admit.
    "
UPDATE runs SET waiting_for = NULL WHERE waiting_for IS NOT NULL AND status <> 'pending';
UPDATE concurrency_slots SET held = (
    SELECT count(*) FROM runs r WHERE r.workflow = concurrency_slots.workflow AND r.flow_key = concurrency_slots.key
      AND r.waiting_for IS NULL
      AND (r.status IN ('pending', 'running') OR (r.status = 'suspended' AND r.flow_hold = 1)));
INSERT INTO flow_admit (workflow, key) SELECT DISTINCT workflow, flow_key FROM runs WHERE waiting_for IS NOT NULL;
",
    // 17: concurrency slots are kept by the writer's own statements, not by triggers on `runs`:
    // a new run takes a slot as it is inserted when its group has room and nobody waits
    // (`Writer::take_slot`), and a run that stops holding one gives it back, which admits the
    // group's next waiting runs (`Writer::release_slot`). With the triggers, W1 under a limit
    // that never binds ran 35-40 % slower than without a rule: each insert, claim and end paid
    // for trigger programs, and each new run was written twice (inserted waiting, then admitted).
    "
DROP TRIGGER IF EXISTS runs_flow_insert;
DROP TRIGGER IF EXISTS runs_flow_update;
",
    // 18: the status indexes hold unended runs only. `runs_wake` and `runs_lease` were keyed by
    // status over every run, so each run paid four index writes as it was claimed and four more
    // as it ended, and ended runs (most of a store) filled both. Now a suspended run is in
    // `runs_timer` by its wake time, a running one in `runs_leased` by its lease's end, and every
    // unended one in `runs_open` by status, workflow and creation (the status lists, newest
    // first, and with the version the counts read): a run that ends leaves them. The claim and
    // the wake-ups name the first two (`INDEXED BY`: `runs_open` would serve them too, and
    // SQLite cannot tell it is the worse choice).
    concat!(
        "
DROP INDEX IF EXISTS runs_wake;
DROP INDEX IF EXISTS runs_lease;
CREATE INDEX runs_timer ON runs(wake_at) WHERE status = 'suspended';
CREATE INDEX runs_leased ON runs(lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_open ON runs(status, workflow, created_at, id, version) WHERE ",
        open_runs!(),
        ";
"
    ),
];

const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const RUN_COLUMNS: &str = "id, workflow, version, status, suspend_reason, input, output, error, idempotency_key, \
     created_at, updated_at, completed_at, wake_at, lease_owner, lease_expires_at, epoch, last_seq, cancel_requested, \
     pause_requested, recoveries, deadline_at, retention_ms, delete_after, restarted_from, parent, continued_from, \
     continued_as, flow_key, flow_hold, waiting_for, priority, fair_key, fair_seq, debounce_key, debounce_until";

/// The claim: the first ready runs in claim order (`cairn_journal::flow::claim_rank`), leased.
/// Each kind of ready run is read from its own index in order and cut at the limit before they
/// are merged, so a claim reads about `limit` rows of each however many runs are queued.
/// Parameters: see [`claim_params`].
static CLAIM: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "UPDATE runs SET status = 'running', suspend_reason = NULL, wake_at = NULL, lease_owner = ?1,
                 lease_expires_at = ?2, epoch = epoch + 1, updated_at = ?3,
                 recoveries = CASE WHEN status = 'running' THEN recoveries + 1 ELSE recoveries END
             WHERE id IN (
                 SELECT id FROM (
                     SELECT * FROM (
                         SELECT id, priority, fair_seq, created_at AS due FROM runs INDEXED BY runs_ready
                         WHERE status = 'pending' AND waiting_for IS NULL
                           AND (workflow || '@' || version) IN (SELECT value FROM json_each(?5))
                         ORDER BY priority DESC, fair_seq, created_at LIMIT ?6)
                     UNION ALL
                     SELECT * FROM (
                         SELECT id, priority, fair_seq, wake_at AS due FROM runs INDEXED BY runs_timer
                         WHERE status = 'suspended' AND wake_at <= ?3
                           AND (workflow || '@' || version) IN (SELECT value FROM json_each(?5))
                         ORDER BY wake_at LIMIT ?6)
                     UNION ALL
                     SELECT * FROM (
                         SELECT id, priority, fair_seq, lease_expires_at AS due FROM runs INDEXED BY runs_leased
                         WHERE status = 'running' AND lease_expires_at <= ?4
                           AND (workflow || '@' || version) IN (SELECT value FROM json_each(?5))
                         ORDER BY lease_expires_at LIMIT ?6))
                 ORDER BY priority DESC, fair_seq, due LIMIT ?6)
             RETURNING {RUN_COLUMNS}"
    )
});

/// A claim's workflow versions as the JSON array of tags its statement reads.
fn claim_tags(request: &ClaimRequest) -> Result<String, StoreError> {
    let tags: Vec<String> = request.workflows.iter().map(WorkflowKey::tag).collect();
    serde_json::to_string(&tags).map_err(|e| StoreError::InvalidInput(e.to_string()))
}

/// The parameters of [`CLAIM`] for `request`, with its `tags` from [`claim_tags`].
fn claim_params<'a>(request: &'a ClaimRequest, tags: &'a str) -> (&'a str, i64, i64, i64, &'a str, i64) {
    (
        &request.owner,
        request.lease_until.as_millis(),
        request.now.as_millis(),
        request.lease_now.as_millis(),
        tags,
        request.limit as i64,
    )
}

const SCHEDULE_COLUMNS: &str =
    "name, workflow, spec, input, paused, next_fire_at, last_fired_at, created_at, updated_at";

fn row_to_schedule(row: &Row<'_>) -> rusqlite::Result<Result<ScheduleRecord, StoreError>> {
    let ts = |v: Option<i64>| v.map(Timestamp::from_millis);
    let input: String = row.get(3)?;
    Ok((|| {
        Ok(ScheduleRecord {
            name: row.get(0).map_err(backend)?,
            workflow: row.get(1).map_err(backend)?,
            spec: row.get(2).map_err(backend)?,
            input: raw(input)?,
            paused: row.get::<_, i64>(4).map_err(backend)? != 0,
            next_fire_at: ts(row.get(5).map_err(backend)?),
            last_fired_at: ts(row.get(6).map_err(backend)?),
            created_at: Timestamp::from_millis(row.get(7).map_err(backend)?),
            updated_at: Timestamp::from_millis(row.get(8).map_err(backend)?),
        })
    })())
}

const RULES: &str = "SELECT workflow, key, lim, hold FROM concurrency_rules";

fn row_to_rule(row: &Row<'_>) -> rusqlite::Result<ConcurrencyRule> {
    Ok(ConcurrencyRule {
        workflow: row.get(0)?,
        key: row.get(1)?,
        limit: row.get(2)?,
        hold_suspended: row.get::<_, i64>(3)? != 0,
    })
}

fn raw(text: String) -> Result<Box<RawValue>, StoreError> {
    RawValue::from_string(text).map_err(|e| StoreError::Corrupt(format!("stored JSON is invalid: {e}")))
}

fn row_to_run(row: &Row<'_>) -> rusqlite::Result<Result<RunRecord, StoreError>> {
    let status: String = row.get(3)?;
    let reason: Option<String> = row.get(4)?;
    let input: String = row.get(5)?;
    let output: Option<String> = row.get(6)?;
    let ts = |v: Option<i64>| v.map(Timestamp::from_millis);
    let record = (|| {
        Ok(RunRecord {
            id: RunId::new(row.get::<_, String>(0).map_err(backend)?),
            workflow: row.get(1).map_err(backend)?,
            version: row.get(2).map_err(backend)?,
            status: RunStatus::parse_stored(&status)?,
            suspend_reason: reason.as_deref().and_then(SuspendReason::parse),
            input: raw(input)?,
            output: output.map(raw).transpose()?,
            error: row.get(7).map_err(backend)?,
            idempotency_key: row.get(8).map_err(backend)?,
            created_at: Timestamp::from_millis(row.get(9).map_err(backend)?),
            updated_at: Timestamp::from_millis(row.get(10).map_err(backend)?),
            completed_at: ts(row.get(11).map_err(backend)?),
            wake_at: ts(row.get(12).map_err(backend)?),
            lease_owner: row.get(13).map_err(backend)?,
            lease_expires_at: ts(row.get(14).map_err(backend)?),
            epoch: row.get::<_, i64>(15).map_err(backend)? as u64,
            last_seq: row.get::<_, i64>(16).map_err(backend)? as u64,
            cancel_requested: row.get::<_, i64>(17).map_err(backend)? != 0,
            pause_requested: row.get::<_, i64>(18).map_err(backend)? != 0,
            recoveries: row.get::<_, i64>(19).map_err(backend)? as u32,
            deadline: ts(row.get(20).map_err(backend)?),
            retention: row
                .get::<_, Option<i64>>(21)
                .map_err(backend)?
                .map(|ms| Duration::from_millis(ms.max(0) as u64)),
            delete_after: ts(row.get(22).map_err(backend)?),
            restarted_from: row.get::<_, Option<String>>(23).map_err(backend)?.map(RunId::new),
            parent: row.get::<_, Option<String>>(24).map_err(backend)?.map(RunId::new),
            continued_from: row.get::<_, Option<String>>(25).map_err(backend)?.map(RunId::new),
            continued_as: row.get::<_, Option<String>>(26).map_err(backend)?.map(RunId::new),
            concurrency: RunConcurrency::stored(
                row.get(27).map_err(backend)?,
                row.get::<_, i64>(28).map_err(backend)? != 0,
            ),
            waiting_for: WaitingFor::stored(row.get::<_, Option<String>>(29).map_err(backend)?.as_deref())
                .map_err(StoreError::Corrupt)?,
            priority: row.get(30).map_err(backend)?,
            fairness_key: Some(row.get::<_, String>(31).map_err(backend)?).filter(|key| !key.is_empty()),
            fair_seq: row.get(32).map_err(backend)?,
            debounce_key: row.get(33).map_err(backend)?,
            debounce_until: ts(row.get(34).map_err(backend)?),
        })
    })();
    Ok(record)
}

/// Every row of a query, each read by `read` (`row_to_run`, `row_to_schedule`).
fn query_rows<T>(
    stmt: &mut rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
    read: fn(&Row<'_>) -> rusqlite::Result<Result<T, StoreError>>,
) -> Result<Vec<T>, StoreError> {
    let rows = stmt.query_map(params, read).map_err(backend)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row.map_err(backend)??);
    }
    Ok(out)
}

/// SQL functions the queries use: `cairn_json_contains(haystack, needle)`, JSON containment as
/// PostgreSQL's `@>` ([`cairn_journal::json_contains`]; false when either is not JSON).
fn add_functions(conn: &Connection) -> Result<(), StoreError> {
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("cairn_json_contains", 2, flags, |ctx| {
        let parse =
            |i: usize| ctx.get_raw(i).as_str().ok().and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok());
        Ok(match (parse(0), parse(1)) {
            (Some(haystack), Some(needle)) => cairn_journal::json_contains(&haystack, &needle),
            _ => false,
        })
    })
    .map_err(backend)
}

fn configure(conn: &Connection, options: &SqliteOptions, cache_kib: u32) -> Result<(), StoreError> {
    conn.busy_timeout(options.busy_timeout).map_err(backend)?;
    conn.set_prepared_statement_cache_capacity(64);
    // Plans that do not depend on bound values. Without this, a statement whose plan looked at
    // a parameter (a `LIMIT ?`, an `= ?` filter) is compiled again each time it comes out of the
    // statement cache, whose clearing of bindings expires it: the claim and the create's
    // fairness lookup were parsed anew on every call (`sqlite3RunParser` in the writer's
    // profile; W1 CPU -8 %, W2 -14 %). Statuses are literals in the SQL, so partial indexes on
    // them are still chosen.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(backend)?;
    let synchronous = match options.durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = OFF; PRAGMA cache_size = -{cache_kib};
         PRAGMA journal_size_limit = {WAL_SIZE_LIMIT};"
    ))
    .map_err(backend)?;
    Ok(())
}

/// The WAL file is cut back to this size whenever a checkpoint lets it restart. Below it, a WAL
/// that keeps its size under load is reused in place (appending past a file's end makes every
/// FULL commit flush the file's size too, which cost W1 about a quarter of its throughput with a
/// 4 MiB limit); once writes stop, the checkpoint thread truncates it to nothing ([`IdleWal`]).
const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;

/// The checkpoint thread's memory of the WAL between ticks: when a tick finds it wholly copied back
/// and unchanged since the tick before (no commit in between), the writer is idle and the file is
/// truncated, so a burst of writes does not leave the WAL at its high-water size.
#[derive(Debug, Default)]
struct IdleWal {
    /// Frames in the WAL at the last tick, if it was wholly copied back then.
    settled: Option<i64>,
}

impl IdleWal {
    /// Takes one passive checkpoint's answer (busy, frames in the WAL, frames copied back) and says
    /// whether to truncate the WAL now.
    fn should_truncate(&mut self, busy: bool, frames: i64, copied: i64) -> bool {
        let settled = (!busy && frames > 0 && frames == copied).then_some(frames);
        let truncate = settled.is_some() && settled == self.settled;
        self.settled = if truncate { None } else { settled };
        truncate
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens (creating if needed) the database file at `path`.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut conn = Connection::open(&path).map_err(|e| StoreError::Backend(format!("{}: {e}", path.display())))?;
        configure(&conn, &options, 65_536)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(backend)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend(format!("{} cannot use WAL mode (got {mode})", path.display())));
        }
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(backend)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::Backend(format!(
                "{} was written by a newer Cairn (schema {version}, this build knows {SCHEMA_VERSION})",
                path.display()
            )));
        }
        conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
        let migrated = (|| {
            // Read again under the write lock: another process may have migrated meanwhile.
            let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            for migration in MIGRATIONS.iter().skip(usize::try_from(version).unwrap_or(0)) {
                conn.execute_batch(migration)?;
            }
            conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
        })();
        if let Err(error) = migrated {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(backend(error));
        }
        // Checkpoints run on their own thread so the writer does not stall on them; the writer
        // checkpoints by itself only if the WAL grows past ~40 MB anyway.
        conn.execute_batch("PRAGMA wal_autocheckpoint = 10000;").map_err(backend)?;
        let statements = options.count_statements.then(StatementCounts::default);
        if let Some(counts) = &statements {
            counts.watch(&mut conn)?;
        }
        let (checkpoints, stop) = std::sync::mpsc::channel::<()>();
        let checkpointer = Connection::open(&path).map_err(backend)?;
        configure(&checkpointer, &options, 2_000)?;
        std::thread::Builder::new()
            .name("cairn-sqlite-checkpoint".into())
            .spawn(move || {
                let mut idle = IdleWal::default();
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(CHECKPOINT_EVERY) {
                    // A busy or failed checkpoint is retried at the next tick.
                    let passive = checkpointer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
                    });
                    if let Ok((busy, frames, copied)) = passive
                        && idle.should_truncate(busy != 0, frames, copied)
                    {
                        let _ = checkpointer.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
                    }
                }
            })
            .map_err(|e| StoreError::Backend(format!("cannot start checkpoint thread: {e}")))?;
        let (commands, receiver) = mpsc::unbounded_channel();
        let max_batch = options.max_batch.max(1);
        let writer = Arc::new(WriterSlot {
            writer: Mutex::new(Writer { conn, ended: HashMap::new() }),
            pending: AtomicUsize::new(0),
            inline: options.inline_when_idle,
        });
        let slot = Arc::clone(&writer);
        std::thread::Builder::new()
            .name("cairn-sqlite-writer".into())
            .spawn(move || slot.run(receiver, max_batch))
            .map_err(|e| StoreError::Backend(format!("cannot start writer thread: {e}")))?;
        let (reads, jobs) = std::sync::mpsc::channel::<ReadJob>();
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..READER_THREADS {
            let mut reader = Connection::open_with_flags(
                &path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
            )
            .map_err(backend)?;
            configure(&reader, &options, 16_384)?;
            add_functions(&reader)?;
            if let Some(counts) = &statements {
                counts.watch(&mut reader)?;
            }
            let jobs = Arc::clone(&jobs);
            std::thread::Builder::new()
                .name(format!("cairn-sqlite-reader-{i}"))
                .spawn(move || {
                    // Reads the schema and compiles the journal query before the first job
                    // needs them (a resumed run's first read otherwise pays for both).
                    let _ = reader.prepare_cached(JOURNAL_RANGE);
                    loop {
                        // Take one job while holding the lock, run it without.
                        let job = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        match job {
                            Ok(job) => job(&reader),
                            Err(_) => break,
                        }
                    }
                })
                .map_err(|e| StoreError::Backend(format!("cannot start reader thread: {e}")))?;
        }
        Ok(SqliteStore {
            commands,
            writer,
            reads,
            path: Arc::new(path),
            statements,
            _checkpoints: Arc::new(checkpoints),
        })
    }

    /// The statements this store's connections executed, if it was opened with
    /// [`SqliteOptions::count_statements`].
    pub fn statements(&self) -> Option<StatementCounts> {
        self.statements.clone()
    }

    /// The database file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The plan SQLite chooses for a claim like `request` (`EXPLAIN QUERY PLAN`, one line per
    /// step, indented under its parent), without claiming anything. Used by `cairn bench`.
    pub async fn explain_claim(&self, request: &ClaimRequest) -> Result<Vec<String>, StoreError> {
        let request = request.clone();
        self.read(move |conn| {
            let tags = claim_tags(&request)?;
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", *CLAIM)).map_err(backend)?;
            let rows = stmt
                .query_map(claim_params(&request, &tags), |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(3)?))
                })
                .map_err(backend)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(backend)?;
            let mut depth: HashMap<i64, usize> = HashMap::new();
            Ok(rows
                .into_iter()
                .map(|(id, parent, detail)| {
                    let level = depth.get(&parent).map_or(0, |d| d + 1);
                    depth.insert(id, level);
                    format!("{}{detail}", "  ".repeat(level))
                })
                .collect())
        })
        .await
    }

    fn send<T: Send + 'static>(
        &self,
        make: impl FnOnce(Answer<T>) -> Command,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static {
        self.send_as(make, true)
    }

    /// [`send`](Self::send), committing inline when the writer is idle only if `inline` allows.
    fn send_as<T: Send + 'static>(
        &self,
        make: impl FnOnce(Answer<T>) -> Command,
        inline: bool,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static {
        let (reply, answer) = oneshot::channel();
        let command = make(Answer::new(reply));
        let queued = if inline { self.writer.try_inline(command) } else { Some(command) };
        let sent = match queued {
            None => Ok(()),
            Some(command) => {
                self.writer.pending.fetch_add(1, Ordering::SeqCst);
                self.commands.send(command).map_err(drop)
            }
        };
        async move {
            sent.map_err(|_| StoreError::Backend("the SQLite writer thread has stopped".into()))?;
            answer.await.map_err(|_| StoreError::Backend("the SQLite writer thread has stopped".into()))?
        }
    }

    /// A run's journal entries with sequence numbers in `first..=last`, in order, in a vector
    /// with room for `capacity`.
    fn read_journal_range(
        &self,
        id: &RunId,
        (first, last): (i64, i64),
        capacity: usize,
    ) -> StoreFuture<'static, Vec<JournalEntry>> {
        let id = id.clone();
        self.read(move |conn| {
            let mut entries = Vec::with_capacity(capacity);
            let mut stmt = conn.prepare_cached(JOURNAL_RANGE).map_err(backend)?;
            let mut rows = stmt.query(params![id.as_str(), first, last]).map_err(backend)?;
            while let Some(row) = rows.next().map_err(backend)? {
                let seq: i64 = row.get(0).map_err(backend)?;
                let at: i64 = row.get(1).map_err(backend)?;
                // Parsed from the row's own text, not from a copy of it.
                let data = row.get_ref(2).and_then(|v| Ok(v.as_str()?)).map_err(backend)?;
                let event = Event::from_json(data)
                    .map_err(|e| StoreError::Corrupt(format!("run {id} event #{seq} is unreadable: {e}")))?;
                entries.push(JournalEntry::new(seq as u64, Timestamp::from_millis(at), event));
            }
            Ok(entries)
        })
    }

    /// Runs `read` on one of the reader threads.
    fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'static, T> {
        let (reply, answer) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn: &Connection| {
            // The caller may have stopped waiting; nothing to do then.
            let _ = reply.send(read(conn));
        });
        let sent = self.reads.send(job);
        Box::pin(async move {
            sent.map_err(|_| StoreError::Backend("the SQLite reader threads have stopped".into()))?;
            answer.await.map_err(|_| StoreError::Backend("the SQLite reader threads have stopped".into()))?
        })
    }
}

/// The median time, in microseconds, of `commits` one-row commits to a fresh SQLite file at
/// `path` in the store's journal mode and the given durability: the floor a durable step cannot
/// go below on this file system. Used by `cairn bench`.
pub fn sqlite_commit_floor_us(path: &Path, durability: Durability, commits: usize) -> Result<f64, StoreError> {
    let conn = Connection::open(path).map_err(backend)?;
    configure(&conn, &SqliteOptions { durability, ..SqliteOptions::default() }, 2_000)?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)).map_err(backend)?;
    conn.execute_batch("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        .map_err(backend)?;
    let mut samples = Vec::with_capacity(commits);
    for i in 0..commits.max(1) {
        let start = std::time::Instant::now();
        conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
        conn.prepare_cached("INSERT INTO floor (id, value) VALUES (?1, '{\"step\":1}')")
            .map_err(backend)?
            .execute([i as i64])
            .map_err(backend)?;
        conn.execute_batch("COMMIT").map_err(backend)?;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

struct Writer {
    conn: Connection,
    /// Changes to `ended_counts` made by the transaction in progress, written just before it
    /// commits: one upsert per workflow and status per batch instead of one per run.
    ended: HashMap<(String, RunStatus), i64>,
}

/// The writer connection, shared by the writer thread and (when idle) inline callers.
struct WriterSlot {
    writer: Mutex<Writer>,
    /// Commands handed to the writer thread and not yet executed.
    pending: AtomicUsize,
    inline: bool,
}

impl std::fmt::Debug for WriterSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterSlot").field("pending", &self.pending).field("inline", &self.inline).finish()
    }
}

impl WriterSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Executes `command` on the caller's thread if nothing is queued or executing; otherwise
    /// gives it back to be queued. Commands queued before stay ahead of it: an inline command
    /// runs only when no queued command is outstanding.
    fn try_inline(&self, command: Command) -> Option<Command> {
        if !self.inline || self.pending.load(Ordering::SeqCst) != 0 {
            return Some(command);
        }
        let mut writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Some(command),
        };
        if self.pending.load(Ordering::SeqCst) != 0 {
            return Some(command);
        }
        writer.execute(&mut vec![command]);
        None
    }

    fn run(&self, mut receiver: mpsc::UnboundedReceiver<Command>, max_batch: usize) {
        let mut batch = Vec::with_capacity(max_batch.min(1024));
        while let Some(first) = receiver.blocking_recv() {
            batch.push(first);
            while batch.len() < max_batch {
                match receiver.try_recv() {
                    Ok(command) => batch.push(command),
                    Err(_) => break,
                }
            }
            let executed = batch.len();
            let mut writer = self.lock();
            writer.execute(&mut batch);
            self.pending.fetch_sub(executed, Ordering::SeqCst);
        }
    }
}

impl Writer {
    /// Executes a batch in one transaction. If any command failed after writing part of its
    /// change, or the commit failed, the batch is rolled back and every command retried alone.
    fn execute(&mut self, batch: &mut Vec<Command>) {
        match self.transaction(batch) {
            Ok(()) => batch.drain(..).for_each(|command| command.answer(None)),
            Err(_) => {
                for mut command in batch.drain(..) {
                    let failed = self.transaction(std::slice::from_mut(&mut command)).err();
                    command.answer(failed);
                }
            }
        }
    }

    /// One transaction over `commands`, each keeping its result; `Err` means it was rolled back.
    fn transaction(&mut self, commands: &mut [Command]) -> Result<(), StoreError> {
        self.ended.clear();
        let began = std::time::Instant::now();
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
        for command in commands.iter_mut() {
            if let Err(Failure { error, .. }) = self.apply(command) {
                let _ = self.conn.execute_batch("ROLLBACK");
                return Err(error);
            }
        }
        if let Err(e) = self.write_ended_counts().and_then(|()| self.conn.execute_batch("COMMIT")) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(backend(e));
        }
        crate::metrics_names::committed(commands.len(), began.elapsed());
        Ok(())
    }

    /// Records that a run of `workflow` entered (`delta` 1) or left (-1) the ended `status`.
    fn count_ended(&mut self, workflow: String, status: RunStatus, delta: i64) {
        *self.ended.entry((workflow, status)).or_default() += delta;
    }

    fn write_ended_counts(&mut self) -> rusqlite::Result<()> {
        for ((workflow, status), delta) in self.ended.drain() {
            if delta != 0 {
                self.conn
                    .prepare_cached(
                        "INSERT INTO ended_counts (workflow, status, runs) VALUES (?1, ?2, ?3)
                         ON CONFLICT (workflow, status) DO UPDATE SET runs = runs + excluded.runs",
                    )?
                    .execute(params![workflow, status.as_str(), delta])?;
            }
        }
        Ok(())
    }

    /// Applies `command` in the open transaction; it keeps its result for its caller. `Err` is a
    /// failure that may have written part of its change: the transaction must roll back.
    fn apply(&mut self, command: &mut Command) -> Result<(), Failure> {
        match command {
            Command::Create(job) => {
                let (run, a) = &mut **job;
                a.keep(self.create(run))
            }
            Command::Claim(request, a) => a.keep(self.claim(request)),
            Command::Append(append, encoded, a) => a.keep(self.append(append, encoded)),
            Command::Heartbeat(request, a) => a.keep(self.heartbeat(request)),
            Command::Signal(signal, a) => a.keep(self.signal(signal)),
            Command::Cancel(request, a) => a.keep(self.cancel(request)),
            Command::Pause(request, a) => a.keep(self.pause(request)),
            Command::Resume(request, a) => a.keep(self.resume(request)),
            Command::StartWithSignal(job) => {
                let (run, signal, a) = &mut **job;
                a.keep(self.start_with_signal(run, signal))
            }
            Command::Prune(request, a) => a.keep(self.prune(request)),
            Command::RecordWorker(worker, a) => a.keep(self.record_worker(worker)),
            Command::ForgetWorkers(request, a) => a.keep(self.forget_workers(request)),
            Command::SetSubscriptions(request, a) => a.keep(self.set_subscriptions(request)),
            Command::PutSchedule(job) => {
                let (put, a) = &mut **job;
                a.keep(self.put_schedule(put))
            }
            Command::FireSchedule(fire, a) => a.keep(self.fire_schedule(fire)),
            Command::PauseSchedule(job) => {
                let (change, a) = &mut **job;
                a.keep(self.pause_schedule(change))
            }
            Command::DeleteSchedule(name, a) => a.keep(self.delete_schedule(name)),
            Command::PutConcurrency(rule, a) => a.keep(self.put_concurrency(rule)),
            Command::DeleteConcurrency(workflow, a) => a.keep(self.delete_concurrency(workflow)),
            Command::TakeRate(take, a) => a.keep(self.take_rate(take)),
        }
    }

    fn delete_schedule(&mut self, name: &str) -> Result<u64, Failure> {
        Ok(self.conn.prepare_cached("DELETE FROM schedules WHERE name = ?1")?.execute([name])? as u64)
    }

    fn put_concurrency(&mut self, rule: &ConcurrencyRule) -> Result<(), Failure> {
        rule.check().map_err(|e| clean(StoreError::InvalidInput(e)))?;
        self.conn
            .prepare_cached(
                "INSERT INTO concurrency_rules (workflow, key, lim, hold) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (workflow) DO UPDATE SET key = excluded.key, lim = excluded.lim, hold = excluded.hold",
            )?
            .execute(params![rule.workflow, rule.key, rule.limit, rule.hold_suspended])?;
        self.admit_workflow(&rule.workflow)
    }

    fn delete_concurrency(&mut self, workflow: &str) -> Result<u64, Failure> {
        let deleted =
            self.conn.prepare_cached("DELETE FROM concurrency_rules WHERE workflow = ?1")?.execute([workflow])?;
        self.admit_workflow(workflow)?;
        Ok(deleted as u64)
    }

    /// A turn under a rate limit (see [`Store::take_rate`]): the bucket's grants that no asker
    /// can count any more go, the rest decide.
    fn take_rate(&mut self, take: &TakeRate) -> Result<Option<Timestamp>, Failure> {
        let (now, period) = (take.now.as_millis(), take.period_ms());
        self.conn
            .prepare_cached("DELETE FROM rate_grants WHERE bucket = ?1 AND at <= ?2")?
            .execute(params![take.bucket, rate_forgets_before(now, period)])?;
        let granted = self
            .conn
            .prepare_cached("SELECT at FROM rate_grants WHERE bucket = ?1")?
            .query_map([&take.bucket], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        let verdict = rate_verdict(&granted, take.limit, period, now);
        if verdict.is_none() {
            self.conn
                .prepare_cached("INSERT INTO rate_grants (bucket, at) VALUES (?1, ?2)")?
                .execute(params![take.bucket, now])?;
        }
        Ok(verdict.map(Timestamp::from_millis))
    }

    /// Admits what every group of `workflow` with waiting runs has room for (its rule changed).
    fn admit_workflow(&self, workflow: &str) -> Result<(), Failure> {
        self.conn
            .prepare_cached(
                "INSERT INTO flow_admit (workflow, key)
                 SELECT DISTINCT workflow, flow_key FROM runs WHERE workflow = ?1 AND waiting_for IS NOT NULL",
            )?
            .execute([workflow])?;
        Ok(())
    }

    fn prune(&mut self, request: &PruneRequest) -> Result<Vec<RunId>, Failure> {
        let doomed: Vec<(String, String, String)> = self
            .conn
            .prepare_cached(
                "SELECT id, workflow, status FROM runs
                 WHERE delete_after <= ?1 AND status IN ('completed', 'failed', 'cancelled', 'continued')
                 UNION
                 SELECT id, workflow, status FROM runs WHERE ?2 IS NOT NULL AND completed_at < ?2
                   AND status IN ('completed', 'failed', 'cancelled', 'continued')
                 ORDER BY id LIMIT ?3",
            )?
            .query_map(
                params![request.now.as_millis(), request.ended_before.map(Timestamp::as_millis), request.limit as i64],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?
            .collect::<rusqlite::Result<_>>()?;
        if !request.dry_run {
            for (id, workflow, status) in &doomed {
                if let Some(status) = RunStatus::parse(status) {
                    self.count_ended(workflow.clone(), status, -1);
                }
                for sql in [
                    "DELETE FROM journal WHERE run_id = ?1",
                    "DELETE FROM signals WHERE run_id = ?1",
                    "DELETE FROM runs WHERE id = ?1",
                ] {
                    self.conn.prepare_cached(sql)?.execute([id])?;
                }
            }
        }
        Ok(doomed.into_iter().map(|(id, _, _)| RunId::new(id)).collect())
    }

    fn record_worker(&mut self, worker: &WorkerRecord) -> Result<(), Failure> {
        self.conn
            .prepare_cached(
                "INSERT INTO workers (id, host, pid, started_at, last_seen, live_until, serves)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
                     started_at = excluded.started_at, last_seen = excluded.last_seen,
                     live_until = excluded.live_until, serves = excluded.serves",
            )?
            .execute(params![
                worker.id,
                worker.host,
                worker.pid,
                worker.started_at.as_millis(),
                worker.last_seen.as_millis(),
                worker.live_until.as_millis(),
                worker.serves_json()
            ])?;
        Ok(())
    }

    fn forget_workers(&mut self, request: &ForgetWorkers) -> Result<u64, Failure> {
        let ids = serde_json::to_string(&request.ids).map_err(|e| clean(StoreError::InvalidInput(e.to_string())))?;
        let forgotten = self
            .conn
            .prepare_cached("DELETE FROM workers WHERE id IN (SELECT value FROM json_each(?1)) OR live_until < ?2")?
            .execute(params![ids, request.dead_before.map(Timestamp::as_millis)])?;
        Ok(forgotten as u64)
    }

    fn set_subscriptions(&mut self, request: &SetSubscriptions) -> Result<(), Failure> {
        for workflow in &request.workflows {
            self.conn.prepare_cached("DELETE FROM subscriptions WHERE workflow = ?1")?.execute([workflow])?;
        }
        for subscription in &request.subscriptions {
            self.conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO subscriptions (workflow, pattern, version) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![subscription.workflow, subscription.pattern, subscription.version])?;
        }
        Ok(())
    }

    fn schedule(&self, name: &str) -> Result<Option<ScheduleRecord>, Failure> {
        let mut stmt =
            self.conn.prepare_cached(&format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name = ?1"))?;
        let found = stmt.query_row([name], row_to_schedule).optional()?;
        found.transpose().map_err(clean)
    }

    fn put_schedule(&mut self, put: &PutSchedule) -> Result<ScheduleRecord, Failure> {
        self.conn
            .prepare_cached(
                "INSERT INTO schedules (name, workflow, spec, input, next_fire_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
                 ON CONFLICT (name) DO UPDATE SET workflow = excluded.workflow, input = excluded.input,
                     next_fire_at = CASE WHEN spec = excluded.spec THEN next_fire_at ELSE excluded.next_fire_at END,
                     spec = excluded.spec, updated_at = excluded.updated_at",
            )?
            .execute(params![
                put.name,
                put.workflow,
                put.spec,
                put.input.get(),
                put.next_fire_at.map(Timestamp::as_millis),
                put.now.as_millis()
            ])?;
        self.schedule(&put.name)?.ok_or_else(|| clean(StoreError::ScheduleNotFound(put.name.clone())))
    }

    fn fire_schedule(&mut self, fire: &FireSchedule) -> Result<Option<Vec<CreatedRun>>, Failure> {
        let moved = self
            .conn
            .prepare_cached(
                "UPDATE schedules SET next_fire_at = ?3, last_fired_at = coalesce(?4, last_fired_at), updated_at = ?5
                 WHERE name = ?1 AND paused = 0 AND next_fire_at = ?2",
            )?
            .execute(params![
                fire.name,
                fire.due.as_millis(),
                fire.next_fire_at.map(Timestamp::as_millis),
                fire.last_fired_at.map(Timestamp::as_millis),
                fire.now.as_millis()
            ])?;
        if moved == 0 {
            return Ok(None);
        }
        let mut created = Vec::with_capacity(fire.runs.len());
        for run in &fire.runs {
            created.push(match self.create(run) {
                // Started by an earlier firing of the same time (its id says so).
                Err(Failure { error: StoreError::DuplicateRunId(id), .. }) => {
                    let existing = self.status_of(&id).map_err(|f| Failure { dirty: true, ..f })?;
                    CreatedRun { run: existing, created: false }
                }
                other => other.map_err(|failure| Failure { dirty: true, ..failure })?,
            });
        }
        Ok(Some(created))
    }

    fn pause_schedule(&mut self, change: &PauseSchedule) -> Result<ScheduleRecord, Failure> {
        self.conn
            .prepare_cached(
                "UPDATE schedules SET paused = ?2, updated_at = ?4,
                     next_fire_at = CASE WHEN ?2 = 0 THEN ?3 ELSE next_fire_at END
                 WHERE name = ?1 AND paused <> ?2",
            )?
            .execute(params![
                change.name,
                change.paused,
                change.next_fire_at.map(Timestamp::as_millis),
                change.now.as_millis()
            ])?;
        self.schedule(&change.name)?.ok_or_else(|| clean(StoreError::ScheduleNotFound(change.name.clone())))
    }

    fn get_run(&self, id: &RunId) -> Result<Option<RunRecord>, Failure> {
        let mut stmt = self.conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?;
        let run = stmt.query_row([id.as_str()], row_to_run).optional()?;
        run.transpose().map_err(clean)
    }

    /// The run holding `run`'s idempotency key, if any.
    fn by_key(&self, run: &NewRun) -> Result<Option<RunRecord>, Failure> {
        let Some(key) = &run.idempotency_key else { return Ok(None) };
        let mut stmt = self
            .conn
            .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE workflow = ?1 AND idempotency_key = ?2"))?;
        let existing = stmt.query_row([run.workflow.as_str(), key], row_to_run).optional()?;
        existing.transpose().map_err(clean)
    }

    fn create(&mut self, run: &NewRun) -> Result<CreatedRun, Failure> {
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
            .prepare_cached(
                "SELECT max(coalesce((SELECT fair_seq + 1 FROM runs INDEXED BY runs_fair
                                      WHERE status = 'pending' AND waiting_for IS NULL AND priority = ?1 AND fair_key = ?2
                                      ORDER BY fair_seq DESC LIMIT 1), 0),
                            coalesce((SELECT fair_seq FROM runs INDEXED BY runs_ready
                                      WHERE status = 'pending' AND waiting_for IS NULL AND priority = ?1
                                      ORDER BY priority DESC, fair_seq LIMIT 1), 0))",
            )?
            .query_row(params![run.priority, fair_key], |r| r.get(0))?;
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO runs (id, workflow, version, status, input, idempotency_key, created_at, updated_at, last_seq,
                     deadline_at, retention_ms, restarted_from, parent, continued_from, flow_key, flow_hold, waiting_for,
                     priority, fair_key, fair_seq, suspend_reason, wake_at, debounce_key, debounce_until)
                 VALUES (?1, ?2, ?3, ?18, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
                     CASE WHEN ?23 THEN 'concurrency' END, ?15, ?16, ?17, ?19, ?20, ?21, ?22)
                 ON CONFLICT (id) DO NOTHING",
            )?
            .execute(params![
                run.id.as_str(),
                run.workflow,
                run.version,
                run.input.get(),
                run.idempotency_key,
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
                record.debounce_key,
                record.debounce_until.map(Timestamp::as_millis),
                waits,
            ])?;
        if inserted == 0 {
            // A slot taken for it must be given back: the transaction is undone.
            let dirty = place.is_some() && !waits && !debouncing;
            return Err(Failure { error: StoreError::DuplicateRunId(run.id.clone()), dirty });
        }
        for (i, event) in run.initial_journal().iter().enumerate() {
            self.insert_event(&run.id, i as u64 + 1, run.created_at, event, &event.to_json())?;
        }
        record.fair_seq = fair_seq;
        record.waiting_for = waits.then_some(WaitingFor::Concurrency);
        record.concurrency = place;
        Ok(CreatedRun { run: record, created: true })
    }

    /// Takes a slot of the group (`workflow`, `key`) for a new run if it holds fewer than `limit`
    /// and no run waits for one (they go first): whether it did.
    fn take_slot(&self, workflow: &str, key: &str, limit: u32) -> Result<bool, Failure> {
        let taken = self
            .conn
            .prepare_cached(
                "INSERT INTO concurrency_slots (workflow, key, held) VALUES (?1, ?2, 1)
                 ON CONFLICT (workflow, key) DO UPDATE SET held = held + 1
                 WHERE held < ?3
                   AND NOT EXISTS (SELECT 1 FROM runs WHERE workflow = ?1 AND flow_key = ?2 AND waiting_for IS NOT NULL)",
            )?
            .execute(params![workflow, key, limit])?;
        Ok(taken == 1)
    }

    /// A run of the group (`workflow`, `key`) stopped holding a slot: its count goes down and the
    /// group admits what it now has room for.
    fn release_slot(&self, workflow: &str, key: &str) -> Result<(), Failure> {
        self.conn
            .prepare_cached(
                "UPDATE concurrency_slots SET held = held - 1 WHERE workflow = ?1 AND key = ?2 AND held > 0",
            )?
            .execute(params![workflow, key])?;
        self.admit(workflow, key)
    }

    /// Admits the group's waiting runs, oldest first, while it has room (`flow_admit`); nothing to
    /// do when none waits.
    fn admit(&self, workflow: &str, key: &str) -> Result<(), Failure> {
        self.conn
            .prepare_cached(
                "INSERT INTO flow_admit (workflow, key) SELECT ?1, ?2
                 WHERE EXISTS (SELECT 1 FROM runs WHERE workflow = ?1 AND flow_key = ?2 AND waiting_for IS NOT NULL)",
            )?
            .execute(params![workflow, key])?;
        Ok(())
    }

    /// Gives back the slot `run` held before a change that ended, paused or suspended it (a run
    /// in no group, or holding none, has nothing to give back).
    fn release_held(&self, run: &RunRecord) -> Result<(), Failure> {
        match &run.concurrency {
            Some(place) if holds_slot(run.status.as_str(), run.waiting_for.is_some(), place.hold_suspended) => {
                self.release_slot(&run.workflow, &place.key)
            }
            _ => Ok(()),
        }
    }

    /// Joins a debounced `run` to the run still debouncing under its key, if there is one
    /// (`runs_debouncing`): that run takes `run`'s input (its `started` event too) and wakes
    /// `quiet` from now, capped by its window's maximum wait.
    fn join_debounce(&mut self, run: &NewRun) -> Result<Option<CreatedRun>, Failure> {
        let Some(debounce) = &run.debounce else { return Ok(None) };
        let quiet_after = (run.created_at + debounce.quiet).as_millis();
        let joined: Option<String> = self
            .conn
            .prepare_cached(
                "UPDATE runs SET input = ?3, updated_at = ?4, wake_at = min(?5, coalesce(debounce_until, ?5))
                 WHERE workflow = ?1 AND debounce_key = ?2 AND status = 'suspended' AND suspend_reason = 'debouncing'
                 RETURNING id",
            )?
            .query_row(
                params![run.workflow, debounce.key, run.input.get(), run.created_at.as_millis(), quiet_after],
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

    /// `workflow`'s concurrency rule, if it has one.
    fn concurrency_rule(&self, workflow: &str) -> Result<Option<ConcurrencyRule>, Failure> {
        let mut stmt = self.conn.prepare_cached(&format!("{RULES} WHERE workflow = ?1"))?;
        Ok(stmt.query_row([workflow], row_to_rule).optional()?)
    }

    fn insert_event(&self, run_id: &RunId, seq: u64, at: Timestamp, event: &Event, json: &str) -> Result<(), Failure> {
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

    fn claim(&mut self, request: &ClaimRequest) -> Result<Vec<RunRecord>, Failure> {
        let tags = claim_tags(request).map_err(clean)?;
        // Woken runs that gave their slot up when they suspended wait for one again, as do
        // debounced runs whose window closed, which from then on keep their slot while suspended
        // as their rule says; their groups admit them at once where they have room.
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
        let mut stmt = self.conn.prepare_cached(&CLAIM)?;
        query_rows(&mut stmt, claim_params(request, &tags), row_to_run).map_err(|error| Failure { error, dirty: true })
    }

    fn append(&mut self, append: &Append, encoded: &[String]) -> Result<(), Failure> {
        let new_last = (append.after_seq + append.events.len() as u64) as i64;
        // Every variant checks the lease epoch and the journal's end, and moves both forward.
        let (sql, extra): (&str, Vec<Box<dyn rusqlite::ToSql>>) = match &append.update {
            RunUpdate::Progress => (
                "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0
                 WHERE id = ?3 AND epoch = ?4 AND last_seq = ?5",
                Vec::new(),
            ),
            RunUpdate::Suspend { reason, wake_at, signals_after, now } => (
                "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = 'suspended',
                     suspend_reason = ?6, lease_owner = NULL, lease_expires_at = NULL,
                     wake_at = CASE WHEN cancel_requested = 1 OR pause_requested = 1 OR (?7 IS NOT NULL AND EXISTS (
                             SELECT 1 FROM signals s WHERE s.run_id = runs.id AND s.consumed_seq IS NULL AND s.id > ?7))
                         THEN ?8 ELSE ?9 END
                 WHERE id = ?3 AND epoch = ?4 AND last_seq = ?5
                 RETURNING workflow, flow_key, flow_hold",
                vec![
                    Box::new(reason.as_str()),
                    Box::new(signals_after.map(|s| s.0)),
                    Box::new(now.as_millis()),
                    Box::new(wake_at.map(Timestamp::as_millis)),
                ],
            ),
            RunUpdate::Finish { status, output, error, at } => (
                "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = ?6, suspend_reason = NULL, output = ?7,
                     error = ?8, completed_at = ?9, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                     delete_after = ?9 + retention_ms
                 WHERE id = ?3 AND epoch = ?4 AND last_seq = ?5
                 RETURNING workflow, flow_key, flow_hold",
                vec![
                    Box::new(status.as_str()),
                    Box::new(output.as_ref().map(|o| o.get().to_owned())),
                    Box::new(error.clone()),
                    Box::new(at.as_millis()),
                ],
            ),
            RunUpdate::Continue { successor, at } => (
                "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = 'continued',
                     suspend_reason = NULL, continued_as = ?6, completed_at = ?7, wake_at = NULL, lease_owner = NULL,
                     lease_expires_at = NULL, delete_after = ?7 + retention_ms
                 WHERE id = ?3 AND epoch = ?4 AND last_seq = ?5
                 RETURNING workflow, flow_key, flow_hold",
                vec![Box::new(successor.id.as_str().to_owned()), Box::new(at.as_millis())],
            ),
            RunUpdate::Release => (
                "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = 'pending',
                     suspend_reason = NULL, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL
                 WHERE id = ?3 AND epoch = ?4 AND last_seq = ?5",
                Vec::new(),
            ),
            RunUpdate::Park { error } => (
                "UPDATE runs SET last_seq = ?1, updated_at = ?2, recoveries = 0, status = 'paused',
                     suspend_reason = NULL, error = ?6, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                     pause_requested = 0
                 WHERE id = ?3 AND epoch = ?4 AND last_seq = ?5
                 RETURNING workflow, flow_key, flow_hold",
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
            self.conn
                .prepare_cached(
                    "DELETE FROM journal WHERE run_id = ?1 AND seq > ?2 AND seq <= ?3
                         AND (substr(path, 1, length(?4)) = ?4 OR (kind = 'loop_checkpoint' AND path = ?5)
                              OR kind = 'var_set')",
                )?
                .execute(params![
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

    fn append_refusal(&self, append: &Append) -> Result<StoreError, Failure> {
        let found: Option<(i64, i64)> = self
            .conn
            .prepare_cached("SELECT epoch, last_seq FROM runs WHERE id = ?1")?
            .query_row([append.run_id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(match found {
            None => StoreError::RunNotFound(append.run_id.clone()),
            Some((epoch, _)) if epoch as u64 != append.epoch => {
                StoreError::Fenced { run_id: append.run_id.clone(), held: append.epoch, current: epoch as u64 }
            }
            Some((_, last)) => StoreError::SequenceConflict {
                run_id: append.run_id.clone(),
                expected: append.after_seq,
                actual: last as u64,
            },
        })
    }

    fn heartbeat(&mut self, request: &HeartbeatRequest) -> Result<Vec<LeaseStatus>, Failure> {
        let mut out = Vec::with_capacity(request.runs.len());
        for (run_id, epoch) in &request.runs {
            let held: Option<(i64, i64)> = self
                .conn
                .prepare_cached(
                    "UPDATE runs SET lease_expires_at = ?1
                     WHERE id = ?2 AND epoch = ?3 AND lease_owner = ?4 AND status = 'running'
                     RETURNING cancel_requested, pause_requested",
                )?
                .query_row(
                    params![request.lease_until.as_millis(), run_id.as_str(), *epoch as i64, request.owner],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let (held, (cancel, pause)) = match held {
                Some(flags) => (true, flags),
                None => {
                    let flags: Option<(i64, i64)> = self
                        .conn
                        .prepare_cached("SELECT cancel_requested, pause_requested FROM runs WHERE id = ?1")?
                        .query_row([run_id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()?;
                    (false, flags.unwrap_or((0, 0)))
                }
            };
            out.push(LeaseStatus {
                run_id: run_id.clone(),
                held,
                cancel_requested: cancel != 0,
                pause_requested: pause != 0,
            });
        }
        Ok(out)
    }

    fn status_of(&self, run_id: &RunId) -> Result<RunRecord, Failure> {
        self.get_run(run_id)?.ok_or_else(|| clean(StoreError::RunNotFound(run_id.clone())))
    }

    fn signal(&mut self, signal: &NewSignal) -> Result<SignalId, Failure> {
        let mut target = self.status_of(&signal.run_id)?;
        // A run that continued as a fresh one: the signal goes to the newest of its chain.
        while let (RunStatus::Continued, Some(next)) = (target.status, &target.continued_as) {
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
        self.conn
            .prepare_cached(
                "UPDATE runs SET wake_at = min(coalesce(wake_at, ?2), ?2)
                 WHERE id = ?1 AND status = 'suspended' AND suspend_reason = 'waiting'",
            )?
            .execute(params![run_id, sent_at])?;
        Ok(SignalId(id))
    }

    fn pause(&mut self, request: &ControlRequest) -> Result<PauseOutcome, Failure> {
        let run = self.unfinished(&request.run_id)?;
        if run.status == RunStatus::Paused {
            return Ok(PauseOutcome::Paused);
        }
        if run.is_held_at(request.lease_now) {
            self.conn
                .prepare_cached("UPDATE runs SET pause_requested = 1 WHERE id = ?1")?
                .execute([request.run_id.as_str()])?;
            return Ok(PauseOutcome::Requested);
        }
        self.conn
            .prepare_cached(concat!(
                "UPDATE runs SET epoch = epoch + 1, status = 'paused', error = ?2, updated_at = ?3, pause_requested = 0,
                     suspend_reason = NULL, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL, waiting_for = NULL, ",
                hold_after_debounce!(),
                "
                 WHERE id = ?1"
            ))?
            .execute(params![request.run_id.as_str(), request.reason, request.at.as_millis()])?;
        self.release_held(&run)?;
        Ok(PauseOutcome::Paused)
    }

    fn resume(&mut self, request: &ResumeRequest) -> Result<(), Failure> {
        let run = self.unfinished(&request.run_id)?;
        if run.status != RunStatus::Paused {
            return Err(clean(StoreError::NotPaused { run_id: request.run_id.clone(), status: run.status }));
        }
        self.conn
            .prepare_cached(
                "UPDATE runs SET status = 'pending', error = NULL, recoveries = 0, updated_at = ?2,
                     waiting_for = CASE WHEN flow_key IS NOT NULL THEN 'concurrency' END
                 WHERE id = ?1",
            )?
            .execute(params![request.run_id.as_str(), request.at.as_millis()])?;
        if let Some(place) = &run.concurrency {
            self.admit(&run.workflow, &place.key)?;
        }
        Ok(())
    }

    fn start_with_signal(&mut self, run: &NewRun, signal: &StartSignal) -> Result<(CreatedRun, SignalId), Failure> {
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
    fn unfinished(&self, id: &RunId) -> Result<RunRecord, Failure> {
        let run = self.status_of(id)?;
        if run.status.is_terminal() {
            return Err(clean(StoreError::RunFinished { run_id: id.clone(), status: run.status }));
        }
        Ok(run)
    }

    fn cancel(&mut self, request: &ControlRequest) -> Result<CancelOutcome, Failure> {
        let run = self.unfinished(&request.run_id)?;
        let live = run.is_held_at(request.lease_now);
        if live {
            self.conn
                .prepare_cached("UPDATE runs SET cancel_requested = 1 WHERE id = ?1")?
                .execute([request.run_id.as_str()])?;
            return Ok(CancelOutcome::Requested);
        }
        let seq = run.last_seq + 1;
        self.conn
            .prepare_cached(
                "UPDATE runs SET cancel_requested = 1, epoch = epoch + 1, last_seq = ?2, updated_at = ?3,
                     status = 'cancelled', suspend_reason = NULL, error = ?4, completed_at = ?3, wake_at = NULL,
                     lease_owner = NULL, lease_expires_at = NULL, delete_after = ?3 + retention_ms, waiting_for = NULL
                 WHERE id = ?1",
            )?
            .execute(params![request.run_id.as_str(), seq as i64, request.at.as_millis(), request.reason])?;
        self.release_held(&run)?;
        self.count_ended(run.workflow, RunStatus::Cancelled, 1);
        let cancelled = Event::Cancelled { reason: request.reason.clone() };
        self.insert_event(&request.run_id, seq, request.at, &cancelled, &cancelled.to_json())?;
        Ok(CancelOutcome::Cancelled)
    }
}

impl Command {
    /// Answers its caller: with `failed` when its transaction did not commit, else with what its
    /// application kept.
    fn answer(self, failed: Option<StoreError>) {
        match self {
            Command::Create(job) => job.1.send(failed),
            Command::Claim(_, a) => a.send(failed),
            Command::Append(_, _, a) => a.send(failed),
            Command::Heartbeat(_, a) => a.send(failed),
            Command::Signal(_, a) => a.send(failed),
            Command::Cancel(_, a) => a.send(failed),
            Command::Pause(_, a) => a.send(failed),
            Command::Resume(_, a) => a.send(failed),
            Command::StartWithSignal(job) => job.2.send(failed),
            Command::Prune(_, a) => a.send(failed),
            Command::RecordWorker(_, a) => a.send(failed),
            Command::ForgetWorkers(_, a) => a.send(failed),
            Command::SetSubscriptions(_, a) => a.send(failed),
            Command::PutSchedule(job) => job.1.send(failed),
            Command::FireSchedule(_, a) => a.send(failed),
            Command::PauseSchedule(job) => job.1.send(failed),
            Command::DeleteSchedule(_, a) => a.send(failed),
            Command::PutConcurrency(_, a) => a.send(failed),
            Command::DeleteConcurrency(_, a) => a.send(failed),
            Command::TakeRate(_, a) => a.send(failed),
        }
    }
}

fn read_run(conn: &Connection, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1")).map_err(backend)?;
    stmt.query_row([id.as_str()], row_to_run).optional().map_err(backend)?.transpose()
}

impl Store for SqliteStore {
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
            // Only the conditions the filter has, so the planner can pick the index that serves
            // them (`? IS NULL OR …` conditions would hide every index but the ordering one).
            let mut conditions: Vec<&str> = Vec::new();
            let mut values: Vec<rusqlite::types::Value> = Vec::new();
            let text = |t: &str| rusqlite::types::Value::Text(t.to_owned());
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
            if let Some(after) = filter.created_after {
                conditions.push("created_at >= ?");
                values.push(after.as_millis().into());
            }
            if let Some(before) = filter.created_before {
                conditions.push("created_at < ?");
                values.push(before.as_millis().into());
            }
            if let Some(PageCursor { created_at, id }) = &filter.cursor {
                conditions.push("(created_at, id) < (?, ?)");
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
                    "status IN ('pending', 'running', 'suspended') AND ",
                    open_runs!(),
                    " AND (workflow || '@' || version) NOT IN (SELECT value FROM json_each(?))"
                ));
                values.push(serde_json::Value::from(tags).to_string().into());
            }
            if let Some(needle) = filter.input_json() {
                conditions.push("cairn_json_contains(input, ?)");
                values.push(needle.into());
            }
            let conditions =
                if conditions.is_empty() { String::new() } else { format!("WHERE {}", conditions.join(" AND ")) };
            values.push(((size + 1) as i64).into());
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs {conditions} ORDER BY created_at DESC, id DESC LIMIT ?"
                ))
                .map_err(backend)?;
            let runs = query_rows(&mut stmt, rusqlite::params_from_iter(values), row_to_run)?;
            Ok(RunPage::cut(runs, size))
        })
    }

    fn read_journal<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<JournalEntry>> {
        self.read_journal_range(id, (1, i64::MAX), 0)
    }

    fn read_journal_through<'a>(&'a self, id: &'a RunId, last_seq: u64) -> StoreFuture<'a, Vec<JournalEntry>> {
        let seq = |seq: u64| i64::try_from(seq).unwrap_or(i64::MAX);
        let capacity = usize::try_from(last_seq).unwrap_or(0).min(1 << 20);
        let Some([(_, middle), (_, last)]) = crate::journal_halves(last_seq) else {
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

    fn claim<'a>(&'a self, request: &'a ClaimRequest) -> StoreFuture<'a, Vec<RunRecord>> {
        let request = request.clone();
        Box::pin(self.send(|r| Command::Claim(request, r)))
    }

    fn append(&self, append: Append) -> StoreFuture<'_, ()> {
        let encoded = append.events.iter().map(Event::to_json).collect();
        let inline = !append.batched;
        Box::pin(self.send_as(|r| Command::Append(append, encoded, r), inline))
    }

    fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>> {
        let request = request.clone();
        Box::pin(self.send(|r| Command::Heartbeat(request, r)))
    }

    fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId> {
        Box::pin(self.send(|r| Command::Signal(signal, r)))
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

    fn record_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()> {
        let worker = worker.clone();
        Box::pin(self.send(|r| Command::RecordWorker(worker, r)))
    }

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

    fn version_counts(&self) -> StoreFuture<'_, Vec<VersionCount>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(concat!(
                    "SELECT workflow, version, count(*) FROM runs
                         WHERE status IN ('pending', 'running', 'suspended') AND ",
                    open_runs!(),
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
            conn.prepare_cached(
                "SELECT min(at) FROM (
                     SELECT min(wake_at) AS at FROM runs INDEXED BY runs_timer WHERE status = 'suspended' AND wake_at IS NOT NULL
                       AND (workflow || '@' || version) IN (SELECT value FROM json_each(?1))
                     UNION ALL
                     SELECT min(next_fire_at) FROM schedules WHERE paused = 0 AND next_fire_at IS NOT NULL
                       AND workflow IN (SELECT value FROM json_each(?2)))",
            )
            .map_err(backend)?
            .query_row([tags, names], |r| r.get::<_, Option<i64>>(0))
            .map(|v| v.map(Timestamp::from_millis))
            .map_err(backend)
        })
    }

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

#[cfg(test)]
mod tests {
    use super::IdleWal;

    #[test]
    fn an_idle_wal_is_truncated_after_two_settled_ticks_with_no_commit_between() {
        let mut idle = IdleWal::default();
        // (busy, frames in the WAL, frames copied back) per tick.
        let ticks = [
            ((false, 0, 0), false),     // empty WAL: nothing to give back
            ((false, 0, 0), false),     //
            ((false, 500, 200), false), // being written, not yet copied back
            ((false, 800, 800), false), // copied back, but commits since the last tick
            ((false, 800, 800), true),  // unchanged for a whole tick: truncate
            ((false, 0, 0), false),     // truncated
            ((false, 30, 30), false),   // a commit restarted it
            ((true, 30, 30), false),    // a reader or writer in the way
            ((false, 30, 30), false),   // settled again, but not yet for a whole tick
            ((false, 40, 40), false),   // another commit
            ((false, 40, 40), true),    //
        ];
        for (i, ((busy, frames, copied), expected)) in ticks.into_iter().enumerate() {
            assert_eq!(idle.should_truncate(busy, frames, copied), expected, "tick {i}");
        }
    }
}
