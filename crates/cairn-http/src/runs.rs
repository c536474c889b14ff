//! The handlers of runs and workflows: start, list, count, show, steps, signals, signal,
//! cancel, pause, resume, restart, result, prune, bulk; workers and metrics. Each is the
//! embedded client's [`Operations`] with the request read and the answer written: a run's routes
//! are served by id (`/v1/runs/{id}…`) and, as the API first had them, under their workflow
//! (`routes::under_workflow`, registered in `routes.rs`).

use crate::error::{Answer, ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiQuery, JsonOrDefault, Named, Payload, RunPath};
use crate::input::{ListParams, ResultParams, WorkersParams};
use crate::state::Api;
use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use cairn_api::routes;
use cairn_api::views::{
    BulkResult, Outcome, Pruned, Restarted, RunCount, RunDetail, RunPage, SignalSent, Signals, StartedRun, Steps,
    Workers, Workflows,
};
use cairn_api::{
    BulkBody, CancelOptions, Operations, PauseOptions, PruneBody, RestartBody, StartOptions, WorkersQuery,
};
use std::time::Duration;

#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text format: runs, steps, signals, sweeps, claims and store \
        commits", content_type = "text/plain; version=0.0.4", body = String),
        (status = 401, body = ErrorBody), (status = 404, description = "No recorder configured", body = ErrorBody)))]
pub(crate) async fn prometheus(State(api): State<Api>) -> Result<Response, ApiError> {
    let metrics = api.metrics.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "metrics_disabled", "this server keeps no metrics (ApiConfig::metrics)")
    })?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], metrics.render()).into_response())
}

#[utoipa::path(post, path = routes::WORKFLOW_RUNS, tag = "runs",
    params(("name" = String, Path, description = "Workflow name")),
    request_body = StartOptions,
    responses(
        (status = 201, description = "Created", body = StartedRun),
        (status = 200, description = "An existing run with this idempotency key, or the debouncing run this start joined", body = StartedRun),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "Unknown workflow or version", body = ErrorBody),
        (status = 409, description = "The id is taken", body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn start(
    State(api): State<Api>,
    Named(name): Named,
    JsonOrDefault(options): JsonOrDefault<StartOptions>,
) -> Result<(StatusCode, Json<StartedRun>), ApiError> {
    let started = Operations::start(&api.client, &name, &options).await?;
    let status = if started.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(started)))
}

/// What the list routes say of their input filter (a parameter family OpenAPI cannot name).
const INPUT_FILTER: &str = "Newest first, a page at a time (`next_cursor`). Besides the parameters listed, \
    `input.<field>=<value>` (repeatable, `<field>` a dotted path) keeps only runs whose input contains \
    `{\"<field>\": <value>}`, the value read as JSON when it is JSON and as a string otherwise.";

