//! `cairn workflows`: the workflows with runs in the store, and their counts by status.

use crate::backend::{Command, Target};
use crate::runs::table;
use crate::store_args::Access;
use anyhow::Result;
use cairn_api::Operations;
use clap::Args;
use serde_json::json;

/// `cairn workflows [--json]`.
#[derive(Args)]
pub(crate) struct WorkflowsArgs {
    #[command(flatten)]
    target: Target,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Every workflow with runs in the store, with its counts by status.
impl Command for WorkflowsArgs {
    fn target(&self) -> (&Target, Access) {
        (&self.target, Access::Read)
    }

    async fn execute<O: Operations>(self, ops: &O) -> Result<()> {
        let workflows = ops.workflows().await?;
        print(&workflows, self.json)
    }
}

fn print(workflows: &cairn_api::views::Workflows, json: bool) -> Result<()> {
    if json {
        out!("{}", json!(workflows));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = workflows
        .workflows
        .iter()
        .map(|w| {
            let counts: Vec<String> = w.runs.iter().map(|(status, n)| format!("{status} {n}")).collect();
            vec![w.name.clone(), w.total.to_string(), counts.join(", ")]
        })
        .collect();
    out!("{}", table(&["WORKFLOW", "RUNS", "BY STATUS"], &rows));
    Ok(())
}
