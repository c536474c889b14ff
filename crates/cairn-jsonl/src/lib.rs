//! Cairn's JSONL file store: one append-only, human-readable file per run, served from a
//! [`MemoryStore`] restored when the store opens. `cairn::store`
//! re-exports [`JsonlStore`].

use cairn_journal::{Event, JournalEntry, SignalId, Timestamp, Trim};
use cairn_store::{
    Append, CancelOutcome, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, EventPage, EventQuery,
    EventRecord, FireSchedule, ForgetWorkers, HeartbeatRequest, LeaseStatus, NewRun, NewSignal, PauseOutcome,
    PauseSchedule, PruneRequest, PutSchedule, ResumeRequest, RunFilter, RunId, RunPage, RunRecord, RunUpdate,
    ScheduleRecord, ServedWorkflow, SetSubscriptions, SignalRecord, StartSignal, StoreError, Subscription, TakeRate,
    VersionCount, WorkerRecord, WorkflowCount, WorkflowKey,
};
use cairn_store::{MemoryStore, StoreFuture};
mod legacy;

use cairn_store::{EventStore, FlowStore, JournalStore, RunStore, ScheduleStore, SignalStore, WorkerStore};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One line of a run's journal file.
///
/// Events are followed by a `row` line with the run's summary after the change; the `row` line is
/// the commit marker. Events not followed by a `row` line were not committed (the process died
/// mid-write) and are dropped when the store opens, as is a torn last line.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Event { seq: u64, at: Timestamp, event: Event },
    Row { run: Box<RunRecord>, consumed: Option<(SignalId, u64)> },
}

/// How an event line is written; reads back as [`Line::Event`] without cloning the event.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum EventLine<'a> {
    Event { seq: u64, at: Timestamp, event: &'a Event },
}

fn encode(value: &impl Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(StoreError::from_cause)
}

/// The journal lines of `events` numbered from `after_seq + 1`.
fn event_lines<'a>(
    after_seq: u64,
    at: Timestamp,
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<Vec<String>, StoreError> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| encode(&EventLine::Event { seq: after_seq + 1 + i as u64, at, event }))
        .collect()
}

/// Runs kept as JSON lines under a data directory: `runs/<id>.jsonl` (journal events and the
/// summary rows that commit them), `runs/<id>.signals.jsonl` (delivered signals) and
/// `runs/<id>.summary.json` (the latest summary, for `cat` and `grep`), and `events.jsonl`
/// (published events, a line per record). Greppable, needs no native
/// library, and single-writer: a lock file keeps a second process out.
///
/// The whole store is held in memory while open; every committed change is appended and
/// `fsync`ed by the call that makes it (synchronously, so changes land in call order). Leases and claims live in memory only: whoever opens the
/// store next holds the lock, so every earlier lease holder is gone.
///
/// ```no_run
/// let store = cairn_jsonl::JsonlStore::open("cairn-data")?;
/// # Ok::<(), cairn_store::StoreError>(())
/// ```
#[derive(Debug, Clone)]
pub struct JsonlStore {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    runs_dir: PathBuf,
    /// Every schedule, as one JSON array replaced whole at each change.
    schedules_file: PathBuf,
    /// Every concurrency rule, likewise.
    concurrency_file: PathBuf,
    /// Published events, a line per record: a later line of an id is its record merged since.
    events_file: PathBuf,
    memory: MemoryStore,
    /// Serializes every change, so memory and files change in the same order.
    writes: std::sync::Mutex<()>,
    /// Set when a write failed: memory and disk may differ, so the store refuses further work.
    broken: AtomicBool,
    _lock: File,
}

fn io(context: &str, path: &Path, error: std::io::Error) -> StoreError {
    StoreError::caused_by(format!("{context} {}", path.display()), error)
}

/// A file-name-safe form of a run id: `[A-Za-z0-9_-]` kept, everything else `%XX`.
fn file_stem(id: &RunId) -> String {
    let mut out = String::with_capacity(id.as_str().len());
    for byte in id.as_str().bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The complete lines of `bytes` and the byte length they cover; a last line without `\n` is torn.
fn complete_lines(bytes: &[u8]) -> Vec<(usize, &[u8])> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, byte) in bytes.iter().enumerate() {
        if *byte == b'\n' {
            lines.push((i + 1, &bytes[start..i]));
            start = i + 1;
        }
    }
    lines
}

