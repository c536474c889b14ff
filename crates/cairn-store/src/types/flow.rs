//! Flow control: concurrency rules and a run's place under one, rate-limit turns.

use cairn_journal::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::Duration;

/// A run's place under its workflow's concurrency rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunConcurrency {
    /// The key its input gave (`""` under a rule without a key): runs of one workflow with equal
    /// keys share the rule's slots.
    pub key: String,
    /// Whether it keeps its slot while suspended.
    pub hold_suspended: bool,
}

impl RunConcurrency {
    /// From a row's `flow_key` and `flow_hold` columns.
    pub fn stored(key: Option<String>, hold_suspended: bool) -> Option<RunConcurrency> {
        key.map(|key| RunConcurrency { key, hold_suspended })
    }

    /// The place under `rule` of a run with `input`.
    pub fn of(rule: &ConcurrencyRule, input: &RawValue) -> RunConcurrency {
        RunConcurrency {
            key: cairn_journal::flow::key_in(input, rule.key.as_deref()),
            hold_suspended: rule.hold_suspended,
        }
    }
}

/// At most `limit` runs of `workflow` hold a slot at once, per value of `key` in their inputs
/// (or for the whole workflow, without a key), across every worker sharing the store. A run
/// holds a slot from when it is admitted until it ends, is paused, or suspends (unless
/// `hold_suspended`); the others wait in creation order ([`WaitingFor::Concurrency`](cairn_journal::flow::WaitingFor::Concurrency)) and are
/// admitted, by the store, as slots free up. A rule applies to runs created after it was stored.
///
/// ```
/// use cairn_store::ConcurrencyRule;
/// let rule = ConcurrencyRule::per_key("charge", "/customer", 2).hold_suspended();
/// assert_eq!((rule.limit, rule.key.as_deref(), rule.hold_suspended), (2, Some("/customer"), true));
/// assert!(ConcurrencyRule::per_workflow("charge", 0).check().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcurrencyRule {
    /// The workflow it limits.
    pub workflow: String,
    /// A JSON pointer (`/customer`) into each run's input: runs with equal values there share
    /// the slots. `None`: all runs of the workflow share them.
    pub key: Option<String>,
    /// How many runs at most hold a slot at once, per key.
    pub limit: u32,
    /// Whether a suspended (sleeping, waiting) run keeps its slot.
    pub hold_suspended: bool,
}

impl ConcurrencyRule {
    /// At most `limit` runs of `workflow` at once.
    pub fn per_workflow(workflow: impl Into<String>, limit: u32) -> ConcurrencyRule {
        ConcurrencyRule { workflow: workflow.into(), key: None, limit, hold_suspended: false }
    }

    /// At most `limit` runs of `workflow` at once per value at `pointer` in their inputs.
    pub fn per_key(workflow: impl Into<String>, pointer: impl Into<String>, limit: u32) -> ConcurrencyRule {
        ConcurrencyRule { workflow: workflow.into(), key: Some(pointer.into()), limit, hold_suspended: false }
    }

    /// Suspended runs keep their slots.
    pub fn hold_suspended(mut self) -> ConcurrencyRule {
        self.hold_suspended = true;
        self
    }

    /// Why the rule cannot be stored, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.workflow.is_empty() {
            return Err("a concurrency rule needs a workflow".into());
        }
        if self.limit == 0 {
            return Err(format!("the concurrency limit of {} must be at least 1", self.workflow));
        }
        if let Some(pointer) = &self.key {
            cairn_journal::flow::pointer_tokens(pointer).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// One execution asks a rate limit's bucket for its turn ([`FlowStore::take_rate`](crate::FlowStore::take_rate)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeRate {
    /// The bucket (`cairn_journal::flow::rate_bucket`): what is limited, and the key.
    pub bucket: String,
    /// At most this many grants in any window of `period`.
    pub limit: u32,
    /// The window.
    pub period: Duration,
    /// The asker's time: the grant is recorded at it.
    pub now: Timestamp,
}

impl TakeRate {
    /// The period in whole milliseconds, at least 1.
    pub fn period_ms(&self) -> i64 {
        i64::try_from(self.period.as_millis()).unwrap_or(i64::MAX).max(1)
    }
}
