//! Configuring and starting an engine.

use super::config::Config;
use super::handle::Engine;
use super::local::{Local, attached};
use super::loops::{claim_loop, heartbeat_loop, notices_loop, start_up_chores, sweep_loop};
use crate::clock::{Clock, SystemClock};
use crate::ctx::Ctx;
use crate::error::{EngineError, WorkflowError};
use crate::registry::Registry;
use cairn_journal::RetryPolicy;
use cairn_store::Store;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Configures and starts an [`Engine`]. Made by [`Engine::builder`].
#[must_use = "call .start() to run the engine"]
pub struct EngineBuilder {
    store: Option<Arc<dyn Store>>,
    clock: Arc<dyn Clock>,
    registry: Registry,
    duplicate: Option<(String, u32)>,
    config: Config,
    schedules: Vec<crate::schedule::Schedule>,
    concurrency: Vec<cairn_store::ConcurrencyRule>,
}

impl EngineBuilder {
    /// The store runs are kept in (required).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The store, already shared.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The clock for sleeps, timeouts and backoff (default: the system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Registers `body` as version `version` of workflow `name`. New runs use the highest
    /// registered version; a run keeps the version it started with.
    pub fn register<I, O, F, Fut>(mut self, name: &str, version: u32, body: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(Ctx, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + Send + 'static,
    {
        if !self.registry.insert(name, version, body) && self.duplicate.is_none() {
            self.duplicate = Some((name.to_owned(), version));
        }
        self
    }

    /// Subscribes workflow `name` (registered with this builder) to the events of every topic
    /// `pattern` matches: `user.signup`, or `user.*` (`*` is any one segment; see
    /// [`cairn_journal::topic`]). Each event [published](crate::client::Client::publish) to a matching
    /// topic starts one run of the workflow's newest registered version, with the event's payload
    /// as input. The engine declares its workflows' subscriptions in the store when it starts,
    /// replacing what an earlier deploy declared for them, so any client of the store can publish.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    /// use serde_json::{Value, json};
    ///
    /// async fn welcome(ctx: Ctx, user: Value) -> Result<String, WorkflowError> {
    ///     ctx.step("greet", || async { Ok::<_, StepError>(format!("welcome {}", user["name"])) }).await
    /// }
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("welcome", 1, welcome)
    ///     .subscribe("welcome", "user.*")
    ///     .start()
    ///     .await?;
    /// let published = engine.client().publish("user.signup", &json!({"name": "Ada"})).id("evt-1").await?;
    /// assert_eq!(published.runs.len(), 1);
    /// let greeting: String = published.runs[0].result().await?;
    /// assert_eq!(greeting, "welcome \"Ada\"");
    /// // The same event again starts nothing new.
    /// let again = engine.client().publish("user.signup", &json!({"name": "Ada"})).id("evt-1").await?;
    /// assert_eq!(again.started().count(), 0);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn subscribe(mut self, name: &str, pattern: &str) -> Self {
        self.registry.subscribe(name, pattern);
        self
    }

    /// The retry policy of every step of workflow `name` (every version) that does not set its
    /// own with [`Step::retry`](crate::ctx::Step::retry) (default: [`RetryPolicy::default`]).
    pub fn default_retry(mut self, name: &str, policy: RetryPolicy) -> Self {
        self.registry.set_step_defaults(name, |defaults| defaults.retry = Some(policy));
        self
    }

    /// A timeout for each attempt of every step of workflow `name` that does not set its own
    /// with [`Step::timeout`](crate::ctx::Step::timeout) (default: none).
    pub fn default_step_timeout(mut self, name: &str, limit: Duration) -> Self {
        self.registry.set_step_defaults(name, |defaults| defaults.timeout = Some(limit));
        self
    }

    /// This worker's identity in leases (default: `worker-<pid>-<random>`).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.config.worker_id = id.into();
        self
    }

    /// How long a claimed run stays leased without a heartbeat (default 30 s). A crashed worker's
    /// runs resume elsewhere after this long.
    pub fn lease_duration(mut self, lease: Duration) -> Self {
        self.config.lease = lease.max(Duration::from_millis(30));
        self
    }

