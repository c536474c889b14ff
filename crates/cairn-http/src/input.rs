//! What requests carry: the bodies and parameters, and the checks of names, ids, times and
//! JSON bodies.

use crate::error::ApiError;
use crate::state::Api;
use cairn::store::{EventName, WorkflowName};
use cairn::{ClientError, RunId, RunRecord};
use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};

/// A workflow name from a path, checked as `Client` checks it ([`WorkflowName`]).
pub(crate) fn workflow_name(name: &str) -> Result<&str, ApiError> {
    WorkflowName::check(name).map_err(|error| ApiError::from(ClientError::InvalidName(error)))?;
    Ok(name)
}

/// An event name from a path, checked as `Client` checks it ([`EventName`]).
pub(crate) fn event_name(name: &str) -> Result<&str, ApiError> {
    EventName::check(name).map_err(|error| ApiError::from(ClientError::InvalidName(error)))?;
    Ok(name)
}

pub(crate) fn run_id(id: &str) -> Result<RunId, ApiError> {
    RunId::validate(id).map_err(|error| ApiError::bad_request("invalid_run_id", error.to_string()))
}

/// The run `id` of workflow `name` (a run of another workflow is not found under this one).
pub(crate) async fn run_of(api: &Api, name: &str, id: &str) -> Result<RunRecord, ApiError> {
    let (name, id) = (workflow_name(name)?, run_id(id)?);
    let run = api.client.get(&id).await?;
    if run.workflow != name {
        return Err(ClientError::RunNotFound(id).into());
    }
    Ok(run)
}

/// JSON from a request body: malformed JSON or wrong types are `400`.
pub(crate) fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| ApiError::bad_request("invalid_json", error.to_string()))
}

/// What `POST /v1/workflows/{name}/runs` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StartBody {
    /// The run's input (default `null`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub(crate) input: Option<Box<RawValue>>,
    /// The run's id (default: a new UUIDv7).
    pub(crate) id: Option<String>,
    /// Starting again with the same key returns the existing run.
    pub(crate) idempotency_key: Option<String>,
    /// The workflow version (default: the newest the server's worker registered).
    pub(crate) version: Option<u32>,
    /// Days to keep the run once it has ended (default: the workflow's, or 30).
    pub(crate) retention_days: Option<u32>,
    /// Ready runs of a higher priority are claimed first (default 0).
    pub(crate) priority: Option<i32>,
    /// Within a priority, ready runs are served fairly between keys (a tenant, a customer).
    pub(crate) fairness_key: Option<String>,
    /// Debounce the start: starts with the same key collapse into one run with the latest
    /// input (the answer is then `200` with that run).
    pub(crate) debounce: Option<DebounceBody>,
}

/// A start's `debounce`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DebounceBody {
    /// Starts of the workflow with equal keys collapse (1 to 200 bytes).
    key: String,
    /// How long the key must be quiet before the run begins (`2s`, `500ms`, `5m`).
    quiet: String,
    /// The latest the run begins after the window's first start (default: no limit).
    max_wait: Option<String>,
}

impl DebounceBody {
    /// The debounce asked for; a duration that does not parse is `400 invalid_debounce`.
    pub(crate) fn parse(self) -> Result<cairn::Debounce, ApiError> {
        let duration = |name: &str, text: &str| {
            humantime::parse_duration(text).map_err(|_| {
                ApiError::bad_request(
                    "invalid_debounce",
                    format!("debounce {name} {text:?} is not a duration (try `2s`)"),
                )
            })
        };
        let mut debounce = cairn::Debounce::new(self.key, duration("quiet", &self.quiet)?);
        if let Some(max_wait) = &self.max_wait {
            debounce = debounce.max_wait(duration("maxWait", max_wait)?);
        }
        Ok(debounce)
    }
}

/// What `POST /v1/events/{topic}` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishBody {
    /// The event's id (default: a new UUIDv7). Publishing an id again starts no run it started.
    pub(crate) id: Option<String>,
    /// The event's payload, each started run's input (default `null`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub(crate) payload: Option<Box<RawValue>>,
}

/// What `POST /v1/runs/prune` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PruneBody {
    /// Also delete every ended run that ended longer ago than this (`90d`, `12h`), whatever its
    /// retention.
    pub(crate) older_than: Option<String>,
    /// List what would be deleted, deleting nothing.
    #[serde(default)]
    pub(crate) dry_run: bool,
}

/// What `POST …/restart` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RestartBody {
    /// The step (or scope) to run again from, as the journal names it.
    pub(crate) from_step: String,
}

/// The query of the list routes.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only this workflow (`/v1/runs` only).
    pub(crate) workflow: Option<String>,
    /// Only this status.
    pub(crate) status: Option<String>,
    /// Created at or after (RFC 3339).
    pub(crate) since: Option<String>,
    /// Created before (RFC 3339).
    pub(crate) until: Option<String>,
    /// From a page's `next_cursor`.
    pub(crate) cursor: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    pub(crate) limit: Option<usize>,
    /// Only stranded runs: pending, running or suspended while no live worker serves their
    /// workflow version.
    pub(crate) stranded: Option<bool>,
    /// `input.<field>=<value>` (repeatable; `<field>` may be a dotted path): only runs whose
    /// input contains `{"<field>": <value>}`, the value read as JSON when it is JSON
    /// (`input.customer=42`, `input.vip=true`) and as a string otherwise (`input.city=Oslo`).
    /// Any other parameter is refused.
    #[serde(flatten)]
    #[param(ignore)]
    pub(crate) rest: std::collections::BTreeMap<String, String>,
}

pub(crate) fn timestamp(name: &str, text: &str) -> Result<cairn::Timestamp, ApiError> {
    humantime::parse_rfc3339_weak(text).map(cairn::Timestamp::from_system_time).map_err(|error| {
        ApiError::bad_request("invalid_query", format!("{name} {text:?} is not an RFC 3339 time: {error}"))
    })
}

/// What `GET …/result` takes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResultParams {
    /// How long to wait for the run to end (`30s`, `5m`; default 30 s, at most 5 minutes).
    pub(crate) timeout: Option<String>,
}
