//! `cairn runs …`: list, count, show, start, signal, cancel, pause, resume, restart and prune runs,
//! and cancel, pause or resume those a filter selects (`bulk`), in
//! a store or through a running `cairn serve` (`--url`).

use crate::backend::{Command, Shown, Target, input_pairs};
use crate::store_args::Access;
use anyhow::{Context, Result};
pub(crate) use cairn::api::views::time;
use cairn::journal::Event;
use cairn_api::views::RunView;
use cairn_api::{
    BulkBody, BulkFilter, CancelOptions, DebounceOptions, ListQuery, Operations, PauseOptions, PruneBody, RestartBody,
    StartOptions,
};
use clap::{Args, Subcommand};
use serde_json::json;

/// Which runs a list, a count or a bulk action selects.
#[derive(Args)]
pub(crate) struct Filter {
    /// Only runs of this workflow.
    #[arg(long)]
    workflow: Option<String>,
    /// Only runs with this status (pending, running, suspended, completed, failed, cancelled, paused).
    #[arg(long)]
    status: Option<String>,
    /// Only stranded runs: pending, running or suspended while no live worker serves their
    /// workflow version.
    #[arg(long)]
    stranded: bool,
    /// Only runs whose input has FIELD (a dotted path) equal to VALUE (JSON, or else a
    /// string), e.g. `--input customer=42 --input address.city=Oslo`.
    #[arg(long, value_name = "FIELD=VALUE")]
    input: Vec<String>,
    /// Only runs whose id starts with this text.
    #[arg(long, value_name = "TEXT")]
    id_prefix: Option<String>,
    /// Only runs whose error holds this text (ASCII case ignored).
    #[arg(long, value_name = "TEXT")]
    error: Option<String>,
}

impl Filter {
    /// The list query of these runs.
    fn query(self) -> Result<ListQuery> {
        let Filter { workflow, status, stranded, input, id_prefix, error } = self;
        let input = input_pairs(&input)?;
        Ok(ListQuery { workflow, status, stranded, input, id_prefix, error, ..ListQuery::default() })
    }

    /// The filter of a bulk action on these runs.
    fn bulk(self) -> Result<BulkFilter> {
        let ListQuery { workflow, status, stranded, input, id_prefix, error, .. } = self.query()?;
        let input = match cairn::api::views::input_fields(&input).map_err(anyhow::Error::msg)? {
            Some(serde_json::Value::Object(map)) => Some(map),
            _ => None,
        };
        Ok(BulkFilter { workflow, status, id_prefix, error, stranded, input, ..BulkFilter::default() })
    }
}

