//! The writer: the commands it takes, how it batches them into transactions, and how it answers
//! their callers.

use crate::prelude::*;

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// What [`RunStore::start_with_signal`] gives: the run, and its signal's id.
pub(super) type StartedWithSignal = (CreatedRun, SignalId);

/// A job for the writer thread. Each carries the [`Answer`] of its own result type, so a caller
/// is answered with exactly the type it waits for.
pub(super) enum Command {
    /// Boxed, as are the other commands whose result is a whole record: the hot ones (appends)
    /// stay small on the writer's channel.
    Create(Box<(NewRun, Answer<CreatedRun>)>),
    Claim(ClaimRequest, Answer<Vec<RunRecord>>),
    /// The append and its events already encoded as JSON (by the caller's thread, not the writer's).
    Append(Append, Vec<String>, Answer<()>),
    Heartbeat(HeartbeatRequest, Answer<Vec<LeaseStatus>>),
    Signal(NewSignal, Answer<SignalId>),
    Cancel(ControlRequest, Answer<CancelOutcome>),
    Pause(ControlRequest, Answer<PauseOutcome>),
    Resume(ResumeRequest, Answer<()>),
    StartWithSignal(Box<(NewRun, StartSignal, Answer<StartedWithSignal>)>),
    Prune(PruneRequest, Answer<Vec<RunId>>),
    RecordEvent(Box<(EventRecord, Answer<()>)>),
    RecordWorker(WorkerRecord, Answer<()>),
    RecordServed(Vec<WorkflowKey>, Timestamp, Answer<()>),
    ForgetWorkers(ForgetWorkers, Answer<u64>),
    SetSubscriptions(SetSubscriptions, Answer<()>),
    PutSchedule(Box<(PutSchedule, Answer<ScheduleRecord>)>),
    FireSchedule(FireSchedule, Answer<Option<Vec<CreatedRun>>>),
    PauseSchedule(Box<(PauseSchedule, Answer<ScheduleRecord>)>),
    DeleteSchedule(String, Answer<u64>),
    PutConcurrency(ConcurrencyRule, Answer<()>),
    DeleteConcurrency(String, Answer<u64>),
    TakeRate(TakeRate, Answer<Option<Timestamp>>),
}

/// A command's caller and what the command's application gave it. The writer keeps the result
/// until the command's transaction has committed: a batch that is rolled back and retried one
/// command at a time answers each caller once, with what its own retry gave.
pub(super) struct Answer<T> {
    pub(super) reply: Reply<T>,
    pub(super) result: Option<Result<T, StoreError>>,
}

impl<T> Answer<T> {
    pub(super) fn new(reply: Reply<T>) -> Self {
        Answer { reply, result: None }
    }

    /// Keeps what an application gave. A failure that may have written part of its change is
    /// not kept but returned: its whole transaction rolls back.
    pub(super) fn keep(&mut self, applied: Result<T, Failure>) -> Result<(), Failure> {
        match applied {
            Ok(value) => self.result = Some(Ok(value)),
            Err(Failure { error, dirty: false }) => self.result = Some(Err(error)),
            Err(dirty) => return Err(dirty),
        }
        Ok(())
    }

    /// Answers the caller: with `failed` when the command's transaction did not commit, else
    /// with what its application kept. A caller that stopped waiting is not answered.
    pub(super) fn send(self, failed: Option<StoreError>) {
        let value = match (failed, self.result) {
            (Some(error), _) => Err(error),
            (None, Some(result)) => result,
            (None, None) => Err(StoreError::backend("the SQLite writer committed a command it did not apply")),
        };
        let _ = self.reply.send(value);
    }
}

/// A command's failure; `dirty` when it may have written part of its change before failing.
pub(super) struct Failure {
    pub(super) error: StoreError,
    pub(super) dirty: bool,
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Self {
        Failure { error: backend(e), dirty: true }
    }
}

