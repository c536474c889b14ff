//! Durable values: named values a run sets as it goes, journaled and readable from outside.

use crate::ctx::Ctx;
use crate::error::WorkflowError;
use crate::run::RunShared;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::sync::Arc;

/// Longest name of a durable value, in bytes.
const MAX_NAME: usize = 200;

/// A durable value of a run, made by [`Ctx::var`]. Every [`set`](Var::set) is journaled (an
/// event `var_set`), so a replay sees the same values, and the latest is readable from outside
/// the run ([`Client::vars`](crate::client::Client::vars), `cairn runs show`) even while it sleeps.
///
/// A replay runs the body's sets again and journals only those past what the journal holds, so
/// set each value from one branch at a time (as with any step, in the same order every run).
pub struct Var<T> {
    shared: Arc<RunShared>,
    name: String,
    _value: PhantomData<fn() -> T>,
}

impl<T> Clone for Var<T> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared), name: self.name.clone(), _value: PhantomData }
    }
}

impl<T> std::fmt::Debug for Var<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Var").field("run", &self.shared.id).field("name", &self.name).finish()
    }
}

impl<T: Serialize + DeserializeOwned> Var<T> {
    /// The value as the body last set it; `None` before the first set.
    pub fn get(&self) -> Result<Option<T>, WorkflowError> {
        let payload = |message: String| WorkflowError::Payload { path: format!("var {}", self.name), message };
        let core = self.shared.lock();
        core.var(&self.name).map(|raw| serde_json::from_str(raw.get()).map_err(|e| payload(e.to_string()))).transpose()
    }

    /// Sets the value, journaling it.
    pub async fn set(&self, value: &T) -> Result<(), WorkflowError> {
        let raw = self.shared.encode(&format!("var {}", self.name), value)?;
        self.shared.set_var(&self.name, raw).await
    }

    /// Sets the value to what `change` makes of the current one, and returns it.
    pub async fn update(&self, change: impl FnOnce(Option<T>) -> T) -> Result<T, WorkflowError> {
        let value = change(self.get()?);
        self.set(&value).await?;
        Ok(value)
    }
}

impl Ctx {
    /// The run's durable value `name` (at most 200 bytes; one namespace per run, whatever the
    /// scope), holding a `T`.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::MemoryStore;
    ///
    /// async fn import(ctx: Ctx, files: u32) -> Result<u32, WorkflowError> {
    ///     let done = ctx.var::<u32>("files-done")?;
    ///     for i in 0..files {
    ///         ctx.step(&format!("file[{i}]"), || async { Ok::<_, StepError>(()) }).await?;
    ///         done.update(|n| n.unwrap_or(0) + 1).await?;
    ///     }
    ///     Ok(done.get()?.unwrap_or(0))
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("import", 1, import).start().await?;
    /// let run = engine.client().start("import", &3u32).await?;
    /// assert_eq!(run.result::<u32>().await?, 3);
    /// assert_eq!(engine.client().vars(run.id()).await?["files-done"], 3);
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn var<T>(&self, name: &str) -> Result<Var<T>, WorkflowError> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(WorkflowError::failed(format!(
                "a durable value's name must be 1 to {MAX_NAME} bytes, not {}",
                name.len()
            )));
        }
        Ok(Var { shared: Arc::clone(self.shared()), name: name.to_owned(), _value: PhantomData })
    }
}
