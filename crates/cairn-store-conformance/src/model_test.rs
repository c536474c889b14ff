//! The model-based test: random sequences of run operations, in virtual time, applied to the
//! [`Model`] and to a backend, whose observable state must equal the model's after every one.
//!
//! What is compared after each operation: the operation's own answer (which runs a claim took,
//! which error a refused change gave, a heartbeat's lease statuses, a cancel's or pause's
//! outcome), every run record (through `list_runs`, so the list order too), each run's signals
//! and which are consumed, the counts per workflow and status and per version, and the next
//! wake-up due. Concurrency slots held are compared through the records (`waiting_for`,
//! `status`, `concurrency`).
//!
//! A failure prints the shortest sequence proptest found and the first difference.

use crate::model::Model;
use crate::support::DynStore;
use cairn_journal::{Event, SignalId, StepPath, Timestamp};
use cairn_store::lifecycle::{self, Operation, Phase};
use cairn_store::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

/// One operation of a sequence. Runs are picked by index (modulo the runs there are), so a
/// sequence stays meaningful while proptest shrinks it.
#[derive(Debug, Clone)]
enum Op {
    /// Start a run.
    Create {
        /// Workflow `a` or `b`.
        workflow: u8,
        /// The input's `k` (what a keyed concurrency rule groups by).
        key: u8,
        /// An idempotency key.
        idempotency: Option<u8>,
        /// Priority.
        priority: i32,
        /// A fairness key.
        fairness: Option<u8>,
        /// Debounce key, quiet time and maximum wait (ms).
        debounce: Option<(u8, u16, Option<u16>)>,
        /// Retention (ms).
        retention: Option<u16>,
        /// Reuse the id of an earlier run.
        reuse: Option<usize>,
    },
    /// A worker claims up to `limit` runs of workflow `a`, `b` or both (`2`).
    Claim { owner: u8, workflows: u8, limit: u8 },
    /// A claimed run's holder appends a step (consuming its oldest signal, if `consume`).
    Step { run: usize, consume: bool },
    /// The holder suspends it in a sleep.
    Sleep { run: usize, ms: u16 },
    /// The holder suspends it waiting for a signal: woken at once by any buffered signal
    /// (`any`), or only by one sent after the newest it knows.
    Wait { run: usize, any: bool, timeout: Option<u16> },
    /// The holder ends it (failed or completed).
    Finish { run: usize, failed: bool },
    /// The holder continues it as a new run.
    Continue { run: usize },
    /// The holder gives it back.
    Release { run: usize },
    /// The holder parks it (paused with an error).
    Park { run: usize },
    /// The holder (or a stale one) heartbeats.
    Heartbeat { run: usize, stale: bool },
    /// A signal to a run.
    Signal { run: usize },
    /// Cancel a run.
    Cancel { run: usize },
    /// Pause a run.
    Pause { run: usize },
    /// Resume a run.
    Resume { run: usize },
    /// Store a concurrency rule for a workflow.
    PutRule { workflow: u8, limit: u32, keyed: bool, hold: bool },
    /// Delete a workflow's rule.
    DeleteRule { workflow: u8 },
    /// Virtual time moves on.
    Advance { ms: u16 },
    /// Delete ended runs past their retention.
    Prune,
}

