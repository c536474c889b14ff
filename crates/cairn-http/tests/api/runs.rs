//! Starting, reading and steering runs, one at a time and in bulk.

use super::*;

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
