//! The writer's flow control: concurrency rules and slots, rate-limit grants.

use crate::prelude::*;
use crate::rows::{RULES, row_to_rule};
use crate::writer::{Failure, Writer, clean};

impl Writer {
    pub(super) fn put_concurrency(&mut self, rule: &ConcurrencyRule) -> Result<(), Failure> {
        rule.check().map_err(|e| clean(StoreError::InvalidInput(e)))?;
        self.conn.prepare_cached(include_str!("../sql/statements/put_concurrency.sql"))?.execute(params![
            rule.workflow,
            rule.key,
            rule.limit,
            rule.hold_suspended
        ])?;
        self.admit_workflow(&rule.workflow)
    }

    pub(super) fn delete_concurrency(&mut self, workflow: &str) -> Result<u64, Failure> {
        let deleted =
            self.conn.prepare_cached("DELETE FROM concurrency_rules WHERE workflow = ?1")?.execute([workflow])?;
        self.admit_workflow(workflow)?;
        Ok(deleted as u64)
    }

    /// A turn under a rate limit (see [`FlowStore::take_rate`]): the bucket's grants that no asker
    /// can count any more go, the rest decide.
    pub(super) fn take_rate(&mut self, take: &TakeRate) -> Result<Option<Timestamp>, Failure> {
        let (now, period) = (take.now.as_millis(), take.period_ms());
        self.conn
            .prepare_cached("DELETE FROM rate_grants WHERE bucket = ?1 AND at <= ?2")?
            .execute(params![take.bucket, rate_forgets_before(now, period)])?;
        let granted = self
            .conn
            .prepare_cached("SELECT at FROM rate_grants WHERE bucket = ?1")?
            .query_map([&take.bucket], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?;
        let verdict = rate_verdict(&granted, take.limit, period, now);
        if verdict.is_none() {
            self.conn
                .prepare_cached("INSERT INTO rate_grants (bucket, at) VALUES (?1, ?2)")?
                .execute(params![take.bucket, now])?;
        }
        Ok(verdict.map(Timestamp::from_millis))
    }

    /// Admits what every group of `workflow` with waiting runs has room for (its rule changed).
    pub(super) fn admit_workflow(&self, workflow: &str) -> Result<(), Failure> {
        self.conn.prepare_cached(include_str!("../sql/statements/admit_workflow.sql"))?.execute([workflow])?;
        Ok(())
    }

    /// Takes a slot of the group (`workflow`, `key`) for a new run if it holds fewer than `limit`
    /// and no run waits for one (they go first): whether it did.
    pub(super) fn take_slot(&self, workflow: &str, key: &str, limit: u32) -> Result<bool, Failure> {
        let taken = self
            .conn
            .prepare_cached(include_str!("../sql/statements/take_slot.sql"))?
            .execute(params![workflow, key, limit])?;
        Ok(taken == 1)
    }

    /// A run of the group (`workflow`, `key`) stopped holding a slot: its count goes down and the
    /// group admits what it now has room for.
    pub(super) fn release_slot(&self, workflow: &str, key: &str) -> Result<(), Failure> {
        self.conn
            .prepare_cached(
                "UPDATE concurrency_slots SET held = held - 1 WHERE workflow = ?1 AND key = ?2 AND held > 0",
            )?
            .execute(params![workflow, key])?;
        self.admit(workflow, key)
    }

    /// Admits the group's waiting runs, oldest first, while it has room (`flow_admit`); nothing to
    /// do when none waits.
    pub(super) fn admit(&self, workflow: &str, key: &str) -> Result<(), Failure> {
        self.conn.prepare_cached(include_str!("../sql/statements/admit.sql"))?.execute(params![workflow, key])?;
        Ok(())
    }

    /// Gives back the slot `run` held before a change that ended, paused or suspended it (a run
    /// in no group, or holding none, has nothing to give back).
    pub(super) fn release_held(&self, run: &RunRecord) -> Result<(), Failure> {
        match &run.concurrency {
            Some(place) if holds_slot(run.status.as_str(), run.waiting_for.is_some(), place.hold_suspended) => {
                self.release_slot(&run.workflow, &place.key)
            }
            _ => Ok(()),
        }
    }

    /// `workflow`'s concurrency rule, if it has one.
    pub(super) fn concurrency_rule(&self, workflow: &str) -> Result<Option<ConcurrencyRule>, Failure> {
        let mut stmt = self.conn.prepare_cached(&format!("{RULES} WHERE workflow = ?1"))?;
        Ok(stmt.query_row([workflow], row_to_rule).optional()?)
    }
}
