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
    #[arg(long, env = "CAIRN_LISTEN", default_value = "127.0.0.1:7700")]
    listen: std::net::SocketAddr,
    /// The longest any ended run is kept, in days, whatever its workflow or start asked for
    /// (default: no ceiling).
    #[arg(long, env = "WORKFLOWS_MAX_RETENTION_DAYS", value_name = "DAYS")]
    max_retention_days: Option<u32>,
    /// The timeout of every run started here without one of its own (`30m`, `2h`; default:
    /// none): such a run still going this long after its start ends failed (CAIRN-E0110).
    #[arg(long, env = "CAIRN_DEFAULT_RUN_TIMEOUT", value_name = "DURATION",
        value_parser = |text: &str| cairn::parse_run_timeout(text).map_err(|error| error.to_string()))]
    default_run_timeout: Option<Duration>,
    /// How often this worker deletes ended runs past their retention (`1m`, `1h`; `off`: never,
    /// when another process or `cairn runs prune` does it).
    #[arg(long, env = "CAIRN_SWEEP_EVERY", default_value = "1m")]
    sweep_every: String,
    /// How long a client may take to send a request's head, and how long a connection may stay
    /// idle between requests.
    #[arg(long, env = "CAIRN_HEADER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: Duration,
    /// How long a client may take to send a request's body.
    #[arg(long, env = "CAIRN_BODY_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    body_timeout: Duration,
    /// Connections served at once: past it, the connection silent longest is closed, or if
    /// none is, the new one is answered 503 with Retry-After. Live streams hold at most half.
    /// Default: 1,024, or `ulimit -n` less 64 when that is lower; keep it below `ulimit -n`.
    #[arg(long, env = "CAIRN_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// How long writing an answer may make no progress (the client reads none of it) before
    /// its connection is closed.
    #[arg(long, env = "CAIRN_WRITE_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    write_timeout: Duration,
    /// Register the example workflows `hello` (subscribed to the topic `user.*`), `approval`,
    /// `flaky` (input `{"failures": n, "attempts": m}`: fewer attempts than n + 1 end failed),
    /// `fanout` (input `{"items": n, "ticks": k}`: n items in scopes of their own, a durable
    /// value, k one-second sleeps, a child run) and `noop` (input n: n no-op steps; what `cairn bench --url` runs).
    #[arg(long)]
    examples: bool,
    /// An origin (`https://app.example.com`) whose pages may start and steer runs here, with
    /// CORS headers; repeatable, added to `CAIRN_ALLOW_ORIGINS` (comma-separated). Pages on any
    /// other origin are refused (403).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origins: Vec<String>,
    /// A host name (`cairn.internal`) or address this server answers by `Host` when it has no
    /// token, besides `localhost`, loopback addresses and the address it listens on; repeatable,
    /// added to `CAIRN_ALLOWED_HOSTS` (comma-separated). Requests for other hosts are refused
    /// (403): a page on a domain that resolves here (DNS rebinding) cannot drive it.
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
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
    /// How many attempts its step may make (default `failures + 1`, so that it succeeds); fewer
    /// than `failures + 1` and the run ends failed.
    attempts: Option<u32>,
}

fn two() -> u32 {
    2
}

/// `flaky`: a step that fails `failures` times before it succeeds (retried after 300 ms each
/// time), then a one-second sleep; it shows retries and sleeps on the dashboard's timeline.
/// Which attempt it is comes from the journal, so a restart of the server resumes the count;
/// given fewer `attempts` than that, the run ends failed.
async fn flaky(ctx: Ctx, input: Flaky) -> Result<String, WorkflowError> {
    let failures = input.failures.min(10);
    let attempts = input.attempts.unwrap_or(failures + 1).clamp(1, 11);
    let policy = RetryPolicy::fixed(Duration::from_millis(300)).attempts(attempts);
    let made = ctx
        .step("charge", move || async move {
            let attempt = cairn::step_attempt().unwrap_or(1);
            if attempt <= failures {
                return Err(StepError::retryable(format!("attempt {attempt}: the card service is down")));
            }
            Ok(attempt)
        })
        .retry(policy)
        .await?;
    ctx.sleep("cool-down", Duration::from_secs(1)).await?;
    Ok(format!("charged on attempt {made}"))
}

