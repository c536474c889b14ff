//! The client itself: how it is made, and what it reads (runs, lists, journals, durable values,
//! signals, children).

use crate::attach::Attachment;
use crate::clock::{Clock, SystemClock};
use crate::op_error::ReadError;
use crate::run_core::DEFAULT_MAX_PAYLOAD_BYTES;
use cairn_journal::JournalEntry;
use cairn_store::{RunFilter, RunId, RunPage, RunRecord, SignalRecord, Store, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// How long an ended run is kept by default before a sweeper deletes it: 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Starts, inspects, signals and cancels runs. Works with or without a worker in the process.
///
/// A client from [`Engine::client`](crate::engine::Engine::client) knows the engine's workflows: it refuses
/// unknown workflows and inputs that do not decode, and it hears about run completions at once.
/// A detached client ([`Client::new`]) talks to the store only.
///
/// ```no_run
/// use cairn::{Client, SqliteStore};
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::new(SqliteStore::open("cairn.db")?);
/// let page = client.list(&Default::default()).await?;
/// for run in page.runs {
///     println!("{} {} {}", run.id, run.workflow, run.status);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) local: Option<Arc<dyn Attachment>>,
    pub(crate) max_payload_bytes: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("attached", &self.local.is_some()).finish()
    }
}

impl Client {
    /// A client for `store` with no workflows of its own.
    pub fn new(store: impl Store) -> Client {
        Client::from_shared(Arc::new(store))
    }

    /// A detached client for a shared store.
    pub fn from_shared(store: Arc<dyn Store>) -> Client {
        Client { store, clock: Arc::new(SystemClock), local: None, max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES }
    }

    /// A client attached to the worker `local` of an engine in this process, over its store and
    /// clock.
    pub(crate) fn attached(
        local: Arc<dyn Attachment>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        max_payload_bytes: usize,
    ) -> Client {
        Client { store, clock, max_payload_bytes, local: Some(local) }
    }

    /// The runs `id` started as its children ([`Ctx::child`](crate::ctx::Ctx::child)), oldest first.
    pub async fn children(&self, id: &RunId) -> Result<Vec<RunRecord>, ReadError> {
        let mut children = self.every_run(RunFilter { parent: Some(id.clone()), ..RunFilter::default() }).await?;
        children.reverse();
        Ok(children)
    }

    /// The store this client uses.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// One run's summary.
    pub async fn get(&self, id: &RunId) -> Result<RunRecord, ReadError> {
        self.run_of(id).await
    }

    /// One run, for an operation whose error `E` has its own "no such run" (each operation's
    /// error makes the store's [`StoreError::RunNotFound`] its own).
    pub(crate) async fn run_of<E: From<StoreError>>(&self, id: &RunId) -> Result<RunRecord, E> {
        self.store.get_run(id).await?.ok_or_else(|| StoreError::RunNotFound(id.clone()).into())
    }

    /// The runs that restart `id` (newest first).
    pub async fn restarts(&self, id: &RunId) -> Result<Vec<RunId>, ReadError> {
        let filter = RunFilter { restarted_from: Some(id.clone()), without_payloads: true, ..RunFilter::default() };
        Ok(self.every_run(filter).await?.into_iter().map(|r| r.id).collect())
    }

    /// Every run `filter` lists, page after page, newest first.
    pub(crate) async fn every_run(&self, mut filter: RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        filter.limit = Some(1000);
        let mut runs = Vec::new();
        loop {
            let page = self.store.list_runs(&filter).await?;
            runs.extend(page.runs);
            match page.next_cursor {
                Some(cursor) => filter.cursor = Some(cursor),
                None => return Ok(runs),
            }
        }
    }

    /// How many runs each workflow has in each status (no zero counts), by workflow then status.
    pub async fn workflow_counts(&self) -> Result<Vec<cairn_store::WorkflowCount>, ReadError> {
        Ok(self.store.workflow_counts().await?)
    }

    /// Runs matching `filter`, newest first, one page at a time.
    pub async fn list(&self, filter: &RunFilter) -> Result<RunPage, ReadError> {
        Ok(self.store.list_runs(filter).await?)
    }

    /// How many runs `filter` selects, counting no further than `at_most` (the answer is
    /// `at_most` when at least that many match).
    pub async fn count(&self, filter: &RunFilter, at_most: u64) -> Result<u64, ReadError> {
        Ok(self.store.count_runs(filter, at_most).await?)
    }

    /// Every workflow version a worker has served, with when one was first and last recorded
    /// (the registered workflows, runs or not).
    pub async fn served_workflows(&self) -> Result<Vec<cairn_store::ServedWorkflow>, ReadError> {
        Ok(self.store.served_workflows().await?)
    }

    /// A run's journal.
    pub async fn journal(&self, id: &RunId) -> Result<Vec<JournalEntry>, ReadError> {
        self.get(id).await?;
        Ok(self.store.read_journal(id).await?)
    }

    /// A run's durable values ([`Ctx::var`](crate::ctx::Ctx::var)), each as last set, by name.
    pub async fn vars(&self, id: &RunId) -> Result<std::collections::BTreeMap<String, serde_json::Value>, ReadError> {
        Ok(cairn_journal::vars(&self.journal(id).await?))
    }

    /// A run's signals, consumed and buffered.
    pub async fn signals(&self, id: &RunId) -> Result<Vec<SignalRecord>, ReadError> {
        self.get(id).await?;
        Ok(self.store.signals(id).await?)
    }

    /// The newest run of `id`'s chain of continuations ([`Ctx::continue_as_new`](crate::ctx::Ctx::continue_as_new)):
    /// `id` itself unless it continued as another.
    pub async fn newest(&self, id: &RunId) -> Result<RunRecord, ReadError> {
        self.newest_of(id).await
    }

    /// [`newest`](Self::newest), for an operation with its own error `E`.
    pub(crate) async fn newest_of<E: From<StoreError>>(&self, id: &RunId) -> Result<RunRecord, E> {
        let mut run = self.run_of::<E>(id).await?;
        while let Some(next) = run.rare().continued_as.clone() {
            run = self.run_of::<E>(&next).await?;
        }
        Ok(run)
    }
}
