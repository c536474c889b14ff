//! Starting runs: [`StartRun`] and its options, publishing events ([`Publish`]), and the runs a
//! worker starts itself (children, events' subscribers).

use super::handle::{Client, DEFAULT_RETENTION};
use crate::error::ClientError;
use crate::op_error::{PayloadRefused, ReadError, StartError};
use crate::run_core::Queue;
use cairn_api::{DebounceOptions, StartOptions};
use cairn_journal::topic::Topic;
use cairn_store::{
    Debounce, EventId, EventName, EventPage, EventQuery, EventRecord, EventRun, IdempotencyKey, NameError, NewRun,
    RunId, RunRecord, StartSignal, StoreError, WorkflowName,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

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
    pub async fn result<O: DeserializeOwned>(&self) -> Result<O, ReadError> {
        self.client.result(&self.run.id).await
    }
}

/// Options of a start, awaited to start the run. Made by [`Client::start`].
#[must_use = "a start does nothing until awaited"]
pub struct StartRun<'a> {
    client: &'a Client,
    workflow: String,
    /// The input, or why the start is refused before it reaches the store (an input that does
    /// not serialize, a duration in [`StartOptions`] that does not parse).
    input: Result<Box<RawValue>, StartError>,
    options: Options,
    signal: Option<(String, Result<Box<RawValue>, StartError>)>,
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
            let topic = Topic::new(self.topic).map_err(ClientError::InvalidTopic)?;
            let payload = self.payload?;
            client.check_payload(&payload)?;
            let event_id = match self.id {
                Some(id) => EventId::new(id).map_err(|error| ClientError::InvalidEventId(error.given))?.into_string(),
                None => uuid::Uuid::now_v7().to_string(),
            };
            let mut subscribers: Vec<(String, u32)> = (client.store.subscriptions().await?.into_iter())
                .filter(|s| cairn_journal::topic::matches(&s.pattern, topic.as_str()))
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
            // Recorded once its runs exist: a publish retried with its id records it then.
            let runs =
                started.iter().map(|run| EventRun { workflow: run.run.workflow.to_string(), run: run.run.id.clone() });
            let record = EventRecord {
                id: event_id.clone(),
                topic: topic.to_string(),
                payload,
                published_at: client.clock.now(),
                runs: runs.collect(),
            };
            client.store.record_event(&record).await?;
            Ok(Published { event_id, runs: started })
        })
    }
}

/// How a run is started, besides its workflow and input.
#[derive(Debug, Clone, Default)]
struct Options {
    id: Option<String>,
    idempotency_key: Option<String>,
    version: Option<u32>,
    timeout: Option<Duration>,
    retention: Option<Duration>,
    queue: Queue,
    debounce: Option<Debounce>,
    allow_unknown: bool,
}

impl StartRun<'_> {
    /// Signal-with-start: also deliver this signal, creating the run if it does not exist yet
    /// (same id, or same idempotency key) and buffering the signal in the same atomic store
    /// operation, so a caller never races a run into existence. An existing unfinished run
    /// just gets the signal (`created: false`); a finished one refuses it and nothing is stored.
    pub fn with_signal<P: Serialize + ?Sized>(mut self, name: &str, payload: &P) -> Self {
        let payload = serde_json::value::to_raw_value(payload).map_err(|e| StartError::InvalidPayload(e.to_string()));
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

    /// Start it even if no worker has ever served this workflow (or this version) on the store:
    /// it waits, pending, for a worker that does. Without it a client whose engine does not
    /// register the workflow refuses such a start (`[CAIRN-E0304]`), since
    /// the run would wait for nobody.
    pub fn allow_unknown(mut self) -> Self {
        self.options.allow_unknown = true;
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
    /// one with 10. Runs without a key share one. 1 to 200 characters without control characters
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
    type Output = Result<RunHandle, StartError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.start())
    }
}

impl StartRun<'_> {
    /// Starts the run.
    async fn start(self) -> Result<RunHandle, StartError> {
        let input = self.input?;
        let run = self.client.new_run(&self.workflow, input, self.options).await?;
        match self.signal {
            None => Ok(self.client.create(run).await?),
            Some((name, payload)) => {
                run.check_signal_start().map_err(debounce_refused)?;
                let payload = payload?;
                self.client.check_payload(&payload)?;
                check_signal_name(&name)?;
                let signal = StartSignal { name, payload };
                let (created, _) = self.client.store.start_with_signal(run, signal).await?;
                Ok(self.client.started(created))
            }
        }
    }
}

