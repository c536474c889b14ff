//! Cairn's HTTP API: an [`axum::Router`] over a [`Client`], served by `cairn serve` and
//! mountable in your own axum application next to your own worker.
//!
//! Every route is JSON under `/v1` (plus `/healthz`). Errors are
//! `{"error": {"code": "...", "message": "..."}}` with a 4xx or 5xx status; a request that is
//! refused changes nothing stored. Request bodies are limited ([`ApiConfig::body_limit`], 4 MiB
//! by default); with a [token](ApiConfig::token) set, every route but `/healthz` answers `401`
//! without `Authorization: Bearer <token>`.
//!
//! | method and path | does |
//! |---|---|
//! | `POST /v1/workflows/{name}/runs` | start: `{input, id?, idempotencyKey?, version?, retentionDays?}`; `201` when created, `200` with the existing run for a repeated key |
//! | `GET /v1/workflows/{name}/runs` | list, newest first: `status`, `since`, `until` (RFC 3339), `cursor`, `limit` (≤ 1,000) |
//! | `GET /v1/runs` | the same across workflows (`workflow` as a parameter) |
//! | `GET /v1/workflows` | every workflow with runs, with its counts by status |
//! | `GET /v1/workflows/{name}/runs/{id}` | one run: status, input, output, error, times, restarts |
//! | `GET /v1/workflows/{name}/runs/{id}/steps` | each step over time (start, end, attempts with errors, sleeps and waits), and the journal |
//! | `GET /v1/workflows/{name}/runs/{id}/signals` | its signals, buffered and consumed |
//! | `POST /v1/workflows/{name}/runs/{id}/signals/{event}` | deliver a signal; the body is its payload (empty: `null`) |
//! | `DELETE /v1/workflows/{name}/runs/{id}` | cancel |
//! | `POST /v1/workflows/{name}/runs/{id}/pause` | pause |
//! | `POST /v1/workflows/{name}/runs/{id}/resume` | resume |
//! | `POST /v1/workflows/{name}/runs/{id}/restart` | restart from a step: `{fromStep}`; `201` with the new run |
//! | `GET /v1/workers` | the live workers, and the workflow versions whose runs no live worker serves |
//! | `GET /v1/live/runs` | server-sent events: the runs page (the list's query), workflows and workers whenever they change |
//! | `GET /v1/workflows/{name}/runs/{id}/live` | server-sent events: one run, its steps and its signals whenever they change |
//! | `GET /` | the dashboard: one page, compiled in, that reads the routes above (open without a token; it asks for one) |
//! | `GET /healthz` | `200` while the process serves |
//! | `GET /openapi.json` | this API as an OpenAPI 3.1 document, generated from the handlers |
//!
//! Runs appear in the same JSON shape as `cairn runs … --json` prints them ([`views`]).
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use cairn::{Engine, SqliteStore};
//! let engine = Engine::builder().store(SqliteStore::open("cairn.db")?).start().await?;
//! let app = axum::Router::new()
//!     .nest("/cairn", cairn_http::router(engine.client(), cairn_http::ApiConfig::default()));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7700").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod dashboard;
pub mod metrics;
pub mod reads;
mod schedules;
pub mod views;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use cairn::{Client, ClientError, LiveWorkers, PageCursor, RunFilter, RunId, RunRecord, RunStatus};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use utoipa::{IntoParams, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use views::{
    Outcome, PublishedEvent, Restarted, RunDetail, RunPage, SignalSent, Signals, StartedRun, Steps, Workflows,
};

pub use tokio_util::sync::CancellationToken;

/// How the API is served.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// With a token, every route but `/healthz` and the dashboard's page needs
    /// `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Largest request body in bytes (default 4 MiB, the default payload limit).
    pub body_limit: usize,
    /// How often a live stream looks for changes (default 1 s); it sends an update only when
    /// what it shows has changed.
    pub live_interval: Duration,
    /// Live streams end when this is cancelled, so that a graceful shutdown need not wait for
    /// browsers to go away. Cancel it when your server begins to shut down.
    pub shutdown: CancellationToken,
    /// What `GET /metrics` renders (Prometheus text); without it that route answers 404. See
    /// [`metrics::Prometheus::install`].
    pub metrics: Option<metrics::Prometheus>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            token: None,
            body_limit: 4 * 1024 * 1024,
            live_interval: Duration::from_secs(1),
            shutdown: CancellationToken::new(),
            metrics: None,
        }
    }
}

