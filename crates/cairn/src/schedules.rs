//! Schedules through a [`Client`]: declare, list, pause, resume, trigger and delete them, and the
//! firing of due schedules that each worker's claim loop does.

use crate::client::{Client, RunHandle};
use crate::error::ClientError;
use crate::schedule::{Firings, Schedule, ScheduleSpec, check_name, schedule_run_id};
use cairn_store::{FireSchedule, NewRun, PauseSchedule, PutSchedule, ScheduleRecord, WorkflowName};

/// Most due schedules one worker fires in one go.
const FIRE_BATCH: usize = 32;

impl ScheduleSpec {
    /// Reads a spec as a store keeps it ([`ScheduleRecord::spec`]).
    pub fn parse_stored(text: &str) -> Result<ScheduleSpec, ClientError> {
        serde_json::from_str(text).map_err(|e| ClientError::InvalidSchedule(format!("stored spec {text:?}: {e}")))
    }

    /// The spec as a store keeps it.
    fn to_stored(&self) -> Result<String, ClientError> {
        serde_json::to_string(self).map_err(|e| ClientError::InvalidSchedule(e.to_string()))
    }
}

/// Whether `stored` already is what declaring `schedule` would write.
fn holds(stored: &ScheduleRecord, schedule: &Schedule) -> bool {
    stored.name == schedule.name
        && stored.workflow == schedule.workflow
        && schedule.input.as_ref().is_ok_and(|input| input.get() == stored.input.get())
        && schedule.spec.to_stored().is_ok_and(|spec| spec == stored.spec)
}

