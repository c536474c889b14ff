//! Bounded fan-out: `cargo run -p cairn --example each`.
//!
//! `resize` makes a thumbnail of each image, at most four at a time, each image in its own scope
//! `resize[i]`; one image fails, and the others' results still come back, in input order.

use cairn::SqliteStore;
use cairn::prelude::*;

async fn resize(ctx: Ctx, images: Vec<String>) -> Result<Vec<String>, WorkflowError> {
    let results = ctx
        .each("resize", images, 4, |ctx, image| async move {
            ctx.step("thumbnail", || {
                let image = image.clone();
                async move {
                    if image.ends_with(".gif") {
                        Err(StepError::terminal(format!("{image}: animated images are not supported")))
                    } else {
                        Ok(format!("{image}.thumb.png"))
                    }
                }
            })
            .await
        })
        .await?;
    Ok(results.into_iter().map(|r| r.unwrap_or_else(|e| format!("failed: {e}"))).collect())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::builder()
        .store(SqliteStore::open(dir.path().join("cairn.db"))?)
        .register("resize", 1, resize)
        .start()
        .await?;
    let images: Vec<String> = (0..10).map(|i| format!("photo-{i}.{}", if i == 7 { "gif" } else { "jpg" })).collect();
    let done: Vec<String> = engine.client().start("resize", &images).await?.result().await?;
    for line in done {
        println!("{line}");
    }
    engine.shutdown().await;
    Ok(())
}
