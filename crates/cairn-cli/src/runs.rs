//! `cairn runs list|show|signal|cancel`.

use anyhow::{Context, Result, bail};
use cairn::journal::Event;
use cairn::{CancelOutcome, Client, PageCursor, PauseOutcome, RunFilter, RunId, RunRecord, RunStatus, SqliteStore};
use cairn_http::views;
pub(crate) use cairn_http::views::time;
use clap::{Args, Subcommand};
use serde_json::json;
use std::path::PathBuf;

/// Where the runs are: an SQLite file (`--db`, the default), PostgreSQL (`--database-url`) or a
/// JSONL data directory (`--data-dir`).
#[derive(Args, Clone)]
pub(crate) struct StoreArgs {
    /// SQLite database file.
    #[arg(long, env = "CAIRN_DB", default_value = "cairn.db", global = true)]
    db: PathBuf,
    /// PostgreSQL URL (e.g. postgres://user@host/db); takes precedence over --db.
    #[arg(long, env = "CAIRN_DATABASE_URL", global = true)]
    database_url: Option<String>,
    /// PostgreSQL schema holding Cairn's tables.
    #[arg(long, env = "CAIRN_SCHEMA", default_value = "cairn", global = true)]
    schema: String,
    /// JSONL data directory (one file per run); takes precedence over --db.
    #[arg(long, env = "CAIRN_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
}

impl StoreArgs {
    /// Opens the store; an SQLite file must already exist (`create` says whether to make one).
    pub(crate) async fn open(&self, create: bool) -> Result<std::sync::Arc<dyn cairn::Store>> {
        if let Some(url) = &self.database_url {
            let options = cairn_postgres::PostgresOptions::new(url).schema(&self.schema);
            let store = cairn_postgres::PostgresStore::connect(options)
                .await
                .with_context(|| format!("cannot open PostgreSQL schema {:?}", self.schema))?;
            return Ok(std::sync::Arc::new(store));
        }
        if let Some(dir) = &self.data_dir {
            if !create && !dir.exists() {
                bail!("no Cairn data directory at {}", dir.display());
            }
            let store =
                cairn::store::JsonlStore::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
            return Ok(std::sync::Arc::new(store));
        }
        if !create && !self.db.exists() {
            bail!("no Cairn database at {} (use --db PATH or --database-url URL)", self.db.display());
        }
        let store = SqliteStore::open(&self.db).with_context(|| format!("cannot open {}", self.db.display()))?;
        Ok(std::sync::Arc::new(store))
    }

