//! The context a workflow body gets, and its verbs.

use crate::error::{StepError, WorkflowError};
use crate::run::RunShared;
use crate::run_core::Begun;
use cairn_journal::{Event, RetryPolicy, StepKind, StepPath, StepStatus, Timestamp};
use cairn_store::{RunId, SuspendReason};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// The handle a workflow body uses for everything durable: steps, sleeps, waits, scopes.
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
    shared: Arc<RunShared>,
    scope: StepPath,
    /// Fires when this context's step code must stop: the run's stop, or a lost race.
    cancel: CancellationToken,
    /// Within a branch or an item: its steps' appends go out with others of the run, so they
    /// are sent to be committed together ([`cairn_store::Append::batched`]).
    batched: bool,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").field("run", &self.shared.id).field("scope", &self.scope).finish()
    }
}

/// Which signals a wait accepts besides the name: all, or those whose payload contains a JSON value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventFilter(Option<serde_json::Value>);

impl EventFilter {
    /// Any payload.
    pub fn any() -> Self {
        Self(None)
    }

    /// Payloads that contain `value` (JSON containment, as PostgreSQL's `@>`).
    pub fn matching(value: serde_json::Value) -> Self {
        Self(Some(value))
    }
}

type BranchFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, WorkflowError>> + Send + 'a>>;

/// One branch of a [`Ctx::join`], made by [`Ctx::branch`].
#[must_use = "a branch does nothing until joined"]
pub struct Branch<'a, T> {
    head: BranchHead,
    future: Result<BranchFuture<'a, T>, WorkflowError>,
}

/// What a join or a race knows of a branch besides its future.
struct BranchHead {
    name: String,
    /// Its scope (`name` under the context that made it).
    scope: StepPath,
    /// The branch's own token (a child of its parent's), fired when it loses a race.
    cancel: CancellationToken,
}

/// What a race journals: the branch that won.
#[derive(Serialize, serde::Deserialize)]
struct RaceWon {
    winner: String,
}

fn decode<T: DeserializeOwned>(path: &StepPath, raw: &str) -> Result<T, WorkflowError> {
    serde_json::from_str(raw).map_err(|e| WorkflowError::Payload { path: path.to_string(), message: e.to_string() })
}

