//! `cairn workers`: the workers recorded in the store.

use crate::backend::{Command, Target};
use crate::runs::table;
use crate::store_args::Access;
use anyhow::Result;
use cairn_api::{Operations, WorkersQuery};
use clap::Args;

/// `cairn workers [--all] [--json]`.
#[derive(Args)]
pub(crate) struct WorkersArgs {
    #[command(flatten)]
    target: Target,
    /// Also workers that are no longer live (stopped without saying so in the last day).
    #[arg(long)]
    all: bool,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

impl Command for WorkersArgs {
    fn target(&self) -> (&Target, Access) {
        (&self.target, Access::Read)
    }

    async fn execute<O: Operations>(self, ops: &O) -> Result<()> {
        run(self, ops).await
    }
}

async fn run<O: Operations>(args: WorkersArgs, ops: &O) -> Result<()> {
    let query = if args.all { WorkersQuery::all() } else { WorkersQuery::default() };
    let workers = ops.workers(query).await?.workers;
    if args.json {
        out!("{}", serde_json::to_string(&workers)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = workers
        .iter()
        .map(|w| {
            let mut row =
                vec![w.id.clone(), w.host.clone(), w.pid.to_string(), w.started_at.clone(), w.last_seen.clone()];
            if args.all {
                row.push(if w.live { "yes" } else { "no" }.to_owned());
            }
            row.push(w.serves.iter().map(|k| format!("{}@{}", k.workflow, k.version)).collect::<Vec<_>>().join(", "));
            row
        })
        .collect();
    let mut headers = vec!["ID", "HOST", "PID", "STARTED", "LAST SEEN"];
    if args.all {
        headers.push("LIVE");
    }
    headers.push("SERVES");
    out!("{}", table(&headers, &rows));
    Ok(())
}