/// `fanout`'s input.
#[derive(Deserialize)]
struct Fanout {
    /// How many items (default 3, at most 10,000).
    #[serde(default = "three")]
    items: u32,
    /// One-second sleeps after the items, one after another (default 0, at most 600): a long
    /// run that changes a little each second.
    #[serde(default)]
    ticks: u32,
}

fn three() -> u32 {
    3
}

/// `fanout`: each item in a scope of its own (`item[i]`, four at a time), a durable value `done`
/// counting them, `ticks` one-second sleeps, then a child `hello` run it waits for; it shows a
/// run graph on the dashboard.
async fn fanout(ctx: Ctx, input: Fanout) -> Result<String, WorkflowError> {
    let done = ctx.var::<u32>("done")?;
    let items = ctx
        .each("item", 0..input.items.min(10_000), 4, |ctx, i| async move {
            ctx.step("work", move || async move { Ok::<_, StepError>(i * 2) }).await
        })
        .await?;
    done.set(&(items.iter().filter(|item| item.is_ok()).count() as u32)).await?;
    for tick in 0..input.ticks.min(600) {
        ctx.sleep(&format!("tick-{tick}"), Duration::from_secs(1)).await?;
    }
    let greeting: String = ctx.child("hello", &serde_json::json!({ "name": "child" })).await?;
    Ok(format!("{} items; the child said {greeting}", items.len()))
}

/// `--sweep-every`: a duration, or `off`.
fn sweep_interval(text: &str) -> Result<Option<Duration>, String> {
    match text {
        "off" | "never" => Ok(None),
        _ => humantime::parse_duration(text).map(Some).map_err(|error| format!("{text:?}: {error} (or `off`)")),
    }
}

pub(crate) async fn run(args: ServeArgs) -> Result<()> {
    // Read first: an empty token is refused before anything opens.
    let mut service = cairn_http::Service::from_env()?;
    service.listen = args.listen;
    service.api.allowed_origins.extend(args.allow_origins);
    service.api.allowed_hosts.extend(args.allowed_hosts);
    service.api.body_timeout = args.body_timeout;
    service.limits.header_timeout = args.header_timeout;
    service.limits.write_timeout = args.write_timeout;
    if let Some(connections) = args.max_connections {
        service.limits.max_connections = connections;
    }
    let sweep_every = sweep_interval(&args.sweep_every).map_err(|error| anyhow::anyhow!("--sweep-every {error}"))?;
    // Installed before anything runs, so every number from the start is kept.
    service.api.metrics = cairn_http::metrics::Prometheus::install();
    let store = args.store.open_worker().await?;
    let mut builder = Engine::builder().shared_store(store).sweep_every(sweep_every);
    if let Some(limit) = args.default_run_timeout {
        builder = builder.default_run_timeout(limit);
    }
    if let Some(days) = args.max_retention_days {
        builder = builder.max_retention(Duration::from_secs(u64::from(days) * 86_400));
    }
    if args.examples {
        builder = (builder.register("hello", 1, hello).subscribe("hello", "user.*"))
            .register("approval", 1, approval)
            .register("flaky", 1, flaky)
            .register("fanout", 1, fanout)
            .register("noop", 1, crate::bench::noop_workflow(Default::default(), false));
    }
    let engine = builder.start().await?;
    let listening = service.bind().await?;
    let address = listening.address();
    out!("cairn serve: dashboard on http://{address}/ (API under /v1; store: {})", args.store.describe());
    let served = listening.serve(engine.client(), cairn_http::stop_requested()).await;
    engine.shutdown().await;
    served.context("the HTTP server failed")
}
