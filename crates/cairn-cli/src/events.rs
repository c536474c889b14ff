//! `cairn events publish`: events that start the workflows subscribed to their topic; `cairn
//! events list`: those published, with the runs each started.

use crate::backend::{Command, Target};
use crate::runs::json_arg;
use crate::store_args::Access;
use anyhow::Result;
use cairn_api::{EventQuery, Operations, PublishBody};
use clap::Subcommand;
use serde_json::json;

/// `cairn events …`.
#[derive(Subcommand)]
pub(crate) enum EventsCommand {
    /// Publish an event: one run starts for each workflow subscribed to a pattern matching TOPIC
    /// (as its workers declared), with PAYLOAD as input; an id published before starts nothing.
    Publish {
        #[command(flatten)]
        target: Target,
        /// The topic, e.g. `user.signup`.
        topic: String,
        /// The payload as JSON (default `null`).
        payload: Option<String>,
        /// The event's id (default: a new UUIDv7): publishing an id again starts no run it started.
        #[arg(long)]
        id: Option<String>,
        /// Print JSON (the HTTP API's answer) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List published events, newest first, each with the runs it started.
    List {
        #[command(flatten)]
        target: Target,
        /// Only events published to this topic.
        #[arg(long)]
        topic: Option<String>,
        /// At most this many (1 to 1,000).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: u16,
        /// Continue after a page (the cursor an earlier list printed).
        #[arg(long)]
        cursor: Option<String>,
        /// Print JSON (the HTTP API's answer) instead of text.
        #[arg(long)]
        json: bool,
    },
}

impl Command for EventsCommand {
    fn target(&self) -> (&Target, Access) {
        match self {
            EventsCommand::Publish { target, .. } => (target, Access::Create),
            EventsCommand::List { target, .. } => (target, Access::Read),
        }
    }

    async fn execute<O: Operations>(self, ops: &O) -> Result<()> {
        execute(self, ops).await
    }
}

async fn execute<O: Operations>(command: EventsCommand, ops: &O) -> Result<()> {
    match command {
        EventsCommand::Publish { target: _, topic, payload, id, json } => {
            let payload = json_arg("payload", payload)?;
            let published = ops.publish(&topic, &PublishBody { id, payload: Some(payload) }).await?;
            if json {
                out!("{}", json!(published));
                return Ok(());
            }
            out!("event {} on {topic}: {} run(s) started", published.id, published.runs.len());
            for run in &published.runs {
                out!("  started {} ({} v{})", run.run.id, run.run.workflow, run.run.version);
            }
            for run in &published.already_started {
                out!(
                    "  already started {} ({} v{}, {})",
                    run.run.id,
                    run.run.workflow,
                    run.run.version,
                    run.run.status
                );
            }
        }
        EventsCommand::List { target: _, topic, limit, cursor, json } => {
            let page = ops.events(&EventQuery { topic, cursor, limit: Some(usize::from(limit)) }).await?;
            if json {
                out!("{}", json!(page));
                return Ok(());
            }
            if page.events.is_empty() {
                out!("no events");
            }
            for event in &page.events {
                let runs: Vec<String> = event.runs.iter().map(|r| format!("{} ({})", r.id, r.workflow)).collect();
                let runs = if runs.is_empty() { "no run started".to_owned() } else { runs.join(", ") };
                out!("{}  {}  {}  {}", event.published_at, event.id, event.topic, runs);
            }
            if let Some(cursor) = &page.next_cursor {
                out!("more: --cursor {cursor}");
            }
        }
    }
    Ok(())
}
