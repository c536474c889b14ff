//! What the API refuses, and that a refusal changes nothing stored.

use super::*;

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
