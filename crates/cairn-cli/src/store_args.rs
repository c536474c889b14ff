//! Where the runs are: the store options every command that opens a store takes.

use anyhow::{Context, Result, bail};
use cairn::SqliteStore;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Where the runs are: an SQLite file (`--db`, the default), PostgreSQL (`--database-url`) or a
/// JSONL data directory (`--data-dir`).
#[derive(Args, Clone)]
pub(crate) struct StoreArgs {
    /// SQLite database file.
    #[arg(long, env = "CAIRN_DB", default_value = "cairn.db", global = true)]
    db: PathBuf,
    /// PostgreSQL URL (e.g. postgres://user@host/db); takes precedence over --db.
    #[arg(long, env = "CAIRN_DATABASE_URL", global = true)]
    database_url: Option<String>,
    /// PostgreSQL schema holding Cairn's tables.
    #[arg(long, env = "CAIRN_SCHEMA", default_value = "cairn", global = true)]
    schema: String,
    /// JSONL data directory (one file per run); takes precedence over --db.
    #[arg(long, env = "CAIRN_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// How long one connection attempt to PostgreSQL may take, its login included (`10s`).
    #[arg(long, env = "CAIRN_CONNECT_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration, global = true)]
    connect_timeout: Duration,
    /// How long to keep trying to reach PostgreSQL at start, with backoff, before giving up
    /// (`2m`; `0s`: one attempt). Default: 60s for `serve` and `demo`, one attempt otherwise.
    #[arg(long, env = "CAIRN_STARTUP_WAIT", value_parser = humantime::parse_duration, global = true)]
    startup_wait: Option<Duration>,
}

/// How long a worker command (`serve`, `demo`) keeps trying to reach PostgreSQL at start unless
/// `--startup-wait` says otherwise: a process manager may start it before the database.
const WORKER_STARTUP_WAIT: Duration = Duration::from_secs(60);

/// What a command does with the store it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Only reads: an SQLite file is opened read-only and nothing is written (so it works on a
    /// read-only file and on a full disk), unless an older build wrote it: then it is migrated
    /// first, as any command does.
    Read,
    /// Reads and writes an existing store.
    Write,
    /// Reads and writes, creating an SQLite file or data directory if there is none.
    Create,
}

impl StoreArgs {
    /// Opens the store for `access`; an SQLite file must already exist unless `Create`.
    pub(crate) async fn open(&self, access: Access) -> Result<std::sync::Arc<dyn cairn::Store>> {
        self.open_waiting(access, Duration::ZERO).await
    }

    /// Opens the store for a worker (`Create`), waiting up to a minute for PostgreSQL to answer
    /// unless `--startup-wait` says otherwise.
    pub(crate) async fn open_worker(&self) -> Result<std::sync::Arc<dyn cairn::Store>> {
        self.open_waiting(Access::Create, WORKER_STARTUP_WAIT).await
    }

    async fn open_waiting(&self, access: Access, wait: Duration) -> Result<std::sync::Arc<dyn cairn::Store>> {
        let create = access == Access::Create;
        if let Some(url) = &self.database_url {
            let options = cairn_postgres::PostgresOptions::new(url)
                .schema(&self.schema)
                .connect_timeout(self.connect_timeout)
                .startup_wait(self.startup_wait.unwrap_or(wait));
            let store = cairn_postgres::PostgresStore::connect(options)
                .await
                .with_context(|| format!("cannot open PostgreSQL schema {:?}", self.schema))?;
            return Ok(std::sync::Arc::new(store));
        }
        if let Some(dir) = &self.data_dir {
            if !create && !dir.exists() {
                bail!("no Cairn data directory at {}", dir.display());
            }
            let store =
                cairn::store::JsonlStore::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
            return Ok(std::sync::Arc::new(store));
        }
        if !create && !self.db.exists() {
            bail!("no Cairn database at {} (use --db PATH or --database-url URL)", self.db.display());
        }
        // A file an older build wrote is migrated first (which writes) even to be read.
        let migrate = access == Access::Read && SqliteStore::needs_migrating(&self.db).unwrap_or(false);
        let store = match access {
            Access::Read if !migrate => SqliteStore::open_read_only(&self.db),
            _ => SqliteStore::open(&self.db),
        }
        .with_context(|| format!("cannot open {}", self.db.display()))?;
        Ok(std::sync::Arc::new(store))
    }

    /// A short description of the store for messages.
    pub(crate) fn describe(&self) -> String {
        match (&self.database_url, &self.data_dir) {
            (Some(_), _) => format!("PostgreSQL schema {}", self.schema),
            (None, Some(dir)) => format!("JSONL directory {}", dir.display()),
            (None, None) => self.db.display().to_string(),
        }
    }
}
