//! Priority and fairness: `cargo run -p cairn --example priority`.
//!
//! Before any worker runs, tenant `big` queues 20 reports, tenant `small` queues 3, and one urgent
//! report comes last. A worker that takes one run at a time then starts the urgent one first,
//! and serves the two tenants in turn: `small` does not wait for all of `big`'s reports.

use cairn::prelude::*;
use cairn::{SqliteStore, Store};
use std::sync::{Arc, Mutex};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("cairn.db"))?);
    let queue = Client::from_shared(Arc::clone(&store));
    for i in 0..20 {
        queue.start("report", &format!("big-{i}")).fairness_key("big").await?;
    }
    for i in 0..3 {
        queue.start("report", &format!("small-{i}")).fairness_key("small").await?;
    }
    queue.start("report", &"urgent").priority(10).await?;

    let order = Arc::new(Mutex::new(Vec::new()));
    let report = {
        let order = Arc::clone(&order);
        move |ctx: Ctx, name: String| {
            let order = Arc::clone(&order);
            async move {
                ctx.step("render", || async {
                    order.lock().map_err(|_| StepError::terminal("poisoned"))?.push(name.clone());
                    Ok::<_, StepError>(())
                })
                .await
            }
        }
    };
    let engine = Engine::builder().shared_store(store).max_active_runs(1).register("report", 1, report).start().await?;
    while order.lock().map_err(|_| "poisoned")?.len() < 24 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    engine.shutdown().await;
    // urgent, big-0, small-0, big-1, small-1, big-2, small-2, big-3, big-4, …
    println!("{}", order.lock().map_err(|_| "poisoned")?.join(", "));
    Ok(())
}
