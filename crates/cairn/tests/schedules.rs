//! Schedules in virtual time: firings start runs once each, missed ones by the catch-up policy,
//! pause/resume/trigger/delete, and two workers never fire one time twice.

use crate::common::{Body, Counter, reopen, sqlite, wait_for_status};
use cairn::prelude::*;
use cairn::{CatchUp, ManualClock, RunStatus, Schedule, SqliteStore, Timestamp, schedule_run_id};
use std::time::Duration;

const MINUTE: i64 = 60_000;

/// 2026-11-24T10:00:30Z: half a minute past a round hour.
fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_millis(1_795_989_630_000))
}

/// The minute `m` minutes after 10:00 that day.
fn minute(m: i64) -> Timestamp {
    Timestamp::from_millis(1_795_989_600_000 + m * MINUTE)
}

fn tick(calls: Counter) -> impl Fn(Ctx, serde_json::Value) -> Body<serde_json::Value> + Send + Sync + 'static {
    move |ctx, input| {
        let calls = calls.clone();
        Box::pin(async move {
            ctx.step("work", || {
                let calls = calls.clone();
                async move {
                    calls.hit();
                    Ok::<_, StepError>(())
                }
            })
            .await?;
            Ok(input)
        })
    }
}

async fn worker(store: SqliteStore, clock: &ManualClock, calls: &Counter, schedules: Vec<Schedule>) -> Engine {
    let mut builder = Engine::builder().store(store).clock(clock.clone()).register("tick", 1, tick(calls.clone()));
    for schedule in schedules {
        builder = builder.schedule(schedule);
    }
    builder.start().await.unwrap()
}

/// Moves the clock to `at` and waits for the run of `name`'s firing at `at` to complete.
async fn fires(engine: &Engine, clock: &ManualClock, name: &str, at: Timestamp) -> cairn::RunRecord {
    clock.set(at);
    wait_for_status(&engine.client(), &schedule_run_id(name, at), RunStatus::Completed).await
}

/// The ids of the runs `name` started, oldest first.
async fn runs_of(engine: &Engine, name: &str) -> Vec<String> {
    let page =
        engine.client().list(&cairn::RunFilter { limit: Some(1000), ..cairn::RunFilter::default() }).await.unwrap();
    let mut ids: Vec<String> =
        page.runs.into_iter().map(|r| r.id.to_string()).filter(|id| id.starts_with(&format!("{name}@"))).collect();
    ids.sort();
    ids
}

