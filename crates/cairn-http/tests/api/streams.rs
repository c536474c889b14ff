//! Live streams, published events and schedules.

use super::*;

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