impl Ctx {
    pub(crate) fn new(shared: Arc<RunShared>) -> Self {
        // The run's own token: only branches' tokens (its children) are ever fired on their own.
        let cancel = shared.stop.clone();
        Self { shared, scope: StepPath::root(), cancel, batched: false }
    }

    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.shared.id
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
        self.cancel.child_token()
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
    /// assert_eq!(engine.client().get(&"meter~2".into()).await?.continued_from, Some("meter~1".into()));
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
        let n = self.shared.next_helper(&self.scope, kind);
        self.step(&format!("~{kind}[{n}]"), move || {
            let value = make();
            async move { Ok::<_, StepError>(value) }
        })
        .await
    }

    /// A branch named `name` for [`join`](Ctx::join) or [`race`](Ctx::race): `body` gets a
    /// context scoped to `name/`, so its steps are numbered apart from every other branch's and
    /// replay whatever order the branches' steps finished in.
    pub fn branch<'a, T, F, Fut>(&self, name: &str, body: F) -> Branch<'a, T>
    where
        F: FnOnce(Ctx) -> Fut,
        Fut: Future<Output = Result<T, WorkflowError>> + Send + 'a,
    {
        let cancel = self.cancel.child_token();
        let (scope, future) = match self.scope(name) {
            Ok(ctx) => {
                let scope = ctx.scope.clone();
                (scope, Ok(Box::pin(body(Ctx { cancel: cancel.clone(), batched: true, ..ctx })) as BranchFuture<'a, T>))
            }
            Err(error) => (StepPath::root(), Err(error)),
        };
        Branch { head: BranchHead { name: name.to_owned(), scope, cancel }, future }
    }

    /// Checks `branches` (each scope once) and splits them into heads and futures.
    fn unzip_branches<'a, T>(
        branches: Vec<Branch<'a, T>>,
    ) -> Result<(Vec<BranchHead>, Vec<BranchFuture<'a, T>>), WorkflowError> {
        let mut heads: Vec<BranchHead> = Vec::with_capacity(branches.len());
        let mut futures = Vec::with_capacity(branches.len());
        for Branch { head, future } in branches {
            if heads.iter().any(|h| h.scope == head.scope) {
                return Err(WorkflowError::DuplicatePath(head.scope));
            }
            futures.push(future?);
            heads.push(head);
        }
        Ok((heads, futures))
    }

    /// Runs `branches` at once and waits for every one. Their outputs come back in the order the
    /// branches were given; if any failed, the error names each failed branch with its error
    /// ([`WorkflowError::BranchesFailed`], the others having run to their end). A run stopped
    /// meanwhile (cancelled, paused, shutting down) stops them all. Two branches may not share a
    /// name.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    ///
    /// async fn checkout(ctx: Ctx, order: u64) -> Result<Vec<String>, WorkflowError> {
    ///     ctx.join(vec![
    ///         ctx.branch("bill", |ctx| async move {
    ///             let amount = ctx.step("price", || async move { Ok::<_, StepError>(order * 10) }).await?;
    ///             ctx.step("charge", || async move { Ok::<_, StepError>(format!("charged {amount}")) }).await
    ///         }),
    ///         ctx.branch("ship", |ctx| async move {
    ///             ctx.step("label", || async { Ok::<_, StepError>("labelled".to_owned()) }).await
    ///         }),
    ///     ])
    ///     .await
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("checkout", 1, checkout).start().await?;
    /// let done: Vec<String> = engine.client().start("checkout", &4u64).await?.result().await?;
    /// assert_eq!(done, ["charged 40", "labelled"]);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn join<T>(&self, branches: Vec<Branch<'_, T>>) -> Result<Vec<T>, WorkflowError> {
        let (heads, futures) = Self::unzip_branches(branches)?;
        let results = futures::future::join_all(futures).await;
        let (mut values, mut failures) = (Vec::with_capacity(results.len()), Vec::new());
        for (head, result) in heads.into_iter().zip(results) {
            match result {
                Ok(value) => values.push(value),
                Err(stopped @ WorkflowError::Interrupted(_)) => return Err(stopped),
                Err(error) => failures.push((head.name, error.to_string())),
            }
        }
        if failures.is_empty() { Ok(values) } else { Err(WorkflowError::BranchesFailed { failures }) }
    }

    /// Runs `branches` at once until the first finishes, which wins: its output (or error) is
    /// the race's, with its name. The losers' cancellation tokens fire and they are dropped: a
    /// result they had not journaled is discarded. The winner is journaled as the step `name`
    /// (`{"winner": "…"}`), so a replay runs the same winner again (its steps replaying from the
    /// journal) and none of the losers, however the timings come out. A race needs at least one
    /// branch, and two branches may not share a name.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    /// use std::time::Duration;
    ///
    /// async fn quote(ctx: Ctx, (): ()) -> Result<String, WorkflowError> {
    ///     let (winner, price) = ctx
    ///         .race("quote", vec![
    ///             ctx.branch("cache", |ctx| async move {
    ///                 ctx.step("read", || async { Ok::<_, StepError>(42u32) }).await
    ///             }),
    ///             ctx.branch("supplier", |ctx| async move {
    ///                 ctx.sleep("slow-api", Duration::from_secs(30)).await?;
    ///                 Ok(40)
    ///             }),
    ///         ])
    ///         .await?;
    ///     Ok(format!("{price} from {winner}"))
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("quote", 1, quote).start().await?;
    /// let text: String = engine.client().start("quote", &()).await?.result().await?;
    /// assert_eq!(text, "42 from cache");
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn race<T>(&self, name: &str, branches: Vec<Branch<'_, T>>) -> Result<(String, T), WorkflowError> {
        let (path, Begun { ordinal, record }) = self.begin(name, StepKind::Step)?;
        let (heads, mut futures) = Self::unzip_branches(branches)?;
        if futures.is_empty() {
            return Err(WorkflowError::failed(format!("race `{path}` has no branches")));
        }
        let journaled = match record.map(|r| r.status) {
            Some(StepStatus::Completed { output, .. }) => Some(decode::<RaceWon>(&path, output.get())?.winner),
            _ => None,
        };
        let winner = match journaled {
            Some(winner) => match heads.iter().position(|h| h.name == winner) {
                Some(index) => index,
                None => {
                    return Err(self
                        .shared
                        .diverged(cairn_journal::NonDeterminism::RaceWinnerMissing { path, winner }));
                }
            },
            None => {
                let (result, index, _) = futures::future::select_all(futures.iter_mut()).await;
                if let Err(stopped @ WorkflowError::Interrupted(_)) = result {
                    return Err(stopped);
                }
                let output = self.shared.encode(path.as_str(), &RaceWon { winner: heads[index].name.clone() })?;
                let won = Event::StepCompleted { path, ordinal, attempt: 1, output, started_at: None };
                self.lose(&heads, index);
                drop(futures);
                self.shared.append(vec![won], None).await?;
                return result.map(|value| (heads[index].name.clone(), value));
            }
        };
        self.lose(&heads, winner);
        let future = futures.swap_remove(winner);
        drop(futures);
        let value = future.await?;
        Ok((heads[winner].name.clone(), value))
    }

    /// Fires the tokens of every branch but `winner` and marks their scopes as never to be
    /// asked for again.
    fn lose(&self, heads: &[BranchHead], winner: usize) {
        for (i, head) in heads.iter().enumerate() {
            if i != winner {
                head.cancel.cancel();
                self.shared.skip_within(&head.scope);
            }
        }
    }

    /// Runs `body` once per item, with at most `concurrency` items in flight (at least one), each
    /// in its own scope `name[i]` (`i` the item's index), and returns every item's result in the
    /// order the items were given. A failed item does not stop the others; a run stopped
    /// meanwhile (cancelled, paused, shutting down) stops them all and is the error. On replay
    /// the items the journal holds as done return at once, without running their steps again.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    ///
    /// async fn resize(ctx: Ctx, images: Vec<String>) -> Result<usize, WorkflowError> {
    ///     let results = ctx
    ///         .each("resize", images, 8, |ctx, image| async move {
    ///             ctx.step("thumbnail", || {
    ///                 let image = image.clone();
    ///                 async move { Ok::<_, StepError>(format!("{image}.thumb")) }
    ///             })
    ///             .await
    ///         })
    ///         .await?;
    ///     Ok(results.iter().filter(|r| r.is_ok()).count())
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("resize", 1, resize).start().await?;
    /// let images = vec!["a.png".to_owned(), "b.png".to_owned()];
    /// let done: usize = engine.client().start("resize", &images).await?.result().await?;
    /// assert_eq!(done, 2);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn each<I, R, F, Fut>(
        &self,
        name: &str,
        items: I,
        concurrency: usize,
        mut body: F,
    ) -> Result<Vec<Result<R, WorkflowError>>, WorkflowError>
    where
        I: IntoIterator,
        F: FnMut(Ctx, I::Item) -> Fut,
        Fut: Future<Output = Result<R, WorkflowError>>,
    {
        use futures::StreamExt as _;
        use futures::future::Either;
        let item_futures = items.into_iter().zip(0u64..).map(|(item, index)| {
            let result = match self.scope_indexed(name, index) {
                Ok(ctx) => Either::Left(body(Ctx { batched: true, ..ctx }, item)),
                Err(error) => Either::Right(std::future::ready(Err(error))),
            };
            async move { (index, result.await) }
        });
        // Unordered, so one slow item holds one slot only, not the line behind it.
        let mut results = futures::stream::iter(item_futures).buffer_unordered(concurrency.max(1));
        let mut outputs = Vec::new();
        while let Some((index, result)) = results.next().await {
            if let Err(stopped @ WorkflowError::Interrupted(_)) = result {
                return Err(stopped);
            }
            outputs.push((index, result));
        }
        outputs.sort_unstable_by_key(|(index, _)| *index);
        Ok(outputs.into_iter().map(|(_, result)| result).collect())
    }

    fn begin(&self, name: &str, kind: StepKind) -> Result<(StepPath, Begun), WorkflowError> {
        let path = self.scope.child(name)?;
        let begun = self.shared.begin(&path, kind)?;
        Ok((path, begun))
    }

    /// A durable step: runs `body` and journals its result; on replay returns the journaled
    /// result without calling `body`.
    ///
    /// The step's place in the run is taken when `step` is called, so steps created together
    /// (e.g. collected for `join_all`) replay correctly whatever order they finish in. Chain
    /// [`retry`](Step::retry) and [`timeout`](Step::timeout) before awaiting.
    pub fn step<'a, T, F, Fut, E>(&self, name: &str, body: F) -> Step<'a, T, F>
    where
        T: Serialize + DeserializeOwned + Send + 'a,
        F: FnMut() -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, E>> + Send + 'a,
        E: Into<StepError> + 'a,
    {
        Step {
            ctx: self.clone(),
            begun: Some(self.begin(name, StepKind::Step)),
            body: Some(Box::new(body)),
            policy: self.shared.step_defaults().retry.clone().unwrap_or_default(),
            timeout: self.shared.step_defaults().timeout,
            running: None,
            _output: PhantomData,
        }
    }

    /// A durable sleep: the deadline is journaled; a long sleep holds no memory or task.
    pub fn sleep(
        &self,
        name: &str,
        duration: Duration,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send + 'static {
        let begun = self.begin(name, StepKind::Sleep);
        let deadline = self.shared.now() + duration;
        self.sleep_inner(begun, deadline)
    }

    /// A durable sleep until an instant.
    pub fn sleep_until(
        &self,
        name: &str,
        deadline: Timestamp,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send + 'static {
        let begun = self.begin(name, StepKind::Sleep);
        self.sleep_inner(begun, deadline)
    }

    fn sleep_inner(
        &self,
        begun: Result<(StepPath, Begun), WorkflowError>,
        deadline: Timestamp,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        async move {
            let (path, Begun { ordinal, record }) = begun?;
            let wake_at = match record.map(|r| r.status) {
                Some(StepStatus::Slept) => return Ok(()),
                Some(StepStatus::Sleeping { wake_at }) => wake_at,
                _ => {
                    shared
                        .append(vec![Event::TimerStarted { path: path.clone(), ordinal, wake_at: deadline }], None)
                        .await?;
                    deadline
                }
            };
            shared.park(Some(wake_at), SuspendReason::Sleeping, None).await?;
            shared.append(vec![Event::TimerFired { path }], None).await
        }
    }

    /// Waits for a signal named `name` whose payload matches `filter`, consuming the oldest such
    /// signal exactly once (signals sent before the wait are buffered). Returns `None` when
    /// `timeout` passes first.
    pub fn wait_for_event<T: DeserializeOwned + Send + 'static>(
        &self,
        name: &str,
        filter: EventFilter,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, WorkflowError>> + Send + 'static {
        self.wait_for_event_as(name, name, filter, timeout)
    }

    /// [`wait_for_event`](Ctx::wait_for_event) for signal `event` as the step named `step`, so
    /// one scope can wait for the same signal more than once.
    ///
    /// ```no_run
    /// # use cairn::prelude::*;
    /// # use std::time::Duration;
    /// async fn two_approvals(ctx: Ctx, (): ()) -> Result<(String, String), WorkflowError> {
    ///     let day = Duration::from_secs(86_400);
    ///     let first = ctx.wait_for_event_as("first-approval", "approve", EventFilter::any(), day).await?;
    ///     let second = ctx.wait_for_event_as("second-approval", "approve", EventFilter::any(), day).await?;
    ///     Ok((first.unwrap_or_default(), second.unwrap_or_default()))
    /// }
    /// ```
    pub fn wait_for_event_as<T: DeserializeOwned + Send + 'static>(
        &self,
        step: &str,
        event: &str,
        filter: EventFilter,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, WorkflowError>> + Send + 'static {
        let begun = self.begin(step, StepKind::Wait);
        let deadline = self.shared.now() + timeout;
        let shared = Arc::clone(&self.shared);
        let event = event.to_owned();
        async move {
            let (path, Begun { ordinal, record }) = begun?;
            let (event, filter, deadline) = match record.map(|r| r.status) {
                Some(StepStatus::Received { payload, .. }) => {
                    return payload.map(|p| decode(&path, p.get())).transpose();
                }
                Some(StepStatus::Waiting { event, filter, deadline }) => (event, filter, deadline),
                _ => {
                    let EventFilter(filter) = filter;
                    shared
                        .append(
                            vec![Event::WaitStarted {
                                path: path.clone(),
                                ordinal,
                                event: event.clone(),
                                filter: filter.clone(),
                                deadline: Some(deadline),
                            }],
                            None,
                        )
                        .await?;
                    (event, filter, Some(deadline))
                }
            };
            loop {
                // Taken before looking, so a signal arriving after the look wakes the park below.
                let changes = shared.watch_signals();
                let just_loaded = shared.load_signals().await?;
                let mut signal = shared.take_signal(&event, filter.as_ref());
                if signal.is_none() && !just_loaded {
                    // Not among the signals known here: another process may have sent it.
                    shared.refresh_signals().await?;
                    signal = shared.take_signal(&event, filter.as_ref());
                }
                if let Some(signal) = signal {
                    crate::telemetry::signal(&shared.workflow, &signal.name);
                    let span = crate::telemetry::signal_span(&signal.name, signal.id.0);
                    let value = decode(&path, signal.payload.get());
                    shared
                        .append(
                            vec![Event::WaitCompleted { path, signal: Some(signal.id), payload: Some(signal.payload) }],
                            Some(signal.id),
                        )
                        .instrument(span)
                        .await?;
                    return value.map(Some);
                }
                if deadline.is_some_and(|d| d <= shared.now()) {
                    shared.append(vec![Event::WaitCompleted { path, signal: None, payload: None }], None).await?;
                    return Ok(None);
                }
                shared.park(deadline, SuspendReason::Waiting, Some(changes)).await?;
            }
        }
    }
}

