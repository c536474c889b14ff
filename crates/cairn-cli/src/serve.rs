//! `cairn serve`: a worker that also serves the HTTP API and the dashboard.

use anyhow::{Context, Result};
use cairn::prelude::*;
use clap::Args;
use serde::Deserialize;
use std::time::Duration;

#[derive(Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    store: crate::store_args::StoreArgs,
    /// Address to serve the HTTP API on (port 0: any free port, printed on start).
    #[arg(long, default_value = "127.0.0.1:7700")]
    listen: std::net::SocketAddr,
    /// Register the example workflows `hello` (subscribed to the topic `user.*`), `approval`,
    /// `flaky` and `noop` (input n: n no-op steps; what `cairn bench --url` runs).
    #[arg(long)]
    examples: bool,
    /// An origin (`https://app.example.com`) whose pages may start and steer runs here, with
    /// CORS headers; repeatable, added to `CAIRN_ALLOW_ORIGINS` (comma-separated). Pages on any
    /// other origin are refused (403).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origins: Vec<String>,
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

/// `flaky`'s input.
#[derive(Deserialize)]
struct Flaky {
    /// How many attempts of its step fail before one succeeds (default 2).
    #[serde(default = "two")]
    failures: u32,
}

fn two() -> u32 {
    2
}

/// `flaky`: a step that fails `failures` times before it succeeds (retried after 300 ms each
/// time), then a one-second sleep; it shows retries and sleeps on the dashboard's timeline.
async fn flaky(ctx: Ctx, input: Flaky) -> Result<String, WorkflowError> {
    let failures = input.failures.min(10);
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let policy = RetryPolicy::fixed(Duration::from_millis(300)).attempts(failures + 1);
    let made = ctx
        .step("charge", move || {
            let attempt = attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            async move {
                if attempt <= failures {
                    return Err(StepError::retryable(format!("attempt {attempt}: the card service is down")));
                }
                Ok(attempt)
            }
        })
        .retry(policy)
        .await?;
    ctx.sleep("cool-down", Duration::from_secs(1)).await?;
    Ok(format!("charged on attempt {made}"))
}

/// Connections a burst of clients may open before the server accepts them (the default, 128,
/// dropped the SYNs of 256 clients connecting at once, which retried a second later).
const BACKLOG: u32 = 1024;

/// A listener on `address` with a [`BACKLOG`]-deep accept queue.
fn listen(address: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if address.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(BACKLOG)
}

pub(crate) async fn run(args: ServeArgs) -> Result<()> {
    // An empty token would serve without one: say so rather than guess which was meant.
    if std::env::var_os("CAIRN_TOKEN").is_some_and(|token| token.is_empty()) {
        anyhow::bail!("CAIRN_TOKEN is set but empty: set a token, or unset CAIRN_TOKEN to serve without one");
    }
    // Installed before anything runs, so every number from the start is kept.
    let metrics = cairn_http::metrics::Prometheus::install();
    let store = args.store.open(true).await?;
    let mut builder = Engine::builder().shared_store(store);
    if args.examples {
        builder = (builder.register("hello", 1, hello).subscribe("hello", "user.*"))
            .register("approval", 1, approval)
            .register("flaky", 1, flaky)
            .register("noop", 1, crate::bench::noop_workflow(Default::default(), false));
    }
    let engine = builder.start().await?;
    let listener = listen(args.listen).with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr().context("cannot read the listening address")?;
    let mut config = cairn_http::ApiConfig { metrics, ..cairn_http::ApiConfig::from_env() };
    config.allowed_origins.extend(args.allow_origins);
    if config.token.is_none() && !address.ip().is_loopback() {
        eprintln!(
            "cairn serve: WARNING: listening on {address} without a token: anyone who can reach it can start, \
             signal and cancel runs. Set CAIRN_TOKEN."
        );
    }
    let live_streams = config.shutdown.clone();
    let app = cairn_http::router(engine.client(), config);
    out!("cairn serve: dashboard on http://{address}/ (API under /v1; store: {})", args.store.describe());
    let stop = async move {
        crate::stop::stop_requested().await;
        live_streams.cancel();
    };
    let served = axum::serve(listener, app).with_graceful_shutdown(stop).await;
    engine.shutdown().await;
    served.context("the HTTP server failed")
}
