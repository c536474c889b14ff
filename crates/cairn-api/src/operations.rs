//! The operations on runs, defined once: [`Operations`] is what the embedded `cairn::Client`
//! does in process and what the light client `cairn_client::Client` does over HTTP, with the
//! same requests and the same answers. The HTTP API serves the embedded implementation, and the
//! `cairn` command runs each of its commands over either one, so an operation is written once
//! per side, not once per edge.
//!
//! ```
//! use cairn_api::views::Outcome;
//! use cairn_api::{CancelOptions, Operations};
//! // Code written against the trait runs in process or against a server alike.
//! async fn cancel_all<O: Operations>(ops: &O, ids: &[&str]) -> Result<Vec<Outcome>, O::Error> {
//!     let mut outcomes = Vec::new();
//!     for id in ids {
//!         outcomes.push(ops.cancel(id, &CancelOptions::because("superseded")).await?);
//!     }
//!     Ok(outcomes)
//! }
//! ```

use crate::requests::{BulkBody, PruneBody, PublishBody, RestartBody, ScheduleBody, StartOptions};
use crate::routes::encode;
use crate::views::{
    BulkResult, EventPage, Outcome, Pruned, PublishedEvent, Restarted, RunCount, RunDetail, RunPage, ScheduleView,
    Schedules, SignalSent, Signals, StartedRun, Steps, Workers, Workflows,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::future::Future;
use std::time::Duration;

/// What an operation's error says in the API's terms.
pub trait Coded {
    /// The API's stable snake_case code (`run_not_found`, `run_finished`, …) when the operation
    /// was refused or failed with one; `None` when it got no answer (a server out of reach).
    fn code(&self) -> Option<&str>;
}

/// Which runs a list reads: every field optional, as the list route's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only this workflow.
    pub workflow: Option<String>,
    /// Only this status (`running`, `completed`, …).
    pub status: Option<String>,
    /// Created at or after (RFC 3339).
    pub since: Option<String>,
    /// Created before (RFC 3339).
    pub until: Option<String>,
    /// Only stranded runs.
    pub stranded: bool,
    /// Only runs whose id starts with this text.
    pub id_prefix: Option<String>,
    /// Only runs whose error holds this text (ASCII case ignored).
    pub error: Option<String>,
    /// `(field, value)` input filters: only runs whose input has `value` at `field` (a dotted
    /// path; the value read as JSON when it is JSON).
    pub input: Vec<(String, String)>,
    /// From a page's `next_cursor`.
    pub cursor: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    pub limit: Option<usize>,
}

impl ListQuery {
    /// The query string of `GET /v1/runs` (without `?`), every value percent-encoded.
    ///
    /// ```
    /// let query = cairn_api::ListQuery {
    ///     status: Some("failed".into()),
    ///     input: vec![("address.city".into(), "Oslo".into())],
    ///     limit: Some(5),
    ///     ..Default::default()
    /// };
    /// assert_eq!(query.to_query(), "limit=5&status=failed&input.address.city=Oslo");
    /// ```
    pub fn to_query(&self) -> String {
        let mut params = Vec::new();
        if let Some(limit) = self.limit {
            params.push(format!("limit={limit}"));
        }
        let given = [
            ("workflow", &self.workflow),
            ("status", &self.status),
            ("since", &self.since),
            ("until", &self.until),
            ("cursor", &self.cursor),
            ("id_prefix", &self.id_prefix),
            ("error", &self.error),
        ];
        params.extend(given.iter().filter_map(|(k, v)| v.as_deref().map(|v| format!("{k}={}", encode(v)))));
        if self.stranded {
            params.push("stranded=true".into());
        }
        for (field, value) in &self.input {
            params.push(format!("{}={}", encode(&format!("input.{field}")), encode(value)));
        }
        params.join("&")
    }
}

/// Which published events [`Operations::events`] reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    /// Only events published to this topic.
    pub topic: Option<String>,
    /// From a page's `next_cursor`.
    pub cursor: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    pub limit: Option<usize>,
}

