//! A light client of Cairn's HTTP API: start, read, signal and steer the runs of a
//! `cairn serve` (or of any server mounting `cairn_http::router`) from Rust, without compiling
//! the engine or any store.
//!
//! A service that only triggers workflows and reads their results depends on this crate alone
//! (the "trigger-only" package other durable-execution systems ship); the workers that execute
//! the workflows run elsewhere, with `cairn`. Requests and answers are the API's own types
//! ([`cairn_api`]), so what this client returns is what `cairn runs … --json` prints.
//!
//! ```no_run
//! # async fn example() -> Result<(), cairn_client::Error> {
//! use cairn_client::{Client, StartOptions};
//! let cairn = Client::new("http://127.0.0.1:7700", std::env::var("CAIRN_TOKEN").ok())?;
//! let options = StartOptions {
//!     input: Some(serde_json::value::to_raw_value(&serde_json::json!({"name": "Ada"})).expect("JSON")),
//!     idempotency_key: Some("greet-ada".into()),
//!     ..StartOptions::default()
//! };
//! let started = cairn.start("hello", &options).await?;
//! let greeting: String = cairn.result_as(&started.run.id, std::time::Duration::from_secs(30)).await?;
//! println!("{greeting}");
//! # Ok(()) }
//! ```
//!
//! Every method is one route of the API (two for those that name a run by id alone: the
//! first reads the run to find its workflow). A refused request is [`Error::Api`] with the
//! API's stable `code` (`run_not_found`, `invalid_workflow_name`, …) and HTTP status.

mod error;
mod transport;

pub use error::Error;

pub use cairn_api::views::{
    EventPage, EventRunView, EventView, ListedRun, Outcome, Pruned, PublishedEvent, Restarted, RunDetail, RunPage,
    ScheduleView, Schedules, SignalSent, Signals, StartedRun, Steps, Workers, Workflows,
};
pub use cairn_api::{DebounceOptions, PruneBody, PublishBody, RestartBody, ScheduleBody, StartOptions};
pub use transport::encode;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::time::Duration;
use transport::Transport;

/// Which runs [`Client::list`] reads: every field optional, as the list route's parameters.
#[derive(Debug, Clone, Default)]
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
    /// The query string (without `?`).
    fn to_query(&self) -> String {
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
        params.extend(given.iter().filter_map(|(k, v)| v.as_deref().map(|v| pair(k, v))));
        if self.stranded {
            params.push("stranded=true".into());
        }
        for (field, value) in &self.input {
            params.push(format!("{}={}", encode(&format!("input.{field}")), encode(value)));
        }
        params.join("&")
    }
}

/// `name=value`, the value percent-encoded.
fn pair(name: &str, value: &str) -> String {
    format!("{name}={}", encode(value))
}

/// A query string of the parameters given (`?a=1&b=2`), or nothing when none is.
fn query_of(given: &[(&str, Option<&str>)]) -> String {
    let pairs: Vec<String> = given.iter().filter_map(|(name, value)| value.map(|v| pair(name, v))).collect();
    if pairs.is_empty() { String::new() } else { format!("?{}", pairs.join("&")) }
}

/// A client of one server's API. Cheap to share (`Arc` it); connections are kept open and
/// reused between requests.
pub struct Client {
    transport: Transport,
}

impl Client {
    /// A client of the API at `url` (`http://host:port` or `https://host:port`, the port
    /// optional; `https` checks the server's certificate against the system's roots, or those
    /// `SSL_CERT_FILE` names; optionally with the path it is mounted
    /// under), sending `token` as its bearer token when given (an empty token is none).
    pub fn new(url: &str, token: Option<String>) -> Result<Client, Error> {
        Ok(Client { transport: Transport::new(url, token)? })
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        path: &str,
        body: Option<String>,
    ) -> Result<T, Error> {
        self.transport.call(method, path, body).await
    }

