//! The HTTP API against a real engine on SQLite: each route's success, not found and bad input,
//! and that a refused request changes nothing stored.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_get_steps_and_list() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let (status, started) =
        api.call("POST", "/v1/workflows/hello/runs", Some(r#"{"input":{"name":"Ada"},"idempotencyKey":"k1"}"#)).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    assert_eq!(started["created"], json!(true));
    assert_eq!(started["workflow"], json!("hello"));
    let id = started["id"].as_str().unwrap().to_owned();

    let (status, again) =
        api.call("POST", "/v1/workflows/hello/runs", Some(r#"{"input":{"name":"Ada"},"idempotencyKey":"k1"}"#)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["id"], json!(id));
    assert_eq!(again["created"], json!(false));

    let output: String = api.engine.client().result(&cairn::RunId::new(&id)).await.unwrap();
    assert_eq!(output, "Hello, Ada!");
    let (status, run) = api.call("GET", &format!("/v1/workflows/hello/runs/{id}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(run["status"], json!("completed"));
    assert_eq!(run["input"], json!({"name": "Ada"}));
    assert_eq!(run["output"], json!("Hello, Ada!"));
    assert_eq!(run["stranded"], json!(false));
    assert_eq!((&run["priority"], &run["fairness_key"]), (&json!(0), &Value::Null));

    let (status, steps) = api.call("GET", &format!("/v1/workflows/hello/runs/{id}/steps"), None).await;
    assert_eq!(status, StatusCode::OK);
    let journal = steps["journal"].as_array().unwrap();
    let completed = journal.iter().find_map(|e| e["event"].get("step_completed")).unwrap_or_else(|| panic!("{steps}"));
    assert_eq!((&completed["path"], &completed["output"]), (&json!("greet"), &json!("Hello, Ada!")));
    assert!(completed["started_at"].is_i64(), "{completed}");
    let greet = &steps["steps"][0];
    assert_eq!(
        (&greet["path"], &greet["kind"], &greet["phase"]),
        (&json!("greet"), &json!("step"), &json!("completed"))
    );
    assert_eq!(greet["attempts"].as_array().unwrap().len(), 1);
    assert!(greet["duration_ms"].as_i64().is_some_and(|ms| ms >= 0), "{greet}");

    // A second run with its own id; lists by workflow and status, newest first, in pages.
    let (status, second) = api
        .call("POST", "/v1/workflows/hello/runs", Some(r#"{"input":{"name":"Bo"},"id":"second","retentionDays":2}"#))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    assert_eq!(second["id"], json!("second"));
    api.engine.client().result::<String>(&cairn::RunId::new("second")).await.unwrap();
    let (status, page) = api.call("GET", "/v1/workflows/hello/runs?status=completed&limit=1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["runs"].as_array().unwrap().len(), 1);
    assert_eq!(page["runs"][0]["id"], json!("second"));
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let (status, next) = api.call("GET", &format!("/v1/workflows/hello/runs?limit=1&cursor={cursor}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(next["runs"][0]["id"], json!(id));
    let (_, none) = api.call("GET", "/v1/workflows/hello/runs?status=failed", None).await;
    assert_eq!(none["runs"], json!([]));
    let (_, other) = api.call("GET", "/v1/workflows/approval/runs", None).await;
    assert_eq!(other["runs"], json!([]));
    // Filters on the input: a field, a JSON value, a dotted path; a page of one then the next.
    let (status, ada) = api.call("GET", "/v1/workflows/hello/runs?input.name=Ada&limit=5", None).await;
    assert_eq!(status, StatusCode::OK, "{ada}");
    let ids = |page: &Value| page["runs"].as_array().unwrap().iter().map(|r| r["id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&ada), [json!(id)]);
    let (_, quoted) = api.call("GET", "/v1/runs?input.name=%22Bo%22", None).await;
    assert_eq!(ids(&quoted), [json!("second")]);
    let (_, nobody) = api.call("GET", "/v1/runs?input.name.first=Ada", None).await;
    assert_eq!(ids(&nobody), Vec::<Value>::new());
    let (status, all) = api.call("GET", "/v1/runs?workflow=hello", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(all["runs"].as_array().unwrap().len(), 2);
    let (_, future) = api.call("GET", "/v1/runs?since=2999-01-01T00:00:00Z", None).await;
    assert_eq!(future["runs"], json!([]));
    let (_, past) = api.call("GET", "/v1/runs?until=2000-01-01T00:00:00Z", None).await;
    assert_eq!(past["runs"], json!([]));

    let (status, workflows) = api.call("GET", "/v1/workflows", None).await;
    assert_eq!(status, StatusCode::OK);
    // Every workflow a worker serves is listed, with runs or not.
    assert_eq!(
        workflows,
        json!({"workflows": [
            {"name": "approval", "runs": {}, "total": 0, "versions": [1]},
            {"name": "hello", "runs": {"completed": 2}, "total": 2, "versions": [1]},
        ]})
    );

    // By a prefix of the id, counted by the same filters.
    let (_, prefixed) = api.call("GET", "/v1/runs?id_prefix=sec", None).await;
    assert_eq!(ids(&prefixed), [json!("second")]);
    let (status, counted) = api.call("GET", "/v1/run-count?workflow=hello", None).await;
    assert_eq!((status, counted), (StatusCode::OK, json!({"count": 2, "capped": false})));
    let (_, capped) = api.call("GET", "/v1/run-count?at_most=1", None).await;
    assert_eq!(capped, json!({"count": 1, "capped": true}));
    let (_, by_input) = api.call("GET", "/v1/run-count?input.name=Ada&id_prefix=sec", None).await;
    assert_eq!(by_input["count"], json!(0));
    let (status, refused) = api.call("GET", "/v1/run-count?at_most=0", None).await;
    assert_eq!((status, &refused["error"]["code"]), (StatusCode::BAD_REQUEST, &json!("invalid_query")));

    // Its result: at once for an ended run; a waiting one after the timeout, as it is.
    let (status, result) = api.call("GET", &format!("/v1/workflows/hello/runs/{id}/result"), None).await;
    assert_eq!(
        (status, &result["status"], &result["output"]),
        (StatusCode::OK, &json!("completed"), &json!("Hello, Ada!"))
    );
    let body = r#"{"id":"waits","priority":-2,"fairnessKey":"tenant-7"}"#;
    let (_, waiting) = api.call("POST", "/v1/workflows/approval/runs", Some(body)).await;
    assert_eq!(waiting["id"], json!("waits"));
    let (_, queued) = api.call("GET", "/v1/runs/waits", None).await;
    assert_eq!((&queued["priority"], &queued["fairness_key"]), (&json!(-2), &json!("tenant-7")));
    let (status, still) = api.call("GET", "/v1/workflows/approval/runs/waits/result?timeout=50ms", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(["pending", "running", "suspended"].contains(&still["status"].as_str().unwrap()), "{still}");
    api.engine.client().cancel(&cairn::RunId::new("waits")).await.unwrap();

    // Debounced starts: the second joins the first (200, the same run, the latest input).
    let debounced = |n: u32| format!(r#"{{"input":{n},"debounce":{{"key":"k","quiet":"1h","maxWait":"2h"}}}}"#);
    let (status, first) = api.call("POST", "/v1/workflows/approval/runs", Some(&debounced(1))).await;
    assert_eq!((status, first["created"].as_bool()), (StatusCode::CREATED, Some(true)), "{first}");
    let (status, second) = api.call("POST", "/v1/workflows/approval/runs", Some(&debounced(2))).await;
    assert_eq!((status, second["created"].as_bool()), (StatusCode::OK, Some(false)), "{second}");
    assert_eq!(first["id"], second["id"]);
    let (_, joined) = api.call("GET", &format!("/v1/runs/{}", first["id"].as_str().unwrap()), None).await;
    assert_eq!((&joined["waiting_for"], &joined["debounce_key"]), (&json!("debounce"), &json!("k")), "{joined}");
    api.engine.client().cancel(&cairn::RunId::new(first["id"].as_str().unwrap())).await.unwrap();

    // One run by id alone, whatever its workflow.
    let (status, by_id) = api.call("GET", &format!("/v1/runs/{id}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(by_id, api.call("GET", &format!("/v1/workflows/hello/runs/{id}"), None).await.1);

    // Stranded runs: a run of a workflow no live worker serves (started by a detached client).
    let detached = cairn::Client::new(SqliteStore::open(api._dir.path().join("cairn.db")).unwrap());
    detached.start("retired", &1).id("orphan").allow_unknown().await.unwrap();
    let (status, stranded) = api.call("GET", "/v1/runs?stranded=true", None).await;
    assert_eq!(status, StatusCode::OK);
    let stranded: Vec<&Value> = stranded["runs"].as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(stranded, [&json!("orphan")]);

    // Prune: a dry run lists the ended runs, then they go; the unended one stays.
    let (status, dry) = api.call("POST", "/v1/runs/prune", Some(r#"{"olderThan":"0s","dryRun":true}"#)).await;
    assert_eq!(status, StatusCode::OK, "{dry}");
    assert_eq!((&dry["deleted"], &dry["dry_run"]), (&json!(0), &json!(true)));
    assert_eq!(dry["runs"].as_array().unwrap().len(), 4, "{dry}");
    assert_eq!(api.stored().await.len(), 5);
    let (status, pruned) = api.call("POST", "/v1/runs/prune", Some(r#"{"olderThan":"0s"}"#)).await;
    assert_eq!((status, &pruned["deleted"]), (StatusCode::OK, &json!(4)), "{pruned}");
    let left: Vec<String> = api.stored().await.into_iter().map(|(id, ..)| id).collect();
    assert_eq!(left, ["orphan"]);

    let (status, health) = api.call("GET", "/healthz", None).await;
    assert_eq!((status, health), (StatusCode::OK, json!({"status": "ok"})));
    api.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_cancel_pause_resume_restart() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let (_, run) = api.call("POST", "/v1/workflows/approval/runs", Some(r#"{"id":"a1"}"#)).await;
    assert_eq!(run["id"], json!("a1"));
    let (status, sent) =
        api.call("POST", "/v1/workflows/approval/runs/a1/signals/approve", Some(r#"{"by":"ops"}"#)).await;
    assert_eq!(status, StatusCode::OK, "{sent}");
    assert_eq!(sent["event"], json!("approve"));
    let output: Value = api.engine.client().result(&cairn::RunId::new("a1")).await.unwrap();
    assert_eq!(output, json!({"by": "ops"}));
    let (status, signals) = api.call("GET", "/v1/workflows/approval/runs/a1/signals", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(signals["signals"][0]["payload"], json!({"by": "ops"}));
    let (_, steps) = api.call("GET", "/v1/workflows/approval/runs/a1/steps", None).await;
    let wait = &steps["steps"][0];
    assert_eq!(
        (&wait["kind"], &wait["phase"], &wait["event"]),
        (&json!("wait"), &json!("received"), &json!("approve"))
    );
    assert!(wait["until"].is_string() && wait["ended_at"].is_string(), "{wait}");
    // An ended run refuses signals, cancels and pauses.
    let (status, body) = api.call("POST", "/v1/workflows/approval/runs/a1/signals/approve", None).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "run_finished"));
    let (status, body) = api.call("DELETE", "/v1/workflows/approval/runs/a1", None).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "run_finished"));

    // Restart from the wait: a new run, linked both ways.
    let (status, restarted) =
        api.call("POST", "/v1/workflows/approval/runs/a1/restart", Some(r#"{"fromStep":"approve"}"#)).await;
    assert_eq!(status, StatusCode::CREATED, "{restarted}");
    let new_id = restarted["run"].as_str().unwrap().to_owned();
    let (_, original) = api.call("GET", "/v1/workflows/approval/runs/a1", None).await;
    assert_eq!(original["restarts"], json!([new_id]));
    let (status, body) =
        api.call("POST", "/v1/workflows/approval/runs/a1/restart", Some(r#"{"fromStep":"nowhere"}"#)).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "unknown_step"));

    // Pause and resume the restarted run, then cancel it.
    let (status, paused) = api.call("POST", &format!("/v1/workflows/approval/runs/{new_id}/pause"), None).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert!(paused["outcome"] == json!("paused") || paused["outcome"] == json!("pause-requested"), "{paused}");
    wait_status(&api, &new_id, "paused").await;
    let (status, resumed) = api.call("POST", &format!("/v1/workflows/approval/runs/{new_id}/resume"), None).await;
    assert_eq!((status, &resumed["outcome"]), (StatusCode::OK, &json!("resumed")));
    let (status, body) = api.call("POST", &format!("/v1/workflows/approval/runs/{new_id}/resume"), None).await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "not_paused"));
    // A reason that breaks its rule is refused, and the run goes on.
    let uri = format!("/v1/workflows/approval/runs/{new_id}?reason=%0A");
    let (status, body) = api.call("DELETE", &uri, None).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "invalid_reason"));
    assert_ne!(status_of(&api, &new_id).await, json!("cancelled"));
    let uri = format!("/v1/workflows/approval/runs/{new_id}?reason=wrong%20customer");
    let (status, cancelled) = api.call("DELETE", &uri, None).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    let state = wait_status(&api, &new_id, "cancelled").await;
    assert_eq!(state["error"], json!("wrong customer"), "{state}");
    let (_, steps) = api.call("GET", &format!("/v1/workflows/approval/runs/{new_id}/steps"), None).await;
    let last = steps["journal"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["event"], json!({"cancelled": {"reason": "wrong customer"}}), "{last}");

    // A restart's reason is journaled in the new run's `started` event.
    let body = r#"{"fromStep":"approve","reason":"the customer asked again"}"#;
    let (status, again) = api.call("POST", &format!("/v1/workflows/approval/runs/{new_id}/restart"), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    let uri = format!("/v1/workflows/approval/runs/{}/steps", again["run"].as_str().unwrap());
    let (_, steps) = api.call("GET", &uri, None).await;
    assert_eq!(steps["journal"][0]["event"]["started"]["reason"], json!("the customer asked again"), "{steps}");
    let body = format!(r#"{{"fromStep":"approve","reason":"{}"}}"#, "x".repeat(1001));
    let (status, refused) =
        api.call("POST", &format!("/v1/workflows/approval/runs/{new_id}/restart"), Some(&body)).await;
    assert_eq!((status, code(&refused)), (StatusCode::BAD_REQUEST, "invalid_reason"));
    let (_, original) = api.call("GET", &format!("/v1/workflows/approval/runs/{new_id}"), None).await;
    assert_eq!(original["restarts"].as_array().unwrap().len(), 1, "the refused restart created nothing");
    api.engine.shutdown().await;
}

/// Bulk actions act on the newest runs a filter selects, at most their limit, and report each
/// run; a run the action does not apply to is refused alone; a bad request changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_actions_act_on_what_a_filter_selects_and_report_each_run() {
    let api = served(Default::default()).await;
    for i in 0..5 {
        let body = format!(r#"{{"id":"b-{i}","input":{{"tenant":{}}}}}"#, i % 2);
        assert_eq!(api.call("POST", "/v1/workflows/approval/runs", Some(&body)).await.0, StatusCode::CREATED);
    }
    assert_eq!(
        api.call("POST", "/v1/workflows/hello/runs", Some(r#"{"id":"h","input":{"name":"A"}}"#)).await.0,
        StatusCode::CREATED
    );
    for i in 0..5 {
        wait_suspended(&api, &format!("b-{i}")).await;
    }

    // Bad requests: refused, nothing paused.
    for body in [
        r#"{"action":"explode"}"#,
        r#"{"action":"pause","limit":0}"#,
        r#"{"action":"pause","filter":{"status":"nope"}}"#,
        r#"{"action":"pause","filter":{"since":"yesterday"}}"#,
        r#"{"action":"pause","filter":{"colour":"red"}}"#,
        r#"{"action":"pause","filter":[null,null]}"#,
        "[]",
    ] {
        let (status, answer) = api.call("POST", "/v1/runs/bulk", Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
    }
    assert_eq!(status_of(&api, "b-0").await, json!("suspended"));

    // Pause the newest three of tenant 0's and 1's approvals: three, and more to do.
    let pause = r#"{"action":"pause","filter":{"workflow":"approval"},"limit":3}"#;
    let (status, paused) = api.call("POST", "/v1/runs/bulk", Some(pause)).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(
        (&paused["action"], &paused["done"], &paused["refused"], &paused["more"]),
        (&json!("pause"), &json!(3), &json!(0), &json!(true))
    );
    let ids: Vec<&str> = paused["runs"].as_array().unwrap().iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(ids, ["b-4", "b-3", "b-2"]);
    assert!(
        paused["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == json!("paused") && r["workflow"] == json!("approval"))
    );
    assert_eq!((status_of(&api, "b-2").await, status_of(&api, "b-1").await), (json!("paused"), json!("suspended")));

    // Resume by input: tenant 0's paused runs (b-4, b-2); b-0 is not paused and is refused.
    let resume = r#"{"action":"resume","filter":{"input":{"tenant":0}}}"#;
    let (_, resumed) = api.call("POST", "/v1/runs/bulk", Some(resume)).await;
    assert_eq!(
        (&resumed["done"], &resumed["refused"], &resumed["more"]),
        (&json!(2), &json!(1), &json!(false)),
        "{resumed}"
    );
    let refused = resumed["runs"].as_array().unwrap().iter().find(|r| r["run"] == json!("b-0")).unwrap();
    assert_eq!(refused["error"]["code"], json!("not_paused"), "{resumed}");
    assert_eq!(status_of(&api, "b-3").await, json!("paused"));
    wait_suspended(&api, "b-4").await;
    wait_suspended(&api, "b-2").await;

    // Cancel every suspended run; the paused one and the completed hello stay.
    let (_, cancelled) =
        api.call("POST", "/v1/runs/bulk", Some(r#"{"action":"cancel","filter":{"status":"suspended"}}"#)).await;
    assert_eq!((&cancelled["done"], &cancelled["refused"]), (&json!(4), &json!(0)), "{cancelled}");
    assert_eq!(
        (status_of(&api, "b-3").await, status_of(&api, "b-1").await, status_of(&api, "h").await),
        (json!("paused"), json!("cancelled"), json!("completed"))
    );
    api.engine.shutdown().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_streams_send_each_change_once_and_end_on_shutdown() {
    let config = cairn_http::ApiConfig { live_interval: Duration::from_millis(10), ..cairn_http::ApiConfig::default() };
    let shutdown = config.shutdown.clone();
    let api = served(config).await;
    let (status, _) = api.call("POST", "/v1/workflows/approval/runs", Some(r#"{"id":"l1"}"#)).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, first) = api.call("GET", "/v1/live/runs?workflow=approval", None).await;
    assert_eq!((status, &first["event"]), (StatusCode::OK, &json!("runs")), "{first}");
    assert_eq!(first["data"]["runs"]["runs"][0]["id"], json!("l1"), "{first}");
    assert_eq!(first["data"]["workflows"]["workflows"][0]["name"], json!("approval"), "{first}");
    let (status, missing) = api.call("GET", "/v1/workflows/approval/runs/nope/live", None).await;
    assert_eq!((status, code(&missing)), (StatusCode::NOT_FOUND, "run_not_found"));

    // A second stream of the same run asks for whole snapshots: it shares the first one's reader.
    let request = Request::get("/v1/workflows/approval/runs/l1/live?patches=false").body(Body::empty()).unwrap();
    let mut wholes = api.app.clone().oneshot(request).await.unwrap().into_body();
    let request = Request::get("/v1/workflows/approval/runs/l1/live").body(Body::empty()).unwrap();
    let mut body = api.app.clone().oneshot(request).await.unwrap().into_body();
    let first = first_event(&mut body).await;
    assert_eq!(first["event"], json!("run"), "the first event is the whole run");
    let mut snapshot = first["data"].clone();
    let mut patched = 0;
    // Polled every 10 ms, the stream sends only what changed: a patch of it (or the whole run
    // when that is shorter), never an empty patch or the same snapshot again.
    let mut follow = async |snapshot: &mut Value, until: &str| {
        while snapshot["run"]["status"] != json!(until) {
            let next = first_event(&mut body).await;
            let before = snapshot.clone();
            match next["event"].as_str() {
                Some("patch") => {
                    let ops = next["data"].as_array().unwrap();
                    assert!(!ops.is_empty(), "an empty patch");
                    cairn_http::patch::apply(snapshot, ops).unwrap();
                    patched += 1;
                }
                _ => {
                    assert_eq!(next["event"], json!("run"), "{next}");
                    *snapshot = next["data"].clone();
                }
            }
            assert_ne!(*snapshot, before, "the stream sent an unchanged snapshot again");
        }
    };
    follow(&mut snapshot, "suspended").await;
    assert_eq!(snapshot["steps"]["steps"][0]["kind"], json!("wait"), "{snapshot}");
    let (status, _) = api.call("POST", "/v1/workflows/approval/runs/l1/signals/approve", Some("1")).await;
    assert_eq!(status, StatusCode::OK);
    follow(&mut snapshot, "completed").await;
    assert!(patched > 0, "no change came as a patch");
    assert_eq!(snapshot["run"]["output"], json!(1), "{snapshot}");
    assert_eq!(snapshot["signals"]["signals"][0]["name"], json!("approve"), "{snapshot}");
    // What the patches built is what a whole snapshot says.
    let mut whole = first_event(&mut wholes).await;
    while whole["data"]["run"]["status"] != json!("completed") {
        whole = first_event(&mut wholes).await;
        assert_eq!(whole["event"], json!("run"), "patches=false sent {whole}");
    }
    assert_eq!(whole["data"], snapshot);

    // Shutting down ends the stream, so a graceful stop need not wait for the browser.
    shutdown.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(frame) = body.frame().await {
            frame.unwrap();
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream went on after shutdown");
    api.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_start_one_run_per_subscribed_workflow_once() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let event = r#"{"id":"e1","payload":{"name":"Ada"}}"#;
    let (status, published) = api.call("POST", "/v1/events/user.signup", Some(event)).await;
    assert_eq!(status, StatusCode::CREATED, "{published}");
    assert_eq!((&published["id"], &published["topic"]), (&json!("e1"), &json!("user.signup")));
    let started: Vec<&str> =
        published["runs"].as_array().unwrap().iter().map(|r| r["workflow"].as_str().unwrap()).collect();
    assert_eq!(started, ["approval", "hello"]);
    assert!(
        published["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["created"] == json!(true) && r["idempotency_key"] == json!("event:e1"))
    );
    assert_eq!(published["already_started"], json!([]));
    let hello = published["runs"][1]["id"].as_str().unwrap();
    let output: String = api.engine.client().result(&cairn::RunId::new(hello)).await.unwrap();
    assert_eq!(output, "Hello, Ada!");

    // The same id again: nothing started, the earlier runs named.
    let (status, again) = api.call("POST", "/v1/events/user.signup", Some(event)).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["runs"], json!([]));
    let ids = |answer: &Value, list: &str| {
        answer[list].as_array().unwrap().iter().map(|r| r["id"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&again, "already_started"), ids(&published, "runs"));
    // Only `hello` listens to `user.login`; nobody to `order.placed`.
    let (status, login) = api.call("POST", "/v1/events/user.login", Some(r#"{"payload":{"name":"Bo"}}"#)).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(login["runs"].as_array().unwrap().len(), 1);
    assert!(!login["id"].as_str().unwrap().is_empty(), "a generated id: {login}");
    let (status, nobody) = api.call("POST", "/v1/events/order.placed", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((&nobody["runs"], &nobody["already_started"]), (&json!([]), &json!([])));
    assert_eq!(api.stored().await.len(), 3);

    // Each event is recorded once, newest first, with the runs it started.
    let (status, page) = api.call("GET", "/v1/events", None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let topics: Vec<&str> = page["events"].as_array().unwrap().iter().map(|e| e["topic"].as_str().unwrap()).collect();
    assert_eq!(topics, ["order.placed", "user.login", "user.signup"]);
    let e1 = &page["events"][2];
    assert_eq!((&e1["id"], &e1["payload"]), (&json!("e1"), &json!({"name": "Ada"})));
    let runs: Vec<(&Value, &Value)> =
        e1["runs"].as_array().unwrap().iter().map(|r| (&r["workflow"], &r["id"])).collect();
    let started: Vec<(&Value, &Value)> =
        published["runs"].as_array().unwrap().iter().map(|r| (&r["workflow"], &r["id"])).collect();
    assert_eq!(runs, started);
    assert_eq!((&page["events"][0]["runs"], &page["events"][0]["payload"]), (&json!([]), &Value::Null));
    let (_, first) = api.call("GET", "/v1/events?limit=2", None).await;
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (_, rest) = api.call("GET", &format!("/v1/events?limit=2&cursor={cursor}"), None).await;
    assert_eq!((rest["events"][0]["id"].clone(), rest["next_cursor"].clone()), (json!("e1"), Value::Null));
    let (_, login) = api.call("GET", "/v1/events?topic=user.login", None).await;
    assert_eq!(login["events"].as_array().unwrap().len(), 1);
    for bad in ["topic=user.*", "limit=0", "cursor=nope", "since=2026"] {
        let (status, body) = api.call("GET", &format!("/v1/events?{bad}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    api.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_declared_steered_and_deleted() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let body = r#"{"workflow":"hello","cron":["0 9 * * MON-FRI"],"timeZone":"Europe/Berlin","input":{"name":"Ada"},"catchUp":"all:3"}"#;
    let (status, put) = api.call("PUT", "/v1/schedules/weekday-greeting", Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{put}");
    assert_eq!(
        (&put["workflow"], &put["cron"], &put["time_zone"], &put["catch_up"], &put["paused"]),
        (&json!("hello"), &json!(["0 9 * * MON-FRI"]), &json!("Europe/Berlin"), &json!("all:3"), &json!(false))
    );
    assert!(
        put["next_fire_at"].as_str().unwrap().contains("T07:00:00")
            || put["next_fire_at"].as_str().unwrap().contains("T08:00:00")
    );
    let (_, listed) = api.call("GET", "/v1/schedules", None).await;
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 1);
    let (status, paused) = api.call("POST", "/v1/schedules/weekday-greeting/pause", None).await;
    assert_eq!((status, &paused["paused"]), (StatusCode::OK, &json!(true)));
    let (status, started) = api.call("POST", "/v1/schedules/weekday-greeting/trigger", None).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    assert!(started["id"].as_str().unwrap().starts_with("weekday-greeting@"));
    let output: String = api.engine.client().result(&cairn::RunId::new(started["id"].as_str().unwrap())).await.unwrap();
    assert_eq!(output, "Hello, Ada!");
    let (status, resumed) = api.call("POST", "/v1/schedules/weekday-greeting/resume", None).await;
    assert_eq!((status, &resumed["paused"]), (StatusCode::OK, &json!(false)));

    // Refused, and nothing changes.
    let before = api.call("GET", "/v1/schedules/weekday-greeting", None).await.1;
    let bad = StatusCode::BAD_REQUEST;
    for (body, status_wanted, code_wanted) in [
        (r#"{"workflow":"hello","cron":["0 9 * * FUNDAY"]}"#, bad, "invalid_schedule"),
        (
            r#"{"workflow":"hello","cron":["* * * * *"],"timeZone":"Atlantis/City"}"#,
            StatusCode::NOT_FOUND,
            "unknown_time_zone",
        ),
        (r#"{"workflow":"hello","every":"soon"}"#, bad, "invalid_schedule"),
        (r#"{"workflow":"hello","every":"1m","timeZone":"Atlantis/City"}"#, StatusCode::NOT_FOUND, "unknown_time_zone"),
        (r#"{"workflow":"hello","every":"1m","catchUp":"always"}"#, bad, "invalid_schedule"),
        (r#"{"workflow":"hello","every":"1m","input":{"nom":"x"}}"#, bad, "invalid_payload"),
        (r#"{"workflow":"hello","every":"1m","surprise":1}"#, bad, "invalid_json"),
        (r#"{"workflow":"hel\u0085lo","every":"1m"}"#, bad, "invalid_workflow_name"),
        (r#"["hello", [], null, "1m"]"#, bad, "invalid_json"),
    ] {
        let (status, refused) = api.call("PUT", "/v1/schedules/weekday-greeting", Some(body)).await;
        assert_eq!((status, code(&refused)), (status_wanted, code_wanted), "{body}: {refused}");
    }
    assert_eq!(api.call("GET", "/v1/schedules/weekday-greeting", None).await.1, before);
    let (status, missing) = api.call("POST", "/v1/schedules/nope/pause", None).await;
    assert_eq!((status, code(&missing)), (StatusCode::NOT_FOUND, "schedule_not_found"));

    let (status, _) = api.call("DELETE", "/v1/schedules/weekday-greeting", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, gone) = api.call("GET", "/v1/schedules/weekday-greeting", None).await;
    assert_eq!((status, code(&gone)), (StatusCode::NOT_FOUND, "schedule_not_found"));
    api.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_and_change_nothing() {
    let api = served(cairn_http::ApiConfig { body_limit: 1024, ..cairn_http::ApiConfig::default() }).await;
    let (_, run) = api.call("POST", "/v1/workflows/approval/runs", Some(r#"{"id":"w"}"#)).await;
    assert_eq!(run["id"], json!("w"));
    let before = api.stored_once_waiting().await;
    let big = format!(r#"{{"input":{{"name":"{}"}}}}"#, "x".repeat(2048));
    let cases: Vec<(&str, String, Option<String>, StatusCode, &str)> = vec![
        ("POST", "/v1/workflows/hello/runs".into(), Some("{not json".into()), StatusCode::BAD_REQUEST, "invalid_json"),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{"name":3}}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_payload",
        ),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{},"colour":"red"}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{"name":"a"},"fairnessKey":""}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_fairness_key",
        ),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{"name":"a"},"debounce":{"key":"k","quiet":"soon"}}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_debounce",
        ),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{"name":"a"},"debounce":{"key":"","quiet":"1s"}}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_debounce",
        ),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{"name":"a"},"idempotencyKey":"i","debounce":{"key":"k","quiet":"1s"}}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_debounce",
        ),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{"name":"a"},"priority":1.5}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{"name":"a"},"version":"one"}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        ("POST", "/v1/workflows/hello/runs".into(), Some(big), StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
        (
            "POST",
            "/v1/workflows/hello/runs".into(),
            Some(r#"{"input":{"name":"a"},"version":7}"#.into()),
            StatusCode::NOT_FOUND,
            "unknown_version",
        ),
        (
            "POST",
            "/v1/workflows/nope/runs".into(),
            Some(r#"{"input":1}"#.into()),
            StatusCode::NOT_FOUND,
            "unknown_workflow",
        ),
        (
            "POST",
            "/v1/workflows/%01bad/runs".into(),
            Some(r#"{"input":1}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_workflow_name",
        ),
        (
            "POST",
            "/v1/workflows/approval/runs".into(),
            Some(r#"{"id":"w"}"#.into()),
            StatusCode::CONFLICT,
            "duplicate_run_id",
        ),
        (
            "POST",
            "/v1/workflows/approval/runs".into(),
            Some(r#"{"id":"a\u0001b"}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_run_id",
        ),
        (
            "POST",
            "/v1/workflows/approval/runs".into(),
            Some(r#"{"idempotencyKey":"a\u0000b"}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
        ),
        ("GET", "/v1/workflows/approval/runs/missing".into(), None, StatusCode::NOT_FOUND, "run_not_found"),
        ("GET", "/v1/workflows/hello/runs/w".into(), None, StatusCode::NOT_FOUND, "run_not_found"),
        ("GET", "/v1/workflows/approval/runs/%01".into(), None, StatusCode::BAD_REQUEST, "invalid_run_id"),
        ("GET", "/v1/workflows/approval/runs/missing/steps".into(), None, StatusCode::NOT_FOUND, "run_not_found"),
        ("GET", "/v1/workflows/approval/runs?status=happy".into(), None, StatusCode::BAD_REQUEST, "invalid_query"),
        ("GET", "/v1/workflows/approval/runs?cursor=zzz".into(), None, StatusCode::BAD_REQUEST, "invalid_cursor"),
        ("GET", "/v1/workflows/approval/runs?limit=0".into(), None, StatusCode::BAD_REQUEST, "invalid_query"),
        ("GET", "/v1/workflows/approval/runs?limit=many".into(), None, StatusCode::BAD_REQUEST, "invalid_query"),
        ("GET", "/v1/runs?since=yesterday".into(), None, StatusCode::BAD_REQUEST, "invalid_query"),
        ("GET", "/v1/runs?colour=red".into(), None, StatusCode::BAD_REQUEST, "invalid_query"),
        ("GET", "/v1/runs?input.=x".into(), None, StatusCode::BAD_REQUEST, "invalid_query"),
        (
            "GET",
            "/v1/workflows/approval/runs/w/result?timeout=soon".into(),
            None,
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        ("GET", "/v1/workflows/hello/runs/w/result".into(), None, StatusCode::NOT_FOUND, "run_not_found"),
        ("GET", "/v1/runs?input.a=1&input.a.b=2".into(), None, StatusCode::BAD_REQUEST, "invalid_query"),
        (
            "POST",
            "/v1/workflows/approval/runs/w/signals/approve".into(),
            Some("{oops".into()),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "POST",
            "/v1/workflows/approval/runs/missing/signals/approve".into(),
            Some("1".into()),
            StatusCode::NOT_FOUND,
            "run_not_found",
        ),
        (
            "POST",
            "/v1/workflows/hello/runs/w/signals/approve".into(),
            Some("1".into()),
            StatusCode::NOT_FOUND,
            "run_not_found",
        ),
        (
            "POST",
            "/v1/workflows/approval/runs/w/signals/%01".into(),
            Some("1".into()),
            StatusCode::BAD_REQUEST,
            "invalid_event_name",
        ),
        ("DELETE", "/v1/workflows/approval/runs/missing".into(), None, StatusCode::NOT_FOUND, "run_not_found"),
        ("POST", "/v1/workflows/approval/runs/w/resume".into(), None, StatusCode::CONFLICT, "not_paused"),
        (
            "POST",
            "/v1/workflows/approval/runs/w/restart".into(),
            Some(r#"{"fromStep":"approve"}"#.into()),
            StatusCode::CONFLICT,
            "not_ended",
        ),
        (
            "POST",
            "/v1/workflows/approval/runs/w/restart".into(),
            Some("{}".into()),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        ("GET", "/v1/nothing-here".into(), None, StatusCode::NOT_FOUND, "not_found"),
        ("POST", "/v1/events/user..signup".into(), None, StatusCode::BAD_REQUEST, "invalid_topic"),
        ("GET", "/v1/runs/missing".into(), None, StatusCode::NOT_FOUND, "run_not_found"),
        ("GET", "/v1/runs/%01".into(), None, StatusCode::BAD_REQUEST, "invalid_run_id"),
        ("GET", "/v1/runs?stranded=maybe".into(), None, StatusCode::BAD_REQUEST, "invalid_query"),
        (
            "POST",
            "/v1/runs/prune".into(),
            Some(r#"{"olderThan":"soon"}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_duration",
        ),
        (
            "POST",
            "/v1/runs/prune".into(),
            Some(r#"{"olderThan":"0s","all":true}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        ("POST", "/v1/events/user.*".into(), None, StatusCode::BAD_REQUEST, "invalid_topic"),
        (
            "POST",
            "/v1/events/user.signup".into(),
            Some(r#"{"id":""}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_event_id",
        ),
        ("POST", "/v1/events/user.signup".into(), Some("{oops".into()), StatusCode::BAD_REQUEST, "invalid_json"),
        (
            "POST",
            "/v1/events/user.signup".into(),
            Some(r#"{"data":1}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        // `hello` cannot read this payload (`approval` could): neither starts.
        (
            "POST",
            "/v1/events/user.signup".into(),
            Some(r#"{"id":"e1","payload":{"name":3}}"#.into()),
            StatusCode::BAD_REQUEST,
            "invalid_payload",
        ),
        (
            "POST",
            "/v1/events/user.signup".into(),
            Some(format!(r#"{{"payload":"{}"}}"#, "x".repeat(2048))),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
    ];
    for (method, uri, body, status, expected) in cases {
        let (got, answer) = api.call(method, &uri, body.as_deref()).await;
        assert_eq!((got, code(&answer)), (status, expected), "{method} {uri}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
    }
    assert_eq!(api.stored().await, before, "a refused request changed the store");
    api.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_every_route_but_healthz() {
    let config = cairn_http::ApiConfig { token: Some("s3cret".into()), ..cairn_http::ApiConfig::default() };
    let api = served(config).await;
    let routes = [
        ("POST", "/v1/workflows/hello/runs", Some(r#"{"input":{"name":"x"}}"#)),
        ("GET", "/v1/workflows/hello/runs", None),
        ("GET", "/v1/runs", None),
        ("GET", "/v1/workflows", None),
        ("GET", "/v1/workflows/hello/runs/x", None),
        ("GET", "/v1/workflows/hello/runs/x/steps", None),
        ("GET", "/v1/workflows/hello/runs/x/signals", None),
        ("POST", "/v1/workflows/hello/runs/x/signals/e", None),
        ("DELETE", "/v1/workflows/hello/runs/x", None),
        ("POST", "/v1/workflows/hello/runs/x/pause", None),
        ("POST", "/v1/workflows/hello/runs/x/resume", None),
        ("POST", "/v1/workflows/hello/runs/x/restart", Some(r#"{"fromStep":"greet"}"#)),
        ("GET", "/openapi.json", None),
        ("GET", "/v1/workers", None),
        ("GET", "/v1/live/runs", None),
        ("GET", "/v1/workflows/hello/runs/x/live", None),
        ("POST", "/v1/events/user.signup", Some(r#"{"payload":{"name":"x"}}"#)),
        ("GET", "/v1/runs/x", None),
        ("POST", "/v1/runs/prune", Some(r#"{"olderThan":"0s"}"#)),
        ("GET", "/metrics", None),
        ("GET", "/v1/workflows/hello/runs/x/result", None),
    ];
    for (method, uri, body) in routes {
        for token in [None, Some("wrong"), Some("s3cret-but-longer")] {
            let (status, answer) = api.call_with(method, uri, body, token).await;
            assert_eq!((status, code(&answer)), (StatusCode::UNAUTHORIZED, "unauthorized"), "{method} {uri} {token:?}");
        }
    }
    assert!(api.stored().await.is_empty(), "an unauthorized start created a run");
    let (status, _) = api.call("GET", "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    // The dashboard's page holds no data: it is served to anyone, and asks for the token.
    let (status, page) = api.call("GET", "/", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.as_str().unwrap().contains("token-form"), "{page}");
    let (status, answer) = api.call_with("GET", "/v1/runs", None, Some("s3cret")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // The scheme's name is case-insensitive (RFC 9110); the token is not.
    for (value, expected) in [
        ("bearer s3cret", StatusCode::OK),
        ("BEARER s3cret", StatusCode::OK),
        ("bearer S3CRET", StatusCode::UNAUTHORIZED),
        ("Basic s3cret", StatusCode::UNAUTHORIZED),
    ] {
        let request =
            Request::builder().uri("/v1/runs").header(header::AUTHORIZATION, value).body(Body::empty()).unwrap();
        assert_eq!(api.app.clone().oneshot(request).await.unwrap().status(), expected, "{value}");
    }
    api.engine.shutdown().await;
}

/// A payload nested past the limit is refused where it comes in: it was stored with `200` and
/// failed the run that read it (serde_json's recursion limit), for good. So is one holding NUL
/// (`\u0000`), on every store: on PostgreSQL one such input made every input filter answer 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_nested_past_the_limit_or_holding_nul_are_refused_and_store_nothing() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let (status, _) = api.call("POST", "/v1/workflows/approval/runs", Some(r#"{"id":"deep"}"#)).await;
    assert_eq!(status, StatusCode::CREATED);
    let before = api.stored_once_waiting().await;
    let nested = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
    let deep = nested(128);
    let start = format!(r#"{{"input":{}}}"#, nested(101));
    let publish = format!(r#"{{"payload":{}}}"#, nested(101));
    for (method, uri, body) in [
        ("POST", "/v1/workflows/approval/runs/deep/signals/approve", deep.as_str()),
        ("POST", "/v1/workflows/hello/runs", start.as_str()),
        ("POST", "/v1/events/user.signup", publish.as_str()),
        ("POST", "/v1/workflows/approval/runs/deep/signals/approve", r#"{"note": "a\u0000b"}"#),
        ("POST", "/v1/workflows/hello/runs", r#"{"input": {"name": "\u0000"}}"#),
        ("POST", "/v1/events/user.signup", r#"{"payload": {"\u0000": 1}}"#),
        ("PUT", "/v1/schedules/nul", r#"{"workflow": "hello", "every": "1h", "input": {"name": "\u0000"}}"#),
    ] {
        let (status, answer) = api.call(method, uri, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {answer}");
        assert!(["invalid_payload", "invalid_json"].contains(&code(&answer)), "{uri}: {answer}");
    }
    assert_eq!(api.stored().await, before, "a refused payload was stored");
    // At the limit it is taken, and the run reads it.
    let (status, answer) =
        api.call("POST", "/v1/workflows/approval/runs/deep/signals/approve", Some(&nested(100))).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let mut run = Value::Null;
    for _ in 0..200 {
        (_, run) = api.call("GET", "/v1/workflows/approval/runs/deep", None).await;
        if run["status"] != json!("suspended") && run["status"] != json!("running") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(run["status"], json!("completed"), "{run}");
    api.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_a_route_does_not_take_is_405_with_an_error_body() {
    let api = served(cairn_http::ApiConfig::default()).await;
    for (method, uri) in [("PUT", "/v1/runs"), ("DELETE", "/v1/workflows"), ("PATCH", "/v1/workflows/hello/runs")] {
        let request = Request::builder().method(method).uri(uri).body(Body::empty()).unwrap();
        let response = api.app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        assert!(response.headers().contains_key(header::ALLOW), "{method} {uri}: {:?}", response.headers());
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(code(&answer), "method_not_allowed", "{method} {uri}: {answer}");
    }
    assert!(api.stored().await.is_empty());
    api.engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_matches_the_router() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let (status, document) = api.call("GET", "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1"), "{}", document["openapi"]);
    assert_eq!(document, cairn_http::served_openapi(&cairn_http::ApiConfig::default()));
    // Without a token the document asks for none; with one, every route but two needs it.
    assert_eq!(document.get("security"), None);
    let secured = cairn_http::openapi();
    assert_eq!(secured["security"], json!([{"bearer": []}]));
    assert!(secured["paths"]["/v1/runs"]["get"]["responses"]["401"]["description"].is_string());
    assert_eq!(document["paths"]["/v1/runs"]["get"]["responses"].get("401"), None);

    // Every route the issue fixes is documented, and nothing else.
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.push((method.to_uppercase(), path.clone()));
        }
    }
    documented.sort();
    let mut expected: Vec<(String, String)> = [
        ("GET", "/"),
        ("GET", "/healthz"),
        ("GET", "/openapi.json"),
        ("GET", "/v1/workers"),
        ("GET", "/v1/live/runs"),
        ("GET", "/v1/workflows/{name}/runs/{id}/live"),
        ("GET", "/v1/runs"),
        ("GET", "/v1/workflows"),
        ("POST", "/v1/workflows/{name}/runs"),
        ("GET", "/v1/workflows/{name}/runs"),
        ("GET", "/v1/workflows/{name}/runs/{id}"),
        ("DELETE", "/v1/workflows/{name}/runs/{id}"),
        ("GET", "/v1/workflows/{name}/runs/{id}/steps"),
        ("GET", "/v1/workflows/{name}/runs/{id}/signals"),
        ("POST", "/v1/workflows/{name}/runs/{id}/signals/{event}"),
        ("POST", "/v1/workflows/{name}/runs/{id}/pause"),
        ("POST", "/v1/workflows/{name}/runs/{id}/resume"),
        ("POST", "/v1/workflows/{name}/runs/{id}/restart"),
        ("POST", "/v1/events/{topic}"),
        ("GET", "/v1/events"),
        ("GET", "/v1/runs/{id}"),
        ("DELETE", "/v1/runs/{id}"),
        ("GET", "/v1/runs/{id}/steps"),
        ("GET", "/v1/runs/{id}/signals"),
        ("POST", "/v1/runs/{id}/signals/{event}"),
        ("POST", "/v1/runs/{id}/pause"),
        ("POST", "/v1/runs/{id}/resume"),
        ("POST", "/v1/runs/{id}/restart"),
        ("GET", "/v1/runs/{id}/result"),
        ("POST", "/v1/runs/prune"),
        ("GET", "/v1/run-count"),
        ("POST", "/v1/runs/bulk"),
        ("GET", "/metrics"),
        ("GET", "/v1/workflows/{name}/runs/{id}/result"),
        ("GET", "/v1/schedules"),
        ("PUT", "/v1/schedules/{name}"),
        ("GET", "/v1/schedules/{name}"),
        ("DELETE", "/v1/schedules/{name}"),
        ("POST", "/v1/schedules/{name}/pause"),
        ("POST", "/v1/schedules/{name}/resume"),
        ("POST", "/v1/schedules/{name}/trigger"),
    ]
    .iter()
    .map(|(m, p)| (m.to_string(), p.to_string()))
    .collect();
    expected.sort();
    assert_eq!(documented, expected);

    // A `u32` the server takes (a version or a retention up to 4,294,967,295) is not documented
    // as `int32`, which tools read as at most 2,147,483,647 (Schemathesis sent 2,147,483,648 as
    // "schema-violating" and failed the server for taking it).
    let retention = &document["components"]["schemas"]["StartBody"]["properties"]["retentionDays"];
    assert_eq!((&retention["format"], &retention["maximum"]), (&json!("int64"), &json!(u32::MAX)), "{retention}");
    let text = document.to_string();
    assert!(!text.contains(r#""format":"int32","maximum":4294967295"#), "a u32 documented as int32");
    assert_eq!(document["components"]["schemas"]["RunView"]["properties"]["version"]["format"], "int64");

    // Every documented route answers on the real router (its handler, not the fallback), with a
    // status the document lists for it.
    for (method, path) in &documented {
        let uri = (path.replace("{name}", "approval").replace("{id}", "missing"))
            .replace("{event}", "approve")
            .replace("{topic}", "nobody.listens");
        let body = match path.as_str() {
            "/v1/workflows/{name}/runs" if method == "POST" => Some(r#"{"input":null}"#),
            p if p.ends_with("/restart") => Some(r#"{"fromStep":"approve"}"#),
            _ => None,
        };
        let (status, answer) = api.call(method, &uri, body).await;
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        if !status.is_success() {
            assert_ne!(code(&answer), "not_found", "{method} {uri} fell through to the fallback");
        }
        let responses = &document["paths"][path][method.to_lowercase()]["responses"];
        assert!(
            responses.get(status.as_str()).is_some(),
            "{method} {path} answered {status}, not documented: {responses}"
        );
    }
    api.engine.shutdown().await;
}

/// A workflow this server's engine does not register starts when some worker has served it on
/// the store (at the newest version served), and is refused with `unknown_workflow` when none
/// ever has, unless the start or schedule says `allowUnknown`; a refused one stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_of_workflows_nobody_serves_are_refused_unless_asked_for() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let store = api.engine.client().store().clone();
    let billing = |version| cairn::store::WorkflowKey { name: "billing".into(), version };
    store.record_served(&[billing(2), billing(3)], cairn::Timestamp::from_millis(0)).await.unwrap();

    let (status, started) = api.call("POST", "/v1/workflows/billing/runs", Some(r#"{"id":"b1","input":1}"#)).await;
    assert_eq!((status, &started["version"]), (StatusCode::CREATED, &json!(3)), "{started}");
    let (status, pinned) = api.call("POST", "/v1/workflows/billing/runs", Some(r#"{"input":1,"version":2}"#)).await;
    assert_eq!((status, &pinned["version"]), (StatusCode::CREATED, &json!(2)), "{pinned}");
    let (status, body) = api.call("POST", "/v1/workflows/billing/runs", Some(r#"{"input":1,"version":9}"#)).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "unknown_version"));

    let (status, body) = api.call("POST", "/v1/workflows/nobody/runs", Some(r#"{"id":"n1"}"#)).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "unknown_workflow"), "{body}");
    let (status, _) = api.call("GET", "/v1/runs/n1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the refused start stored nothing");
    let every = r#"{"workflow":"nobody","every":"1h"}"#;
    let (status, body) = api.call("PUT", "/v1/schedules/nightly-nobody", Some(every)).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "unknown_workflow"), "{body}");
    let (status, _) = api.call("GET", "/v1/schedules/nightly-nobody", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the refused schedule stored nothing");

    let (status, anyway) =
        api.call("POST", "/v1/workflows/nobody/runs", Some(r#"{"id":"n1","allowUnknown":true}"#)).await;
    assert_eq!((status, &anyway["status"]), (StatusCode::CREATED, &json!("pending")), "{anyway}");
    let every = r#"{"workflow":"nobody","every":"1h","allowUnknown":true}"#;
    let (status, body) = api.call("PUT", "/v1/schedules/nightly-nobody", Some(every)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    api.engine.shutdown().await;
}

/// A run kept for the longest retention a start may ask (`u32::MAX` days) ends past the year
/// 9999: it is shown with the last time RFC 3339 can write, not a panic that drops the
/// connection (what Schemathesis found).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_kept_past_the_year_9999_is_shown() {
    let api = served(cairn_http::ApiConfig::default()).await;
    let start = r#"{"id":"forever","input":{"name":"Ada"},"retentionDays":4294967295}"#;
    let (status, _) = api.call("POST", "/v1/workflows/hello/runs", Some(start)).await;
    assert_eq!(status, StatusCode::CREATED);
    api.engine.client().result::<String>(&cairn::RunId::new("forever")).await.unwrap();
    let (status, run) = api.call("GET", "/v1/runs/forever", None).await;
    assert_eq!((status, &run["delete_after"]), (StatusCode::OK, &json!("9999-12-31T23:59:59.999Z")), "{run}");
    let (status, page) = api.call("GET", "/v1/runs", None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    api.engine.shutdown().await;
}
