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
//! use cairn_client::{Client, Operations, StartOptions};
//! let cairn = Client::new("http://127.0.0.1:7700", std::env::var("CAIRN_TOKEN").ok())?;
//! let options = StartOptions {
//!     input: Some(serde_json::value::to_raw_value(&serde_json::json!({"name": "Ada"})).expect("JSON")),
//!     idempotency_key: Some("greet-ada".into()),
//!     ..StartOptions::default()
//! };
//! let started = cairn.start("hello", &options).await?; // an `Operations` method
//! let greeting: String = cairn.result_as(&started.run.id, std::time::Duration::from_secs(30)).await?;
//! println!("{greeting}");
//! # Ok(()) }
//! ```
//!
//! Its operations are [`Operations`], the trait the embedded `cairn::Client` implements too, so
//! code written against it runs in process or against a server alike. Each is one request to
//! the route [`cairn_api::routes`] names (the server registers the same text); a run is named by
//! its id alone. A refused request is [`Error::Api`] with the API's stable `code`
//! (`run_not_found`, `invalid_workflow_name`, …) and HTTP status.

mod error;
mod transport;

pub use error::Error;

pub use cairn_api::routes::encode;
pub use cairn_api::views::{
    BulkResult, BulkRun, EventPage, EventRunView, EventView, ListedRun, Outcome, Pruned, PublishedEvent, Restarted,
    RunCount, RunDetail, RunPage, ScheduleView, Schedules, SignalSent, Signals, StartedRun, Steps, Workers, Workflows,
};
pub use cairn_api::{
    BulkAction, BulkBody, BulkFilter, CancelOptions, Coded, DebounceOptions, EventQuery, ListQuery, Operations,
    PauseOptions, PruneBody, PublishBody, RestartBody, ScheduleBody, StartOptions, WorkersQuery,
};

use cairn_api::routes::{self, path};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::time::Duration;
use transport::Transport;

/// A query string of the parameters given (`?a=1&b=2`), or nothing when none is.
fn query_of(given: &[(&str, Option<&str>)]) -> String {
    let pairs: Vec<String> =
        given.iter().filter_map(|(name, value)| value.map(|v| format!("{name}={}", encode(v)))).collect();
    if pairs.is_empty() { String::new() } else { format!("?{}", pairs.join("&")) }
}

/// A client of one server's API. Cheap to share (`Arc` it); connections are kept open and
/// reused between requests. Its operations are [`Operations`]'s (bring the trait into scope:
/// `use cairn_client::Operations;`).
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
        let json = serde_json::to_string(body).map_err(|cause| Error::Request {
            method,
            path: path.to_owned(),
            cause: cause.into(),
        })?;
        self.call(method, path, Some(json)).await
    }

    /// Run `id`'s output decoded as `T`, once it has completed; [`Error::NotCompleted`] if it
    /// ended otherwise or had not ended within `wait`.
    pub async fn result_as<T: DeserializeOwned>(&self, id: &str, wait: Duration) -> Result<T, Error> {
        let run = Operations::result(self, id, wait).await?;
        if run.listed.run.status != "completed" {
            return Err(Error::NotCompleted {
                run: id.to_owned(),
                status: run.listed.run.status.to_string(),
                error: run.listed.run.error,
            });
        }
        serde_json::from_value(run.output).map_err(|cause| Error::Decode {
            method: "GET",
            path: path(routes::RUN_RESULT, &[id]),
            cause,
        })
    }
}

/// Every operation is one request to the route [`cairn_api::routes`] names.
impl Operations for Client {
    type Error = Error;

    async fn start(&self, workflow: &str, options: &StartOptions) -> Result<StartedRun, Error> {
        self.send("POST", &path(routes::WORKFLOW_RUNS, &[workflow]), options).await
    }

    async fn get(&self, id: &str) -> Result<RunDetail, Error> {
        self.call("GET", &path(routes::RUN, &[id]), None).await
    }

    async fn list(&self, query: &ListQuery) -> Result<RunPage, Error> {
        self.call("GET", &format!("{}?{}", routes::RUNS, query.to_query()), None).await
    }

    async fn count(&self, query: &ListQuery, at_most: Option<u64>) -> Result<RunCount, Error> {
        let at_most = at_most.map(|n| format!("&at_most={n}")).unwrap_or_default();
        self.call("GET", &format!("{}?{}{at_most}", routes::RUN_COUNT, query.to_query()), None).await
    }

