//! `ctx.var`: every set journaled once, the latest value readable from outside while the run
//! sleeps, and the same values seen again after a restart.

use crate::common::{Counter, clock, engine_of, reopen, sqlite, wait_for_status};
use cairn::RunStatus;
use cairn::journal::Event;
use cairn::prelude::*;
use std::time::Duration;

/// Three steps, each followed by `done = i + 1` and a `log` of the outputs so far; a nap after
/// the second. Returns what the values hold at the end.
fn progress(calls: Counter) -> impl Fn(Ctx, ()) -> crate::common::Body<(u32, Vec<u32>)> + Send + Sync {
    move |ctx: Ctx, ()| {
        let calls = calls.clone();
        Box::pin(async move {
            let done = ctx.var::<u32>("done")?;
            let log = ctx.var::<Vec<u32>>("log")?;
            for i in 0..3u32 {
                let out = ctx.step(&format!("work[{i}]"), || async { Ok::<_, StepError>(calls.hit() as u32) }).await?;
                done.set(&(i + 1)).await?;
                log.update(|log| log.unwrap_or_default().into_iter().chain([out]).collect()).await?;
                if i == 1 {
                    ctx.sleep("nap", Duration::from_secs(3600)).await?;
                }
            }
            Ok((done.get()?.unwrap_or(0), log.get()?.unwrap_or_default()))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_visible_while_the_run_sleeps_and_journaled_once_across_a_restart() {
    let (store, dir) = sqlite();
    let clock = clock();
    let calls = Counter::default();
    let engine = engine_of(store, &clock, "progress", progress(calls.clone())).await;
    let run = engine.client().start("progress", &()).id("vars-1").await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    let vars = engine.client().vars(run.id()).await.unwrap();
    assert_eq!(vars["done"], 2);
    assert_eq!(vars["log"], serde_json::json!([1, 2]));
    engine.shutdown().await;

    clock.advance(Duration::from_secs(3600));
    let engine = engine_of(reopen(&dir), &clock, "progress", progress(calls.clone())).await;
    let (done, log): (u32, Vec<u32>) = engine.client().result(run.id()).await.unwrap();
    assert_eq!((done, log), (3, vec![1, 2, 3]), "the replay saw the values the first execution set");
    assert_eq!(calls.get(), 3);
    let journal = engine.client().journal(run.id()).await.unwrap();
    let sets: Vec<String> = journal
        .iter()
        .filter_map(|e| match &e.event {
            Event::VarSet { name, value } => Some(format!("{name}={}", value.get())),
            _ => None,
        })
        .collect();
    assert_eq!(sets, ["done=1", "log=[1]", "done=2", "log=[1,2]", "done=3", "log=[1,2,3]"], "each set once");
    let vars = engine.client().vars(run.id()).await.unwrap();
    assert_eq!((vars["done"].clone(), vars.len()), (serde_json::json!(3), 2));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_and_unknown_runs_are_refused() {
    async fn nameless(ctx: Ctx, (): ()) -> Result<(), WorkflowError> {
        ctx.var::<u32>("")?.set(&1).await
    }
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("nameless", 1, nameless).start().await.unwrap();
    let run = engine.client().start("nameless", &()).await.unwrap();
    let error = run.result::<()>().await.unwrap_err().to_string();
    assert!(error.contains("name must be 1 to 200 bytes"), "{error}");
    assert!(engine.client().vars(run.id()).await.unwrap().is_empty());
    let missing = engine.client().vars(&cairn::RunId::new("absent")).await.unwrap_err().to_string();
    assert!(missing.contains("CAIRN-E0301"), "{missing}");
    engine.shutdown().await;
}