fn op() -> impl Strategy<Value = Op> {
    let create =
        (
            0..2u8,
            0..2u8,
            prop::option::weighted(0.2, 0..3u8),
            0..2i32,
            prop::option::weighted(0.3, 0..2u8),
            prop::option::weighted(0.2, (0..2u8, 1..400u16, prop::option::of(100..800u16))),
            prop::option::weighted(0.3, 0..300u16),
            prop::option::weighted(0.05, any::<usize>()),
        )
            .prop_map(|(workflow, key, idempotency, priority, fairness, debounce, retention, reuse)| {
                Op::Create { workflow, key, idempotency, priority, fairness, debounce, retention, reuse }
            });
    let run = any::<usize>;
    prop_oneof![
        6 => create,
        6 => (0..2u8, 0..3u8, 1..4u8).prop_map(|(owner, workflows, limit)| Op::Claim { owner, workflows, limit }),
        4 => (run(), any::<bool>()).prop_map(|(run, consume)| Op::Step { run, consume }),
        3 => (run(), 1..600u16).prop_map(|(run, ms)| Op::Sleep { run, ms }),
        3 => (run(), any::<bool>(), prop::option::of(1..900u16)).prop_map(|(run, any, timeout)| Op::Wait { run, any, timeout }),
        3 => (run(), any::<bool>()).prop_map(|(run, failed)| Op::Finish { run, failed }),
        1 => run().prop_map(|run| Op::Continue { run }),
        1 => run().prop_map(|run| Op::Release { run }),
        1 => run().prop_map(|run| Op::Park { run }),
        2 => (run(), any::<bool>()).prop_map(|(run, stale)| Op::Heartbeat { run, stale }),
        3 => run().prop_map(|run| Op::Signal { run }),
        2 => run().prop_map(|run| Op::Cancel { run }),
        2 => run().prop_map(|run| Op::Pause { run }),
        2 => run().prop_map(|run| Op::Resume { run }),
        2 => (0..2u8, 1..3u32, any::<bool>(), any::<bool>())
            .prop_map(|(workflow, limit, keyed, hold)| Op::PutRule { workflow, limit, keyed, hold }),
        1 => (0..2u8).prop_map(|workflow| Op::DeleteRule { workflow }),
        4 => (1..1_500u16).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Prune),
    ]
}

/// How long a claim's lease lasts, in virtual milliseconds.
const LEASE_MS: i64 = 1_000;

/// Every (phase, operation) pair of the lifecycle table a model-based test did.
pub type Transitions = BTreeSet<(Phase, Operation)>;

/// Runs `cases` random sequences of up to `ops` operations against the model and against fresh
/// stores from `make` (one per sequence), failing at the first difference, or at the first
/// change of a run the lifecycle table ([`lifecycle::next`]) does not allow. Returns the pairs of
/// the table the sequences did. `make` may answer `None` (the backend is not available here):
/// the test is then skipped.
///
/// The sequences come from a fixed seed, so a test run passes or fails the same way every time
/// (a random divergence must not decide whether an unrelated change lands). To look further,
/// `CAIRN_MODEL_SEED` picks another seed (a number) or a fresh one (`random`, printed so a
/// failure can be replayed), and `CAIRN_MODEL_CASES` another count.
pub fn check_against_model<F, Fut, O, G>(cases: u32, ops: usize, make: F) -> Transitions
where
    F: Fn() -> Fut,
    Fut: Future<Output = O>,
    O: Into<Option<(DynStore, G)>>,
{
    let cases = std::env::var("CAIRN_MODEL_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(cases);
    check_against_model_seeded(cases, ops, model_seed(std::env::var("CAIRN_MODEL_SEED").ok().as_deref()), make)
}

/// The seed `CAIRN_MODEL_SEED` asks for: a number's little-endian bytes, a fresh one for
/// `random` (printed), and the fixed default for nothing.
fn model_seed(asked: Option<&str>) -> [u8; 32] {
    let number = match asked {
        Some("random") => {
            let fresh = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as u64);
            eprintln!("model-based test: CAIRN_MODEL_SEED={fresh}");
            fresh
        }
        Some(number) => number.parse().unwrap_or_else(|_| panic!("CAIRN_MODEL_SEED={number}: a number or `random`")),
        None => 0,
    };
    let mut seed = [45; 32];
    seed[..8].copy_from_slice(&number.to_le_bytes());
    seed
}

/// [`check_against_model`] with the sequences drawn from `seed`: the same sequences, and so the
/// same pairs done, on every run (what the transition-coverage test needs).
pub fn check_against_model_seeded<F, Fut, O, G>(cases: u32, ops: usize, seed: [u8; 32], make: F) -> Transitions
where
    F: Fn() -> Fut,
    Fut: Future<Output = O>,
    O: Into<Option<(DynStore, G)>>,
{
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let rng = proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed);
    run_model(TestRunner::new_with_rng(config, rng), ops, make)
}

