//! `cairn workers`: the workers recorded in the store.

use crate::runs::{StoreArgs, open, table, time};
use anyhow::Result;
use cairn::Timestamp;
use clap::Args;

/// `cairn workers [--all] [--json]`.
#[derive(Args)]
pub(crate) struct WorkersArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Also workers that are no longer live (stopped without saying so in the last day).
    #[arg(long)]
    all: bool,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(args: WorkersArgs) -> Result<()> {
    let client = open(&args.store).await?;
    let now = Timestamp::from_system_time(std::time::SystemTime::now());
    let mut workers = client.store().workers().await?;
    if !args.all {
        workers.retain(|w| w.is_live_at(now));
    }
    if args.json {
        let views: Vec<_> = workers.iter().map(|w| cairn_http::views::worker(w, now)).collect();
        out!("{}", serde_json::to_string(&views)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = workers
        .iter()
        .map(|w| {
            let mut row = vec![w.id.clone(), w.host.clone(), w.pid.to_string(), time(w.started_at), time(w.last_seen)];
            if args.all {
                row.push(if w.is_live_at(now) { "yes" } else { "no" }.to_owned());
            }
            row.push(w.serves.iter().map(|k| k.tag()).collect::<Vec<_>>().join(", "));
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
