//! Workers as the store records them, and stranded runs: runs that need a worker when no live
//! worker serves their workflow version.

use crate::client::Client;
use crate::clock::wall_now;
use crate::op_error::ReadError;
use cairn_store::{PageCursor, RunFilter, RunRecord, StoreError, WorkerRecord, WorkflowKey};
use std::collections::BTreeSet;

/// The workers live now, as the store records them ([`Client::live_workers`]): each refreshes
/// its record with its heartbeats and counts as live until its lease would expire.
#[derive(Debug, Clone, Default)]
pub struct LiveWorkers {
    /// The live workers, by id.
    pub workers: Vec<WorkerRecord>,
}

impl LiveWorkers {
    /// The live ones among `workers` at `now` (wall-clock time).
    pub fn at(workers: Vec<WorkerRecord>, now: cairn_journal::Timestamp) -> LiveWorkers {
        LiveWorkers { workers: workers.into_iter().filter(|w| w.is_live_at(now)).collect() }
    }

    /// Every workflow version some live worker serves, sorted.
    pub fn served(&self) -> Vec<WorkflowKey> {
        let served: BTreeSet<&WorkflowKey> = self.workers.iter().flat_map(|w| &w.serves).collect();
        served.into_iter().cloned().collect()
    }

    /// Why runs of `version` of `workflow` are stranded, or `None` when a live worker serves it.
    ///
    /// ```
    /// use cairn::LiveWorkers;
    /// use cairn::store::{WorkerRecord, WorkflowKey};
    /// use cairn::Timestamp;
    ///
    /// let v2 = WorkerRecord {
    ///     id: "w".into(),
    ///     host: "h".into(),
    ///     pid: 1,
    ///     started_at: Timestamp::from_millis(0),
    ///     last_seen: Timestamp::from_millis(0),
    ///     live_until: Timestamp::from_millis(10),
    ///     serves: vec![WorkflowKey { name: "order".into(), version: 2 }],
    /// };
    /// let live = LiveWorkers::at(vec![v2], Timestamp::from_millis(5));
    /// assert_eq!(live.stranded_reason("order", 2), None);
    /// assert_eq!(
    ///     live.stranded_reason("order", 1).as_deref(),
    ///     Some("no live worker serves version 1 of `order` (live workers serve version 2)")
    /// );
    /// ```
    pub fn stranded_reason(&self, workflow: &str, version: u32) -> Option<String> {
        if self.workers.is_empty() {
            return Some("no worker is live".to_owned());
        }
        let versions: BTreeSet<u32> =
            self.workers.iter().flat_map(|w| &w.serves).filter(|k| k.name == workflow).map(|k| k.version).collect();
        if versions.contains(&version) {
            return None;
        }
        if versions.is_empty() {
            return Some(format!("no live worker serves workflow `{workflow}`"));
        }
        let list = versions.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let noun = if versions.len() == 1 { "version" } else { "versions" };
        Some(format!("no live worker serves version {version} of `{workflow}` (live workers serve {noun} {list})"))
    }

    /// Why `run` is stranded: `None` when it does not [need a worker](cairn_store::RunStatus::needs_worker)
    /// (it ended, or it is paused) or a live worker serves its version.
    pub fn why_stranded(&self, run: &RunRecord) -> Option<String> {
        if !run.status.needs_worker() {
            return None;
        }
        self.stranded_reason(&run.workflow, run.version)
    }
}

/// A run no live worker can go on with, and why.
#[derive(Debug, Clone)]
pub struct StrandedRun {
    /// The run.
    pub run: RunRecord,
    /// Why it is stranded (e.g. "no live worker serves version 1 of `order` (live workers serve
    /// version 2)").
    pub reason: String,
}

/// One page of stranded runs ([`Client::stranded`]).
#[derive(Debug, Clone)]
pub struct StrandedPage {
    /// The runs, newest first.
    pub runs: Vec<StrandedRun>,
    /// Where the next page starts, if there is one.
    pub next_cursor: Option<PageCursor>,
}

/// How many runs of one workflow version are stranded, and why ([`Client::stranded_versions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrandedVersion {
    /// The workflow version.
    pub key: WorkflowKey,
    /// How many of its runs are pending, running or suspended.
    pub runs: u64,
    /// Why they are stranded.
    pub reason: String,
}

