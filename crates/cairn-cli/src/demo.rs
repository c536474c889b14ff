//! `cairn demo`: a worker with three example workflows, run to completion with live progress.

use anyhow::Result;
use cairn::prelude::*;
use cairn::{Client, RunFilter, RunId, RunStatus, StartError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Pretend work: a short, visible delay.
async fn work(millis: u64) {
    tokio::time::sleep(Duration::from_millis(millis)).await;
}

#[derive(Serialize, Deserialize)]
struct Order {
    order: u32,
    amount: u32,
    card_declines: bool,
}

/// Reserve stock, charge the card, ship; if the charge fails for good, the saga releases the
/// stock (the reservation's compensation, a journaled step `undo-reserve-stock`).
async fn order_saga(ctx: Ctx, order: Order) -> Result<String, WorkflowError> {
    let order = &order;
    let done = ctx
        .saga(|ctx, saga| async move {
            let reserve = ctx.step("reserve-stock", || async {
                work(150).await;
                Ok::<_, StepError>(format!("res-{}", order.order))
            });
            saga.step(reserve, |_reservation: String| async {
                work(100).await;
                Ok::<_, StepError>(())
            })
            .await?;
            let charged = ctx
                .step("charge-card", || async {
                    work(200).await;
                    if order.card_declines { Err(StepError::terminal("card declined")) } else { Ok(order.amount) }
                })
                .retry(RetryPolicy::exponential().attempts(3).base(Duration::from_millis(200)))
                .await?;
            let tracking: String = ctx
                .step("ship", || async {
                    work(150).await;
                    Ok::<_, StepError>(format!("TRACK-{}", order.order))
                })
                .await?;
            Ok(format!("charged {charged}, shipped {tracking}"))
        })
        .await;
    match done {
        Err(WorkflowError::Compensated { error, undone }) => {
            Ok(format!("compensated: {error}; undid {}", undone.join(", ")))
        }
        other => other,
    }
}

/// Process items concurrently, then add up.
async fn fan_out(ctx: Ctx, items: u64) -> Result<u64, WorkflowError> {
    let parts = (0..items).map(|i| {
        ctx.step(&format!("square[{i}]"), move || async move {
            work(100 + 40 * i).await;
            Ok::<_, StepError>(i * i)
        })
    });
    let squares = futures::future::try_join_all(parts).await?;
    ctx.step("sum", || async { Ok::<_, StepError>(squares.iter().sum::<u64>()) }).await
}

/// Prepare, sleep durably, then wait for someone to approve.
async fn approval(ctx: Ctx, request: String) -> Result<String, WorkflowError> {
    ctx.step("prepare", || async {
        work(100).await;
        Ok::<_, StepError>(())
    })
    .await?;
    ctx.sleep("cool-down", Duration::from_secs(2)).await?;
    let verdict: Option<String> = ctx.wait_for_event("approve", EventFilter::any(), Duration::from_secs(3600)).await?;
    Ok(match verdict {
        Some(by) => format!("{request} approved by {by}"),
        None => format!("{request} timed out"),
    })
}

/// The demo's runs: (id suffix, workflow, input).
fn plan() -> Vec<(String, &'static str, serde_json::Value)> {
    let mut runs = Vec::new();
    for (i, declines) in [(1, false), (2, false), (3, true), (4, false)] {
        let order = Order { order: i, amount: 10 * i, card_declines: declines };
        runs.push((format!("order-{i}"), "order-saga", serde_json::to_value(order).unwrap_or_default()));
    }
    runs.push(("fan-out-1".into(), "fan-out", serde_json::json!(6)));
    runs.push(("fan-out-2".into(), "fan-out", serde_json::json!(4)));
    runs.push(("approval-1".into(), "approval", serde_json::json!("expense #1")));
    runs.push(("approval-2".into(), "approval", serde_json::json!("expense #2")));
    runs
}

/// The batch to work on: the newest demo batch if unfinished, else a new one.
async fn choose_batch(client: &Client) -> Result<(u32, bool)> {
    let mut newest: Option<(u32, bool)> = None;
    let mut filter = RunFilter { limit: Some(1000), ..RunFilter::default() };
    loop {
        let page = client.list(&filter).await?;
        for run in &page.runs {
            let Some(rest) = run.id.as_str().strip_prefix("demo-") else { continue };
            let Some(batch) = rest.split('-').next().and_then(|b| b.parse::<u32>().ok()) else { continue };
            let unfinished = !run.status.is_terminal();
            newest = Some(match newest {
                Some((b, u)) if b > batch => (b, u),
                Some((b, u)) if b == batch => (b, u || unfinished),
                _ => (batch, unfinished),
            });
        }
        match page.next_cursor {
            Some(cursor) => filter.cursor = Some(cursor),
            None => break,
        }
    }
    Ok(match newest {
        Some((batch, true)) => (batch, true),
        Some((batch, false)) => (batch + 1, false),
        None => (1, false),
    })
}

pub(crate) async fn run(store_args: &crate::store_args::StoreArgs) -> Result<()> {
    let store = store_args.open_worker().await?;
    let place = store_args.describe();
    let engine = Engine::builder()
        .shared_store(store)
        .lease_duration(Duration::from_secs(3))
        .register("order-saga", 1, order_saga)
        .register("fan-out", 1, fan_out)
        .register("approval", 1, approval)
        .start()
        .await?;
    let (batch, resuming) = choose_batch(&engine.client()).await?;
    if resuming {
        out!("resuming demo batch {batch} from {place} (runs a killed worker held resume when its lease expires)");
    } else {
        out!("starting demo batch {batch} in {place}");
    }
    let mut ids = Vec::new();
    for (suffix, workflow, input) in plan() {
        let id = format!("demo-{batch}-{suffix}");
        let handle = engine.client().start(workflow, &input).id(id.clone()).idempotency_key(id.clone()).await;
        let handle = match handle {
            Ok(handle) => handle,
            Err(StartError::DuplicateRunId(_)) => {
                ids.push((RunId::new(id), workflow));
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        out!("  {} {:<10} {}", if handle.created() { "started" } else { "found  " }, workflow, handle.id());
        ids.push((handle.id().clone(), workflow));
    }

    let mut reported = std::collections::HashSet::new();
    let mut last_line = String::new();
    // A bar on a terminal; the `progress:` lines otherwise.
    let mut bar =
        Some(crate::progress::Progress::new("demo", "runs done", Some(ids.len() as u64))).filter(|p| p.is_bar());
    let stop = cairn_http::stop_requested();
    tokio::pin!(stop);
    loop {
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut done = 0;
        for (id, workflow) in &ids {
            let run = engine.client().get(id).await?;
            *counts.entry(run.status.as_str()).or_default() += 1;
            if *workflow == "approval" && run.status == RunStatus::Suspended {
                let signals = engine.client().signals(id).await?;
                if run.suspend_reason == Some(cairn::SuspendReason::Waiting)
                    && signals.iter().all(|s| s.name != "approve")
                {
                    engine.client().signal(id, "approve", &"the demo").await?;
                    out!("  signal  approve    {id}");
                }
            }
            if run.status.is_terminal() {
                done += 1;
                if reported.insert(id.clone()) {
                    let outcome = match &run.output {
                        Some(output) => output.get().to_owned(),
                        None => run.error.clone().unwrap_or_default(),
                    };
                    out!("  {:<9} {:<10} {id}: {outcome}", run.status.as_str(), workflow);
                }
            }
        }
        let line = counts.iter().map(|(status, n)| format!("{n} {status}")).collect::<Vec<_>>().join(", ");
        if line != last_line {
            match &mut bar {
                Some(bar) => bar.set(done as u64),
                None => out!("progress: {line}"),
            }
            last_line = line;
        }
        if done == ids.len() {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
            () = &mut stop => {
                out!("stopping: steps in flight finish (up to 30 s), then every run is handed back; run the demo again to resume");
                engine.shutdown().await;
                return Ok(());
            }
        }
    }
    if let Some(bar) = bar {
        bar.finish();
    }
    engine.shutdown().await;
    out!("all {} demo runs are done; inspect them with `cairn runs list` (same store options)", ids.len());
    Ok(())
}
