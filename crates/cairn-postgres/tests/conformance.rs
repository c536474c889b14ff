//! The conformance suite against a real PostgreSQL server.
//!
//! The server comes from `CAIRN_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); every test works in a schema of its own, dropped
//! afterwards. Without a reachable server the tests are skipped with a loud message, unless
//! `CAIRN_REQUIRE_POSTGRES=1`, under which they fail.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use cairn_postgres::{PostgresOptions, PostgresStore};
use cairn_store::Store;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

fn url() -> String {
    std::env::var("CAIRN_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// Drops the test's schema when the test ends.
struct Schema {
    url: String,
    name: String,
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        // A fresh runtime on a fresh thread: the test's runtime may be shutting down.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
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

async fn postgres() -> Option<(Arc<dyn Store>, Schema)> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!("cairn_test_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
    let url = url();
    match PostgresStore::connect(PostgresOptions::new(&url).schema(&name).pool_size(4)).await {
        Ok(store) => Some((Arc::new(store) as Arc<dyn Store>, Schema { url, name })),
        Err(error) if std::env::var("CAIRN_REQUIRE_POSTGRES").as_deref() == Ok("1") => {
            panic!("CAIRN_REQUIRE_POSTGRES=1 but PostgreSQL at {url} is not usable: {error}")
        }
        Err(error) => {
            // Written straight to stderr, past the test harness's capture, once per test binary.
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

cairn_store_conformance::conformance_tests!(postgres, postgres);
