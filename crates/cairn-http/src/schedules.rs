//! The schedules' routes: list, put, show, pause, resume, trigger and delete.

use crate::error::{Answer, ApiError, ErrorBody};
use crate::input::object;
use crate::state::Api;
use crate::views;
use crate::views::{ScheduleBody, ScheduleView, Schedules, StartedRun, schedule_view};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;

#[utoipa::path(get, path = "/v1/schedules", tag = "schedules",
    responses((status = 200, body = Schedules), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_schedules(State(api): State<Api>) -> Answer<Schedules> {
    let schedules = api.client.schedules().await?;
    Ok(Json(Schedules { schedules: schedules.iter().map(schedule_view).collect() }))
}

#[utoipa::path(put, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    request_body = ScheduleBody,
    responses((status = 200, description = "Created or updated", body = ScheduleView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "Unknown workflow or time zone", body = ErrorBody)))]
pub(crate) async fn put_schedule(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<ScheduleView> {
    let Path(name) = path?;
    let body: ScheduleBody = object(&body?)?;
    let schedule =
        views::schedule(&body, &name).map_err(|message| ApiError::bad_request("invalid_schedule", message))?;
    Ok(Json(schedule_view(&api.client.put_schedule(&schedule).await?)))
}

#[utoipa::path(get, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 200, body = ScheduleView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn show_schedule(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
) -> Answer<ScheduleView> {
    let Path(name) = path?;
    Ok(Json(schedule_view(&api.client.schedule(&name).await?)))
}

#[utoipa::path(delete, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 204, description = "Deleted (its runs stay)"), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_schedule(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path(name) = path?;
    api.client.delete_schedule(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/schedules/{name}/pause", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 200, body = ScheduleView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn pause_schedule(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
) -> Answer<ScheduleView> {
    let Path(name) = path?;
    Ok(Json(schedule_view(&api.client.pause_schedule(&name).await?)))
}

#[utoipa::path(post, path = "/v1/schedules/{name}/resume", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 200, description = "Resumed from its next firing after now", body = ScheduleView),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn resume_schedule(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
) -> Answer<ScheduleView> {
    let Path(name) = path?;
    Ok(Json(schedule_view(&api.client.resume_schedule(&name).await?)))
}

#[utoipa::path(post, path = "/v1/schedules/{name}/trigger", tag = "schedules",
    params(("name" = String, Path, description = "Schedule name")),
    responses((status = 201, description = "A run started now", body = StartedRun), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn trigger_schedule(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
) -> Result<(StatusCode, Json<StartedRun>), ApiError> {
    let Path(name) = path?;
    let started = api.client.trigger_schedule(&name).await?;
    Ok((StatusCode::CREATED, Json(views::started(&started))))
}
