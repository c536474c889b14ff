//! Rows decoded into records, and records encoded into statement parameters.

use super::prelude::*;
use super::sql::{Sql, backend};
use cairn_store::{IdempotencyKey, WorkflowName};

/// A recorded event from its columns (`EVENT_COLUMNS`).
pub(super) fn row_to_event(row: &Row) -> Result<EventRecord, StoreError> {
    let payload: String = row.try_get(2).map_err(backend)?;
    let runs: &str = row.try_get(4).map_err(backend)?;
    Ok(EventRecord {
        id: row.try_get(0).map_err(backend)?,
        topic: row.try_get(1).map_err(backend)?,
        payload: RawValue::from_string(payload).map_err(StoreError::from_cause)?,
        published_at: Timestamp::from_millis(row.try_get(3).map_err(backend)?),
        runs: serde_json::from_str(runs).map_err(StoreError::from_cause)?,
    })
}

pub(super) fn row_to_schedule(row: &Row) -> Result<ScheduleRecord, StoreError> {
    let ts = |i: usize| -> Result<Option<Timestamp>, StoreError> {
        Ok(row.try_get::<_, Option<i64>>(i).map_err(backend)?.map(Timestamp::from_millis))
    };
    Ok(ScheduleRecord {
        name: row.try_get(0).map_err(backend)?,
        workflow: WorkflowName::read_back(row.try_get::<_, &str>(1).map_err(backend)?),
        spec: row.try_get(2).map_err(backend)?,
        input: raw(row.try_get(3).map_err(backend)?)?,
        paused: row.try_get(4).map_err(backend)?,
        next_fire_at: ts(5)?,
        last_fired_at: ts(6)?,
        created_at: Timestamp::from_millis(row.try_get(7).map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get(8).map_err(backend)?),
    })
}

pub(super) fn raw(text: String) -> Result<Box<RawValue>, StoreError> {
    RawValue::from_string(text).map_err(|e| StoreError::Corrupt(format!("stored JSON is invalid: {e}")))
}

pub(super) fn row_to_run(row: &Row) -> Result<RunRecord, StoreError> {
    let get_ts = |i: usize| -> Result<Option<Timestamp>, StoreError> {
        Ok(row.try_get::<_, Option<i64>>(i).map_err(backend)?.map(Timestamp::from_millis))
    };
    let status: String = row.try_get(3).map_err(backend)?;
    let reason: Option<String> = row.try_get(4).map_err(backend)?;
    Ok(RunRecord {
        id: RunId::new(row.try_get::<_, String>(0).map_err(backend)?),
        workflow: WorkflowName::read_back(row.try_get::<_, &str>(1).map_err(backend)?),
        version: u32::try_from(row.try_get::<_, i32>(2).map_err(backend)?).unwrap_or(0),
        status: RunStatus::parse_stored(&status)?,
        suspend_reason: reason.as_deref().and_then(SuspendReason::parse),
        input: raw(row.try_get(5).map_err(backend)?)?,
        output: row.try_get::<_, Option<String>>(6).map_err(backend)?.map(raw).transpose()?,
        error: row.try_get(7).map_err(backend)?,
        idempotency_key: row.try_get::<_, Option<&str>>(8).map_err(backend)?.map(IdempotencyKey::read_back),
        created_at: Timestamp::from_millis(row.try_get(9).map_err(backend)?),
        updated_at: Timestamp::from_millis(row.try_get(10).map_err(backend)?),
        completed_at: get_ts(11)?,
        wake_at: get_ts(12)?,
        lease_owner: row.try_get(13).map_err(backend)?,
        lease_expires_at: get_ts(14)?,
        epoch: row.try_get::<_, i64>(15).map_err(backend)? as u64,
        last_seq: row.try_get::<_, i64>(16).map_err(backend)? as u64,
        pending: Request::from_parts(row.try_get(17).map_err(backend)?, row.try_get(18).map_err(backend)?)?,
        recoveries: u32::try_from(row.try_get::<_, i32>(19).map_err(backend)?).unwrap_or(0),
        concurrency: RunConcurrency::stored(row.try_get(27).map_err(backend)?, row.try_get(28).map_err(backend)?),
        waiting_for: WaitingFor::stored(row.try_get::<_, Option<&str>>(29).map_err(backend)?)
            .map_err(StoreError::Corrupt)?,
        priority: row.try_get(30).map_err(backend)?,
        fairness_key: Some(row.try_get::<_, String>(31).map_err(backend)?).filter(|key| !key.is_empty()),
        fair_seq: row.try_get(32).map_err(backend)?,
        retention: row
            .try_get::<_, Option<i64>>(21)
            .map_err(backend)?
            .map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        delete_after: get_ts(22)?,
        rare: RunRare {
            deadline: get_ts(20)?,
            restarted_from: row.try_get::<_, Option<String>>(23).map_err(backend)?.map(RunId::new),
            parent: row.try_get::<_, Option<String>>(24).map_err(backend)?.map(RunId::new),
            continued_from: row.try_get::<_, Option<String>>(25).map_err(backend)?.map(RunId::new),
            continued_as: row.try_get::<_, Option<String>>(26).map_err(backend)?.map(RunId::new),
            debounce_key: row.try_get(33).map_err(backend)?,
            debounce_until: get_ts(34)?,
        }
        .boxed(),
    })
}