impl ApiConfig {
    /// The default configuration with the token from `CAIRN_TOKEN` (if set and not empty).
    pub fn from_env() -> Self {
        let token = std::env::var("CAIRN_TOKEN").ok().filter(|t| !t.is_empty());
        ApiConfig { token, ..ApiConfig::default() }
    }
}

#[derive(OpenApi)]
#[openapi(info(
    title = "Cairn",
    description = "Start, list, inspect, signal, cancel, pause, resume and restart durable workflow runs; declare and steer their schedules."
))]
struct ApiDoc;

/// The API's routes over `client`. Mount it with [`Router::nest`] or serve it as it is.
pub fn router(client: Client, config: ApiConfig) -> Router {
    let (router, _) = documented(config.token.map(Arc::from)).split_for_parts();
    let live = Live { interval: config.live_interval, shutdown: config.shutdown };
    let api = Api { client, live, metrics: config.metrics };
    router.fallback(not_found).layer(DefaultBodyLimit::max(config.body_limit)).with_state(api)
}

/// This API as an OpenAPI 3.1 document (what `GET /openapi.json` serves).
pub fn openapi() -> utoipa::openapi::OpenApi {
    documented(None).into_openapi()
}

/// Every documented route; those under `/v1` (and the document) are guarded by `token`.
fn documented(token: Option<Arc<str>>) -> OpenApiRouter<Api> {
    let guarded = OpenApiRouter::new()
        .routes(routes!(start, list_workflow))
        .routes(routes!(list_all))
        .routes(routes!(show_any))
        .routes(routes!(prune))
        .routes(routes!(workflows))
        .routes(routes!(show, cancel))
        .routes(routes!(steps))
        .routes(routes!(result))
        .routes(routes!(signals))
        .routes(routes!(signal))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(restart))
        .routes(routes!(workers))
        .routes(routes!(publish))
        .routes(routes!(schedules::list_schedules))
        .routes(routes!(schedules::put_schedule, schedules::show_schedule, schedules::delete_schedule))
        .routes(routes!(schedules::pause_schedule))
        .routes(routes!(schedules::resume_schedule))
        .routes(routes!(schedules::trigger_schedule))
        .routes(routes!(live_runs))
        .routes(routes!(live_run))
        .routes(routes!(openapi_json))
        .routes(routes!(prometheus))
        .route_layer(middleware::from_fn_with_state(token, authorize));
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(guarded)
        .routes(routes!(healthz))
        .routes(routes!(dashboard::page))
}

#[derive(Clone)]
struct Api {
    client: Client,
    live: Live,
    metrics: Option<metrics::Prometheus>,
}

/// How live streams run.
#[derive(Clone)]
struct Live {
    interval: Duration,
    shutdown: CancellationToken,
}

/// An error answer: `{"error": {"code", "message"}}` with its status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }

    fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }
}

/// Every error answer's body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable snake_case code (`run_not_found`, `invalid_json`, `run_finished`, …).
    pub code: String,
    /// For people.
    pub message: String,
}