pub(super) fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::from_cause(e)
}

pub(super) fn clean(error: StoreError) -> Failure {
    Failure { error, dirty: false }
}

pub(super) struct Writer {
    pub(super) conn: Connection,
    /// Changes to `ended_counts` made by the transaction in progress, written just before it
    /// commits: one upsert per workflow and status per batch instead of one per run.
    pub(super) ended: HashMap<(String, RunStatus), i64>,
}

/// The writer connection, shared by the writer thread and (when idle) inline callers.
pub(super) struct WriterSlot {
    pub(super) writer: Mutex<Writer>,
    /// Commands handed to the writer thread and not yet executed.
    pub(super) pending: AtomicUsize,
    pub(super) inline: bool,
}

impl std::fmt::Debug for WriterSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterSlot").field("pending", &self.pending).field("inline", &self.inline).finish()
    }
}

impl WriterSlot {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Executes `command` on the caller's thread if nothing is queued or executing; otherwise
    /// gives it back to be queued. Commands queued before stay ahead of it: an inline command
    /// runs only when no queued command is outstanding.
    pub(super) fn try_inline(&self, command: Command) -> Option<Command> {
        if !self.inline || self.pending.load(Ordering::SeqCst) != 0 {
            return Some(command);
        }
        let mut writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Some(command),
        };
        if self.pending.load(Ordering::SeqCst) != 0 {
            return Some(command);
        }
        writer.execute(&mut vec![command]);
        None
    }

    pub(super) fn run(&self, mut receiver: mpsc::UnboundedReceiver<Command>, max_batch: usize) {
        let mut batch = Vec::with_capacity(max_batch.min(1024));
        while let Some(first) = receiver.blocking_recv() {
            batch.push(first);
            while batch.len() < max_batch {
                match receiver.try_recv() {
                    Ok(command) => batch.push(command),
                    Err(_) => break,
                }
            }
            let executed = batch.len();
            let mut writer = self.lock();
            writer.execute(&mut batch);
            self.pending.fetch_sub(executed, Ordering::SeqCst);
        }
    }
}

impl Writer {
    /// Executes a batch in one transaction. If any command failed after writing part of its
    /// change, or the commit failed, the batch is rolled back and every command retried alone.
    pub(super) fn execute(&mut self, batch: &mut Vec<Command>) {
        match self.transaction(batch) {
            Ok(()) => batch.drain(..).for_each(|command| command.answer(None)),
            Err(_) => {
                for mut command in batch.drain(..) {
                    let failed = self.transaction(std::slice::from_mut(&mut command)).err();
                    command.answer(failed);
                }
            }
        }
    }

    /// One transaction over `commands`, each keeping its result; `Err` means it was rolled back.
    pub(super) fn transaction(&mut self, commands: &mut [Command]) -> Result<(), StoreError> {
        self.ended.clear();
        let began = std::time::Instant::now();
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
        for command in commands.iter_mut() {
            if let Err(Failure { error, .. }) = self.apply(command) {
                let _ = self.conn.execute_batch("ROLLBACK");
                return Err(error);
            }
        }
        if let Err(e) = self.write_ended_counts().and_then(|()| self.conn.execute_batch("COMMIT")) {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(backend(e));
        }
        cairn_store::metrics_names::committed(commands.len(), began.elapsed());
        Ok(())
    }

    /// Records that a run of `workflow` entered (`delta` 1) or left (-1) the ended `status`.
    pub(super) fn count_ended(&mut self, workflow: String, status: RunStatus, delta: i64) {
        *self.ended.entry((workflow, status)).or_default() += delta;
    }

    pub(super) fn write_ended_counts(&mut self) -> rusqlite::Result<()> {
        for ((workflow, status), delta) in self.ended.drain() {
            if delta != 0 {
                self.conn
                    .prepare_cached(include_str!("../sql/statements/write_ended_counts.sql"))?
                    .execute(params![workflow, status.as_str(), delta])?;
            }
        }
        Ok(())
    }

