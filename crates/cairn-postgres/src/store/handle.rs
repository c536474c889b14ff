//! The options and the store handle: its pool, its writer and LISTEN tasks, and how it opens.

use super::listen::{Wakeups, listen};
use super::maintain::maintain;
use super::prelude::*;
#[cfg(feature = "test-util")]
use super::rows::ClaimValues;
use super::sql::{Sql, backend};
use super::writer::{Job, writer};
use crate::schema::{MIGRATIONS, valid_schema_name};
use std::time::Duration;
/// How to reach the database and where to keep Cairn's tables.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// A libpq-style URL or key=value string, e.g. `postgres://user@host:5432/db`.
    pub url: String,
    /// Schema for Cairn's tables (created if missing). Default `cairn`.
    pub schema: String,
    /// Most pooled connections. Default 16.
    pub pool_size: usize,
    /// How long one connection attempt may take, from the TCP connect through the server's
    /// answer to the login (a server that accepts connections and never answers fails a start
    /// after this long). Default 10 s.
    pub connect_timeout: Duration,
    /// How long [`PostgresStore::connect`] keeps trying while the server cannot be reached, with
    /// backoff (0.1 s, doubling up to 5 s), logging each failed attempt at warn. Default zero:
    /// one attempt.
    pub startup_wait: Duration,
}

impl PostgresOptions {
    /// Options for `url` with the default schema and pool size.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: "cairn".into(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(10),
            startup_wait: Duration::ZERO,
        }
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

    /// Give up on one connection attempt after `timeout` (at least 1 ms).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Keep trying to reach the server for up to `wait` when connecting, e.g. while it starts
    /// alongside this process:
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), cairn_store::StoreError> {
    /// use cairn_postgres::{PostgresOptions, PostgresStore};
    /// use std::time::Duration;
    /// let options = PostgresOptions::new("postgres://cairn@db.internal/cairn").startup_wait(Duration::from_secs(60));
    /// let store = PostgresStore::connect(options).await?;
    /// # Ok(()) }
    /// ```
    pub fn startup_wait(mut self, wait: Duration) -> Self {
        self.startup_wait = wait;
        self
    }
}

/// Runs, journals and signals in PostgreSQL, shared by any number of worker processes.
#[derive(Clone)]
pub struct PostgresStore {
    pub(super) pool: Pool,
    pub(super) sql: Arc<Sql>,
    pub(super) jobs: mpsc::UnboundedSender<Job>,
    pub(super) config: tokio_postgres::Config,
    /// The connection lease heartbeats go out on, its own (see `beats`).
    pub(super) beats: super::beats::BeatSlot,
    /// Wake-ups and run endings heard on the schema's channel; the listener starts on first use.
    pub(super) wakeups: Arc<Wakeups>,
    /// Held by every clone: the maintenance task ends once the last is dropped.
    alive: Arc<()>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("schema", &self.sql.schema).finish()
    }
}

/// Where `config` connects, for messages: `host:port`, comma-separated when several.
fn address(config: &tokio_postgres::Config) -> String {
    let ports = config.get_ports();
    let hosts = config.get_hosts().iter().enumerate().map(|(i, host)| {
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        match host {
            tokio_postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
            tokio_postgres::config::Host::Unix(path) => format!("{}/.s.PGSQL.{port}", path.display()),
        }
    });
    hosts.collect::<Vec<_>>().join(",")
}

