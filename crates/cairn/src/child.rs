//! Child workflows: a run starts another and, unless detached, waits for its result.

use crate::ctx::{Ctx, EventFilter};
use crate::error::{ClientError, StepError, WorkflowError};
use crate::run_core::{AWAITED, CHILD_ENDED, DETACHED};
use cairn_store::RunId;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

/// The longest a parent waits before looking at its child again, should the signal of its end
/// have been lost (a worker killed between the two).
const LONGEST_LOOK: Duration = Duration::from_secs(3600);

/// A child run being set up; await it to start the child and wait for its output, or call
/// [`detached`](Child::detached). Made by [`Ctx::child`].
#[must_use = "a child does nothing until awaited"]
pub struct Child<O> {
    ctx: Ctx,
    workflow: String,
    input: Result<Box<RawValue>, WorkflowError>,
    _output: PhantomData<fn() -> O>,
}

/// What the parent journals each time it looks at its child.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Seen {
    Running,
    Completed(Box<RawValue>),
    Ended { status: String, error: Option<String> },
}

/// The id of the child started at `scope` of run `parent`: derived from both, so a parent that
/// crashed between starting it and journaling that finds the same run again.
fn child_id(parent: &RunId, scope: &cairn_journal::StepPath) -> RunId {
    let id = format!("{parent}:{}", scope.as_str().replace('/', ":"));
    if id.len() <= 200 {
        return RunId::new(id);
    }
    let hash = cairn_journal::RetryPolicy::seed((parent.as_str(), scope.as_str()));
    RunId::new(format!("child-{hash:016x}"))
}

impl Ctx {
    /// A child run of `workflow` with `input`. Await it to start the child and wait for its
    /// output (the parent suspends meanwhile; the child may run on any worker serving its
    /// workflow); [`detached`](Child::detached) starts it without waiting. Each call in a scope
    /// is numbered (`~child[0]`, `~spawn[0]`, …) as steps are, and the child's id is derived from
    /// the parent's and that path, so a crash never starts two. The child's `parent` is this run;
    /// cancelling this run cancels the children it waits for (not detached ones).
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    ///
    /// async fn ship(ctx: Ctx, order: u64) -> Result<String, WorkflowError> {
    ///     ctx.step("label", || async move { Ok::<_, StepError>(format!("TRACK-{order}")) }).await
    /// }
    /// async fn order(ctx: Ctx, order: u64) -> Result<String, WorkflowError> {
    ///     let tracking: String = ctx.child("ship", &order).await?;
    ///     Ok(format!("order {order} shipped as {tracking}"))
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder()
    ///     .store(MemoryStore::new())
    ///     .register("order", 1, order)
    ///     .register("ship", 1, ship)
    ///     .start()
    ///     .await?;
    /// let run = engine.client().start("order", &7u64).await?;
    /// assert_eq!(run.result::<String>().await?, "order 7 shipped as TRACK-7");
    /// assert_eq!(engine.client().children(run.id()).await?.len(), 1);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn child<I: Serialize + ?Sized, O>(&self, workflow: &str, input: &I) -> Child<O> {
        let input = serde_json::value::to_raw_value(input)
            .map_err(|e| WorkflowError::Payload { path: format!("input of child {workflow}"), message: e.to_string() });
        Child { ctx: self.clone(), workflow: workflow.to_owned(), input, _output: PhantomData }
    }
}

impl<O> Child<O> {
    /// Starts the child without waiting for it; its id.
    pub async fn detached(self) -> Result<RunId, WorkflowError> {
        Ok(self.start(DETACHED).await?.1)
    }

    /// Starts the child (once: the step `start` of the scope `kind[n]` journals its id).
    async fn start(self, kind: &'static str) -> Result<(Ctx, RunId), WorkflowError> {
        let n = self.ctx.shared().lock().next_helper(self.ctx.path(), kind);
        let scope = self.ctx.scope_indexed(kind, n)?;
        let parent = self.ctx.run_id().clone();
        let queue = self.ctx.shared().lineage.queue.clone();
        let id = child_id(&parent, scope.path());
        let input = self.input?;
        let (attached, workflow) = (scope.shared().client().clone(), self.workflow);
        let started: RunId = scope
            .step("start", || {
                let (client, input, id, parent, queue) =
                    (attached.clone(), input.clone(), id.clone(), parent.clone(), queue.clone());
                let workflow = workflow.clone();
                async move {
                    match client.start_child(&workflow, input, &id, &parent, &queue).await {
                        Ok(handle) => Ok(handle.id().clone()),
                        Err(error @ ClientError::Store(_)) => Err(StepError::retryable(error.to_string())),
                        Err(error) => Err(StepError::terminal(error.to_string())),
                    }
                }
            })
            .await?;
        Ok((scope, started))
    }
}

impl<O: DeserializeOwned + Send + 'static> IntoFuture for Child<O> {
    type Output = Result<O, WorkflowError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let (scope, id) = self.start(AWAITED).await?;
            let attached = scope.shared().client().clone();
            for look in 0u32.. {
                let seen: Seen = scope
                    .step(&format!("look[{look}]"), || {
                        let (client, id) = (attached.clone(), id.clone());
                        async move {
                            // A child that continued as new goes on as the newest run of its chain.
                            let run = client.newest(&id).await.map_err(|e| StepError::retryable(e.to_string()))?;
                            Ok::<_, StepError>(match run.status {
                                cairn_store::RunStatus::Completed => {
                                    Seen::Completed(run.output.unwrap_or_else(|| RawValue::NULL.to_owned()))
                                }
                                status if status.is_terminal() => {
                                    Seen::Ended { status: status.as_str().to_owned(), error: run.error }
                                }
                                _ => Seen::Running,
                            })
                        }
                    })
                    .await?;
                match seen {
                    Seen::Completed(output) => {
                        return serde_json::from_str(output.get()).map_err(|e| WorkflowError::Payload {
                            path: format!("output of child {id}"),
                            message: e.to_string(),
                        });
                    }
                    Seen::Ended { status, error } => {
                        return Err(WorkflowError::ChildFailed {
                            child: id.to_string(),
                            status,
                            error: error.unwrap_or_default(),
                        });
                    }
                    Seen::Running => {}
                }
                // Woken by the child's end; past the timeout, look again (1 minute, doubling).
                let timeout = Duration::from_secs(60).saturating_mul(1 << look.min(6)).min(LONGEST_LOOK);
                let filter = EventFilter::matching(serde_json::json!({ "child": id.as_str() }));
                let _: Option<serde_json::Value> =
                    scope.wait_for_event_as(&format!("ended[{look}]"), CHILD_ENDED, filter, timeout).await?;
            }
            Err(WorkflowError::failed("unreachable: a child looked at too many times"))
        })
    }
}