type Running<'a, T> = Pin<Box<dyn Future<Output = Result<T, WorkflowError>> + Send + 'a>>;

/// A durable step being configured; await it to run it. Made by [`Ctx::step`].
#[must_use = "a step does nothing until awaited"]
pub struct Step<'a, T, F> {
    ctx: Ctx,
    begun: Option<Result<(StepPath, Begun), WorkflowError>>,
    body: Option<Box<F>>,
    policy: RetryPolicy,
    timeout: Option<Duration>,
    running: Option<Running<'a, T>>,
    _output: PhantomData<fn() -> T>,
}

impl<T, F> Step<'_, T, F> {
    /// The context the step was made in and its name (for a saga's compensation next to it).
    /// `None` when the step cannot run (awaiting it returns why).
    pub(crate) fn place(&self) -> Option<(Ctx, String)> {
        match &self.begun {
            Some(Ok((path, _))) => Some((self.ctx.clone(), path.name().to_owned())),
            _ => None,
        }
    }

    /// How failed attempts are retried (default: [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Fails an attempt (retryably) that runs longer than `limit`.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }
}

impl<'a, T, F, Fut, E> Future for Step<'a, T, F>
where
    T: Serialize + DeserializeOwned + Send + 'a,
    F: FnMut() -> Fut + Send + 'a,
    Fut: Future<Output = Result<T, E>> + Send + 'a,
    E: Into<StepError> + 'a,
{
    type Output = Result<T, WorkflowError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.running.is_none() {
            let begun = this.begun.take().unwrap_or_else(|| Err(WorkflowError::failed("step polled after completion")));
            let (path, Begun { ordinal, record }) = match begun {
                Ok(begun) => begun,
                Err(error) => return Poll::Ready(Err(error)),
            };
            // A step the journal holds as settled (replay) returns at once, without the future
            // that runs, retries and journals a body; one backing off resumes at its next attempt.
            let retry = match record.map(|r| r.status) {
                Some(StepStatus::Completed { output, .. }) => return Poll::Ready(decode(&path, output.get())),
                Some(StepStatus::Failed { attempts, error }) => {
                    return Poll::Ready(Err(WorkflowError::StepFailed { path, attempts, message: error }));
                }
                Some(StepStatus::Retrying { failed_attempts, retry_at, .. }) => Some((failed_attempts + 1, retry_at)),
                _ => None,
            };
            let body = this.body.take();
            let ctx = this.ctx.clone();
            let policy = this.policy.clone();
            let timeout = this.timeout;
            this.running = Some(Box::pin(run_step(ctx, (path, ordinal, retry), body, policy, timeout)));
        }
        match this.running.as_mut() {
            Some(running) => running.as_mut().poll(cx),
            None => Poll::Pending,
        }
    }
}