/// The claim statement's parameters that are not fields of its request, as it binds them.
pub(super) struct ClaimValues {
    pub(super) lease_until: i64,
    pub(super) now: i64,
    pub(super) lease_now: i64,
    pub(super) tags: Vec<String>,
    pub(super) limit: i64,
}

impl ClaimValues {
    pub(super) fn of(request: &ClaimRequest) -> ClaimValues {
        ClaimValues {
            lease_until: request.lease_until.as_millis(),
            now: request.now.as_millis(),
            lease_now: request.lease_now.as_millis(),
            tags: tags(&request.workflows),
            limit: request.limit as i64,
        }
    }

    /// `$1` to `$6` of `Sql::claim`.
    pub(super) fn params<'a>(&'a self, request: &'a ClaimRequest) -> [&'a (dyn ToSql + Sync); 6] {
        [&request.owner, &self.lease_until, &self.now, &self.lease_now, &self.tags, &self.limit]
    }
}

pub(super) fn tags(workflows: &[WorkflowKey]) -> Vec<String> {
    workflows.iter().map(WorkflowKey::tag).collect()
}

/// Journal rows as column arrays, the shape `unnest` takes them in.
#[derive(Default)]
pub(super) struct JournalColumns<'a> {
    pub(super) run_ids: Vec<&'a str>,
    pub(super) seqs: Vec<i64>,
    pub(super) ats: Vec<i64>,
    pub(super) kinds: Vec<&'static str>,
    pub(super) paths: Vec<Option<&'a str>>,
    pub(super) data: Vec<String>,
}

impl<'a> JournalColumns<'a> {
    /// The six columns as statement parameters, in the order [`journal_cte`] binds them.
    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 6] {
        [&self.run_ids, &self.seqs, &self.ats, &self.kinds, &self.paths, &self.data]
    }

    /// Adds `events` of `run_id` as entries `after_seq + 1…`.
    pub(super) fn push(&mut self, run_id: &'a RunId, after_seq: u64, at: Timestamp, events: &'a [Event]) {
        for (i, event) in events.iter().enumerate() {
            self.run_ids.push(run_id.as_str());
            self.seqs.push((after_seq + 1 + i as u64) as i64);
            self.ats.push(at.as_millis());
            self.kinds.push(event.kind_name());
            self.paths.push(event.path().map(|p| p.as_str()));
            self.data.push(event.to_json());
        }
    }

    pub(super) fn of(run_id: &'a RunId, after_seq: u64, at: Timestamp, events: &'a [Event]) -> Self {
        let mut columns = JournalColumns::default();
        columns.push(run_id, after_seq, at, events);
        columns
    }
}

/// Inserts `events` as journal entries `after_seq + 1…` in one statement.
pub(super) async fn insert_events(
    client: &impl GenericClient,
    sql: &Sql,
    run_id: &RunId,
    after_seq: u64,
    at: Timestamp,
    events: &[Event],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let rows = JournalColumns::of(run_id, after_seq, at, events);
    let statement = client.prepare_cached(&sql.insert_events).await.map_err(backend)?;
    client
        .execute(&statement, &[&run_id.as_str(), &at.as_millis(), &rows.seqs, &rows.kinds, &rows.paths, &rows.data])
        .await
        .map_err(backend)?;
    Ok(())
}
