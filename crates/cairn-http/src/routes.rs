//! The router: every route with its handler and guards, the OpenAPI document they make, and
//! `/healthz`.

use crate::auth::authorize;
use crate::error::{ErrorBody, method_not_allowed, not_found};
use crate::state::{Api, ApiConfig, Live};
use crate::{body, contract, dashboard, events, live, origin, runs, schedules};
use axum::extract::State;
use axum::http::header;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, extract::DefaultBodyLimit};
use cairn::Client;
use serde::Serialize;
use std::sync::Arc;
use utoipa::{OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

#[derive(OpenApi)]
#[openapi(info(
    title = "Cairn",
    description = "Start, list, inspect, signal, cancel, pause, resume and restart durable workflow runs; declare and steer their schedules."
))]
struct ApiDoc;

/// The API's routes over `client`. Mount it with [`Router::nest`] or serve it as it is.
pub fn router(client: Client, config: ApiConfig) -> Router {
    let secured = config.token.is_some();
    let hosts = (!secured).then(|| Arc::new(origin::Hosts::new(&config.allowed_hosts)));
    let (router, _) = documented(config.token.map(Arc::from)).split_for_parts();
    let polling = crate::topics::Polling { interval: config.live_interval, shutdown: config.shutdown };
    let live =
        Live { polling, topics: crate::topics::Topics::new(config.max_live_streams), overview: Default::default() };
    let api = Api { client, live, metrics: config.metrics, secured };
    let guard = origin::Guard { origins: config.allowed_origins.into(), hosts };
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(config.body_limit))
        .layer(middleware::from_fn_with_state((config.body_timeout, config.body_limit), body::read_in_time))
        .layer(middleware::from_fn_with_state(guard, origin::guard))
        .with_state(api)
}

/// This API as an OpenAPI 3.1 document (what `GET /openapi.json` serves with a token): the
/// handlers' shapes with every rule the server enforces written in (names' patterns, enums,
/// ranges, the bearer scheme, links), as JSON.
pub fn openapi() -> serde_json::Value {
    contract::written_in(&documented(None).into_openapi())
}

/// The document a router built with `config` serves: [`openapi`], without the bearer scheme
/// and the `401` answers when it has no token.
pub fn served_openapi(config: &ApiConfig) -> serde_json::Value {
    document_of(config.token.is_some())
}

/// [`openapi`] for a server with a token or (`secured` false) without one.
fn document_of(secured: bool) -> serde_json::Value {
    match secured {
        true => openapi(),
        false => contract::without_token(openapi()),
    }
}

/// Every documented route; those under `/v1` (and the document) are guarded by `token`.
fn documented(token: Option<Arc<str>>) -> OpenApiRouter<Api> {
    let guarded = OpenApiRouter::new()
        .routes(routes!(runs::start, runs::list_workflow))
        .routes(routes!(runs::list_all))
        .routes(routes!(runs::count))
        .routes(routes!(runs::show_any))
        .routes(routes!(runs::prune))
        .routes(routes!(runs::bulk))
        .routes(routes!(runs::workflows))
        .routes(routes!(runs::show, runs::cancel))
        .routes(routes!(runs::steps))
        .routes(routes!(runs::result))
        .routes(routes!(runs::signals))
        .routes(routes!(runs::signal))
        .routes(routes!(runs::pause))
        .routes(routes!(runs::resume))
        .routes(routes!(runs::restart))
        .routes(routes!(runs::workers))
        .routes(routes!(events::publish))
        .routes(routes!(events::list_events))
        .routes(routes!(schedules::list_schedules))
        .routes(routes!(schedules::put_schedule, schedules::show_schedule, schedules::delete_schedule))
        .routes(routes!(schedules::pause_schedule))
        .routes(routes!(schedules::resume_schedule))
        .routes(routes!(schedules::trigger_schedule))
        .routes(routes!(live::live_runs))
        .routes(routes!(live::live_run))
        .routes(routes!(openapi_json))
        .routes(routes!(runs::prometheus))
        .route_layer(middleware::from_fn_with_state(token, authorize));
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(guarded)
        .routes(routes!(healthz))
        .routes(routes!(dashboard::page))
}

/// The health answer.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    status: String,
}

#[utoipa::path(get, path = "/healthz", tag = "service", responses((status = 200, body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health { status: "ok".into() })
}

#[utoipa::path(get, path = "/openapi.json", tag = "service",
    responses((status = 200, description = "This document", body = Object), (status = 401, body = ErrorBody)))]
async fn openapi_json(State(api): State<Api>) -> Response {
    static SECURED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static OPEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let document = if api.secured { &SECURED } else { &OPEN };
    let text = document.get_or_init(|| document_of(api.secured).to_string());
    ([(header::CONTENT_TYPE, "application/json")], text.as_str()).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_rules_the_server_enforces_are_written_into_the_document() {
        let json = super::openapi();
        assert_eq!(json["security"], serde_json::json!([{"bearer": []}]));
        assert_eq!(json["paths"]["/healthz"]["get"]["security"], serde_json::json!([{}]));
        let start = &json["paths"]["/v1/workflows/{name}/runs"]["post"];
        assert_eq!(start["parameters"][0]["schema"]["$ref"], "#/components/schemas/WorkflowName");
        assert_eq!(start["requestBody"]["required"], false);
        assert_eq!(start["responses"]["201"]["links"]["GetRun"]["parameters"]["id"], "$response.body#/id");
    }
}
