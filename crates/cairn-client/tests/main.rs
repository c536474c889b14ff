//! The light client against a real server: a worker's engine over SQLite, its API served by
//! `cairn_http::router` on a local port, every client method called over the wire.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use cairn::prelude::*;
use cairn_client::{
    BulkAction, BulkBody, BulkFilter, CancelOptions, EventQuery, Operations, PauseOptions, RestartBody, WorkersQuery,
};
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
    client.result(&bo.run.id, Duration::from_secs(30)).await.unwrap();
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
    let workers = client.workers(WorkersQuery::default()).await.unwrap();
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
    let paused = client.pause("a-1", &PauseOptions::default()).await.unwrap();
    assert_eq!(paused.outcome, "paused");
    let resumed = client.resume("a-1").await.unwrap();
    assert_eq!(resumed.outcome, "resumed");
    let sent = client.signal("a-1", "approve", &to_raw_value(&json!({"by": "ada"})).unwrap()).await.unwrap();
    assert_eq!(sent.event, "approve");
    let done = client.result("a-1", Duration::from_secs(30)).await.unwrap();
    assert_eq!((done.listed.run.status.as_str(), &done.output), ("completed", &json!({"by": "ada"})));
    let signals = client.signals("a-1").await.unwrap();
    assert_eq!(signals.signals.len(), 1);

    let restarted = client.restart("a-1", &RestartBody { from_step: "approve".into(), reason: None }).await.unwrap();
    assert_eq!(restarted.restarted_from, "a-1");
    wait_for(&client, &restarted.run, "suspended").await;
    let cancelled = client.cancel(&restarted.run, &CancelOptions::default()).await.unwrap();
    assert!(cancelled.outcome.as_str().starts_with("cancel"), "{cancelled:?}");
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
    let events = client.events(&topic("user.signup", Some(10))).await.unwrap();
    assert_eq!((events.events.len(), events.next_cursor), (1, None));
    let (recorded, run) = (&events.events[0], &published.runs[0].run);
    assert_eq!((recorded.id.as_str(), &recorded.payload), ("e-1", &json!({"name": "Cy"})));
    assert_eq!((recorded.runs[0].workflow.as_str(), &recorded.runs[0].id), ("hello", &run.id));
    assert!(client.events(&topic("user.login", None)).await.unwrap().events.is_empty());
    let refused = client.events(&topic("user.*", None)).await.unwrap_err();
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
    // It says why, once: in its message, not again as a source.
    let said = unreachable.to_string().to_lowercase();
    assert_eq!(said.matches("refused").count(), 1, "{said}");
    assert!(std::error::Error::source(&unreachable).is_none());
    assert!(matches!(Client::new("ftp://example.com", None), Err(Error::InvalidUrl { .. })));
    assert!(Client::new("https://example.com", None).is_ok(), "https is spoken");
}

/// The events published to `topic`, at most `limit`.
fn topic(topic: &str, limit: Option<usize>) -> EventQuery {
    EventQuery { topic: Some(topic.into()), cursor: None, limit }
}