/// What a run's journal file holds once its uncommitted tail is dropped.
struct Loaded {
    run: RunRecord,
    journal: Vec<JournalEntry>,
    /// Signals consumed, with the journal sequence that consumed each.
    consumed: Vec<(SignalId, u64)>,
}

/// Reads a run's journal file, keeping only committed changes; truncates anything after them.
fn load_journal(path: &Path) -> Result<Option<Loaded>, StoreError> {
    let bytes = std::fs::read(path).map_err(|e| io("cannot read", path, e))?;
    let mut committed_len = 0;
    let mut committed: Option<Loaded> = None;
    let mut last_row: &[u8] = &[];
    let mut pending: Vec<JournalEntry> = Vec::new();
    let lines = complete_lines(&bytes);
    for (index, (end, line)) in lines.iter().enumerate() {
        match serde_json::from_slice::<Line>(line) {
            Ok(Line::Event { seq, at, event }) => pending.push(JournalEntry::new(seq, at, event)),
            Ok(Line::Row { run, consumed }) => {
                let loaded = committed.get_or_insert_with(|| Loaded {
                    run: (*run).clone(),
                    journal: Vec::new(),
                    consumed: Vec::new(),
                });
                if let Some(first) = pending.first() {
                    // Events written again from an earlier sequence replace the old ones (a
                    // debounced start that joined a run rewrites its `started` event).
                    loaded.journal.retain(|e| e.seq < first.seq);
                }
                loaded.journal.append(&mut pending);
                loaded.consumed.extend(consumed);
                loaded.run = *run;
                last_row = line;
                committed_len = *end;
            }
            Err(error) => {
                // A garbled line is acceptable only in the uncommitted tail.
                let commit_follows = lines[index + 1..]
                    .iter()
                    .any(|(_, l)| matches!(serde_json::from_slice::<Line>(l), Ok(Line::Row { .. })));
                if commit_follows {
                    return Err(StoreError::Corrupt(format!("{} line {}: {error}", path.display(), index + 1)));
                }
                break;
            }
        }
    }
    if let Some(loaded) = committed.as_mut() {
        legacy::upgrade_flags(&mut loaded.run, last_row);
    }
    if committed_len < bytes.len() {
        let file = OpenOptions::new().write(true).open(path).map_err(|e| io("cannot open", path, e))?;
        file.set_len(committed_len as u64).map_err(|e| io("cannot truncate", path, e))?;
        file.sync_all().map_err(|e| io("cannot sync", path, e))?;
    }
    Ok(committed)
}

/// Reads a run's signals file; truncates a torn or garbled tail.
fn load_signals(path: &Path) -> Result<Vec<SignalRecord>, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("cannot read", path, e)),
    };
    let mut signals = Vec::new();
    let mut good_len = 0;
    for (end, line) in complete_lines(&bytes) {
        match serde_json::from_slice::<SignalRecord>(line) {
            Ok(signal) => {
                signals.push(signal);
                good_len = end;
            }
            Err(_) => break,
        }
    }
    if good_len < bytes.len() {
        let file = OpenOptions::new().write(true).open(path).map_err(|e| io("cannot open", path, e))?;
        file.set_len(good_len as u64).map_err(|e| io("cannot truncate", path, e))?;
    }
    Ok(signals)
}

/// Runs created by a hand-over (`continued_from` a loaded run) that run did not commit: it is
/// not `continued` as them.
fn torn_hand_overs(runs: &HashMap<RunId, (Loaded, Vec<SignalRecord>)>) -> Vec<RunId> {
    runs.values()
        .filter_map(|(loaded, _)| {
            let from = runs.get(loaded.run.rare().continued_from.as_ref()?)?;
            (from.0.run.rare().continued_as.as_ref() != Some(&loaded.run.id)).then(|| loaded.run.id.clone())
        })
        .collect()
}

