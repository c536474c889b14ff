//! A store that fails chosen calls to another, for tests of what a run, a worker and a client do
//! when the store fails.

use crate::store::{EventStore, FlowStore, JournalStore, RunStore, ScheduleStore, SignalStore, WorkerStore};
use crate::store::{Notice, Store, StoreFuture};
use crate::types::{
    Append, CancelOutcome, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, EventPage, EventQuery,
    EventRecord, FireSchedule, ForgetWorkers, HeartbeatRequest, LeaseStatus, NewRun, NewSignal, PauseOutcome,
    PauseSchedule, PruneRequest, PutSchedule, ResumeRequest, RunFilter, RunId, RunPage, RunRecord, ScheduleRecord,
    ServedWorkflow, SetSubscriptions, SignalRecord, StartSignal, StoreError, Subscription, TakeRate, VersionCount,
    WorkerRecord, WorkflowCount, WorkflowKey,
};
use cairn_journal::{JournalEntry, SignalId, Timestamp};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// When an injected fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The call never reaches the store (a connection refused, a write that failed): nothing
    /// changes, and the caller gets the error.
    Before,
    /// The call reaches the store and takes effect, but its answer is lost (a connection reset
    /// after the commit): the caller gets the error though the change was made.
    After,
}

/// Which append an [`Faults::fail_append_when`] fault strikes.
type AppendMatch = Box<dyn Fn(&Append) -> bool + Send>;

#[derive(Default)]
struct Plan {
    /// Calls so far, by method.
    calls: BTreeMap<&'static str, u64>,
    /// Faults armed by method: the call number (1 = the next call after arming, counted from
    /// the arming) and the fault. Each strikes once.
    by_call: Vec<(&'static str, u64, Fault)>,
    /// Faults armed on appends that match, each striking once.
    appends: Vec<(AppendMatch, Fault)>,
    /// Faults that struck, by method.
    struck: BTreeMap<&'static str, u64>,
}

/// The faults armed on a [`FaultyStore`], shared by its clones and this handle.
#[derive(Clone, Default)]
pub struct Faults(Arc<Mutex<Plan>>);

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plan = self.lock();
        f.debug_struct("Faults").field("calls", &plan.calls).field("struck", &plan.struck).finish()
    }
}

impl Faults {
    /// Fails the `nth` call of `method` from now on (1: the next one) with `fault`.
    pub fn fail_nth(&self, method: &'static str, nth: u64, fault: Fault) {
        let mut plan = self.lock();
        let now = plan.calls.get(method).copied().unwrap_or(0);
        plan.by_call.push((method, now + nth.max(1), fault));
    }

    /// Fails the first append from now on that `matches` with `fault`.
    pub fn fail_append_when(&self, matches: impl Fn(&Append) -> bool + Send + 'static, fault: Fault) {
        self.lock().appends.push((Box::new(matches), fault));
    }

    /// How many injected faults struck calls of `method`.
    pub fn struck(&self, method: &str) -> u64 {
        self.lock().struck.get(method).copied().unwrap_or(0)
    }

    /// How many times `method` was called.
    pub fn calls(&self, method: &str) -> u64 {
        self.lock().calls.get(method).copied().unwrap_or(0)
    }

    /// Counts a call of `method` and the fault that strikes it, if one does.
    fn strike(&self, method: &'static str, append: Option<&Append>) -> Option<Fault> {
        let mut plan = self.lock();
        let call = {
            let calls = plan.calls.entry(method).or_default();
            *calls += 1;
            *calls
        };
        let by_call = plan.by_call.iter().position(|(m, n, _)| *m == method && *n == call);
        let fault = match by_call {
            Some(index) => Some(plan.by_call.remove(index).2),
            None => append.and_then(|append| {
                let index = plan.appends.iter().position(|(matches, _)| matches(append))?;
                Some(plan.appends.remove(index).1)
            }),
        };
        if fault.is_some() {
            *plan.struck.entry(method).or_default() += 1;
        }
        fault
    }