/// A debounced start a store would refuse, as the start's error.
fn debounce_refused(error: StoreError) -> StartError {
    match error {
        StoreError::InvalidInput(message) => StartError::InvalidDebounce(message),
        other => StartError::Store(other),
    }
}

impl Client {
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
        self.check_payload(&input)?;
        let version = self.version_to_start(workflow).await?;
        if let Some(checked) = self.local.as_ref().and_then(|l| l.check_input(workflow, version, &input)) {
            checked.map_err(ClientError::InvalidPayload)?;
        }
        let options = Options {
            id: Some(id.to_string()),
            idempotency_key: Some(format!("child:{id}")),
            queue: queue.clone(),
            ..Options::default()
        };
        let mut run = self.build_run(workflow, version, input, options)?;
        run.parent = Some(parent.clone());
        Ok(self.create(run).await?)
    }

    /// The version of `workflow` a run started by the engine itself gets: the newest this worker
    /// registers, or else the newest a live worker serves.
    pub(crate) async fn version_to_start(&self, workflow: &str) -> Result<u32, StartError> {
        if let Some(version) = self.local.as_ref().and_then(|l| l.latest(workflow)) {
            return Ok(version);
        }
        let served = self.live_workers_for::<StartError>().await?.served();
        let newest = served.into_iter().filter(|key| key.name == workflow).map(|key| key.version).max();
        newest.ok_or_else(|| StartError::UnknownWorkflow(workflow.into()))
    }

    /// A payload (an input, a signal's or an event's, a schedule's input) every store keeps and
    /// a run can read back: within the size limit and keeping [`cairn_journal::check_payload`]'s
    /// rules (nesting, NUL, lone surrogates, numbers out of range: each would be stored and then
    /// fail the run that reads it, or break PostgreSQL's `jsonb`). The same rules on every store.
    pub(crate) fn check_payload(&self, payload: &RawValue) -> Result<(), PayloadRefused> {
        let size = payload.get().len();
        if size > self.max_payload_bytes {
            return Err(PayloadRefused::TooLarge { size, limit: self.max_payload_bytes });
        }
        cairn_journal::check_payload(payload.get()).map_err(|fault| PayloadRefused::Invalid(fault.to_string()))
    }

    /// Starts a run of `workflow` with `input`; chain [`id`](StartRun::id),
    /// [`idempotency_key`](StartRun::idempotency_key) or [`version`](StartRun::version), then await.
    pub fn start<I: Serialize + ?Sized>(&self, workflow: &str, input: &I) -> StartRun<'_> {
        StartRun {
            client: self,
            workflow: workflow.to_owned(),
            input: serde_json::value::to_raw_value(input).map_err(|e| StartError::InvalidPayload(e.to_string())),
            options: Options::default(),
            signal: None,
        }
    }

    /// Starts a run of `workflow` as `options` describe it: the form of a start's options that
    /// the HTTP API's body, the `cairn runs start` flags and the light client share
    /// ([`StartOptions`]). Durations in it are checked when the start is awaited: one that does
    /// not parse is `[CAIRN-E0315]` (debounce) or `[CAIRN-E0317]` (timeout), and nothing is
    /// stored. More options may still be chained.
    ///
    /// ```
    /// # use cairn::prelude::*;
    /// # async fn example(engine: &Engine) -> Result<(), ClientError> {
    /// let options: cairn::StartOptions =
    ///     serde_json::from_str(r#"{"input": {"order": 7}, "priority": 10, "timeout": "1h"}"#).expect("valid JSON");
    /// engine.client().start_with("fulfil", options).await?;
    /// # Ok(()) }
    /// ```
    pub fn start_with(&self, workflow: &str, options: StartOptions) -> StartRun<'_> {
        let StartOptions {
            input,
            id,
            idempotency_key,
            version,
            retention_days,
            priority,
            fairness_key,
            debounce,
            timeout,
            allow_unknown,
        } = options;
        let parsed = (
            debounce.map(parse_debounce).transpose(),
            timeout.map(|given| run_timeout(&given).map_err(StartError::InvalidTimeout)).transpose(),
        );
        let (input, debounce, timeout) = match parsed {
            (Ok(debounce), Ok(timeout)) => (Ok(input.unwrap_or_else(|| RawValue::NULL.to_owned())), debounce, timeout),
            (Err(refused), _) | (_, Err(refused)) => (Err(refused), None, None),
        };
        let options = Options {
            id,
            idempotency_key,
            version,
            timeout,
            retention: retention_days.map(|days| Duration::from_secs(u64::from(days) * 86_400)),
            queue: Queue { priority: priority.unwrap_or_default(), fairness_key },
            debounce,
            allow_unknown: allow_unknown.unwrap_or(false),
        };
        StartRun { client: self, workflow: workflow.to_owned(), input, options, signal: None }
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

    /// The published events `query` selects, newest first, each with the runs it started: a
    /// page of at most `query.limit` (see [`EventStore::events`](cairn_store::EventStore::events)). A
    /// topic that events cannot be published to is refused ([`ReadError::InvalidTopic`]).
    /// Events are kept as long as a run is by default
    /// ([`DEFAULT_RETENTION`], or an engine's maximum retention if shorter).
    pub async fn events(&self, query: &EventQuery) -> Result<EventPage, ReadError> {
        if let Some(topic) = &query.topic {
            cairn_journal::topic::check_topic(topic).map_err(ReadError::InvalidTopic)?;
        }
        Ok(self.store.events(query).await?)
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
        let run = self.new_run(workflow, input, Options { id, idempotency_key, version, ..Options::default() }).await?;
        Ok(self.create(run).await?)
    }

    /// A run to create, checked: the workflow and version exist (when this client knows its
    /// engine's workflows), the input decodes and fits, the id is valid.
    /// The run event `key` starts for a subscribed workflow. Its input is checked when this
    /// client's engine registers that version; another service's workflow is started unchecked.
    fn event_run(&self, workflow: &str, version: u32, input: &RawValue, key: &str) -> Result<NewRun, ClientError> {
        if let Some(checked) = self.local.as_ref().and_then(|local| local.check_input(workflow, version, input)) {
            checked.map_err(|e| ClientError::InvalidPayload(format!("{workflow}: {e}")))?;
        }
        let options = Options { idempotency_key: Some(key.to_owned()), ..Options::default() };
        Ok(self.build_run(workflow, version, input.to_owned(), options)?)
    }

    /// A run to start: a workflow this client's engine registers is checked against its
    /// registration (version, input); any other against the store's registry of served versions
    /// ([`served_version`](Client::served_version)).
    async fn new_run(&self, workflow: &str, input: Box<RawValue>, options: Options) -> Result<NewRun, StartError> {
        self.check_payload(&input)?;
        let registered = self.local.as_ref().and_then(|local| Some((local, local.latest(workflow)?)));
        if let Some((local, latest)) = registered {
            let version = options.version.unwrap_or(latest);
            let checked = local
                .check_input(workflow, version, &input)
                .ok_or_else(|| StartError::UnknownVersion { name: workflow.into(), version })?;
            checked.map_err(StartError::InvalidPayload)?;
            return self.build_run(workflow, version, input, options);
        }
        // Built (and so checked) first: a bad name or option is refused for what it is.
        let (asked, allow_unknown) = (options.version, options.allow_unknown);
        let mut run = self.build_run(workflow, asked.unwrap_or(1), input, options)?;
        run.version = self.served_version(workflow, asked, allow_unknown).await?;
        Ok(run)
    }

    /// The version to start of `workflow`, which this client's engine does not register: `asked`
    /// if some worker has served it on this store, or else the newest served. A workflow (or a
    /// version) no worker has ever served is refused, unless `allow_unknown` (then `asked`, or 1).
    pub(crate) async fn served_version(
        &self,
        workflow: &str,
        asked: Option<u32>,
        allow_unknown: bool,
    ) -> Result<u32, StartError> {
        if allow_unknown {
            return Ok(asked.unwrap_or(1));
        }
        let served = self.store.served_workflows().await?;
        let versions: Vec<u32> = served.iter().filter(|s| s.key.name == workflow).map(|s| s.key.version).collect();
        match (asked, versions.iter().max()) {
            (_, None) => Err(StartError::UnknownWorkflow(workflow.into())),
            (Some(version), Some(_)) if versions.contains(&version) => Ok(version),
            (Some(version), Some(_)) => Err(StartError::UnknownVersion { name: workflow.into(), version }),
            (None, Some(newest)) => Ok(*newest),
        }
    }

    /// The new run of `workflow` version `version` (checked by the caller) with `options` (their
    /// `version` aside).
    fn build_run(
        &self,
        workflow: &str,
        version: u32,
        input: Box<RawValue>,
        options: Options,
    ) -> Result<NewRun, StartError> {
        let Options { id, idempotency_key, timeout, retention, queue, debounce, .. } = options;
        let workflow = WorkflowName::try_from(workflow)?;
        let idempotency_key = idempotency_key.map(IdempotencyKey::new).transpose()?;
        if let Some(key) = &queue.fairness_key {
            cairn_journal::flow::check_fairness_key(key).map_err(StartError::InvalidFairnessKey)?;
        }
        let id = match id {
            Some(id) => RunId::validate(&id)?,
            None => RunId::new(uuid::Uuid::now_v7().to_string()),
        };
        let now = self.clock.now();
        let mut run = NewRun::new(id, workflow, version, input, now);
        run.idempotency_key = idempotency_key;
        run.deadline = self.timeout_of(timeout).map(|limit| now + limit);
        run.retention = Some(self.retention_of(&run.workflow, retention));
        queue.apply(&mut run);
        run.debounce = debounce;
        run.check_debounce().map_err(debounce_refused)?;
        Ok(run)
    }

    /// The timeout of a new run: `asked`, or the engine's default.
    pub(crate) fn timeout_of(&self, asked: Option<Duration>) -> Option<Duration> {
        asked.or_else(|| self.local.as_ref().and_then(|local| local.default_run_timeout()))
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

    pub(crate) async fn create(&self, run: NewRun) -> Result<RunHandle, StoreError> {
        let created = self.store.create_run(run).await?;
        Ok(self.started(created))
    }

    /// The handle of a run just created or found; a local worker hears of it.
    pub(crate) fn started(&self, created: cairn_store::CreatedRun) -> RunHandle {
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
        RunHandle { run: created.run, created: created.created, client: self.clone() }
    }
}