/// Marks each run's consumed signals, and moves the unconsumed signals of a run that continued
/// to its successor, along each chain from its first run (signals files are append-only, so a
/// hand-over's moves are made here, as the memory store made them).
fn settle_signals(runs: &mut HashMap<RunId, (Loaded, Vec<SignalRecord>)>) {
    let firsts: Vec<RunId> = runs
        .values()
        .filter(|(loaded, _)| loaded.run.rare().continued_from.as_ref().is_none_or(|from| !runs.contains_key(from)))
        .map(|(loaded, _)| loaded.run.id.clone())
        .collect();
    for first in firsts {
        let mut moved: Vec<SignalRecord> = Vec::new();
        let mut next = Some(first);
        while let Some((loaded, signals)) = next.as_ref().and_then(|id| runs.get_mut(id)) {
            signals.append(&mut moved);
            signals.sort_by_key(|s| s.id);
            for (id, seq) in &loaded.consumed {
                if let Some(signal) = signals.iter_mut().find(|s| s.id == *id) {
                    signal.consumed_seq = Some(*seq);
                }
            }
            next = loaded.run.rare().continued_as.clone();
            if next.is_some() {
                let (unconsumed, consumed) =
                    std::mem::take(signals).into_iter().partition(|s| s.consumed_seq.is_none());
                (moved, *signals) = (unconsumed, consumed);
            }
        }
    }
}

/// The JSON array in `file`, or nothing if there is no such file.
fn read_list<T: serde::de::DeserializeOwned>(file: &Path) -> Result<Vec<T>, StoreError> {
    match std::fs::read(file) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt(format!("{}: {e}", file.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io("cannot read", file, e)),
    }
}

/// The event records in `file`, or none if there is no such file; a torn last line is cut off
/// (so the next record starts a line of its own).
fn read_events(file: &Path) -> Result<Vec<EventRecord>, StoreError> {
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("cannot read", file, e)),
    };
    let lines = complete_lines(&bytes);
    let covered = lines.last().map_or(0, |(end, _)| *end);
    if covered < bytes.len() {
        let cut = OpenOptions::new().write(true).open(file).and_then(|f| f.set_len(covered as u64));
        cut.map_err(|e| io("cannot truncate", file, e))?;
    }
    (lines.into_iter())
        .map(|(_, line)| {
            serde_json::from_slice(line).map_err(|e| StoreError::Corrupt(format!("{}: {e}", file.display())))
        })
        .collect()
}

/// Deletes a run's files (the journal file last: a run whose journal file is left is loaded again
/// on the next open).
fn remove_files(runs_dir: &Path, id: &RunId) -> Result<(), StoreError> {
    let stem = file_stem(id);
    for suffix in ["summary.json", "signals.jsonl", "jsonl"] {
        let path = runs_dir.join(format!("{stem}.{suffix}"));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot delete", &path, e)),
        }
    }
    Ok(())
}

/// The value of a memory-store future, which is ready when returned.
fn ready<T>(mut future: StoreFuture<'_, T>) -> Result<T, StoreError> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => Err(StoreError::backend("the in-memory index did not answer at once")),
    }
}

impl JsonlStore {
    /// Opens (creating if needed) the data directory `dir`. Fails if another process has it open.
    pub fn open(dir: impl AsRef<Path>) -> Result<JsonlStore, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        let runs_dir = dir.join("runs");
        std::fs::create_dir_all(&runs_dir).map_err(|e| io("cannot create", &runs_dir, e))?;
        let lock_path = dir.join("cairn.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io("cannot open", &lock_path, e))?;
        lock.try_lock().map_err(|_| {
            StoreError::backend(format!(
                "{} is in use by another process (lock file {})",
                dir.display(),
                lock_path.display()
            ))
        })?;
        let memory = MemoryStore::new();
        let entries = std::fs::read_dir(&runs_dir).map_err(|e| io("cannot list", &runs_dir, e))?;
        let mut runs: HashMap<RunId, (Loaded, Vec<SignalRecord>)> = HashMap::new();
        for entry in entries {
            let path = entry.map_err(|e| io("cannot list", &runs_dir, e))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            let Some(stem) = name.strip_suffix(".jsonl").filter(|s| !s.ends_with(".signals")) else { continue };
            let Some(mut loaded) = load_journal(&path)? else { continue };
            // The file keeps a loop's whole history; memory keeps what its checkpoints left.
            Trim::apply_all(&mut loaded.journal);
            let signals = load_signals(&runs_dir.join(format!("{stem}.signals.jsonl")))?;
            runs.insert(loaded.run.id.clone(), (loaded, signals));
        }
        for id in torn_hand_overs(&runs) {
            // Written first by a hand-over whose continued run's commit never landed: that run
            // is still unended and hands over again when it runs.
            runs.remove(&id);
            remove_files(&runs_dir, &id)?;
        }
        settle_signals(&mut runs);
        for (Loaded { run, journal, .. }, signals) in runs.into_values() {
            memory.restore(run, journal, signals);
        }
        let schedules_file = dir.join("schedules.json");
        memory.restore_schedules(read_list(&schedules_file)?);
        let concurrency_file = dir.join("concurrency.json");
        memory.restore_concurrency(read_list(&concurrency_file)?);
        let events_file = dir.join("events.jsonl");
        memory.restore_events(read_events(&events_file)?);
        Ok(JsonlStore {
            inner: Arc::new(Shared {
                runs_dir,
                schedules_file,
                concurrency_file,
                events_file,
                memory,
                writes: std::sync::Mutex::new(()),
                broken: AtomicBool::new(false),
                _lock: lock,
            }),
        })
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.inner.broken.load(Ordering::SeqCst) {
            return Err(StoreError::backend("a write to the data directory failed; reopen the store"));
        }
        Ok(())
    }

