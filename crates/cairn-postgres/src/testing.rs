//! For tests that need PostgreSQL: a store in a schema of the test's own, dropped afterwards.
//!
//! The server comes from `CAIRN_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`). Without a reachable server, [`test_store`]
//! says so loudly on stderr (past the test harness's capture) and returns `None`, so the caller
//! can skip; with `CAIRN_REQUIRE_POSTGRES=1` it panics instead.

use crate::{PostgresOptions, PostgresStore};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The database tests use when `CAIRN_TEST_DATABASE_URL` is not set.
pub const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A schema made for one test; dropping it drops the schema and everything in it.
#[derive(Debug)]
pub struct TestSchema {
    /// The server's URL.
    pub url: String,
    /// The schema's name.
    pub name: String,
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        run_at_drop(&self.url, format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
    }
}

/// Runs `statement` on the server at `url`, from a fresh runtime on a fresh thread (the test's
/// own runtime may be shutting down); errors are ignored, as in any cleanup.
fn run_at_drop(url: &str, statement: String) {
    let url = url.to_owned();
    let _ = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        runtime.block_on(async {
            if let Ok(client) = connect(&url).await {
                let _ = client.batch_execute(&statement).await;
            }
        });
    })
    .join();
}

/// A plain session on the server at `url`, its connection driven by a task of the current runtime.
async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// The server tests use: `CAIRN_TEST_DATABASE_URL`, or [`DEFAULT_TEST_DATABASE_URL`].
pub fn test_database_url() -> String {
    std::env::var("CAIRN_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_TEST_DATABASE_URL.to_owned())
}

/// A schema or database name for one test, unique in this process and across processes.
fn unique_name(tag: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("cairn_{tag}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst))
}

/// A store in a fresh schema named after `tag`, or `None` when no server answers (see the module).
pub async fn test_store(tag: &str) -> Option<(PostgresStore, TestSchema)> {
    let (url, name) = (test_database_url(), unique_name(tag));
    match PostgresStore::connect(PostgresOptions::new(&url).schema(&name).pool_size(4)).await {
        Ok(store) => Some((store, TestSchema { url, name })),
        Err(error) => unusable(&url, &error.to_string()),
    }
}

/// One schema, emptied and handed out again, for a test that makes many stores one after another
/// (the model test's cases): a fresh schema runs every migration, about 0.2 s of the server's CPU
/// with its drop, and emptying one costs a tenth of that. Dropping it drops the schema.
///
/// Each [`store`](Self::store) after the first cuts the connections of the stores before it, drops
/// the triggers they added (a concurrency rule adds some) and deletes the rows of every table but
/// the migrations, restarting their sequences: the store it returns sees what a fresh schema shows.
#[derive(Debug)]
pub struct ReusedSchema {
    schema: TestSchema,
    /// What the first store made: `None` until then.
    made: std::sync::Mutex<Option<Made>>,
}

/// A [`ReusedSchema`] as its migrations left it.
#[derive(Debug, Clone)]
struct Made {
    /// The triggers the migrations made.
    triggers: Vec<String>,
    /// `LOCK TABLE …`: every table of the schema.
    lock: String,
    /// `DELETE FROM …; SELECT setval(…); …`: every table but the migrations, every sequence.
    deletes: String,
}

impl ReusedSchema {
    /// A schema named after `tag`, made by the first [`store`](Self::store).
    pub fn new(tag: &str) -> Self {
        ReusedSchema {
            schema: TestSchema { url: test_database_url(), name: unique_name(tag) },
            made: std::sync::Mutex::new(None),
        }
    }

    /// A store in the schema, empty as a fresh one, or `None` when no server answers (see the
    /// module).
    pub async fn store(&self) -> Option<PostgresStore> {
        let (url, name) = (&self.schema.url, &self.schema.name);
        let made = self.made.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(made) = &made
            && let Err(error) = empty(url, name, made).await
        {
            return unusable(url, &error.to_string());
        }
        let store = match PostgresStore::connect(PostgresOptions::new(url).schema(name).pool_size(4)).await {
            Ok(store) => store,
            Err(error) => return unusable(url, &error.to_string()),
        };
        if made.is_none() {
            match look(url, name).await {
                Ok(found) => *self.made.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(found),
                Err(error) => return unusable(url, &error.to_string()),
            }
        }
        Some(store)
    }
}

/// The triggers on the tables of schema `$1` (`t`, `c` and `n` their rows of `pg_trigger`,
/// `pg_class` and `pg_namespace`): a query's `FROM` and `WHERE`.
const TRIGGERS: &str = "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal";

/// What schema `name` holds as its migrations left it (see [`Made`]).
async fn look(url: &str, name: &str) -> Result<Made, tokio_postgres::Error> {
    let client = connect(url).await?;
    let triggers = client.query(&format!("SELECT t.tgname::text {TRIGGERS}"), &[&name]).await?;
    // Locked first, so that no transaction of an earlier store (a fold of the ended counts its
    // maintenance began) commits between the deletes and leaves a row behind. DELETE, not
    // TRUNCATE: a few rows each, and TRUNCATE's new files cost 50-100 ms a time. The runs go
    // first: their triggers write to other tables (the ended counts), emptied after them.
    let statements = client
        .query_one(
            "SELECT 'LOCK TABLE ' || (SELECT string_agg(format('%I.%I', schemaname, tablename), ', ')
                                      FROM pg_tables WHERE schemaname = $1) || ' IN ACCESS EXCLUSIVE MODE; ',
                    (SELECT string_agg(format('DELETE FROM %I.%I; ', schemaname, tablename), '' ORDER BY tablename <> 'runs')
                     FROM pg_tables WHERE schemaname = $1 AND tablename <> 'migrations')
                    || coalesce((SELECT string_agg(format('SELECT setval(%L, 1, false); ', format('%I.%I', schemaname, sequencename)), '')
                                 FROM pg_sequences WHERE schemaname = $1), '')",
            &[&name],
        )
        .await?;
    Ok(Made {
        triggers: triggers.iter().map(|row| row.get(0)).collect(),
        lock: statements.get(0),
        deletes: statements.get(1),
    })
}

/// Empties schema `name` (see [`ReusedSchema`]).
async fn empty(url: &str, name: &str, made: &Made) -> Result<(), tokio_postgres::Error> {
    let client = connect(url).await?;
    client
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'cairn:' || $1::text AND pid <> pg_backend_pid()",
            &[&name],
        )
        .await?;
    let added = client
        .query(
            &format!("SELECT format('DROP TRIGGER %I ON %I.%I; ', t.tgname, n.nspname, c.relname) {TRIGGERS} AND NOT t.tgname::text = ANY($2)"),
            &[&name, &made.triggers],
        )
        .await?;
    let drops: String = added.iter().map(|row| row.get::<_, String>(0)).collect();
    client.batch_execute(&format!("BEGIN; {}{drops}{}COMMIT", made.lock, made.deletes)).await
}

