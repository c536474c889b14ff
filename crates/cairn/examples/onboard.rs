//! The README's example, runnable: `cargo run -p cairn --example onboard`.
//!
//! It uses a virtual clock so the five-minute welcome delay passes at once.

use cairn::prelude::*;
use cairn::{ManualClock, SqliteStore, Timestamp};
use std::time::Duration;

async fn onboard(ctx: Ctx, email: String) -> Result<u64, WorkflowError> {
    let user: u64 = ctx.step("create-user", || async { Ok::<_, StepError>(42) }).await?;
    ctx.sleep("welcome-delay", Duration::from_secs(300)).await?;
    ctx.step("send-welcome", || async { Ok::<_, StepError>(format!("mail to {email}")) })
        .retry(RetryPolicy::exponential().attempts(5).base(Duration::from_secs(2)))
        .await?;
    let verified: Option<serde_json::Value> = ctx
        .wait_for_event(
            "verify",
            EventFilter::matching(serde_json::json!({ "user": user })),
            Duration::from_secs(7 * 86_400),
        )
        .await?;
    if verified.is_none() {
        ctx.step("nudge", || async { Ok::<_, StepError>(()) }).await?;
    }
    Ok(user)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let clock = ManualClock::new(Timestamp::from_system_time(std::time::SystemTime::now()));
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db"))?)
        .clock(clock.clone())
        .register("onboard", 1, onboard)
        .start()
        .await?;
    let run = engine.client().start("onboard", "ada@example.com").idempotency_key("user-42").await?; // same key → same run
    // Let the run reach its sleep, then move virtual time past it.
    while engine.client().get(run.id()).await?.status != cairn::RunStatus::Suspended {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    clock.advance(Duration::from_secs(300));
    engine.client().signal(run.id(), "verify", &serde_json::json!({ "user": 42 })).await?;
    let user: u64 = run.result().await?;
    println!("run {} onboarded user {user}", run.id());
    for entry in engine.client().journal(run.id()).await? {
        println!("  #{} {}", entry.seq, entry.event.to_json());
    }
    engine.shutdown().await;
    Ok(())
}