#[derive(Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs, newest first.
    List {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        filter: Filter,
        /// At most this many runs (default: all).
        #[arg(long)]
        limit: Option<usize>,
        /// Continue after this cursor (printed on stderr when a page is cut short).
        #[arg(long)]
        cursor: Option<String>,
        /// Print one JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Count the runs a filter selects.
    Count {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        filter: Filter,
        /// Stop counting at this many runs, 1 to 100,000 (default 10,000).
        #[arg(long)]
        at_most: Option<u64>,
        /// Print JSON (the HTTP API's answer) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Cancel, pause or resume the newest runs a filter selects, each as its own command would.
    Bulk {
        #[command(flatten)]
        target: Target,
        /// What to do to each run: cancel, pause or resume.
        #[arg(value_parser = ["cancel", "pause", "resume"])]
        action: String,
        #[command(flatten)]
        filter: Filter,
        /// At most this many runs, the newest first: 1 to 1,000 (default 100).
        #[arg(long)]
        limit: Option<usize>,
        /// Print JSON (the HTTP API's answer) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show one run: its summary, journal and signals.
    Show {
        #[command(flatten)]
        target: Target,
        /// The run's id.
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Deliver a signal to a run (kept until a matching wait consumes it).
    Signal {
        #[command(flatten)]
        target: Target,
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
        target: Target,
        /// The run's id.
        id: String,
        /// Why, shown as the paused run's error (1 to 1,000 characters; default `paused by
        /// request`).
        #[arg(long)]
        reason: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused run (paused by request, or parked by an error once fixed code is deployed).
    Resume {
        #[command(flatten)]
        target: Target,
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
        target: Target,
        /// The ended run's id.
        id: String,
        /// The step (or scope) to run again from, as `runs show` lists its path.
        #[arg(long = "from-step", value_name = "PATH")]
        from_step: String,
        /// Why, journaled in the new run's `started` event (1 to 1,000 characters).
        #[arg(long)]
        reason: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete ended runs (completed, failed, cancelled) past their retention, with their journals
    /// and signals, in batches of 1,000; never a run that has not ended.
    Prune {
        #[command(flatten)]
        target: Target,
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
        target: Target,
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
        /// Its priority (default 0): ready runs of a higher priority are claimed first.
        #[arg(long, allow_negative_numbers = true)]
        priority: Option<i32>,
        /// The key it is served fairly by within its priority (a tenant, a customer).
        #[arg(long = "fairness-key")]
        fairness_key: Option<String>,
        /// Debounce the start under this key: starts with the same key collapse into one run
        /// with the latest input, which begins once the key has been quiet for `--quiet`.
        #[arg(long, requires = "quiet")]
        debounce: Option<String>,
        /// With `--debounce`: how long the key must be quiet before the run begins (`2s`).
        #[arg(long, requires = "debounce")]
        quiet: Option<String>,
        /// With `--debounce`: the latest the run begins after its window's first start (`1m`).
        #[arg(long = "max-wait", requires = "debounce")]
        max_wait: Option<String>,
        /// A deadline for the whole run, this long after the start (`30m`, `2h`); at it the run
        /// fails with a timeout error.
        #[arg(long)]
        timeout: Option<String>,
        /// Days to keep the run once it has ended (default: the workflow's, or 30).
        #[arg(long = "retention-days")]
        retention_days: Option<u32>,
        /// Start it even if no worker has ever served this workflow (or version) on the store;
        /// it waits for one. Without it such a start is refused (unknown workflow).
        #[arg(long = "allow-unknown")]
        allow_unknown: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show each step of a run over time: when it began and ended, its attempts and errors,
    /// sleeps and waits.
    Steps {
        #[command(flatten)]
        target: Target,
        /// The run's id.
        id: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a run.
    Cancel {
        #[command(flatten)]
        target: Target,
        /// The run's id.
        id: String,
        /// Why, journaled in the run's `cancelled` event and shown as its error (1 to 1,000
        /// characters; default `cancelled`).
        #[arg(long)]
        reason: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
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

fn status_text(run: &RunView) -> String {
    match (&run.suspend_reason, &run.waiting_for) {
        (_, Some(waiting)) => format!("{} (waiting_for: {waiting})", run.status),
        (Some(reason), _) if run.status == "suspended" => format!("suspended ({reason})"),
        _ => run.status.to_string(),
    }
}

fn describe(event: &Event) -> (String, String) {
    let path = event.path().map(|p| p.to_string()).unwrap_or_default();
    let detail = match event {
        Event::Started { workflow, version, input, deadline, reason } => {
            let deadline = deadline.map(|at| format!(" deadline {}", time(at))).unwrap_or_default();
            let reason = reason.as_ref().map(|why| format!(" ({why})")).unwrap_or_default();
            format!("{workflow} v{version} input {}{deadline}{reason}", input.get())
        }
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
        Event::VarSet { name, value } => format!("{name} = {}", value.get()),
        _ => String::new(),
    };
    (path, detail)
}

impl Command for RunsCommand {
    fn target(&self) -> (&Target, Access) {
        use RunsCommand::*;
        match self {
            List { target, .. } | Count { target, .. } | Show { target, .. } | Steps { target, .. } => {
                (target, Access::Read)
            }
            Start { target, .. } => (target, Access::Create),
            Signal { target, .. }
            | Cancel { target, .. }
            | Pause { target, .. }
            | Resume { target, .. }
            | Restart { target, .. }
            | Bulk { target, .. }
            | Prune { target, .. } => (target, Access::Write),
        }
    }

    async fn execute<O: Operations>(self, ops: &O) -> Result<()> {
        execute(self, ops).await
    }
}

async fn execute<O: Operations>(command: RunsCommand, ops: &O) -> Result<()> {
    match command {
        RunsCommand::List { target: _, filter, limit, cursor, json } => {
            let mut query = ListQuery { cursor, limit: Some(limit.unwrap_or(1000).clamp(1, 1000)), ..filter.query()? };
            let mut runs = Vec::new();
            let mut next = None;
            loop {
                let page = ops.list(&query).await?;
                runs.extend(page.runs);
                match (page.next_cursor, limit) {
                    (Some(cursor), Some(limit)) if runs.len() >= limit => {
                        runs.truncate(limit);
                        next = Some(cursor);
                        break;
                    }
                    (Some(cursor), _) => query.cursor = Some(cursor),
                    (None, _) => break,
                }
            }
            if json {
                out!("{}", json!(runs));
            } else {
                let rows: Vec<Vec<String>> = runs
                    .iter()
                    .map(|r| {
                        vec![
                            r.run.id.clone(),
                            r.run.workflow.clone(),
                            match r.stranded {
                                true => format!("{}, stranded", status_text(&r.run)),
                                false => status_text(&r.run),
                            },
                            r.run.created_at.clone(),
                            r.run.completed_at.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                out!("{}", table(&["ID", "WORKFLOW", "STATUS", "CREATED", "COMPLETED"], &rows));
            }
            if let Some(cursor) = next {
                eprintln!("more runs: --cursor {cursor}");
            }
        }
        RunsCommand::Count { target: _, filter, at_most, json } => {
            let counted = ops.count(&filter.query()?, at_most).await?;
            match (json, counted.capped) {
                (true, _) => out!("{}", json!(counted)),
                (false, false) => out!("{}", counted.count),
                (false, true) => out!("at least {}", counted.count),
            }
        }
        RunsCommand::Bulk { target: _, action, filter, limit, json } => {
            let action = serde_json::from_value(json!(action))?;
            let done = ops.bulk(&BulkBody { action, filter: filter.bulk()?, limit }).await?;
            if json {
                out!("{}", json!(done));
                return Ok(());
            }
            for run in &done.runs {
                match (&run.outcome, &run.error) {
                    (Some(outcome), _) => out!("{}  {}  {outcome}", run.run, run.workflow),
                    (None, Some(error)) => {
                        out!("{}  {}  refused: {} ({})", run.run, run.workflow, error.message, error.code)
                    }
                    (None, None) => {}
                }
            }
            out!("{} done, {} refused", done.done, done.refused);
            if done.more {
                eprintln!("more runs match: run it again, or raise --limit");
            }
        }
        RunsCommand::Show { target: _, id, json } => {
            let shown = Shown::read(ops, &id).await?;
            if json {
                out!("{}", json!(shown));
            } else {
                print_shown(&shown);
            }
        }
        RunsCommand::Signal { target: _, id, event, payload, json } => {
            let payload = json_arg("payload", payload)?;
            let sent = ops.signal(&id, &event, &payload).await?;
            if json {
                out!("{}", json!(sent));
            } else {
                out!("signal {} `{}` delivered to {}", sent.signal, sent.event, sent.run);
            }
        }
        RunsCommand::Start {
            target: _,
            workflow,
            input,
            id,
            idempotency_key,
            version,
            priority,
            fairness_key,
            debounce,
            quiet,
            max_wait,
            timeout,
            retention_days,
            allow_unknown,
            json,
        } => {
            let options = StartOptions {
                input: Some(json_arg("input", input)?),
                id,
                idempotency_key,
                version,
                retention_days,
                priority,
                fairness_key,
                debounce: debounce.zip(quiet).map(|(key, quiet)| DebounceOptions { key, quiet, max_wait }),
                timeout,
                allow_unknown: allow_unknown.then_some(true),
            };
            let started = ops.start(&workflow, &options).await?;
            let run = &started.run;
            if json {
                out!("{}", json!(started));
            } else if let (Some("debounce"), Some(key), Some(wakes)) =
                (run.waiting_for.as_deref(), run.debounce_key.as_deref(), run.wake_at.as_deref())
            {
                let how = if started.created { "started" } else { "joined" };
                out!(
                    "{} {how}: debouncing under key {key}; a worker serving {} v{} runs it at {wakes} unless another start with the key comes first",
                    run.id,
                    run.workflow,
                    run.version
                );
            } else if started.created {
                out!("{} started: a worker serving {} v{} runs it", run.id, run.workflow, run.version);
            } else {
                out!("{} already exists with this idempotency key ({})", run.id, run.status);
            }
        }
        RunsCommand::Steps { target: _, id, json } => {
            let steps = ops.steps(&id).await?;
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
                            s.kind.to_string(),
                            s.phase.to_string(),
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
        RunsCommand::Cancel { target: _, id, reason, json } => {
            let mut options = CancelOptions::default();
            options.reason = reason;
            let outcome = ops.cancel(&id, &options).await?;
            if json {
                out!("{}", json!(outcome));
            } else if outcome.outcome == "cancelled" {
                out!("{id} cancelled");
            } else {
                out!("{id} is running: its worker will cancel it at its next heartbeat");
            }
        }
        RunsCommand::Pause { target: _, id, reason, json } => {
            let mut options = PauseOptions::default();
            options.reason = reason;
            let outcome = ops.pause(&id, &options).await?;
            if json {
                out!("{}", json!(outcome));
            } else if outcome.outcome == "paused" {
                out!("{id} paused");
            } else {
                out!("{id} is running: its worker will pause it at its next step boundary");
            }
        }
        RunsCommand::Restart { target: _, id, from_step, reason, json } => {
            let restarted = ops.restart(&id, &RestartBody { from_step: from_step.clone(), reason }).await?;
            if json {
                out!("{}", json!(restarted));
            } else {
                out!("{} restarts {id} from `{from_step}`: a worker serving its version runs it", restarted.run);
            }
        }
        RunsCommand::Prune { target: _, older_than, dry_run, json } => {
            let pruned = prune(ops, older_than, dry_run).await?;
            if json {
                out!("{}", json!(pruned));
            } else if dry_run {
                out!("would delete {} ended runs", pruned.runs.len());
                for id in &pruned.runs {
                    out!("{id}");
                }
            } else {
                out!("deleted {} ended runs", pruned.deleted);
            }
        }
        RunsCommand::Resume { target: _, id, json } => {
            let outcome = ops.resume(&id).await?;
            if json {
                out!("{}", json!(outcome));
            } else {
                out!("{id} resumed: a worker serving its version continues it");
            }
        }
    }
    Ok(())
}

/// Prunes ended runs; `older_than` as given (`90d`), checked here first. A prune of more than
/// one batch reports its progress, where the batches can be seen (on a store).
async fn prune<O: Operations>(ops: &O, older_than: Option<String>, dry_run: bool) -> Result<cairn_api::views::Pruned> {
    if let Some(text) = &older_than {
        humantime::parse_duration(text)
            .map_err(|_| anyhow::anyhow!("--older-than {text:?} is not a duration (try `30d` or `12h`)"))?;
    }
    // Reported from the second batch on: a prune of one batch says nothing until done.
    let mut progress = crate::progress::Progress::new("pruning", "ended runs deleted", None);
    let (mut batches, mut deleted) = (0, 0);
    let body = PruneBody { older_than, dry_run };
    let pruned = ops
        .prune_reporting(&body, &mut |batch| {
            (batches, deleted) = (batches + 1, deleted + batch as u64);
            if batches > 1 {
                progress.set(deleted);
            }
        })
        .await?;
    if batches > 1 {
        progress.finish();
    }
    Ok(pruned)
}

/// `runs show` as text: the run's summary, its journal and its signals.
fn print_shown(shown: &Shown) {
    let (detail, run) = (&shown.run, &shown.run.listed.run);
    out!("run       {}", run.id);
    out!("workflow  {} v{}", run.workflow, run.version);
    out!("status    {}", status_text(run));
    if let Some(reason) = &detail.listed.stranded_reason {
        out!("stranded  {reason}");
    }
    out!("created   {}", run.created_at);
    if run.priority != 0 || run.fairness_key.is_some() {
        let key = run.fairness_key.as_deref().map(|key| format!(", fairness key {key}")).unwrap_or_default();
        out!("priority  {}{key}", run.priority);
    }
    if let Some(key) = &run.debounce_key {
        out!("debounce  key {key}");
    }
    let optional = [("completed", &run.completed_at), ("wakes    ", &run.wake_at), ("deadline ", &run.deadline)];
    for (label, value) in optional {
        if let Some(value) = value {
            out!("{label} {value}");
        }
    }
    if let Some(original) = &run.restarted_from {
        out!("restarts  {original}");
    }
    for restart in &detail.restarts {
        out!("restarted as {restart}");
    }
    if let Some(parent) = &run.parent {
        out!("parent    {parent}");
    }
    if let Some(from) = &run.continued_from {
        out!("continues {from}");
    }
    if let Some(next) = &run.continued_as {
        out!("continued as {next}");
    }
    for child in &detail.children {
        out!("child     {child}");
    }
    out!("input     {}", detail.input);
    if run.status == "completed" {
        out!("output    {}", detail.output);
    }
    if let Some(error) = &run.error {
        out!("error     {error}");
    }
    for (name, value) in &shown.vars {
        out!("var       {name} = {value}");
    }
    out!();
    let rows: Vec<Vec<String>> = shown
        .journal
        .iter()
        .map(|e| {
            let (kind, path, detail) = match Event::from_json(&e.event.to_string()) {
                Ok(event) => {
                    let (path, detail) = describe(&event);
                    (cairn::journal::EventKindName::kind_name(&event).to_owned(), path, detail)
                }
                Err(_) => ("?".to_owned(), String::new(), e.event.to_string()),
            };
            vec![e.seq.to_string(), e.at.clone(), kind, path, detail]
        })
        .collect();
    out!("{}", table(&["SEQ", "AT", "EVENT", "PATH", "DETAIL"], &rows));
    if !shown.signals.is_empty() {
        out!();
        let rows: Vec<Vec<String>> = shown
            .signals
            .iter()
            .map(|s| {
                vec![
                    s.id.to_string(),
                    s.name.clone(),
                    s.payload.to_string(),
                    s.sent_at.clone(),
                    s.consumed_seq.map_or_else(|| "buffered".to_owned(), |seq| format!("consumed at #{seq}")),
                ]
            })
            .collect();
        out!("{}", table(&["SIGNAL", "NAME", "PAYLOAD", "SENT", "STATE"], &rows));
    }
}