/// How to cancel a run: `CancelOptions::default()`, or [`because`](Self::because) a reason. The
/// query parameters of `DELETE /v1/runs/{id}`, as the server reads them and the light client
/// writes them ([`to_query`](Self::to_query)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CancelOptions {
    /// Why: journaled in the run's `cancelled` event and shown as its error, 1 to 1,000
    /// characters (`cancelled` when none is given).
    pub reason: Option<String>,
}

impl CancelOptions {
    /// A cancel for `reason`.
    pub fn because(reason: impl Into<String>) -> Self {
        CancelOptions { reason: Some(reason.into()) }
    }

    /// Its query string, with its `?` (empty without a reason).
    ///
    /// ```
    /// use cairn_api::CancelOptions;
    /// assert_eq!(CancelOptions::because("wrong customer").to_query(), "?reason=wrong%20customer");
    /// assert_eq!(CancelOptions::default().to_query(), "");
    /// ```
    pub fn to_query(&self) -> String {
        reason_query(self.reason.as_deref())
    }
}

/// `?reason=…`, or nothing without a reason.
fn reason_query(reason: Option<&str>) -> String {
    reason.map(|reason| format!("?reason={}", encode(reason))).unwrap_or_default()
}

/// How to pause a run: `PauseOptions::default()`, or [`because`](Self::because) a reason. The
/// query parameters of `POST /v1/runs/{id}/pause`, as the server reads them and the light client
/// writes them ([`to_query`](Self::to_query)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PauseOptions {
    /// Why: shown as the paused run's error, 1 to 1,000 characters (`paused by request` when
    /// none is given). A running run keeps it until its worker parks it.
    pub reason: Option<String>,
}

impl PauseOptions {
    /// A pause for `reason`.
    pub fn because(reason: impl Into<String>) -> Self {
        PauseOptions { reason: Some(reason.into()) }
    }

    /// Its query string, with its `?` (empty without a reason).
    pub fn to_query(&self) -> String {
        reason_query(self.reason.as_deref())
    }
}

/// Which workers [`Operations::workers`] lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkersQuery {
    /// Every worker the store recorded, not only the live ones.
    pub all: bool,
}

impl WorkersQuery {
    /// Every recorded worker, live or not.
    pub fn all() -> Self {
        WorkersQuery { all: true }
    }
}

/// What a `Future` of an operation answers.
type Answer<T, E> = Result<T, E>;

/// The operations on runs, events, workers and schedules, with the API's requests and answers.
/// The embedded `cairn::Client` implements it in process (the HTTP API serves that
/// implementation), and the light client `cairn_client::Client` implements it over HTTP, one
/// request per operation.
///
/// A run is named by its id alone; an operation that does not apply to it (a resume of a run
/// that is not paused) fails with the API's code (`not_paused`), and changes nothing.
pub trait Operations: Send + Sync {
    /// What an operation fails with.
    type Error: std::error::Error + Coded + Send + Sync + 'static;

    /// Starts a run of `workflow` (`created` is false when an idempotency key or a debounce key
    /// found an existing run).
    fn start(
        &self,
        workflow: &str,
        options: &StartOptions,
    ) -> impl Future<Output = Answer<StartedRun, Self::Error>> + Send;

    /// Run `id`.
    fn get(&self, id: &str) -> impl Future<Output = Answer<RunDetail, Self::Error>> + Send;

    /// A page of runs, newest first.
    fn list(&self, query: &ListQuery) -> impl Future<Output = Answer<RunPage, Self::Error>> + Send;

    /// How many runs `query` selects (its `limit` aside), counting up to `at_most` (1 to
    /// 100,000; default 10,000).
    fn count(
        &self,
        query: &ListQuery,
        at_most: Option<u64>,
    ) -> impl Future<Output = Answer<RunCount, Self::Error>> + Send;

    /// Cancels, pauses or resumes the newest runs `bulk.filter` selects (at most `bulk.limit`),
    /// each as its own operation would, and says what happened to each.
    fn bulk(&self, bulk: &BulkBody) -> impl Future<Output = Answer<BulkResult, Self::Error>> + Send;

    /// Run `id`'s steps over time, its journal and its durable values.
    fn steps(&self, id: &str) -> impl Future<Output = Answer<Steps, Self::Error>> + Send;

