//! Workers and the event subscriptions of the workflows they serve.

use super::run::*;
use cairn_journal::Timestamp;
use serde::{Deserialize, Serialize};

/// A worker as it records itself in the store, refreshed with its heartbeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRecord {
    /// Its lease identity.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub last_seen: Timestamp,
    /// Until when it counts as live without another heartbeat (its last heartbeat plus its lease).
    pub live_until: Timestamp,
    /// The workflow versions it executes, sorted.
    pub serves: Vec<WorkflowKey>,
}

impl WorkerRecord {
    /// Whether it counts as live at `now` (wall-clock time, as leases).
    pub fn is_live_at(&self, now: Timestamp) -> bool {
        self.live_until > now
    }

    /// [`serves`](WorkerRecord::serves) as a JSON array of `name@version` tags, as SQL stores keep it.
    pub fn serves_json(&self) -> String {
        serde_json::Value::from(self.serves.iter().map(WorkflowKey::tag).collect::<Vec<_>>()).to_string()
    }

    /// Reads [`serves_json`](WorkerRecord::serves_json) back.
    pub fn parse_serves(text: &str) -> Result<Vec<WorkflowKey>, StoreError> {
        let tags: Vec<String> = serde_json::from_str(text)
            .map_err(|_| StoreError::Corrupt(format!("a worker's workflow list is unreadable: {text}")))?;
        WorkerRecord::serves_from_tags(&tags)
    }

    /// The workflow versions a worker serves, from their `name@version` tags as stores keep them.
    pub fn serves_from_tags(tags: &[String]) -> Result<Vec<WorkflowKey>, StoreError> {
        tags.iter()
            .map(|tag| {
                WorkflowKey::parse_tag(tag)
                    .ok_or_else(|| StoreError::Corrupt(format!("a worker serves an unreadable {tag:?}")))
            })
            .collect()
    }
}

/// A workflow version some worker has served on a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedWorkflow {
    /// The workflow version.
    pub key: WorkflowKey,
    /// When a worker serving it was first recorded.
    pub first_served: Timestamp,
    /// When a worker serving it was last recorded (started).
    pub last_served: Timestamp,
}

/// Which worker records [`WorkerStore::forget_workers`](crate::WorkerStore::forget_workers) deletes.
#[derive(Debug, Clone, Default)]
pub struct ForgetWorkers {
    /// These workers (one that shut down).
    pub ids: Vec<String>,
    /// Also every worker not live since this time.
    pub dead_before: Option<Timestamp>,
}

impl ForgetWorkers {
    /// Whether `worker` is to be forgotten.
    pub fn selects(&self, worker: &WorkerRecord) -> bool {
        self.ids.contains(&worker.id) || self.dead_before.is_some_and(|t| worker.live_until < t)
    }
}

/// A workflow's subscription to the events of every topic `pattern` matches (see
/// [`cairn_journal::topic`]): each event published to such a topic starts one run of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Subscription {
    /// The subscribed workflow.
    pub workflow: String,
    /// The topic pattern, e.g. `user.*`.
    pub pattern: String,
    /// The version of the workflow an event starts (the newest its declaring worker registered).
    pub version: u32,
}

/// What [`EventStore::set_subscriptions`](crate::EventStore::set_subscriptions) writes: the subscriptions
/// of `workflows` become exactly `subscriptions` (an engine declares those of every workflow it
/// registers, so a subscription dropped from the code is dropped from the store).
#[derive(Debug, Clone, Default)]
pub struct SetSubscriptions {
    /// The workflows whose subscriptions are replaced.
    pub workflows: Vec<String>,
    /// Their subscriptions; each names one of `workflows`.
    pub subscriptions: Vec<Subscription>,
}

impl SetSubscriptions {
    /// Whether `stored` (every subscription a store holds) already has exactly these for
    /// `workflows`, so that setting them would change nothing.
    pub fn is_held_by(&self, stored: &[Subscription]) -> bool {
        let mut held: Vec<&Subscription> = stored.iter().filter(|s| self.workflows.contains(&s.workflow)).collect();
        let mut wanted: Vec<&Subscription> = self.subscriptions.iter().collect();
        held.sort();
        wanted.sort();
        held == wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_is_held_when_its_workflows_have_exactly_its_subscriptions() {
        let sub = |workflow: &str, pattern: &str| Subscription {
            workflow: workflow.into(),
            pattern: pattern.into(),
            version: 1,
        };
        let declared = SetSubscriptions {
            workflows: vec!["a".into(), "b".into()],
            subscriptions: vec![sub("a", "x.*"), sub("a", "y")],
        };
        // Other workflows' subscriptions do not matter; order does not either.
        assert!(declared.is_held_by(&[sub("c", "z"), sub("a", "y"), sub("a", "x.*")]));
        assert!(!declared.is_held_by(&[sub("a", "x.*")]), "one missing");
        assert!(!declared.is_held_by(&[sub("a", "x.*"), sub("a", "y"), sub("b", "old")]), "one to drop");
        assert!(
            !declared.is_held_by(&[sub("a", "x.*"), Subscription { version: 2, ..sub("a", "y") }]),
            "another version"
        );
        assert!(SetSubscriptions { workflows: vec!["a".into()], subscriptions: vec![] }.is_held_by(&[sub("b", "q")]));
    }
}
