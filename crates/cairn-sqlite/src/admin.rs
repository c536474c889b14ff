//! The writer's housekeeping: pruning, workers, subscriptions and schedules.

use crate::prelude::*;
use crate::rows::{SCHEDULE_COLUMNS, row_to_schedule};
use crate::writer::{Failure, Writer, clean};

impl Writer {
    pub(super) fn delete_schedule(&mut self, name: &str) -> Result<u64, Failure> {
        Ok(self.conn.prepare_cached("DELETE FROM schedules WHERE name = ?1")?.execute([name])? as u64)
    }

    pub(super) fn prune(&mut self, request: &PruneRequest) -> Result<Vec<RunId>, Failure> {
        let doomed: Vec<(String, String, String)> = self
            .conn
            .prepare_cached(include_str!("../sql/statements/prune.sql"))?
            .query_map(
                params![request.now.as_millis(), request.ended_before.map(Timestamp::as_millis), request.limit as i64],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?
            .collect::<rusqlite::Result<_>>()?;
        if !request.dry_run {
            for (id, workflow, status) in &doomed {
                if let Some(status) = RunStatus::parse(status) {
                    self.count_ended(workflow.clone(), status, -1);
                }
                for sql in [
                    "DELETE FROM journal WHERE run_id = ?1",
                    "DELETE FROM signals WHERE run_id = ?1",
                    "DELETE FROM runs WHERE id = ?1",
                ] {
                    self.conn.prepare_cached(sql)?.execute([id])?;
                }
            }
        }
        if let Some(before) = request.events_before.filter(|_| !request.dry_run) {
            self.conn
                .prepare_cached(
                    "DELETE FROM events WHERE id IN
                        (SELECT id FROM events WHERE published_at < ?1 ORDER BY published_at, id LIMIT ?2)",
                )?
                .execute(params![before.as_millis(), request.limit as i64])?;
        }
        Ok(doomed.into_iter().map(|(id, _, _)| RunId::new(id)).collect())
    }

    /// Records `event`, or adds its runs to the record of its id ([`EventRecord::runs_over`]).
    pub(super) fn record_event(&mut self, event: &EventRecord) -> Result<(), Failure> {
        let kept: Option<String> = self
            .conn
            .prepare_cached("SELECT runs FROM events WHERE id = ?1")?
            .query_row([&event.id], |r| r.get(0))
            .optional()?;
        let kept = match kept {
            Some(runs) => serde_json::from_str(&runs).map_err(|e| clean(StoreError::from_cause(e)))?,
            None => Vec::new(),
        };
        let runs = serde_json::to_string(&event.runs_over(kept)).map_err(|e| clean(StoreError::from_cause(e)))?;
        self.conn
            .prepare_cached(
                "INSERT INTO events (id, topic, payload, published_at, runs) VALUES (?1, ?2, ?3, ?4, ?5)
                    ON CONFLICT (id) DO UPDATE SET runs = excluded.runs",
            )?
            .execute(params![event.id, event.topic, event.payload.get(), event.published_at.as_millis(), runs])?;
        Ok(())
    }

    pub(super) fn record_worker(&mut self, worker: &WorkerRecord) -> Result<(), Failure> {
        self.conn.prepare_cached(include_str!("../sql/statements/record_worker.sql"))?.execute(params![
            worker.id,
            worker.host,
            worker.pid,
            worker.started_at.as_millis(),
            worker.last_seen.as_millis(),
            worker.live_until.as_millis(),
            worker.serves_json()
        ])?;
        Ok(())
    }

    pub(super) fn record_served(&mut self, serves: &[WorkflowKey], at: Timestamp) -> Result<(), Failure> {
        for key in serves {
            self.conn
                .prepare_cached(
                    "INSERT INTO served_workflows (name, version, first_served, last_served) VALUES (?1, ?2, ?3, ?3)
                        ON CONFLICT (name, version) DO UPDATE SET
                            first_served = min(first_served, excluded.first_served),
                            last_served = max(last_served, excluded.last_served)",
                )?
                .execute(params![key.name, key.version, at.as_millis()])?;
        }
        Ok(())
    }

    pub(super) fn forget_workers(&mut self, request: &ForgetWorkers) -> Result<u64, Failure> {
        let ids = serde_json::to_string(&request.ids).map_err(|e| clean(StoreError::InvalidInput(e.to_string())))?;
        let forgotten = self
            .conn
            .prepare_cached("DELETE FROM workers WHERE id IN (SELECT value FROM json_each(?1)) OR live_until < ?2")?
            .execute(params![ids, request.dead_before.map(Timestamp::as_millis)])?;
        Ok(forgotten as u64)
    }

    pub(super) fn set_subscriptions(&mut self, request: &SetSubscriptions) -> Result<(), Failure> {
        for workflow in &request.workflows {
            self.conn.prepare_cached("DELETE FROM subscriptions WHERE workflow = ?1")?.execute([workflow])?;
        }
        for subscription in &request.subscriptions {
            self.conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO subscriptions (workflow, pattern, version) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![subscription.workflow, subscription.pattern, subscription.version])?;
        }
        Ok(())
    }

    pub(super) fn schedule(&self, name: &str) -> Result<Option<ScheduleRecord>, Failure> {
        let mut stmt =
            self.conn.prepare_cached(&format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name = ?1"))?;
        let found = stmt.query_row([name], row_to_schedule).optional()?;
        found.transpose().map_err(clean)
    }

    pub(super) fn put_schedule(&mut self, put: &PutSchedule) -> Result<ScheduleRecord, Failure> {
        self.conn.prepare_cached(include_str!("../sql/statements/put_schedule.sql"))?.execute(params![
            put.name,
            put.workflow.as_str(),
            put.spec,
            put.input.get(),
            put.next_fire_at.map(Timestamp::as_millis),
            put.now.as_millis()
        ])?;
        self.schedule(&put.name)?.ok_or_else(|| clean(StoreError::ScheduleNotFound(put.name.clone())))
    }

    pub(super) fn fire_schedule(&mut self, fire: &FireSchedule) -> Result<Option<Vec<CreatedRun>>, Failure> {
        let moved = self.conn.prepare_cached(include_str!("../sql/statements/fire_schedule.sql"))?.execute(params![
            fire.name,
            fire.due.as_millis(),
            fire.next_fire_at.map(Timestamp::as_millis),
            fire.last_fired_at.map(Timestamp::as_millis),
            fire.now.as_millis(),
            fire.manual
        ])?;
        if moved == 0 {
            return Ok(None);
        }
        let mut created = Vec::with_capacity(fire.runs.len());
        for run in &fire.runs {
            created.push(match self.create(run) {
                // Started by an earlier firing of the same time (its id says so).
                Err(Failure { error: StoreError::DuplicateRunId(id), .. }) => {
                    let existing = self.status_of(&id).map_err(|f| Failure { dirty: true, ..f })?;
                    CreatedRun { run: existing, created: false }
                }
                other => other.map_err(|failure| Failure { dirty: true, ..failure })?,
            });
        }
        Ok(Some(created))
    }

    pub(super) fn pause_schedule(&mut self, change: &PauseSchedule) -> Result<ScheduleRecord, Failure> {
        self.conn.prepare_cached(include_str!("../sql/statements/pause_schedule.sql"))?.execute(params![
            change.name,
            change.paused,
            change.next_fire_at.map(Timestamp::as_millis),
            change.now.as_millis()
        ])?;
        self.schedule(&change.name)?.ok_or_else(|| clean(StoreError::ScheduleNotFound(change.name.clone())))
    }
}