impl ApiError {
    fn body(&self) -> ErrorBody {
        ErrorBody { error: ErrorDetail { code: self.code.to_owned(), message: self.message.clone() } }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

impl From<ClientError> for ApiError {
    fn from(error: ClientError) -> Self {
        let (status, code) = match &error {
            ClientError::UnknownWorkflow(_) => (StatusCode::NOT_FOUND, "unknown_workflow"),
            ClientError::UnknownVersion { .. } => (StatusCode::NOT_FOUND, "unknown_version"),
            ClientError::InvalidPayload(_) => (StatusCode::BAD_REQUEST, "invalid_payload"),
            ClientError::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ClientError::RunNotFound(_) => (StatusCode::NOT_FOUND, "run_not_found"),
            ClientError::DuplicateRunId(_) => (StatusCode::CONFLICT, "duplicate_run_id"),
            ClientError::RunFinished { .. } => (StatusCode::CONFLICT, "run_finished"),
            ClientError::NotPaused { .. } => (StatusCode::CONFLICT, "not_paused"),
            ClientError::NotEnded { .. } => (StatusCode::CONFLICT, "not_ended"),
            ClientError::UnknownStep { .. } => (StatusCode::BAD_REQUEST, "unknown_step"),
            ClientError::RunDidNotComplete { .. } => (StatusCode::CONFLICT, "run_did_not_complete"),
            ClientError::InvalidTopic(_) => (StatusCode::BAD_REQUEST, "invalid_topic"),
            ClientError::InvalidEventId(_) => (StatusCode::BAD_REQUEST, "invalid_event_id"),
            ClientError::ScheduleNotFound(_) => (StatusCode::NOT_FOUND, "schedule_not_found"),
            ClientError::InvalidSchedule(_) => (StatusCode::BAD_REQUEST, "invalid_schedule"),
            ClientError::InvalidConcurrency(_) => (StatusCode::BAD_REQUEST, "invalid_concurrency"),
            ClientError::InvalidFairnessKey(_) => (StatusCode::BAD_REQUEST, "invalid_fairness_key"),
            ClientError::InvalidDebounce(_) => (StatusCode::BAD_REQUEST, "invalid_debounce"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "store_error"),
        };
        ApiError::new(status, code, error.to_string())
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        let status = rejection.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE { "body_too_large" } else { "invalid_body" };
        ApiError::new(status, code, rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::bad_request("invalid_path", rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad_request("invalid_query", rejection.body_text())
    }
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

/// Refuses a request without the configured bearer token.
async fn authorize(State(token): State<Option<Arc<str>>>, request: Request, next: Next) -> Response {
    if let Some(token) = &token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if !given.is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes())) {
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong bearer token")
                .into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// Compares two secrets in time that depends on their lengths only.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// A name from a path (`what`: `workflow` or `event`): 1 to 200 bytes, no control characters.
fn valid_name<'a>(what: &str, code: &'static str, name: &'a str) -> Result<&'a str, ApiError> {
    if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            code,
            format!("{what} name {name:?} must be 1 to 200 bytes without control characters"),
        ));
    }
    Ok(name)
}

fn workflow_name(name: &str) -> Result<&str, ApiError> {
    valid_name("workflow", "invalid_workflow_name", name)
}

fn run_id(id: &str) -> Result<RunId, ApiError> {
    RunId::validate(id).map_err(|error| ApiError::bad_request("invalid_run_id", error.to_string()))
}

/// The run `id` of workflow `name` (a run of another workflow is not found under this one).
async fn run_of(api: &Api, name: &str, id: &str) -> Result<RunRecord, ApiError> {
    let (name, id) = (workflow_name(name)?, run_id(id)?);
    let run = api.client.get(&id).await?;
    if run.workflow != name {
        return Err(ClientError::RunNotFound(id).into());
    }
    Ok(run)
}

/// JSON from a request body: malformed JSON or wrong types are `400`.
fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| ApiError::bad_request("invalid_json", error.to_string()))
}

/// What `POST /v1/workflows/{name}/runs` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StartBody {
    /// The run's input (default `null`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    input: Option<Box<RawValue>>,
    /// The run's id (default: a new UUIDv7).
    id: Option<String>,
    /// Starting again with the same key returns the existing run.
    idempotency_key: Option<String>,
    /// The workflow version (default: the newest the server's worker registered).
    version: Option<u32>,
    /// Days to keep the run once it has ended (default: the workflow's, or 30).
    retention_days: Option<u32>,
    /// Ready runs of a higher priority are claimed first (default 0).
    priority: Option<i32>,
    /// Within a priority, ready runs are served fairly between keys (a tenant, a customer).
    fairness_key: Option<String>,
    /// Debounce the start: starts with the same key collapse into one run with the latest
    /// input (the answer is then `200` with that run).
    debounce: Option<DebounceBody>,
}

/// A start's `debounce`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DebounceBody {
    /// Starts of the workflow with equal keys collapse (1 to 200 bytes).
    key: String,
    /// How long the key must be quiet before the run begins (`2s`, `500ms`, `5m`).
    quiet: String,
    /// The latest the run begins after the window's first start (default: no limit).
    max_wait: Option<String>,
}

