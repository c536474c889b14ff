//! The schema, as ordered migrations applied once each under an advisory lock.

/// Migrations in order, one file each under `sql/migrations/`; `{schema}` is replaced by the
/// quoted schema name. Never edit one that has shipped: add another
/// (`shipped_migrations_keep_their_text` checks each file's hash).
pub(crate) const MIGRATIONS: &[&str] = &[
    include_str!("../sql/migrations/01.sql"),
    include_str!("../sql/migrations/02.sql"),
    include_str!("../sql/migrations/03.sql"),
    include_str!("../sql/migrations/04.sql"),
    include_str!("../sql/migrations/05.sql"),
    include_str!("../sql/migrations/06.sql"),
    include_str!("../sql/migrations/07.sql"),
    include_str!("../sql/migrations/08.sql"),
    include_str!("../sql/migrations/09.sql"),
    include_str!("../sql/migrations/10.sql"),
    include_str!("../sql/migrations/11.sql"),
    include_str!("../sql/migrations/12.sql"),
    include_str!("../sql/migrations/13.sql"),
    include_str!("../sql/migrations/14.sql"),
    include_str!("../sql/migrations/15.sql"),
    include_str!("../sql/migrations/16.sql"),
    include_str!("../sql/migrations/17.sql"),
    include_str!("../sql/migrations/18.sql"),
    include_str!("../sql/migrations/19.sql"),
    include_str!("../sql/migrations/20.sql"),
    include_str!("../sql/migrations/21.sql"),
    include_str!("../sql/migrations/22.sql"),
    include_str!("../sql/migrations/23.sql"),
];

/// Checks a schema name: letters, digits and `_`, starting with a letter or `_`, at most 63 bytes.
pub(crate) fn valid_schema_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
mod tests {
    use super::MIGRATIONS;
    use crate::testing::{raw_client as client, test_store};
    use crate::{PostgresOptions, PostgresStore};
    use cairn_store::JournalStore;
    use cairn_store::RunStore;
    use cairn_store::{ClaimRequest, RunFilter, RunId, WorkflowKey};

    /// FNV-1a, 64 bits: a fingerprint of a migration's text.
    fn fingerprint(text: &str) -> u64 {
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
    }

    /// Each shipped migration's text, as it shipped: a schema written by an earlier build applied
    /// exactly these, so none may change (add a migration instead).
    #[test]
    fn shipped_migrations_keep_their_text() {
        const SHIPPED: [u64; 22] = [
            0x38d211eff51715eb,
            0x0b37c69f30a0f8a5,
            0x60ee938850e129c4,
            0xd5cbcce2c94d45dc,
            0x4870776ccfaf12b5,
            0x04d2a50771b3b245,
            0xbdf61a31bdc276ee,
            0x89c9d97a434ed1ef,
            0x686bd9158daa7b06,
            0x36a03358c4e30a02,
            0xeb8ffaa8801a4a8e,
            0x0ae8a6cabd137fa6,
            0xa72e5b32c4ed6ba5,
            0xbb3c275628c8c20f,
            0x866cd92bb88be4cc,
            0x3d39260bd9fd66b5,
            0x292e77702c68c6bb,
            0x0b252176186a9ce7,
            0x619c48a4263f24c4,
            0x342a4ec3f5e8c22d,
            0xd171ba8c043411de,
            0x7c410b31ab5cffd3,
        ];
        let now: Vec<u64> = MIGRATIONS.iter().map(|text| fingerprint(text)).collect();
        assert_eq!(now[..SHIPPED.len()], SHIPPED, "a shipped migration's text changed");
    }

    /// Workers starting together on a fresh schema each apply nothing twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_starts_migrate_once() {
        // The first store only reserves a schema name (and drops it at the end).
        let Some((first, schema)) = test_store("migrate_race").await else { return };
        first.drop_schema().await.unwrap();
        let starts: Vec<_> = (0..4)
            .map(|_| {
                let options = PostgresOptions::new(&schema.url).schema(&schema.name).pool_size(2);
                tokio::spawn(PostgresStore::connect(options))
            })
            .collect();
        for start in starts {
            start.await.unwrap().unwrap();
        }
        let client = client(&schema.url).await;
        let rows = client
            .query(&format!("SELECT version FROM \"{}\".migrations ORDER BY version", schema.name), &[])
            .await
            .unwrap();
        let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(versions, (1..=MIGRATIONS.len() as i32).collect::<Vec<_>>());
    }

    /// A schema made by the first release upgrades in place: its runs stay readable and claimable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn upgrades_a_schema_from_migration_one() {
        let Some((first, schema)) = test_store("migrate_up").await else { return };
        first.drop_schema().await.unwrap();
        let s = format!("\"{}\"", schema.name);
        let client = client(&schema.url).await;
        client
            .batch_execute(&format!(
                "CREATE SCHEMA {s};
                 CREATE TABLE {s}.migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());
                 {}
                 INSERT INTO {s}.migrations (version) VALUES (1);
                 INSERT INTO {s}.runs (id, workflow, version, status, input, created_at, updated_at, last_seq)
                     VALUES ('old-run', 'order', 1, 'pending', '{{}}', 5, 5, 1),
                            ('old-sharded', 'order', 1, 'cancelled', '{{\"shard\": 1}}', 6, 6, 0),
                            ('old-nul', 'order', 1, 'cancelled', '{{\"shard\": 1, \"a\": \"\\u0000\"}}', 7, 7, 0);
                 INSERT INTO {s}.journal (run_id, seq, at, kind, path, data)
                     VALUES ('old-run', 1, 5, 'started', NULL, '{{\"started\":{{\"workflow\":\"order\",\"version\":1,\"input\":{{}}}}}}');",
                MIGRATIONS[0].replace("{schema}", &s)
            ))
            .await
            .unwrap();
        let store =
            PostgresStore::connect(PostgresOptions::new(&schema.url).schema(&schema.name).pool_size(2)).await.unwrap();
        let journal = store.read_journal(&RunId::new("old-run")).await.unwrap();
        assert_eq!(journal.len(), 1);
        let now = cairn_journal::Timestamp::from_millis(10);
        let claimed = store
            .claim(&ClaimRequest {
                owner: "w".into(),
                workflows: vec![WorkflowKey { name: "order".into(), version: 1 }],
                now,
                lease_now: now,
                lease_until: cairn_journal::Timestamp::from_millis(1_000),
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec!["old-run"]);
        // The inputs are indexed, but for one with a NUL, which no filter can match and which
        // fails neither an indexed filter nor a scan.
        for (needle, expected) in [
            (serde_json::json!({"shard": 1}), vec!["old-sharded"]),
            (serde_json::json!({"a": "x"}), vec![]),
            (serde_json::json!({"tags": ["x"]}), vec![]),
        ] {
            let filter = RunFilter { input_contains: Some(needle.clone()), ..RunFilter::default() };
            let page = store.list_runs(&filter).await.unwrap();
            assert_eq!(page.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), expected, "{needle}");
        }
        let collation: Option<String> = client
            .query_one(
                "SELECT collation_name::text FROM information_schema.columns
                 WHERE table_schema = $1 AND table_name = 'runs' AND column_name = 'id'",
                &[&schema.name],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(collation.as_deref(), Some("C"));
    }
}
