//! The handlers of runs and workflows: start, list, show, steps, signals, signal, publish,
//! cancel, pause, resume, restart, result, prune; workers and metrics.

use crate::error::{Answer, ApiError, ErrorBody};
use crate::input::{
    CancelParams, ListParams, ResultParams, event_name, object, parse, run_id, run_of, timestamp, workflow_name,
};
use crate::state::Api;
use crate::views::{Outcome, Restarted, RunDetail, RunPage, SignalSent, Signals, StartedRun, Steps, Workflows};
use crate::{reads, views};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use cairn::{Client, PageCursor, RunFilter, RunStatus};
use cairn_api::{BulkAction, BulkBody, BulkFilter, PruneBody, RestartBody, StartOptions};
use futures::StreamExt as _;
use serde_json::value::RawValue;
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

#[utoipa::path(post, path = "/v1/workflows/{name}/runs", tag = "runs",
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
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<StartedRun>), ApiError> {
    let Path(name) = path?;
    let name = workflow_name(&name)?;
    let body = body?;
    let options: StartOptions = object(if body.is_empty() { b"{}" } else { &body })?;
    if let Some(id) = &options.id {
        run_id(id)?;
    }
    let start = api.client.start_with(name, options);
    let handle = start.await?;
    let status = if handle.created() { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(views::started(&handle))))
}

/// What a list query asks for: a filter, and whether only stranded runs (judged by the live
/// workers when the page is read).
#[derive(Clone)]
pub(crate) struct ListRequest {
    pub(crate) filter: RunFilter,
    pub(crate) stranded: bool,
}