/// A database made for one test; dropping it drops the database (its connections cut).
#[derive(Debug)]
pub struct TestDatabase {
    /// The server's URL (the database the test's database was made from).
    pub url: String,
    /// The database's name.
    pub name: String,
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        run_at_drop(&self.url, format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name));
    }
}

/// `url` with its database name replaced by `database` (`postgres://u@h:5432/db?x=y` keeps its
/// user, host and parameters).
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

/// A store in a database of its own, named after `tag`, with `pg_stat_statements` created in it
/// when the server can (for tests that count the statements of one store: they name no schema,
/// so only a database tells one store's apart); `None` when no server answers, as
/// [`test_store`].
pub async fn test_database_store(tag: &str) -> Option<(PostgresStore, TestDatabase)> {
    let (url, name) = (test_database_url(), unique_name(tag));
    let made = async { connect(&url).await?.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await };
    if let Err(error) = made.await {
        return unusable(&url, &error.to_string());
    }
    let database = TestDatabase { url: url.clone(), name: name.clone() };
    let own = with_database(&url, &name);
    if let Ok(client) = connect(&own).await {
        // Needs a superuser; without it the counts are simply unavailable.
        let _ = client.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").await;
    }
    match PostgresStore::connect(PostgresOptions::new(&own).pool_size(4)).await {
        Ok(store) => Some((store, database)),
        Err(error) => unusable(&url, &error.to_string()),
    }
}

/// No usable server at `url`: panics under `CAIRN_REQUIRE_POSTGRES=1`, else says so loudly (once
/// per test binary) and returns `None`, for the caller to skip.
pub fn unusable<T>(url: &str, error: &str) -> Option<T> {
    if std::env::var("CAIRN_REQUIRE_POSTGRES").as_deref() == Ok("1") {
        panic!("CAIRN_REQUIRE_POSTGRES=1 but PostgreSQL at {url} is not usable: {error}")
    }
    static LOUD: std::sync::Once = std::sync::Once::new();
    LOUD.call_once(|| {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\n!!! SKIPPED: PostgreSQL tests (no server at {url}: {error}).\n!!! Set CAIRN_TEST_DATABASE_URL, or CAIRN_REQUIRE_POSTGRES=1 to fail instead.\n"
        );
    });
    None
}

/// A plain connection to `url` (for this crate's tests that act as another session).
#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
pub(crate) async fn raw_client(url: &str) -> tokio_postgres::Client {
    connect(url).await.unwrap()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_url_names_another_database() {
        let with = super::with_database;
        assert_eq!(with("postgres://u@h:5432/postgres", "t"), "postgres://u@h:5432/t");
        assert_eq!(with("postgres://u@h/db?sslmode=disable", "t"), "postgres://u@h/t?sslmode=disable");
        assert_eq!(with("postgres://u@h:5432", "t"), "postgres://u@h:5432/t");
    }
}
