//! Reading rows: the column lists, and rows decoded into records.

use crate::prelude::*;
use crate::writer::backend;

/// A run's columns in the order [`row_to_run`] reads them, with the three a running run's head
/// holds (migration 25) as the expressions given.
macro_rules! run_columns {
    ($last_seq:expr, $updated_at:expr, $recoveries:expr) => {
        concat!(
            "id, workflow, version, status, suspend_reason, input, output, error, idempotency_key, created_at, ",
            $updated_at,
            " AS updated_at, completed_at, wake_at, lease_owner, lease_expires_at, epoch, ",
            $last_seq,
            " AS last_seq, request, request_reason, ",
            $recoveries,
            " AS recoveries, deadline_at, retention_ms, delete_after, restarted_from, parent, continued_from, \
             continued_as, flow_key, flow_hold, waiting_for, priority, fair_key, fair_seq, debounce_key, debounce_until"
        )
    };
}

/// A run as reads see it: a running run's head folded in (see [`folded!`]).
pub(super) const RUN_COLUMNS: &str = run_columns!(folded!("last_seq"), folded!("updated_at"), folded!("recoveries"));

/// A run's row as it is, for a statement that has just folded the head in (the claim).
const RUN_ROW_COLUMNS: &str = run_columns!("last_seq", "updated_at", "recoveries");

/// [`RUN_COLUMNS`] with `null` for the input and no output: what a list that shows neither
/// reads ([`RunFilter::without_payloads`](cairn_store::RunFilter::without_payloads)).
pub(super) static RUN_SUMMARY_COLUMNS: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| RUN_COLUMNS.replacen("input, output", "'null' AS input, NULL AS output", 1));

/// The claim: the first ready runs in claim order (`cairn_journal::flow::claim_rank`), leased.
/// Each kind of ready run is read from its own index in order and cut at the limit before they
/// are merged, so a claim reads about `limit` rows of each however many runs are queued.
/// A run taken over from a lapsed lease has its old head folded in (its journal end, and its
/// recoveries counted on from the head's); the claimer then makes each claimed run's head
/// (`Writer::make_head`). Parameters: see [`claim_params`].
pub(super) static CLAIM: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "UPDATE runs SET status = 'running', suspend_reason = NULL, wake_at = NULL, lease_owner = ?1,
                 lease_expires_at = ?2, epoch = epoch + 1, updated_at = ?3, {fold},
                 recoveries = CASE WHEN status = 'running'
                     THEN coalesce({head_recoveries}, recoveries) + 1 ELSE recoveries END
             WHERE id IN (
                 SELECT id FROM (
                     SELECT * FROM (
                         SELECT id, priority, fair_seq, created_at AS due FROM runs INDEXED BY runs_ready
                         WHERE status = 'pending' AND waiting_for IS NULL
                           AND (workflow || '@' || version) IN (SELECT value FROM json_each(?5))
                         ORDER BY priority DESC, fair_seq, created_at, id LIMIT ?6)
                     UNION ALL
                     SELECT * FROM (
                         SELECT id, priority, fair_seq, wake_at AS due FROM runs INDEXED BY runs_timer
                         WHERE status = 'suspended' AND wake_at <= ?3 AND (flow_key IS NULL OR flow_hold = 1)
                           AND (workflow || '@' || version) IN (SELECT value FROM json_each(?5))
                         ORDER BY wake_at, id LIMIT ?6)
                     UNION ALL
                     SELECT * FROM (
                         SELECT id, priority, fair_seq, lease_expires_at AS due FROM runs INDEXED BY runs_leased
                         WHERE status = 'running' AND lease_expires_at <= ?4
                           AND (workflow || '@' || version) IN (SELECT value FROM json_each(?5))
                         ORDER BY lease_expires_at, id LIMIT ?6))
                 ORDER BY priority DESC, fair_seq, due, id LIMIT ?6)
             RETURNING {RUN_ROW_COLUMNS}",
        fold = concat!("last_seq = ", folded!("last_seq")),
        head_recoveries = head!("recoveries"),
    )
});

/// A claim's workflow versions as the JSON array of tags its statement reads.
pub(super) fn claim_tags(request: &ClaimRequest) -> Result<String, StoreError> {
    let tags: Vec<String> = request.workflows.iter().map(WorkflowKey::tag).collect();
    serde_json::to_string(&tags).map_err(|e| StoreError::InvalidInput(e.to_string()))
}

/// The parameters of [`CLAIM`] for `request`, with its `tags` from [`claim_tags`], taking at
/// most `limit` runs.
pub(super) fn claim_params<'a>(
    request: &'a ClaimRequest,
    tags: &'a str,
    limit: usize,
) -> (&'a str, i64, i64, i64, &'a str, i64) {
    (
        &request.owner,
        request.lease_until.as_millis(),
        request.now.as_millis(),
        request.lease_now.as_millis(),
        tags,
        limit as i64,
    )
}

pub(super) const SCHEDULE_COLUMNS: &str =
    "name, workflow, spec, input, paused, next_fire_at, last_fired_at, created_at, updated_at";