    /// Applies `command` in the open transaction; it keeps its result for its caller. `Err` is a
    /// failure that may have written part of its change: the transaction must roll back.
    pub(super) fn apply(&mut self, command: &mut Command) -> Result<(), Failure> {
        match command {
            Command::Create(job) => {
                let (run, a) = &mut **job;
                a.keep(self.create(run))
            }
            Command::Claim(request, a) => a.keep(self.claim(request)),
            Command::Append(append, encoded, a) => a.keep(self.append(append, encoded)),
            Command::Heartbeat(request, a) => a.keep(self.heartbeat(request)),
            Command::Signal(signal, a) => a.keep(self.signal(signal)),
            Command::Cancel(request, a) => a.keep(self.cancel(request)),
            Command::Pause(request, a) => a.keep(self.pause(request)),
            Command::Resume(request, a) => a.keep(self.resume(request)),
            Command::StartWithSignal(job) => {
                let (run, signal, a) = &mut **job;
                a.keep(self.start_with_signal(run, signal))
            }
            Command::Prune(request, a) => a.keep(self.prune(request)),
            Command::RecordEvent(job) => {
                let (event, a) = &mut **job;
                a.keep(self.record_event(event))
            }
            Command::RecordWorker(worker, a) => a.keep(self.record_worker(worker)),
            Command::RecordServed(serves, at, a) => a.keep(self.record_served(serves, *at)),
            Command::ForgetWorkers(request, a) => a.keep(self.forget_workers(request)),
            Command::SetSubscriptions(request, a) => a.keep(self.set_subscriptions(request)),
            Command::PutSchedule(job) => {
                let (put, a) = &mut **job;
                a.keep(self.put_schedule(put))
            }
            Command::FireSchedule(fire, a) => a.keep(self.fire_schedule(fire)),
            Command::PauseSchedule(job) => {
                let (change, a) = &mut **job;
                a.keep(self.pause_schedule(change))
            }
            Command::DeleteSchedule(name, a) => a.keep(self.delete_schedule(name)),
            Command::PutConcurrency(rule, a) => a.keep(self.put_concurrency(rule)),
            Command::DeleteConcurrency(workflow, a) => a.keep(self.delete_concurrency(workflow)),
            Command::TakeRate(take, a) => a.keep(self.take_rate(take)),
        }
    }
}

impl Command {
    /// Answers its caller: with `failed` when its transaction did not commit, else with what its
    /// application kept.
    pub(super) fn answer(self, failed: Option<StoreError>) {
        match self {
            Command::Create(job) => job.1.send(failed),
            Command::Claim(_, a) => a.send(failed),
            Command::Append(_, _, a) => a.send(failed),
            Command::Heartbeat(_, a) => a.send(failed),
            Command::Signal(_, a) => a.send(failed),
            Command::Cancel(_, a) => a.send(failed),
            Command::Pause(_, a) => a.send(failed),
            Command::Resume(_, a) => a.send(failed),
            Command::StartWithSignal(job) => job.2.send(failed),
            Command::Prune(_, a) => a.send(failed),
            Command::RecordEvent(job) => job.1.send(failed),
            Command::RecordWorker(_, a) => a.send(failed),
            Command::RecordServed(_, _, a) => a.send(failed),
            Command::ForgetWorkers(_, a) => a.send(failed),
            Command::SetSubscriptions(_, a) => a.send(failed),
            Command::PutSchedule(job) => job.1.send(failed),
            Command::FireSchedule(_, a) => a.send(failed),
            Command::PauseSchedule(job) => job.1.send(failed),
            Command::DeleteSchedule(_, a) => a.send(failed),
            Command::PutConcurrency(_, a) => a.send(failed),
            Command::DeleteConcurrency(_, a) => a.send(failed),
            Command::TakeRate(_, a) => a.send(failed),
        }
    }
}
