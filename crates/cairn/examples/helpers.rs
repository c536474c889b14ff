//! Deterministic helpers, per-workflow defaults and named waits:
//! `cargo run -p cairn --example helpers`.
//!
//! `invite` stamps the invitation with a journaled time and id (a replay sees the same), retries
//! its steps by the workflow's default policy, and waits twice for the same signal `approve`
//! under two step names.

use cairn::SqliteStore;
use cairn::prelude::*;
use std::time::Duration;

async fn invite(ctx: Ctx, guest: String) -> Result<String, WorkflowError> {
    let (at, id) = (ctx.now().await?, ctx.uuid().await?);
    ctx.step("send", || async { Ok::<_, StepError>(()) }).await?;
    let day = Duration::from_secs(86_400);
    let first: Option<String> = ctx.wait_for_event_as("first-approval", "approve", EventFilter::any(), day).await?;
    let second: Option<String> = ctx.wait_for_event_as("second-approval", "approve", EventFilter::any(), day).await?;
    Ok(format!(
        "invitation {id} for {guest} at {} approved by {} and {}",
        at.as_millis(),
        first.unwrap_or_default(),
        second.unwrap_or_default()
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db"))?)
        .register("invite", 1, invite)
        .default_retry("invite", RetryPolicy::exponential().attempts(5).base(Duration::from_millis(50)))
        .default_step_timeout("invite", Duration::from_secs(10))
        .start()
        .await?;
    let run = engine.client().start("invite", "ada").await?;
    engine.client().signal(run.id(), "approve", "grace").await?;
    engine.client().signal(run.id(), "approve", "alan").await?;
    println!("{}", run.result::<String>().await?);
    engine.shutdown().await;
    Ok(())
}
