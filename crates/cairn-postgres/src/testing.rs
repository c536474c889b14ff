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
        let (url, name) = (self.url.clone(), self.name.clone());
        // A fresh runtime on a fresh thread: the test's own runtime may be shutting down.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            runtime.block_on(async {
                if let Ok((client, connection)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                    tokio::spawn(connection);
                    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE")).await;
                }
            });
        })
        .join();
    }
}

/// A store in a fresh schema named after `tag`, or `None` when no server answers (see the module).
pub async fn test_store(tag: &str) -> Option<(PostgresStore, TestSchema)> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let url = std::env::var("CAIRN_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_TEST_DATABASE_URL.to_owned());
    let name = format!("cairn_{tag}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
    match PostgresStore::connect(PostgresOptions::new(&url).schema(&name).pool_size(4)).await {
        Ok(store) => Some((store, TestSchema { url, name })),
        Err(error) if std::env::var("CAIRN_REQUIRE_POSTGRES").as_deref() == Ok("1") => {
            panic!("CAIRN_REQUIRE_POSTGRES=1 but PostgreSQL at {url} is not usable: {error}")
        }
        Err(error) => {
            // Once per test binary, straight to stderr.
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
    }
}

/// A plain connection to `url` (for this crate's tests that act as another session).
#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
pub(crate) async fn raw_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}
