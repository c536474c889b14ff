//! What handlers take from a request, each refused with the API's own error body and code (as
//! axum's `customize-extractor-error` example does it), so no handler unwraps a rejection:
//! [`RunPath`] (a run named by a route, checked against the workflow the route names),
//! [`Named`] (a route's one name), [`ApiJson`] and [`JsonOrDefault`] (JSON object bodies),
//! [`Payload`] (any JSON) and [`ApiQuery`] (parameters).

use crate::error::ApiError;
use crate::state::Api;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use cairn::ClientError;
use cairn::store::WorkflowName;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::collections::HashMap;

/// The run a route names: by id (`/v1/runs/{id}…`), or under its workflow
/// (`/v1/workflows/{name}/runs/{id}…`), where a run of another workflow is not found.
pub(crate) struct RunPath {
    /// The run's id, checked.
    pub(crate) id: String,
    /// The route's `{event}`, where it names one.
    pub(crate) event: Option<String>,
}

impl FromRequestParts<Api> for RunPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Api) -> Result<Self, ApiError> {
        let Path(mut params) = Path::<HashMap<String, String>>::from_request_parts(parts, api).await?;
        let (name, id) = (params.remove("name"), params.remove("id").unwrap_or_default());
        if let Some(name) = &name {
            WorkflowName::check(name).map_err(ClientError::InvalidName)?;
        }
        let run = cairn::api::run_id(&id)?;
        if let Some(name) = name {
            let found = api.client.get(&run).await?;
            if found.workflow != name {
                return Err(ClientError::RunNotFound(run).into());
            }
        }
        Ok(RunPath { id, event: params.remove("event") })
    }
}

/// A route's one `{…}` parameter (a workflow, a topic, a schedule).
pub(crate) struct Named(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for Named {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(name) = Path::<String>::from_request_parts(parts, state).await?;
        Ok(Named(name))
    }
}

/// A body that must be a JSON object of `T` (serde would also read a struct from an array of
/// its fields): malformed JSON, another shape or wrong types are `400 invalid_json`.
pub(crate) struct ApiJson<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let body = Bytes::from_request(request, state).await?;
        Ok(ApiJson(object(&body)?))
    }
}

/// [`ApiJson`], reading an empty body as `T`'s default (a start, a publish, a prune).
pub(crate) struct JsonOrDefault<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for JsonOrDefault<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let body = Bytes::from_request(request, state).await?;
        Ok(JsonOrDefault(if body.is_empty() { T::default() } else { object(&body)? }))
    }
}

/// A body of any JSON (a signal's payload); empty is `null`.
pub(crate) struct Payload(pub(crate) Box<RawValue>);

impl<S: Send + Sync> FromRequest<S> for Payload {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let body = Bytes::from_request(request, state).await?;
        Ok(Payload(parse(if body.is_empty() { b"null" } else { &body })?))
    }
}

/// A route's query parameters as `T`: one that is unknown or of the wrong type is
/// `400 invalid_query`.
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(query) = Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(query))
    }
}

/// JSON from a request body: malformed JSON or wrong types are `400`.
pub(crate) fn parse<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| ApiError::bad_request("invalid_json", error.to_string()))
}

/// A body that is a JSON object (serde would also read a struct from an array of its fields).
fn object<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => parse(body),
        _ => Err(ApiError::bad_request("invalid_json", "the body must be a JSON object")),
    }
}
