//! [`Ctx`] itself: its run, path and scopes, and the verbs that journal what is not a step
//! (patch markers, removed steps, `now`, `random`, `uuid`, continue-as-new).

use crate::error::{StepError, WorkflowError};
use crate::run::RunShared;
use crate::run_core::{Begun, RunInfo};
use cairn_journal::{StepKind, StepPath, Timestamp};
use cairn_store::RunId;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

///low body uses for everything durable: steps, sleeps, waits, scopes.
///
/// `Ctx` is cheap to clone. Every verb takes a name; names are joined into paths with the
/// enclosing [scopes](Ctx::scope), and each path may be used once per run.
///
/// ```no_run
/// use cairn::prelude::*;
/// use std::time::Duration;
///
/// async fn greet(ctx: Ctx, name: String) -> Result<String, WorkflowError> {
///     let greeting = ctx.step("compose", || async { Ok::<_, StepError>(format!("hello {name}")) }).await?;
///     ctx.sleep("pause", Duration::from_secs(60)).await?;
///     let reply: Option<String> =
///         ctx.wait_for_event("reply", EventFilter::any(), Duration::from_secs(3600)).await?;
///     Ok(reply.unwrap_or(greeting))
/// }
/// ```
#[derive(Clone)]
pub struct Ctx {
    pub(crate) shared: Arc<RunShared>,
    pub(crate) scope: StepPath,
    /// Fires when this context's step code must stop: a branch's own token (a lost race), or
    /// `None` for the run's stop ([`RunShared::stop`]): most contexts are the run's, and a
    /// token's clone and drop each lock its tree, which a context cloned for every step paid.
    pub(crate) cancel: Option<CancellationToken>,
    /// Within a branch or an item: its steps' appends go out with others of the run, so they
    /// are sent to be committed together ([`cairn_store::Append::batched`]).
    pub(crate) batched: bool,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("run", &self.shared.id).field("scope", &self.scope).finish()
    }
}

pub(crate) fn decode<T: DeserializeOwned>(path: &StepPath, raw: &str) -> Result<T, WorkflowError> {
    serde_json::from_str(raw).map_err(|e| WorkflowError::Payload { path: path.to_string(), message: e.to_string() })
}

