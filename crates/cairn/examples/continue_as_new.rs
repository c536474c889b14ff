//! A run that goes on as a fresh run: `cargo run -p cairn --example continue_as_new`.
//!
//! `meter` adds up `reading` signals for a sensor forever. Each run takes 3 readings, then
//! continues as new with the running total, so no journal grows however long the sensor lives;
//! readings sent meanwhile (always to the first id) reach the newest run, none lost.

use cairn::SqliteStore;
use cairn::prelude::*;
use std::time::Duration;

async fn meter(ctx: Ctx, total: u64) -> Result<u64, WorkflowError> {
    let mut total = total;
    for i in 0..3 {
        let day = Duration::from_secs(24 * 3600);
        let reading: Option<u64> =
            ctx.wait_for_event_as(&format!("reading[{i}]"), "reading", EventFilter::any(), day).await?;
        match reading {
            Some(0) => return Ok(total), // the sensor was retired
            Some(value) => total += value,
            None => {}
        }
    }
    ctx.continue_as_new(&total)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db"))?)
        .register("meter", 1, meter)
        .start()
        .await?;
    let run = engine.client().start("meter", &0u64).id("sensor-7").await?;
    for value in [5, 7, 1, 4, 3, 9, 2, 0] {
        engine.client().signal(run.id(), "reading", &value).await?;
    }
    let total: u64 = run.result().await?;
    println!("sensor-7 read {total} in all");
    for id in ["sensor-7", "sensor-7~1", "sensor-7~2"] {
        let r = engine.client().get(&id.into()).await?;
        let next = r.rare().continued_as.as_ref().map_or_else(String::new, |next| format!(" as {next}"));
        println!("{id}: {}{next}, {} journal entries", r.status, engine.client().journal(&r.id).await?.len());
    }
    engine.shutdown().await;
    Ok(())
}
