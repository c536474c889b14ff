//! Registered workflows, type-erased so the engine can run any of them from raw JSON.

use crate::ctx::Ctx;
use crate::error::WorkflowError;
use crate::run::{BodyFuture, StepDefaults};
use crate::run_core::InputCheck;
use cairn_store::{SetSubscriptions, Subscription, WorkflowKey};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

type ErasedBody = Arc<dyn Fn(Ctx, Box<RawValue>) -> BodyFuture + Send + Sync>;

#[derive(Clone)]
pub(crate) struct Registered {
    pub(crate) body: ErasedBody,
    pub(crate) check_input: InputCheck,
}

#[derive(Clone, Default)]
pub(crate) struct Registry {
    /// By name, then version: looked up by `&str` without allocating a key.
    workflows: HashMap<String, BTreeMap<u32, Registered>>,
    latest: BTreeMap<String, u32>,
    retention: HashMap<String, Duration>,
    /// Topic patterns by workflow name.
    subscriptions: BTreeMap<String, BTreeSet<String>>,
    /// Step defaults by workflow name.
    step_defaults: HashMap<String, Arc<StepDefaults>>,
    /// The defaults of a workflow that sets none, shared by its runs.
    no_step_defaults: Arc<StepDefaults>,
    /// Rate limits by workflow name.
    rate_limits: HashMap<String, Vec<crate::flow::RateLimit>>,
}

impl Registry {
    pub(crate) fn insert<I, O, F, Fut>(&mut self, name: &str, version: u32, body: F) -> bool
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(Ctx, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + Send + 'static,
    {
        if self.get(name, version).is_some() {
            return false;
        }
        let body = Arc::new(body);
        let erased: ErasedBody = Arc::new(move |ctx: Ctx, input: Box<RawValue>| {
            let body = Arc::clone(&body);
            Box::pin(async move {
                let input: I = serde_json::from_str(input.get())
                    .map_err(|e| WorkflowError::Payload { path: "input".into(), message: e.to_string() })?;
                let output = body(ctx, input).await?;
                serde_json::value::to_raw_value(&output)
                    .map_err(|e| WorkflowError::Payload { path: "output".into(), message: e.to_string() })
            }) as BodyFuture
        });
        let check_input: InputCheck =
            Arc::new(|raw: &RawValue| serde_json::from_str::<I>(raw.get()).map(drop).map_err(|e| e.to_string()));
        self.workflows.entry(name.to_owned()).or_default().insert(version, Registered { body: erased, check_input });
        let latest = self.latest.entry(name.to_owned()).or_insert(version);
        *latest = (*latest).max(version);
        true
    }

    pub(crate) fn get(&self, name: &str, version: u32) -> Option<&Registered> {
        self.workflows.get(name)?.get(&version)
    }

    pub(crate) fn set_retention(&mut self, name: &str, keep: Duration) {
        self.retention.insert(name.to_owned(), keep);
    }

    /// How long ended runs of `name` are kept, if set at registration.
    pub(crate) fn retention(&self, name: &str) -> Option<Duration> {
        self.retention.get(name).copied()
    }

    pub(crate) fn subscribe(&mut self, name: &str, pattern: &str) {
        self.subscriptions.entry(name.to_owned()).or_default().insert(pattern.to_owned());
    }

    /// Sets the step defaults of workflow `name`.
    pub(crate) fn set_step_defaults(&mut self, name: &str, set: impl FnOnce(&mut StepDefaults)) {
        set(Arc::make_mut(self.step_defaults.entry(name.to_owned()).or_default()));
    }

    /// Adds a rate limit, replacing the one its workflow had for the same starts or step.
    pub(crate) fn set_rate_limit(&mut self, limit: crate::flow::RateLimit) {
        let limits = self.rate_limits.entry(limit.workflow.clone()).or_default();
        limits.retain(|l| l.step != limit.step);
        limits.push(limit);
    }

    /// The rate limits of workflow `name`.
    pub(crate) fn rate_limits(&self, name: &str) -> &[crate::flow::RateLimit] {
        self.rate_limits.get(name).map_or(&[], Vec::as_slice)
    }

    /// A rate limit that is not valid or names an unregistered workflow, if any.
    pub(crate) fn check_rate_limits(&self) -> Result<(), crate::error::EngineError> {
        for limit in self.rate_limits.values().flatten() {
            limit.check().map_err(crate::error::EngineError::InvalidRateLimit)?;
            if !self.latest.contains_key(&limit.workflow) {
                let message = format!("a rate limit limits `{}`, which is not registered", limit.workflow);
                return Err(crate::error::EngineError::InvalidRateLimit(message));
            }
        }
        Ok(())
    }

    /// The step defaults of workflow `name`.
    pub(crate) fn step_defaults(&self, name: &str) -> Arc<StepDefaults> {
        Arc::clone(self.step_defaults.get(name).unwrap_or(&self.no_step_defaults))
    }

    /// A subscription or step defaults that name an unregistered workflow, or an invalid
    /// pattern, if any.
    pub(crate) fn check_settings(&self) -> Result<(), crate::error::EngineError> {
        let unregistered =
            |name: &String, setting: String| crate::error::EngineError::NotRegistered { name: name.clone(), setting };
        for (name, patterns) in &self.subscriptions {
            for pattern in patterns {
                cairn_journal::topic::check_pattern(pattern).map_err(crate::error::EngineError::InvalidTopic)?;
                if !self.latest.contains_key(name) {
                    return Err(unregistered(name, format!("a subscription to `{pattern}`")));
                }
            }
        }
        if let Some(name) = self.step_defaults.keys().find(|name| !self.latest.contains_key(*name)) {
            return Err(unregistered(name, "step defaults".to_owned()));
        }
        Ok(())
    }

    /// What this worker declares: every registered workflow's subscriptions (none for most),
    /// each starting the newest registered version.
    pub(crate) fn subscriptions(&self) -> SetSubscriptions {
        let subscriptions = (self.subscriptions.iter())
            .flat_map(|(name, patterns)| {
                let version = self.latest(name).unwrap_or(1);
                patterns.iter().map(move |pattern| Subscription {
                    workflow: name.clone(),
                    pattern: pattern.clone(),
                    version,
                })
            })
            .collect();
        SetSubscriptions { workflows: self.latest.keys().cloned().collect(), subscriptions }
    }

    pub(crate) fn latest(&self, name: &str) -> Option<u32> {
        self.latest.get(name).copied()
    }

    /// The registered workflows' names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        self.latest.keys().cloned().collect()
    }

    pub(crate) fn keys(&self) -> Vec<WorkflowKey> {
        let mut keys: Vec<_> = self
            .workflows
            .iter()
            .flat_map(|(name, versions)| {
                versions.keys().map(|version| WorkflowKey { name: name.clone(), version: *version })
            })
            .collect();
        keys.sort();
        keys
    }
}