/// Takes one connection from `pool`, trying again with backoff for up to `wait`: an error that
/// names the server's address and the last attempt's cause once it has not answered.
async fn wait_for_server(pool: &Pool, config: &tokio_postgres::Config, wait: Duration) -> Result<(), StoreError> {
    let started = tokio::time::Instant::now();
    let mut delay = Duration::from_millis(100);
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let error = match pool.get().await {
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        let waited = started.elapsed();
        if waited >= wait {
            let tries = if attempts == 1 { "1 attempt".to_owned() } else { format!("{attempts} attempts") };
            let silent = match (&error, config.get_connect_timeout()) {
                (deadpool_postgres::PoolError::Timeout(_), Some(limit)) => {
                    format!("; the server did not answer within the connect timeout, {limit:?}")
                }
                _ => String::new(),
            };
            let (at, waited) = (address(config), waited.as_secs_f64());
            return Err(StoreError::caused_by(
                format!("cannot reach PostgreSQL at {at} ({tries} over {waited:.1} s{silent})"),
                error,
            ));
        }
        // The last pause ends at the deadline, where one more attempt is made: the whole wait
        // is tried, not one backoff step less.
        let pause = delay.min(wait - waited);
        tracing::warn!(
            "cannot reach PostgreSQL at {} yet ({}); trying again in {pause:?}",
            address(config),
            StoreError::from_cause(error)
        );
        tokio::time::sleep(pause).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
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
        let mut config: tokio_postgres::Config =
            options.url.parse().map_err(|e| StoreError::InvalidInput(format!("database URL: {e}")))?;
        // Every connection looks for tables in the schema (and in `pg_catalog`, always first):
        // the statements name no schema, so they are one text for every schema.
        let search_path = format!("-c search_path=\"{}\"", options.schema);
        let startup = match config.get_options() {
            Some(given) => format!("{given} {search_path}"),
            None => search_path,
        };
        config.options(startup);
        // Operators (and tests) see which schema a connection serves in `pg_stat_activity`.
        if config.get_application_name().is_none() {
            config.application_name(format!("cairn:{}", options.schema));
        }
        config.connect_timeout(options.connect_timeout);
        let manager =
            Manager::from_config(config.clone(), NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            // The whole of a new connection: the socket's connect (above) and the login after it.
            .create_timeout(Some(options.connect_timeout))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(backend)?;
        wait_for_server(&pool, &config, options.startup_wait).await?;
        let sql = Arc::new(Sql::new(&options.schema));
        let (jobs, queue) = mpsc::unbounded_channel();
        let store = PostgresStore {
            pool: pool.clone(),
            sql: Arc::clone(&sql),
            jobs,
            config,
            beats: super::beats::BeatSlot::default(),
            wakeups: Arc::new(Wakeups::new()),
            alive: Arc::new(()),
        };
        store.migrate().await?;
        tokio::spawn(maintain(pool.clone(), Arc::clone(&sql), Arc::downgrade(&store.alive)));
        tokio::spawn(writer(pool, sql, queue));
        Ok(store)
    }

    /// Starts listening on the schema's channel, once.
    pub(crate) fn listen(&self) {
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
    #[cfg(feature = "test-util")]
    pub async fn explain_claim(&self, request: &ClaimRequest) -> Result<Vec<String>, StoreError> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let values = ClaimValues::of(request);
        let explain = format!("EXPLAIN (ANALYZE, BUFFERS) {}", self.sql.claim);
        let plan = tx.query(&explain, &values.params(request)).await.map_err(backend)?;
        tx.rollback().await.map_err(backend)?;
        plan.iter().map(|row| row.try_get::<_, String>(0).map_err(backend)).collect()
    }

    /// How often each statement has run in this database so far, from `pg_stat_statements`
    /// (every statement of the database, whoever sent it: the store's statements name no schema,
    /// so a database of its own is what isolates one store's counts), each statement as the first
    /// 160 characters of its text with whitespace squeezed, leaving out statements that name a
    /// schema (earlier builds', and other tools'; a database holds thousands); `None` when the
    /// extension is not installed here. Taken before and after a workload, the difference counts its
    /// statements; since Cairn never pipelines, each statement is also one round trip. Used by
    /// `cairn bench`.
    #[cfg(feature = "test-util")]
    pub async fn statement_calls(&self) -> Result<Option<Vec<(String, i64)>>, StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        // Where the extension's view is (the store's `search_path` is its own schema alone).
        let installed = client
            .query_opt(
                "SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                 WHERE e.extname = 'pg_stat_statements'",
                &[],
            )
            .await
            .map_err(backend)?;
        let Some(row) = installed else { return Ok(None) };
        let namespace: String = row.try_get(0).map_err(backend)?;
        let rows = client
            .query(
                &format!(
                    "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS q, sum(calls)::bigint
                     FROM \"{namespace}\".pg_stat_statements
                     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                       AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_extension%'
                       AND query !~ '\"\\w+\"\\.\\w'
                     GROUP BY q"
                ),
                &[],
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
    #[cfg(feature = "test-util")]
    pub async fn drop_schema(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        client.batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.sql.schema)).await.map_err(backend)
    }

    /// Vacuums and analyzes every table of this store's schema (`VACUUM (ANALYZE)`), as
    /// autovacuum does on its own some time after many rows change. For a bulk load that is read
    /// at once (benchmarks), or a server whose autovacuum is off: until a table is vacuumed, an
    /// index-only read visits each row's table page as well, and until it is analyzed the planner
    /// guesses its sizes.
    pub async fn vacuum_analyze(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        let tables = client
            .query("SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename", &[&self.sql.schema])
            .await
            .map_err(backend)?;
        for table in &tables {
            let table: &str = table.try_get(0).map_err(backend)?;
            let vacuum = format!("VACUUM (ANALYZE) \"{}\".\"{table}\"", self.sql.schema);
            client.batch_execute(&vacuum).await.map_err(backend)?;
        }
        Ok(())
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
            return Err(StoreError::backend(format!(
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

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
mod tests {
    use crate::PostgresStore;
    use crate::testing::{raw_client, test_store};
    use cairn_journal::Timestamp;
    use cairn_store::JournalStore;
    use cairn_store::RunStore;
    use cairn_store::WorkerStore;
    use cairn_store::{ClaimRequest, NewRun, RunId, RunRecord, WorkflowKey};

    /// Creates runs `ids` of workflow `w` and claims them for owner `me`, leased until `lease_until`.
    async fn claimed(store: &PostgresStore, ids: &[&str], lease_until: i64) -> Vec<RunRecord> {
        let t = Timestamp::from_millis;
        for id in ids {
            let input = serde_json::value::RawValue::from_string("{}".to_owned()).unwrap();
            let new = NewRun::new(
                RunId::new(*id),
                cairn_store::WorkflowName::new("w").expect("a valid name"),
                1,
                input,
                t(1),
            );
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
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = $1",
                    &[&format!("cairn:{}", schema.name)],
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
        assert!(statuses.iter().all(|s| s.held && s.pending.is_none()), "{statuses:?}");
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
                let request = PruneRequest {
                    now: Timestamp::from_millis(100),
                    ended_before: None,
                    events_before: None,
                    limit: 100,
                    dry_run: false,
                };
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