    /// Appends lines to a run file and syncs it; a failure breaks the store.
    fn write_lines(&self, file: &Path, lines: &[String]) -> Result<(), StoreError> {
        let result = (|| {
            let mut handle = OpenOptions::new().create(true).append(true).open(file)?;
            let mut text = String::new();
            for line in lines {
                text.push_str(line);
                text.push('\n');
            }
            handle.write_all(text.as_bytes())?;
            handle.sync_data()
        })();
        result.map_err(|e| {
            self.inner.broken.store(true, Ordering::SeqCst);
            io("cannot write", file, e)
        })
    }

    /// Commits a run's new event lines and its summary row (the commit marker), then refreshes the
    /// summary sidecar.
    fn commit(&self, id: &RunId, mut lines: Vec<String>, consumed: Option<(SignalId, u64)>) -> Result<(), StoreError> {
        let run = ready(self.inner.memory.get_run(id))?
            .ok_or_else(|| StoreError::Corrupt(format!("run {id} vanished from memory")))?;
        let stem = file_stem(id);
        let summary = encode(&run)?;
        lines.push(encode(&Line::Row { run: Box::new(run), consumed })?);
        self.write_lines(&self.inner.runs_dir.join(format!("{stem}.jsonl")), &lines)?;
        // The sidecar is a convenience copy; the journal file is the truth, so a failure here is
        // repaired at the next commit and by the next open.
        let sidecar = self.inner.runs_dir.join(format!("{stem}.summary.json"));
        let temporary = self.inner.runs_dir.join(format!("{stem}.summary.json.tmp"));
        if std::fs::write(&temporary, summary).is_ok() {
            let _ = std::fs::rename(&temporary, &sidecar);
        }
        Ok(())
    }

    /// The journal lines of the events the memory index appended to `id` after `after_seq` (for
    /// the changes whose events the index makes: creating and cancelling a run).
    fn tail(&self, id: &RunId, after_seq: u64) -> Result<Vec<String>, StoreError> {
        let journal = ready(self.inner.memory.read_journal(id))?;
        let new = journal.iter().filter(|e| e.seq > after_seq);
        new.map(|e| encode(&EventLine::Event { seq: e.seq, at: e.at, event: &e.event })).collect()
    }
}