    /// Run `id`'s signals, buffered and consumed.
    fn signals(&self, id: &str) -> impl Future<Output = Answer<Signals, Self::Error>> + Send;

    /// Delivers signal `event` with `payload` to run `id`.
    fn signal(
        &self,
        id: &str,
        event: &str,
        payload: &RawValue,
    ) -> impl Future<Output = Answer<SignalSent, Self::Error>> + Send;

    /// Cancels run `id` (a run executing on a worker stops at its next heartbeat).
    fn cancel(&self, id: &str, options: &CancelOptions) -> impl Future<Output = Answer<Outcome, Self::Error>> + Send;

    /// Pauses run `id` (at its next step boundary, if it is executing).
    fn pause(&self, id: &str, options: &PauseOptions) -> impl Future<Output = Answer<Outcome, Self::Error>> + Send;

    /// Resumes paused run `id`.
    fn resume(&self, id: &str) -> impl Future<Output = Answer<Outcome, Self::Error>> + Send;

    /// Starts a new run that replays ended run `id`'s journal up to `restart.from_step` and
    /// runs again from it.
    fn restart(&self, id: &str, restart: &RestartBody) -> impl Future<Output = Answer<Restarted, Self::Error>> + Send;

    /// Run `id` once it has ended or is paused, or as it is when `wait` (at most 5 minutes)
    /// passed first.
    fn result(&self, id: &str, wait: Duration) -> impl Future<Output = Answer<RunDetail, Self::Error>> + Send;

    /// A page of published events, newest first, each with the runs it started.
    fn events(&self, query: &EventQuery) -> impl Future<Output = Answer<EventPage, Self::Error>> + Send;

    /// Publishes an event to `topic`: one run per workflow subscribed to it.
    fn publish(
        &self,
        topic: &str,
        event: &PublishBody,
    ) -> impl Future<Output = Answer<PublishedEvent, Self::Error>> + Send;

    /// Deletes ended runs past their retention (or older than `older_than`), or lists them
    /// (`dry_run`).
    fn prune(&self, prune: &PruneBody) -> impl Future<Output = Answer<Pruned, Self::Error>> + Send;

    /// [`prune`](Self::prune), calling `report` with the number of runs of each batch deleted
    /// where the implementation deletes in batches it can see (the embedded one does; over
    /// HTTP the server's batches are not seen, and `report` is not called).
    fn prune_reporting(
        &self,
        prune: &PruneBody,
        report: &mut (dyn FnMut(usize) + Send),
    ) -> impl Future<Output = Answer<Pruned, Self::Error>> + Send {
        let _ = report;
        self.prune(prune)
    }

    /// Every workflow with runs or served by a worker, with its counts by status.
    fn workflows(&self) -> impl Future<Output = Answer<Workflows, Self::Error>> + Send;

    /// The workers (live ones unless `query.all`) and the workflow versions no live worker
    /// serves.
    fn workers(&self, query: WorkersQuery) -> impl Future<Output = Answer<Workers, Self::Error>> + Send;

    /// Every schedule.
    fn schedules(&self) -> impl Future<Output = Answer<Schedules, Self::Error>> + Send;

    /// Schedule `name`.
    fn schedule(&self, name: &str) -> impl Future<Output = Answer<ScheduleView, Self::Error>> + Send;

    /// Creates or replaces schedule `name`.
    fn put_schedule(
        &self,
        name: &str,
        schedule: &ScheduleBody,
    ) -> impl Future<Output = Answer<ScheduleView, Self::Error>> + Send;

    /// Deletes schedule `name` (its runs stay).
    fn delete_schedule(&self, name: &str) -> impl Future<Output = Answer<(), Self::Error>> + Send;

    /// Pauses schedule `name`.
    fn pause_schedule(&self, name: &str) -> impl Future<Output = Answer<ScheduleView, Self::Error>> + Send;

    /// Resumes schedule `name` from its next firing after now.
    fn resume_schedule(&self, name: &str) -> impl Future<Output = Answer<ScheduleView, Self::Error>> + Send;

    /// Starts a run of schedule `name` now.
    fn trigger_schedule(&self, name: &str) -> impl Future<Output = Answer<StartedRun, Self::Error>> + Send;
}
