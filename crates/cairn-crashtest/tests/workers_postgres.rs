//! Workers sharing one PostgreSQL database: a worker whose lease was taken over is fenced and
//! stops; a worker only touches the workflows (and versions) it registered; a client with no
//! workflows starts, signals and cancels runs that workers execute.

use crate::common::postgres;
use cairn::journal::Event;
use cairn::prelude::*;
use cairn::store::CountingStore;
use cairn::{RunStatus, Store};
use std::sync::Arc;
use std::time::Duration;

/// Waits up to an hour for an `add` signal, then adds it to its input.
async fn ping(ctx: Ctx, n: u32) -> Result<u32, WorkflowError> {
    let add: Option<u32> = ctx.wait_for_event("add", EventFilter::any(), Duration::from_secs(3600)).await?;
    ctx.step("sum", || async move { Ok::<_, StepError>(n + add.unwrap_or(0)) }).await
}

/// Another "process" on the test's schema: its own store, its own connections.
async fn connect(
    schema: &cairn_postgres::testing::TestSchema,
) -> Result<cairn_postgres::PostgresStore, cairn::store::StoreError> {
    cairn_postgres::PostgresStore::connect(cairn_postgres::PostgresOptions::new(&schema.url).schema(&schema.name)).await
}

async fn wait_status(client: &Client, id: &RunId, status: RunStatus) {
    for _ in 0..3_000 {
        if client.get(id).await.unwrap().status == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {id} never reached {status}");
}

pub(crate) fn a_stalled_worker_loses_its_lease_and_cannot_append() {
    let _slot = crate::common::slot_blocking();
    let main = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let Some((store, schema)) = main.block_on(postgres("fencing")) else { return };
    let store: Arc<dyn Store> = Arc::new(store);
    let client = Client::from_shared(Arc::clone(&store));
    let run = main.block_on(async { client.start("race", &()).id("contested").allow_unknown().await }).unwrap();

    // Worker A lives on a one-thread runtime whose thread its step body blocks: no heartbeats.
    // Like a separate process, it has its own store (its connections are driven by its runtime).
    let stalled = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (url, name) = (schema.url.clone(), schema.name.clone());
    // What A's step returned to its body.
    let seen_by_a: Arc<std::sync::Mutex<Option<Result<String, WorkflowError>>>> = Arc::default();
    let seen = Arc::clone(&seen_by_a);
    let worker_a = std::thread::spawn(move || {
        stalled.block_on(async move {
            let options = cairn_postgres::PostgresOptions::new(&url).schema(&name);
            let a_store = cairn_postgres::PostgresStore::connect(options).await.unwrap();
            let engine = Engine::builder()
                .store(a_store)
                .worker_id("worker-a")
                .lease_duration(Duration::from_millis(300))
                .register("race", 1, move |ctx: Ctx, ()| {
                    let seen = Arc::clone(&seen);
                    async move {
                        let result = ctx
                            .step("work", || async {
                                std::thread::sleep(Duration::from_millis(1500));
                                Ok::<_, StepError>("A".to_owned())
                            })
                            .await;
                        *seen.lock().unwrap() = Some(result.clone());
                        result
                    }
                })
                .start()
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(2500)).await;
            engine.shutdown().await;
        });
    });
    // Let A claim it and stall; then B, healthy, reclaims the run once A's lease has expired.
    main.block_on(async {
        while store.get_run(run.id()).await.unwrap().unwrap().lease_owner.as_deref() != Some("worker-a") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    main.block_on(async {
        let b = Engine::builder()
            .shared_store(Arc::clone(&store))
            .worker_id("worker-b")
            .poll_interval(Duration::from_millis(50))
            .register("race", 1, |ctx: Ctx, ()| async move {
                ctx.step("work", || async { Ok::<_, StepError>("B".to_owned()) }).await
            })
            .start()
            .await
            .unwrap();
        assert_eq!(b.client().result::<String>(run.id()).await.unwrap(), "B");
        worker_a.join().unwrap();
        let journal = store.read_journal(run.id()).await.unwrap();
        let completions: Vec<&str> = journal
            .iter()
            .filter_map(|e| match &e.event {
                Event::StepCompleted { output, .. } => Some(output.get()),
                _ => None,
            })
            .collect();
        assert_eq!(completions, vec!["\"B\""], "the fenced worker's late result was not stored");
        // A's step came back to its body with the typed error, not with its own value.
        let seen = seen_by_a.lock().unwrap().clone();
        assert_eq!(seen, Some(Err(WorkflowError::Interrupted(cairn::Interrupt::LeaseLost))), "what A's step returned");
        cairn::journal::RunState::fold(&journal).unwrap();
        let row = store.get_run(run.id()).await.unwrap().unwrap();
        assert_eq!((row.status, row.epoch), (RunStatus::Completed, 2));
        b.shutdown().await;
    });
}

pub(crate) async fn workers_claim_only_what_they_registered_and_detached_clients_steer() {
    let _slot = crate::common::slot().await;
    let Some((store, _schema)) = postgres("registered").await else { return };
    let store: Arc<dyn Store> = Arc::new(store);
    // A client with no workflows starts runs of workflows and versions no process here has yet.
    let client = Client::from_shared(Arc::clone(&store));
    for i in 0..3 {
        client.start("alpha", &i).id(format!("alpha-{i}")).allow_unknown().await.unwrap();
        client.start("beta", &i).id(format!("beta-{i}")).allow_unknown().await.unwrap();
    }
    client.start("alpha", &9).id("alpha-v2").version(2).allow_unknown().await.unwrap();
    let waiting = client.start("gamma", &()).id("gamma").allow_unknown().await.unwrap();
    let doomed = client.start("gamma", &()).id("doomed").allow_unknown().await.unwrap();

    let worker = Engine::builder()
        .shared_store(Arc::clone(&store))
        .poll_interval(Duration::from_millis(50))
        .register("alpha", 1, |ctx: Ctx, n: u32| async move {
            ctx.step("double", || async move { Ok::<_, StepError>(n * 2) }).await
        })
        .register("gamma", 1, |ctx: Ctx, ()| async move {
            let got: Option<String> = ctx.wait_for_event("go", EventFilter::any(), Duration::from_secs(3600)).await?;
            Ok(got.unwrap_or_default())
        })
        .start()
        .await
        .unwrap();
    for i in 0..3u32 {
        assert_eq!(client.result::<u32>(&RunId::new(format!("alpha-{i}"))).await.unwrap(), i * 2);
    }
    wait_status(&client, waiting.id(), RunStatus::Suspended).await;
    client.signal(waiting.id(), "go", &"from a detached client").await.unwrap();
    assert_eq!(client.result::<String>(waiting.id()).await.unwrap(), "from a detached client");
    wait_status(&client, doomed.id(), RunStatus::Suspended).await;
    client.cancel(doomed.id()).await.unwrap();
    assert_eq!(client.get(doomed.id()).await.unwrap().status, RunStatus::Cancelled);

    for id in ["beta-0", "beta-1", "beta-2", "alpha-v2"] {
        let run = store.get_run(&RunId::new(id)).await.unwrap().unwrap();
        assert_eq!((run.status, run.epoch, run.lease_owner), (RunStatus::Pending, 0, None), "{id} was touched");
        assert_eq!(store.read_journal(&run.id).await.unwrap().len(), 1);
    }
    worker.shutdown().await;
}

pub(crate) async fn idle_workers_are_woken_by_notify_not_polling() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("notify").await else { return };
    // The worker would poll only once an hour: new runs and signals must reach it by NOTIFY.
    let worker = Engine::builder()
        .store(store)
        .poll_interval(Duration::from_secs(3600))
        .register("ping", 1, ping)
        .start()
        .await
        .unwrap();
    // Another "process": its own store, its own connections.
    let other = connect(&schema).await.unwrap();
    let client = Client::new(other);
    // (A notification sent before the worker's listener subscribed is covered: the listener
    // wakes the worker once right after it subscribes.)
    let run = client.start("ping", &40u32).await.unwrap();
    wait_status(&client, run.id(), RunStatus::Suspended).await;
    client.signal(run.id(), "add", &2u32).await.unwrap();
    assert_eq!(client.result::<u32>(run.id()).await.unwrap(), 42);
    worker.shutdown().await;
}

pub(crate) async fn result_waiters_hear_of_runs_ending_elsewhere() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("endings").await else { return };
    let worker = Engine::builder().store(store).register("ping", 1, ping).start().await.unwrap();
    // Other "processes" that execute nothing, one with an engine and one a bare client: their
    // result waiters must be told, not poll.
    let counted = CountingStore::new(connect(&schema).await.unwrap());
    let reads = counted.calls();
    let waiter = Engine::builder().store(counted).start().await.unwrap();
    let counted = CountingStore::new(connect(&schema).await.unwrap());
    let bare_reads = counted.calls();
    let bare = Client::new(counted);
    let steer = Client::new(connect(&schema).await.unwrap());
    let run = steer.start("ping", &40u32).await.unwrap();
    wait_status(&steer, run.id(), RunStatus::Suspended).await;
    let id = run.id().clone();
    let client = waiter.client();
    let result = tokio::spawn({
        let id = id.clone();
        async move { client.result::<u32>(&id).await }
    });
    let bare_result = tokio::spawn(async move { bare.result::<u32>(&id).await });
    // Long enough for a polling waiter to read the store several times (20, 40, 80, … ms apart).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    steer.signal(run.id(), "add", &2u32).await.unwrap();
    assert_eq!(result.await.unwrap().unwrap(), 42);
    assert_eq!(bare_result.await.unwrap().unwrap(), 42);
    // The first read, the read after the ending was reported, and at most one after the
    // listener (re)connected.
    for (waiter, reads) in [("engine's", reads), ("bare client's", bare_reads)] {
        let reads = reads.of("get_run");
        assert!(reads <= 3, "the {waiter} waiter read the store {reads} times");
    }
    waiter.shutdown().await;
    worker.shutdown().await;
}