impl JsonlStore {
    fn writing(&self) -> Result<std::sync::MutexGuard<'_, ()>, StoreError> {
        self.check()?;
        Ok(self.inner.writes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn create_now(&self, run: NewRun) -> Result<CreatedRun, StoreError> {
        let _writes = self.writing()?;
        // A debounced start that joins a debouncing run rewrites that run's `started` event.
        let debounced = run.debounce.is_some();
        let created = ready(self.inner.memory.create_run(run))?;
        if created.created || debounced {
            let events = self.tail(&created.run.id, 0)?;
            self.commit(&created.run.id, events, None)?;
        }
        Ok(created)
    }

    fn append_now(&self, append: Append) -> Result<(), StoreError> {
        let _writes = self.writing()?;
        let id = append.run_id.clone();
        let consumed = append.consumed();
        // Encoded from the append itself: the run's journal so far is not read again.
        let lines = event_lines(append.after_seq, append.at, &append.events)?;
        let successor = match &append.update {
            RunUpdate::Continue { successor, .. } => Some(successor.id.clone()),
            _ => None,
        };
        ready(self.inner.memory.append(append))?;
        if let Some(successor) = successor {
            // The successor's file first: if the process dies before this run's commit, the
            // next open finds it torn and deletes it (the signals it took are still this run's
            // on disk).
            let events = self.tail(&successor, 0)?;
            self.commit(&successor, events, None)?;
        }
        self.commit(&id, lines, consumed)
    }

    fn signal_now(&self, signal: NewSignal) -> Result<SignalId, StoreError> {
        let _writes = self.writing()?;
        let run_id = self.inner.memory.newest(&signal.run_id);
        let id = ready(self.inner.memory.send_signal(signal))?;
        self.commit_signal(&run_id, id, Vec::new())?;
        Ok(id)
    }

    /// Writes signal `id` of `run_id` (just delivered in memory) to its file, then commits the
    /// run's row (a waiting run was woken) after `events`.
    fn commit_signal(&self, run_id: &RunId, id: SignalId, events: Vec<String>) -> Result<(), StoreError> {
        let record = ready(self.inner.memory.signals(run_id))?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| StoreError::Corrupt("a delivered signal vanished".into()))?;
        let line = encode(&record)?;
        if !events.is_empty() {
            // A new run's journal file first: a signals file never exists without its run.
            self.commit(run_id, events, None)?;
        }
        self.write_lines(&self.inner.runs_dir.join(format!("{}.signals.jsonl", file_stem(run_id))), &[line])?;
        self.commit(run_id, Vec::new(), None)
    }

    fn start_with_signal_now(&self, run: NewRun, signal: StartSignal) -> Result<(CreatedRun, SignalId), StoreError> {
        let _writes = self.writing()?;
        let (created, id) = ready(self.inner.memory.start_with_signal(run, signal))?;
        let events = if created.created { self.tail(&created.run.id, 0)? } else { Vec::new() };
        self.commit_signal(&created.run.id, id, events)?;
        Ok((created, id))
    }

    /// Applies a row-only change (pause, resume) in memory, then commits the run's row.
    fn change_row<T>(&self, id: &RunId, change: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let _writes = self.writing()?;
        let outcome = change()?;
        self.commit(id, Vec::new(), None)?;
        Ok(outcome)
    }

    /// Deletes the runs in memory, then their files (the journal file last: a run whose journal
    /// file is left is loaded again on the next open, and pruned again); when events were
    /// deleted too, the events file is rewritten with the rest.
    fn prune_now(&self, request: PruneRequest) -> Result<Vec<RunId>, StoreError> {
        let _writes = self.writing()?;
        let dry_run = request.dry_run;
        let events = self.inner.memory.event_count();
        let doomed = ready(self.inner.memory.prune(request))?;
        if !dry_run {
            for id in &doomed {
                remove_files(&self.inner.runs_dir, id)?;
            }
        }
        if self.inner.memory.event_count() != events {
            let kept = self.inner.memory.all_events();
            let text = kept.iter().map(|event| Ok(encode(event)? + "\n")).collect::<Result<String, StoreError>>()?;
            self.replace_text(&self.inner.events_file, &text)?;
        }
        Ok(doomed)
    }

    /// Records an event in memory, then appends its record as merged there.
    fn record_event_now(&self, event: &EventRecord) -> Result<(), StoreError> {
        let _writes = self.writing()?;
        ready(self.inner.memory.record_event(event))?;
        let merged = (self.inner.memory.event(&event.id))
            .ok_or_else(|| StoreError::Corrupt(format!("event {} vanished from memory", event.id)))?;
        self.write_lines(&self.inner.events_file, &[encode(&merged)?])
    }

    /// Applies a change to the schedules in memory, then writes them all.
    fn change_schedules<T>(&self, change: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let _writes = self.writing()?;
        let outcome = change()?;
        self.write_schedules()?;
        Ok(outcome)
    }

    fn write_schedules(&self) -> Result<(), StoreError> {
        self.replace_file(&self.inner.schedules_file, &ready(self.inner.memory.schedules())?)
    }

    /// Applies a change to the concurrency rules in memory, then writes them all.
    fn change_rules<T>(&self, change: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let _writes = self.writing()?;
        let outcome = change()?;
        self.replace_file(&self.inner.concurrency_file, &ready(self.inner.memory.concurrency_rules())?)?;
        Ok(outcome)
    }