impl DebounceBody {
    /// The debounce asked for; a duration that does not parse is `400 invalid_debounce`.
    fn parse(self) -> Result<cairn::Debounce, ApiError> {
        let duration = |name: &str, text: &str| {
            humantime::parse_duration(text).map_err(|_| {
                ApiError::bad_request(
                    "invalid_debounce",
                    format!("debounce {name} {text:?} is not a duration (try `2s`)"),
                )
            })
        };
        let mut debounce = cairn::Debounce::new(self.key, duration("quiet", &self.quiet)?);
        if let Some(max_wait) = &self.max_wait {
            debounce = debounce.max_wait(duration("maxWait", max_wait)?);
        }
        Ok(debounce)
    }
}

/// What `POST /v1/events/{topic}` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishBody {
    /// The event's id (default: a new UUIDv7). Publishing an id again starts no run it started.
    id: Option<String>,
    /// The event's payload, each started run's input (default `null`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    payload: Option<Box<RawValue>>,
}

/// What `POST /v1/runs/prune` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PruneBody {
    /// Also delete every ended run that ended longer ago than this (`90d`, `12h`), whatever its
    /// retention.
    older_than: Option<String>,
    /// List what would be deleted, deleting nothing.
    #[serde(default)]
    dry_run: bool,
}

/// What `POST …/restart` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RestartBody {
    /// The step (or scope) to run again from, as the journal names it.
    from_step: String,
}

/// The query of the list routes.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only this workflow (`/v1/runs` only).
    workflow: Option<String>,
    /// Only this status.
    status: Option<String>,
    /// Created at or after (RFC 3339).
    since: Option<String>,
    /// Created before (RFC 3339).
    until: Option<String>,
    /// From a page's `next_cursor`.
    cursor: Option<String>,
    /// Page size, 1 to 1,000 (default 100).
    limit: Option<usize>,
    /// Only stranded runs: pending, running or suspended while no live worker serves their
    /// workflow version.
    stranded: Option<bool>,
    /// `input.<field>=<value>` (repeatable; `<field>` may be a dotted path): only runs whose
    /// input contains `{"<field>": <value>}`, the value read as JSON when it is JSON
    /// (`input.customer=42`, `input.vip=true`) and as a string otherwise (`input.city=Oslo`).
    /// Any other parameter is refused.
    #[serde(flatten)]
    #[param(ignore)]
    rest: std::collections::BTreeMap<String, String>,
}

/// The health answer.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    status: String,
}

type Answer<T> = Result<Json<T>, ApiError>;

#[utoipa::path(get, path = "/healthz", tag = "service", responses((status = 200, body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health { status: "ok".into() })
}

#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text format: runs, steps, signals, sweeps, claims and store \
        commits", content_type = "text/plain; version=0.0.4", body = String),
        (status = 401, body = ErrorBody), (status = 404, description = "No recorder configured", body = ErrorBody)))]
async fn prometheus(State(api): State<Api>) -> Result<Response, ApiError> {
    let metrics = api.metrics.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "metrics_disabled", "this server keeps no metrics (ApiConfig::metrics)")
    })?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], metrics.render()).into_response())
}

#[utoipa::path(get, path = "/openapi.json", tag = "service",
    responses((status = 200, description = "This document", body = Object), (status = 401, body = ErrorBody)))]
async fn openapi_json() -> Response {
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let text = DOCUMENT.get_or_init(|| openapi().to_json().unwrap_or_else(|_| "{}".to_owned()));
    ([(header::CONTENT_TYPE, "application/json")], text.as_str()).into_response()
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs", tag = "runs",
    params(("name" = String, Path, description = "Workflow name")),
    request_body = StartBody,
    responses(
        (status = 201, description = "Created", body = StartedRun),
        (status = 200, description = "An existing run with this idempotency key, or the debouncing run this start joined", body = StartedRun),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "Unknown workflow or version", body = ErrorBody),
        (status = 409, description = "The id is taken", body = ErrorBody), (status = 413, body = ErrorBody)))]
async fn start(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<StartedRun>), ApiError> {
    let Path(name) = path?;
    let name = workflow_name(&name)?;
    let body = body?;
    let body: StartBody = parse(if body.is_empty() { b"{}" } else { &body })?;
    let input = body.input.unwrap_or_else(|| RawValue::NULL.to_owned());
    let mut start = api.client.start(name, &*input);
    if let Some(id) = body.id {
        start = start.id(run_id(&id)?.as_str());
    }
    if let Some(key) = body.idempotency_key {
        start = start.idempotency_key(key);
    }
    if let Some(version) = body.version {
        start = start.version(version);
    }
    if let Some(days) = body.retention_days {
        start = start.retention(Duration::from_secs(u64::from(days) * 86_400));
    }
    if let Some(priority) = body.priority {
        start = start.priority(priority);
    }
    if let Some(key) = body.fairness_key {
        start = start.fairness_key(key);
    }
    if let Some(debounce) = body.debounce {
        start = start.debounce(debounce.parse()?);
    }
    let handle = start.await?;
    let status = if handle.created() { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(views::started(&handle))))
}

