//! A store that counts the calls made to another.

use crate::store::{EventStore, FlowStore, JournalStore, RunStore, ScheduleStore, SignalStore, WorkerStore};
use crate::store::{Notice, Store, StoreFuture};
use crate::types::{
    Append, CancelOutcome, ClaimRequest, ConcurrencyRule, ControlRequest, CreatedRun, EventPage, EventQuery,
    EventRecord, FireSchedule, ForgetWorkers, HeartbeatRequest, LeaseStatus, NewRun, NewSignal, PauseOutcome,
    PauseSchedule, PruneRequest, PutSchedule, ResumeRequest, RunFilter, RunId, RunPage, RunRecord, ScheduleRecord,
    ServedWorkflow, SetSubscriptions, SignalRecord, StartSignal, Subscription, TakeRate, VersionCount, WorkerRecord,
    WorkflowCount, WorkflowKey,
};
use cairn_journal::{JournalEntry, SignalId, Timestamp};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// How many times each [`Store`] method of a [`CountingStore`] was called, by name; clones
/// share the counts.
#[derive(Debug, Clone, Default)]
pub struct Calls(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Calls {
    /// The calls of the method named `method` so far.
    pub fn of(&self, method: &str) -> u64 {
        self.lock().get(method).copied().unwrap_or(0)
    }

    /// Every method called so far, with its calls.
    pub fn all(&self) -> BTreeMap<&'static str, u64> {
        self.lock().clone()
    }

    fn add(&self, method: &'static str) {
        *self.lock().entry(method).or_default() += 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, u64>> {
        // A count is only ever incremented: a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A store that passes every call to `inner` and counts it: for tests and diagnostics that check
/// how often a worker or a client reads the store (a claim loop, a result waiter).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use cairn_store::{CountingStore, MemoryStore, RunId, RunStore};
/// let store = CountingStore::new(MemoryStore::new());
/// let calls = store.calls();
/// store.get_run(&RunId::new("nope")).await.unwrap();
/// assert_eq!((calls.of("get_run"), calls.of("claim")), (1, 0));
/// # });
/// ```
#[derive(Debug)]
pub struct CountingStore<S> {
    inner: S,
    calls: Calls,
}

impl<S: Store> CountingStore<S> {
    /// Counts the calls made to `inner`.
    pub fn new(inner: S) -> CountingStore<S> {
        CountingStore { inner, calls: Calls::default() }
    }

    /// The counts (shared with this store: they go on counting).
    pub fn calls(&self) -> Calls {
        self.calls.clone()
    }
}

/// Each method counts itself, then asks the inner store.
macro_rules! counted {
    ($( fn $name:ident $(<$a:lifetime>)? (&$($sa:lifetime)? self $(, $arg:ident: $ty:ty)*) -> $out:ty; )*) => {
        $(
            fn $name $(<$a>)? (&$($sa)? self $(, $arg: $ty)*) -> $out {
                self.calls.add(stringify!($name));
                self.inner.$name($($arg),*)
            }
        )*
    };
}

impl<S: Store> RunStore for CountingStore<S> {
    store_methods!(RunStore, counted);
}

impl<S: Store> JournalStore for CountingStore<S> {
    store_methods!(JournalStore, counted);

    fn append(&self, append: Append) -> StoreFuture<'_, ()> {
        self.calls.add("append");
        self.inner.append(append)
    }
}

impl<S: Store> SignalStore for CountingStore<S> {
    store_methods!(SignalStore, counted);
}

impl<S: Store> ScheduleStore for CountingStore<S> {
    store_methods!(ScheduleStore, counted);
}

impl<S: Store> FlowStore for CountingStore<S> {
    store_methods!(FlowStore, counted);
}

impl<S: Store> EventStore for CountingStore<S> {
    store_methods!(EventStore, counted);
}

impl<S: Store> WorkerStore for CountingStore<S> {
    store_methods!(WorkerStore, counted);

    fn wakeups(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.inner.wakeups()
    }

    fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        self.inner.notices()
    }
}
