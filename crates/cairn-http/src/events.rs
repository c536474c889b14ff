//! The handlers of published events: publish one, list those recorded with the runs they started.

use crate::error::{Answer, ApiError, ErrorBody};
use crate::extract::{ApiQuery, JsonOrDefault, Named};
use crate::input::EventParams;
use crate::state::Api;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use cairn_api::views::{EventPage, PublishedEvent};
use cairn_api::{EventQuery, Operations, PublishBody, routes};

#[utoipa::path(post, path = routes::EVENT, tag = "events",
    params(("topic" = String, Path, description = "Topic, e.g. `user.signup`")),
    request_body = PublishBody,
    responses(
        (status = 201, description = "Runs were started", body = PublishedEvent),
        (status = 200, description = "No run started: no subscriber, or the id was published before", body = PublishedEvent),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn publish(
    State(api): State<Api>,
    Named(topic): Named,
    JsonOrDefault(body): JsonOrDefault<PublishBody>,
) -> Result<(StatusCode, Json<PublishedEvent>), ApiError> {
    let published = Operations::publish(&api.client, &topic, &body).await?;
    let status = if published.runs.is_empty() { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(published)))
}

#[utoipa::path(get, path = routes::EVENTS, tag = "events",
    description = "Published events, newest first, a page at a time (`next_cursor`), each with the runs it started. \
        Events are kept as long as a run is by default (30 days).",
    params(EventParams),
    responses((status = 200, body = EventPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_events(State(api): State<Api>, ApiQuery(params): ApiQuery<EventParams>) -> Answer<EventPage> {
    let query = EventQuery { topic: params.topic, cursor: params.cursor, limit: params.limit };
    Ok(Json(Operations::events(&api.client, &query).await?))
}