    fn lock(&self) -> MutexGuard<'_, Plan> {
        // The plan is only counted and taken from: a poisoned one is still consistent.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The error an injected fault answers with: what a lost connection looks like.
fn injected(method: &str, fault: Fault) -> StoreError {
    let when = match fault {
        Fault::Before => "before it reached the store",
        Fault::After => "after the store took it (its answer was lost)",
    };
    StoreError::backend(format!("injected fault: `{method}` failed {when}"))
}

/// A store that passes every call to `inner` except those a fault is armed for (see [`Faults`]):
/// for tests of what a run, a worker and a client do when the store fails mid-append,
/// mid-claim or mid-finish. Every fault answers [`StoreError::Backend`], as a lost connection
/// does.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use cairn_store::{Fault, FaultyStore, MemoryStore, RunId, RunStore};
/// let store = FaultyStore::new(MemoryStore::new());
/// store.faults().fail_nth("get_run", 2, Fault::Before);
/// let id = RunId::new("nope");
/// assert!(store.get_run(&id).await.is_ok());
/// assert!(store.get_run(&id).await.is_err(), "the second call fails");
/// assert!(store.get_run(&id).await.is_ok(), "once");
/// # });
/// ```
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    faults: Faults,
}

impl<S: Store> FaultyStore<S> {
    /// Passes calls to `inner`; no fault is armed yet.
    pub fn new(inner: S) -> FaultyStore<S> {
        FaultyStore { inner, faults: Faults::default() }
    }

    /// The faults (shared with this store: arm them at any time).
    pub fn faults(&self) -> Faults {
        self.faults.clone()
    }
}

/// The answer to a call `method` that `fault` strikes (or not): the call, passed on by `call`,
/// is not made (`Before`), or made and its answer replaced by the error (`After`).
fn answer<'a, T: Send + 'a>(
    method: &'static str,
    fault: Option<Fault>,
    call: impl FnOnce() -> StoreFuture<'a, T>,
) -> StoreFuture<'a, T> {
    match fault {
        None => call(),
        Some(Fault::Before) => Box::pin(async move { Err(injected(method, Fault::Before)) }),
        Some(Fault::After) => {
            let pending = call();
            Box::pin(async move {
                let _ = pending.await;
                Err(injected(method, Fault::After))
            })
        }
    }
}

/// Each method counts itself, then fails if a fault strikes it, or asks the inner store.
macro_rules! faulty {
    ($( fn $name:ident $(<$a:lifetime>)? (&$($sa:lifetime)? self $(, $arg:ident: $ty:ty)*) -> $out:ty; )*) => {
        $(
            fn $name $(<$a>)? (&$($sa)? self $(, $arg: $ty)*) -> $out {
                let method = stringify!($name);
                answer(method, self.faults.strike(method, None), || self.inner.$name($($arg),*))
            }
        )*
    };
}

impl<S: Store> RunStore for FaultyStore<S> {
    store_methods!(RunStore, faulty);
}

impl<S: Store> JournalStore for FaultyStore<S> {
    store_methods!(JournalStore, faulty);

    fn append(&self, append: Append) -> StoreFuture<'_, ()> {
        let fault = self.faults.strike("append", Some(&append));
        answer("append", fault, || self.inner.append(append))
    }
}

impl<S: Store> SignalStore for FaultyStore<S> {
    store_methods!(SignalStore, faulty);
}

impl<S: Store> ScheduleStore for FaultyStore<S> {
    store_methods!(ScheduleStore, faulty);
}

impl<S: Store> FlowStore for FaultyStore<S> {
    store_methods!(FlowStore, faulty);
}

impl<S: Store> EventStore for FaultyStore<S> {
    store_methods!(EventStore, faulty);
}

impl<S: Store> WorkerStore for FaultyStore<S> {
    store_methods!(WorkerStore, faulty);

    fn wakeups(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.wakeups()
    }

    fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        self.inner.notices()
    }
}