impl Client {
    /// Creates schedule `schedule.name`, or updates it: each firing starts a run of its workflow
    /// with its input, whichever worker serving that workflow is up (every worker looks for due
    /// schedules as it looks for runs; a firing's run id is `<name>@<time>`, so a firing never
    /// starts two runs). Updating keeps a paused schedule paused, and keeps its next firing
    /// unless the spec changed. The schedule as stored.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{MemoryStore, Schedule};
    /// # async fn report(_ctx: Ctx, (): ()) -> Result<(), WorkflowError> { Ok(()) }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("report", 1, report).start().await?;
    /// let stored = engine.client().put_schedule(&Schedule::cron("weekly", "report", ["0 8 * * MON"])).await?;
    /// assert!(stored.next_fire_at.is_some());
    /// engine.client().pause_schedule("weekly").await?;
    /// assert!(engine.client().schedule("weekly").await?.paused);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn put_schedule(&self, schedule: &Schedule) -> Result<ScheduleRecord, ClientError> {
        let firings = schedule.check()?;
        let workflow = WorkflowName::try_from(schedule.workflow.as_str())?;
        let input = schedule.input.clone().map_err(ClientError::InvalidPayload)?;
        self.check_payload(&input)?;
        match self.local.as_ref().and_then(|local| Some((local, local.latest(&schedule.workflow)?))) {
            Some((local, version)) => {
                if let Some(checked) = local.check_input(&schedule.workflow, version, &input) {
                    checked.map_err(ClientError::InvalidPayload)?;
                }
            }
            None => drop(self.served_version(&schedule.workflow, None, schedule.allow_unknown).await?),
        }
        let spec = schedule.spec.to_stored()?;
        let now = self.clock.now();
        let put = PutSchedule {
            name: schedule.name.clone(),
            workflow,
            spec,
            input,
            next_fire_at: firings.next_after(now),
            now,
        };
        let stored = self.store.put_schedule(&put).await?;
        self.wake_worker();
        Ok(stored)
    }

    /// Declares an engine's schedules at its start: reads them first, and writes only those the
    /// store does not hold as declared (most starts write nothing).
    pub(crate) async fn declare_schedules(&self, schedules: &[Schedule]) -> Result<(), ClientError> {
        if schedules.is_empty() {
            return Ok(());
        }
        let stored = self.schedules().await?;
        for schedule in schedules.iter().filter(|s| !stored.iter().any(|stored| holds(stored, s))) {
            self.put_schedule(schedule).await?;
        }
        Ok(())
    }

    /// Every schedule, by name.
    pub async fn schedules(&self) -> Result<Vec<ScheduleRecord>, ClientError> {
        Ok(self.store.schedules().await?)
    }

    /// The schedule `name`.
    pub async fn schedule(&self, name: &str) -> Result<ScheduleRecord, ClientError> {
        check_name(name)?;
        let all = self.schedules().await?;
        all.into_iter().find(|s| s.name == name).ok_or_else(|| ClientError::ScheduleNotFound(name.to_owned()))
    }

    /// Pauses schedule `name`: it fires no more until resumed.
    pub async fn pause_schedule(&self, name: &str) -> Result<ScheduleRecord, ClientError> {
        check_name(name)?;
        let change = PauseSchedule { name: name.to_owned(), paused: true, next_fire_at: None, now: self.clock.now() };
        Ok(self.store.pause_schedule(&change).await?)
    }

    /// Resumes schedule `name` from its next firing after now (the firings it missed while
    /// paused are not started).
    pub async fn resume_schedule(&self, name: &str) -> Result<ScheduleRecord, ClientError> {
        let schedule = self.schedule(name).await?;
        let now = self.clock.now();
        let next_fire_at = Firings::parse_stored(&schedule.spec)?.next_after(now);
        let change = PauseSchedule { name: name.to_owned(), paused: false, next_fire_at, now };
        let resumed = self.store.pause_schedule(&change).await?;
        self.wake_worker();
        Ok(resumed)
    }

    /// Deletes schedule `name` (the runs it started stay).
    pub async fn delete_schedule(&self, name: &str) -> Result<(), ClientError> {
        check_name(name)?;
        match self.store.delete_schedule(name).await? {
            true => Ok(()),
            false => Err(ClientError::ScheduleNotFound(name.to_owned())),
        }
    }

    /// Starts a run of schedule `name` now, as a firing at this instant would (paused or not);
    /// its run.
    pub async fn trigger_schedule(&self, name: &str) -> Result<RunHandle, ClientError> {
        let schedule = self.schedule(name).await?;
        let now = self.clock.now();
        let version = self.version_to_start(&schedule.workflow).await?;
        let run = self.scheduled_run(&schedule, version, now);
        // Recorded as a firing (its `last_fired_at`, so its run is the schedule's last) in the
        // same write that starts the run; the next firing stays as it was.
        let fire = FireSchedule {
            name: schedule.name.clone(),
            due: now,
            next_fire_at: schedule.next_fire_at,
            last_fired_at: Some(now),
            runs: vec![run],
            now,
            manual: true,
        };
        let created = self.store.fire_schedule(fire).await?;
        match created.and_then(|mut runs| runs.pop()) {
            Some(created) => Ok(self.started(created)),
            None => Err(ClientError::ScheduleNotFound(name.to_owned())),
        }
    }

    /// The run schedule `schedule` starts for its firing at `at`.
    fn scheduled_run(&self, schedule: &ScheduleRecord, version: u32, at: cairn_journal::Timestamp) -> NewRun {
        let mut run = NewRun::new(
            schedule_run_id(&schedule.name, at),
            schedule.workflow.clone(),
            version,
            schedule.input.clone(),
            self.clock.now(),
        );
        run.retention = Some(self.retention_of(&schedule.workflow, None));
        run.deadline = self.timeout_of(None).map(|limit| run.created_at + limit);
        run
    }

    /// Fires the due schedules of the workflows this client's worker registers; whether any run
    /// was started. Schedules another worker fired meanwhile are left alone.
    pub(crate) async fn fire_due_schedules(&self) -> bool {
        let Some(local) = &self.local else { return false };
        let names = local.workflow_names();
        let now = self.clock.now();
        let due = match self.store.due_schedules(&names, now, FIRE_BATCH).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!("cannot read the due schedules: {error}");
                return false;
            }
        };
        let mut started = false;
        for schedule in due {
            let (Some(due), Some(version)) = (schedule.next_fire_at, local.latest(&schedule.workflow)) else {
                continue;
            };
            let (times, next_fire_at) = match Firings::parse_stored(&schedule.spec) {
                Ok(firings) => firings.due(due, now),
                Err(error) => {
                    // Written by a newer release, or by hand: it fires no more until redeclared.
                    tracing::error!("schedule {}: {error}; it will not fire until it is declared again", schedule.name);
                    (Vec::new(), None)
                }
            };
            let runs: Vec<NewRun> = times.iter().map(|at| self.scheduled_run(&schedule, version, *at)).collect();
            let fire = FireSchedule {
                name: schedule.name.clone(),
                due,
                next_fire_at,
                last_fired_at: times.last().copied(),
                runs,
                now,
                manual: false,
            };
            match self.store.fire_schedule(fire).await {
                Ok(Some(created)) => {
                    let count = created.iter().filter(|c| c.created).count();
                    started |= count > 0;
                    crate::telemetry::schedule_fired(&schedule.name, &schedule.workflow, count);
                }
                Ok(None) => {}
                Err(error) => tracing::warn!("schedule {}: cannot fire: {error}", schedule.name),
            }
        }
        started
    }

    /// Tells this client's worker, if any, to look at the store again (a schedule's next firing
    /// may come before what it waits for).
    fn wake_worker(&self) {
        if let Some(local) = &self.local {
            local.wake_claimer();
        }
    }
}