/// What `ops` answers to one pass over every operation, on runs, events and schedules named
/// after `prefix`: each answer's fields that do not depend on when it ran (times, signal numbers
/// and new runs' ids left out), with `prefix` written as `P`, and each refusal's code.
async fn every_operation<O: Operations>(ops: &O, prefix: &str) -> Vec<(&'static str, serde_json::Value)> {
    let mut seen = Vec::new();
    let mut keep = |what: &'static str, answer: serde_json::Value, fields: &[&str]| {
        let kept: serde_json::Map<String, serde_json::Value> = (fields.iter())
            .map(|pointer| (pointer.to_string(), answer.pointer(pointer).cloned().unwrap_or_default()))
            .collect();
        let text = serde_json::Value::Object(kept).to_string().replace(prefix, "P");
        seen.push((what, serde_json::from_str(&text).unwrap()));
    };
    let code = |error: O::Error| json!(cairn_client::Coded::code(&error));
    let a = format!("{prefix}-a");
    let options = StartOptions { id: Some(a.clone()), input: input(json!({"by": prefix})), ..StartOptions::default() };
    let started = ops.start("approval", &options).await.unwrap();
    keep("start", json!(started), &["/created", "/run/id", "/run/workflow", "/run/version"]);
    for _ in 0..2_000 {
        if ops.get(&a).await.unwrap().listed.run.status == "suspended" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let run = ops.get(&a).await.unwrap();
    keep("get", json!(run), &["/run/status", "/run/suspend_reason", "/run/workflow", "/input", "/stranded"]);
    keep("pause", json!(ops.pause(&a, &PauseOptions::default()).await.unwrap()), &["/run", "/outcome"]);
    keep("resume again", code(ops.resume(&format!("{prefix}-missing")).await.unwrap_err()), &[""]);
    keep("resume", json!(ops.resume(&a).await.unwrap()), &["/run", "/outcome"]);
    keep("resume twice", code(ops.resume(&a).await.unwrap_err()), &[""]);
    let payload = to_raw_value(&json!({"by": "ada"})).unwrap();
    keep("signal", json!(ops.signal(&a, "approve", &payload).await.unwrap()), &["/run", "/event"]);
    keep("bad signal", code(ops.signal(&a, "", &payload).await.unwrap_err()), &[""]);
    let done = ops.result(&a, Duration::from_secs(30)).await.unwrap();
    keep("result", json!(done), &["/run/status", "/output", "/run/error", "/children", "/restarts"]);
    let steps = ops.steps(&a).await.unwrap();
    let steps: Vec<_> = steps.steps.iter().map(|s| (s.path.clone(), s.kind, s.phase)).collect();
    keep("steps", json!(steps), &[""]);
    let signals = ops.signals(&a).await.unwrap();
    keep("signals", json!(signals), &["/run", "/signals/0/name", "/signals/0/payload", "/signals/0/consumed_seq"]);
    keep("signal ended", code(ops.signal(&a, "approve", &payload).await.unwrap_err()), &[""]);
    keep("cancel ended", code(ops.cancel(&a, &CancelOptions::default()).await.unwrap_err()), &[""]);
    let restart = RestartBody { from_step: "approve".into(), reason: Some("again".into()) };
    let restarted = ops.restart(&a, &restart).await.unwrap();
    keep("restart", json!(restarted), &["/restarted_from", "/from_step"]);
    let wrong = RestartBody { from_step: "nowhere".into(), reason: None };
    keep("restart nowhere", code(ops.restart(&a, &wrong).await.unwrap_err()), &[""]);
    let cancelled = ops.cancel(&restarted.run, &CancelOptions::because("enough")).await.unwrap();
    keep("cancel", json!(cancelled.outcome.as_str().starts_with("cancel")), &[""]);
    let missing = ops.get(&format!("{prefix}-missing")).await.unwrap_err();
    keep("get missing", code(missing), &[""]);
    let bad_id = StartOptions { id: Some("a/b".into()), ..StartOptions::default() };
    keep("bad id", code(ops.start("approval", &bad_id).await.unwrap_err()), &[""]);
    let mine = ListQuery { id_prefix: Some(format!("{prefix}-")), ..ListQuery::default() };
    let listed = ops.list(&mine).await.unwrap();
    let listed: Vec<_> = listed.runs.iter().map(|r| (r.run.id.clone(), r.run.status)).collect();
    keep("list", json!(listed), &[""]);
    let zero = ListQuery { limit: Some(0), ..ListQuery::default() };
    keep("list limit 0", code(ops.list(&zero).await.unwrap_err()), &[""]);
    keep("count", json!(ops.count(&mine, None).await.unwrap()), &["/count", "/capped"]);
    keep("count at most 1", json!(ops.count(&mine, Some(1)).await.unwrap()), &["/count", "/capped"]);
    keep("count at most 0", code(ops.count(&mine, Some(0)).await.unwrap_err()), &[""]);

    // Bulk actions on what a filter selects: two runs of this pass, suspended in their wait.
    for n in 1..=2 {
        let id = format!("{prefix}-batch-{n}");
        let batch =
            StartOptions { id: Some(id.clone()), input: input(json!({"batch": prefix})), ..StartOptions::default() };
        ops.start("approval", &batch).await.unwrap();
        for _ in 0..2_000 {
            if ops.get(&id).await.unwrap().listed.run.status == "suspended" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let mut filter = BulkFilter { workflow: Some("approval".into()), ..BulkFilter::default() };
    filter.input = json!({"batch": prefix}).as_object().cloned();
    let bulk = |action| BulkBody { action, filter: filter.clone(), limit: None };
    let fields = ["/action", "/done", "/refused", "/more", "/runs/0/run", "/runs/0/outcome", "/runs/1/run"];
    keep("bulk pause", json!(ops.bulk(&bulk(BulkAction::Pause)).await.unwrap()), &fields);
    keep("bulk resume", json!(ops.bulk(&bulk(BulkAction::Resume)).await.unwrap()), &fields);
    let refused = ops.bulk(&bulk(BulkAction::Resume)).await.unwrap();
    keep("bulk resume again", json!(refused), &["/done", "/refused", "/runs/0/error/code"]);
    keep("bulk cancel", json!(ops.bulk(&bulk(BulkAction::Cancel)).await.unwrap()), &["/done", "/refused"]);
    let everything = BulkBody { action: BulkAction::Cancel, filter: BulkFilter::default(), limit: Some(0) };
    keep("bulk limit 0", code(ops.bulk(&everything).await.unwrap_err()), &[""]);

    let topic = format!("user.{prefix}");
    let event = PublishBody { id: Some(format!("{prefix}-e")), payload: input(json!({"name": prefix})) };
    let published = ops.publish(&topic, &event).await.unwrap();
    keep("publish", json!(published), &["/id", "/topic", "/runs/0/run/workflow", "/already_started"]);
    let events = ops.events(&EventQuery { topic: Some(topic), cursor: None, limit: Some(5) }).await.unwrap();
    keep("events", json!(events), &["/events/0/id", "/events/0/payload", "/events/0/runs/0/workflow", "/next_cursor"]);
    let cursor = EventQuery { cursor: Some("nonsense".into()), ..EventQuery::default() };
    keep("events cursor", code(ops.events(&cursor).await.unwrap_err()), &[""]);

    let name = format!("{prefix}-hourly");
    let body = ScheduleBody { workflow: "hello".into(), every: Some("1h".into()), ..ScheduleBody::default() };
    let fields = ["/name", "/workflow", "/every_ms", "/paused", "/catch_up", "/input"];
    keep("put schedule", json!(ops.put_schedule(&name, &body).await.unwrap()), &fields);
    keep("schedule", json!(ops.schedule(&name).await.unwrap()), &fields);
    keep("pause schedule", json!(ops.pause_schedule(&name).await.unwrap()), &fields);
    keep("resume schedule", json!(ops.resume_schedule(&name).await.unwrap()), &fields);
    keep("trigger", json!(ops.trigger_schedule(&name).await.unwrap()), &["/created", "/run/workflow"]);
    let mine: Vec<_> = (ops.schedules().await.unwrap().schedules.into_iter()).filter(|s| s.name == name).collect();
    keep("schedules", json!(mine.len()), &[""]);
    ops.delete_schedule(&name).await.unwrap();
    keep("deleted", code(ops.schedule(&name).await.unwrap_err()), &[""]);
    let bad = ScheduleBody { workflow: "hello".into(), every: Some("often".into()), ..ScheduleBody::default() };
    keep("bad schedule", code(ops.put_schedule(&name, &bad).await.unwrap_err()), &[""]);

    let workflows = ops.workflows().await.unwrap();
    let names: Vec<_> = workflows.workflows.iter().map(|w| (w.name.clone(), w.versions.clone())).collect();
    keep("workflows", json!(names), &[""]);
    keep("workers", json!(ops.workers(WorkersQuery::default()).await.unwrap().workers.len()), &[""]);
    keep("all workers", json!(ops.workers(WorkersQuery::all()).await.unwrap().workers.len()), &[""]);
    let pruned = ops.prune(&PruneBody { older_than: Some("soon".into()), dry_run: true }).await.unwrap_err();
    keep("prune", code(pruned), &[""]);
    seen
}

/// The embedded client and the light client are one [`Operations`]: the same pass over every
/// operation answers the same through each, refusals with the same codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_clients_answer_every_operation_alike() {
    let served = Served::start(None).await;
    let remote = Client::new(&served.url, None).unwrap();
    let local = served.engine.client();
    let in_process = every_operation(&local, "local").await;
    let over_http = every_operation(&remote, "remote").await;
    assert_eq!(in_process.len(), over_http.len());
    for (local, remote) in in_process.iter().zip(&over_http) {
        assert_eq!(local, remote, "the two clients answer {} differently", local.0);
    }
    served.stop().await;
}
