//! Branches and races: `cargo run -p cairn --example branches`.
//!
//! `checkout` bills and ships at once, each branch in its own scope; `quote` takes whichever of
//! a cache and a slow supplier answers first (the winner is journaled, so a replay agrees).

use cairn::SqliteStore;
use cairn::prelude::*;
use std::time::Duration;

async fn checkout(ctx: Ctx, order: u64) -> Result<Vec<String>, WorkflowError> {
    ctx.join(vec![
        ctx.branch("bill", |ctx| async move {
            let amount = ctx.step("price", || async move { Ok::<_, StepError>(order * 10) }).await?;
            ctx.step("charge", || async move { Ok::<_, StepError>(format!("charged {amount}")) }).await
        }),
        ctx.branch("ship", |ctx| async move {
            ctx.step("label", || async { Ok::<_, StepError>("labelled".to_owned()) }).await
        }),
    ])
    .await
}

async fn quote(ctx: Ctx, (): ()) -> Result<String, WorkflowError> {
    let (winner, price) = ctx
        .race(
            "quote",
            vec![
                ctx.branch(
                    "cache",
                    |ctx| async move { ctx.step("read", || async { Ok::<_, StepError>(42u32) }).await },
                ),
                ctx.branch("supplier", |ctx| async move {
                    ctx.sleep("slow-api", Duration::from_secs(30)).await?;
                    ctx.step("ask", || async { Ok::<_, StepError>(40u32) }).await
                }),
            ],
        )
        .await?;
    Ok(format!("{price} from {winner}"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db"))?)
        .register("checkout", 1, checkout)
        .register("quote", 1, quote)
        .start()
        .await?;
    let done: Vec<String> = engine.client().start("checkout", &4u64).await?.result().await?;
    println!("checkout: {done:?}");
    let quoted: String = engine.client().start("quote", &()).await?.result().await?;
    println!("quote: {quoted}");
    engine.shutdown().await;
    Ok(())
}