impl Ctx {
    pub(crate) fn new(shared: Arc<RunShared>) -> Self {
        Self { shared, scope: StepPath::root(), cancel: None, batched: false }
    }

    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.shared.id
    }

    /// What the run knows of itself: its id, workflow and version, deadline, parent, and place in
    /// its chain of continuations. The same on every replay (nothing is journaled).
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    ///
    /// async fn whoami(ctx: Ctx, _: ()) -> Result<String, WorkflowError> {
    ///     let info = ctx.info();
    ///     Ok(format!("{} v{} generation {}", info.workflow, info.version, info.generation))
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("whoami", 3, whoami).start().await?;
    /// let text: String = engine.client().start("whoami", &()).await?.result().await?;
    /// assert_eq!(text, "whoami v3 generation 0");
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn info(&self) -> RunInfo {
        self.shared.info()
    }

    /// Whether the body is re-executing what the run's journal already holds: `true` from the
    /// start of an execution that resumes a run (after a crash, a deploy, a sleep or a wait that
    /// let it go from memory) until the body reaches the first step, wait or sleep the journal
    /// does not have; `false` from there on, and throughout a run's first execution. Steps never
    /// need it (a journaled step's body is not called again); code around them does, to say or
    /// count something once rather than at every replay (after Temporal's `isReplaying`).
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    ///
    /// async fn greet(ctx: Ctx, name: String) -> Result<String, WorkflowError> {
    ///     if !ctx.is_replaying() {
    ///         tracing::info!("greeting {name}"); // once per run, not once per replay
    ///     }
    ///     ctx.step("greet", || async { Ok::<_, StepError>(format!("hello {name}")) }).await
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("greet", 1, greet).start().await?;
    /// let text: String = engine.client().start("greet", "Ada").await?.result().await?;
    /// assert_eq!(text, "hello Ada");
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn is_replaying(&self) -> bool {
        self.shared.lock().live_position().is_none()
    }

    pub(crate) fn shared(&self) -> &Arc<RunShared> {
        &self.shared
    }

    /// The current scope's path (empty at the top level).
    pub fn path(&self) -> &StepPath {
        &self.scope
    }

    /// A token that fires when the run is cancelled or must stop, or when the
    /// [race](Ctx::race) branch this context belongs to lost; pass it into long step bodies.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel_token().child_token()
    }

    /// The token that fires when this context's step code must stop.
    pub(crate) fn cancel_token(&self) -> &CancellationToken {
        self.cancel.as_ref().unwrap_or(&self.shared.stop)
    }

    /// A context whose steps live under `name/`. Use a scope per concurrent branch, so each
    /// branch numbers its own steps.
    pub fn scope(&self, name: &str) -> Result<Ctx, WorkflowError> {
        let scope = self.scope.child(name)?;
        Ok(Ctx { shared: Arc::clone(&self.shared), scope, cancel: self.cancel.clone(), batched: self.batched })
    }

    /// A context whose steps live under `name[index]/`, for loop iterations.
    pub fn scope_indexed(&self, name: &str, index: u64) -> Result<Ctx, WorkflowError> {
        let scope = self.scope.indexed_child(name, index)?;
        Ok(Ctx { shared: Arc::clone(&self.shared), scope, cancel: self.cancel.clone(), batched: self.batched })
    }

    /// A patch marker, for changing a workflow's code while runs started by the old code are in
    /// flight: `true` when the run takes the new branch. A run that reaches the marker for the
    /// first time past everything its journal holds takes it (new runs, and old runs that had
    /// not got this far); a run still replaying what older code journaled does not. The answer
    /// is journaled the first time, so every replay of the run takes the same branch. Once no
    /// run that took the old branch remains, delete the old branch and the marker.
    ///
    /// ```no_run
    /// # use cairn::prelude::*;
    /// async fn order(ctx: Ctx, id: u64) -> Result<(), WorkflowError> {
    ///     ctx.step("charge", || async { Ok::<_, StepError>(()) }).await?;
    ///     if ctx.patched("send-receipt").await? {
    ///         ctx.step("receipt", || async { Ok::<_, StepError>(()) }).await?;
    ///     }
    ///     ctx.step("ship", || async { Ok::<_, StepError>(()) }).await
    /// }
    /// ```
    pub async fn patched(&self, id: &str) -> Result<bool, WorkflowError> {
        self.shared.patched(id).await
    }

    /// Marks where a step (of any kind) named `name` stood before the code stopped running it,
    /// so journals written by the older code still replay: where the journal holds the step it
    /// keeps its place and is skipped; elsewhere this does nothing.
    ///
    /// ```no_run
    /// # use cairn::prelude::*;
    /// async fn order(ctx: Ctx, id: u64) -> Result<(), WorkflowError> {
    ///     ctx.step("charge", || async { Ok::<_, StepError>(()) }).await?;
    ///     ctx.removed("fraud-check")?; // was a step here until version 3
    ///     ctx.step("ship", || async { Ok::<_, StepError>(()) }).await
    /// }
    /// ```
    pub fn removed(&self, name: &str) -> Result<(), WorkflowError> {
        self.shared.removed(&self.scope.child(name)?)
    }

    /// The current time by the engine's clock, journaled the first time so every replay of the
    /// run sees the same value: use it instead of reading a clock in the body. Each call in a
    /// scope is its own journal entry (`~now[0]`, `~now[1]`, …), numbered in the order of the
    /// calls, so make them in the same order on every run (as with steps).
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{MemoryStore, Timestamp};
    ///
    /// async fn stamp(ctx: Ctx, (): ()) -> Result<(Timestamp, u64, String), WorkflowError> {
    ///     Ok((ctx.now().await?, ctx.random().await?, ctx.uuid().await?.to_string()))
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("stamp", 1, stamp).start().await?;
    /// let (at, _dice, id): (Timestamp, u64, String) = engine.client().start("stamp", &()).await?.result().await?;
    /// assert!(at.as_millis() > 0 && id.len() == 36);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn now(&self) -> Result<Timestamp, WorkflowError> {
        let clock = Arc::clone(self.shared.clock());
        Ok(Timestamp::from_millis(self.helper("now", move || clock.now().as_millis()).await?))
    }

    /// Ends this run and goes on as a fresh run of the same workflow with `input`: return what
    /// this gives from the body (`return ctx.continue_as_new(&next);`). The run ends with status
    /// `continued`, linked to the new run (`continued_as`, and `continued_from` on the new one),
    /// in one store operation that also moves every signal this run has not consumed to the new
    /// run; signals sent to this run later go to the newest run of its chain, and
    /// [`Client::result`](crate::client::Client::result) of any run of the chain waits for the last.
    ///
    /// The new run starts with an empty journal, on the newest version of the workflow this
    /// worker registers (so a long-lived workflow picks up new code as it continues), with this
    /// run's parent, deadline and retention. Its id is this run's first id with `~1`, `~2`, …
    /// appended (`meter` continues as `meter~1`, then `meter~2`). Use it where a run would
    /// otherwise grow without bound (an endless loop of waits); [`repeat`](Ctx::repeat) is the
    /// lighter choice when the state fits a loop.
    ///
    /// Returned from inside a branch, a race or a saga it is wrapped as their errors are, and the
    /// run fails instead; call it from the body itself.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    ///
    /// // Counts `tick` signals, starting afresh every 2 so no journal grows.
    /// async fn meter(ctx: Ctx, seen: u32) -> Result<u32, WorkflowError> {
    ///     for i in 0..2 {
    ///         let hour = std::time::Duration::from_secs(3600);
    ///         let _: Option<()> = ctx.wait_for_event_as(&format!("tick[{i}]"), "tick", EventFilter::any(), hour).await?;
    ///     }
    ///     if seen + 2 >= 6 {
    ///         return Ok(seen + 2);
    ///     }
    ///     ctx.continue_as_new(&(seen + 2))
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("meter", 1, meter).start().await?;
    /// let run = engine.client().start("meter", &0u32).id("meter").await?;
    /// for _ in 0..6 {
    ///     engine.client().signal(run.id(), "tick", &()).await?; // always to the newest run
    /// }
    /// assert_eq!(run.result::<u32>().await?, 6);
    /// assert_eq!(engine.client().get(&"meter~2".into()).await?.rare().continued_from, Some("meter~1".into()));
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn continue_as_new<I: Serialize + ?Sized, T>(&self, input: &I) -> Result<T, WorkflowError> {
        let input = serde_json::to_string(input).map_err(|e| WorkflowError::Payload {
            path: crate::run_core::CONTINUED_INPUT.into(),
            message: e.to_string(),
        })?;
        Err(WorkflowError::ContinueAsNew { input })
    }

    /// A random `u64`, journaled the first time so every replay sees the same value (numbered
    /// per scope as [`now`](Ctx::now)).
    pub async fn random(&self) -> Result<u64, WorkflowError> {
        self.helper("random", || {
            let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
            high ^ low.rotate_left(32)
        })
        .await
    }

    /// A random (version 4) UUID, journaled the first time so every replay sees the same one
    /// (numbered per scope as [`now`](Ctx::now)).
    pub async fn uuid(&self) -> Result<uuid::Uuid, WorkflowError> {
        self.helper("uuid", uuid::Uuid::new_v4).await
    }

    /// A journaled value made by `make` the first time: the next `~kind[n]` step of this scope.
    async fn helper<T>(&self, kind: &'static str, make: impl Fn() -> T + Send) -> Result<T, WorkflowError>
    where
        T: Serialize + DeserializeOwned + Send,
    {
        let n = self.shared.lock().next_helper(&self.scope, kind);
        self.step(&format!("~{kind}[{n}]"), move || {
            let value = make();
            async move { Ok::<_, StepError>(value) }
        })
        .await
    }

    pub(crate) fn begin(&self, name: &str, kind: StepKind) -> Result<(StepPath, Begun), WorkflowError> {
        let path = self.scope.child(name)?;
        let begun = self.shared.begin(&path, kind)?;
        Ok((path, begun))
    }
}
