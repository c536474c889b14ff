//! `cairn serve`: a worker that also serves the HTTP API.

use anyhow::{Context, Result};
use cairn::prelude::*;
use clap::Args;
use serde::Deserialize;
use std::time::Duration;

#[derive(Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    store: crate::runs::StoreArgs,
    /// Address to serve the HTTP API on (port 0: any free port, printed on start).
    #[arg(long, default_value = "127.0.0.1:7700")]
    listen: std::net::SocketAddr,
    /// Register the example workflows `hello` and `approval`.
    #[arg(long)]
    examples: bool,
}

/// `hello`'s input.
#[derive(Deserialize)]
struct Hello {
    name: String,
}

/// `hello`: one step that greets `name`.
async fn hello(ctx: Ctx, input: Hello) -> Result<String, WorkflowError> {
    ctx.step("greet", || async { Ok::<_, StepError>(format!("Hello, {}!", input.name)) }).await
}

/// `approval`: waits up to an hour for the event `approve` and returns its payload (`null` when
/// the hour passes first).
async fn approval(ctx: Ctx, _input: serde_json::Value) -> Result<serde_json::Value, WorkflowError> {
    let payload: Option<serde_json::Value> =
        ctx.wait_for_event("approve", EventFilter::any(), Duration::from_secs(3600)).await?;
    Ok(payload.unwrap_or(serde_json::Value::Null))
}

pub(crate) async fn run(args: ServeArgs) -> Result<()> {
    let store = args.store.open(true).await?;
    let mut builder = Engine::builder().shared_store(store);
    if args.examples {
        builder = builder.register("hello", 1, hello).register("approval", 1, approval);
    }
    let engine = builder.start().await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr().context("cannot read the listening address")?;
    let app = cairn_http::router(engine.client(), cairn_http::ApiConfig::from_env());
    out!("cairn serve: API on http://{address}/v1 (store: {})", args.store.describe());
    let served = axum::serve(listener, app).with_graceful_shutdown(crate::stop_requested()).await;
    engine.shutdown().await;
    served.context("the HTTP server failed")
}