    /// Replaces `file` with `value` as JSON (a temporary file, synced, renamed over the old one:
    /// a crash leaves the old content or the new).
    fn replace_file(&self, file: &Path, value: &impl Serialize) -> Result<(), StoreError> {
        self.replace_text(file, &encode(value)?)
    }

    /// Replaces `file` with `text` (see [`replace_file`](Self::replace_file)).
    fn replace_text(&self, file: &Path, text: &str) -> Result<(), StoreError> {
        let temporary = file.with_extension("tmp");
        let result = (|| {
            let mut handle = File::create(&temporary)?;
            handle.write_all(text.as_bytes())?;
            handle.sync_all()?;
            std::fs::rename(&temporary, file)?;
            if let Some(dir) = file.parent() {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        result.map_err(|e: std::io::Error| {
            self.inner.broken.store(true, Ordering::SeqCst);
            io("cannot write", file, e)
        })
    }

    /// Fires a schedule: the runs' files first, then the schedules (a crash between leaves the
    /// schedule due, and firing it again finds the runs by their ids).
    fn fire_now(&self, fire: FireSchedule) -> Result<Option<Vec<CreatedRun>>, StoreError> {
        let _writes = self.writing()?;
        let Some(created) = ready(self.inner.memory.fire_schedule(fire))? else { return Ok(None) };
        for run in created.iter().filter(|c| c.created) {
            let events = self.tail(&run.run.id, 0)?;
            self.commit(&run.run.id, events, None)?;
        }
        self.write_schedules()?;
        Ok(Some(created))
    }

    fn cancel_now(&self, request: ControlRequest) -> Result<CancelOutcome, StoreError> {
        let _writes = self.writing()?;
        let id = request.run_id.clone();
        let before = ready(self.inner.memory.get_run(&id))?.map_or(0, |r| r.last_seq);
        let outcome = ready(self.inner.memory.cancel(request))?;
        let events = self.tail(&id, before)?;
        self.commit(&id, events, None)?;
        Ok(outcome)
    }
}

impl RunStore for JsonlStore {
    fn create_run(&self, run: NewRun) -> StoreFuture<'_, CreatedRun> {
        let result = self.create_now(run);
        Box::pin(async move { result })
    }

    fn get_run<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Option<RunRecord>> {
        self.inner.memory.get_run(id)
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, RunPage> {
        self.inner.memory.list_runs(filter)
    }

    fn claim<'a>(&'a self, request: &'a ClaimRequest) -> StoreFuture<'a, Vec<RunRecord>> {
        let result = self.writing().and_then(|_writes| ready(self.inner.memory.claim(request)));
        Box::pin(async move { result })
    }

    fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>> {
        self.inner.memory.heartbeat(request)
    }

    fn cancel(&self, request: ControlRequest) -> StoreFuture<'_, CancelOutcome> {
        let result = self.cancel_now(request);
        Box::pin(async move { result })
    }

    fn pause(&self, request: ControlRequest) -> StoreFuture<'_, PauseOutcome> {
        let id = request.run_id.clone();
        let result = self.change_row(&id, || ready(self.inner.memory.pause(request)));
        Box::pin(async move { result })
    }

    fn resume(&self, request: ResumeRequest) -> StoreFuture<'_, ()> {
        let id = request.run_id.clone();
        let result = self.change_row(&id, || ready(self.inner.memory.resume(request)));
        Box::pin(async move { result })
    }

    fn start_with_signal(&self, run: NewRun, signal: StartSignal) -> StoreFuture<'_, (CreatedRun, SignalId)> {
        let result = self.start_with_signal_now(run, signal);
        Box::pin(async move { result })
    }

    fn prune(&self, request: PruneRequest) -> StoreFuture<'_, Vec<RunId>> {
        Box::pin(async move { self.prune_now(request) })
    }

    fn version_counts(&self) -> StoreFuture<'_, Vec<VersionCount>> {
        self.inner.memory.version_counts()
    }

    fn workflow_counts(&self) -> StoreFuture<'_, Vec<WorkflowCount>> {
        self.inner.memory.workflow_counts()
    }

    fn next_wake_at<'a>(&'a self, workflows: &'a [WorkflowKey]) -> StoreFuture<'a, Option<Timestamp>> {
        self.inner.memory.next_wake_at(workflows)
    }
}