fn timestamp(name: &str, text: &str) -> Result<cairn::Timestamp, ApiError> {
    humantime::parse_rfc3339_weak(text).map(cairn::Timestamp::from_system_time).map_err(|error| {
        ApiError::bad_request("invalid_query", format!("{name} {text:?} is not an RFC 3339 time: {error}"))
    })
}

/// What a list query asks for: a filter, and whether only stranded runs (judged by the live
/// workers when the page is read).
#[derive(Clone)]
struct ListRequest {
    filter: RunFilter,
    stranded: bool,
}

/// The list query `params` ask for (`workflow` from the path or the query).
fn list_request(workflow: Option<String>, params: ListParams) -> Result<ListRequest, ApiError> {
    let status = params
        .status
        .as_deref()
        .map(RunStatus::parse_given)
        .transpose()
        .map_err(|message| ApiError::bad_request("invalid_query", message))?;
    if let Some(limit) = params.limit
        && !(1..=1000).contains(&limit)
    {
        return Err(ApiError::bad_request("invalid_query", format!("limit {limit} is not between 1 and 1000")));
    }
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
        limit: Some(params.limit.unwrap_or(100)),
        cursor,
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
async fn list_workflow(
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
async fn list_all(State(api): State<Api>, params: Result<Query<ListParams>, QueryRejection>) -> Answer<RunPage> {
    let Query(mut params) = params?;
    let workflow = params.workflow.take();
    list(&api, workflow, params).await
}

#[utoipa::path(get, path = "/v1/workflows", tag = "runs",
    responses((status = 200, body = Workflows), (status = 401, body = ErrorBody)))]
async fn workflows(State(api): State<Api>) -> Answer<Workflows> {
    Ok(Json(views::workflows(&api.client.workflow_counts().await?)))
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunDetail), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
async fn show(State(api): State<Api>, path: Result<Path<(String, String)>, PathRejection>) -> Answer<RunDetail> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(reads::run_detail(&api.client, &run).await?))
}

#[utoipa::path(get, path = "/v1/runs/{id}", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunDetail), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
async fn show_any(State(api): State<Api>, path: Result<Path<String>, PathRejection>) -> Answer<RunDetail> {
    let Path(id) = path?;
    let run = api.client.get(&run_id(&id)?).await?;
    Ok(Json(reads::run_detail(&api.client, &run).await?))
}

#[utoipa::path(post, path = "/v1/runs/prune", tag = "runs",
    request_body = PruneBody,
    responses((status = 200, body = views::Pruned), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
async fn prune(State(api): State<Api>, body: Result<Bytes, BytesRejection>) -> Answer<views::Pruned> {
    let body = body?;
    let body: PruneBody = parse(if body.is_empty() { b"{}" } else { &body })?;
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

/// What `GET …/result` takes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResultParams {
    /// How long to wait for the run to end (`30s`, `5m`; default 30 s, at most 5 minutes).
    timeout: Option<String>,
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}/result", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id"),
        ResultParams),
    responses((status = 200, description = "The run once it has ended (completed, failed or cancelled) or is \
        paused, or as it is when the timeout passed first", body = RunDetail),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn result(
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
async fn steps(State(api): State<Api>, path: Result<Path<(String, String)>, PathRejection>) -> Answer<Steps> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(views::steps(&run.id, &api.client.journal(&run.id).await?)))
}

#[utoipa::path(get, path = "/v1/workflows/{name}/runs/{id}/signals", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Signals), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
async fn signals(State(api): State<Api>, path: Result<Path<(String, String)>, PathRejection>) -> Answer<Signals> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(reads::run_signals(&api.client, &run.id).await?))
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs/{id}/signals/{event}", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id"),
        ("event" = String, Path, description = "Signal name")),
    request_body(content = Object, description = "The payload (empty: `null`)"),
    responses((status = 200, body = SignalSent), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody),
        (status = 413, body = ErrorBody)))]
