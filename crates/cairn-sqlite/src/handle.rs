//! The options, the store handle, its connections and threads (the writer, the readers, the
//! checkpoints).

use crate::prelude::*;
use crate::rows::{CLAIM, claim_params, claim_tags};
use crate::schema::{MIGRATIONS, SCHEMA_VERSION};
use crate::writer::{Answer, Command, Writer, WriterSlot, backend};

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
/// use cairn_sqlite::{SqliteOptions, SqliteStore};
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
/// use cairn_sqlite::{Durability, SqliteOptions, SqliteStore};
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

/// How every read-only connection opens.
fn read_only_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI
}

/// `path` as a read-only SQLite URI; `immutable` tells SQLite the file cannot change.
fn read_only_uri(path: &Path, immutable: bool) -> String {
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            c => uri.push(c),
        }
    }
    uri.push_str(if immutable { "?mode=ro&immutable=1" } else { "?mode=ro" });
    uri
}

/// A read-only connection to the database at `path`, the URI it was opened by (the readers open the
/// same) and the schema version it holds. Reading a WAL database needs its shared-memory file,
/// which SQLite creates if missing; where it cannot (a read-only directory, a full disk) and no WAL
/// file is there (the database was closed cleanly, and no writer has it open, or there would be
/// one), the file is opened `immutable`, which needs none.
fn open_read_only(path: &Path) -> Result<(Connection, String, i64), StoreError> {
    let attempt = |immutable: bool| -> rusqlite::Result<(Connection, String, i64)> {
        let uri = read_only_uri(path, immutable);
        let conn = Connection::open_with_flags(&uri, read_only_flags())?;
        // The first read: where the file cannot be read this way, this is what fails.
        let version = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        Ok((conn, uri, version))
    };
    attempt(false)
        .or_else(|error| {
            let mut wal = path.as_os_str().to_owned();
            wal.push("-wal");
            match Path::new(&wal).exists() || !path.exists() {
                true => Err(error),
                false => attempt(true),
            }
        })
        .map_err(|e| StoreError::caused_by(path.display(), e))
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens (creating if needed) the database file at `path`.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore, StoreError> {
        Self::open_inner(path.as_ref().to_path_buf(), options, false)
    }

    /// Opens the existing database file at `path` to read it, writing nothing: no migration, no
    /// change of journal mode, no checkpoints, so it works on a read-only file or directory and
    /// on a full disk. Every write through it fails (the database is read-only). A database
    /// that an older build wrote, and that no writer has migrated yet, is refused: open it for
    /// writing once.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        Self::open_inner(path.as_ref().to_path_buf(), SqliteOptions::default(), true)
    }

    /// Whether the existing database at `path` was written by an older build and needs
    /// migrating before [`open_read_only`](SqliteStore::open_read_only) can read it (what
    /// [`open`](SqliteStore::open) does first). Reads its schema version, writing nothing.
    pub fn needs_migrating(path: impl AsRef<Path>) -> Result<bool, StoreError> {
        let (_, _, version) = open_read_only(path.as_ref())?;
        Ok(version < SCHEMA_VERSION)
    }

    fn open_inner(
        path: std::path::PathBuf,
        options: SqliteOptions,
        read_only: bool,
    ) -> Result<SqliteStore, StoreError> {
        let opened = |e| StoreError::caused_by(path.display(), e);
        let (conn, reading) = match read_only {
            true => open_read_only(&path).map(|(conn, uri, _)| (conn, Some(uri)))?,
            false => (Connection::open(&path).map_err(opened)?, None),
        };
        configure(&conn, &options, 65_536)?;
        if !read_only {
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(backend)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError::backend(format!("{} cannot use WAL mode (got {mode})", path.display())));
            }
        }
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(opened)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::backend(format!(
                "{} was written by a newer Cairn (schema {version}, this build knows {SCHEMA_VERSION})",
                path.display()
            )));
        }
        if read_only {
            if version < SCHEMA_VERSION {
                return Err(StoreError::backend(format!(
                    "{} has schema {version} and needs migrating to {SCHEMA_VERSION}, which reading does not do: \
                     run a command that writes (or a worker) on it once",
                    path.display()
                )));
            }
            return Self::start_threads(path, options, conn, None, reading);
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
        let checkpointer = Connection::open(&path).map_err(backend)?;
        configure(&checkpointer, &options, 2_000)?;
        Self::start_threads(path, options, conn, Some(checkpointer), None)
    }

    /// The store over `conn` (the writer's), with its reader threads and, given a connection
    /// for it, its checkpoint thread; a read-only store's readers open `reading` (a URI).
    fn start_threads(
        path: std::path::PathBuf,
        options: SqliteOptions,
        mut conn: Connection,
        checkpointer: Option<Connection>,
        reading: Option<String>,
    ) -> Result<SqliteStore, StoreError> {
        let statements = options.count_statements.then(StatementCounts::default);
        if let Some(counts) = &statements {
            counts.watch(&mut conn)?;
        }
        let (checkpoints, stop) = std::sync::mpsc::channel::<()>();
        if let Some(checkpointer) = checkpointer {
            Self::checkpoint_thread(checkpointer, stop)?;
        }
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
            .map_err(|e| StoreError::caused_by("cannot start the writer thread", e))?;
        let (reads, jobs) = std::sync::mpsc::channel::<ReadJob>();
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..READER_THREADS {
            let mut reader = match &reading {
                Some(uri) => Connection::open_with_flags(uri, read_only_flags()),
                None => Connection::open_with_flags(&path, read_only_flags()),
            }
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
                .map_err(|e| StoreError::caused_by("cannot start a reader thread", e))?;
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

    /// Checkpoints the WAL every [`CHECKPOINT_EVERY`] on `checkpointer` (a passive checkpoint,
    /// and a truncating one once the writer is idle) until `stop`'s sender is dropped.
    fn checkpoint_thread(checkpointer: Connection, stop: std::sync::mpsc::Receiver<()>) -> Result<(), StoreError> {
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
            .map_err(|e| StoreError::caused_by("cannot start the checkpoint thread", e))?;
        Ok(())
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
                .query_map(claim_params(&request, &tags, request.limit), |row| {
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

    pub(crate) fn send<T: Send + 'static>(
        &self,
        make: impl FnOnce(Answer<T>) -> Command,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static {
        self.send_as(make, true)
    }

    /// [`send`](Self::send), committing inline when the writer is idle only if `inline` allows.
    pub(crate) fn send_as<T: Send + 'static>(
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
            sent.map_err(|_| StoreError::backend("the SQLite writer thread has stopped"))?;
            answer.await.map_err(|_| StoreError::backend("the SQLite writer thread has stopped"))?
        }
    }

    /// A run's journal entries with sequence numbers in `first..=last`, in order, in a vector
    /// with room for `capacity`.
    pub(crate) fn read_journal_range(
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
    pub(crate) fn read<T: Send + 'static>(
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
            sent.map_err(|_| StoreError::backend("the SQLite reader threads have stopped"))?;
            answer.await.map_err(|_| StoreError::backend("the SQLite reader threads have stopped"))?
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