/// Runs a step's body until an attempt succeeds or the step fails for good, journaling each
/// attempt. `retry` is the attempt to resume at and when, for a step the journal holds as backing
/// off; without it, attempt 1 runs now.
async fn run_step<T, F, Fut, E>(
    ctx: Ctx,
    (path, ordinal, retry): (StepPath, u32, Option<(u32, Timestamp)>),
    body: Option<Box<F>>,
    policy: RetryPolicy,
    timeout: Option<Duration>,
) -> Result<T, WorkflowError>
where
    T: Serialize + DeserializeOwned,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Into<StepError>,
{
    let shared = &ctx.shared;
    let mut attempt = 1;
    if let Some((next, retry_at)) = retry {
        attempt = next;
        shared.park(Some(retry_at), SuspendReason::BackingOff, None).await?;
    }
    let mut body = body.ok_or_else(|| WorkflowError::failed("step body missing"))?;
    loop {
        shared.check()?;
        // Each attempt waits for its turn under a rate limit on its name, before it counts as
        // work in flight (so the run can suspend while it waits); it starts when granted.
        let started_at = if shared.rate_limited() { shared.turn(Some(&path)).await? } else { shared.now() };
        let in_flight = shared.start_work();
        let deadline = timeout.map(|t| started_at + t);
        // Ends when dropped: after the attempt's result is journaled.
        let span = crate::telemetry::step_span(&path, attempt);
        let attempt_result: Result<T, StepError> = tokio::select! {
            biased;
            () = shared.stop.cancelled() => return Err(shared.interrupted()),
            result = attempt_of(&mut body).instrument(span.clone()) => result,
            () = async {
                match deadline {
                    Some(at) => shared.clock().sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => Err(StepError::retryable(format!("timed out after {:?}", timeout.unwrap_or_default()))),
        };
        match attempt_result {
            Ok(value) => {
                let output = shared.encode(path.as_str(), &value)?;
                let finished = shared.now();
                crate::telemetry::step_attempt(&shared.workflow, &path, started_at.until(finished), false);
                span.record("status", "completed");
                let completed =
                    vec![Event::StepCompleted { path, ordinal, attempt, output, started_at: Some(started_at) }];
                shared.append_at(completed, None, finished, ctx.batched).instrument(span).await?;
                drop(in_flight);
                return Ok(value);
            }
            Err(error) => {
                let seed = RetryPolicy::seed((shared.id.as_str(), path.as_str(), attempt));
                let delay = if error.is_retryable() { policy.delay_after(attempt, seed) } else { None };
                let retry_at = delay.map(|d| shared.now() + d);
                let lasted = started_at.until(shared.now());
                crate::telemetry::step_attempt(&shared.workflow, &path, lasted, retry_at.is_some());
                span.record("status", if retry_at.is_some() { "retrying" } else { "failed" });
                shared
                    .append(
                        vec![Event::StepFailed {
                            path: path.clone(),
                            ordinal,
                            attempt,
                            error: error.message().to_owned(),
                            retry_at,
                            started_at: Some(started_at),
                        }],
                        None,
                    )
                    .instrument(span)
                    .await?;
                drop(in_flight);
                match retry_at {
                    None => {
                        return Err(WorkflowError::StepFailed {
                            path,
                            attempts: attempt,
                            message: error.message().into(),
                        });
                    }
                    Some(at) => {
                        shared.park(Some(at), SuspendReason::BackingOff, None).await?;
                        attempt += 1;
                    }
                }
            }
        }
    }
}

/// One attempt of a step body; a panic in it is a failed (retryable) attempt.
async fn attempt_of<T, F, Fut, E>(body: &mut F) -> Result<T, StepError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Into<StepError>,
{
    let panicked = |message: String| StepError::retryable(format!("[CAIRN-E0107] the step body panicked: {message}"));
    match crate::panic::catch_call(body) {
        Ok(attempt) => match crate::panic::caught(attempt).await {
            Ok(result) => result.map_err(Into::into),
            Err(message) => Err(panicked(message)),
        },
        Err(message) => Err(panicked(message)),
    }
}
