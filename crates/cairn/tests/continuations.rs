//! Explicit continuations: named steps hand over to each other through a scratchpad; completed
//! steps are not run again after a restart; bad definitions are refused before anything runs.

use crate::common::{Counter, clock, engine_of, reopen, sqlite};
use cairn::prelude::*;
use cairn::{Continuations, EngineError, Transition};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
struct Pad {
    visited: Vec<String>,
    total: u32,
}

/// Calls of: check, add (three times), finish.
type Calls = Arc<[Counter; 3]>;

/// `check` → `add` ×3 (adding the input each time) → `finish`, which hangs until `open`.
fn flow(calls: Calls, open: Arc<AtomicBool>) -> Continuations<u32, Pad, String> {
    let (c0, c1, c2) = (calls[0].clone(), calls[1].clone(), calls[2].clone());
    Continuations::new("check")
        .step("check", move |_, mut pad: Pad| {
            c0.hit();
            pad.visited.push("check".into());
            async move { Ok::<_, StepError>((pad, Transition::next("add"))) }
        })
        .step("add", move |n, mut pad: Pad| {
            c1.hit();
            pad.visited.push("add".into());
            pad.total += n;
            let next = if pad.total >= 3 * n { Transition::next("finish") } else { Transition::next("add") };
            async move { Ok::<_, StepError>((pad, next)) }
        })
        .step("finish", move |_, pad: Pad| {
            c2.hit();
            let open = open.load(Ordering::SeqCst);
            async move {
                if !open {
                    std::future::pending::<()>().await;
                }
                Ok::<_, StepError>((
                    pad.clone(),
                    Transition::Done(format!("{} = {}", pad.visited.join(">"), pad.total)),
                ))
            }
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_hand_over_and_done_ones_are_not_run_again_after_a_restart() {
    let (store, dir) = sqlite();
    let clock = clock();
    let calls: Calls = Default::default();
    let open = Arc::new(AtomicBool::new(false));
    let engine =
        engine_of(store, &clock, "flow", flow(Arc::clone(&calls), Arc::clone(&open)).workflow().unwrap()).await;
    let run = engine.client().start("flow", &5u32).id("flow-1").await.unwrap();
    calls[2].wait_for(1).await;
    let counts = || calls.iter().map(Counter::get).collect::<Vec<_>>();
    assert_eq!(counts(), [1, 3, 1], "finish hangs");
    engine.shutdown_within(Duration::from_millis(50)).await;

    open.store(true, Ordering::SeqCst);
    let engine =
        engine_of(reopen(&dir), &clock, "flow", flow(Arc::clone(&calls), Arc::clone(&open)).workflow().unwrap()).await;
    let text: String = engine.client().result(run.id()).await.unwrap();
    assert_eq!(text, "check>add>add>add = 15");
    assert_eq!(counts(), [1, 3, 2], "only the step cut off ran again");
    let journal = engine.client().journal(run.id()).await.unwrap();
    let paths: Vec<String> = journal.iter().filter_map(|e| e.event.path().map(|p| p.to_string())).collect();
    assert!(paths.contains(&"flow[0]/check".to_owned()) && paths.contains(&"flow[4]/finish".to_owned()), "{paths:?}");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_definitions_are_refused_and_an_unknown_next_step_fails_the_run() {
    let refused = |flow: Continuations<u32, Pad, String>| flow.workflow().err().unwrap().to_string();
    let ok = |_, pad: Pad| async move { Ok::<_, StepError>((pad, Transition::Done(String::new()))) };
    assert!(refused(Continuations::new("absent").step("a", ok)).contains("start step `absent`"));
    assert!(refused(Continuations::new("a").step("a", ok).step("a", ok)).contains("`a` is defined twice"));
    assert!(matches!(
        Continuations::<u32, Pad, String>::new("a/b").step("a/b", ok).workflow().err(),
        Some(EngineError::InvalidContinuations(_))
    ));

    let lost = Continuations::<u32, Pad, String>::new("a")
        .step("a", |_, pad: Pad| async move { Ok::<_, StepError>((pad, Transition::next("nowhere"))) })
        .workflow()
        .unwrap();
    let (store, _dir) = sqlite();
    let engine = Engine::builder().store(store).clock(clock()).register("lost", 1, lost).start().await.unwrap();
    let error = engine.client().start("lost", &1u32).await.unwrap().result::<String>().await.unwrap_err().to_string();
    assert!(error.contains("CAIRN-E0114") && error.contains("`nowhere`"), "{error}");
    engine.shutdown().await;
}