async fn signal(
    State(api): State<Api>,
    path: Result<Path<(String, String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Answer<SignalSent> {
    let Path((name, id, event)) = path?;
    valid_name("event", "invalid_event_name", &event)?;
    let body = body?;
    let payload: Box<RawValue> = parse(if body.is_empty() { b"null" } else { &body })?;
    let run = run_of(&api, &name, &id).await?;
    let signal = api.client.signal_raw(&run.id, &event, payload).await?;
    Ok(Json(SignalSent { run: run.id.to_string(), signal: signal.0, event }))
}

#[utoipa::path(post, path = "/v1/events/{topic}", tag = "events",
    params(("topic" = String, Path, description = "Topic, e.g. `user.signup`")),
    request_body = PublishBody,
    responses(
        (status = 201, description = "Runs were started", body = PublishedEvent),
        (status = 200, description = "No run started: no subscriber, or the id was published before", body = PublishedEvent),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody)))]
async fn publish(
    State(api): State<Api>,
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<PublishedEvent>), ApiError> {
    let Path(topic) = path?;
    let body = body?;
    let body: PublishBody = parse(if body.is_empty() { b"{}" } else { &body })?;
    let payload = body.payload.unwrap_or_else(|| RawValue::NULL.to_owned());
    let mut publish = api.client.publish(&topic, &*payload);
    if let Some(id) = body.id {
        publish = publish.id(id);
    }
    let published = views::published(&topic, &publish.await?);
    let status = if published.runs.is_empty() { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(published)))
}

#[utoipa::path(delete, path = "/v1/workflows/{name}/runs/{id}", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody)))]
async fn cancel(State(api): State<Api>, path: Result<Path<(String, String)>, PathRejection>) -> Answer<Outcome> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(Outcome::cancel(&run.id, api.client.cancel(&run.id).await?)))
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs/{id}/pause", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has ended", body = ErrorBody)))]
async fn pause(State(api): State<Api>, path: Result<Path<(String, String)>, PathRejection>) -> Answer<Outcome> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    Ok(Json(Outcome::pause(&run.id, api.client.pause(&run.id).await?)))
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs/{id}/resume", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    responses((status = 200, body = Outcome), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run is not paused", body = ErrorBody)))]
async fn resume(State(api): State<Api>, path: Result<Path<(String, String)>, PathRejection>) -> Answer<Outcome> {
    let Path((name, id)) = path?;
    let run = run_of(&api, &name, &id).await?;
    api.client.resume(&run.id).await?;
    Ok(Json(Outcome::resumed(&run.id)))
}

#[utoipa::path(post, path = "/v1/workflows/{name}/runs/{id}/restart", tag = "runs",
    params(("name" = String, Path, description = "Workflow name"), ("id" = String, Path, description = "Run id")),
    request_body = RestartBody,
    responses((status = 201, body = Restarted), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The run has not ended", body = ErrorBody)))]
async fn restart(
    State(api): State<Api>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Restarted>), ApiError> {
    let Path((name, id)) = path?;
    let body: RestartBody = parse(&body?)?;
    let run = run_of(&api, &name, &id).await?;
    let restarted = api.client.restart(&run.id, &body.from_step).await?;
    let answer =
        Restarted { run: restarted.id().to_string(), restarted_from: run.id.to_string(), from_step: body.from_step };
    Ok((StatusCode::CREATED, Json(answer)))
}

async fn workers_view(client: &Client, live: &LiveWorkers) -> Result<views::Workers, ApiError> {
    let stranded = client.stranded_versions().await?;
    Ok(views::workers(live, &stranded, cairn::Timestamp::from_system_time(std::time::SystemTime::now())))
}

#[utoipa::path(get, path = "/v1/workers", tag = "service",
    responses((status = 200, body = views::Workers), (status = 401, body = ErrorBody)))]
async fn workers(State(api): State<Api>) -> Answer<views::Workers> {
    Ok(Json(workers_view(&api.client, &api.client.live_workers().await?).await?))
}

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
        last: Option<String>,
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
            let tagged = format!("{name}\n{data}");
            if state.last.as_ref() != Some(&tagged) {
                state.last = Some(tagged);
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
async fn live_runs(
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
async fn live_run(
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
