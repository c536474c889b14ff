//! `cairn::testing::replay`: new code checked against journals of real runs, without executing
//! anything.

use crate::common::{Body, Counter, wait_for_status};
use cairn::RunStatus;
use cairn::journal::{NonDeterminism, StepPath};
use cairn::prelude::*;
use cairn::testing::{ReplayEnd, ReplayError, replay};
use std::time::Duration;

fn counted(calls: &Counter, swapped: bool) -> impl Fn(Ctx, u8) -> Body<u8> + Send + Sync + 'static {
    let calls = calls.clone();
    move |ctx: Ctx, n: u8| {
        let calls = calls.clone();
        Box::pin(async move {
            let names = if swapped { ["b", "a"] } else { ["a", "b"] };
            let mut total = n;
            for name in names {
                let calls = calls.clone();
                total += ctx
                    .step(name, move || {
                        calls.hit();
                        async { Ok::<_, StepError>(1u8) }
                    })
                    .await?;
            }
            ctx.sleep("nap", Duration::from_secs(3600)).await?;
            Ok(total)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_code_is_checked_against_a_real_journal_without_executing_steps() {
    let (store, _dir) = crate::common::sqlite();
    let live = Counter::default();
    let engine = Engine::builder().store(store).register("flow", 1, counted(&live, false)).start().await.unwrap();
    let run = engine.client().start("flow", &1u8).await.unwrap();
    wait_for_status(&engine.client(), run.id(), RunStatus::Suspended).await;
    let journal = engine.client().journal(run.id()).await.unwrap();
    engine.shutdown().await;
    assert_eq!(live.get(), 2);

    // The same code replays up to the sleep, where the live run waits.
    let checked = Counter::default();
    let report = replay(&journal, counted(&checked, false)).await.unwrap();
    assert!(matches!(&report.end, ReplayEnd::Continues { at } if at.as_str() == "nap"), "{report:?}");
    assert_eq!(report.replayed, 3);
    // Code that swapped the two steps is reported at the first divergence.
    let error = replay(&journal, counted(&checked, true)).await.unwrap_err();
    match &error {
        ReplayError::NonDeterminism(NonDeterminism::OrderMismatch { ordinal: 0, expected, found, .. }) => {
            assert_eq!((expected.as_ref().map(StepPath::as_str), found.as_str()), (Some("a"), "b"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(error.to_string().contains("CAIRN-E0101"));
    assert_eq!(checked.get(), 0, "a replay check executes no step");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_journal_replays_to_the_end_or_names_the_step_never_reached() {
    async fn two(ctx: Ctx, (): ()) -> Result<u8, WorkflowError> {
        let a: u8 = ctx.step("a", || async { Ok::<_, StepError>(1u8) }).await?;
        let b: u8 = ctx.step("b", || async { Ok::<_, StepError>(2u8) }).await?;
        Ok(a + b)
    }
    async fn one(ctx: Ctx, (): ()) -> Result<u8, WorkflowError> {
        ctx.step("a", || async { Ok::<_, StepError>(1u8) }).await
    }
    async fn one_marked(ctx: Ctx, (): ()) -> Result<u8, WorkflowError> {
        let a = ctx.step("a", || async { Ok::<_, StepError>(1u8) }).await?;
        ctx.removed("b")?;
        Ok(a)
    }
    let (store, _dir) = crate::common::sqlite();
    let engine = Engine::builder().store(store).register("two", 1, two).start().await.unwrap();
    let run = engine.client().start("two", &()).await.unwrap();
    assert_eq!(run.result::<u8>().await.unwrap(), 3);
    let journal = engine.client().journal(run.id()).await.unwrap();
    engine.shutdown().await;

    let report = replay(&journal, two).await.unwrap();
    assert!(matches!(&report.end, ReplayEnd::Returned(Ok(out)) if out.get() == "3"), "{report:?}");
    let error = replay(&journal, one).await.unwrap_err();
    assert!(
        matches!(&error, ReplayError::NonDeterminism(NonDeterminism::Unreached { path, .. }) if path.as_str() == "b"),
        "{error:?}"
    );
    assert!(matches!(replay(&journal, one_marked).await.unwrap().end, ReplayEnd::Returned(Ok(_))));
}

#[tokio::test]
async fn a_journal_that_does_not_fold_is_refused() {
    async fn any(_ctx: Ctx, (): ()) -> Result<(), WorkflowError> {
        Ok(())
    }
    let text = r#"[{"seq": 2, "event": {"started": {"workflow": "w", "version": 1, "input": null}}}]"#;
    let journal = cairn::testing::journal_from_json(text).unwrap();
    assert!(matches!(replay(&journal, any).await, Err(ReplayError::Journal(_))));
    assert!(cairn::testing::journal_from_json("{\"runs\": []}").is_err());
    assert!(cairn::testing::journal_from_json("[{\"seq\": 1, \"event\": {\"nope\": 1}}]").is_err());
}
