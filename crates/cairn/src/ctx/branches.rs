//! Branches run side by side: [`Ctx::join`], [`Ctx::race`] and [`Ctx::each`].

use super::context::{Ctx, decode};
use crate::error::WorkflowError;
use crate::run_core::Begun;
use cairn_journal::{Event, StepKind, StepPath, StepStatus};
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;
use tokio_util::sync::CancellationToken;

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

impl Ctx {
    /// A branch named `name` for [`join`](Ctx::join) or [`race`](Ctx::race): `body` gets a
    /// context scoped to `name/`, so its steps are numbered apart from every other branch's and
    /// replay whatever order the branches' steps finished in.
    pub fn branch<'a, T, F, Fut>(&self, name: &str, body: F) -> Branch<'a, T>
    where
        F: FnOnce(Ctx) -> Fut,
        Fut: Future<Output = Result<T, WorkflowError>> + Send + 'a,
    {
        let cancel = self.cancel_token().child_token();
        let (scope, future) = match self.scope(name) {
            Ok(ctx) => {
                let scope = ctx.scope.clone();
                (
                    scope,
                    Ok(Box::pin(body(Ctx { cancel: Some(cancel.clone()), batched: true, ..ctx }))
                        as BranchFuture<'a, T>),
                )
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
                self.shared.lock().skip_within(&head.scope);
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
}