fn run_model<F, Fut, O, G>(mut runner: TestRunner, ops: usize, make: F) -> Transitions
where
    F: Fn() -> Fut,
    Fut: Future<Output = O>,
    O: Into<Option<(DynStore, G)>>,
{
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    let reached = std::cell::RefCell::new(Transitions::new());
    // Half the sequences begin under a concurrency rule, where most lifecycle rules bite.
    let rule = (0..2u8, 1..3u32, any::<bool>(), any::<bool>()).prop_map(|(workflow, limit, keyed, hold)| Op::PutRule {
        workflow,
        limit,
        keyed,
        hold,
    });
    let sequence = (prop::option::of(rule), prop::collection::vec(op(), 1..ops)).prop_map(|(rule, mut ops)| {
        ops.splice(0..0, rule);
        ops
    });
    let result = runner.run(&sequence, |ops| {
        runtime.block_on(async {
            let Some((store, _guard)) = make().await.into() else { return Ok(()) };
            let mut driver = Driver::new(store);
            for (i, op) in ops.iter().enumerate() {
                driver.step(op).await.map_err(|e| TestCaseError::fail(format!("after op {i} ({op:?}): {e}")))?;
            }
            reached.borrow_mut().extend(driver.reached);
            Ok(())
        })
    });
    match result {
        Ok(()) => reached.into_inner(),
        Err(proptest::test_runner::TestError::Fail(why, ops)) => {
            panic!("the backend diverged from the model: {why}\nshortest sequence found: {ops:?}")
        }
        Err(error) => panic!("the model-based test stopped: {error}"),
    }
}

/// Applies operations to the model and to the store, and compares them.
struct Driver {
    store: DynStore,
    model: Model,
    /// Virtual now.
    now: i64,
    /// Every id created, in order.
    ids: Vec<RunId>,
    /// Runs a claim handed out: id, owner, epoch.
    held: Vec<(RunId, String, u64)>,
    /// The store's id of each signal the model numbered.
    signal_ids: BTreeMap<SignalId, SignalId>,
    /// What the last operation did to one run in the model: its id, the operation, and whether
    /// the model did it (`Ok`) or refused it (`Err`, the error's kind).
    touched: Vec<(RunId, Operation, Result<(), String>)>,
    /// Every (phase, operation) pair the model did, in every sequence so far.
    reached: BTreeSet<(Phase, Operation)>,
}

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).expect("valid JSON")
}

const WORKFLOWS: [&str; 2] = ["a", "b"];

fn keys(workflows: u8) -> Vec<WorkflowKey> {
    let names: &[&str] = match workflows {
        0 => &WORKFLOWS[..1],
        1 => &WORKFLOWS[1..],
        _ => &WORKFLOWS[..],
    };
    names.iter().map(|name| WorkflowKey { name: (*name).into(), version: 1 }).collect()
}

/// What an operation that cannot fail answered.
fn ok<T: std::fmt::Debug>(value: T) -> String {
    format!("ok {value:?}")
}

/// Whether the model did an operation, or the kind of its refusal.
fn done<T>(result: &Result<T, StoreError>) -> Result<(), String> {
    result.as_ref().map(|_| ()).map_err(error_kind)
}

/// What an operation answered, reduced to what must agree between stores.
fn outcome<T: std::fmt::Debug>(result: &Result<T, StoreError>) -> String {
    match result {
        Ok(value) => ok(value),
        Err(error) => format!("error {}", error_kind(error)),
    }
}

fn error_kind(error: &StoreError) -> String {
    let text = format!("{error:?}");
    text.split(['(', ' ', '{']).next().unwrap_or_default().to_owned()
}

impl Driver {
    fn new(store: DynStore) -> Driver {
        Driver {
            store,
            model: Model::default(),
            now: 1_000,
            ids: Vec::new(),
            held: Vec::new(),
            signal_ids: BTreeMap::new(),
            touched: Vec::new(),
            reached: BTreeSet::new(),
        }
    }

    fn at(&self) -> Timestamp {
        Timestamp::from_millis(self.now)
    }

    fn pick(&self, index: usize) -> Option<RunId> {
        (!self.ids.is_empty()).then(|| self.ids[index % self.ids.len()].clone())
    }