    async fn bulk(&self, bulk: &BulkBody) -> Result<BulkResult, Error> {
        self.send("POST", routes::BULK, bulk).await
    }

    async fn steps(&self, id: &str) -> Result<Steps, Error> {
        self.call("GET", &path(routes::RUN_STEPS, &[id]), None).await
    }

    async fn signals(&self, id: &str) -> Result<Signals, Error> {
        self.call("GET", &path(routes::RUN_SIGNALS, &[id]), None).await
    }

    async fn signal(&self, id: &str, event: &str, payload: &RawValue) -> Result<SignalSent, Error> {
        self.call("POST", &path(routes::RUN_SIGNAL, &[id, event]), Some(payload.get().to_owned())).await
    }

    async fn cancel(&self, id: &str, options: &CancelOptions) -> Result<Outcome, Error> {
        self.call("DELETE", &format!("{}{}", path(routes::RUN, &[id]), options.to_query()), None).await
    }

    async fn pause(&self, id: &str, options: &PauseOptions) -> Result<Outcome, Error> {
        self.call("POST", &format!("{}{}", path(routes::RUN_PAUSE, &[id]), options.to_query()), None).await
    }

    async fn resume(&self, id: &str) -> Result<Outcome, Error> {
        self.call("POST", &path(routes::RUN_RESUME, &[id]), None).await
    }

    async fn restart(&self, id: &str, restart: &RestartBody) -> Result<Restarted, Error> {
        self.send("POST", &path(routes::RUN_RESTART, &[id]), restart).await
    }

    async fn result(&self, id: &str, wait: Duration) -> Result<RunDetail, Error> {
        let path = format!("{}?timeout={}ms", path(routes::RUN_RESULT, &[id]), wait.as_millis());
        self.call("GET", &path, None).await
    }

    async fn events(&self, query: &EventQuery) -> Result<EventPage, Error> {
        let limit = query.limit.map(|n| n.to_string());
        let given =
            [("topic", query.topic.as_deref()), ("cursor", query.cursor.as_deref()), ("limit", limit.as_deref())];
        self.call("GET", &format!("{}{}", routes::EVENTS, query_of(&given)), None).await
    }

    async fn publish(&self, topic: &str, event: &PublishBody) -> Result<PublishedEvent, Error> {
        self.send("POST", &path(routes::EVENT, &[topic]), event).await
    }

    async fn prune(&self, prune: &PruneBody) -> Result<Pruned, Error> {
        self.send("POST", routes::PRUNE, prune).await
    }

    async fn workflows(&self) -> Result<Workflows, Error> {
        self.call("GET", routes::WORKFLOWS, None).await
    }

    async fn workers(&self, query: WorkersQuery) -> Result<Workers, Error> {
        let all = query.all.then_some("true");
        self.call("GET", &format!("{}{}", routes::WORKERS, query_of(&[("all", all)])), None).await
    }

    async fn schedules(&self) -> Result<Schedules, Error> {
        self.call("GET", routes::SCHEDULES, None).await
    }

    async fn schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.call("GET", &path(routes::SCHEDULE, &[name]), None).await
    }

    async fn put_schedule(&self, name: &str, schedule: &ScheduleBody) -> Result<ScheduleView, Error> {
        self.send("PUT", &path(routes::SCHEDULE, &[name]), schedule).await
    }

    async fn delete_schedule(&self, name: &str) -> Result<(), Error> {
        self.call::<serde::de::IgnoredAny>("DELETE", &path(routes::SCHEDULE, &[name]), None).await?;
        Ok(())
    }

    async fn pause_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.call("POST", &path(routes::SCHEDULE_PAUSE, &[name]), None).await
    }

    async fn resume_schedule(&self, name: &str) -> Result<ScheduleView, Error> {
        self.call("POST", &path(routes::SCHEDULE_RESUME, &[name]), None).await
    }

    async fn trigger_schedule(&self, name: &str) -> Result<StartedRun, Error> {
        self.call("POST", &path(routes::SCHEDULE_TRIGGER, &[name]), None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_keep_their_code() {
        let error = Error::Api { status: 404, code: "run_not_found".into(), message: "no run".into() };
        assert_eq!((error.code(), error.to_string().as_str()), (Some("run_not_found"), "no run"));
        let bare = Error::Api { status: 502, code: String::new(), message: "bad gateway".into() };
        assert_eq!(bare.code(), None);
    }
}
