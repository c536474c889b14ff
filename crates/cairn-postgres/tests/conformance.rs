//! The conformance suite against a real PostgreSQL server.
//!
//! The server comes from `CAIRN_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); every test works in a schema of its own, dropped
//! afterwards. Without a reachable server the tests are skipped with a loud message, unless
//! `CAIRN_REQUIRE_POSTGRES=1`, under which they fail.

use cairn_postgres::testing::{ReusedSchema, TestSchema, test_store};
use cairn_store::Store;
use std::sync::Arc;

async fn postgres() -> Option<(Arc<dyn Store>, TestSchema)> {
    let (store, schema) = test_store("conformance").await?;
    Some((Arc::new(store) as Arc<dyn Store>, schema))
}

/// A store for one of the model test's cases, and its guard (the schema outlives the cases).
type ModelStore = (Arc<dyn Store>, ());

/// The model test's stores: one schema, emptied for each of its 256 cases (a fresh schema each
/// made the test take 52 s, nearly all of it the server running migrations).
fn model_stores() -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = Option<ModelStore>>>> {
    let schema = Arc::new(ReusedSchema::new("model"));
    move || {
        let schema = Arc::clone(&schema);
        Box::pin(async move { Some((Arc::new(schema.store().await?) as Arc<dyn Store>, ())) })
    }
}

cairn_store_conformance::conformance_tests!(postgres, postgres, model: model_stores());

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
            .create_run(NewRun::new(
                RunId::new(format!("r{i}")),
                cairn_store::WorkflowName::new("w").expect("a valid name"),
                1,
                raw("1"),
                t(i),
            ))
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
    let step = Event::StepCompleted {
        path: StepPath::parse("s").unwrap(),
        ordinal: 0,
        attempt: 1,
        output: raw("2"),
        started_at: None,
    };
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
            batched: false,
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
