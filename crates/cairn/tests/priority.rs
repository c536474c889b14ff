//! Priority with fairness on SQLite, in virtual time, with one worker taking one run at a time:
//! queued runs of a higher priority start first, and within a priority the fairness keys take
//! turns, so ten runs of one tenant are not stuck behind a thousand of another.

use crate::common::clock;
use cairn::StartError;
use cairn::prelude::*;
use cairn::{Durability, SqliteOptions, SqliteStore, Store};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The ids of the runs whose step began, in the order they began.
#[derive(Clone, Default)]
struct Began(Arc<Mutex<Vec<String>>>);

impl Began {
    fn order(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// Polls until `n` steps began (the bound only turns a hang into a failure).
    async fn wait_for(&self, n: usize) -> Vec<String> {
        for _ in 0..60_000 {
            if self.0.lock().unwrap().len() >= n {
                return self.order();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("only {} of {n} runs began", self.0.lock().unwrap().len());
    }
}

fn work(began: Began) -> impl Fn(Ctx, String) -> crate::common::Body<()> + Send + Sync + 'static {
    move |ctx, id| {
        let began = began.clone();
        Box::pin(async move {
            ctx.step("work", || {
                let (began, id) = (began.clone(), id.clone());
                async move {
                    began.0.lock().unwrap().push(id);
                    Ok::<_, StepError>(())
                }
            })
            .await
        })
    }
}

/// A store whose runs were queued by `queue` before any worker started, and one worker that
/// takes one run at a time; the order in which their steps began.
async fn run_queued<F, Fut>(runs: usize, queue: F) -> Vec<String>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions { durability: Durability::Normal, ..SqliteOptions::default() };
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_with(dir.path().join("cairn.db"), options).unwrap());
    // Queued while no worker is up; one served `work` here before.
    let served = cairn::store::WorkflowKey { name: "work".into(), version: 1 };
    store.record_served(&[served], cairn::Timestamp::from_millis(0)).await.unwrap();
    queue(Client::from_shared(Arc::clone(&store))).await;
    let began = Began::default();
    let engine = Engine::builder()
        .shared_store(store)
        .clock(clock())
        .max_active_runs(1)
        .register("work", 1, work(began.clone()))
        .start()
        .await
        .unwrap();
    let order = began.wait_for(runs).await;
    engine.shutdown().await;
    order
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_runs_of_one_key_start_before_the_hundredth_of_a_thousand() {
    let order = run_queued(1_010, |client| async move {
        for i in 0..1_000 {
            let id = format!("a{i}");
            client.start("work", &id).id(&id).fairness_key("tenant-a").await.unwrap();
        }
        for i in 0..10 {
            let id = format!("b{i}");
            client.start("work", &id).id(&id).fairness_key("tenant-b").await.unwrap();
        }
    })
    .await;
    let hundredth_of_a = order.iter().position(|id| id == "a99").unwrap();
    let last_of_b = order.iter().rposition(|id| id.starts_with('b')).unwrap();
    assert!(last_of_b < hundredth_of_a, "b's last run began at {last_of_b}, a's 100th at {hundredth_of_a}");
    // They take turns: a0 b0 a1 b1 …
    assert_eq!(&order[..4], ["a0", "b0", "a1", "b1"]);
    assert_eq!(last_of_b, 19, "{:?}", &order[..24]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priorities_start_first() {
    let order = run_queued(12, |client| async move {
        for (id, priority) in [("low-1", -5), ("normal-1", 0), ("normal-2", 0), ("low-2", -5)] {
            client.start("work", &id).id(id).priority(priority).await.unwrap();
        }
        for i in 0..8 {
            let id = format!("urgent-{i}");
            client.start("work", &id).id(&id).priority(10).await.unwrap();
        }
    })
    .await;
    let expected: Vec<String> = (0..8)
        .map(|i| format!("urgent-{i}"))
        .chain(["normal-1", "normal-2", "low-1", "low-2"].map(String::from))
        .collect();
    assert_eq!(order, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_fairness_key_starts_nothing() {
    let (store, _dir) = crate::common::sqlite();
    let client = Client::new(store);
    for key in ["", "tab\there"] {
        let refused = client.start("work", &"x").id("x").fairness_key(key).await.unwrap_err();
        assert!(matches!(refused, StartError::InvalidFairnessKey(_)), "{refused}");
        assert!(refused.to_string().contains("CAIRN-E0313"), "{refused}");
    }
    let long = "k".repeat(201);
    assert!(client.start("work", &"x").id("x").fairness_key(long).await.is_err());
    assert!(client.get(&RunId::new("x")).await.is_err(), "nothing was stored");
    let run = client.start("work", &"x").id("x").priority(-3).fairness_key("t").allow_unknown().await.unwrap();
    assert_eq!((run.record().priority, run.record().fairness_key.as_deref()), (-3, Some("t")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_and_successors_inherit_priority_and_key() {
    let (store, _dir) = crate::common::sqlite();
    let parent = |ctx: Ctx, round: u32| async move {
        if round == 0 {
            return ctx.continue_as_new(&1u32);
        }
        ctx.child::<_, ()>("leaf", &()).await?;
        Ok(())
    };
    let engine = Engine::builder()
        .store(store)
        .register("parent", 1, parent)
        .register("leaf", 1, |_ctx: Ctx, (): ()| async { Ok(()) })
        .start()
        .await
        .unwrap();
    let run = engine.client().start("parent", &0u32).id("p").priority(7).fairness_key("t").await.unwrap();
    let () = run.result().await.unwrap();
    let successor = engine.client().get(&RunId::new("p~1")).await.unwrap();
    let children = engine.client().children(&successor.id).await.unwrap();
    assert_eq!(children.len(), 1);
    for inherited in [&successor, &children[0]] {
        assert_eq!((inherited.priority, inherited.fairness_key.as_deref()), (7, Some("t")), "{}", inherited.id);
    }
    engine.shutdown().await;
}
