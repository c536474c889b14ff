//! The HTTP API against a real engine on SQLite: each route's success, not found and bad input,
//! and that a refused request changes nothing stored. The shared engine and helpers are here; the
//! tests by concern: `runs` (start, read, steer, bulk), `streams` (live streams, events,
//! schedules), `refusals` (bad input, tokens, payload rules, methods) and `openapi` (the document
//! against the router).
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use cairn::prelude::*;
use cairn::{RunFilter, SqliteStore};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use tower::ServiceExt;

#[derive(Deserialize)]
struct Hello {
    name: String,
}

async fn hello(ctx: Ctx, input: Hello) -> Result<String, WorkflowError> {
    ctx.step("greet", || async { Ok::<_, StepError>(format!("Hello, {}!", input.name)) }).await
}

async fn approval(ctx: Ctx, _input: Value) -> Result<Value, WorkflowError> {
    let payload: Option<Value> = ctx.wait_for_event("approve", EventFilter::any(), Duration::from_secs(3600)).await?;
    Ok(payload.unwrap_or(Value::Null))
}

struct Served {
    app: Router,
    engine: Engine,
    _dir: tempfile::TempDir,
}

async fn served(config: cairn_http::ApiConfig) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("cairn.db")).unwrap();
    let engine = Engine::builder()
        .store(store)
        .register("hello", 1, hello)
        .register("approval", 1, approval)
        .subscribe("hello", "user.*")
        .subscribe("approval", "*.signup")
        .start()
        .await
        .unwrap();
    let app = cairn_http::router(engine.client(), config);
    Served { app, engine, _dir: dir }
}

impl Served {
    async fn call(&self, method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
        self.call_with(method, uri, body, None).await
    }

    async fn call_with(&self, method: &str, uri: &str, body: Option<&str>, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned()))).unwrap();
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let kind = response.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned());
        let mut body = response.into_body();
        match kind.as_deref() {
            // A live stream never ends: its first event, as `{"event", "data"}`.
            Some("text/event-stream") => (status, first_event(&mut body).await),
            Some(kind) if kind.starts_with("text/html") => {
                let bytes = body.collect().await.unwrap().to_bytes();
                (status, Value::String(String::from_utf8(bytes.to_vec()).unwrap()))
            }
            _ => {
                let bytes = body.collect().await.unwrap().to_bytes();
                let value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
                (status, value)
            }
        }
    }

    /// Every run in the store, with its signal and journal counts: what a refused request must
    /// leave as it was.
    async fn stored(&self) -> Vec<(String, String, usize, usize)> {
        let client = self.engine.client();
        let page = client.list(&RunFilter { limit: Some(1000), ..RunFilter::default() }).await.unwrap();
        let mut out = Vec::new();
        for run in page.runs {
            let signals = client.signals(&run.id).await.unwrap().len();
            let journal = client.journal(&run.id).await.unwrap().len();
            out.push((run.id.to_string(), run.status.as_str().to_owned(), signals, journal));
        }
        out
    }

    /// [`stored`](Self::stored) once the only run in the store (an `approval` run just started)
    /// has suspended on its wait, or after ten seconds as it is.
    async fn stored_once_waiting(&self) -> Vec<(String, String, usize, usize)> {
        let mut stored = self.stored().await;
        for _ in 0..200 {
            if stored[0].1 == "suspended" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            stored = self.stored().await;
        }
        stored
    }
}

/// The next server-sent event on `body` (comments skipped) as `{"event", "data"}`.
async fn first_event(body: &mut Body) -> Value {
    let mut text = String::new();
    loop {
        if let Some(end) = text.find("\n\n") {
            let frame: String = text.drain(..end + 2).collect();
            let (mut event, mut data) = (None, None);
            for line in frame.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = Some(name.to_owned());
                } else if let Some(json) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str::<Value>(json).unwrap());
                }
            }
            if let (Some(event), Some(data)) = (event, data) {
                return json!({"event": event, "data": data});
            }
            continue;
        }
        let frame = body.frame().await.expect("the stream ended before an event").unwrap();
        if let Ok(bytes) = frame.into_data() {
            text.push_str(std::str::from_utf8(&bytes).unwrap());
        }
    }
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_else(|| panic!("not an error body: {body}"))
}

async fn status_of(api: &Served, id: &str) -> Value {
    api.call("GET", &format!("/v1/runs/{id}"), None).await.1["status"].clone()
}

async fn wait_suspended(api: &Served, id: &str) {
    wait_status(api, id, "suspended").await;
}

/// Run `id` once it has `status` (it fails the test if that takes ten seconds).
async fn wait_status(api: &Served, id: &str, status: &str) -> Value {
    for _ in 0..400 {
        let run = api.call("GET", &format!("/v1/runs/{id}"), None).await.1;
        if run["status"] == json!(status) {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{id} never became {status}");
}

mod openapi;
mod refusals;
mod runs;
mod streams;
