//! What the API reads through a [`Client`], as [`views`]: shared by its handlers,
//! its live streams and the `cairn` command on a store, so both read a run the same way.

use crate::views::{self, RunDetail, RunPage, Signals, Workflows};
use cairn::{Client, LiveWorkers, ReadError, RunFilter, RunId, RunRecord};
use std::borrow::Cow;

/// `filter`, and with `stranded` only the runs no live worker in `live` serves.
fn selected<'a>(filter: &'a RunFilter, stranded: bool, live: &LiveWorkers) -> Cow<'a, RunFilter> {
    match stranded {
        true => Cow::Owned(RunFilter { stranded: Some(live.served()), ..filter.clone() }),
        false => Cow::Borrowed(filter),
    }
}

/// One page of runs `filter` selects; with `stranded`, only those no live worker in `live`
/// serves.
pub async fn run_page(
    client: &Client,
    filter: &RunFilter,
    stranded: bool,
    live: &LiveWorkers,
) -> Result<RunPage, ReadError> {
    // Lists show no payload, so they read none.
    let filter = RunFilter { without_payloads: true, ..selected(filter, stranded, live).into_owned() };
    let page = client.list(&filter).await?;
    let runs = page.runs.iter().map(|run| views::listed(run, live)).collect();
    Ok(RunPage { runs, next_cursor: page.next_cursor.map(|cursor| cursor.encode()) })
}

/// How many runs `filter` (with `stranded`, as [`run_page`]) selects, up to `at_most`.
pub async fn run_count(
    client: &Client,
    filter: &RunFilter,
    stranded: bool,
    live: &LiveWorkers,
    at_most: u64,
) -> Result<u64, ReadError> {
    client.count(&selected(filter, stranded, live), at_most).await
}

/// Every workflow with runs or served by a worker: its counts by status and its versions.
pub async fn workflows(client: &Client) -> Result<Workflows, ReadError> {
    let (counts, served) = tokio::try_join!(client.workflow_counts(), client.served_workflows())?;
    Ok(views::workflows(&counts, &served))
}

/// The live workers (`live`) and the stranded versions, as of now.
pub async fn workers(client: &Client, live: &LiveWorkers) -> Result<views::Workers, ReadError> {
    let stranded = client.stranded_versions().await?;
    Ok(views::workers(live, &stranded, cairn::Timestamp::from_system_time(std::time::SystemTime::now())))
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
