//! A schedule firing every second, served by three worker processes on one PostgreSQL database:
//! one of them is SIGKILLed within 150 ms after firing times, again and again, then all three at once
//! across several firing times, and restarted. Every firing from the first to the last started
//! exactly one run (none lost, none doubled), every run completed with its step committed once,
//! and the execution log written by the step bodies shows each body ran once in the process that
//! committed it, again only where a process was killed with it in flight, and never in two
//! processes at the same time.

use crate::common::*;
use cairn::journal::Event;
use cairn::store::JournalStore;
use cairn::{Client, RunFilter, RunStatus, Schedule, Timestamp, schedule_run_id};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

const EVERY_MS: u64 = 1000;
const VICTIM_KILLS: usize = 4;

/// Sleeps until `offset_ms` after the next firing time.
async fn just_after_a_firing(offset_ms: u64) {
    let now = (now_micros() / 1000) as u64;
    let next = (now / EVERY_MS + 1) * EVERY_MS;
    tokio::time::sleep(Duration::from_millis(next - now + offset_ms)).await;
}

async fn all_runs(client: &Client) -> Vec<cairn::RunRecord> {
    let filter = RunFilter { workflow: Some("ticker".into()), limit: Some(1000), ..RunFilter::default() };
    client.list(&filter).await.unwrap().runs
}

pub(crate) async fn no_firing_lost_or_doubled_while_workers_are_killed() {
    let _slot = crate::common::slot().await;
    let Some((store, schema)) = postgres("schedules").await else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("steps.log");
    let mut rng = Rng::seeded();
    let client = Client::new(store.clone());
    let schedule = Schedule::every("tick", "ticker", Duration::from_millis(EVERY_MS)).input(&7u64).allow_unknown();
    let first = client.put_schedule(&schedule).await.unwrap().next_fire_at.unwrap();
    // Steps long enough that a killed worker has some in flight.
    let options = ["--schema", schema.name.as_str(), "--only", "ticker", "--pause-ms", "200"];
    let spawn_one = || spawn(&schema.url, &log, 0, &options);
    let mut workers: Vec<Worker> = (0..3).map(|_| spawn_one()).collect();
    let mut killed = HashMap::new();
    for _ in 0..VICTIM_KILLS {
        // Up across one firing, killed within 150 ms of the next: firing it, or running its step.
        just_after_a_firing(0).await;
        just_after_a_firing(rng.next(150)).await;
        let (pid, at) = kill(&mut workers[2]);
        killed.insert(pid, at);
        workers[2] = spawn_one();
    }
    // All three down across three firing times, then up again: the missed firings are started.
    just_after_a_firing(rng.next(40)).await;
    for worker in &mut workers {
        let (pid, at) = kill(worker);
        killed.insert(pid, at);
    }
    tokio::time::sleep(Duration::from_millis(3 * EVERY_MS + 200)).await;
    workers = (0..3).map(|_| spawn_one()).collect();
    tokio::time::sleep(Duration::from_millis(3 * EVERY_MS)).await;
    client.pause_schedule("tick").await.unwrap();
    // Let the workers finish what was started (a firing in flight as the pause landed included).
    let mut waited = 0;
    loop {
        let runs = all_runs(&client).await;
        if runs.iter().all(|r| r.status == RunStatus::Completed) && waited >= 10 {
            break;
        }
        assert!(waited < 3000, "runs did not finish: {:?}", runs.iter().map(|r| r.status).collect::<Vec<_>>());
        waited += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(workers);

    let last = client.schedule("tick").await.unwrap().last_fired_at.unwrap();
    let expected: BTreeSet<String> = (first.as_millis()..=last.as_millis())
        .step_by(EVERY_MS as usize)
        .map(|at| schedule_run_id("tick", Timestamp::from_millis(at)).to_string())
        .collect();
    let runs = all_runs(&client).await;
    let started: BTreeSet<String> = runs.iter().map(|r| r.id.to_string()).collect();
    assert_eq!(started.len(), runs.len());
    let lost: Vec<_> = expected.difference(&started).collect();
    let extra: Vec<_> = started.difference(&expected).collect();
    assert!(lost.is_empty() && extra.is_empty(), "lost firings {lost:?}, runs of no firing {extra:?}");
    assert!(expected.len() >= 10, "only {} firings", expected.len());

    let mut committed_by = HashMap::new();
    for run in &runs {
        assert_eq!(run.status, RunStatus::Completed, "{} is {} ({:?})", run.id, run.status, run.error);
        let output: u64 = serde_json::from_str(run.output.as_ref().unwrap().get()).unwrap();
        assert_eq!(output, 7, "output of {}", run.id);
        let journal = store.read_journal(&run.id).await.unwrap();
        let ticks: Vec<_> = journal
            .iter()
            .filter_map(|e| match &e.event {
                Event::StepCompleted { path, output, .. } if path.as_str() == "tick" => Some(output),
                _ => None,
            })
            .collect();
        assert_eq!(ticks.len(), 1, "{} committed its step {} times", run.id, ticks.len());
        let out: serde_json::Value = serde_json::from_str(ticks[0].get()).unwrap();
        committed_by.insert((run.id.to_string(), "tick".to_owned()), out["pid"].as_u64().unwrap() as u32);
    }
    let (reruns, logged) = check_executions(&log, &committed_by, &killed);
    assert_eq!(logged.into_iter().collect::<BTreeSet<_>>(), started, "every firing's step body ran");
    eprintln!("{} firings, {} kills, {reruns} step bodies re-ran after a kill", expected.len(), killed.len());
}