/// The list query `params` ask for (`workflow` from the path or the query).
pub(crate) fn list_request(workflow: Option<String>, params: ListParams) -> Result<ListRequest, ApiError> {
    let status = params
        .status
        .as_deref()
        .map(RunStatus::parse_given)
        .transpose()
        .map_err(|message| ApiError::bad_request("invalid_query", message))?;
    let limit = page_limit(params.limit)?;
    let cursor = match params.cursor.as_deref() {
        Some(text) => {
            Some(PageCursor::decode(text).map_err(|error| ApiError::bad_request("invalid_cursor", error.to_string()))?)
        }
        None => None,
    };
    let filter = RunFilter {
        workflow: workflow.map(|name| workflow_name(&name).map(str::to_owned)).transpose()?,
        status,
        created_after: params.since.as_deref().map(|t| timestamp("since", t)).transpose()?,
        created_before: params.until.as_deref().map(|t| timestamp("until", t)).transpose()?,
        limit: Some(limit),
        cursor,
        id_prefix: params.id_prefix.filter(|prefix| !prefix.is_empty()),
        error_contains: params.error.filter(|text| !text.is_empty()),
        ..RunFilter::default()
    };
    let input_contains = match params.rest.is_empty() {
        true => None,
        false => Some(
            views::input_filter(params.rest.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map_err(|message| ApiError::bad_request("invalid_query", message))?,
        ),
    };
    Ok(ListRequest { filter: RunFilter { input_contains, ..filter }, stranded: params.stranded.unwrap_or(false) })
}

/// A page size asked for: 1 to 1,000, 100 when not given.
pub(crate) fn page_limit(limit: Option<usize>) -> Result<usize, ApiError> {
    match limit {
        Some(limit) if !(1..=1000).contains(&limit) => {
            Err(ApiError::bad_request("invalid_query", format!("limit {limit} is not between 1 and 1000")))
        }
        limit => Ok(limit.unwrap_or(100)),
    }
}

/// Cancels `id`, for `reason` when one is given (the client checks it).
async fn cancel_run(client: &Client, id: &cairn::RunId, reason: Option<&str>) -> Result<Outcome, ApiError> {
    let outcome = match reason {
        Some(reason) => client.cancel_because(id, reason).await,
        None => client.cancel(id).await,
    };
    Ok(views::cancelled(id, outcome?))
}

async fn list(api: &Api, workflow: Option<String>, params: ListParams) -> Answer<RunPage> {
    let request = list_request(workflow, params)?;
    let live = api.client.live_workers().await?;
    Ok(Json(reads::run_page(&api.client, &request.filter, request.stranded, &live).await?))
}

/// What the list routes say of their input filter (a parameter family OpenAPI cannot name).
const INPUT_FILTER: &str = "Newest first, a page at a time (`next_cursor`). Besides the parameters listed, \
    `input.<field>=<value>` (repeatable, `<field>` a dotted path) keeps only runs whose input contains \
    `{\"<field>\": <value>}`, the value read as JSON when it is JSON and as a string otherwise.";

#[utoipa::path(get, path = "/v1/workflows/{name}/runs", tag = "runs", description = INPUT_FILTER,
    params(("name" = String, Path, description = "Workflow name"), ListParams),
    responses((status = 200, body = RunPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_workflow(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Answer<RunPage> {
    let (Path(name), Query(params)) = (path?, params?);
    if params.workflow.as_ref().is_some_and(|w| w != &name) {
        return Err(ApiError::bad_request("invalid_query", "`workflow` is given by the path here"));
    }
    list(&api, Some(name), params).await
}

#[utoipa::path(get, path = "/v1/runs", tag = "runs", description = INPUT_FILTER, params(ListParams),
    responses((status = 200, body = RunPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn list_all(
    State(api): State<Api>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Answer<RunPage> {
    let Query(mut params) = params?;
    let workflow = params.workflow.take();
    list(&api, workflow, params).await
}

/// The most runs `GET /v1/run-count` counts unless asked for fewer.
const COUNT_AT_MOST: u64 = 10_000;

/// Takes `at_most` out of a list query (whose other parameters are filters).
fn take_at_most(params: &mut ListParams) -> Result<u64, ApiError> {
    match params.rest.remove("at_most") {
        None => Ok(COUNT_AT_MOST),
        Some(text) => text.parse::<u64>().ok().filter(|n| (1..=100_000).contains(n)).ok_or_else(|| {
            ApiError::bad_request("invalid_query", format!("at_most {text:?} is not a number from 1 to 100000"))
        }),
    }
}

#[utoipa::path(get, path = "/v1/run-count", tag = "runs",
    description = "How many runs the list's filters select (`limit` aside; a `cursor` counts the runs after it). \
        `input.<field>=<value>` filters as on `GET /v1/runs`.",
    params(ListParams,
        ("at_most" = Option<u64>, Query, description = "Stop counting at this many runs, 1 to 100,000 (default 10,000)")),
    responses((status = 200, body = views::RunCount), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn count(
    State(api): State<Api>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Answer<views::RunCount> {
    let Query(mut params) = params?;
    let at_most = take_at_most(&mut params)?;
    let request = list_request(params.workflow.take(), params)?;
    let live = api.client.live_workers().await?;
    let count = reads::run_count(&api.client, &request.filter, request.stranded, &live, at_most).await?;
    Ok(Json(views::RunCount { count, capped: count >= at_most }))
}

#[utoipa::path(get, path = "/v1/workflows", tag = "runs",
    responses((status = 200, body = Workflows), (status = 401, body = ErrorBody)))]
pub(crate) async fn workflows(State(api): State<Api>) -> Answer<Workflows> {
    Ok(Json(reads::workflows(&api.client).await?))
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunDetail), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn show(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Answer<RunDetail> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(reads::run_detail(&api.client, &run).await?))
}

#[utoipa::path(get, path = "/v1/runs/{id}", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunDetail), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn show_any(State(api): State<Api>, path: Result<Path<String>, PathRejection>) -> Answer<RunDetail> {
    let Path(id) = path?;
    let run = api.client.get(&run_id(&id)?).await?;
    Ok(Json(reads::run_detail(&api.client, &run).await?))
}

#[utoipa::path(post, path = "/v1/runs/prune", tag = "runs",
    request_body = PruneBody,
    responses((status = 200, body = views::Pruned), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn prune(State(api): State<Api>, body: Result<Bytes, BytesRejection>) -> Answer<views::Pruned> {
    let body = body?;
    let body: PruneBody = object(if body.is_empty() { b"{}" } else { &body })?;
    let older_than = (body.older_than.as_deref())
        .map(|text| {
            humantime::parse_duration(text).map_err(|error| {
                ApiError::bad_request("invalid_duration", format!("olderThan {text:?} is not a duration: {error}"))
            })
        })
        .transpose()?;
    let runs = api.client.prune(older_than, body.dry_run).await?;
    Ok(Json(views::pruned(&runs, body.dry_run)))
}

/// The most runs one bulk request acts on at once.
const BULK_AT_ONCE: usize = 16;

#[utoipa::path(post, path = "/v1/runs/bulk", tag = "runs",
    description = "Cancels, pauses or resumes the newest runs a filter selects (at most `limit`, 1 to 1,000), each \
        as its own route would, and says what happened to each. A run the action does not apply to (an ended run \
        to cancel, a run not paused to resume) is refused on its own; the others go on.",
    request_body = BulkBody,
    responses((status = 200, body = views::BulkResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn bulk(State(api): State<Api>, body: Result<Bytes, BytesRejection>) -> Answer<views::BulkResult> {
    let body: BulkBody = object(&body?)?;
    let BulkFilter { workflow, status, id_prefix, since, until, error, stranded, input } = body.filter;
    let params = ListParams {
        workflow: None,
        status,
        since,
        until,
        cursor: None,
        limit: Some(body.limit.unwrap_or(100)),
        stranded: Some(stranded),
        id_prefix,
        error,
        rest: Default::default(),
    };
    let mut request = list_request(workflow, params)?;
    request.filter.input_contains = input.map(serde_json::Value::Object);
    let live = api.client.live_workers().await?;
    let page = reads::run_page(&api.client, &request.filter, request.stranded, &live).await?;
    let client = &api.client;
    let runs: Vec<views::BulkRun> = futures::stream::iter(page.runs)
        .map(|listed| async move {
            let id = cairn::RunId::new(&listed.run.id);
            let outcome = match body.action {
                BulkAction::Cancel => cancel_run(client, &id, None).await,
                BulkAction::Pause => client.pause(&id).await.map(|o| views::paused(&id, o)).map_err(ApiError::from),
                BulkAction::Resume => client.resume(&id).await.map(|()| views::resumed(&id)).map_err(ApiError::from),
            };
            let (outcome, error) = match outcome {
                Ok(outcome) => (Some(outcome.outcome), None),
                Err(error) => (None, Some(error.body().error)),
            };
            views::BulkRun { run: listed.run.id, workflow: listed.run.workflow, outcome, error }
        })
        .buffered(BULK_AT_ONCE)
        .collect()
        .await;
    let refused = runs.iter().filter(|run| run.error.is_some()).count();
    Ok(Json(views::BulkResult {
        action: body.action,
        done: runs.len() - refused,
        refused,
        runs,
        more: page.next_cursor.is_some(),
    }))
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}/result", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id"),
        ResultParams),
    responses((status = 200, description = "The run once it has ended (completed, failed or cancelled) or is \
        paused, or as it is when the timeout passed first", body = RunDetail),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn result(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<ResultParams>, QueryRejection>,
) -> Answer<RunDetail> {
    let Path((name, id)) = path?;
    let Query(params) = params?;
    let wait = match params.timeout.as_deref() {
        Some(text) => humantime::parse_duration(text)
            .map_err(|error| ApiError::bad_request("invalid_query", format!("timeout {text:?}: {error}")))?,
        None => Duration::from_secs(30),
    }
    .min(Duration::from_secs(300));
    let run = run_of(&api, &name, &id).await?;
    if !run.status.is_terminal() && run.status != RunStatus::Paused {
        // Ended or not, the answer is the run as it is now.
        let _ = tokio::time::timeout(wait, api.client.result::<serde::de::IgnoredAny>(&run.id)).await;
    }
    let run = api.client.get(&run.id).await?;
    Ok(Json(reads::run_detail(&api.client, &run).await?))
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}/steps", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Steps), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn steps(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Answer<Steps> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(views::steps(&run.id, &api.client.journal(&run.id).await?)))
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}/signals", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Signals), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub(crate) async fn signals(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Answer<Signals> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(reads::run_signals(&api.client, &run.id).await?))
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs/{id}/signals/{event}", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id"),
        ("event" = String, Path, description = "Signal name")),
    request_body(content = Value, description = "The payload, any JSON (empty: `null`)"),
    responses((status = 200, body = SignalSent), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody),
        (status = 413, body = ErrorBody)))]
pub(crate) async fn signal(
    State(api): State<Api>,
    path: Result<Path<(String, String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<SignalSent> {
    let Path((name, id, event)) = path?;
    event_name(&event)?;
    let body = body?;
    let payload: Box<RawValue> = parse(if body.is_empty() { b"null" } else { &body })?;
    let run = run_of(&api, &name, &id).await?;
    let signal = api.client.signal_raw(&run.id, &event, payload).await?;
    Ok(Json(SignalSent { run: run.id.to_string(), signal: signal.0, event }))
}

#[utoipa::path(delete, path = "/v1/workflows/{name}/runs/{id}", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id"),
        CancelParams),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody)))]
