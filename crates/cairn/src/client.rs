//! Starting, inspecting, signalling and cancelling runs.

use crate::attach::Attachment;
use crate::clock::{Clock, SystemClock, wall_now};
use crate::error::ClientError;
use crate::run_core::{CHILD_ENDED, DEFAULT_MAX_PAYLOAD_BYTES, PAUSED_BY_REQUEST, Queue, awaited, first_of_chain};
use cairn_journal::{JournalEntry, SignalId, StepPath};
use cairn_store::{
    CancelOutcome, ControlRequest, Debounce, NewRun, NewSignal, Notice, PauseOutcome, PruneRequest, ResumeRequest,
    RunFilter, RunId, RunPage, RunRecord, RunStatus, SignalRecord, StartSignal, Store, StoreError,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
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
    max_payload_bytes: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("attached", &self.local.is_some()).finish()
    }
}

/// A run that was started (or found by its idempotency key).
#[derive(Debug, Clone)]
pub struct RunHandle {
    run: RunRecord,
    created: bool,
    client: Client,
}

impl RunHandle {
    /// The run's id.
    pub fn id(&self) -> &RunId {
        &self.run.id
    }

    /// The run as the store held it when it was created or found (a worker may have moved it
    /// on since: [`Client::get`] reads it again).
    pub fn record(&self) -> &RunRecord {
        &self.run
    }

    /// `false` when the idempotency key matched an existing run.
    pub fn created(&self) -> bool {
        self.created
    }

    /// Waits for the run to end and decodes its output.
    pub async fn result<O: DeserializeOwned>(&self) -> Result<O, ClientError> {
        self.client.result(&self.run.id).await
    }
}

/// Options of a start, awaited to start the run. Made by [`Client::start`].
#[must_use = "a start does nothing until awaited"]
pub struct StartRun<'a> {
    client: &'a Client,
    workflow: String,
    input: Result<Box<RawValue>, ClientError>,
    options: StartOptions,
    signal: Option<(String, Result<Box<RawValue>, ClientError>)>,
}

/// An event to publish, awaited to publish it. Made by [`Client::publish`].
#[must_use = "a publish does nothing until awaited"]
pub struct Publish<'a> {
    client: &'a Client,
    topic: String,
    payload: Result<Box<RawValue>, ClientError>,
    id: Option<String>,
}

impl Publish<'_> {
    /// The event's id (default: a new UUIDv7). Publishing an id again starts no run that this
    /// id has already started (while that run is kept): retry a publish with the same id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// What a [`Publish`] did.
#[derive(Debug, Clone)]
pub struct Published {
    /// The event's id (given, or generated).
    pub event_id: String,
    /// One run per subscribed workflow, by workflow: those this publish started
    /// ([`created`](RunHandle::created)) and those an earlier publish of the same id had.
    pub runs: Vec<RunHandle>,
}

impl Published {
    /// The runs this publish started.
    pub fn started(&self) -> impl Iterator<Item = &RunHandle> {
        self.runs.iter().filter(|run| run.created())
    }

    /// The idempotency key that ties event `event_id` to the one run it starts per workflow.
    pub fn idempotency_key(event_id: &str) -> String {
        format!("event:{event_id}")
    }
}

impl<'a> IntoFuture for Publish<'a> {
    type Output = Result<Published, ClientError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let client = self.client;
            cairn_journal::topic::check_topic(&self.topic).map_err(ClientError::InvalidTopic)?;
            let payload = self.payload?;
            client.check_size(&payload)?;
            let event_id = match self.id {
                Some(id) if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) => {
                    return Err(ClientError::InvalidEventId(id));
                }
                Some(id) => id,
                None => uuid::Uuid::now_v7().to_string(),
            };
            let mut subscribers: Vec<(String, u32)> = (client.store.subscriptions().await?.into_iter())
                .filter(|s| cairn_journal::topic::matches(&s.pattern, &self.topic))
                .map(|s| (s.workflow, s.version))
                .collect();
            subscribers.dedup_by(|a, b| a.0 == b.0);
            // Every run is checked before any is created: a payload one subscriber cannot read
            // starts nothing.
            let key = Published::idempotency_key(&event_id);
            let runs = (subscribers.into_iter())
                .map(|(workflow, version)| client.event_run(&workflow, version, &payload, &key))
                .collect::<Result<Vec<_>, _>>()?;
            let mut started = Vec::with_capacity(runs.len());
            for run in runs {
                started.push(client.create(run).await?);
            }
            Ok(Published { event_id, runs: started })
        })
    }
}

/// How many times as long as a batch took [`Client::sweep`] pauses before the next.
pub const SWEEP_PAUSE_FACTOR: u32 = 8;