pub(super) fn check_signal_name(name: &str) -> Result<(), NameError> {
    EventName::check(name)
}

/// A debounce given as text ([`DebounceOptions`]); a duration that does not parse is
/// `[CAIRN-E0315]`.
fn parse_debounce(given: DebounceOptions) -> Result<Debounce, StartError> {
    let duration = |name: &str, text: &str| {
        humantime::parse_duration(text)
            .map_err(|_| StartError::InvalidDebounce(format!("debounce {name} {text:?} is not a duration (try `2s`)")))
    };
    let mut debounce = Debounce::new(given.key, duration("quiet", &given.quiet)?);
    if let Some(max_wait) = &given.max_wait {
        debounce = debounce.max_wait(duration("maxWait", max_wait)?);
    }
    Ok(debounce)
}

/// A run timeout given as text (`30m`, `2h 30m`), as a start's `timeout` and
/// `cairn serve --default-run-timeout` take it: `[CAIRN-E0317]` unless it is a duration from
/// 1 ms to 10 years.
///
/// ```
/// assert_eq!(cairn::parse_run_timeout("30m")?, std::time::Duration::from_secs(1800));
/// assert!(cairn::parse_run_timeout("0s").is_err());
/// # Ok::<(), cairn::ClientError>(())
/// ```
pub fn parse_run_timeout(given: &str) -> Result<Duration, ClientError> {
    run_timeout(given).map_err(ClientError::InvalidTimeout)
}

/// A run timeout given as text ([`parse_run_timeout`]), or why it is not one: a start refuses it as
/// a [`StartError`], the CLI's flag as a [`ClientError`], both `[CAIRN-E0317]`.
fn run_timeout(given: &str) -> Result<Duration, String> {
    const MOST: Duration = Duration::from_secs(10 * 365 * 86_400);
    match humantime::parse_duration(given) {
        Ok(limit) if limit >= Duration::from_millis(1) && limit <= MOST => Ok(limit),
        _ => Err(format!("{given:?} is not a duration from 1ms to 10 years (try `30m`)")),
    }
}
