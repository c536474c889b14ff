//! Sagas: steps that each register how to undo them, undone in reverse when the body fails.

use crate::ctx::Ctx;
use crate::ctx::Step;
use crate::error::{StepError, WorkflowError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

type Undo = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = Result<(), WorkflowError>> + Send>> + Send>;

/// A registered compensation: the step's name and how to undo it.
type Slot = Option<(String, Undo)>;

/// The handle a [`Ctx::saga`] body registers its compensations with (cheap to clone).
#[derive(Clone, Default)]
pub struct Saga {
    /// One slot per [`Saga::step`] call, in call order; filled when the step completed.
    undo: Arc<Mutex<Vec<Slot>>>,
}

impl std::fmt::Debug for Saga {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Saga").field("steps", &self.slots().len()).finish()
    }
}

impl Saga {
    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.undo.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `step` (made by [`Ctx::step`], with any retry policy or timeout) and, once it has
    /// completed, registers `undo` as its compensation: should the saga's body fail, `undo` gets
    /// the step's output and runs as the step `undo-<name>` next to it (journaled and retried as
    /// any step). Compensations run in the reverse order of the `step` calls.
    pub async fn step<'a, T, F, Fut, E, C, CFut, CE>(
        &self,
        step: Step<'a, T, F>,
        mut undo: C,
    ) -> Result<T, WorkflowError>
    where
        T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
        F: FnMut() -> Fut + Send + 'a,
        Fut: Future<Output = Result<T, E>> + Send + 'a,
        E: Into<StepError> + 'a,
        C: FnMut(T) -> CFut + Send + 'static,
        CFut: Future<Output = Result<(), CE>> + Send + 'static,
        CE: Into<StepError> + 'static,
    {
        let place = step.place();
        let slot = {
            let mut slots = self.slots();
            slots.push(None);
            slots.len() - 1
        };
        let value = step.await?;
        let (ctx, name) = place.ok_or_else(|| WorkflowError::failed("a saga step ran without its place"))?;
        let (kept, undo_name) = (value.clone(), format!("undo-{name}"));
        let compensation: Undo =
            Box::new(move || Box::pin(async move { ctx.step(&undo_name, move || undo(kept.clone())).await }));
        if let Some(entry) = self.slots().get_mut(slot) {
            *entry = Some((name, compensation));
        }
        Ok(value)
    }

    /// Runs every registered compensation, last first, each to its end; the names undone and
    /// those whose compensation failed, with the error. A run stopped meanwhile stops here.
    async fn compensate(&self) -> Result<(Vec<String>, Vec<(String, String)>), WorkflowError> {
        let compensations: Vec<(String, Undo)> = self.slots().drain(..).flatten().collect();
        let (mut undone, mut failures) = (Vec::new(), Vec::new());
        for (name, undo) in compensations.into_iter().rev() {
            match undo().await {
                Ok(()) => undone.push(name),
                Err(stopped @ WorkflowError::Interrupted(_)) => return Err(stopped),
                Err(error) => failures.push((name, error.to_string())),
            }
        }
        Ok((undone, failures))
    }
}

impl Ctx {
    /// Runs `body` (given a clone of this context and the saga) as a saga: each [`Saga::step`]
    /// registers a compensation when it completes, and if `body` fails, the compensations run in reverse order, each a journaled step
    /// (`undo-<name>`), so a crash in the middle of compensating resumes where it stopped. The
    /// error is then [`WorkflowError::Compensated`] (every compensation ran) or
    /// [`WorkflowError::CompensationFailed`] (some failed for good; the others still ran). A
    /// run stopped meanwhile (cancelled, paused, shutting down) compensates nothing.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    ///
    /// async fn trip(ctx: Ctx, card_ok: bool) -> Result<String, WorkflowError> {
    ///     let booked = ctx
    ///         .saga(|ctx, saga| async move {
    ///             let hotel = saga
    ///                 .step(ctx.step("hotel", || async { Ok::<_, StepError>("H-7".to_owned()) }), |hotel| async move {
    ///                     println!("cancelling {hotel}");
    ///                     Ok::<_, StepError>(())
    ///                 })
    ///                 .await?;
    ///             ctx.step("pay", || async move {
    ///                 if card_ok { Ok(()) } else { Err(StepError::terminal("card declined")) }
    ///             })
    ///             .await?;
    ///             Ok(hotel)
    ///         })
    ///         .await;
    ///     match booked {
    ///         Err(WorkflowError::Compensated { error, undone }) => Ok(format!("undid {undone:?} after: {error}")),
    ///         other => other,
    ///     }
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("trip", 1, trip).start().await?;
    /// assert_eq!(engine.client().start("trip", &true).await?.result::<String>().await?, "H-7");
    /// let undone: String = engine.client().start("trip", &false).await?.result().await?;
    /// assert!(undone.starts_with(r#"undid ["hotel"] after: step `pay` failed"#), "{undone}");
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn saga<T, F, Fut>(&self, body: F) -> Result<T, WorkflowError>
    where
        F: FnOnce(Ctx, Saga) -> Fut,
        Fut: Future<Output = Result<T, WorkflowError>>,
    {
        let saga = Saga::default();
        match body(self.clone(), saga.clone()).await {
            Ok(value) => Ok(value),
            Err(stopped @ WorkflowError::Interrupted(_)) => Err(stopped),
            Err(error) => {
                let (undone, failures) = saga.compensate().await?;
                let error = error.to_string();
                if failures.is_empty() {
                    Err(WorkflowError::Compensated { error, undone })
                } else {
                    Err(WorkflowError::CompensationFailed { error, failures })
                }
            }
        }
    }
}