/// Most runs [`Client::prune`] deletes in one store transaction.
pub const PRUNE_BATCH: usize = 1_000;

/// How a run is started, besides its workflow and input.
#[derive(Debug, Clone, Default)]
struct StartOptions {
    id: Option<String>,
    idempotency_key: Option<String>,
    version: Option<u32>,
    timeout: Option<Duration>,
    retention: Option<Duration>,
    queue: Queue,
    debounce: Option<Debounce>,
}

impl StartRun<'_> {
    /// Signal-with-start: also deliver this signal, creating the run if it does not exist yet
    /// (same id, or same idempotency key) and buffering the signal in the same atomic store
    /// operation, so a caller never races a run into existence. An existing unfinished run
    /// just gets the signal (`created: false`); a finished one refuses it and nothing is stored.
    pub fn with_signal<P: Serialize + ?Sized>(mut self, name: &str, payload: &P) -> Self {
        let payload = serde_json::value::to_raw_value(payload).map_err(|e| ClientError::InvalidPayload(e.to_string()));
        self.signal = Some((name.to_owned(), payload));
        self
    }

    /// Use this run id instead of a generated one (unique per store, forever).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.options.id = Some(id.into());
        self
    }

    /// Starting again with the same workflow and key returns the existing run (`created: false`).
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.options.idempotency_key = Some(key.into());
        self
    }

    /// Pin this version instead of the newest registered.
    pub fn version(mut self, version: u32) -> Self {
        self.options.version = Some(version);
        self
    }

    /// A deadline for the whole run, `limit` from now (default: none). At the deadline the run
    /// ends `failed` with a timeout error (`[CAIRN-E0110]`); steps in flight see their
    /// cancellation tokens fire and their late results are discarded. The deadline is
    /// journaled, so it holds across restarts (a paused run times out when it is resumed).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.options.timeout = Some(limit);
        self
    }

    /// How long the run is kept once it has ended, overriding the workflow's retention (see
    /// [`EngineBuilder::retention`](crate::engine::EngineBuilder::retention)); an engine's
    /// [maximum](crate::engine::EngineBuilder::max_retention) still applies.
    pub fn retention(mut self, keep: Duration) -> Self {
        self.options.retention = Some(keep);
        self
    }

    /// Its priority (default 0): when workers are busy, ready runs of a higher priority are
    /// claimed first, across every worker sharing the store. Its children and the runs it
    /// continues as inherit it.
    ///
    /// ```
    /// # use cairn::prelude::*;
    /// # async fn example(engine: &Engine) -> Result<(), ClientError> {
    /// engine.client().start("report", &serde_json::json!({"tenant": "acme"})).priority(10).fairness_key("acme").await?;
    /// # Ok(()) }
    /// ```
    pub fn priority(mut self, priority: i32) -> Self {
        self.options.queue.priority = priority;
        self
    }

    /// The key it is served fairly by (a tenant, a customer): within a priority, workers take
    /// ready runs from each key in turn, so a key with 100,000 queued runs does not hold back
    /// one with 10. Runs without a key share one. 1 to 200 bytes without control characters
    /// (`[CAIRN-E0313]` otherwise). Its children and the runs it continues as inherit it.
    pub fn fairness_key(mut self, key: impl Into<String>) -> Self {
        self.options.queue.fairness_key = Some(key.into());
        self
    }

    /// Debounce this start: starts of this workflow with the same debounce key collapse into
    /// one run while it has not begun, and that run gets the latest start's input. It begins
    /// once the key has been quiet for the debounce's quiet time, or at its maximum wait after
    /// the window's first start, across every worker and client sharing the store. Until then
    /// it is `suspended` and lists as waiting for `debounce`. The handle of a start that joined
    /// a run says `created: false`. A debounced start cannot carry an idempotency key or a
    /// signal; a bad key, quiet time or maximum wait gets `[CAIRN-E0315]` and nothing is stored.
    ///
    /// ```
    /// # use cairn::prelude::*;
    /// use cairn::Debounce;
    /// use std::time::Duration;
    /// # async fn example(engine: &Engine) -> Result<(), ClientError> {
    /// let debounce = Debounce::new("order-7", Duration::from_secs(2)).max_wait(Duration::from_secs(30));
    /// engine.client().start("reindex", &serde_json::json!({"order": 7, "rev": 12})).debounce(debounce).await?;
    /// # Ok(()) }
    /// ```
    pub fn debounce(mut self, debounce: Debounce) -> Self {
        self.options.debounce = Some(debounce);
        self
    }
}

