//! Server-sent events: the runs page and one run, pushed whenever they change.

use crate::error::{ApiError, ErrorBody};
use crate::input::{ListParams, run_of};
use crate::runs::{list_request, workers_view};
use crate::state::{Api, Live};
use crate::{reads, views};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::convert::Infallible;

/// A server-sent event stream of `event`: `snapshot` now and again every `interval`, sent only
/// when it differs from the last one sent (an `error` event when it fails), until the client
/// goes away or the server shuts down.
fn live_stream<T, F, Fut>(live: Live, event: &'static str, snapshot: F) -> Response
where
    T: Serialize,
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, ApiError>> + Send,
{
    struct State<F> {
        snapshot: F,
        live: Live,
        /// A hash of the last event sent, not the event: a stream holds no copy of what it sent
        /// (a run with a 3 MiB output kept 3 MiB per stream).
        last: Option<u64>,
        first: bool,
    }
    let state = State { snapshot, live, last: None, first: true };
    let events = futures::stream::unfold(state, move |mut state| async move {
        loop {
            if !state.first {
                tokio::select! {
                    () = tokio::time::sleep(state.live.interval) => {}
                    () = state.live.shutdown.cancelled() => return None,
                }
            }
            state.first = false;
            let (name, data) = match (state.snapshot)().await {
                Ok(value) => (event, serde_json::to_string(&value)),
                Err(error) => ("error", serde_json::to_string(&error.body())),
            };
            let data = data.unwrap_or_else(|_| "null".to_owned());
            let sent = {
                use std::hash::{Hash, Hasher};
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                (name, &data).hash(&mut hasher);
                hasher.finish()
            };
            if state.last != Some(sent) {
                state.last = Some(sent);
                let event = Event::default().event(name).data(data);
                return Some((Ok::<_, Infallible>(event), state));
            }
        }
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

#[utoipa::path(get, path = "/v1/live/runs", tag = "live", params(ListParams),
    responses((status = 200, description = "Server-sent events: `runs` with a snapshot whenever it changes, \
        `error` when reading one fails", content_type = "text/event-stream", body = views::RunsSnapshot),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub(crate) async fn live_runs(
    State(api): State<Api>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(mut params) = params?;
    let request = list_request(params.workflow.take(), params)?;
    let client = api.client.clone();
    Ok(live_stream(api.live, "runs", move || {
        let (client, request) = (client.clone(), request.clone());
        async move {
            let live = client.live_workers().await?;
            Ok(views::RunsSnapshot {
                runs: reads::run_page(&client, &request.filter, request.stranded, &live).await?,
                workflows: views::workflows(&client.workflow_counts().await?),
                workers: workers_view(&client, &live).await?,
            })
        }
    }))
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}/live", tag = "live",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, description = "Server-sent events: `run` with a snapshot whenever it changes, \
        `error` when reading one fails", content_type = "text/event-stream", body = views::RunSnapshot),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn live_run(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path((name, id)) = path?;
    let id = run_of(&api, &name, &id).await?.id;
    let client = api.client.clone();
    Ok(live_stream(api.live, "run", move || {
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