#[utoipa::path(get, path = routes::WORKFLOW_RUNS, tag = "runs", description = INPUT_FILTER,
    params(("name" = String, Path, description = "Workflow name"), ListParams),
    responses((status = 200, body = RunPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_workflow(
    State(api): State<Api>,
    Named(name): Named,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Answer<RunPage> {
    if params.workflow.as_ref().is_some_and(|w| w != &name) {
        return Err(ApiError::bad_request("invalid_query", "`workflow` is given by the path here"));
    }
    Ok(Json(Operations::list(&api.client, &params.query(Some(name))?).await?))
}

#[utoipa::path(get, path = routes::RUNS, tag = "runs", description = INPUT_FILTER, params(ListParams),
    responses((status = 200, body = RunPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_all(State(api): State<Api>, ApiQuery(mut params): ApiQuery<ListParams>) -> Answer<RunPage> {
    let workflow = params.workflow.take();
    Ok(Json(Operations::list(&api.client, &params.query(workflow)?).await?))
}

/// Takes `at_most` out of a list query (whose other parameters are filters).
fn take_at_most(params: &mut ListParams) -> Result<Option<u64>, ApiError> {
    (params.rest.remove("at_most").map(|text| text.parse::<u64>().map_err(|_| text))).transpose().map_err(|text| {
        ApiError::bad_request("invalid_query", format!("at_most {text:?} is not a number from 1 to 100000"))
    })
}

#[utoipa::path(get, path = routes::RUN_COUNT, tag = "runs",
    description = "How many runs the list's filters select (`limit` aside; a `cursor` counts the runs after it). \
        `input.<field>=<value>` filters as on `GET /v1/runs`.",
    params(ListParams,
        ("at_most" = Option<u64>, Query, description = "Stop counting at this many runs, 1 to 100,000 (default 10,000)")),
    responses((status = 200, body = RunCount), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn count(State(api): State<Api>, ApiQuery(mut params): ApiQuery<ListParams>) -> Answer<RunCount> {
    let at_most = take_at_most(&mut params)?;
    let workflow = params.workflow.take();
    Ok(Json(Operations::count(&api.client, &params.query(workflow)?, at_most).await?))
}

#[utoipa::path(get, path = routes::WORKFLOWS, tag = "runs",
    responses((status = 200, body = Workflows), (status = 401, body = ErrorBody)))]
pub(crate) async fn workflows(State(api): State<Api>) -> Answer<Workflows> {
    Ok(Json(Operations::workflows(&api.client).await?))
}

#[utoipa::path(get, path = routes::RUN, tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunDetail), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn show_any(State(api): State<Api>, run: RunPath) -> Answer<RunDetail> {
    Ok(Json(Operations::get(&api.client, &run.id).await?))
}

#[utoipa::path(post, path = routes::PRUNE, tag = "runs",
    request_body = PruneBody,
    responses((status = 200, body = Pruned), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn prune(State(api): State<Api>, JsonOrDefault(body): JsonOrDefault<PruneBody>) -> Answer<Pruned> {
    Ok(Json(Operations::prune(&api.client, &body).await?))
}

#[utoipa::path(post, path = routes::BULK, tag = "runs",
    description = "Cancels, pauses or resumes the newest runs a filter selects (at most `limit`, 1 to 1,000), each \
        as its own route would, and says what happened to each. A run the action does not apply to (an ended run \
        to cancel, a run not paused to resume) is refused on its own; the others go on.",
    request_body = BulkBody,
    responses((status = 200, body = BulkResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn bulk(State(api): State<Api>, ApiJson(body): ApiJson<BulkBody>) -> Answer<BulkResult> {
    Ok(Json(Operations::bulk(&api.client, &body).await?))
}

#[utoipa::path(get, path = routes::RUN_RESULT, tag = "runs",
    params(("id" = String, Path, description = "Run id"), ResultParams),
    responses((status = 200, description = "The run once it has ended (completed, failed or cancelled) or is \
        paused, or as it is when the timeout passed first", body = RunDetail),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn result_any(
    State(api): State<Api>,
    run: RunPath,
    ApiQuery(params): ApiQuery<ResultParams>,
) -> Answer<RunDetail> {
    let wait = match params.timeout.as_deref() {
        Some(text) => humantime::parse_duration(text)
            .map_err(|error| ApiError::bad_request("invalid_query", format!("timeout {text:?}: {error}")))?,
        None => Duration::from_secs(30),
    };
    Ok(Json(Operations::result(&api.client, &run.id, wait).await?))
}

#[utoipa::path(get, path = routes::RUN_STEPS, tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Steps), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn steps_any(State(api): State<Api>, run: RunPath) -> Answer<Steps> {
    Ok(Json(Operations::steps(&api.client, &run.id).await?))
}

#[utoipa::path(get, path = routes::RUN_SIGNALS, tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Signals), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn signals_any(State(api): State<Api>, run: RunPath) -> Answer<Signals> {
    Ok(Json(Operations::signals(&api.client, &run.id).await?))
}

#[utoipa::path(post, path = routes::RUN_SIGNAL, tag = "runs",
    params(("id" = String, Path, description = "Run id"), ("event" = String, Path, description = "Signal name")),
    request_body(content = Value, description = "The payload, any JSON (empty: `null`)"),
    responses((status = 200, body = SignalSent), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody),
        (status = 413, body = ErrorBody)))]
pub(crate) async fn signal_any(State(api): State<Api>, run: RunPath, Payload(payload): Payload) -> Answer<SignalSent> {
    let event = run.event.unwrap_or_default();
    Ok(Json(Operations::signal(&api.client, &run.id, &event, &payload).await?))
}

#[utoipa::path(delete, path = routes::RUN, tag = "runs",
    params(("id" = String, Path, description = "Run id"), CancelOptions),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody)))]
pub(crate) async fn cancel_any(
    State(api): State<Api>,
    run: RunPath,
    ApiQuery(options): ApiQuery<CancelOptions>,
) -> Answer<Outcome> {
    Ok(Json(Operations::cancel(&api.client, &run.id, &options).await?))
}

#[utoipa::path(post, path = routes::RUN_PAUSE, tag = "runs",
    params(("id" = String, Path, description = "Run id"), PauseOptions),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody)))]
pub(crate) async fn pause_any(
    State(api): State<Api>,
    run: RunPath,
    ApiQuery(options): ApiQuery<PauseOptions>,
) -> Answer<Outcome> {
    Ok(Json(Operations::pause(&api.client, &run.id, &options).await?))
}

#[utoipa::path(post, path = routes::RUN_RESUME, tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run is not paused", body = ErrorBody)))]
pub(crate) async fn resume_any(State(api): State<Api>, run: RunPath) -> Answer<Outcome> {
    Ok(Json(Operations::resume(&api.client, &run.id).await?))
}

#[utoipa::path(post, path = routes::RUN_RESTART, tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    request_body = RestartBody,
    responses((status = 201, body = Restarted), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has not ended", body = ErrorBody)))]
pub(crate) async fn restart_any(
    State(api): State<Api>,
    run: RunPath,
    ApiJson(body): ApiJson<RestartBody>,
) -> Result<(StatusCode, Json<Restarted>), ApiError> {
    Ok((StatusCode::CREATED, Json(Operations::restart(&api.client, &run.id, &body).await?)))
}

#[utoipa::path(get, path = routes::WORKERS, tag = "service", params(WorkersParams),
    responses((status = 200, body = Workers), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn workers(State(api): State<Api>, ApiQuery(params): ApiQuery<WorkersParams>) -> Answer<Workers> {
    let query = if params.all == Some(true) { WorkersQuery::all() } else { WorkersQuery::default() };
    Ok(Json(Operations::workers(&api.client, query).await?))
}