    /// A run the model holds that passes `wanted` (so an operation mostly meets runs it can
    /// change), or any run if none does.
    fn pick_where(&self, index: usize, wanted: impl Fn(&RunRecord) -> bool) -> Option<RunId> {
        let fitting: Vec<&RunId> = self.model.runs.values().filter(|r| wanted(r)).map(|r| &r.id).collect();
        match fitting.is_empty() {
            true => self.pick(index),
            false => Some(fitting[index % fitting.len()].clone()),
        }
    }

    /// A held run, as its holder knows it: id, owner, epoch, and the journal's last sequence.
    fn holder(&self, index: usize) -> Option<(RunId, String, u64, u64)> {
        if self.held.is_empty() {
            return None;
        }
        let (id, owner, epoch) = self.held[index % self.held.len()].clone();
        let last_seq = self.model.runs.get(&id).map_or(0, |r| r.last_seq);
        Some((id, owner, epoch, last_seq))
    }

    fn new_id(&mut self) -> RunId {
        let id = RunId::new(format!("r{:03}", self.ids.len()));
        self.ids.push(id.clone());
        id
    }

    async fn step(&mut self, op: &Op) -> Result<(), String> {
        let before = self.phases();
        self.touched.clear();
        let answers = self.apply(op).await;
        if answers.0 != answers.1 {
            return Err(format!("answers differ:\n  model: {}\n  store: {}", answers.0, answers.1));
        }
        self.follow_the_table(&before)?;
        self.compare().await
    }

    /// Every run's phase in the model now.
    fn phases(&self) -> BTreeMap<RunId, Phase> {
        self.model.runs.values().map(|run| (run.id.clone(), Phase::of(run, self.at()))).collect()
    }