impl<'a> IntoFuture for StartRun<'a> {
    type Output = Result<RunHandle, ClientError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let input = self.input?;
            let run = self.client.new_run(&self.workflow, input, self.options)?;
            match self.signal {
                None => self.client.create(run).await,
                Some((name, payload)) => {
                    run.check_signal_start().map_err(debounce_refused)?;
                    let payload = payload?;
                    self.client.check_size(&payload)?;
                    check_signal_name(&name)?;
                    let signal = StartSignal { name, payload };
                    let (created, _) = self.client.store.start_with_signal(run, signal).await?;
                    self.client.started(created)
                }
            }
        })
    }
}

/// Returns once the store reports that `id` ended, or that any run may have (missed or lagging
/// reports); never if the reports stop.
async fn ending_of(notices: &mut tokio::sync::broadcast::Receiver<Notice>, id: &RunId) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match notices.recv().await {
            Ok(Notice::Ended(ended)) if ended == *id => return,
            Ok(Notice::Ended(_) | Notice::Signalled(_)) => {}
            Ok(Notice::Missed) | Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}

/// A debounced start a store would refuse, as the client's error.
fn debounce_refused(error: StoreError) -> ClientError {
    match error {
        StoreError::InvalidInput(message) => ClientError::InvalidDebounce(message),
        other => ClientError::Store(other),
    }
}

fn check_signal_name(name: &str) -> Result<(), ClientError> {
    if name.is_empty() {
        return Err(ClientError::InvalidPayload("signal name is empty".into()));
    }
    Ok(())
}

