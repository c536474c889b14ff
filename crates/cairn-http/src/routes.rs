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
use axum::routing::post;
use axum::{Json, Router, extract::DefaultBodyLimit};
use cairn::Client;
use cairn_api::routes as api_routes;
use serde::Serialize;
use std::sync::Arc;
use utoipa::openapi::Required;
use utoipa::openapi::path::{ParameterBuilder, ParameterIn, Paths};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::{OpenApi, ToSchema};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};
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
        .routes(routes!(runs::prune))
        .routes(routes!(runs::bulk))
        .routes(routes!(runs::workflows))
        .routes(routes!(runs::workers));
    // A run's routes by id, each also under its workflow.
    let guarded = [
        routes!(runs::show_any, runs::cancel_any),
        routes!(runs::steps_any),
        routes!(runs::result_any),
        routes!(runs::signals_any),
        routes!(runs::signal_any),
        routes!(runs::pause_any),
        routes!(runs::resume_any),
        routes!(runs::restart_any),
    ]
    .into_iter()
    .fold(guarded, |router, route| router.routes(under_workflow(route.clone())).routes(route));
    // A signal with an empty name (`…/signals/`, which no `{event}` matches) is refused by the
    // name's rule, as in process, not as a route that does not exist.
    let empty_name = format!("{}/", api_routes::RUN_SIGNALS);
    let guarded = guarded
        .route(&empty_name, post(runs::signal_any))
        .route(&api_routes::under_workflow(&empty_name), post(runs::signal_any))
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

/// `route`, a run's route by id (`/v1/runs/{id}…`, handlers named `…_any`), as the API first had
/// it under the run's workflow ([`cairn_api::routes::under_workflow`]): the same handler (its
/// [`RunPath`](crate::extract::RunPath) checks the run is of that workflow) and the same
/// description, with the `name` parameter first and the operation id without `_any` (`pause`,
/// as generated clients have called it).
fn under_workflow((schemas, paths, method_router): UtoipaMethodRouter<Api>) -> UtoipaMethodRouter<Api> {
    let mut scoped = Paths::new();
    for (path, mut item) in paths.paths {
        let operations = [&mut item.get, &mut item.post, &mut item.put, &mut item.delete];
        for operation in operations.into_iter().flatten() {
            operation.operation_id = operation.operation_id.take().map(|id| id.trim_end_matches("_any").to_owned());
            let name = ParameterBuilder::new()
                .name("name")
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .description(Some("Workflow name"))
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build();
            operation.parameters.get_or_insert_with(Vec::new).insert(0, name);
        }
        scoped.paths.insert(api_routes::under_workflow(&path), item);
    }
    (schemas, scoped, method_router)
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
