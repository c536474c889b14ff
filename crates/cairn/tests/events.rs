//! Events that start workflows: topic subscriptions declared at registration, `Client::publish`
//! idempotent per event id, from the engine's own client and from a detached one.

use cairn::prelude::*;
use cairn::{Client, EngineBuilder, EngineError, Published, RunFilter, RunStatus, SqliteStore};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct User {
    name: String,
}

async fn welcome(ctx: Ctx, user: User) -> Result<String, WorkflowError> {
    ctx.step("greet", || async { Ok::<_, StepError>(format!("welcome {}", user.name)) }).await
}

async fn audit(ctx: Ctx, event: Value) -> Result<Value, WorkflowError> {
    ctx.step("record", || async { Ok::<_, StepError>(event.clone()) }).await
}

async fn billing(ctx: Ctx, (): ()) -> Result<(), WorkflowError> {
    ctx.step("charge", || async { Ok::<_, StepError>(()) }).await
}

fn builder(store: impl cairn::Store) -> EngineBuilder {
    Engine::builder()
        .store(store)
        .register("welcome", 1, welcome)
        .register("audit", 1, audit)
        .register("billing", 1, billing)
        .subscribe("welcome", "user.signup")
        .subscribe("audit", "user.*")
        .subscribe("audit", "*.signup")
}

async fn run_count(client: &Client) -> usize {
    client.list(&RunFilter::default()).await.unwrap().runs.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_publish_starts_one_run_per_subscribed_workflow_once_per_event_id() {
    let (store, _dir) = crate::common::sqlite();
    let engine = builder(store).start().await.unwrap();
    let user = json!({"name": "Ada"});

    // `welcome` and `audit` match (audit through two patterns: still one run); `billing` does not.
    let published = engine.client().publish("user.signup", &user).id("evt-1").await.unwrap();
    assert_eq!(published.event_id, "evt-1");
    let workflows: Vec<&str> = published.runs.iter().map(|r| r.record().workflow.as_str()).collect();
    assert_eq!(workflows, ["audit", "welcome"]);
    assert_eq!(published.started().count(), 2);
    for run in &published.runs {
        assert_eq!(run.record().idempotency_key.as_deref(), Some("event:evt-1"));
        assert_eq!(run.record().input.get(), r#"{"name":"Ada"}"#);
    }
    assert_eq!(published.runs[0].result::<Value>().await.unwrap(), user);
    assert_eq!(published.runs[1].result::<String>().await.unwrap(), "welcome Ada");

    // The same id again: the same runs, none started.
    let again = engine.client().publish("user.signup", &user).id("evt-1").await.unwrap();
    assert_eq!(again.started().count(), 0);
    let ids = |p: &Published| p.runs.iter().map(|r| r.id().clone()).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&published));
    assert_eq!(run_count(&engine.client()).await, 2);

    // Another id: new runs. Without an id, each publish is a new event.
    assert_eq!(engine.client().publish("user.signup", &user).id("evt-2").await.unwrap().started().count(), 2);
    let fresh = engine.client().publish("user.login", &user).await.unwrap();
    assert_eq!(fresh.started().map(|r| r.record().workflow.as_str()).collect::<Vec<_>>(), ["audit"]);
    assert!(!fresh.event_id.is_empty());
    assert_eq!(run_count(&engine.client()).await, 5);

    // No subscriber: nothing started, no error.
    let nobody = engine.client().publish("order.placed", &json!({})).id("evt-3").await.unwrap();
    assert!(nobody.runs.is_empty());
    assert_eq!(run_count(&engine.client()).await, 5);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_publishes_start_nothing() {
    let (store, _dir) = crate::common::sqlite();
    let engine = builder(store).start().await.unwrap();
    for topic in ["", "user.*", "user..signup", "user signup"] {
        let error = engine.client().publish(topic, &json!({"name": "Ada"})).await.unwrap_err();
        assert!(matches!(error, ClientError::InvalidTopic(_)), "{topic:?}: {error}");
    }
    for id in ["", "a\nb", &"x".repeat(201)] {
        let error = engine.client().publish("user.signup", &json!({"name": "Ada"})).id(id).await.unwrap_err();
        assert!(matches!(error, ClientError::InvalidEventId(_)), "{id:?}: {error}");
    }
    // `welcome` cannot read this payload (`audit` could): neither run starts.
    let error = engine.client().publish("user.signup", &json!({"nom": "Ada"})).id("evt-1").await.unwrap_err();
    assert!(matches!(&error, ClientError::InvalidPayload(m) if m.contains("welcome")), "{error}");
    assert_eq!(run_count(&engine.client()).await, 0);
    // The id was not used up: a good payload under it starts both.
    assert_eq!(
        engine.client().publish("user.signup", &json!({"name": "Ada"})).id("evt-1").await.unwrap().started().count(),
        2
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_checked_when_the_engine_starts() {
    let (store, _dir) = crate::common::sqlite();
    let error =
        Engine::builder().store(store).register("welcome", 1, welcome).subscribe("welcome", "user.**").start().await;
    assert!(matches!(error, Err(EngineError::InvalidTopic(_))), "{error:?}");
    let (store, _dir) = crate::common::sqlite();
    let error =
        Engine::builder().store(store).register("welcome", 1, welcome).subscribe("nobody", "user.*").start().await;
    assert!(matches!(&error, Err(EngineError::NotRegistered { name, .. }) if name == "nobody"), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_clients_publish_to_what_the_last_deploy_declared() {
    let (store, dir) = crate::common::sqlite();
    let engine = builder(store).start().await.unwrap();
    engine.shutdown().await;

    // Any client of the store sees the declared subscriptions, with no worker running: the run
    // waits for one.
    let client = Client::new(SqliteStore::open(dir.path().join("cairn.db")).unwrap());
    let published = client.publish("user.signup", &json!({"name": "Bo"})).id("evt-1").await.unwrap();
    assert_eq!(published.started().count(), 2);
    assert!(published.runs.iter().all(|r| r.record().status == RunStatus::Pending && r.record().version == 1));

    // A new deploy: `welcome` is version 2 and dropped its subscription; `audit` kept one pattern.
    async fn welcome_v2(ctx: Ctx, user: User) -> Result<String, WorkflowError> {
        ctx.step("greet", || async { Ok::<_, StepError>(format!("hi {}", user.name)) }).await
    }
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db")).unwrap())
        .register("welcome", 1, welcome)
        .register("welcome", 2, welcome_v2)
        .register("audit", 1, audit)
        .subscribe("audit", "user.*")
        .subscribe("welcome", "account.*")
        .start()
        .await
        .unwrap();
    let published = client.publish("user.signup", &json!({"name": "Cy"})).id("evt-2").await.unwrap();
    assert_eq!(published.started().map(|r| r.record().workflow.as_str()).collect::<Vec<_>>(), ["audit"]);
    let published = client.publish("account.opened", &json!({"name": "Di"})).id("evt-3").await.unwrap();
    let [run] = &published.runs[..] else { panic!("{published:?}") };
    assert_eq!((run.record().workflow.as_str(), run.record().version), ("welcome", 2));
    assert_eq!(run.result::<String>().await.unwrap(), "hi Di");
    // The runs published while no worker ran are executed by this one.
    for run in &client.list(&RunFilter::default()).await.unwrap().runs {
        crate::common::wait_for_status(&engine.client(), &run.id, RunStatus::Completed).await;
    }
    engine.shutdown().await;
}
