//! Cairn's HTTP API: an [`axum::Router`] over a [`Client`](cairn::Client), served by `cairn serve` and
//! mountable in your own axum application next to your own worker.
//!
//! Every route is JSON under `/v1` (plus `/healthz`). Errors are
//! `{"error": {"code": "...", "message": "..."}}` with a 4xx or 5xx status; a request that is
//! refused changes nothing stored. Request bodies are limited ([`ApiConfig::body_limit`], 4 MiB
//! by default); with a [token](ApiConfig::token) set, every route but `/healthz` answers `401`
//! without `Authorization: Bearer <token>`. A request that changes something must send its body
//! as `application/json` (`415` otherwise) and, from a browser, come from the server's own origin
//! or one of [`ApiConfig::allowed_origins`] (`403` otherwise), which get CORS headers.
//!
//! | method and path | does |
//! |---|---|
//! | `POST /v1/workflows/{name}/runs` | start: `{input, id?, idempotencyKey?, version?, retentionDays?, priority?, fairnessKey?, debounce?, timeout?}` ([`StartBody`], one type with the CLI's and the light client's start); `201` when created, `200` with the existing run for a repeated key |
//! | `GET /v1/workflows/{name}/runs` | list, newest first: `status`, `since`, `until` (RFC 3339), `cursor`, `limit` (≤ 1,000) |
//! | `GET /v1/runs` | the same across workflows (`workflow` as a parameter) |
//! | `GET /v1/workflows` | every workflow with runs, with its counts by status |
//! | `GET /v1/runs/{id}` | one run: status, input, output, error, times, restarts |
//! | `/v1/runs/{id}/…` | each route below under `/v1/workflows/{name}/runs/{id}` also by the run's id alone (`DELETE /v1/runs/{id}`, `POST /v1/runs/{id}/pause`, …): the light client's routes |
//! | `GET /v1/workflows/{name}/runs/{id}` | the same, under its workflow (a run of another workflow is not found) |
//! | `GET /v1/workflows/{name}/runs/{id}/steps` | each step over time (start, end, attempts with errors, sleeps and waits), and the journal |
//! | `GET /v1/workflows/{name}/runs/{id}/signals` | its signals, buffered and consumed |
//! | `POST /v1/workflows/{name}/runs/{id}/signals/{event}` | deliver a signal; the body is its payload (empty: `null`) |
//! | `DELETE /v1/workflows/{name}/runs/{id}` | cancel (`?reason=`: journaled and shown as its error) |
//! | `POST /v1/workflows/{name}/runs/{id}/pause` | pause |
//! | `POST /v1/workflows/{name}/runs/{id}/resume` | resume |
//! | `POST /v1/workflows/{name}/runs/{id}/restart` | restart from a step: `{fromStep, reason?}`; `201` with the new run |
//! | `POST /v1/events/{topic}` | publish: `{payload?, id?}`; one run per subscribed workflow |
//! | `GET /v1/events` | published events, newest first, with the runs each started: `topic`, `cursor`, `limit` |
//! | `GET /v1/workers` | the live workers (`all=true`: every recorded one), and the workflow versions whose runs no live worker serves |
//! | `GET /v1/live/runs` | server-sent events: the runs page (the list's query), workflows and workers, whole and then as JSON Patch changes (`patches=false`: whole each time) |
//! | `GET /v1/workflows/{name}/runs/{id}/live` | server-sent events: one run, its steps and its signals, whole and then as JSON Patch changes |
//! | `GET /` | the dashboard: one page, compiled in, that reads the routes above (open without a token; it asks for one) |
//! | `GET /healthz` | `200` while the process serves |
//! | `GET /openapi.json` | this API as an OpenAPI 3.1 document, generated from the handlers |
//!
//! Runs appear in the same JSON shape as `cairn runs … --json` prints them ([`views`](cairn_api::views)).
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

mod auth;
mod body;
mod conn;
mod contract;
mod dashboard;
mod error;
mod events;
mod extract;
mod input;
mod live;
pub mod metrics;
mod origin;
mod overview;
pub mod patch;
mod routes;
mod runs;
mod schedules;
mod service;
mod state;
mod topics;

pub use cairn_api::{DebounceOptions as DebounceBody, PruneBody, PublishBody, RestartBody, StartOptions as StartBody};
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use input::{ListParams, ResultParams};
pub use routes::{Health, openapi, router, served_openapi};
pub use service::{ConnectionLimits, Listening, Service, ServiceError, stop_requested};
pub use state::ApiConfig;
pub use tokio_util::sync::CancellationToken;
