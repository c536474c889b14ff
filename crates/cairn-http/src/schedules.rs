//! The schedules' routes: list, put, show, pause, resume, trigger and delete.

use crate::error::{Answer, ApiError, ErrorBody};
use crate::extract::{ApiJson, Named};
use crate::state::Api;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use cairn_api::views::{ScheduleView, Schedules, StartedRun};
use cairn_api::{Operations, ScheduleBody, routes};

#[utoipa::path(get, path = routes::SCHEDULES, tag = "schedules",
    responses((status = 200, body = Schedules), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_schedules(State(api): State<Api>) -> Answer<Schedules> {
    Ok(Json(Operations::schedules(&api.client).await?))
}

#[utoipa::path(put, path = routes::SCHEDULE, tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    request_body = ScheduleBody,
    responses((status = 200, description = "Created or updated", body = ScheduleView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "Unknown workflow or time zone", body = ErrorBody)))]
pub(crate) async fn put_schedule(
    State(api): State<Api>,
    Named(name): Named,
    ApiJson(body): ApiJson<ScheduleBody>,
) -> Answer<ScheduleView> {
    Ok(Json(Operations::put_schedule(&api.client, &name, &body).await?))
}

#[utoipa::path(get, path = routes::SCHEDULE, tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 200, body = ScheduleView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn show_schedule(State(api): State<Api>, Named(name): Named) -> Answer<ScheduleView> {
    Ok(Json(Operations::schedule(&api.client, &name).await?))
}

#[utoipa::path(delete, path = routes::SCHEDULE, tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 204, description = "Deleted (its runs stay)"), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_schedule(State(api): State<Api>, Named(name): Named) -> Result<StatusCode, ApiError> {
    Operations::delete_schedule(&api.client, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = routes::SCHEDULE_PAUSE, tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 200, body = ScheduleView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn pause_schedule(State(api): State<Api>, Named(name): Named) -> Answer<ScheduleView> {
    Ok(Json(Operations::pause_schedule(&api.client, &name).await?))
}

#[utoipa::path(post, path = routes::SCHEDULE_RESUME, tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 200, description = "Resumed from its next firing after now", body = ScheduleView),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn resume_schedule(State(api): State<Api>, Named(name): Named) -> Answer<ScheduleView> {
    Ok(Json(Operations::resume_schedule(&api.client, &name).await?))
}

#[utoipa::path(post, path = routes::SCHEDULE_TRIGGER, tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 201, description = "A run started now", body = StartedRun), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn trigger_schedule(
    State(api): State<Api>,
    Named(name): Named,
) -> Result<(StatusCode, Json<StartedRun>), ApiError> {
    Ok((StatusCode::CREATED, Json(Operations::trigger_schedule(&api.client, &name).await?)))
}