    /// Checks that what the last operation did to each run it touched is what the lifecycle
    /// table says (from the phase `before` it), and records the pairs done. A holder's operation
    /// refused by its epoch (a stale holder) is the store's fencing, which no phase shows.
    fn follow_the_table(&mut self, before: &BTreeMap<RunId, Phase>) -> Result<(), String> {
        let after = self.phases();
        for (id, operation, done) in std::mem::take(&mut self.touched) {
            let Some(&from) = before.get(&id) else { continue };
            let table = lifecycle::next(from, operation);
            match (&done, table) {
                (Ok(()), Ok(want)) => {
                    let got = after.get(&id).copied().unwrap_or(Phase::Ended);
                    if got != want {
                        return Err(format!(
                            "{operation:?} of a {from:?} run left it {got:?}; the table says {want:?}"
                        ));
                    }
                    self.reached.insert((from, operation));
                }
                (Ok(()), Err(refusal)) => {
                    return Err(format!(
                        "{operation:?} of a {from:?} run was done; the table refuses it ({refusal:?})"
                    ));
                }
                (Err(_), Err(_)) => {}
                (Err(_), Ok(_)) if operation.by_holder() => {}
                (Err(kind), Ok(want)) => {
                    return Err(format!(
                        "{operation:?} of a {from:?} run was refused ({kind}); the table says {want:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Applies `op` to both; returns (model's answer, store's answer).
    async fn apply(&mut self, op: &Op) -> (String, String) {
        let at = self.at();
        match op {
            Op::Create { workflow, key, idempotency, priority, fairness, debounce, retention, reuse } => {
                let id = match reuse.and_then(|i| self.pick(i)) {
                    Some(id) => id,
                    None => self.new_id(),
                };
                let input = raw(&format!(r#"{{"k":"{key}"}}"#));
                let mut new = NewRun::new(id, crate::support::workflow(WORKFLOWS[*workflow as usize]), 1, input, at);
                new.idempotency_key =
                    idempotency.map(|k| IdempotencyKey::new(format!("idem-{k}")).expect("a valid key"));
                new.priority = *priority;
                new.fairness_key = fairness.map(|f| format!("tenant-{f}"));
                new.retention = retention.map(|ms| Duration::from_millis(ms.into()));
                new.debounce = debounce.map(|(key, quiet, max)| Debounce {
                    key: format!("d{key}"),
                    quiet: Duration::from_millis(quiet.into()),
                    max_wait: max.map(|ms| Duration::from_millis(ms.into())),
                });
                let model = self.model.create(new.clone()).map(|c| (c.run.id, c.created));
                let store = self.store.create_run(new).await.map(|c| (c.run.id, c.created));
                (outcome(&model), outcome(&store))
            }
            Op::Claim { owner, workflows, limit } => {
                let request = ClaimRequest {
                    owner: format!("w{owner}"),
                    workflows: keys(*workflows),
                    now: at,
                    lease_now: at,
                    lease_until: Timestamp::from_millis(self.now + LEASE_MS),
                    limit: (*limit).into(),
                };
                let ids = |runs: Vec<RunRecord>| {
                    let mut ids: Vec<_> = runs.into_iter().map(|r| (r.id, r.epoch)).collect();
                    ids.sort();
                    ids
                };
                let before = self.phases();
                let model = ids(self.model.claim(&request));
                for (id, _) in &model {
                    self.touched.push((id.clone(), Operation::Claim, Ok(())));
                }
                let now = self.phases();
                let requeued = before
                    .iter()
                    .filter(|(id, from)| **from == Phase::Suspended && now.get(*id) == Some(&Phase::Pending));
                self.touched.extend(requeued.map(|(id, _)| (id.clone(), Operation::Requeue, Ok(()))));
                let store = self.store.claim(&request).await.map(ids);
                self.held.retain(|(id, ..)| !model.iter().any(|(claimed, _)| claimed == id));
                self.held.extend(model.iter().map(|(id, epoch)| (id.clone(), request.owner.clone(), *epoch)));
                (ok(model), outcome(&store))
            }
            Op::Heartbeat { run, stale } => {
                let Some((id, owner, epoch, _)) = self.holder(*run) else { return Default::default() };
                let epoch = if *stale { epoch.saturating_sub(1) } else { epoch };
                let request = HeartbeatRequest {
                    owner,
                    runs: vec![(id, epoch)],
                    lease_until: Timestamp::from_millis(self.now + LEASE_MS),
                };
                let model = self.model.heartbeat(&request);
                let held = model.first().map(|status| if status.held { Ok(()) } else { Err("lost".to_owned()) });
                self.touched.push((request.runs[0].0.clone(), Operation::Heartbeat, held.unwrap_or(Ok(()))));
                let store = self.store.heartbeat(&request).await;
                (ok(model), outcome(&store))
            }
            Op::Signal { run } => {
                let Some(id) = self.pick_where(*run, |r| !r.status.is_terminal()) else { return Default::default() };
                let signal = NewSignal { run_id: id, name: "go".into(), payload: raw("1"), sent_at: at };
                let model = self.model.signal(signal.clone());
                self.touched.push((signal.run_id.clone(), Operation::Signal, done(&model)));
                let store = self.store.send_signal(signal).await;
                if let (Ok(model), Ok(store)) = (&model, &store) {
                    self.signal_ids.insert(*model, *store);
                }
                (outcome(&model.map(|_| ())), outcome(&store.map(|_| ())))
            }
            Op::Cancel { run } | Op::Pause { run } | Op::Resume { run } => {
                let wanted = |r: &RunRecord| match op {
                    Op::Resume { .. } => r.status == RunStatus::Paused,
                    _ => !r.status.is_terminal(),
                };
                let Some(id) = self.pick_where(*run, wanted) else { return Default::default() };
                let request = ControlRequest { run_id: id.clone(), reason: "operator".into(), at, lease_now: at };
                match op {
                    Op::Cancel { .. } => {
                        let model = self.model.cancel(request.clone());
                        self.touched.push((id, Operation::Cancel, done(&model)));
                        (outcome(&model), outcome(&self.store.cancel(request).await))
                    }
                    Op::Pause { .. } => {
                        let model = self.model.pause(request.clone());
                        self.touched.push((id, Operation::Pause, done(&model)));
                        (outcome(&model), outcome(&self.store.pause(request).await))
                    }
                    _ => {
                        let request = ResumeRequest { run_id: id.clone(), at };
                        let model = self.model.resume(request.clone());
                        self.touched.push((id, Operation::Resume, done(&model)));
                        (outcome(&model), outcome(&self.store.resume(request).await))
                    }
                }
            }
            Op::PutRule { workflow, limit, keyed, hold } => {
                let name = WORKFLOWS[*workflow as usize];
                let mut rule = if *keyed {
                    ConcurrencyRule::per_key(name, "/k", *limit)
                } else {
                    ConcurrencyRule::per_workflow(name, *limit)
                };
                rule.hold_suspended = *hold;
                (outcome(&self.model.put_concurrency(&rule)), outcome(&self.store.put_concurrency(&rule).await))
            }
            Op::DeleteRule { workflow } => {
                let name = WORKFLOWS[*workflow as usize];
                let model = self.model.delete_concurrency(name);
                (ok(model), outcome(&self.store.delete_concurrency(name).await))
            }
            Op::Advance { ms } => {
                self.now += i64::from(*ms);
                Default::default()
            }
            Op::Prune => {
                let request =
                    PruneRequest { now: at, ended_before: None, events_before: None, limit: 100, dry_run: false };
                let model = self.model.prune(&request);
                let store = self.store.prune(request).await.map(|mut ids| {
                    ids.sort();
                    ids
                });
                (ok(model), outcome(&store))
            }
            _ => self.append(op).await,
        }
    }

    /// A holder's append: a step, a suspension, an end, a continuation, a release or a park.
    async fn append(&mut self, op: &Op) -> (String, String) {
        let at = self.at();
        let (Op::Step { run, .. }
        | Op::Sleep { run, .. }
        | Op::Wait { run, .. }
        | Op::Finish { run, .. }
        | Op::Continue { run }
        | Op::Release { run }
        | Op::Park { run }) = op
        else {
            return Default::default();
        };
        let Some((id, _, epoch, after_seq)) = self.holder(*run) else { return Default::default() };
        let step = Event::StepCompleted {
            path: StepPath::parse("s").expect("valid path"),
            ordinal: after_seq as u32,
            attempt: 1,
            output: raw("1"),
            started_at: Some(at),
        };
        let (events, update, consume) = match op {
            Op::Step { consume, .. } => {
                let oldest = (self.model.signals.get(&id).into_iter().flatten())
                    .find(|s| s.consumed_seq.is_none())
                    .map(|s| s.id);
                let consume = consume.then(|| oldest.unwrap_or(SignalId(9_999)));
                (vec![step], RunUpdate::Progress, consume)
            }
            Op::Sleep { ms, .. } => {
                let wake_at = Some(Timestamp::from_millis(self.now + i64::from(*ms)));
                let reason = SuspendReason::Sleeping;
                (vec![step], RunUpdate::Suspend { reason, wake_at, signals_after: None, now: at }, None)
            }
            Op::Wait { any, timeout, .. } => {
                let wake_at = timeout.map(|ms| Timestamp::from_millis(self.now + i64::from(ms)));
                let newest = self.model.signals.values().flatten().map(|s| s.id).max();
                let after = if *any { SignalId(0) } else { newest.unwrap_or(SignalId(0)) };
                let reason = SuspendReason::Waiting;
                (vec![step], RunUpdate::Suspend { reason, wake_at, signals_after: Some(after), now: at }, None)
            }
            Op::Finish { failed: true, .. } => {
                let (error, status) = (Some("boom".to_owned()), RunStatus::Failed);
                (
                    vec![Event::Failed { error: "boom".into() }],
                    RunUpdate::Finish { status, output: None, error, at },
                    None,
                )
            }
            Op::Finish { .. } => {
                let (output, status) = (Some(raw("7")), RunStatus::Completed);
                (
                    vec![Event::Completed { output: raw("7") }],
                    RunUpdate::Finish { status, output, error: None, at },
                    None,
                )
            }
            Op::Continue { .. } => {
                // It goes on as the same workflow, with the same input.
                let run = self.model.runs.get(&id);
                let workflow = run.map_or_else(|| crate::support::workflow(WORKFLOWS[0]), |r| r.workflow.clone());
                let input = run.map_or_else(|| raw(r#"{"k":"0"}"#), |r| r.input.clone());
                let successor = NewRun {
                    continued_from: Some(id.clone()),
                    ..NewRun::new(self.new_id(), workflow, 1, input.clone(), at)
                };
                let event = Event::Continued { run: successor.id.to_string(), input };
                (vec![event], RunUpdate::Continue { successor: Box::new(successor), at }, None)
            }
            Op::Release { .. } => (vec![], RunUpdate::Release, None),
            _ => (vec![], RunUpdate::Park { error: "nondeterminism".into() }, None),
        };
        let ends_hold = !matches!(update, RunUpdate::Progress);
        let append = Append {
            run_id: id.clone(),
            epoch,
            after_seq,
            events,
            at,
            update,
            consume_signal: consume,
            batched: false,
        };
        let operation = match op {
            Op::Step { .. } => Operation::Progress,
            Op::Sleep { .. } | Op::Wait { .. } => Operation::Suspend,
            Op::Finish { .. } => Operation::Finish,
            Op::Continue { .. } => Operation::Continue,
            Op::Release { .. } => Operation::Release,
            _ => Operation::Park,
        };
        let model = self.model.append(append.clone());
        self.touched.push((id.clone(), operation, done(&model)));
        let mut store_append = append;
        store_append.consume_signal =
            (store_append.consume_signal).map(|model_id| self.signal_ids.get(&model_id).copied().unwrap_or(model_id));
        if let RunUpdate::Suspend { signals_after: Some(after), .. } = &mut store_append.update {
            *after = self.signal_ids.get(after).copied().unwrap_or(*after);
        }
        let store = self.store.append(store_append).await;
        if ends_hold && model.is_ok() {
            self.held.retain(|(held, ..)| *held != id);
        }
        (outcome(&model), outcome(&store))
    }

    /// Compares everything observable.
    async fn compare(&self) -> Result<(), String> {
        let filter = RunFilter { limit: Some(1_000), ..RunFilter::default() };
        let listed = self.store.list_runs(&filter).await.map_err(|e| format!("list_runs: {e}"))?;
        let model = self.model.list();
        let ids = |runs: &[RunRecord]| runs.iter().map(|r| r.id.to_string()).collect::<Vec<_>>();
        if ids(&model) != ids(&listed.runs) {
            return Err(format!("listed runs differ:\n  model: {:?}\n  store: {:?}", ids(&model), ids(&listed.runs)));
        }
        for (want, got) in model.iter().zip(&listed.runs) {
            let (want, got) = (comparable(want), comparable(got));
            if want != got {
                return Err(format!("run records differ:\n  model: {want}\n  store: {got}"));
            }
        }
        for (id, signals) in &self.model.signals {
            let want: Vec<_> = signals.iter().map(|s| (s.name.clone(), s.consumed_seq)).collect();
            let got = self.store.signals(id).await.map_err(|e| format!("signals: {e}"))?;
            let got: Vec<_> = got.iter().map(|s| (s.name.clone(), s.consumed_seq)).collect();
            if want != got {
                return Err(format!("signals of {id} differ:\n  model: {want:?}\n  store: {got:?}"));
            }
        }
        let counts = self.store.workflow_counts().await.map_err(|e| format!("workflow_counts: {e}"))?;
        let mut counts: Vec<_> = counts.into_iter().map(|c| (c.workflow, c.status, c.runs)).collect();
        counts.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
        if counts != self.model.workflow_counts() {
            return Err(format!(
                "workflow counts differ:\n  model: {:?}\n  store: {counts:?}",
                self.model.workflow_counts()
            ));
        }
        let versions = self.store.version_counts().await.map_err(|e| format!("version_counts: {e}"))?;
        let mut versions: Vec<_> = versions.into_iter().map(|c| (c.key, c.runs)).collect();
        versions.sort();
        if versions != self.model.version_counts() {
            return Err(format!(
                "version counts differ:\n  model: {:?}\n  store: {versions:?}",
                self.model.version_counts()
            ));
        }
        let all = keys(2);
        let wake = self.store.next_wake_at(&all).await.map_err(|e| format!("next_wake_at: {e}"))?;
        if wake != self.model.next_wake_at(&all) {
            return Err(format!(
                "next wake-up differs:\n  model: {:?}\n  store: {wake:?}",
                self.model.next_wake_at(&all)
            ));
        }
        Ok(())
    }
}

/// A run record as text, every field included.
fn comparable(run: &RunRecord) -> String {
    // Rare fields all unset are the same whether boxed or not.
    let mut run = run.clone();
    run.set_rare(run.rare().clone());
    format!("{run:?}")
}
