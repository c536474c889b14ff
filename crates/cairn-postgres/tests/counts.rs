//! Counts by workflow and status stay exact while the ended-status deltas are folded by two
//! stores at once (two workers' maintenance tasks on one schema) as runs end.

use cairn_journal::Timestamp;
use cairn_postgres::{PostgresOptions, PostgresStore, testing::test_store};
use cairn_store::*;
use serde_json::value::RawValue;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_stay_exact_while_two_workers_fold_at_once() {
    let Some((a, schema)) = test_store("folds").await else { return };
    let b = PostgresStore::connect(PostgresOptions::new(&schema.url).schema(&schema.name).pool_size(4)).await.unwrap();
    let input = RawValue::from_string("1".to_owned()).unwrap();
    let at = Timestamp::from_millis(1);
    // Six rounds of 100 runs over about six seconds: each store's task folds (every 2 s) while
    // the other's does and while runs end; both stores count in between.
    for round in 0..6 {
        for i in 0..100 {
            let (creator, canceller) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            let id = RunId::new(format!("r{round}-{i}"));
            creator
                .create_run(NewRun::new(
                    id.clone(),
                    cairn_store::WorkflowName::new("order").expect("a valid name"),
                    1,
                    input.clone(),
                    at,
                ))
                .await
                .unwrap();
            if i % 4 != 3 {
                let cancel = ControlRequest { run_id: id, reason: "test".into(), at, lease_now: at };
                canceller.cancel(cancel).await.unwrap();
            }
        }
        let counted = a.workflow_counts().await.unwrap();
        assert_eq!(counted, b.workflow_counts().await.unwrap());
        let cancelled: u64 = counted.iter().filter(|c| c.status == RunStatus::Cancelled).map(|c| c.runs).sum();
        assert_eq!(cancelled, 75 * (round + 1), "after round {round}: {counted:?}");
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let expected = vec![
        WorkflowCount { workflow: "order".into(), status: RunStatus::Cancelled, runs: 450 },
        WorkflowCount { workflow: "order".into(), status: RunStatus::Pending, runs: 150 },
    ];
    assert_eq!(a.workflow_counts().await.unwrap(), expected);
    assert_eq!(b.workflow_counts().await.unwrap(), expected);
    // Everything was folded, once.
    let (client, connection) = tokio_postgres::connect(&schema.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let sql = format!("SELECT count(*), coalesce(sum(runs), 0)::bigint FROM \"{}\".ended_counts", schema.name);
    let folded = client.query_one(&sql, &[]).await.unwrap();
    assert_eq!((folded.get::<_, i64>(0), folded.get::<_, i64>(1)), (1, 450));
    let unfolded = format!("SELECT count(*) FROM \"{}\".ended_deltas", schema.name);
    assert_eq!(client.query_one(&unfolded, &[]).await.unwrap().get::<_, i64>(0), 0);
}
