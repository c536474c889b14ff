//! W1 and W2 through the HTTP API of a running `cairn serve`.

use super::args::*;
use super::stats::*;
use anyhow::{Result, bail};
use cairn_api::Operations;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs in flight at once over HTTP (each holds a connection while it waits for its result).
pub(super) const HTTP_CONCURRENCY: usize = 256;

/// W1 or W2 against a server: starts and results over the API.
pub(super) async fn http_bench(args: &BenchArgs, url: &str, runs: usize, steps: usize) -> Result<()> {
    let remote = Arc::new(cairn_client::Client::new(url, args.token.clone())?);
    let one = move |remote: Arc<cairn_client::Client>| async move {
        let begun = Instant::now();
        let input = serde_json::value::RawValue::from_string(steps.to_string())?;
        let options = cairn_client::StartOptions { input: Some(input), ..Default::default() };
        let started = remote.start("noop", &options).await?;
        let run = remote.result(&started.run.id, Duration::from_secs(300)).await?;
        if run.listed.run.status != "completed" {
            bail!("run {} ended {}: {:?}", run.listed.run.id, run.listed.run.status, run.listed.run.error);
        }
        Ok::<_, anyhow::Error>(begun.elapsed().as_secs_f64() * 1e3)
    };
    let name = args.workload.name();
    let mut progress = crate::progress::Progress::new(format!("{name} over HTTP"), "runs", Some(runs as u64));
    let started = Instant::now();
    let mut run_ms = Vec::with_capacity(runs);
    if args.workload == Workload::W2 {
        for _ in 0..runs {
            run_ms.push(one(Arc::clone(&remote)).await?);
            progress.add(1);
        }
    } else {
        let limit = Arc::new(tokio::sync::Semaphore::new(HTTP_CONCURRENCY));
        let tasks: Vec<_> = (0..runs)
            .map(|_| {
                let (remote, limit) = (Arc::clone(&remote), Arc::clone(&limit));
                tokio::spawn(async move {
                    let _permit = limit.acquire_owned().await?;
                    one(remote).await
                })
            })
            .collect();
        for task in tasks {
            run_ms.push(task.await??);
            progress.add(1);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    progress.finish();
    let steps_total = runs * steps;
    let run_sorted = sorted(run_ms);
    let report = serde_json::json!({
        "workload": name,
        "store": "http",
        "url": url,
        "runs": runs,
        "steps": steps_total,
        "seconds": seconds,
        "runs_per_sec": runs as f64 / seconds,
        "steps_per_sec": steps_total as f64 / seconds,
        "run_ms_p50": percentile(&run_sorted, 50.0),
        "run_ms_p99": percentile(&run_sorted, 99.0),
        "step_overhead_us_p50": percentile(&run_sorted, 50.0) * 1e3 / steps as f64,
        "concurrency": if args.workload == Workload::W2 { 1 } else { HTTP_CONCURRENCY.min(runs) },
    });
    if text_wanted(args.json) {
        out!(
            "{name} over HTTP at {url}: {runs} runs x {steps} steps in {seconds:.3} s = {:.0} runs/s, {:.0} steps/s; run p50 {:.2} ms, p99 {:.2} ms",
            runs as f64 / seconds,
            steps_total as f64 / seconds,
            percentile(&run_sorted, 50.0),
            percentile(&run_sorted, 99.0),
        );
    }
    if args.json {
        out!("{report}");
    }
    Ok(())
}
