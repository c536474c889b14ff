//! What `cairn bench` and its worker processes take: the workloads, stores and options.

use cairn::Durability;
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Workload {
    /// Throughput: many runs started at once.
    W1,
    /// Latency: one run at a time.
    W2,
    /// Resume: runs with a long journal (default 10,000 steps) suspended on a signal; each is
    /// signalled on a freshly started engine and timed from the signal to its result.
    W4,
    /// Fan-out: one run whose `ctx.each` runs --steps items (default 10,000), --concurrency at a
    /// time (default 100), one no-op step each; timed from the start to the result.
    W5,
    /// Long loop: one run whose `ctx.repeat` runs --steps iterations (default 1,000,000) of one
    /// no-op step each, checkpointed every iteration with the last 10 kept; iterations/s, the
    /// process's peak RSS and the journal rows left at the end.
    W6,
    /// Lists at scale: fill the store with --runs finished runs of one step (1 % failed; the input
    /// is an order number and one of 1,000 customers), then time the HTTP API's `GET
    /// /v1/workflows`, `GET /v1/workflows/{name}/runs?status=failed` (first page, and pages 1 to
    /// 100 by cursor), a customer's runs by `?input.customer=` (up to 10 pages by cursor) and one
    /// run by `?input.n=`, served in this process.
    List,
    /// Priority at scale: queue --runs runs (default 100,000; no worker) over 10 priorities and
    /// 100 fairness keys (half of them one key's), then print the plan of a claim of the first
    /// 128 and time 20 such claims (each leases what it claims, so the queue shrinks by 128).
    Priority,
}

impl Workload {
    /// How reports name the W1/W2 workloads.
    pub(crate) fn name(self) -> &'static str {
        if self == Workload::W2 { "w2" } else { "w1" }
    }
}

/// Whether a report's text line is printed: without `--json`, or on a terminal.
pub(crate) fn text_wanted(json: bool) -> bool {
    !json || std::io::IsTerminal::is_terminal(&std::io::stdout())
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum StoreKind {
    /// In-process memory.
    Memory,
    /// An SQLite file (in a temporary directory under the current one, removed afterwards).
    Sqlite,
    /// PostgreSQL at --database-url, in a fresh schema dropped afterwards.
    Postgres,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum DurabilityArg {
    /// synchronous=FULL: commits survive power loss.
    Full,
    /// synchronous=NORMAL: commits survive a process crash.
    Normal,
}

#[derive(Args)]
pub(crate) struct BenchArgs {
    /// Which workload.
    pub(crate) workload: Workload,
    /// Which store.
    #[arg(long, value_enum, default_value = "sqlite")]
    pub(crate) store: StoreKind,
    /// SQLite durability.
    #[arg(long, value_enum, default_value = "full")]
    pub(crate) durability: DurabilityArg,
    /// Runs (default: 1000 for w1, 200 for w2, 10 for w4).
    #[arg(long)]
    pub(crate) runs: Option<usize>,
    /// Steps per run (default: 10; 10,000 for w4 and w5).
    #[arg(long)]
    pub(crate) steps: Option<usize>,
    /// W5: items in flight at once.
    #[arg(long, default_value_t = 100)]
    pub(crate) concurrency: usize,
    /// W1/W2 with a retention sweep in progress: first fill the store with this many ended runs
    /// of 10 steps each, past their retention, then delete them in the background (as an
    /// engine's sweeper does, paced by `Client::sweep`) while the workload runs.
    #[arg(long, default_value_t = 0)]
    pub(crate) prunable: usize,
    /// W1 under a concurrency limit: at most this many runs at once (per key, with
    /// --limit-keys), across the workers; the claim's plan is printed while runs wait.
    #[arg(long)]
    pub(crate) limit: Option<u32>,
    /// With --limit: the runs are spread over this many keys, each with its own limit.
    #[arg(long)]
    pub(crate) limit_keys: Option<usize>,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub(crate) json: bool,
    /// Worker processes sharing the work (`--store postgres` only): this one plus N-1 more.
    #[arg(long, default_value_t = 1)]
    pub(crate) workers: usize,
    /// PostgreSQL URL for `--store postgres`.
    #[arg(long, env = "CAIRN_DATABASE_URL", default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub(crate) database_url: String,
    /// W1/W2 through the HTTP API of a running `cairn serve --examples` at this URL (its `noop`
    /// workflow): each run started with `POST …/runs` and awaited with `GET …/result`; `--store`
    /// is then the server's business.
    #[arg(long)]
    pub(crate) url: Option<String>,
    /// The server's bearer token (with --url).
    #[arg(long, env = "CAIRN_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
}

/// Arguments of the hidden `bench-worker` subcommand.
#[derive(Args)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    pub(crate) database_url: String,
    #[arg(long)]
    pub(crate) schema: String,
    #[arg(long)]
    pub(crate) max_active_runs: usize,
}

pub(crate) fn durability_name(kind: StoreKind, durability: Durability) -> &'static str {
    match kind {
        StoreKind::Memory => "none",
        StoreKind::Sqlite => durability.as_str(),
        StoreKind::Postgres => "synchronous_commit=on",
    }
}
