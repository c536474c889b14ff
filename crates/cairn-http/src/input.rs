//! What requests carry: the bodies and parameters, and the checks of names, ids, times and
//! JSON bodies.

use crate::error::ApiError;
use crate::state::Api;
use cairn::store::{EventName, WorkflowName};
use cairn::{ClientError, RunId, RunRecord};
use serde::Deserialize;
use utoipa::IntoParams;

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

/// A body that is a JSON object (serde would also read a struct from an array of its fields).
pub(crate) fn object<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => parse(body),
        _ => Err(ApiError::bad_request("invalid_json", "the body must be a JSON object")),
    }
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
    /// Only runs whose id starts with this text.
    pub(crate) id_prefix: Option<String>,
    /// Only runs whose error holds this text, ignoring the case of ASCII letters.
    pub(crate) error: Option<String>,
    /// `input.<field>=<value>` (repeatable; `<field>` may be a dotted path): only runs whose
    /// input contains `{"<field>": <value>}`, the value read as JSON when it is JSON
    /// (`input.customer=42`, `input.vip=true`) and as a string otherwise (`input.city=Oslo`).
    /// Any other parameter is refused.
    #[serde(flatten)]
    #[param(ignore)]
    pub(crate) rest: std::collections::BTreeMap<String, String>,
}

/// A time given as RFC 3339 (`2026-11-26T10:00:00Z`, `2026-11-26T11:00:00+01:00`), or without
/// an offset, read as UTC (`2026-11-26 10:00:00`).
pub(crate) fn timestamp(name: &str, text: &str) -> Result<cairn::Timestamp, ApiError> {
    if let Ok(at) = text.parse::<jiff::Timestamp>() {
        return Ok(cairn::Timestamp::from_millis(at.as_millisecond()));
    }
    humantime::parse_rfc3339_weak(text).map(cairn::Timestamp::from_system_time).map_err(|error| {
        ApiError::bad_request("invalid_query", format!("{name} {text:?} is not an RFC 3339 time: {error}"))
    })
}

/// What `GET /v1/events` takes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventParams {
    /// Only events published to this topic.
    pub(crate) topic: Option<String>,
    /// From a page's `next_cursor`.
    pub(crate) cursor: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    pub(crate) limit: Option<usize>,
}

/// What `DELETE …/runs/{id}` (a cancel) takes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct CancelParams {
    /// Why: journaled in the run's `cancelled` event and shown as its error, 1 to 1,000
    /// characters (default `cancelled`).
    pub(crate) reason: Option<String>,
}

/// What `GET …/result` takes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResultParams {
    /// How long to wait for the run to end (`30s`, `5m`; default 30 s, at most 5 minutes).
    pub(crate) timeout: Option<String>,
}
