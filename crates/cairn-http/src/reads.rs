//! What the API reads through a [`Client`], as [`views`]: shared by its handlers,
//! its live streams and the `cairn` command on a store, so both read a run the same way.

use crate::views::{self, RunDetail, RunPage, Signals};
use cairn::{Client, LiveWorkers, ReadError, RunFilter, RunId, RunRecord};

/// One page of runs `filter` selects; with `stranded`, only those no live worker in `live`
/// serves.
pub async fn run_page(
    client: &Client,
    filter: &RunFilter,
    stranded: bool,
    live: &LiveWorkers,
) -> Result<RunPage, ReadError> {
    let page = if stranded {
        client.list(&RunFilter { stranded: Some(live.served()), ..filter.clone() }).await?
    } else {
        client.list(filter).await?
    };
    let runs = page.runs.iter().map(|run| views::listed(run, live)).collect();
    Ok(RunPage { runs, next_cursor: page.next_cursor.map(|cursor| cursor.encode()) })
}

/// `run` in full: stranded or not, the runs that restart it, its children (three reads at once).
pub async fn run_detail(client: &Client, run: &RunRecord) -> Result<RunDetail, ReadError> {
    let (restarts, children, live) =
        tokio::try_join!(client.restarts(&run.id), client.children(&run.id), client.live_workers())?;
    Ok(views::detail(run, &live, &restarts, &children))
}

/// Run `id`'s signals.
pub async fn run_signals(client: &Client, id: &RunId) -> Result<Signals, ReadError> {
    let signals = client.signals(id).await?;
    Ok(Signals { run: id.to_string(), signals: signals.iter().map(views::signal).collect() })
}
