//! A durable loop with a durable value: `cargo run -p cairn --example durable_loop`.
//!
//! `drain` pulls batches from a queue until it is empty, one iteration per batch, carrying the
//! total as the loop's state. The journal keeps the last few iterations only, however many run,
//! and the `processed` value shows progress from outside while the run goes on.

use cairn::prelude::*;
use cairn::{LoopOptions, SqliteStore};
use std::ops::ControlFlow;

async fn drain(ctx: Ctx, batches: u64) -> Result<u64, WorkflowError> {
    let processed = ctx.var::<u64>("processed")?;
    let options = LoopOptions::default().keep_iterations(5);
    ctx.repeat_with("batch", 0u64, options, |ctx, total| {
        let processed = processed.clone();
        async move {
            let pulled = ctx.step("pull", || async { Ok::<_, StepError>(25u64) }).await?;
            let total = total + pulled;
            processed.set(&total).await?;
            let turn = ctx.path().iteration_of(&cairn::StepPath::parse("batch")?).unwrap_or(0);
            Ok(if turn + 1 == batches { ControlFlow::Break(total) } else { ControlFlow::Continue(total) })
        }
    })
    .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db"))?)
        .register("drain", 1, drain)
        .start()
        .await?;
    let run = engine.client().start("drain", &1_000u64).await?;
    let total: u64 = run.result().await?;
    let rows = engine.client().journal(run.id()).await?.len();
    println!("drained {total} items in 1000 iterations; the journal holds {rows} entries");
    println!("vars: {:?}", engine.client().vars(run.id()).await?);
    engine.shutdown().await;
    Ok(())
}
