//! What every check here uses: the outside names, the store under test, and the helpers that
//! build runs, claims and appends.

pub(crate) use cairn_journal::{Event, RunState, SignalId, StepPath, Timestamp};
pub(crate) use cairn_store::*;
pub(crate) use serde_json::value::RawValue;
pub(crate) use std::sync::Arc;

/// A store under test.
pub type DynStore = Arc<dyn Store>;

pub(crate) fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).expect("valid JSON in test")
}

pub(crate) fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// `name` as a workflow's name (the checks name only valid ones).
pub(crate) fn workflow(name: &str) -> WorkflowName {
    WorkflowName::new(name).expect("a valid workflow name")
}

pub(crate) fn new_run(id: &str, workflow: &str, key: Option<&str>, at: i64) -> NewRun {
    let mut run = NewRun::new(RunId::new(id), self::workflow(workflow), 1, raw(r#"{"n":1}"#), t(at));
    run.idempotency_key = key.map(|key| IdempotencyKey::new(key).expect("a valid key"));
    run
}

pub(crate) fn wf(name: &str) -> Vec<WorkflowKey> {
    vec![WorkflowKey { name: name.into(), version: 1 }]
}

pub(crate) fn claim_req(owner: &str, workflow: &str, now: i64) -> ClaimRequest {
    ClaimRequest {
        owner: owner.into(),
        workflows: wf(workflow),
        now: t(now),
        lease_now: t(now),
        lease_until: t(now + 1_000),
        limit: 100,
    }
}

pub(crate) fn step(path: &str, ordinal: u32) -> Event {
    Event::StepCompleted {
        path: StepPath::parse(path).expect("valid path"),
        ordinal,
        attempt: 1,
        output: raw("\"ok\""),
        started_at: Some(t(4)),
    }
}

pub(crate) fn progress(run: &RunRecord, events: Vec<Event>) -> Append {
    Append {
        run_id: run.id.clone(),
        epoch: run.epoch,
        after_seq: run.last_seq,
        events,
        at: t(5),
        update: RunUpdate::Progress,
        consume_signal: None,
        batched: false,
    }
}

pub(crate) async fn claim_one(store: &DynStore, workflow: &str, now: i64) -> RunRecord {
    let mut claimed = store.claim(&claim_req("w1", workflow, now)).await.expect("claim");
    assert_eq!(claimed.len(), 1, "expected exactly one claimable run");
    claimed.remove(0)
}

/// Worker `w1` extends its lease of `run` (held at `run.epoch`) to 2,000.
pub(crate) async fn beat(store: &DynStore, run: &RunRecord) -> Vec<LeaseStatus> {
    let request =
        HeartbeatRequest { owner: "w1".into(), runs: vec![(run.id.clone(), run.epoch)], lease_until: t(2_000) };
    store.heartbeat(&request).await.expect("heartbeat")
}

/// `run`'s holder suspends it in a sleep until `wake_at`, at `now`.
pub(crate) async fn suspend_sleeping(store: &DynStore, run: &RunRecord, wake_at: i64, now: i64) {
    let mut suspend = progress(run, vec![]);
    suspend.update = RunUpdate::Suspend {
        reason: SuspendReason::Sleeping,
        wake_at: Some(t(wake_at)),
        signals_after: None,
        now: t(now),
    };
    store.append(suspend).await.expect("suspend");
}

pub(crate) fn control(id: &RunId, at: i64) -> ControlRequest {
    ControlRequest { run_id: id.clone(), reason: "operator".into(), at: t(at), lease_now: t(at) }
}