/// The result of a run that has ended (or is parked), or `None` while it goes on.
fn outcome<O: DeserializeOwned>(
    id: &RunId,
    status: RunStatus,
    output: Option<Box<RawValue>>,
    error: Option<String>,
) -> Option<Result<O, ClientError>> {
    match status {
        RunStatus::Completed => {
            let output = output.map_or_else(|| "null".to_owned(), |o| o.get().to_owned());
            Some(serde_json::from_str(&output).map_err(|e| ClientError::InvalidPayload(e.to_string())))
        }
        RunStatus::Failed | RunStatus::Cancelled | RunStatus::Paused => {
            Some(Err(ClientError::RunDidNotComplete { run_id: id.clone(), status, message: error.unwrap_or_default() }))
        }
        // The chain goes on: its newest run has the result.
        RunStatus::Pending | RunStatus::Running | RunStatus::Suspended | RunStatus::Continued => None,
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

    /// Starts (or finds, after a crash) the child run `id` of `parent`: a workflow this worker
    /// registers at its newest version, or else the newest version a live worker serves.
    pub(crate) async fn start_child(
        &self,
        workflow: &str,
        input: Box<RawValue>,
        id: &RunId,
        parent: &RunId,
        queue: &Queue,
    ) -> Result<RunHandle, ClientError> {
        self.check_size(&input)?;
        let version = self.version_to_start(workflow).await?;
        if let Some(checked) = self.local.as_ref().and_then(|l| l.check_input(workflow, version, &input)) {
            checked.map_err(ClientError::InvalidPayload)?;
        }
        let options = StartOptions {
            id: Some(id.to_string()),
            idempotency_key: Some(format!("child:{id}")),
            queue: queue.clone(),
            ..StartOptions::default()
        };
        let mut run = self.build_run(workflow, version, input, options)?;
        run.parent = Some(parent.clone());
        self.create(run).await
    }

    /// The version of `workflow` a run started by the engine itself gets: the newest this worker
    /// registers, or else the newest a live worker serves.
    pub(crate) async fn version_to_start(&self, workflow: &str) -> Result<u32, ClientError> {
        if let Some(version) = self.local.as_ref().and_then(|l| l.latest(workflow)) {
            return Ok(version);
        }
        let served = self.live_workers().await?.served();
        let newest = served.into_iter().filter(|key| key.name == workflow).map(|key| key.version).max();
        newest.ok_or_else(|| ClientError::UnknownWorkflow(workflow.into()))
    }

    /// The runs `id` started as its children ([`Ctx::child`](crate::ctx::Ctx::child)), oldest first.
    pub async fn children(&self, id: &RunId) -> Result<Vec<RunRecord>, ClientError> {
        let mut children = self.every_run(RunFilter { parent: Some(id.clone()), ..RunFilter::default() }).await?;
        children.reverse();
        Ok(children)
    }

    /// The store this client uses.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn check_size(&self, payload: &RawValue) -> Result<(), ClientError> {
        let size = payload.get().len();
        if size > self.max_payload_bytes {
            return Err(ClientError::PayloadTooLarge { size, limit: self.max_payload_bytes });
        }
        Ok(())
    }

    /// Starts a run of `workflow` with `input`; chain [`id`](StartRun::id),
    /// [`idempotency_key`](StartRun::idempotency_key) or [`version`](StartRun::version), then await.
    pub fn start<I: Serialize + ?Sized>(&self, workflow: &str, input: &I) -> StartRun<'_> {
        StartRun {
            client: self,
            workflow: workflow.to_owned(),
            input: serde_json::value::to_raw_value(input).map_err(|e| ClientError::InvalidPayload(e.to_string())),
            options: StartOptions::default(),
            signal: None,
        }
    }

    /// Publishes an event with `payload` to `topic` (`user.signup`): one run starts for each
    /// workflow [subscribed](crate::engine::EngineBuilder::subscribe) to a pattern matching it, with the
    /// payload as its input, at most once per event [id](Publish::id) and workflow. A topic no
    /// workflow subscribes to starts nothing. The runs' idempotency key is
    /// `event:<id>` ([`Published::idempotency_key`]).
    pub fn publish<P: Serialize + ?Sized>(&self, topic: &str, payload: &P) -> Publish<'_> {
        Publish {
            client: self,
            topic: topic.to_owned(),
            payload: serde_json::value::to_raw_value(payload).map_err(|e| ClientError::InvalidPayload(e.to_string())),
            id: None,
        }
    }

    /// Starts a run from raw JSON input.
    pub async fn start_raw(
        &self,
        workflow: &str,
        input: Box<RawValue>,
        id: Option<String>,
        idempotency_key: Option<String>,
        version: Option<u32>,
    ) -> Result<RunHandle, ClientError> {
        let run =
            self.new_run(workflow, input, StartOptions { id, idempotency_key, version, ..StartOptions::default() })?;
        self.create(run).await
    }

    /// A run to create, checked: the workflow and version exist (when this client knows its
    /// engine's workflows), the input decodes and fits, the id is valid.
    /// The run event `key` starts for a subscribed workflow. Its input is checked when this
    /// client's engine registers that version; another service's workflow is started unchecked.
    fn event_run(&self, workflow: &str, version: u32, input: &RawValue, key: &str) -> Result<NewRun, ClientError> {
        if let Some(checked) = self.local.as_ref().and_then(|local| local.check_input(workflow, version, input)) {
            checked.map_err(|e| ClientError::InvalidPayload(format!("{workflow}: {e}")))?;
        }
        let options = StartOptions { idempotency_key: Some(key.to_owned()), ..StartOptions::default() };
        self.build_run(workflow, version, input.to_owned(), options)
    }

    fn new_run(&self, workflow: &str, input: Box<RawValue>, options: StartOptions) -> Result<NewRun, ClientError> {
        self.check_size(&input)?;
        let version = match &self.local {
            Some(local) => {
                let version = match options.version {
                    Some(v) => v,
                    None => local.latest(workflow).ok_or_else(|| ClientError::UnknownWorkflow(workflow.into()))?,
                };
                let checked = local.check_input(workflow, version, &input).ok_or_else(|| {
                    if local.latest(workflow).is_none() {
                        ClientError::UnknownWorkflow(workflow.into())
                    } else {
                        ClientError::UnknownVersion { name: workflow.into(), version }
                    }
                })?;
                checked.map_err(ClientError::InvalidPayload)?;
                version
            }
            None => options.version.unwrap_or(1),
        };
        self.build_run(workflow, version, input, options)
    }

    /// The new run of `workflow` version `version` (checked by the caller) with `options` (their
    /// `version` aside).
    fn build_run(
        &self,
        workflow: &str,
        version: u32,
        input: Box<RawValue>,
        options: StartOptions,
    ) -> Result<NewRun, ClientError> {
        let StartOptions { id, idempotency_key, timeout, retention, queue, debounce, .. } = options;
        if workflow.is_empty() {
            return Err(ClientError::UnknownWorkflow(String::new()));
        }
        if let Some(key) = &queue.fairness_key {
            cairn_journal::flow::check_fairness_key(key).map_err(ClientError::InvalidFairnessKey)?;
        }
        let id = match id {
            Some(id) => RunId::validate(&id)?,
            None => RunId::new(uuid::Uuid::now_v7().to_string()),
        };
        let now = self.clock.now();
        let mut run = NewRun::new(id, workflow, version, input, now);
        run.idempotency_key = idempotency_key;
        run.deadline = timeout.map(|limit| now + limit);
        run.retention = Some(self.retention_of(workflow, retention));
        queue.apply(&mut run);
        run.debounce = debounce;
        run.check_debounce().map_err(debounce_refused)?;
        Ok(run)
    }

    /// How long a new run of `workflow` is kept once it has ended: `asked`, or the workflow's
    /// retention, or [`DEFAULT_RETENTION`], clamped by the engine's maximum.
    pub(crate) fn retention_of(&self, workflow: &str, asked: Option<Duration>) -> Duration {
        let local = self.local.as_ref();
        let keep = asked.or_else(|| local.and_then(|l| l.retention(workflow))).unwrap_or(DEFAULT_RETENTION);
        match local.and_then(|l| l.max_retention()) {
            Some(max) => keep.min(max),
            None => keep,
        }
    }

    pub(crate) async fn create(&self, run: NewRun) -> Result<RunHandle, ClientError> {
        let created = self.store.create_run(run).await?;
        self.started(created)
    }

    /// The handle of a run just created or found; a local worker hears of it.
    fn started(&self, created: cairn_store::CreatedRun) -> Result<RunHandle, ClientError> {
        if created.created {
            crate::telemetry::run_started(&created.run.workflow);
            if let Some(rule) = created.run.held_back_by() {
                crate::telemetry::delayed(&created.run.workflow, rule);
            }
        }
        if let Some(local) = &self.local {
            // A new run, or a signal for an existing one.
            local.wake_claimer();
            if !created.created {
                local.signal_may_have_arrived(&created.run.id);
            }
        }
        Ok(RunHandle { run: created.run, created: created.created, client: self.clone() })
    }

    /// One run's summary.
    pub async fn get(&self, id: &RunId) -> Result<RunRecord, ClientError> {
        self.store.get_run(id).await?.ok_or_else(|| ClientError::RunNotFound(id.clone()))
    }

    /// The runs that restart `id` (newest first).
    pub async fn restarts(&self, id: &RunId) -> Result<Vec<RunId>, ClientError> {
        let filter = RunFilter { restarted_from: Some(id.clone()), ..RunFilter::default() };
        Ok(self.every_run(filter).await?.into_iter().map(|r| r.id).collect())
    }

    /// Every run `filter` lists, page after page, newest first.
    async fn every_run(&self, mut filter: RunFilter) -> Result<Vec<RunRecord>, ClientError> {
        filter.limit = Some(1000);
        let mut runs = Vec::new();
        loop {
            let page = self.list(&filter).await?;
            runs.extend(page.runs);
            match page.next_cursor {
                Some(cursor) => filter.cursor = Some(cursor),
                None => return Ok(runs),
            }
        }
    }

    /// How many runs each workflow has in each status (no zero counts), by workflow then status.
    pub async fn workflow_counts(&self) -> Result<Vec<cairn_store::WorkflowCount>, ClientError> {
        Ok(self.store.workflow_counts().await?)
    }

    /// Runs matching `filter`, newest first, one page at a time.
    pub async fn list(&self, filter: &RunFilter) -> Result<RunPage, ClientError> {
        Ok(self.store.list_runs(filter).await?)
    }

    /// A run's journal.
    pub async fn journal(&self, id: &RunId) -> Result<Vec<JournalEntry>, ClientError> {
        self.get(id).await?;
        Ok(self.store.read_journal(id).await?)
    }

    /// A run's durable values ([`Ctx::var`](crate::ctx::Ctx::var)), each as last set, by name.
    pub async fn vars(&self, id: &RunId) -> Result<std::collections::BTreeMap<String, serde_json::Value>, ClientError> {
        Ok(cairn_journal::vars(&self.journal(id).await?))
    }

    /// A run's signals, consumed and buffered.
    pub async fn signals(&self, id: &RunId) -> Result<Vec<SignalRecord>, ClientError> {
        self.get(id).await?;
        Ok(self.store.signals(id).await?)
    }

    /// Waits until the run ends; its output decoded, or why it did not complete. A run parked
    /// (`paused`) also ends the wait, with an error. A run that continued as new
    /// ([`Ctx::continue_as_new`](crate::ctx::Ctx::continue_as_new)) has the result of the last run of
    /// its chain.
    pub async fn result<O: DeserializeOwned>(&self, id: &RunId) -> Result<O, ClientError> {
        let mut id = id.clone();
        loop {
            match self.result_of(&id).await? {
                Ok(result) => return Ok(result),
                Err(next) => id = next,
            }
        }
    }

    /// The result of `id`, or the run it continued as.
    async fn result_of<O: DeserializeOwned>(&self, id: &RunId) -> Result<Result<O, RunId>, ClientError> {
        const SAFETY_POLL: Duration = Duration::from_secs(5);
        let mut poll = Duration::from_millis(20);
        let mut first = true;
        // Told to look again (the run stopped here, or ended elsewhere): read the store.
        let mut told = false;
        // Whether this worker can execute the run (known after the first read).
        let mut executable_here = false;
        // A client without a worker hears of endings itself, if the store reports them (the
        // subscription comes before the first read, so no ending falls between the two).
        let mut endings = if self.local.is_none() { self.store.notices() } else { None };
        let reported = endings.is_some() || self.local.as_ref().is_some_and(|local| local.notices_reported());
        loop {
            let watch = self.local.as_ref().map(|local| local.watch(id));
            // A run this worker executes tells its watchers when it stops here, and one it is still
            // claiming is likely to be claimed here: no need to read the store meanwhile.
            let (mut here, mut read) = (false, true);
            if !first
                && !told
                && let Some(local) = &self.local
            {
                here = local.runs_here(id);
                read = !(here || (executable_here && local.claiming()));
            }
            if read {
                let run = self.get(id).await?;
                if let Some(next) = run.continued_as {
                    return Ok(Err(next));
                }
                if let Some(result) = outcome(&run.id, run.status, run.output, run.error) {
                    return result.map(Ok);
                }
                executable_here = self.local.as_ref().is_some_and(|local| local.registers(&run.workflow, run.version));
                // Where endings are reported, wherever the run ends this waiter hears of it and
                // reading again is a safety net; elsewhere, reads back off.
                poll = match (reported, first) {
                    (true, _) => SAFETY_POLL,
                    (false, true) => poll,
                    (false, false) => (poll * 2).min(Duration::from_millis(500)),
                };
                first = false;
            }
            match watch {
                Some(watch) => {
                    let ended = if here {
                        watch.await.ok()
                    } else {
                        tokio::time::timeout(poll, watch).await.ok().and_then(Result::ok)
                    };
                    // A run that continued: the store names the next.
                    told = matches!(&ended, Some(None))
                        || matches!(&ended, Some(Some(ended)) if ended.status == RunStatus::Continued);
                    if let Some(Some(ended)) = ended
                        && let Some(result) = outcome(id, ended.status, ended.output, ended.error)
                    {
                        return result.map(Ok);
                    }
                }
                None => match endings.as_mut() {
                    Some(endings) => told = tokio::time::timeout(poll, ending_of(endings, id)).await.is_ok(),
                    None => tokio::time::sleep(poll).await,
                },
            }
        }
    }

    /// Delivers a signal. It is kept until a matching wait consumes it, even if the run is not
    /// waiting yet.
    pub async fn signal<P: Serialize + ?Sized>(
        &self,
        id: &RunId,
        name: &str,
        payload: &P,
    ) -> Result<SignalId, ClientError> {
        let payload =
            serde_json::value::to_raw_value(payload).map_err(|e| ClientError::InvalidPayload(e.to_string()))?;
        self.signal_raw(id, name, payload).await
    }

    /// Delivers a signal with a raw JSON payload.
    pub async fn signal_raw(&self, id: &RunId, name: &str, payload: Box<RawValue>) -> Result<SignalId, ClientError> {
        self.check_size(&payload)?;
        check_signal_name(name)?;
        let sent_at = self.clock.now();
        let signal_id = self
            .store
            .send_signal(NewSignal { run_id: id.clone(), name: name.to_owned(), payload: payload.clone(), sent_at })
            .await?;
        if let Some(local) = &self.local {
            local.deliver(
                id,
                SignalRecord { id: signal_id, name: name.to_owned(), payload, sent_at, consumed_seq: None },
            );
            local.wake_claimer();
        }
        Ok(signal_id)
    }

    /// Cancels a run. A run no worker holds is cancelled at once; a running one is stopped by
    /// its worker, whose step code sees its cancellation token fire. The children it waits for
    /// ([`Ctx::child`](crate::ctx::Ctx::child), not detached ones) are cancelled too, and theirs. A
    /// run that continued as new: the newest run of its chain is the one cancelled.
    pub async fn cancel(&self, id: &RunId) -> Result<CancelOutcome, ClientError> {
        let id = &self.newest(id).await?.id;
        let outcome = self.cancel_one(id).await?;
        let mut parents = vec![id.clone()];
        while let Some(parent) = parents.pop() {
            for child in self.awaited_children(&parent).await? {
                match self.cancel_one(&child).await {
                    Ok(_) | Err(ClientError::RunFinished { .. }) => parents.push(child),
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(outcome)
    }

    /// The newest run of `id`'s chain of continuations ([`Ctx::continue_as_new`](crate::ctx::Ctx::continue_as_new)):
    /// `id` itself unless it continued as another.
    pub async fn newest(&self, id: &RunId) -> Result<RunRecord, ClientError> {
        let mut run = self.get(id).await?;
        while let Some(next) = run.continued_as.take() {
            run = self.get(&next).await?;
        }
        Ok(run)
    }

    /// The unended children `id` started to wait for (read from its journal: the `start` steps
    /// of its `~child[n]` scopes), with the runs their chains continued as.
    async fn awaited_children(&self, id: &RunId) -> Result<Vec<RunId>, ClientError> {
        let children = self.every_run(RunFilter { parent: Some(id.clone()), ..RunFilter::default() }).await?;
        let unended: Vec<RunRecord> = children.into_iter().filter(|r| !r.status.is_terminal()).collect();
        if unended.is_empty() {
            return Ok(Vec::new());
        }
        let awaited: Vec<RunId> =
            self.store.read_journal(id).await?.iter().filter_map(|entry| awaited(&entry.event)).collect();
        let awaits = |child: &RunRecord| awaited.contains(&first_of_chain(&child.id, child.continued_from.is_some()));
        Ok(unended.into_iter().filter(awaits).map(|r| r.id).collect())
    }

    /// Wakes `parent`, which may wait for its child `child` to end.
    pub(crate) async fn child_ended(&self, parent: &RunId, child: &RunId) {
        let payload = serde_json::json!({ "child": child.as_str() });
        match self.signal(parent, CHILD_ENDED, &payload).await {
            Ok(_) | Err(ClientError::RunFinished { .. } | ClientError::RunNotFound(_)) => {}
            // The parent looks at its child again within the hour anyway.
            Err(error) => tracing::warn!("run {child} ended but could not wake its parent {parent}: {error}"),
        }
    }

    async fn cancel_one(&self, id: &RunId) -> Result<CancelOutcome, ClientError> {
        let outcome = self.store.cancel(self.control(id, "cancelled")).await?;
        if let Some(local) = &self.local {
            match outcome {
                CancelOutcome::Requested => {
                    local.interrupt(id, crate::error::Interrupt::Cancelled);
                }
                CancelOutcome::Cancelled => local.notify_watchers(id, None),
            }
        }
        if outcome == CancelOutcome::Cancelled
            && let Ok(Some(run)) = self.store.get_run(id).await
        {
            let lasted = run.created_at.until(run.completed_at.unwrap_or(run.updated_at));
            crate::telemetry::run_ended(&run.workflow, run.status, lasted);
            if let Some(parent) = &run.parent {
                self.child_ended(parent, &first_of_chain(id, run.continued_from.is_some())).await;
            }
        }
        Ok(outcome)
    }

    /// Starts a new run that restarts run `id` from step `from`: same workflow, version and
    /// input, and the original's journal up to (not including) the first entry of `from` (a step
    /// path, or a scope: the first entry of any step under it). Steps before that point are not
    /// executed again; `from` and everything after it are. The new run (a new id) records the
    /// original in `restarted_from`, and listing with
    /// [`RunFilter::restarted_from`](cairn_store::RunFilter::restarted_from) finds the restarts of
    /// a run. A run with a deadline gets one as far from the restart as the original's was from
    /// its start. Only a run that has ended (completed, failed or cancelled) can be restarted;
    /// a `from` its journal does not hold is refused ([`ClientError::UnknownStep`]) and nothing
    /// is created.
    pub async fn restart(&self, id: &RunId, from: &str) -> Result<RunHandle, ClientError> {
        let original = self.get(id).await?;
        if !original.status.is_terminal() {
            return Err(ClientError::NotEnded { run_id: id.clone(), status: original.status });
        }
        let unknown = || ClientError::UnknownStep { run_id: id.clone(), path: from.to_owned() };
        let from_path = StepPath::parse(from).map_err(|_| unknown())?;
        if from_path.is_root() {
            return Err(unknown());
        }
        let journal = self.store.read_journal(id).await?;
        let at =
            journal.iter().position(|e| e.event.path().is_some_and(|p| p.is_within(&from_path))).ok_or_else(unknown)?;
        let now = self.clock.now();
        let mut run = NewRun::new(
            RunId::new(uuid::Uuid::now_v7().to_string()),
            original.workflow.clone(),
            original.version,
            original.input.clone(),
            now,
        );
        run.prefix = journal[1..at].iter().map(|e| e.event.clone()).collect();
        run.restarted_from = Some(id.clone());
        run.retention = original.retention;
        Queue::of(&original).apply(&mut run);
        run.deadline = original.deadline.map(|deadline| now + original.created_at.until(deadline));
        self.create(run).await
    }

    /// Deletes ended runs (completed, failed, cancelled) past their retention, with their
    /// journals and signals, in batches of [`PRUNE_BATCH`] runs per transaction; with
    /// `older_than`, also every ended run that ended longer ago than that. An engine's
    /// [maximum retention](crate::engine::EngineBuilder::max_retention) applies too. Returns the ids
    /// deleted; with `dry_run`, the ids it would delete, deleting nothing. Runs that have not
    /// ended are never deleted. Engines do this by themselves every
    /// [sweep interval](crate::engine::EngineBuilder::sweep_every).
    pub async fn prune(&self, older_than: Option<Duration>, dry_run: bool) -> Result<Vec<RunId>, ClientError> {
        self.prune_batches(older_than, dry_run, 0, &mut |_| {}).await
    }

    /// [`prune`](Client::prune), calling `deleted` with the size of each batch as it is
    /// committed (for a progress report).
    pub async fn prune_reporting(
        &self,
        older_than: Option<Duration>,
        dry_run: bool,
        deleted: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Vec<RunId>, ClientError> {
        self.prune_batches(older_than, dry_run, 0, deleted).await
    }

    /// What an engine's sweeper does every [sweep interval](crate::engine::EngineBuilder::sweep_every):
    /// [`prune`](Client::prune) of runs past their retention, pausing after each full batch
    /// [`SWEEP_PAUSE_FACTOR`] times as long as the batch took, so a large backlog takes at most
    /// a ninth of the store's time (on SQLite, of its one writer) from the runs executing
    /// meanwhile. Returns the ids deleted.
    pub async fn sweep(&self) -> Result<Vec<RunId>, ClientError> {
        self.prune_batches(None, false, SWEEP_PAUSE_FACTOR, &mut |_| {}).await
    }

    /// Prunes in batches of [`PRUNE_BATCH`], pausing `pause_factor` times each full batch's
    /// duration before the next.
    async fn prune_batches(
        &self,
        older_than: Option<Duration>,
        dry_run: bool,
        pause_factor: u32,
        report: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Vec<RunId>, ClientError> {
        let now = self.clock.now();
        let max = self.local.as_ref().and_then(|l| l.max_retention());
        let ended_before = [older_than, max].into_iter().flatten().min().map(|keep| now - keep);
        let limit = if dry_run { usize::MAX / 2 } else { PRUNE_BATCH };
        let mut deleted = Vec::new();
        loop {
            let began = std::time::Instant::now();
            let batch = self.store.prune(PruneRequest { now, ended_before, limit, dry_run }).await?;
            if !dry_run {
                crate::telemetry::swept(batch.len());
            }
            report(batch.len());
            let full = batch.len() == limit;
            deleted.extend(batch);
            if dry_run || !full {
                return Ok(deleted);
            }
            // Real time, not the engine's clock: this paces the store's work.
            tokio::time::sleep(began.elapsed() * pause_factor).await;
        }
    }

    /// A request to cancel or pause `id` now, for `reason`.
    fn control(&self, id: &RunId, reason: &str) -> ControlRequest {
        ControlRequest { run_id: id.clone(), reason: reason.to_owned(), at: self.clock.now(), lease_now: wall_now() }
    }

    /// Pauses a run: no worker claims it until it is [resumed](Client::resume). A run no worker
    /// holds is paused at once; a running one stops at its next step boundary (steps in flight
    /// finish and are committed, no new step starts), told at once in this process or by its
    /// worker's next heartbeat elsewhere. Pausing a paused run changes nothing.
    pub async fn pause(&self, id: &RunId) -> Result<PauseOutcome, ClientError> {
        let outcome = self.store.pause(self.control(id, PAUSED_BY_REQUEST)).await?;
        if let Some(local) = &self.local {
            match outcome {
                PauseOutcome::Requested => {
                    local.interrupt(id, crate::error::Interrupt::Paused);
                }
                PauseOutcome::Paused => local.notify_watchers(id, None),
            }
        }
        Ok(outcome)
    }

    /// Releases a paused run: paused by [`Client::pause`], or parked by an error (a
    /// non-determinism, a panicking body, poison) once fixed code is deployed. Any worker that
    /// serves its version replays it from its journal; if the code still does not match, it is
    /// parked again with the same error. A run that is not paused is refused
    /// ([`ClientError::NotPaused`]) and nothing changes.
    pub async fn resume(&self, id: &RunId) -> Result<(), ClientError> {
        self.store.resume(ResumeRequest { run_id: id.clone(), at: self.clock.now() }).await?;
        if let Some(local) = &self.local {
            local.wake_claimer();
        }
        Ok(())
    }
}
