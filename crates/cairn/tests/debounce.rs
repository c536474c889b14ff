//! Debounce on SQLite, in virtual time: starts with one debounce key inside a window collapse
//! into one run that gets the latest input and begins once the key has been quiet (or at its
//! maximum wait); bad debounces are refused and store nothing.

use crate::common::{clock, sqlite, wait_for_status};
use cairn::StartError;
use cairn::prelude::*;
use cairn::{Debounce, ManualClock, RunFilter, RunStatus, SuspendReason, WaitingFor};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The inputs each execution of the `digest` step was given, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<u32>>>);

impl Seen {
    fn all(&self) -> Vec<u32> {
        self.0.lock().unwrap().clone()
    }
}

async fn engine(seen: &Seen, clock: &ManualClock) -> (Engine, tempfile::TempDir) {
    let (store, dir) = sqlite();
    let seen = seen.clone();
    let digest = move |ctx: Ctx, n: u32| {
        let seen = seen.clone();
        async move {
            ctx.step("digest", || {
                let seen = seen.clone();
                async move {
                    seen.0.lock().unwrap().push(n);
                    Ok::<_, StepError>(n)
                }
            })
            .await
        }
    };
    let engine = Engine::builder()
        .store(store)
        .clock(clock.clone())
        .suspend_grace(Duration::ZERO)
        .register("digest", 1, digest)
        .start()
        .await
        .unwrap();
    (engine, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_starts_inside_one_window_make_one_run_with_the_last_input() {
    let clock = clock();
    let seen = Seen::default();
    let (engine, _dir) = engine(&seen, &clock).await;
    let quiet = Duration::from_secs(10);
    let debounce = || Debounce::new("customer-7", quiet).max_wait(Duration::from_secs(3600));
    let mut handles = Vec::new();
    for n in 0..50u32 {
        handles.push(engine.client().start("digest", &n).debounce(debounce()).await.unwrap());
        clock.advance(Duration::from_millis(100));
    }
    let id = handles[0].id().clone();
    assert!(handles[0].created() && handles[1..].iter().all(|h| !h.created()));
    assert!(handles.iter().all(|h| *h.id() == id), "every start found the one run");
    let listed =
        engine.client().list(&RunFilter { workflow: Some("digest".into()), ..RunFilter::default() }).await.unwrap();
    assert_eq!(listed.runs.len(), 1);
    let run = &listed.runs[0];
    assert_eq!((run.status, run.suspend_reason), (RunStatus::Suspended, Some(SuspendReason::Debouncing)));
    assert_eq!(run.held_back_by(), Some(WaitingFor::Debounce));
    assert_eq!(run.rare().debounce_key.as_deref(), Some("customer-7"));
    // The last start was 100 ms ago: the window closes 10 s after it, not before.
    clock.advance(quiet - Duration::from_millis(200));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(seen.all().is_empty(), "the run began before its key was quiet");
    clock.advance(Duration::from_millis(100));
    let done = wait_for_status(&engine.client(), &id, RunStatus::Completed).await;
    assert_eq!(done.input.get(), "49");
    assert_eq!(seen.all(), [49], "one execution, with the last input");
    // The window closed with the run's start: the next start opens a new one.
    let next = engine.client().start("digest", &50u32).debounce(debounce()).await.unwrap();
    assert!(next.created() && *next.id() != id);
    clock.advance(quiet);
    wait_for_status(&engine.client(), next.id(), RunStatus::Completed).await;
    assert_eq!(seen.all(), [49, 50]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_stream_starts_at_the_maximum_wait() {
    let clock = clock();
    let seen = Seen::default();
    let (engine, _dir) = engine(&seen, &clock).await;
    let debounce = || Debounce::new("k", Duration::from_secs(10)).max_wait(Duration::from_secs(30));
    // A start every 5 s never leaves the key quiet for 10 s: the run begins at 30 s.
    let first = engine.client().start("digest", &0u32).debounce(debounce()).await.unwrap();
    for n in 1..6u32 {
        clock.advance(Duration::from_secs(5));
        let joined = engine.client().start("digest", &n).debounce(debounce()).await.unwrap();
        assert_eq!(joined.id(), first.id());
    }
    let run = engine.client().get(first.id()).await.unwrap();
    assert_eq!(run.wake_at, Some(run.created_at + Duration::from_secs(30)), "capped by the maximum wait");
    clock.advance(Duration::from_secs(5));
    wait_for_status(&engine.client(), first.id(), RunStatus::Completed).await;
    assert_eq!(seen.all(), [5]);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_debounces_are_refused_and_store_nothing() {
    let clock = clock();
    let seen = Seen::default();
    let (engine, _dir) = engine(&seen, &clock).await;
    let quiet = Duration::from_secs(1);
    let refusals = [
        engine.client().start("digest", &1u32).debounce(Debounce::new("", quiet)).await.err().unwrap(),
        engine.client().start("digest", &1u32).debounce(Debounce::new("k", Duration::ZERO)).await.err().unwrap(),
        engine
            .client()
            .start("digest", &1u32)
            .debounce(Debounce::new("k", quiet).max_wait(Duration::ZERO))
            .await
            .err()
            .unwrap(),
        engine
            .client()
            .start("digest", &1u32)
            .debounce(Debounce::new("k", quiet))
            .idempotency_key("once")
            .await
            .err()
            .unwrap(),
        engine
            .client()
            .start("digest", &1u32)
            .debounce(Debounce::new("k", quiet))
            .with_signal("go", &1)
            .await
            .err()
            .unwrap(),
    ];
    for refused in refusals {
        assert!(matches!(refused, StartError::InvalidDebounce(_)), "{refused}");
        assert!(refused.to_string().contains("CAIRN-E0315"), "{refused}");
    }
    assert!(engine.client().list(&RunFilter::default()).await.unwrap().runs.is_empty());
    engine.shutdown().await;
}
