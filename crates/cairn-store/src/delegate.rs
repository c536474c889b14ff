//! The `Store` methods that wrapping stores ([`CountingStore`](crate::CountingStore),
//! [`FaultyStore`](crate::FaultyStore)) pass on one by one, listed once, by the trait that has
//! them.

/// Calls `$wrap! { fn …; … }` with every method of the store trait `$trait` but `append` (which
/// a wrapper may look into) and the two that are not calls (`wakeups`, `notices`).
macro_rules! store_methods {
    (RunStore, $wrap:ident) => {
        $wrap! {
            fn create_run(&self, run: NewRun) -> StoreFuture<'_, CreatedRun>;
            fn get_run<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Option<RunRecord>>;
            fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> StoreFuture<'a, RunPage>;
            fn count_runs<'a>(&'a self, filter: &'a RunFilter, at_most: u64) -> StoreFuture<'a, u64>;
            fn claim<'a>(&'a self, request: &'a ClaimRequest) -> StoreFuture<'a, Vec<RunRecord>>;
            fn heartbeat<'a>(&'a self, request: &'a HeartbeatRequest) -> StoreFuture<'a, Vec<LeaseStatus>>;
            fn cancel(&self, request: ControlRequest) -> StoreFuture<'_, CancelOutcome>;
            fn pause(&self, request: ControlRequest) -> StoreFuture<'_, PauseOutcome>;
            fn resume(&self, request: ResumeRequest) -> StoreFuture<'_, ()>;
            fn start_with_signal(&self, run: NewRun, signal: StartSignal) -> StoreFuture<'_, (CreatedRun, SignalId)>;
            fn prune(&self, request: PruneRequest) -> StoreFuture<'_, Vec<RunId>>;
            fn version_counts(&self) -> StoreFuture<'_, Vec<VersionCount>>;
            fn workflow_counts(&self) -> StoreFuture<'_, Vec<WorkflowCount>>;
            fn next_wake_at<'a>(&'a self, workflows: &'a [WorkflowKey]) -> StoreFuture<'a, Option<Timestamp>>;
        }
    };
    (JournalStore, $wrap:ident) => {
        $wrap! {
            fn read_journal<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<JournalEntry>>;
            fn read_journal_through<'a>(&'a self, id: &'a RunId, last_seq: u64) -> StoreFuture<'a, Vec<JournalEntry>>;
        }
    };
    (SignalStore, $wrap:ident) => {
        $wrap! {
            fn signals<'a>(&'a self, id: &'a RunId) -> StoreFuture<'a, Vec<SignalRecord>>;
            fn send_signal(&self, signal: NewSignal) -> StoreFuture<'_, SignalId>;
        }
    };
    (ScheduleStore, $wrap:ident) => {
        $wrap! {
            fn put_schedule<'a>(&'a self, schedule: &'a PutSchedule) -> StoreFuture<'a, ScheduleRecord>;
            fn schedules(&self) -> StoreFuture<'_, Vec<ScheduleRecord>>;
            fn due_schedules<'a>(&'a self, workflows: &'a [String], now: Timestamp, limit: usize) -> StoreFuture<'a, Vec<ScheduleRecord>>;
            fn fire_schedule(&self, fire: FireSchedule) -> StoreFuture<'_, Option<Vec<CreatedRun>>>;
            fn pause_schedule<'a>(&'a self, change: &'a PauseSchedule) -> StoreFuture<'a, ScheduleRecord>;
            fn delete_schedule<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool>;
        }
    };
    (FlowStore, $wrap:ident) => {
        $wrap! {
            fn put_concurrency<'a>(&'a self, rule: &'a ConcurrencyRule) -> StoreFuture<'a, ()>;
            fn delete_concurrency<'a>(&'a self, workflow: &'a str) -> StoreFuture<'a, bool>;
            fn concurrency_rules(&self) -> StoreFuture<'_, Vec<ConcurrencyRule>>;
            fn take_rate<'a>(&'a self, take: &'a TakeRate) -> StoreFuture<'a, Option<Timestamp>>;
        }
    };
    (EventStore, $wrap:ident) => {
        $wrap! {
            fn record_event<'a>(&'a self, event: &'a EventRecord) -> StoreFuture<'a, ()>;
            fn events<'a>(&'a self, query: &'a EventQuery) -> StoreFuture<'a, EventPage>;
            fn set_subscriptions<'a>(&'a self, request: &'a SetSubscriptions) -> StoreFuture<'a, ()>;
            fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>>;
        }
    };
    (WorkerStore, $wrap:ident) => {
        $wrap! {
            fn record_worker<'a>(&'a self, worker: &'a WorkerRecord) -> StoreFuture<'a, ()>;
            fn workers(&self) -> StoreFuture<'_, Vec<WorkerRecord>>;
            fn forget_workers<'a>(&'a self, request: &'a ForgetWorkers) -> StoreFuture<'a, u64>;
            fn record_served<'a>(&'a self, serves: &'a [WorkflowKey], at: Timestamp) -> StoreFuture<'a, ()>;
            fn served_workflows(&self) -> StoreFuture<'_, Vec<ServedWorkflow>>;
        }
    };
}