fn ids(name: &str, minutes: &[i64]) -> Vec<String> {
    minutes.iter().map(|m| schedule_run_id(name, minute(*m)).to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_firing_starts_one_run_with_the_schedules_input() {
    let (store, _dir) = sqlite();
    let (clock, calls) = (clock(), Counter::default());
    let every_minute = Schedule::cron("every-minute", "tick", ["* * * * *"]).input("hello");
    let engine = worker(store, &clock, &calls, vec![every_minute]).await;
    let declared = engine.client().schedule("every-minute").await.unwrap();
    assert_eq!((declared.next_fire_at, declared.paused), (Some(minute(1)), false));
    let run = fires(&engine, &clock, "every-minute", minute(1)).await;
    assert_eq!(run.output.unwrap().get(), "\"hello\"");
    fires(&engine, &clock, "every-minute", minute(2)).await;
    assert_eq!(runs_of(&engine, "every-minute").await, ids("every-minute", &[1, 2]));
    assert_eq!(calls.get(), 2);
    let after = engine.client().schedule("every-minute").await.unwrap();
    assert_eq!((after.last_fired_at, after.next_fire_at), (Some(minute(2)), Some(minute(3))));
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_firings_start_by_each_catch_up_policy() {
    let (store, dir) = sqlite();
    let (clock, calls) = (clock(), Counter::default());
    let every_five = |name: &str, policy| Schedule::cron(name, "tick", ["*/5 * * * *"]).catch_up(policy);
    let schedules = vec![
        every_five("skip", CatchUp::Skip),
        every_five("once", CatchUp::Once),
        every_five("all", CatchUp::All { max: 3 }),
    ];
    let engine = worker(store, &clock, &calls, schedules.clone()).await;
    for name in ["skip", "once", "all"] {
        fires(&engine, &clock, name, minute(5)).await;
    }
    engine.shutdown().await;

    // No worker from 10:05 to 10:27: 10:10, 10:15, 10:20 and 10:25 are missed (none on time).
    clock.set(minute(27));
    let engine = worker(reopen(&dir), &clock, &calls, schedules).await;
    wait_for_status(&engine.client(), &schedule_run_id("once", minute(25)), RunStatus::Completed).await;
    for m in [15, 20, 25] {
        wait_for_status(&engine.client(), &schedule_run_id("all", minute(m)), RunStatus::Completed).await;
    }
    // Each schedule goes on from 10:30.
    for name in ["skip", "once", "all"] {
        fires(&engine, &clock, name, minute(30)).await;
    }
    assert_eq!(runs_of(&engine, "skip").await, ids("skip", &[5, 30]));
    assert_eq!(runs_of(&engine, "once").await, ids("once", &[5, 25, 30]));
    assert_eq!(runs_of(&engine, "all").await, ids("all", &[5, 15, 20, 25, 30]));
    assert_eq!(calls.get(), 2 + 3 + 5);
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_schedules_do_not_fire_and_resume_from_now() {
    let (store, _dir) = sqlite();
    let (clock, calls) = (clock(), Counter::default());
    let engine = worker(store, &clock, &calls, vec![Schedule::cron("m", "tick", ["* * * * *"])]).await;
    fires(&engine, &clock, "m", minute(1)).await;
    assert!(engine.client().pause_schedule("m").await.unwrap().paused);
    clock.set(minute(4));
    // A run started now, by hand, while paused.
    let manual = engine.client().trigger_schedule("m").await.unwrap();
    assert_eq!(manual.id(), &schedule_run_id("m", minute(4)));
    let recorded = engine.client().schedules().await.unwrap().remove(0);
    assert_eq!((recorded.paused, recorded.last_fired_at), (true, Some(minute(4))), "the trigger is the last firing");
    manual.result::<serde_json::Value>().await.unwrap();
    let resumed = engine.client().resume_schedule("m").await.unwrap();
    assert_eq!((resumed.paused, resumed.next_fire_at), (false, Some(minute(5))), "10:02 and 10:03 are not started");
    fires(&engine, &clock, "m", minute(5)).await;
    assert_eq!(runs_of(&engine, "m").await, ids("m", &[1, 4, 5]));

    engine.client().delete_schedule("m").await.unwrap();
    assert!(matches!(engine.client().delete_schedule("m").await, Err(ClientError::ScheduleNotFound(_))));
    assert!(matches!(engine.client().pause_schedule("m").await, Err(ClientError::ScheduleNotFound(_))));
    clock.set(minute(9));
    // Another firing would have been due by now; the worker's next look finds nothing.
    fires_nothing(&engine).await;
    assert_eq!(runs_of(&engine, "m").await, ids("m", &[1, 4, 5]), "the deleted schedule's runs stay");
    engine.shutdown().await;
}

/// Lets the worker look at the store a few times (its poll interval is short in these tests).
async fn fires_nothing(engine: &Engine) {
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(engine.client().schedules().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_one_store_start_each_firing_once() {
    let (store, _dir) = sqlite();
    let (clock, calls) = (clock(), Counter::default());
    let every_minute = || Schedule::cron("shared", "tick", ["* * * * *"]);
    let first = worker(store.clone(), &clock, &calls, vec![every_minute()]).await;
    let second = worker(store, &clock, &calls, vec![every_minute()]).await;
    for m in 1..=20 {
        fires(&first, &clock, "shared", minute(m)).await;
    }
    assert_eq!(runs_of(&second, "shared").await.len(), 20);
    assert_eq!(calls.get(), 20, "each firing's run ran once");
    first.shutdown().await;
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_schedules_are_refused_and_store_nothing() {
    let (store, _dir) = sqlite();
    let (clock, calls) = (clock(), Counter::default());
    let refused = Engine::builder()
        .store(store.clone())
        .clock(clock.clone())
        .register("tick", 1, tick(calls.clone()))
        .schedule(Schedule::cron("x", "nope", ["* * * * *"]))
        .start()
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("not registered"), "{refused}");
    let engine = worker(store, &clock, &calls, Vec::new()).await;
    for (schedule, what) in [
        (Schedule::cron("x", "tick", ["0 25 * * *"]), "0 25 * * *"),
        (Schedule::cron("x", "tick", ["* * * * *"]).time_zone("Nowhere/Land"), "Nowhere/Land"),
        (Schedule::every("x", "tick", Duration::from_millis(10)), "at least 1 second"),
        (Schedule::cron("a/b", "tick", ["* * * * *"]), "a/b"),
    ] {
        let error = engine.client().put_schedule(&schedule).await.unwrap_err().to_string();
        assert!(error.contains(what), "{error} should name {what}");
    }
    assert!(engine.client().schedules().await.unwrap().is_empty());
    engine.shutdown().await;
}