pub(super) fn row_to_schedule(row: &Row<'_>) -> rusqlite::Result<Result<ScheduleRecord, StoreError>> {
    let ts = |v: Option<i64>| v.map(Timestamp::from_millis);
    let input: String = row.get(3)?;
    Ok((|| {
        Ok(ScheduleRecord {
            name: row.get(0).map_err(backend)?,
            workflow: WorkflowName::read_back(&row.get::<_, String>(1).map_err(backend)?),
            spec: row.get(2).map_err(backend)?,
            input: raw(input)?,
            paused: row.get::<_, i64>(4).map_err(backend)? != 0,
            next_fire_at: ts(row.get(5).map_err(backend)?),
            last_fired_at: ts(row.get(6).map_err(backend)?),
            created_at: Timestamp::from_millis(row.get(7).map_err(backend)?),
            updated_at: Timestamp::from_millis(row.get(8).map_err(backend)?),
        })
    })())
}

pub(super) const RULES: &str = "SELECT workflow, key, lim, hold FROM concurrency_rules";

pub(super) fn row_to_rule(row: &Row<'_>) -> rusqlite::Result<ConcurrencyRule> {
    Ok(ConcurrencyRule {
        workflow: row.get(0)?,
        key: row.get(1)?,
        limit: row.get(2)?,
        hold_suspended: row.get::<_, i64>(3)? != 0,
    })
}

pub(super) fn raw(text: String) -> Result<Box<RawValue>, StoreError> {
    RawValue::from_string(text).map_err(|e| StoreError::Corrupt(format!("stored JSON is invalid: {e}")))
}

pub(super) fn row_to_run(row: &Row<'_>) -> rusqlite::Result<Result<RunRecord, StoreError>> {
    let status: String = row.get(3)?;
    let reason: Option<String> = row.get(4)?;
    let input: String = row.get(5)?;
    let output: Option<String> = row.get(6)?;
    let ts = |v: Option<i64>| v.map(Timestamp::from_millis);
    let record = (|| {
        Ok(RunRecord {
            id: RunId::new(row.get::<_, String>(0).map_err(backend)?),
            workflow: WorkflowName::read_back(&row.get::<_, String>(1).map_err(backend)?),
            version: row.get(2).map_err(backend)?,
            status: RunStatus::parse_stored(&status)?,
            suspend_reason: reason.as_deref().and_then(SuspendReason::parse),
            input: raw(input)?,
            output: output.map(raw).transpose()?,
            error: row.get(7).map_err(backend)?,
            idempotency_key: row
                .get::<_, Option<String>>(8)
                .map_err(backend)?
                .as_deref()
                .map(IdempotencyKey::read_back),
            created_at: Timestamp::from_millis(row.get(9).map_err(backend)?),
            updated_at: Timestamp::from_millis(row.get(10).map_err(backend)?),
            completed_at: ts(row.get(11).map_err(backend)?),
            wake_at: ts(row.get(12).map_err(backend)?),
            lease_owner: row.get(13).map_err(backend)?,
            lease_expires_at: ts(row.get(14).map_err(backend)?),
            epoch: row.get::<_, i64>(15).map_err(backend)? as u64,
            last_seq: row.get::<_, i64>(16).map_err(backend)? as u64,
            pending: Request::from_parts(
                row.get::<_, Option<String>>(17).map_err(backend)?.as_deref(),
                row.get(18).map_err(backend)?,
            )?,
            recoveries: row.get::<_, i64>(19).map_err(backend)? as u32,
            concurrency: RunConcurrency::stored(
                row.get(27).map_err(backend)?,
                row.get::<_, i64>(28).map_err(backend)? != 0,
            ),
            waiting_for: WaitingFor::stored(row.get::<_, Option<String>>(29).map_err(backend)?.as_deref())
                .map_err(StoreError::Corrupt)?,
            priority: row.get(30).map_err(backend)?,
            fairness_key: Some(row.get::<_, String>(31).map_err(backend)?).filter(|key| !key.is_empty()),
            fair_seq: row.get(32).map_err(backend)?,
            retention: row
                .get::<_, Option<i64>>(21)
                .map_err(backend)?
                .map(|ms| Duration::from_millis(ms.max(0) as u64)),
            delete_after: ts(row.get(22).map_err(backend)?),
            rare: RunRare {
                deadline: ts(row.get(20).map_err(backend)?),
                restarted_from: row.get::<_, Option<String>>(23).map_err(backend)?.map(RunId::new),
                parent: row.get::<_, Option<String>>(24).map_err(backend)?.map(RunId::new),
                continued_from: row.get::<_, Option<String>>(25).map_err(backend)?.map(RunId::new),
                continued_as: row.get::<_, Option<String>>(26).map_err(backend)?.map(RunId::new),
                debounce_key: row.get(33).map_err(backend)?,
                debounce_until: ts(row.get(34).map_err(backend)?),
            }
            .boxed(),
        })
    })();
    Ok(record)
}

/// Every row of a query, each read by `read` (`row_to_run`, `row_to_schedule`).
pub(super) fn query_rows<T>(
    stmt: &mut rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
    read: fn(&Row<'_>) -> rusqlite::Result<Result<T, StoreError>>,
) -> Result<Vec<T>, StoreError> {
    let rows = stmt.query_map(params, read).map_err(backend)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row.map_err(backend)??);
    }
    Ok(out)
}

pub(super) fn read_run(conn: &Connection, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1")).map_err(backend)?;
    stmt.query_row([id.as_str()], row_to_run).optional().map_err(backend)?.transpose()
}
