//! Your own workflows, served as `cairn serve` serves its examples: the HTTP API, the dashboard
//! and `/metrics`, in one call. `cargo run -p cairn --example service`, then open
//! http://127.0.0.1:7700/ or:
//!
//! ```sh
//! curl -s -XPOST -H 'Content-Type: application/json' localhost:7700/v1/workflows/order/runs \
//!   -d '{"id": "order-1", "input": {"item": "book", "quantity": 2}}'
//! curl -s -XPOST -H 'Content-Type: application/json' \
//!   localhost:7700/v1/workflows/order/runs/order-1/signals/paid -d '{"amount": 30}'
//! curl -s 'localhost:7700/v1/workflows/order/runs/order-1/result'
//! ```
//!
//! Settings come from the environment: `CAIRN_DB` (the SQLite file, default `service.db`),
//! `CAIRN_LISTEN` (default `127.0.0.1:7700`), `CAIRN_TOKEN`, `CAIRN_ALLOW_ORIGINS`. SIGTERM or
//! Ctrl-C stops it gracefully; runs carry on where they were when it starts again.

use cairn::SqliteStore;
use cairn::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Deserialize)]
struct Order {
    item: String,
    quantity: u32,
}

#[derive(Serialize, Deserialize)]
struct Payment {
    amount: u64,
}

/// Reserves the stock, waits up to a day for the payment, then ships.
async fn order(ctx: Ctx, order: Order) -> Result<String, WorkflowError> {
    let line = format!("{} x {}", order.quantity, order.item);
    let reserved: String = ctx.step("reserve", || async { Ok::<_, StepError>(line.clone()) }).await?;
    let paid: Option<Payment> = ctx.wait_for_event("paid", EventFilter::any(), Duration::from_secs(86_400)).await?;
    let Some(payment) = paid else {
        ctx.step("release", || async { Ok::<_, StepError>(()) }).await?;
        return Err(WorkflowError::failed("no payment within a day"));
    };
    let amount = payment.amount;
    ctx.step("ship", || async { Ok::<_, StepError>(format!("shipped {reserved}, paid {amount}")) }).await
}

#[tokio::main]
async fn main() {
    // Errors are printed as their messages (which say what to do), not as `Debug` dumps.
    if let Err(error) = serve().await {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let db = std::env::var("CAIRN_DB").unwrap_or_else(|_| "service.db".into());
    let engine = Engine::builder().store(SqliteStore::open(&db)?).register("order", 1, order).start().await?;
    // `Service::run(engine)` does these three in one call, saying where it listens only in its
    // log (`tracing`); this example has no log subscriber, so it says it here.
    let listening = cairn_http::Service::from_env()?.bind().await?;
    println!("serving `order` on {db}: the dashboard on http://{}/ (API under /v1)", listening.address());
    listening.serve(engine.client(), cairn_http::stop_requested()).await?;
    engine.shutdown().await;
    Ok(())
}
