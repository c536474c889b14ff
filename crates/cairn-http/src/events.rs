//! The handlers of published events: publish one, list those recorded with the runs they started.

use crate::error::{Answer, ApiError, ErrorBody};
use crate::input::{EventParams, object};
use crate::runs::page_limit;
use crate::state::Api;
use crate::views::{self, EventPage, PublishedEvent};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use cairn::store::{EventCursor, EventQuery};
use cairn_api::PublishBody;
use serde_json::value::RawValue;

#[utoipa::path(post, path = "/v1/events/{topic}", tag = "events",
    params(("topic" = String, Path, description = "Topic, e.g. `user.signup`")),
    request_body = PublishBody,
    responses(
        (status = 201, description = "Runs were started", body = PublishedEvent),
        (status = 200, description = "No run started: no subscriber, or the id was published before", body = PublishedEvent),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn publish(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<PublishedEvent>), ApiError> {
    let Path(topic) = path?;
    let body = body?;
    let body: PublishBody = object(if body.is_empty() { b"{}" } else { &body })?;
    let payload = body.payload.unwrap_or_else(|| RawValue::NULL.to_owned());
    let mut publish = api.client.publish(&topic, &*payload);
    if let Some(id) = body.id {
        publish = publish.id(id);
    }
    let published = views::published(&topic, &publish.await?);
    let status = if published.runs.is_empty() { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(published)))
}

#[utoipa::path(get, path = "/v1/events", tag = "events",
    description = "Published events, newest first, a page at a time (`next_cursor`), each with the runs it started. \
        Events are kept as long as a run is by default (30 days).",
    params(EventParams),
    responses((status = 200, body = EventPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_events(
    State(api): State<Api>,
    params: Result<Query<EventParams>, QueryRejection>,
) -> Answer<EventPage> {
    let Query(params) = params?;
    let cursor = params
        .cursor
        .as_deref()
        .map(|text| {
            EventCursor::decode(text).map_err(|error| ApiError::bad_request("invalid_cursor", error.to_string()))
        })
        .transpose()?;
    let query = EventQuery { topic: params.topic, cursor, limit: page_limit(params.limit)? };
    Ok(Json(views::event_page(&api.client.events(&query).await?)))
}
