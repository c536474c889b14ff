//! `cairn`: inspect, signal and cancel runs in a Cairn store; run the demo and the benchmarks.

/// `println!` for the command's output, except that a closed stdout (`cairn runs list | head`)
/// ends the process quietly instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(error) = writeln!(std::io::stdout(), $($arg)*) {
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
            panic!("failed printing to stdout: {error}");
        }
    }};
}

mod backend;
mod bench;
mod demo;
mod events;
mod remote;
mod runs;
mod serve;
mod workers;
mod workflows;

use clap::{Parser, Subcommand};

// Steps are allocated on the runtime's threads and freed on the store's writer thread; glibc's
// allocator pays for that hand-off, mimalloc much less (see docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Durable execution for Rust: inspect and steer runs, run the demo, measure the engine.
#[derive(Parser)]
#[command(name = "cairn", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List, inspect, signal and cancel runs.
    Runs {
        #[command(subcommand)]
        command: runs::RunsCommand,
    },
    /// Publish events that start the workflows subscribed to their topic.
    Events {
        #[command(subcommand)]
        command: events::EventsCommand,
    },
    /// List the live workers: host, process, when each started and last heartbeat, and the
    /// workflow versions it serves.
    Workers(workers::WorkersArgs),
    /// List the workflows that have runs, with how many runs each has in each status.
    Workflows(workflows::WorkflowsArgs),
    /// Run a worker with example workflows (an order saga, a fan-out, a sleep woken by a signal)
    /// until every run it started is done. Kill it and start it again: it resumes its runs.
    Demo {
        #[command(flatten)]
        store: runs::StoreArgs,
    },
    /// Run a worker that also serves the HTTP API and the dashboard (`--examples` registers
    /// `hello`, `approval` and `flaky`); stops gracefully on SIGTERM or Ctrl-C.
    Serve(serve::ServeArgs),
    /// Measure throughput (w1) or latency (w2).
    Bench(bench::BenchArgs),
    /// An extra worker process for `bench --workers N` (started by the bench itself).
    #[command(hide = true)]
    BenchWorker(bench::WorkerArgs),
}

/// Resolves when the process is asked to stop (SIGTERM or Ctrl-C): long-running commands then
/// shut their engine down gracefully.
pub(crate) async fn stop_requested() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Runs { command } => runs::run(command).await,
            Command::Events { command } => events::run(command).await,
            Command::Workers(args) => workers::run(args).await,
            Command::Workflows(args) => workflows::run(args).await,
            Command::Demo { store } => demo::run(&store).await,
            Command::Serve(args) => serve::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::BenchWorker(args) => bench::worker(args).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
