//! Flow control: concurrency rules through a [`Client`], and rate limits.

use crate::client::Client;
use crate::error::ClientError;
use cairn_store::ConcurrencyRule;
use cairn_store::TakeRate;

impl Client {
    /// Stores a concurrency rule, replacing the workflow's earlier one; runs that waited for its
    /// slots and fit a larger limit are admitted at once. Applies to runs created from now on
    /// (earlier runs keep the key, or the freedom, they were created with).
    ///
    /// ```
    /// use cairn::{Client, ConcurrencyRule, MemoryStore};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let client = Client::new(MemoryStore::new());
    /// client.put_concurrency(&ConcurrencyRule::per_workflow("export", 3)).await?;
    /// assert!(client.put_concurrency(&ConcurrencyRule::per_workflow("export", 0)).await.is_err());
    /// assert_eq!(client.concurrency_rules().await?[0].limit, 3);
    /// assert!(client.delete_concurrency("export").await?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn put_concurrency(&self, rule: &ConcurrencyRule) -> Result<(), ClientError> {
        rule.check().map_err(ClientError::InvalidConcurrency)?;
        self.store.put_concurrency(rule).await?;
        Ok(())
    }

    /// Deletes a workflow's concurrency rule (every run that waited for a slot is admitted);
    /// whether it had one.
    pub async fn delete_concurrency(&self, workflow: &str) -> Result<bool, ClientError> {
        Ok(self.store.delete_concurrency(workflow).await?)
    }

    /// Every concurrency rule, by workflow.
    pub async fn concurrency_rules(&self) -> Result<Vec<ConcurrencyRule>, ClientError> {
        Ok(self.store.concurrency_rules().await?)
    }
}

/// At most `limit` starts of a workflow, or executions of a named step of it, in any window of
/// `period`, per key of the run's input (or for the whole workflow), across every worker sharing
/// the store. Work over the limit is delayed, never dropped: a run waits to start (its first
/// execution waits for its turn), or a step waits before each attempt, suspended
/// (`waiting_for: rate`) until the limit lets it go on. Declared with
/// [`EngineBuilder::rate_limit`](crate::engine::EngineBuilder::rate_limit); every worker serving the
/// workflow should declare the same limits.
///
/// ```
/// use cairn::RateLimit;
/// use std::time::Duration;
/// // At most 10 runs of `sync` start per minute, and each customer's `call-api` step runs at
/// // most twice a second.
/// let starts = RateLimit::starts("sync", 10, Duration::from_secs(60));
/// let calls = RateLimit::step("sync", "call-api", 2, Duration::from_secs(1)).per_key("/customer");
/// assert!(RateLimit::starts("sync", 0, Duration::from_secs(1)).check().is_err());
/// # let _ = (starts, calls);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    /// The workflow limited.
    pub workflow: String,
    /// The name (last path segment) of the steps limited; `None`: the workflow's starts.
    pub step: Option<String>,
    /// A JSON pointer into the run's input whose value is the key (`None`: one key).
    pub key: Option<String>,
    /// At most this many in any window of `period`.
    pub limit: u32,
    /// The window.
    pub period: std::time::Duration,
}

impl RateLimit {
    /// At most `limit` runs of `workflow` start in any window of `period`.
    pub fn starts(workflow: impl Into<String>, limit: u32, period: std::time::Duration) -> RateLimit {
        RateLimit { workflow: workflow.into(), step: None, key: None, limit, period }
    }

    /// At most `limit` attempts of the steps named `step` (wherever they are in the run) of
    /// `workflow` run in any window of `period`.
    pub fn step(
        workflow: impl Into<String>,
        step: impl Into<String>,
        limit: u32,
        period: std::time::Duration,
    ) -> RateLimit {
        RateLimit { workflow: workflow.into(), step: Some(step.into()), key: None, limit, period }
    }

    /// Counts per value of the input at this JSON pointer (`/customer`) instead of for the whole
    /// workflow; runs without a value there share the key `""`.
    pub fn per_key(mut self, pointer: impl Into<String>) -> RateLimit {
        self.key = Some(pointer.into());
        self
    }

    /// Why the limit is not valid, if it is not: a limit of 0, a period under a millisecond, an
    /// empty workflow or step name, or a key that is not a JSON pointer.
    pub fn check(&self) -> Result<(), String> {
        if self.workflow.is_empty() {
            return Err("a rate limit needs a workflow".into());
        }
        if self.limit == 0 {
            return Err(format!("the rate limit of {} must be at least 1", self.workflow));
        }
        if self.period < std::time::Duration::from_millis(1) {
            return Err(format!("the rate limit period of {} must be at least a millisecond", self.workflow));
        }
        if self.step.as_deref() == Some("") {
            return Err(format!("a step rate limit of {} needs a step name", self.workflow));
        }
        if let Some(pointer) = &self.key {
            cairn_journal::flow::pointer_tokens(pointer).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The turns a run with `input` asks this limit for.
    pub(crate) fn turns_of(&self, input: Option<&serde_json::value::RawValue>) -> RateTurns {
        let key = input.map(|input| cairn_journal::flow::key_in(input, self.key.as_deref())).unwrap_or_default();
        RateTurns {
            step: self.step.clone(),
            bucket: cairn_journal::flow::rate_bucket(&self.workflow, self.step.as_deref(), &key),
            limit: self.limit,
            period: self.period,
        }
    }
}

/// What one run asks one rate limit for: turns in its bucket, for its start (`step` `None`) or
/// for the steps named `step`.
#[derive(Debug, Clone)]
pub(crate) struct RateTurns {
    pub(crate) step: Option<String>,
    bucket: String,
    limit: u32,
    period: std::time::Duration,
}

impl RateTurns {
    /// The turn asked for at `now`.
    pub(crate) fn at(&self, now: cairn_journal::Timestamp) -> TakeRate {
        TakeRate { bucket: self.bucket.clone(), limit: self.limit, period: self.period, now }
    }
}
