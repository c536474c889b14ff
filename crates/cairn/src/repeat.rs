//! Durable loops: iterations in their own scopes, the carried state checkpointed, old history
//! trimmed from the journal.

use crate::ctx::Ctx;
use crate::error::WorkflowError;
use cairn_journal::{Event, Trim};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::VecDeque;
use std::future::Future;
use std::ops::ControlFlow;

/// How a [`Ctx::repeat_with`] loop checkpoints and trims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopOptions {
    every: u64,
    keep: u64,
}

impl Default for LoopOptions {
    /// A checkpoint after every iteration; the last 10 iterations kept.
    fn default() -> Self {
        Self { every: 1, keep: 10 }
    }
}

impl LoopOptions {
    /// Journals the carried state after every `n`-th iteration (at least 1). A replay starts at
    /// the last checkpoint and replays the iterations after it from the journal.
    pub fn checkpoint_every(mut self, n: u64) -> Self {
        self.every = n.max(1);
        self
    }

    /// Keeps the journal entries of the last `k` iterations before each checkpoint (for
    /// inspection); older ones are deleted as the checkpoint commits.
    pub fn keep_iterations(mut self, k: u64) -> Self {
        self.keep = k;
        self
    }
}

impl Ctx {
    /// A durable loop with [`LoopOptions::default`]: see [`repeat_with`](Ctx::repeat_with).
    pub async fn repeat<S, B, F, Fut>(&self, name: &str, init: S, body: F) -> Result<B, WorkflowError>
    where
        S: Serialize + DeserializeOwned,
        F: FnMut(Ctx, S) -> Fut,
        Fut: Future<Output = Result<ControlFlow<B, S>, WorkflowError>>,
    {
        self.repeat_with(name, init, LoopOptions::default(), body).await
    }

    /// A durable loop named `name`: iteration `i` runs `body` in the scope `name[i]` with the
    /// state carried from the one before (`init` first), until it returns
    /// [`ControlFlow::Break`]. The state is journaled every
    /// [`checkpoint_every`](LoopOptions::checkpoint_every) iterations, and the journal entries of iterations older
    /// than the last [`keep_iterations`](LoopOptions::keep_iterations) are deleted as the
    /// checkpoint commits, so a loop of a million iterations keeps a journal (and a worker's
    /// memory) the size of a few iterations, and a replay starts at the last checkpoint, not
    /// at iteration 0. Use it for long-lived runs (a poller, an agent's turns, a game loop);
    /// for a few iterations a plain `for` over steps named `name[i]` does as well.
    ///
    /// ```
    /// use cairn::prelude::*;
    /// use cairn::{LoopOptions, MemoryStore};
    /// use std::ops::ControlFlow;
    ///
    /// /// Polls until the total reaches `target`, one step per turn.
    /// async fn poll(ctx: Ctx, target: u64) -> Result<u64, WorkflowError> {
    ///     let options = LoopOptions::default().checkpoint_every(10).keep_iterations(5);
    ///     ctx.repeat_with("poll", 0u64, options, |ctx, total| async move {
    ///         let got = ctx.step("fetch", || async { Ok::<_, StepError>(7u64) }).await?;
    ///         let total = total + got;
    ///         Ok(if total >= target { ControlFlow::Break(total) } else { ControlFlow::Continue(total) })
    ///     })
    ///     .await
    /// }
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let engine = Engine::builder().store(MemoryStore::new()).register("poll", 1, poll).start().await?;
    /// let run = engine.client().start("poll", &1_000u64).await?;
    /// assert_eq!(run.result::<u64>().await?, 1_001);
    /// assert!(engine.client().journal(run.id()).await?.len() < 40, "143 iterations, trimmed");
    /// engine.shutdown().await;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn repeat_with<S, B, F, Fut>(
        &self,
        name: &str,
        init: S,
        options: LoopOptions,
        mut body: F,
    ) -> Result<B, WorkflowError>
    where
        S: Serialize + DeserializeOwned,
        F: FnMut(Ctx, S) -> Fut,
        Fut: Future<Output = Result<ControlFlow<B, S>, WorkflowError>>,
    {
        let path = self.path().child(name)?;
        let payload = |e: serde_json::Error| WorkflowError::Payload { path: path.to_string(), message: e.to_string() };
        let record = self.shared().lock().start_loop(&path)?;
        let (mut i, mut state) = match &record {
            Some(record) => (record.next, serde_json::from_str(record.state.get()).map_err(payload)?),
            None => (0, init),
        };
        // Where the loop's history begins, and how far its checkpoints have trimmed it.
        let live = self.shared().lock().live_position();
        let since = match &record {
            Some(record) => record.trim.map_or(0, |t| t.since),
            None => live.unwrap_or(0),
        };
        let mut trimmed = record.as_ref().and_then(|r| r.trim).map_or(since, |t| t.through);
        // (j, s): every entry of the iterations before j is at or before entry s.
        let mut boundaries: VecDeque<(u64, u64)> = VecDeque::new();
        match (&record, live) {
            // Each checkpoint still journaled bounds the iterations before it: a loop resumed
            // near its end still trims the iterations it keeps no longer.
            (Some(record), _) => boundaries.extend(record.kept.iter().copied()),
            (None, Some(at)) => boundaries.push_back((0, at)),
            (None, None) => {}
        }
        loop {
            let next = match body(self.scope_indexed(name, i)?, state).await? {
                ControlFlow::Break(value) => return Ok(value),
                ControlFlow::Continue(next) => next,
            };
            state = next;
            i += 1;
            if let Some(at) = self.shared().lock().live_position() {
                boundaries.push_back((i, at));
            }
            if !i.is_multiple_of(options.every) {
                continue;
            }
            let cutoff = i.saturating_sub(options.keep);
            let (mut through, mut below) = (trimmed, None);
            while let Some(&(j, at)) = boundaries.front().filter(|(j, _)| *j <= cutoff) {
                (through, below) = (through.max(at), Some(j));
                boundaries.pop_front();
            }
            let raw = self.shared().encode(path.as_str(), &state)?;
            let trim = Some(Trim { since, after: trimmed, through });
            let vars = self.shared().lock().vars().clone();
            let checkpoint =
                Event::LoopCheckpoint { path: path.clone(), next: i, state: raw, trim: trim.map(Box::new), vars };
            self.shared().lock().defer_checkpoint(checkpoint)?;
            trimmed = through;
            if let Some(below) = below {
                self.shared().lock().forget_iterations(&path, below);
            }
        }
    }
}
