//! Explicit continuations: a workflow defined as named steps, each saying which runs next.

use crate::ctx::Ctx;
use crate::error::{EngineError, StepError, WorkflowError};
use crate::repeat::LoopOptions;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;

/// What a continuation step returns besides the scratchpad: the step to run next, or the run's
/// output.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition<O> {
    /// Run the step of this name next.
    Next(String),
    /// The run is done, with this output.
    Done(O),
}

impl<O> Transition<O> {
    /// Run `step` next.
    pub fn next(step: &str) -> Self {
        Transition::Next(step.to_owned())
    }
}

type Handler<I, S, O> =
    Arc<dyn Fn(I, S) -> Pin<Box<dyn Future<Output = Result<(S, Transition<O>), StepError>> + Send>> + Send + Sync>;

/// A workflow written as named steps instead of one body (as in state machines and the seed
/// flingflow): each step gets the run's input and the scratchpad, and returns the scratchpad
/// (changed as it likes) with a [`Transition`]. Each step runs as a journaled step named after
/// it, inside a durable loop (`flow[i]/<step>`; see [`Ctx::repeat`]), so the run is replayed,
/// listed and inspected like any other and a long chain keeps a short journal. Register what
/// [`workflow`](Continuations::workflow) makes.
///
/// ```
/// use cairn::prelude::*;
/// use cairn::{Continuations, MemoryStore, Transition};
///
/// #[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
/// struct Pad { tries: u32, charged: bool }
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let order = Continuations::<u32, Pad, String>::new("check")
///     .step("check", |amount, pad| async move {
///         let next = if amount > 0 { Transition::next("charge") } else { Transition::Done("nothing to do".into()) };
///         Ok::<_, StepError>((pad, next))
///     })
///     .step("charge", |_, mut pad| async move {
///         pad.tries += 1;
///         pad.charged = true;
///         Ok::<_, StepError>((pad, Transition::next("receipt")))
///     })
///     .step("receipt", |amount, pad| async move {
///         let done = Transition::Done(format!("charged {amount} after {} try", pad.tries));
///         Ok::<_, StepError>((pad, done))
///     })
///     .workflow()?;
/// let engine = Engine::builder().store(MemoryStore::new()).register("order", 1, order).start().await?;
/// let text: String = engine.client().start("order", &30u32).await?.result().await?;
/// assert_eq!(text, "charged 30 after 1 try");
/// engine.shutdown().await;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Continuations<I, S, O> {
    start: String,
    steps: HashMap<String, Handler<I, S, O>>,
    duplicate: Option<String>,
    options: LoopOptions,
}

impl<I, S, O> Continuations<I, S, O>
where
    I: Clone + Send + Sync + 'static,
    S: Serialize + DeserializeOwned + Clone + Default + Send + Sync + 'static,
    O: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// Continuations that begin at the step `start`, with `S::default()` as the scratchpad.
    pub fn new(start: &str) -> Self {
        Self { start: start.to_owned(), steps: HashMap::new(), duplicate: None, options: LoopOptions::default() }
    }

    /// Adds the step `name` (each name once).
    pub fn step<F, Fut, E>(mut self, name: &str, handler: F) -> Self
    where
        F: Fn(I, S) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(S, Transition<O>), E>> + Send + 'static,
        E: Into<StepError> + 'static,
    {
        let handler: Handler<I, S, O> = Arc::new(move |input, pad| {
            let running = handler(input, pad);
            Box::pin(async move { running.await.map_err(Into::into) })
        });
        if self.steps.insert(name.to_owned(), handler).is_some() && self.duplicate.is_none() {
            self.duplicate = Some(name.to_owned());
        }
        self
    }

    /// How the loop that carries the steps checkpoints and trims (default: every step, the last
    /// 10 kept).
    pub fn loop_options(mut self, options: LoopOptions) -> Self {
        self.options = options;
        self
    }

    /// The workflow body to register; refused if a step name is invalid or used twice, or the
    /// start step is missing.
    #[allow(clippy::type_complexity)]
    pub fn workflow(
        self,
    ) -> Result<
        impl Fn(Ctx, I) -> Pin<Box<dyn Future<Output = Result<O, WorkflowError>> + Send>> + Send + Sync + 'static,
        EngineError,
    > {
        let refuse = |why: String| Err(EngineError::InvalidContinuations(why));
        if let Some(name) = self.duplicate {
            return refuse(format!("step `{name}` is defined twice"));
        }
        if !self.steps.contains_key(&self.start) {
            return refuse(format!("the start step `{}` is not defined", self.start));
        }
        for name in self.steps.keys() {
            if let Err(error) = cairn_journal::StepPath::root().child(name) {
                return refuse(format!("step `{name}`: {error}"));
            }
        }
        let (start, steps, options) = (self.start, Arc::new(self.steps), self.options);
        Ok(move |ctx: Ctx, input: I| {
            let (start, steps) = (start.clone(), Arc::clone(&steps));
            Box::pin(async move {
                ctx.repeat_with("flow", (start, S::default()), options, |ctx, (current, pad): (String, S)| {
                    let (steps, input) = (Arc::clone(&steps), input.clone());
                    async move {
                        let handler = steps.get(&current).cloned().ok_or_else(|| {
                            WorkflowError::failed(format!("[CAIRN-E0114] no continuation step is named `{current}`"))
                        })?;
                        let (pad, next) = ctx.step(&current, || handler(input.clone(), pad.clone())).await?;
                        Ok(match next {
                            Transition::Next(step) => ControlFlow::Continue((step, pad)),
                            Transition::Done(output) => ControlFlow::Break(output),
                        })
                    }
                })
                .await
            }) as Pin<Box<dyn Future<Output = Result<O, WorkflowError>> + Send>>
        })
    }
}
