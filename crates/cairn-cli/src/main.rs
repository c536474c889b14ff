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
#[cfg(feature = "otlp")]
mod otlp;
mod progress;
mod runs;
mod schedules;
mod serve;
mod store_args;
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
    /// How logs are written to stderr: `text` (one line each) or `json` (one JSON object per
    /// line, with the span's fields, for a log collector). `RUST_LOG` filters either.
    #[arg(long, global = true, value_enum, env = "CAIRN_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How logs are written.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// List, inspect, signal and cancel runs.
    Runs {
        #[command(subcommand)]
        command: runs::RunsCommand,
    },
    /// Declare, list, pause, resume, trigger and delete schedules.
    Schedules {
        #[command(subcommand)]
        command: schedules::SchedulesCommand,
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
        store: store_args::StoreArgs,
    },
    /// Run a worker that also serves the HTTP API and the dashboard (`--examples` registers
    /// `hello`, `approval`, `flaky`, `fanout` and `noop`); stops gracefully on SIGTERM or Ctrl-C.
    Serve(serve::ServeArgs),
    /// Measure throughput (w1) or latency (w2).
    Bench(bench::BenchArgs),
    /// An extra worker process for `bench --workers N` (started by the bench itself).
    #[command(hide = true)]
    BenchWorker(bench::WorkerArgs),
}

/// What keeps the logs' and spans' machinery going; dropped at the very end.
struct Telemetry {
    #[cfg(feature = "otlp")]
    _exporter: Option<otlp::Exporter>,
}

/// Logs to stderr in `format`, filtered by `RUST_LOG` (`target=level` directives; default
/// `info`), and, with `OTEL_EXPORTER_OTLP_ENDPOINT` set, Cairn's spans exported over OTLP/HTTP.
fn init_telemetry(format: LogFormat) -> Telemetry {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{Layer as _, fmt};
    let logs = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => directives.parse::<Targets>().unwrap_or_else(|error| {
            eprintln!("warning: RUST_LOG={directives:?} is not understood ({error}); logging at info");
            Targets::new().with_default(tracing::Level::INFO)
        }),
        _ => Targets::new().with_default(tracing::Level::INFO),
    };
    let text = matches!(format, LogFormat::Text).then(|| fmt::layer().with_writer(std::io::stderr));
    let json = matches!(format, LogFormat::Json).then(|| fmt::layer().json().with_writer(std::io::stderr));
    let registry = tracing_subscriber::registry().with(text.with_filter(logs.clone())).with(json.with_filter(logs));
    #[cfg(feature = "otlp")]
    {
        let (layer, exporter) = match otlp::start() {
            Ok(Some((layer, exporter))) => {
                let spans = Targets::new().with_target("cairn", tracing::Level::DEBUG);
                (Some(layer.with_filter(spans)), Some(exporter))
            }
            Ok(None) => (None, None),
            Err(error) => {
                eprintln!("warning: {error}; spans are not exported");
                (None, None)
            }
        };
        registry.with(layer).init();
        Telemetry { _exporter: exporter }
    }
    #[cfg(not(feature = "otlp"))]
    {
        registry.init();
        let asked = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
            .into_iter()
            .find(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()));
        if let Some(name) = asked {
            eprintln!(
                "warning: {name} is set, but this cairn was built without OTLP export; spans are not exported \
                 (build with `--features otlp`)"
            );
        }
        Telemetry {}
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let telemetry = init_telemetry(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Runs { command } => backend::run(command).await,
            Command::Events { command } => backend::run(command).await,
            Command::Schedules { command } => backend::run(command).await,
            Command::Workers(args) => backend::run(args).await,
            Command::Workflows(args) => backend::run(args).await,
            Command::Demo { store } => demo::run(&store).await,
            Command::Serve(args) => serve::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::BenchWorker(args) => bench::worker(args).await,
        }
    });
    // The runtime first (its tasks end), then the spans still waiting are sent.
    drop(runtime);
    #[cfg(feature = "otlp")]
    drop(telemetry);
    #[cfg(not(feature = "otlp"))]
    let Telemetry {} = telemetry;
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // `{:#}`: the error and its causes, `: `-separated; ours print each cause once.
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