impl Client {
    /// The workers live now, as recorded in the store.
    pub async fn live_workers(&self) -> Result<LiveWorkers, ReadError> {
        self.live_workers_for().await
    }

    /// [`live_workers`](Self::live_workers), for an operation with its own error `E`.
    pub(crate) async fn live_workers_for<E: From<StoreError>>(&self) -> Result<LiveWorkers, E> {
        Ok(LiveWorkers::at(self.store().workers().await?, wall_now()))
    }

    /// Stranded runs matching `filter` (its own `stranded` field is replaced), newest first, one
    /// page at a time, each with the reason: runs that are pending, running or suspended while no
    /// live worker serves their `(workflow, version)`. Nothing executes them until a worker that
    /// serves the version starts; then they go on by themselves.
    pub async fn stranded(&self, filter: &RunFilter) -> Result<StrandedPage, ReadError> {
        let live = self.live_workers().await?;
        let filter = RunFilter { stranded: Some(live.served()), ..filter.clone() };
        let page = self.store().list_runs(&filter).await?;
        let runs = page
            .runs
            .into_iter()
            .filter_map(|run| live.why_stranded(&run).map(|reason| StrandedRun { run, reason }))
            .collect();
        Ok(StrandedPage { runs, next_cursor: page.next_cursor })
    }

    /// Each workflow version that has stranded runs, with their count and the reason.
    pub async fn stranded_versions(&self) -> Result<Vec<StrandedVersion>, ReadError> {
        let live = self.live_workers().await?;
        let counts = self.store().version_counts().await?;
        Ok(counts
            .into_iter()
            .filter_map(|count| {
                let reason = live.stranded_reason(&count.key.name, count.key.version)?;
                Some(StrandedVersion { key: count.key, runs: count.runs, reason })
            })
            .collect())
    }
}

/// This machine's host name, for worker records: `/proc/sys/kernel/hostname` (Linux), else
/// `$HOSTNAME`, else `unknown`.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|name| !name.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
mod tests {
    use super::LiveWorkers;
    use cairn_journal::Timestamp;
    use cairn_store::{RunStatus, WorkerRecord, WorkflowKey};

    fn worker(id: &str, live_until: i64, serves: &[(&str, u32)]) -> WorkerRecord {
        WorkerRecord {
            id: id.into(),
            host: "h".into(),
            pid: 1,
            started_at: Timestamp::from_millis(0),
            last_seen: Timestamp::from_millis(0),
            live_until: Timestamp::from_millis(live_until),
            serves: serves
                .iter()
                .map(|(name, version)| WorkflowKey { name: (*name).into(), version: *version })
                .collect(),
        }
    }

    #[test]
    fn reasons_name_what_is_missing() {
        let now = Timestamp::from_millis(100);
        let none = LiveWorkers::at(vec![worker("dead", 100, &[("order", 1)])], now);
        assert!(none.workers.is_empty(), "a worker is live strictly before its live_until");
        assert_eq!(none.stranded_reason("order", 1).as_deref(), Some("no worker is live"));

        let live = LiveWorkers::at(
            vec![worker("a", 200, &[("order", 2), ("ship", 1)]), worker("b", 200, &[("order", 3), ("order", 2)])],
            now,
        );
        assert_eq!(live.served().len(), 3, "deduplicated");
        assert_eq!(live.stranded_reason("order", 2), None);
        assert_eq!(
            live.stranded_reason("order", 1).as_deref(),
            Some("no live worker serves version 1 of `order` (live workers serve versions 2, 3)")
        );
        assert_eq!(live.stranded_reason("billing", 1).as_deref(), Some("no live worker serves workflow `billing`"));
    }

    #[test]
    fn only_runs_that_need_a_worker_are_stranded() {
        let live = LiveWorkers::at(vec![worker("a", 200, &[("order", 2)])], Timestamp::from_millis(100));
        let input = serde_json::value::RawValue::from_string("{}".into()).unwrap();
        let new = cairn_store::NewRun::new(
            "r".into(),
            cairn_store::WorkflowName::new("order").expect("a valid name"),
            1,
            input,
            Timestamp::from_millis(0),
        );
        let mut run = cairn_store::RunRecord::of(&new);
        for status in RunStatus::ALL {
            run.status = status;
            assert_eq!(live.why_stranded(&run).is_some(), status.needs_worker(), "{status}");
        }
    }
}
