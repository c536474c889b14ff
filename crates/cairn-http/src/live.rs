//! Server-sent events: the runs page and one run, pushed whenever they change (through
//! [`topics`](crate::topics), shared by every stream of the same thing): the whole snapshot
//! first, then JSON Patch `patch` events; `?patches=false` asks for whole snapshots only.

use crate::error::{ApiError, ErrorBody};
use crate::input::{ListParams, run_of};
use crate::runs::list_request;
use crate::state::Api;
use crate::{reads, views};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

/// The query of the live routes beyond the list's.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LiveParams {
    /// After the first whole snapshot, send `patch` events with what changed (default true);
    /// `false` sends the whole snapshot on every change.
    patches: Option<bool>,
}

/// Takes `patches` out of a list query (whose other parameters are filters).
fn take_patches(params: &mut ListParams) -> Result<bool, ApiError> {
    match params.rest.remove("patches").as_deref() {
        None | Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(ApiError::bad_request("invalid_query", format!("patches is true or false, not {other:?}"))),
    }
}

#[utoipa::path(get, path = "/v1/live/runs", tag = "live", params(ListParams, LiveParams),
    responses((status = 200, description = "Server-sent events: `runs` with the whole snapshot first and whenever a \
        patch would be longer, `patch` (a JSON Patch, RFC 6902, to apply to the snapshot last sent) for each other \
        change, `error` when reading one fails", content_type = "text/event-stream", body = views::RunsSnapshot),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn live_runs(
    State(api): State<Api>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(mut params) = params?;
    let patches = take_patches(&mut params)?;
    let request = list_request(params.workflow.take(), params)?;
    let key = format!("runs {:?} {}", request.filter, request.stranded);
    let (client, overview, interval) = (api.client.clone(), api.live.overview.clone(), api.live.polling.interval);
    Ok(api.live.topics.stream(&api.live.polling, key, "runs", patches, move || {
        let (client, request, overview) = (client.clone(), request.clone(), overview.clone());
        async move {
            let overview = overview.read(&client, interval).await?;
            Ok(views::RunsSnapshot {
                runs: reads::run_page(&client, &request.filter, request.stranded, &overview.live).await?,
                workflows: overview.workflows.clone(),
                workers: overview.workers.clone(),
            })
        }
    }))
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}/live", tag = "live",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id"),
        LiveParams),
    responses((status = 200, description = "Server-sent events: `run` with the whole snapshot first and whenever a \
        patch would be longer, `patch` (a JSON Patch, RFC 6902, to apply to the snapshot last sent) for each other \
        change, `error` when reading one fails", content_type = "text/event-stream", body = views::RunSnapshot),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn live_run(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<LiveParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Path((name, id)) = path?;
    let Query(params) = params?;
    let id = run_of(&api, &name, &id).await?.id;
    let client = api.client.clone();
    let patches = params.patches.unwrap_or(true);
    Ok(api.live.topics.stream(&api.live.polling, format!("run {id}"), "run", patches, move || {
        let (client, id) = (client.clone(), id.clone());
        async move {
            let run = client.get(&id).await?;
            Ok(views::RunSnapshot {
                run: reads::run_detail(&client, &run).await?,
                steps: views::steps(&id, &client.journal(&id).await?),
                signals: reads::run_signals(&client, &id).await?,
            })
        }
    }))
}