    /// How often the worker looks for ready runs it was not told about (default 500 ms).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.config.poll_interval = every;
        self
    }

    /// Sleeps and backoffs ending within this long stay in memory instead of suspending (default 1 s).
    pub fn suspend_grace(mut self, grace: Duration) -> Self {
        self.config.suspend_grace = grace;
        self
    }

    /// Most runs executing at once on this worker (default 1024).
    pub fn max_active_runs(mut self, runs: usize) -> Self {
        self.config.max_active_runs = runs.max(1);
        self
    }

    /// Largest input, step output, signal payload or run output in bytes (default 4 MiB).
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.config.max_payload_bytes = bytes;
        self
    }

    /// How many times in a row a run's worker may die while executing it without committing
    /// anything (default 10). A run reclaimed more often than that is parked as poison
    /// (`[CAIRN-E0109]`, naming the step it reaches) instead of crash-looping every worker.
    pub fn max_recoveries(mut self, recoveries: u32) -> Self {
        self.config.max_recoveries = recoveries;
        self
    }

    /// How long ended runs of workflow `name` (every version) are kept before a sweeper deletes
    /// them (default [`DEFAULT_RETENTION`](crate::client::DEFAULT_RETENTION), 30 days); a run's own
    /// [`retention`](crate::client::StartRun::retention) overrides it.
    pub fn retention(mut self, name: &str, keep: Duration) -> Self {
        self.registry.set_retention(name, keep);
        self
    }

    /// The longest any ended run is kept, whatever its workflow or its start asked for (default:
    /// no maximum). Runs this engine's client starts are clamped to it, and its sweeper deletes
    /// ended runs older than it whoever started them.
    pub fn max_retention(mut self, keep: Duration) -> Self {
        self.config.max_retention = Some(keep);
        self
    }

    /// The timeout of every run this engine starts (through its client, HTTP, events and
    /// schedules) without one of its own (default: none): such a run still going this long after
    /// it was started ends `failed` with `[CAIRN-E0110]`, as with
    /// [`StartRun::timeout`](crate::client::StartRun::timeout).
    pub fn default_run_timeout(mut self, limit: Duration) -> Self {
        self.config.default_run_timeout = Some(limit);
        self
    }

    /// How often the worker deletes ended runs past their retention (default every minute;
    /// `None`: never, e.g. when a dedicated process or `cairn runs prune` does it). Many workers
    /// may sweep one store at once.
    pub fn sweep_every(mut self, every: Option<Duration>) -> Self {
        self.config.sweep_every = every;
        self
    }

    /// Declares a schedule of a workflow registered with this builder: the engine creates it in
    /// the store when it starts, or updates it (see [`Client::put_schedule`](crate::client::Client::put_schedule): a paused schedule
    /// stays paused, and its next firing stays unless its spec changed). Every worker serving the
    /// workflow fires it when due, whichever declared it; each firing starts one run.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{CatchUp, MemoryStore, Schedule};
    /// # async fn cleanup(_ctx: Ctx, (): ()) -> Result<(), WorkflowError> { Ok(()) }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("cleanup", 1, cleanup)
    ///     .schedule(Schedule::cron("hourly-cleanup", "cleanup", ["0 * * * *"]).catch_up(CatchUp::Skip))
    ///     .start()
    ///     .await?;
    /// assert_eq!(engine.client().schedules().await?.len(), 1);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn schedule(mut self, schedule: crate::schedule::Schedule) -> Self {
        self.schedules.push(schedule);
        self
    }

    /// Limits how often runs of a registered workflow start, or how often a named step of it
    /// runs, across every worker sharing the store (see [`RateLimit`](crate::flow::RateLimit)); work
    /// over the limit is suspended until its turn (`waiting_for: rate`), never dropped. Checked
    /// at start (`[CAIRN-E0314]`). A later limit for the same workflow and step wins.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{MemoryStore, RateLimit};
    /// use std::time::Duration;
    /// # async fn sync(_ctx: Ctx, _input: serde_json::Value) -> Result<(), WorkflowError> { Ok(()) }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("sync", 1, sync)
    ///     // At most 100 syncs start per minute, and each customer's API calls twice a second.
    ///     .rate_limit(RateLimit::starts("sync", 100, Duration::from_secs(60)))
    ///     .rate_limit(RateLimit::step("sync", "call-api", 2, Duration::from_secs(1)).per_key("/customer"))
    ///     .start()
    ///     .await?;
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn rate_limit(mut self, limit: crate::flow::RateLimit) -> Self {
        self.registry.set_rate_limit(limit);
        self
    }

    /// Limits how many runs of a registered workflow hold a slot at once, across every worker
    /// sharing the store (stored at start, replacing the workflow's earlier rule). Runs over the
    /// limit wait, in creation order, and start as slots free up; `cairn runs list` shows them
    /// `waiting_for: concurrency`. One rule per workflow: a later call for the same workflow wins.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{ConcurrencyRule, MemoryStore};
    /// # async fn charge(_ctx: Ctx, _input: serde_json::Value) -> Result<(), WorkflowError> { Ok(()) }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("charge", 1, charge)
    ///     // At most 2 charges per customer at once.
    ///     .concurrency(ConcurrencyRule::per_key("charge", "/customer", 2))
    ///     .start()
    ///     .await?;
    /// assert_eq!(engine.client().concurrency_rules().await?[0].limit, 2);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn concurrency(mut self, rule: cairn_store::ConcurrencyRule) -> Self {
        self.concurrency.retain(|r| r.workflow != rule.workflow);
        self.concurrency.push(rule);
        self
    }

    /// How long [`Engine::shutdown`] lets steps in flight finish (default 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.config.shutdown_grace = grace;
        self
    }

    /// Starts the worker's loops on the current Tokio runtime.
    pub async fn start(self) -> Result<Engine, EngineError> {
        let store = self.store.ok_or(EngineError::NoStore)?;
        if let Some((name, version)) = self.duplicate {
            return Err(EngineError::DuplicateWorkflow { name, version });
        }
        self.registry.check_settings()?;
        self.registry.check_rate_limits()?;
        for schedule in &self.schedules {
            schedule.check().map_err(|e| EngineError::InvalidSchedule(e.to_string()))?;
            if self.registry.latest(&schedule.workflow).is_none() {
                let message =
                    format!("schedule `{}` starts `{}`, which is not registered", schedule.name, schedule.workflow);
                return Err(EngineError::InvalidSchedule(message));
            }
        }
        for rule in &self.concurrency {
            rule.check().map_err(EngineError::InvalidConcurrency)?;
            if self.registry.latest(&rule.workflow).is_none() {
                let message = format!("a concurrency rule limits `{}`, which is not registered", rule.workflow);
                return Err(EngineError::InvalidConcurrency(message));
            }
        }
        tokio::runtime::Handle::try_current().map_err(|_| EngineError::NoRuntime)?;
        // Read first: most starts declare what the store already holds, and then write nothing.
        let declared = self.registry.subscriptions();
        if !declared.is_held_by(&store.subscriptions().await.map_err(EngineError::Store)?) {
            store.set_subscriptions(&declared).await.map_err(EngineError::Store)?;
        }
        if !self.concurrency.is_empty() {
            let held = store.concurrency_rules().await.map_err(EngineError::Store)?;
            for rule in self.concurrency.iter().filter(|rule| !held.contains(rule)) {
                store.put_concurrency(rule).await.map_err(EngineError::Store)?;
            }
        }
        let notices = store.notices();
        let local = Arc::new(Local::new(store, self.clock, self.registry, self.config, notices.is_some()));
        local.record_worker().await;
        local.record_served().await;
        local.log_started();
        let client = attached(&local);
        client.declare_schedules(&self.schedules).await.map_err(|e| match e {
            crate::error::ClientError::Store(error) => EngineError::Store(error),
            other => EngineError::InvalidSchedule(other.to_string()),
        })?;
        let claimer = tokio::spawn(claim_loop(Arc::clone(&local)));
        let heartbeat = tokio::spawn(heartbeat_loop(Arc::clone(&local)));
        if let Some(notices) = notices {
            tokio::spawn(notices_loop(Arc::clone(&local), notices));
        }
        if let Some(every) = local.config.sweep_every {
            tokio::spawn(sweep_loop(Arc::clone(&local), client.clone(), every));
        }
        // Housekeeping off the start path: the worker claims runs meanwhile.
        tokio::spawn(start_up_chores(Arc::clone(&local), client.clone()));
        Ok(Engine { client, local, loops: Mutex::new(Some((claimer, heartbeat))) })
    }
}

impl Engine {
    /// A builder with default settings.
    pub fn builder() -> EngineBuilder {
        EngineBuilder {
            store: None,
            clock: Arc::new(SystemClock),
            registry: Registry::default(),
            duplicate: None,
            config: Config::default(),
            schedules: Vec::new(),
            concurrency: Vec::new(),
        }
    }
}
