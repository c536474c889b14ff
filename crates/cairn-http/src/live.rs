//! Server-sent events: the runs page and one run, pushed whenever they change (through
//! [`topics`](crate::topics), shared by every stream of the same thing): the whole snapshot
//! first, then JSON Patch `patch` events; `?patches=false` asks for whole snapshots only.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiQuery, RunPath};
use crate::input::ListParams;
use crate::state::Api;
use axum::extract::State;
use axum::response::Response;
use cairn::api::{self as ops, views};
use cairn::store::RunId;
use cairn_api::views::{RunSnapshot, RunsSnapshot};
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
        change, `error` when reading one fails", content_type = "text/event-stream", body = RunsSnapshot),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn live_runs(
    State(api): State<Api>,
    ApiQuery(mut params): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    let patches = take_patches(&mut params)?;
    let workflow = params.workflow.take();
    let request = ops::selection(&params.query(workflow)?)?;
    let key = format!("runs {:?} {}", request.filter, request.stranded);
    let (client, overview, interval) = (api.client.clone(), api.live.overview.clone(), api.live.polling.interval);
    Ok(api.live.topics.stream(&api.live.polling, key, "runs", patches, move || {
        let (client, request, overview) = (client.clone(), request.clone(), overview.clone());
        async move {
            let overview = overview.read(&client, interval).await?;
            Ok(RunsSnapshot {
                runs: ops::run_page(&client, &request, &overview.live).await?,
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
        change, `error` when reading one fails", content_type = "text/event-stream", body = RunSnapshot),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn live_run(
    State(api): State<Api>,
    run: RunPath,
    ApiQuery(params): ApiQuery<LiveParams>,
) -> Result<Response, ApiError> {
    let id = RunId::new(run.id);
    let client = api.client.clone();
    let patches = params.patches.unwrap_or(true);
    Ok(api.live.topics.stream(&api.live.polling, format!("run {id}"), "run", patches, move || {
        let (client, id) = (client.clone(), id.clone());
        async move {
            let run = client.get(&id).await?;
            Ok(RunSnapshot {
                run: ops::run_detail(&client, &run).await?,
                steps: views::steps(&id, &client.journal(&id).await?),
                signals: ops::run_signals(&client, &id).await?,
            })
        }
    }))
}
