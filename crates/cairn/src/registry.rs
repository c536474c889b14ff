//! Registered workflows, type-erased so the engine can run any of them from raw JSON.

use crate::{Ctx, WorkflowError};
use cairn_store::WorkflowKey;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub(crate) type BodyFuture = Pin<Box<dyn Future<Output = Result<Box<RawValue>, WorkflowError>> + Send + 'static>>;
type ErasedBody = Arc<dyn Fn(Ctx, Box<RawValue>) -> BodyFuture + Send + Sync>;
type InputCheck = Arc<dyn Fn(&RawValue) -> Result<(), String> + Send + Sync>;

#[derive(Clone)]
pub(crate) struct Registered {
    pub(crate) body: ErasedBody,
    pub(crate) check_input: InputCheck,
}

#[derive(Clone, Default)]
pub(crate) struct Registry {
    workflows: HashMap<(String, u32), Registered>,
    latest: BTreeMap<String, u32>,
    retention: HashMap<String, Duration>,
}

impl Registry {
    pub(crate) fn insert<I, O, F, Fut>(&mut self, name: &str, version: u32, body: F) -> bool
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(Ctx, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + Send + 'static,
    {
        let key = (name.to_owned(), version);
        if self.workflows.contains_key(&key) {
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
        self.workflows.insert(key, Registered { body: erased, check_input });
        let latest = self.latest.entry(name.to_owned()).or_insert(version);
        *latest = (*latest).max(version);
        true
    }

    pub(crate) fn get(&self, name: &str, version: u32) -> Option<&Registered> {
        self.workflows.get(&(name.to_owned(), version))
    }

    pub(crate) fn set_retention(&mut self, name: &str, keep: Duration) {
        self.retention.insert(name.to_owned(), keep);
    }

    /// How long ended runs of `name` are kept, if set at registration.
    pub(crate) fn retention(&self, name: &str) -> Option<Duration> {
        self.retention.get(name).copied()
    }

    pub(crate) fn latest(&self, name: &str) -> Option<u32> {
        self.latest.get(name).copied()
    }

    pub(crate) fn keys(&self) -> Vec<WorkflowKey> {
        let mut keys: Vec<_> = self
            .workflows
            .keys()
            .map(|(name, version)| WorkflowKey { name: name.clone(), version: *version })
            .collect();
        keys.sort();
        keys
    }
}
