//! Maintenance: the ended-status deltas folded into their counts, and their table vacuumed.

use super::prelude::*;
use super::sql::Sql;

/// How often the ended-status deltas are folded into their counters in the background.
pub(super) const FOLD_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Every how many folds the deltas table is vacuumed.
pub(super) const VACUUM_EVERY_FOLDS: u32 = 5;

/// Folds the ended-status deltas into their counters every [`FOLD_EVERY`] and vacuums their
/// table now and then, until the store is dropped: `workflow_counts` then never has many deltas
/// to fold, nor the dead rows of folded ones to skip (1,000,000 runs ending unread made its first
/// call 1.4 s and later ones 300 ms, until autovacuum came by).
pub(super) async fn maintain(pool: Pool, sql: Arc<Sql>, alive: std::sync::Weak<()>) {
    let mut folds = 0u32;
    warn_without_autovacuum(&pool).await;
    loop {
        tokio::time::sleep(FOLD_EVERY).await;
        if alive.strong_count() == 0 {
            return;
        }
        let Ok(mut client) = pool.get().await else { continue };
        let folded = match client.prepare_cached(&sql.fold_ended_counts).await {
            Ok(statement) => client.execute(&statement, &[]).await.map(drop),
            Err(error) => Err(error),
        };
        // Counting marks the dead index entries it meets, so the next count skips them.
        let folded = match folded {
            Ok(()) => status_counts(&mut client, &sql).await.map(drop),
            Err(error) => Err(error),
        };
        folds += 1;
        let vacuumed = if folds.is_multiple_of(VACUUM_EVERY_FOLDS) {
            client.batch_execute(&sql.vacuum_deltas).await
        } else {
            Ok(())
        };
        if let Err(error) = folded.and(vacuumed) {
            // A schema being dropped (tests, benches) or a server going away: the next round retries.
            tracing::debug!("cairn-postgres maintenance: {error}");
        }
    }
}

/// Warns once when the server's autovacuum is off: nothing then vacuums or analyzes Cairn's
/// tables, so reads slow down as runs accumulate (a page of runs filtered by input, read right
/// after a million runs were stored: p99 38 ms, and 8–12 ms once vacuumed).
async fn warn_without_autovacuum(pool: &Pool) {
    let Ok(client) = pool.get().await else { return };
    if let Ok(row) = client.query_one("SELECT current_setting('autovacuum') = 'on'", &[]).await
        && matches!(row.try_get::<_, bool>(0), Ok(false))
    {
        tracing::warn!(
            "PostgreSQL's autovacuum is off on this server: nothing vacuums or analyzes Cairn's tables, so \
             lists and counts slow down as runs accumulate; turn it on (`autovacuum = on`) or run \
             `VACUUM (ANALYZE)` on the schema's tables regularly"
        );
    }
}

/// The rows of `sql.workflow_counts`. Through plain index scans, not bitmap ones: a plain scan
/// marks the dead entries it meets in the unended statuses' partial indexes (every run passes
/// through `pending` and `running`, so until autovacuum comes by those indexes hold an entry per
/// run that ever had the status), and later counts skip them; bitmap scans visit them every time
/// (200,000 runs just ended: 147 ms a count, then 20 ms; with bitmap scans 20 ms every time).
/// Nor sequential ones: each unended status is counted from a partial index over exactly its
/// runs, but a table never analyzed yet (a store filled in one go) estimates `waiting_for IS NOT
/// NULL` at nearly every run, and a sequential scan of them all then looked cheaper (83 ms a
/// count at 300,000 runs, 282 ms at 1,000,000). Without JIT, which the cost of a disabled
/// sequential scan (of the small deltas table) would otherwise set off.
pub(super) async fn status_counts(
    client: &mut deadpool_postgres::Client,
    sql: &Sql,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.batch_execute("SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off; SET LOCAL jit = off").await?;
    let statement = tx.prepare_cached(&sql.workflow_counts).await?;
    let rows = tx.query(&statement, &[]).await?;
    tx.commit().await?;
    Ok(rows)
}
