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

/// Appends submitted together are committed together (one round of the writer), and each still
/// gets its own outcome: progress and finishes applied, stale epochs and sequences refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_submitted_together_keep_their_own_outcomes() {
    use cairn_journal::{Event, StepPath, Timestamp};
    use cairn_store::*;
    use serde_json::value::RawValue;
    let Some((store, _schema)) = postgres().await else { return };
    let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
    let t = Timestamp::from_millis;
    for i in 0..12 {
        store
            .create_run(NewRun {
                id: RunId::new(format!("r{i}")),
                workflow: "w".into(),
                version: 1,
                input: raw("1"),
                idempotency_key: None,
                created_at: t(i),
            })
            .await
            .unwrap();
    }
    let claimed = store
        .claim(&ClaimRequest {
            owner: "me".into(),
            workflows: vec![WorkflowKey { name: "w".into(), version: 1 }],
            now: t(100),
            lease_now: t(100),
            lease_until: t(100_000),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 12);
    let step = Event::StepCompleted { path: StepPath::parse("s").unwrap(), ordinal: 0, attempt: 1, output: raw("2") };
    let appends = claimed.iter().enumerate().map(|(i, run)| {
        let (epoch, after_seq, update, events) = match i % 4 {
            0 => (run.epoch, 1, RunUpdate::Progress, vec![step.clone()]),
            1 => (
                run.epoch,
                1,
                RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("9")), error: None, at: t(200) },
                vec![step.clone(), Event::Completed { output: raw("9") }],
            ),
            2 => (run.epoch + 7, 1, RunUpdate::Progress, vec![step.clone()]),
            _ => (run.epoch, 5, RunUpdate::Progress, vec![step.clone()]),
        };
        store.append(Append {
            run_id: run.id.clone(),
            epoch,
            after_seq,
            events,
            at: t(150),
            update,
            consume_signal: None,
        })
    });
    let outcomes = futures_join(appends.collect()).await;
    for (i, outcome) in outcomes.iter().enumerate() {
        let run = store.get_run(&claimed[i].id).await.unwrap().unwrap();
        let journal = store.read_journal(&run.id).await.unwrap();
        match i % 4 {
            0 => {
                assert!(outcome.is_ok(), "{outcome:?}");
                assert_eq!((run.status, run.last_seq, journal.len()), (RunStatus::Running, 2, 2));
            }
            1 => {
                assert!(outcome.is_ok(), "{outcome:?}");
                assert_eq!((run.status, run.last_seq, journal.len()), (RunStatus::Completed, 3, 3));
                assert_eq!(run.output.unwrap().get(), "9");
                assert_eq!(run.lease_owner, None);
            }
            2 => {
                assert!(matches!(outcome, Err(StoreError::Fenced { .. })), "{outcome:?}");
                assert_eq!((run.last_seq, journal.len()), (1, 1));
            }
            _ => {
                assert!(matches!(outcome, Err(StoreError::SequenceConflict { .. })), "{outcome:?}");
                assert_eq!((run.last_seq, journal.len()), (1, 1));
            }
        }
    }
}

/// Awaits boxed store futures together (all were submitted when created).
async fn futures_join(futures: Vec<cairn_store::StoreFuture<'_, ()>>) -> Vec<Result<(), cairn_store::StoreError>> {
    let mut out = Vec::with_capacity(futures.len());
    for future in futures {
        out.push(future.await);
    }
    out
}
