//! The light client against a real server: a worker's engine over SQLite, its API served by
//! `cairn_http::router` on a local port, every client method called over the wire.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use cairn::prelude::*;
use cairn_client::{Client, Error, ListQuery, PruneBody, PublishBody, ScheduleBody, StartOptions};
use serde_json::json;
use serde_json::value::{RawValue, to_raw_value};
use std::time::Duration;

async fn hello(ctx: Ctx, input: serde_json::Value) -> Result<String, WorkflowError> {
    let name = input["name"].as_str().unwrap_or("world").to_owned();
    ctx.step("greet", || {
        let name = name.clone();
        async move { Ok::<_, StepError>(format!("Hello, {name}!")) }
    })
    .await
}

async fn approval(ctx: Ctx, _input: serde_json::Value) -> Result<serde_json::Value, WorkflowError> {
    ctx.step("prepare", || async { Ok::<_, StepError>(()) }).await?;
    let payload: Option<serde_json::Value> =
        ctx.wait_for_event("approve", EventFilter::any(), Duration::from_secs(3600)).await?;
    Ok(payload.unwrap_or(serde_json::Value::Null))
}

/// An engine serving `hello` (subscribed to `user.*`) and `approval`, and its API on a local
/// port, with `token` if given.
struct Served {
    url: String,
    engine: Engine,
    server: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start(token: Option<&str>) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let store = cairn::SqliteStore::open(dir.path().join("cairn.db")).unwrap();
        let engine = Engine::builder()
            .store(store)
            .register("hello", 1, hello)
            .subscribe("hello", "user.*")
            .register("approval", 1, approval)
            .start()
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let config = cairn_http::ApiConfig { token: token.map(str::to_owned), ..cairn_http::ApiConfig::default() };
        let app = cairn_http::router(engine.client(), config);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Served { url, engine, server, _dir: dir }
    }

    async fn stop(self) {
        self.server.abort();
        self.engine.shutdown().await;
    }
}

fn input(value: serde_json::Value) -> Option<Box<RawValue>> {
    Some(to_raw_value(&value).unwrap())
}