pub(crate) async fn cancel(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<CancelParams>, QueryRejection>,
) -> Answer<Outcome> {
    let (Path((name, id)), Query(params)) = (path?, params?);
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(cancel_run(&api.client, &run.id, params.reason.as_deref()).await?))
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs/{id}/pause", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody)))]
pub(crate) async fn pause(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Answer<Outcome> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(views::paused(&run.id, api.client.pause(&run.id).await?)))
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs/{id}/resume", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run is not paused", body = ErrorBody)))]
pub(crate) async fn resume(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Answer<Outcome> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    api.client.resume(&run.id).await?;
    Ok(Json(views::resumed(&run.id)))
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs/{id}/restart", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    request_body = RestartBody,
    responses((status = 201, body = Restarted), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has not ended", body = ErrorBody)))]
pub(crate) async fn restart(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Restarted>), ApiError> {
    let Path((name, id)) = path?;
    let body: RestartBody = object(&body?)?;
    let run = run_of(&api, &name, &id).await?;
    let restarted = match &body.reason {
        Some(reason) => api.client.restart_because(&run.id, &body.from_step, reason).await?,
        None => api.client.restart(&run.id, &body.from_step).await?,
    };
    let answer =
        Restarted { run: restarted.id().to_string(), restarted_from: run.id.to_string(), from_step: body.from_step };
    Ok((StatusCode::CREATED, Json(answer)))
}

#[utoipa::path(get, path = "/v1/workers", tag = "service",
    responses((status = 200, body = views::Workers), (status = 401, body = ErrorBody)))]
pub(crate) async fn workers(State(api): State<Api>) -> Answer<views::Workers> {
    Ok(Json(reads::workers(&api.client, &api.client.live_workers().await?).await?))
}
