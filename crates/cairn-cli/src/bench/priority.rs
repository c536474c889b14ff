//! `cairn bench priority`: claims from a deep queue over many priorities and fairness keys, and
//! the plans of claims.

use super::args::*;
use super::list::fill;
use super::stats::*;
use anyhow::{Result, bail};
use cairn::prelude::*;
use cairn::{SqliteStore, Store};
use std::sync::Arc;
use std::time::Instant;

/// The SQL store under a bench, to ask for the plan of its claim.
pub(super) struct ClaimPlan {
    pub(super) sqlite: Option<SqliteStore>,
    pub(super) postgres: Option<cairn_postgres::PostgresStore>,
}

impl ClaimPlan {
    pub(super) async fn explain(&self, request: &cairn::store::ClaimRequest) -> Result<Vec<String>> {
        Ok(match (&self.sqlite, &self.postgres) {
            (Some(store), _) => store.explain_claim(request).await?,
            (_, Some(store)) => store.explain_claim(request).await?,
            _ => vec!["(the memory store has no query plan: a B-tree range in claim order)".to_owned()],
        })
    }
}

/// A claim now by the bench of up to `limit` runs of `workflow` v1, leased for `lease`.
pub(super) fn bench_claim(workflow: &str, limit: usize, lease: std::time::Duration) -> cairn::store::ClaimRequest {
    let now = cairn::Timestamp::from_system_time(std::time::SystemTime::now());
    cairn::store::ClaimRequest {
        owner: "bench".into(),
        workflows: vec![cairn::store::WorkflowKey { name: workflow.into(), version: 1 }],
        now,
        lease_now: now,
        lease_until: now + lease,
        limit,
    }
}

/// Prints a claim's plan, one indented line per step.
pub(super) fn print_plan(plan: &[String]) {
    for line in plan {
        out!("  {line}");
    }
}

/// The fairness key of the `n`th queued run of the priority workload: half are `tenant-0`'s, the
/// rest spread over `tenant-1` to `tenant-99`.
pub(super) fn bench_tenant(n: u64) -> String {
    if n.is_multiple_of(2) { "tenant-0".to_owned() } else { format!("tenant-{}", 1 + n % 99) }
}

/// The `priority` workload.
pub(super) async fn priority_bench(
    store: Arc<dyn Store>,
    plan: &ClaimPlan,
    runs: usize,
    (store_name, durability): (&str, &str),
    json: bool,
) -> Result<()> {
    const PRIORITIES: u64 = 10;
    const CLAIM: usize = 128;
    const CLAIMS: usize = 20;
    let client = Client::from_shared(Arc::clone(&store));
    let fill_seconds = fill("priority: queueing", runs, |n| {
        let client = client.clone();
        async move {
            let priority = (n * 7 % PRIORITIES) as i32;
            client.start("queued", &n).priority(priority).fairness_key(bench_tenant(n)).await.map(drop)
        }
    })
    .await?;
    let request = bench_claim("queued", CLAIM, std::time::Duration::from_secs(3600));
    let plan = plan.explain(&request).await?;
    let mut claim_ms = Vec::with_capacity(CLAIMS);
    let mut first = Vec::new();
    for i in 0..CLAIMS {
        let began = Instant::now();
        let claimed = store.claim(&request).await?;
        claim_ms.push(began.elapsed().as_secs_f64() * 1e3);
        if claimed.len() != CLAIM.min(runs.saturating_sub(i * CLAIM)) {
            bail!("claim {i} took {} runs", claimed.len());
        }
        if i == 0 {
            first = claimed;
        }
    }
    let top = (PRIORITIES - 1) as i32;
    let keys: std::collections::BTreeSet<&str> = first.iter().filter_map(|r| r.fairness_key.as_deref()).collect();
    if first.iter().any(|r| r.priority != top) {
        bail!("the first claim took runs below priority {top}");
    }
    let sorted_ms = sorted(claim_ms);
    let report = serde_json::json!({
        "workload": "priority",
        "store": store_name,
        "durability": durability,
        "queued": runs,
        "fill_seconds": fill_seconds,
        "claim": CLAIM,
        "claims": CLAIMS,
        "claim_ms_p50": percentile(&sorted_ms, 50.0),
        "claim_ms_max": sorted_ms.last().copied().unwrap_or(0.0),
        "first_claim_priority": top,
        "first_claim_keys": keys.len(),
        "plan": plan,
    });
    if text_wanted(json) {
        out!(
            "priority on {store_name} ({durability}): {runs} runs queued in {fill_seconds:.1} s; a claim of {CLAIM}: p50 {:.2} ms, max {:.2} ms over {CLAIMS}; the first took priority {top} only, from {} fairness keys; its plan:",
            percentile(&sorted_ms, 50.0),
            sorted_ms.last().copied().unwrap_or(0.0),
            keys.len()
        );
        print_plan(&plan);
    }
    if json {
        out!("{report}");
    }
    Ok(())
}