/// Polls until run `id` reaches `status` (the bound only turns a hang into a failure).
async fn wait_for(client: &Client, id: &str, status: &str) -> cairn_client::RunDetail {
    for _ in 0..2_000 {
        let run = client.get(id).await.unwrap();
        if run.listed.run.status == status {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {id} never reached {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_reads_and_lists_runs() {
    let served = Served::start(None).await;
    let client = Client::new(&served.url, None).unwrap();

    let options = StartOptions {
        input: input(json!({"name": "Ada"})),
        id: Some("greet-ada".into()),
        idempotency_key: Some("ada".into()),
        priority: Some(3),
        fairness_key: Some("acme".into()),
        timeout: Some("1h".into()),
        ..StartOptions::default()
    };
    let started = client.start("hello", &options).await.unwrap();
    assert_eq!((started.created, started.run.id.as_str(), started.run.priority), (true, "greet-ada", 3));
    assert_eq!(started.run.fairness_key.as_deref(), Some("acme"));
    let greeting: String = client.result_as("greet-ada", Duration::from_secs(30)).await.unwrap();
    assert_eq!(greeting, "Hello, Ada!");
    let run = client.get("greet-ada").await.unwrap();
    assert_eq!((run.listed.run.status.as_str(), &run.output), ("completed", &json!("Hello, Ada!")));
    assert!(run.listed.run.deadline.is_some(), "the timeout set a deadline: {run:?}");

    // The same key finds the same run.
    let again = client.start("hello", &StartOptions { id: None, ..options }).await.unwrap();
    assert_eq!((again.created, again.run.id.as_str()), (false, "greet-ada"));

    let other = StartOptions { input: input(json!({"name": "Bo"})), ..StartOptions::default() };
    let bo = client.start("hello", &other).await.unwrap();
    client.result_of("hello", &bo.run.id, Duration::from_secs(30)).await.unwrap();
    let all = client.list(&ListQuery::default()).await.unwrap();
    assert_eq!(all.runs.len(), 2);
    let ada = ListQuery { input: vec![("name".into(), "Ada".into())], ..ListQuery::default() };
    let found = client.list(&ada).await.unwrap();
    assert_eq!(found.runs.iter().map(|r| r.run.id.as_str()).collect::<Vec<_>>(), ["greet-ada"]);
    let first = ListQuery { workflow: Some("hello".into()), limit: Some(1), ..ListQuery::default() };
    let page = client.list(&first).await.unwrap();
    assert_eq!(page.runs.len(), 1);
    assert!(page.next_cursor.is_some());

    let steps = client.steps("greet-ada").await.unwrap();
    assert_eq!(steps.steps.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["greet"]);
    let workflows = client.workflows().await.unwrap();
    // Every workflow the server's worker serves, runs or not.
    let counts: Vec<_> = workflows.workflows.iter().map(|w| (w.name.as_str(), w.total, w.versions.clone())).collect();
    assert_eq!(counts, [("approval", 0, vec![1]), ("hello", 2, vec![1])]);
    let prefixed = ListQuery { id_prefix: Some("greet-".into()), ..ListQuery::default() };
    let prefixed: Vec<_> = client.list(&prefixed).await.unwrap().runs.into_iter().map(|r| r.run.id).collect();
    assert_eq!(prefixed, ["greet-ada"]);
    let workers = client.workers().await.unwrap();
    assert_eq!(workers.workers.len(), 1);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_pauses_resumes_cancels_and_restarts_runs() {
    let served = Served::start(None).await;
    let client = Client::new(&served.url, None).unwrap();
    let start = |id: &str| StartOptions { id: Some(id.into()), ..StartOptions::default() };

    client.start("approval", &start("a-1")).await.unwrap();
    wait_for(&client, "a-1", "suspended").await;
    let paused = client.pause("a-1").await.unwrap();
    assert_eq!(paused.outcome, "paused");
    let resumed = client.resume("a-1").await.unwrap();
    assert_eq!(resumed.outcome, "resumed");
    let sent = client.signal("a-1", "approve", &to_raw_value(&json!({"by": "ada"})).unwrap()).await.unwrap();
    assert_eq!(sent.event, "approve");
    let done = client.result("a-1", Duration::from_secs(30)).await.unwrap();
    assert_eq!((done.listed.run.status.as_str(), &done.output), ("completed", &json!({"by": "ada"})));
    let signals = client.signals("a-1").await.unwrap();
    assert_eq!(signals.signals.len(), 1);

    let restarted = client.restart("a-1", "approve").await.unwrap();
    assert_eq!(restarted.restarted_from, "a-1");
    wait_for(&client, &restarted.run, "suspended").await;
    let cancelled = client.cancel(&restarted.run).await.unwrap();
    assert!(cancelled.outcome.starts_with("cancel"), "{cancelled:?}");
    wait_for(&client, &restarted.run, "cancelled").await;
    let failed = client.result_as::<serde_json::Value>(&restarted.run, Duration::from_secs(1)).await;
    assert!(matches!(failed, Err(Error::NotCompleted { ref status, .. }) if status == "cancelled"), "{failed:?}");

    let pruned = client.prune(&PruneBody { older_than: None, dry_run: true }).await.unwrap();
    assert!(pruned.dry_run);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_events_and_keeps_schedules() {
    let served = Served::start(None).await;
    let client = Client::new(&served.url, None).unwrap();

    let event = PublishBody { id: Some("e-1".into()), payload: input(json!({"name": "Cy"})) };
    let published = client.publish("user.signup", &event).await.unwrap();
    assert_eq!(published.runs.len(), 1);
    let greeting: String = client.result_as(&published.runs[0].run.id, Duration::from_secs(30)).await.unwrap();
    assert_eq!(greeting, "Hello, Cy!");
    let again = client.publish("user.signup", &event).await.unwrap();
    assert_eq!((again.runs.len(), again.already_started.len()), (0, 1));
    let events = client.events(Some("user.signup"), None, Some(10)).await.unwrap();
    assert_eq!((events.events.len(), events.next_cursor), (1, None));
    let (recorded, run) = (&events.events[0], &published.runs[0].run);
    assert_eq!((recorded.id.as_str(), &recorded.payload), ("e-1", &json!({"name": "Cy"})));
    assert_eq!((recorded.runs[0].workflow.as_str(), &recorded.runs[0].id), ("hello", &run.id));
    assert!(client.events(Some("user.login"), None, None).await.unwrap().events.is_empty());
    let refused = client.events(Some("user.*"), None, None).await.unwrap_err();
    assert_eq!(refused.code(), Some("invalid_topic"));

    let body = ScheduleBody { workflow: "hello".into(), every: Some("1h".into()), ..ScheduleBody::default() };
    let put = client.put_schedule("hourly", &body).await.unwrap();
    assert_eq!((put.name.as_str(), put.every_ms), ("hourly", Some(3_600_000)));
    assert_eq!(client.schedule("hourly").await.unwrap().workflow, "hello");
    assert_eq!(client.schedules().await.unwrap().schedules.len(), 1);
    assert!(client.pause_schedule("hourly").await.unwrap().paused);
    assert!(!client.resume_schedule("hourly").await.unwrap().paused);
    let fired = client.trigger_schedule("hourly").await.unwrap();
    assert_eq!(fired.run.workflow, "hello");
    client.delete_schedule("hourly").await.unwrap();
    let gone = client.schedule("hourly").await.unwrap_err();
    assert_eq!(gone.code(), Some("schedule_not_found"));
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_keep_their_codes_and_nothing_is_stored() {
    let served = Served::start(Some("s3cret")).await;
    let anonymous = Client::new(&served.url, None).unwrap();
    let denied = anonymous.list(&ListQuery::default()).await.unwrap_err();
    assert!(matches!(denied, Error::Api { status: 401, .. }), "{denied:?}");

    let client = Client::new(&served.url, Some("s3cret".into())).unwrap();
    let missing = client.get("nope").await.unwrap_err();
    assert!(matches!(&missing, Error::Api { status: 404, .. }), "{missing:?}");
    assert_eq!(missing.code(), Some("run_not_found"));
    let bad = [
        ("hello", StartOptions { timeout: Some("soon".into()), ..StartOptions::default() }, "invalid_timeout"),
        (
            "hello",
            StartOptions { idempotency_key: Some("a\0b".into()), ..StartOptions::default() },
            "invalid_idempotency_key",
        ),
        ("nope", StartOptions::default(), "unknown_workflow"),
        ("hello", StartOptions { id: Some("a/b".into()), ..StartOptions::default() }, "invalid_run_id"),
    ];
    for (workflow, options, code) in bad {
        let refused = client.start(workflow, &options).await.unwrap_err();
        assert_eq!(refused.code(), Some(code), "{options:?}: {refused}");
    }
    assert!(client.list(&ListQuery::default()).await.unwrap().runs.is_empty(), "a refused start stored a run");
    served.stop().await;

    let unreachable = Client::new("http://127.0.0.1:9", None).unwrap().get("x").await.unwrap_err();
    assert!(matches!(unreachable, Error::Unreachable { .. }), "{unreachable:?}");
    assert!(matches!(Client::new("ftp://example.com", None), Err(Error::InvalidUrl { .. })));
    assert!(Client::new("https://example.com", None).is_ok(), "https is spoken");
}
