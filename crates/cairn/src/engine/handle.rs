//! A running engine: its worker and a client for its store.

use super::local::{Local, lock};
use super::runs::settle;
use crate::attach::Attachment as _;
use crate::client::Client;
use crate::run::RunShared;
use cairn_store::{ForgetWorkers, RunId, RunUpdate};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running worker plus a [`Client`] for its store ([`Engine::client`]).
///
/// ```
/// use cairn::prelude::*;
/// use cairn::MemoryStore;
///
/// async fn double(ctx: Ctx, n: u64) -> Result<u64, WorkflowError> {
///     ctx.step("double", || async move { Ok::<_, StepError>(n * 2) }).await
/// }
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let engine = Engine::builder().store(MemoryStore::new()).register("double", 1, double).start().await?;
/// let run = engine.client().start("double", &21u64).await?;
/// let answer: u64 = run.result().await?;
/// assert_eq!(answer, 42);
/// engine.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Engine {
    pub(super) client: Client,
    pub(super) local: Arc<Local>,
    /// The claim and heartbeat loops, taken by the shutdown.
    pub(super) loops: Mutex<Option<(tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>)>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("worker_id", &self.local.config.worker_id).finish()
    }
}

impl Engine {
    /// A client for this engine's store that knows its workflows.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// This worker's lease identity.
    pub fn worker_id(&self) -> &str {
        &self.local.config.worker_id
    }

    /// Shuts down gracefully within the grace period set with
    /// [`EngineBuilder::shutdown_grace`](crate::engine::EngineBuilder::shutdown_grace) (default 30 s); see [`Engine::shutdown_within`].
    pub async fn shutdown(&self) {
        self.shutdown_within(self.local.config.shutdown_grace).await;
    }

    /// Stops claiming, stops every run at its next step boundary (steps in flight may finish and
    /// commit for up to `grace`; past it their cancellation tokens fire and their results are
    /// discarded), and hands every lease back, including those of runs still loading their
    /// journals, so another worker (or the next start) resumes them at once rather than after
    /// the lease expires. Runs lose nothing: the journal has every committed step.
    ///
    /// ```
    /// # use cairn::prelude::*;
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(cairn::MemoryStore::new()).start().await?;
    /// engine.shutdown_within(std::time::Duration::from_secs(5)).await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn shutdown_within(&self, grace: Duration) {
        *lock(&self.local.drain_for) = grace;
        self.local.draining.cancel();
        let loops = lock(&self.loops).take();
        if let Some((claimer, heartbeat)) = loops {
            // The claim loop returns once its runs have stopped (or were aborted after the grace).
            let _ = claimer.await;
            self.local.shutdown.cancel();
            let _ = heartbeat.await;
            let me = ForgetWorkers { ids: vec![self.local.config.worker_id.clone()], dead_before: None };
            if let Err(error) = self.local.store.forget_workers(&me).await {
                tracing::warn!("could not remove this worker's record: {error}");
            }
        }
        // Runs aborted mid-way: hand their leases back here.
        let active: Vec<Arc<RunShared>> = lock(&self.local.active).drain().map(|(_, run)| run).collect();
        for run in active {
            if let Err(error) = run.release().await {
                tracing::warn!("run {}: could not hand its lease back: {error}", run.id);
            }
            self.local.notify_watchers(&run.id, None);
        }
        let loading: Vec<(RunId, (u64, u64))> = lock(&self.local.loading).drain().collect();
        for (run_id, (epoch, after_seq)) in loading {
            settle(&self.local, &run_id, epoch, after_seq, RunUpdate::Release, false).await;
            self.local.notify_watchers(&run_id, None);
        }
    }
}