impl JournalStore for JsonlStore {
    fn read_journal<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<JournalEntry>> {
        self.inner.memory.read_journal(id)
    }

    fn append(&self, append: Append) -> StoreFuture<'_, ()> {
        let result = self.append_now(append);
        Box::pin(async move { result })
    }
}

impl SignalStore for JsonlStore {
    fn signals<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<SignalRecord>> {
        self.inner.memory.signals(id)
    }

    fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId> {
        let result = self.signal_now(signal);
        Box::pin(async move { result })
    }
}

impl ScheduleStore for JsonlStore {
    fn put_schedule<'a>(&'a self, put: &'a PutSchedule) -> StoreFuture<'a, ScheduleRecord> {
        let result = self.change_schedules(|| ready(self.inner.memory.put_schedule(put)));
        Box::pin(async move { result })
    }

    fn schedules(&self) -> StoreFuture<'_, Vec<ScheduleRecord>> {
        self.inner.memory.schedules()
    }

    fn due_schedules<'a>(
        &'a self,
        workflows: &'a [String],
        now: Timestamp,
        limit: usize,
    ) -> StoreFuture<'a, Vec<ScheduleRecord>> {
        self.inner.memory.due_schedules(workflows, now, limit)
    }

    fn fire_schedule(&self, fire: FireSchedule) -> StoreFuture<'_, Option<Vec<CreatedRun>>> {
        let result = self.fire_now(fire);
        Box::pin(async move { result })
    }

    fn pause_schedule<'a>(&'a self, change: &'a PauseSchedule) -> StoreFuture<'a, ScheduleRecord> {
        let result = self.change_schedules(|| ready(self.inner.memory.pause_schedule(change)));
        Box::pin(async move { result })
    }

    fn delete_schedule<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool> {
        let result = self.change_schedules(|| ready(self.inner.memory.delete_schedule(name)));
        Box::pin(async move { result })
    }
}

impl FlowStore for JsonlStore {
    fn put_concurrency<'a>(&'a self, rule: &'a ConcurrencyRule) -> StoreFuture<'a, ()> {
        let result = self.change_rules(|| ready(self.inner.memory.put_concurrency(rule)));
        Box::pin(async move { result })
    }

    fn delete_concurrency<'a>(&'a self, workflow: &'a str) -> StoreFuture<'a, bool> {
        let result = self.change_rules(|| ready(self.inner.memory.delete_concurrency(workflow)));
        Box::pin(async move { result })
    }

    fn concurrency_rules(&self) -> StoreFuture<'_, Vec<ConcurrencyRule>> {
        self.inner.memory.concurrency_rules()
    }

    /// Grants live in memory only, like leases: the one process that has the directory open
    /// counts them; a process that opens it again starts with empty windows.
    fn take_rate<'a>(&'a self, take: &'a TakeRate) -> StoreFuture<'a, Option<Timestamp>> {
        self.inner.memory.take_rate(take)
    }
}

impl EventStore for JsonlStore {
    fn record_event<'a>(&'a self, event: &'a EventRecord) -> StoreFuture<'a, ()> {
        let result = self.record_event_now(event);
        Box::pin(async move { result })
    }

    fn events<'a>(&'a self, query: &'a EventQuery) -> StoreFuture<'a, EventPage> {
        self.inner.memory.events(query)
    }
    fn set_subscriptions<'a>(&'a self, request: &'a SetSubscriptions) -> StoreFuture<'a, ()> {
        self.inner.memory.set_subscriptions(request)
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        self.inner.memory.subscriptions()
    }
}

impl WorkerStore for JsonlStore {
    fn record_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()> {
        self.inner.memory.record_worker(worker)
    }

    fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>> {
        self.inner.memory.workers()
    }

    fn forget_workers<'a>(&'a self, request: &'a ForgetWorkers) -> StoreFuture<'a, u64> {
        self.inner.memory.forget_workers(request)
    }
    fn record_served<'a>(&'a self, serves: &'a [WorkflowKey], at: Timestamp) -> StoreFuture<'a, ()> {
        self.inner.memory.record_served(serves, at)
    }

    fn served_workflows(&self) -> StoreFuture<'_, Vec<ServedWorkflow>> {
        self.inner.memory.served_workflows()
    }
}