    /// A short description of the store for messages.
    pub(crate) fn describe(&self) -> String {
        match (&self.database_url, &self.data_dir) {
            (Some(_), _) => format!("PostgreSQL schema {}", self.schema),
            (None, Some(dir)) => format!("JSONL directory {}", dir.display()),
            (None, None) => self.db.display().to_string(),
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs, newest first.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Only runs of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// Only runs with this status (pending, running, suspended, completed, failed, cancelled, paused).
        #[arg(long)]
        status: Option<String>,
        /// At most this many runs (default: all).
        #[arg(long)]
        limit: Option<usize>,
        /// Continue after this cursor (printed on stderr when a page is cut short).
        #[arg(long)]
        cursor: Option<String>,
        /// Only stranded runs: pending, running or suspended while no live worker serves their
        /// workflow version.
        #[arg(long)]
        stranded: bool,
        /// Print one JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one run: its summary, journal and signals.
    Show {
        #[command(flatten)]
        store: StoreArgs,
        /// The run's id.
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Deliver a signal to a run (kept until a matching wait consumes it).
    Signal {
        #[command(flatten)]
        store: StoreArgs,
        /// The run's id.
        id: String,
        /// The signal's name.
        event: String,
        /// The payload, as JSON (default: null).
        payload: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pause a run: no worker claims it until resumed; a running one stops at its next step
    /// boundary.
    Pause {
        #[command(flatten)]
        store: StoreArgs,
        /// The run's id.
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused run (paused by request, or parked by an error once fixed code is deployed).
    Resume {
        #[command(flatten)]
        store: StoreArgs,
        /// The run's id.
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a new run that restarts an ended run from a step: the original's journal before
    /// that step is kept (those steps do not run again), the step and all after it run anew.
    Restart {
        #[command(flatten)]
        store: StoreArgs,
        /// The ended run's id.
        id: String,
        /// The step (or scope) to run again from, as `runs show` lists its path.
        #[arg(long = "from-step", value_name = "PATH")]
        from_step: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete ended runs (completed, failed, cancelled) past their retention, with their journals
    /// and signals, in batches of 1,000; never a run that has not ended.
    Prune {
        #[command(flatten)]
        store: StoreArgs,
        /// Also delete every ended run that ended longer ago than this (e.g. `90d`, `12h`),
        /// whatever its retention.
        #[arg(long = "older-than", value_name = "DURATION")]
        older_than: Option<String>,
        /// List what would be deleted, deleting nothing.
        #[arg(long = "dry-run")]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a run of a workflow (a worker serving it executes it; without `--version`, version 1).
    Start {
        #[command(flatten)]
        store: StoreArgs,
        /// The workflow's name.
        workflow: String,
        /// The input, as JSON (default: null).
        input: Option<String>,
        /// The run's id (default: a new UUIDv7).
        #[arg(long)]
        id: Option<String>,
        /// Starting again with the same key returns the existing run.
        #[arg(long = "idempotency-key")]
        idempotency_key: Option<String>,
        /// The workflow version.
        #[arg(long)]
        version: Option<u32>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show each step of a run over time: when it began and ended, its attempts and errors,
    /// sleeps and waits.
    Steps {
        #[command(flatten)]
        store: StoreArgs,
        /// The run's id.
        id: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a run.
    Cancel {
        #[command(flatten)]
        store: StoreArgs,
        /// The run's id.
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn open(store: &StoreArgs) -> Result<Client> {
    Ok(Client::from_shared(store.open(false).await?))
}

/// A JSON argument (`null` when absent), or an error naming it.
pub(crate) fn json_arg(what: &str, text: Option<String>) -> Result<Box<serde_json::value::RawValue>> {
    match text {
        Some(text) => serde_json::from_str(&text).with_context(|| format!("{what} {text:?} is not JSON")),
        None => Ok(serde_json::value::RawValue::NULL.to_owned()),
    }
}

pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

fn status_text(run: &RunRecord) -> String {
    match run.suspend_reason {
        Some(reason) if run.status == RunStatus::Suspended => format!("suspended ({})", reason.as_str()),
        _ => run.status.to_string(),
    }
}

fn describe(event: &Event) -> (String, String) {
    let path = event.path().map(|p| p.to_string()).unwrap_or_default();
    let detail = match event {
        Event::Started { workflow, version, input, deadline } => match deadline {
            Some(at) => format!("{workflow} v{version} input {} deadline {}", input.get(), time(*at)),
            None => format!("{workflow} v{version} input {}", input.get()),
        },
        Event::StepCompleted { attempt, output, .. } => format!("attempt {attempt} → {}", output.get()),
        Event::StepFailed { attempt, error, retry_at, .. } => match retry_at {
            Some(at) => format!("attempt {attempt} failed: {error}; retry at {}", time(*at)),
            None => format!("attempt {attempt} failed for good: {error}"),
        },
        Event::TimerStarted { wake_at, .. } => format!("until {}", time(*wake_at)),
        Event::WaitStarted { event, filter, deadline, .. } => format!(
            "for `{event}`{}{}",
            filter.as_ref().map(|f| format!(" matching {f}")).unwrap_or_default(),
            deadline.map(|d| format!(" until {}", time(d))).unwrap_or_default()
        ),
        Event::WaitCompleted { signal: Some(id), payload, .. } => {
            format!("got signal {} {}", id.0, payload.as_ref().map(|p| p.get()).unwrap_or("null"))
        }
        Event::WaitCompleted { signal: None, .. } => "timed out".to_owned(),
        Event::Completed { output } => output.get().to_owned(),
        Event::Failed { error } => error.clone(),
        Event::Cancelled { reason } => reason.clone(),
        Event::TimerFired { .. } => String::new(),
        Event::Patched { id, applied: true } => format!("{id}: patched branch"),
        Event::Patched { id, applied: false } => format!("{id}: old branch"),
        _ => String::new(),
    };
    (path, detail)
}

pub(crate) async fn run(command: RunsCommand) -> Result<()> {
    match command {
        RunsCommand::List { store, workflow, status, limit, cursor, stranded, json } => {
            let client = open(&store).await?;
            let status = status.as_deref().map(RunStatus::parse_given).transpose().map_err(anyhow::Error::msg)?;
            let mut filter = RunFilter {
                workflow,
                status,
                cursor: cursor.as_deref().map(PageCursor::decode).transpose()?,
                limit: Some(limit.unwrap_or(1000).min(1000)),
                ..RunFilter::default()
            };
            let live = client.live_workers().await?;
            if stranded {
                filter.stranded = Some(live.served());
            }
            let mut runs = Vec::new();
            let mut next = None;
            loop {
                let page = client.list(&filter).await?;
                runs.extend(page.runs);
                match (page.next_cursor, limit) {
                    (Some(cursor), Some(limit)) if runs.len() >= limit => {
                        runs.truncate(limit);
                        next = Some(cursor);
                        break;
                    }
                    (Some(cursor), _) => filter.cursor = Some(cursor),
                    (None, _) => break,
                }
            }
            if json {
                out!("{}", json!(runs.iter().map(|run| views::listed(run, &live)).collect::<Vec<_>>()));
            } else {
                let rows: Vec<Vec<String>> = runs
                    .iter()
                    .map(|r| {
                        vec![
                            r.id.to_string(),
                            r.workflow.clone(),
                            match live.why_stranded(r) {
                                Some(_) => format!("{}, stranded", status_text(r)),
                                None => status_text(r),
                            },
                            time(r.created_at),
                            r.completed_at.map(time).unwrap_or_default(),
                        ]
                    })
                    .collect();
                out!("{}", table(&["ID", "WORKFLOW", "STATUS", "CREATED", "COMPLETED"], &rows));
            }
            if let Some(cursor) = next {
                eprintln!("more runs: --cursor {}", cursor.encode());
            }
        }
        RunsCommand::Show { store, id, json } => {
            let client = open(&store).await?;
            let id = RunId::new(id);
            let run = client.get(&id).await?;
            let journal = client.journal(&id).await?;
            let signals = client.signals(&id).await?;
            let restarts = client.restarts(&id).await?;
            let live = client.live_workers().await?;
            let stranded = live.why_stranded(&run);
            if json {
                let out = json!({
                    "run": views::detail(&run, &live, &restarts),
                    "journal": journal.iter().map(views::entry).collect::<Vec<_>>(),
                    "signals": signals.iter().map(views::signal).collect::<Vec<_>>(),
                });
                out!("{out}");
            } else {
                out!("run       {}", run.id);
                out!("workflow  {} v{}", run.workflow, run.version);
                out!("status    {}", status_text(&run));
                if let Some(reason) = &stranded {
                    out!("stranded  {reason}");
                }
                out!("created   {}", time(run.created_at));
                if let Some(at) = run.completed_at {
                    out!("completed {}", time(at));
                }
                if let Some(at) = run.wake_at {
                    out!("wakes     {}", time(at));
                }
                if let Some(at) = run.deadline {
                    out!("deadline  {}", time(at));
                }
                if let Some(original) = &run.restarted_from {
                    out!("restarts  {original}");
                }
                for restart in &restarts {
                    out!("restarted as {restart}");
                }
                out!("input     {}", run.input.get());
                if let Some(output) = &run.output {
                    out!("output    {}", output.get());
                }
                if let Some(error) = &run.error {
                    out!("error     {error}");
                }
                out!();
                let rows: Vec<Vec<String>> = journal
                    .iter()
                    .map(|e| {
                        let (path, detail) = describe(&e.event);
                        vec![
                            e.seq.to_string(),
                            time(e.at),
                            cairn::journal::EventKindName::kind_name(&e.event).into(),
                            path,
                            detail,
                        ]
                    })
                    .collect();
                out!("{}", table(&["SEQ", "AT", "EVENT", "PATH", "DETAIL"], &rows));
                if !signals.is_empty() {
                    out!();
                    let rows: Vec<Vec<String>> = signals
                        .iter()
                        .map(|s| {
                            vec![
                                s.id.0.to_string(),
                                s.name.clone(),
                                s.payload.get().to_owned(),
                                time(s.sent_at),
                                s.consumed_seq
                                    .map_or_else(|| "buffered".to_owned(), |seq| format!("consumed at #{seq}")),
                            ]
                        })
                        .collect();
                    out!("{}", table(&["SIGNAL", "NAME", "PAYLOAD", "SENT", "STATE"], &rows));
                }
            }
        }
        RunsCommand::Signal { store, id, event, payload, json } => {
            let client = open(&store).await?;
            let payload = json_arg("payload", payload)?;
            let id = RunId::new(id);
            let signal = client.signal(&id, &event, &payload).await?;
            if json {
                out!("{}", json!(views::SignalSent { run: id.to_string(), signal: signal.0, event }));
            } else {
                out!("signal {} `{event}` delivered to {id}", signal.0);
            }
        }
        RunsCommand::Start { store, workflow, input, id, idempotency_key, version, json } => {
            let input = json_arg("input", input)?;
            let client = Client::from_shared(store.open(true).await?);
            let handle = client.start_raw(&workflow, input, id, idempotency_key, version).await?;
            let run = handle.record();
            if json {
                out!("{}", json!(views::started(&handle)));
            } else if handle.created() {
                out!("{} started: a worker serving {} v{} runs it", run.id, run.workflow, run.version);
            } else {
                out!("{} already exists with this idempotency key ({})", run.id, run.status);
            }
        }
        RunsCommand::Steps { store, id, json } => {
            let client = open(&store).await?;
            let id = RunId::new(id);
            client.get(&id).await?;
            let steps = views::steps(&id, &client.journal(&id).await?);
            if json {
                out!("{}", json!(steps));
            } else {
                let rows: Vec<Vec<String>> = steps
                    .steps
                    .iter()
                    .map(|s| {
                        let errors = s.attempts.iter().filter(|a| a.error.is_some()).count();
                        vec![
                            s.path.clone(),
                            s.kind.clone(),
                            s.phase.clone(),
                            s.started_at.clone(),
                            s.duration_ms.map(|ms| format!("{ms} ms")).unwrap_or_default(),
                            match (s.attempts.len(), errors) {
                                (0, _) => String::new(),
                                (n, 0) => n.to_string(),
                                (n, e) => format!("{n} ({e} failed)"),
                            },
                        ]
                    })
                    .collect();
                out!("{}", table(&["PATH", "KIND", "PHASE", "STARTED", "TOOK", "ATTEMPTS"], &rows));
            }
        }
        RunsCommand::Cancel { store, id, json } => {
            let client = open(&store).await?;
            let id = RunId::new(id);
            let outcome = client.cancel(&id).await?;
            if json {
                out!("{}", json!(views::Outcome::cancel(&id, outcome)));
            } else if outcome == CancelOutcome::Cancelled {
                out!("{id} cancelled");
            } else {
                out!("{id} is running: its worker will cancel it at its next heartbeat");
            }
        }
        RunsCommand::Pause { store, id, json } => {
            let client = open(&store).await?;
            let id = RunId::new(id);
            let outcome = client.pause(&id).await?;
            if json {
                out!("{}", json!(views::Outcome::pause(&id, outcome)));
            } else if outcome == PauseOutcome::Paused {
                out!("{id} paused");
            } else {
                out!("{id} is running: its worker will pause it at its next step boundary");
            }
        }
        RunsCommand::Restart { store, id, from_step, json } => {
            let client = open(&store).await?;
            let id = RunId::new(id);
            let restarted = client.restart(&id, &from_step).await?;
            if json {
                let restart =
                    views::Restarted { run: restarted.id().to_string(), restarted_from: id.to_string(), from_step };
                out!("{}", json!(restart));
            } else {
                out!("{} restarts {id} from `{from_step}`: a worker serving its version runs it", restarted.id());
            }
        }
        RunsCommand::Prune { store, older_than, dry_run, json } => {
            let older_than = older_than
                .map(|text| {
                    humantime::parse_duration(&text)
                        .with_context(|| format!("--older-than {text:?} is not a duration (try `30d` or `12h`)"))
                })
                .transpose()?;
            let client = open(&store).await?;
            let runs = client.prune(older_than, dry_run).await?;
            if json {
                let ids: Vec<&str> = runs.iter().map(RunId::as_str).collect();
                out!("{}", json!({ "deleted": if dry_run { 0 } else { runs.len() }, "dry_run": dry_run, "runs": ids }));
            } else if dry_run {
                out!("would delete {} ended runs", runs.len());
                for id in &runs {
                    out!("{id}");
                }
            } else {
                out!("deleted {} ended runs", runs.len());
            }
        }
        RunsCommand::Resume { store, id, json } => {
            let client = open(&store).await?;
            let id = RunId::new(id);
            client.resume(&id).await?;
            if json {
                out!("{}", json!(views::Outcome::resumed(&id)));
            } else {
                out!("{id} resumed: a worker serving its version continues it");
            }
        }
    }
    Ok(())
}