    /// `method path` with `body` as its JSON body.
    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: &'static str,
        path: &str,
        body: &B,
    ) -> Result<T, Error> {
        let json = serde_json::to_string(body).map_err(|source| Error::Request {
            method,
            path: path.to_owned(),
            source: source.into(),
        })?;
        self.call(method, path, Some(json)).await
    }

    /// Starts a run of `workflow` (`POST /v1/workflows/{name}/runs`); `created` is false when an
    /// idempotency key or a debounce key found an existing run.
    pub async fn start(&self, workflow: &str, options: &StartOptions) -> Result<StartedRun, Error> {
        self.send("POST", &format!("/v1/workflows/{}/runs", encode(workflow)), options).await
    }

    /// One run (`GET /v1/runs/{id}`).
    pub async fn get(&self, id: &str) -> Result<RunDetail, Error> {
        self.call("GET", &format!("/v1/runs/{}", encode(id)), None).await
    }

    /// The path of run `id`'s routes (`/v1/workflows/{name}/runs/{id}`), read from the run.
    async fn run_path(&self, id: &str) -> Result<String, Error> {
        let run = self.get(id).await?;
        Ok(route(&run.listed.run.workflow, id))
    }

    /// A page of runs, newest first (`GET /v1/workflows/{name}/runs` for one workflow,
    /// `GET /v1/runs` across them).
    pub async fn list(&self, query: &ListQuery) -> Result<RunPage, Error> {
        match &query.workflow {
            Some(workflow) => {
                let query = ListQuery { workflow: None, ..query.clone() };
                let path = format!("/v1/workflows/{}/runs?{}", encode(workflow), query.to_query());
                self.call("GET", &path, None).await
            }
            None => self.call("GET", &format!("/v1/runs?{}", query.to_query()), None).await,
        }
    }

    /// Each step of run `id` over time, its journal and its durable values.
    pub async fn steps(&self, id: &str) -> Result<Steps, Error> {
        let path = self.run_path(id).await?;
        self.call("GET", &format!("{path}/steps"), None).await
    }

    /// [`steps`](Self::steps) of run `id` of `workflow`, in one request.
    pub async fn steps_of(&self, workflow: &str, id: &str) -> Result<Steps, Error> {
        self.call("GET", &format!("{}/steps", route(workflow, id)), None).await
    }

    /// Run `id`'s signals, buffered and consumed.
    pub async fn signals(&self, id: &str) -> Result<Signals, Error> {
        let path = self.run_path(id).await?;
        self.call("GET", &format!("{path}/signals"), None).await
    }

    /// [`signals`](Self::signals) of run `id` of `workflow`, in one request.
    pub async fn signals_of(&self, workflow: &str, id: &str) -> Result<Signals, Error> {
        self.call("GET", &format!("{}/signals", route(workflow, id)), None).await
    }

    /// Delivers signal `event` with `payload` to run `id`.
    pub async fn signal(&self, id: &str, event: &str, payload: &RawValue) -> Result<SignalSent, Error> {
        let path = self.run_path(id).await?;
        self.call("POST", &format!("{path}/signals/{}", encode(event)), Some(payload.get().to_owned())).await
    }

    /// Cancels run `id` (a run executing on a worker stops at its next heartbeat).
    pub async fn cancel(&self, id: &str) -> Result<Outcome, Error> {
        self.cancel_with(id, None).await
    }

    /// [`cancel`](Self::cancel) for `reason` (1 to 1,000 characters), journaled in the run's
    /// `cancelled` event and shown as its error.
    pub async fn cancel_because(&self, id: &str, reason: &str) -> Result<Outcome, Error> {
        self.cancel_with(id, Some(reason)).await
    }

    async fn cancel_with(&self, id: &str, reason: Option<&str>) -> Result<Outcome, Error> {
        let path = self.run_path(id).await?;
        self.call("DELETE", &format!("{path}{}", query_of(&[("reason", reason)])), None).await
    }

    /// Pauses run `id` (at its next step boundary, if it is executing).
    pub async fn pause(&self, id: &str) -> Result<Outcome, Error> {
        let path = self.run_path(id).await?;
        self.call("POST", &format!("{path}/pause"), None).await
    }

    /// Resumes paused run `id`.
    pub async fn resume(&self, id: &str) -> Result<Outcome, Error> {
        let path = self.run_path(id).await?;
        self.call("POST", &format!("{path}/resume"), None).await
    }

    /// Starts a new run that replays run `id`'s journal up to `from_step` and runs again from it.
    pub async fn restart(&self, id: &str, from_step: &str) -> Result<Restarted, Error> {
        self.restart_with(id, from_step, None).await
    }

    /// [`restart`](Self::restart) for `reason` (1 to 1,000 characters), journaled in the new
    /// run's `started` event.
    pub async fn restart_because(&self, id: &str, from_step: &str, reason: &str) -> Result<Restarted, Error> {
        self.restart_with(id, from_step, Some(reason)).await
    }

    async fn restart_with(&self, id: &str, from_step: &str, reason: Option<&str>) -> Result<Restarted, Error> {
        let path = self.run_path(id).await?;
        let body = RestartBody { from_step: from_step.to_owned(), reason: reason.map(str::to_owned) };
        self.send("POST", &format!("{path}/restart"), &body).await
    }

    /// Run `id` once it has ended or is paused, or as it is when `wait` (at most 5 minutes)
    /// passed first.
    pub async fn result(&self, id: &str, wait: Duration) -> Result<RunDetail, Error> {
        let path = self.run_path(id).await?;
        self.call("GET", &format!("{path}/result?timeout={}ms", wait.as_millis()), None).await
    }

    /// [`result`](Self::result) of run `id` of `workflow`, in one request (a start's answer
    /// names both).
    pub async fn result_of(&self, workflow: &str, id: &str, wait: Duration) -> Result<RunDetail, Error> {
        self.call("GET", &format!("{}/result?timeout={}ms", route(workflow, id), wait.as_millis()), None).await
    }

    /// Run `id`'s output decoded as `T`, once it has completed; [`Error::NotCompleted`] if it
    /// ended otherwise or had not ended within `wait`.
    pub async fn result_as<T: DeserializeOwned>(&self, id: &str, wait: Duration) -> Result<T, Error> {
        let run = self.result(id, wait).await?;
        if run.listed.run.status != "completed" {
            return Err(Error::NotCompleted {
                run: id.to_owned(),
                status: run.listed.run.status,
                error: run.listed.run.error,
            });
        }
        serde_json::from_value(run.output).map_err(|source| Error::Decode {
            method: "GET",
            path: format!("/v1/runs/{}", encode(id)),
            source,
        })
    }

    /// Publishes an event to `topic`: one run per workflow subscribed to it.
    pub async fn publish(&self, topic: &str, event: &PublishBody) -> Result<PublishedEvent, Error> {
        self.send("POST", &format!("/v1/events/{}", encode(topic)), event).await
    }

    /// A page of the published events (newest first, each with the runs it started): those to
    /// `topic` when given, after `cursor` (a page's `next_cursor`), at most `limit` (1 to 1,000;
    /// default 100).
    pub async fn events(
        &self,
        topic: Option<&str>,
        cursor: Option<&str>,
        limit: Option<usize>,
    ) -> Result<EventPage, Error> {
        let limit = limit.map(|n| n.to_string());
        let query = query_of(&[("topic", topic), ("cursor", cursor), ("limit", limit.as_deref())]);
        self.call("GET", &format!("/v1/events{query}"), None).await
    }

    /// Deletes ended runs past their retention (or older than `olderThan`), or lists them
    /// (`dryRun`).
    pub async fn prune(&self, prune: &PruneBody) -> Result<Pruned, Error> {
        self.send("POST", "/v1/runs/prune", prune).await
    }

    /// Every workflow with runs, with its counts by status.
    pub async fn workflows(&self) -> Result<Workflows, Error> {
        self.call("GET", "/v1/workflows", None).await
    }

    /// The live workers, and the workflow versions no live worker serves.
    pub async fn workers(&self) -> Result<Workers, Error> {
        self.call("GET", "/v1/workers", None).await
    }

    /// Every schedule.
    pub async fn schedules(&self) -> Result<Schedules, Error> {
        self.call("GET", "/v1/schedules", None).await
    }

    /// Schedule `name`.
    pub async fn schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.call("GET", &format!("/v1/schedules/{}", encode(name)), None).await
    }

    /// Creates or replaces schedule `name`.
    pub async fn put_schedule(&self, name: &str, schedule: &ScheduleBody) -> Result<ScheduleView, Error> {
        self.send("PUT", &format!("/v1/schedules/{}", encode(name)), schedule).await
    }

    /// Deletes schedule `name` (its runs stay).
    pub async fn delete_schedule(&self, name: &str) -> Result<(), Error> {
        self.call::<serde::de::IgnoredAny>("DELETE", &format!("/v1/schedules/{}", encode(name)), None).await?;
        Ok(())
    }

    /// Pauses schedule `name`.
    pub async fn pause_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.call("POST", &format!("/v1/schedules/{}/pause", encode(name)), None).await
    }

    /// Resumes schedule `name` from its next firing after now.
    pub async fn resume_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.call("POST", &format!("/v1/schedules/{}/resume", encode(name)), None).await
    }

    /// Starts a run of schedule `name` now.
    pub async fn trigger_schedule(&self, name: &str) -> Result<StartedRun, Error> {
        self.call("POST", &format!("/v1/schedules/{}/trigger", encode(name)), None).await
    }
}

/// The path of run `id` of `workflow`: `/v1/workflows/{name}/runs/{id}`.
fn route(workflow: &str, id: &str) -> String {
    format!("/v1/workflows/{}/runs/{}", encode(workflow), encode(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_queries_encode_every_field() {
        let query = ListQuery {
            workflow: Some("order flow".into()),
            status: Some("failed".into()),
            stranded: true,
            input: vec![("address.city".into(), "Oslo".into())],
            limit: Some(5),
            ..ListQuery::default()
        };
        assert_eq!(
            query.to_query(),
            "limit=5&workflow=order%20flow&status=failed&stranded=true&input.address.city=Oslo"
        );
        assert_eq!(ListQuery::default().to_query(), "");
    }

    #[test]
    fn api_errors_keep_their_code() {
        let error = Error::Api { status: 404, code: "run_not_found".into(), message: "no run".into() };
        assert_eq!((error.code(), error.to_string().as_str()), (Some("run_not_found"), "no run"));
        let bare = Error::Api { status: 502, code: String::new(), message: "bad gateway".into() };
        assert_eq!(bare.code(), None);
    }
}
