//! SQLite disk use stays bounded: the WAL file gives its space back once writes stop, and the
//! database file reuses the space that pruning freed instead of growing with every batch of runs.
//! A read-only open writes nothing at all.

use cairn_journal::{Event, Timestamp};
use cairn_sqlite::*;
use cairn_store::*;
use serde_json::value::RawValue;
use std::path::Path;
use std::time::Duration;

/// Creates `count` runs with 4 KiB inputs, each kept for 1 ms once ended, and cancels them all.
async fn write_ended_runs(store: &SqliteStore, round: u32, count: u32) {
    let input = RawValue::from_string(format!("{{\"pad\":\"{}\"}}", "x".repeat(4096))).unwrap();
    for i in 0..count {
        let id = RunId::new(format!("r{round}-{i}"));
        let mut run = NewRun::new(
            id.clone(),
            cairn_store::WorkflowName::new("order").expect("a valid name"),
            1,
            input.clone(),
            Timestamp::from_millis(1),
        );
        run.retention = Some(Duration::from_millis(1));
        store.create_run(run).await.unwrap();
        let at = Timestamp::from_millis(2);
        store.cancel(ControlRequest { run_id: id, reason: "test".into(), at, lease_now: at }).await.unwrap();
    }
}

async fn prune_all(store: &SqliteStore) -> usize {
    let mut deleted = 0;
    loop {
        let request = PruneRequest {
            now: Timestamp::from_millis(1_000),
            ended_before: None,
            events_before: None,
            limit: 1_000,
            dry_run: false,
        };
        let batch = store.prune(request).await.unwrap().len();
        if batch == 0 {
            return deleted;
        }
        deleted += batch;
    }
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Waits (up to a minute, polling) for the WAL file to be truncated: the store's checkpoint
/// thread does it once the writer has been idle for a tick.
async fn wal_emptied(wal: &Path) -> u64 {
    for _ in 0..600 {
        if size(wal) == 0 {
            return 0;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    size(wal)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_shrinks_once_writes_stop_and_pruned_space_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let wal = dir.path().join("cairn.db-wal");
    let store = SqliteStore::open(&db).unwrap();

    write_ended_runs(&store, 1, 2_000).await;
    assert!(size(&wal) > 0, "the burst went through the WAL");
    assert_eq!(wal_emptied(&wal).await, 0, "the WAL keeps its high-water size after writes stopped");
    assert_eq!(prune_all(&store).await, 2_000);
    assert_eq!(wal_emptied(&wal).await, 0);
    let after_first = size(&db);
    assert!(after_first > 2_000 * 4_096, "the first round's runs were written to the database file");

    for round in 2..=4 {
        write_ended_runs(&store, round, 2_000).await;
        assert_eq!(prune_all(&store).await, 2_000);
        assert_eq!(wal_emptied(&wal).await, 0);
    }
    let after_four = size(&db);
    assert!(
        after_four <= after_first + after_first / 10,
        "the database grew from {after_first} to {after_four} bytes over rounds that each freed what they wrote"
    );
}

/// A run that was running when its file was written by schema 24 (before `run_heads`, migration
/// 25) keeps its journal's end through the upgrade: its worker appends on where it left off, and
/// a read shows the steps it took after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_written_before_heads_goes_on_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let at = Timestamp::from_millis;
    let id = RunId::new("r1");
    let step = |name: &str| Event::StepCompleted {
        path: cairn_journal::StepPath::parse(name).unwrap(),
        ordinal: 0,
        attempt: 1,
        output: RawValue::from_string("1".into()).unwrap(),
        started_at: None,
    };
    let append = |run: &RunRecord, name: &str| Append {
        run_id: run.id.clone(),
        epoch: run.epoch,
        after_seq: run.last_seq,
        events: vec![step(name)],
        at: at(20),
        update: RunUpdate::Progress,
        consume_signal: None,
        batched: false,
    };
    let held = {
        let store = SqliteStore::open(&path).unwrap();
        let workflow = cairn_store::WorkflowName::new("order").unwrap();
        let input = RawValue::from_string("{}".into()).unwrap();
        store.create_run(NewRun::new(id.clone(), workflow.clone(), 1, input, at(1))).await.unwrap();
        let claim = ClaimRequest {
            owner: "w1".into(),
            workflows: vec![WorkflowKey { name: workflow.into_string(), version: 1 }],
            now: at(10),
            lease_now: at(10),
            lease_until: at(1_000_000),
            limit: 1,
        };
        let run = store.claim(&claim).await.unwrap().remove(0);
        store.append(append(&run, "a")).await.unwrap();
        store.get_run(&id).await.unwrap().unwrap()
    };
    // What schema 24 left on disk: the journal's end in the run's row, and no heads.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "UPDATE runs SET last_seq = (SELECT last_seq FROM run_heads h WHERE h.id = runs.id)
                 WHERE id IN (SELECT id FROM run_heads);
             DROP TABLE run_heads; PRAGMA user_version = 24;",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.get_run(&id).await.unwrap().unwrap().last_seq, held.last_seq);
    store.append(append(&held, "b")).await.expect("the worker goes on after the upgrade");
    let read = store.get_run(&id).await.unwrap().unwrap();
    assert_eq!((read.status, read.last_seq), (RunStatus::Running, held.last_seq + 1));
    assert_eq!(store.read_journal(&id).await.unwrap().len() as u64, read.last_seq);
}

/// A file written before migrations 6 (subscriptions), 7 (status indexes), 8 (parents), 9
/// (continuations), 10 (schedules), 11 (concurrency limits), 12 (their triggers only with a rule), 13
/// (priority with fairness), 14 (rate limits), 15 (debounce), 18 (status indexes over unended
/// runs only), 19 (served versions), 20 (the index of inputs) and 21 (that index kept by the
/// store on insert) opens, is brought up to date in place, and keeps its runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_from_an_older_schema_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        write_ended_runs(&store, 0, 3).await;
    }
    // What schema 5 left on disk: none of 6's to 20's tables, indexes, triggers and columns, the
    // status indexes over every run that 18 replaced, and the flags that 24 replaced.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TRIGGER run_inputs_delete; DROP TRIGGER run_inputs_update;
             DROP TABLE run_inputs; UPDATE runs SET input = '{\"shard\": 1}';
             DROP TABLE subscriptions; DROP INDEX runs_failed; DROP INDEX runs_cancelled; DROP INDEX runs_paused;
             DROP INDEX runs_parent; ALTER TABLE runs DROP COLUMN parent; ALTER TABLE runs DROP COLUMN continued_from;
             ALTER TABLE runs DROP COLUMN continued_as; DROP TABLE schedules;
             DROP TRIGGER flow_admit; DROP VIEW flow_admit;
             DROP INDEX runs_ready; DROP INDEX runs_fair; DROP TABLE rate_grants; DROP INDEX runs_waiting; DROP TABLE concurrency_rules; DROP TABLE concurrency_slots;
             ALTER TABLE runs DROP COLUMN flow_key; ALTER TABLE runs DROP COLUMN flow_hold;
             ALTER TABLE runs DROP COLUMN waiting_for; ALTER TABLE runs DROP COLUMN priority;
             ALTER TABLE runs DROP COLUMN fair_key; ALTER TABLE runs DROP COLUMN fair_seq;
             DROP INDEX runs_debouncing; ALTER TABLE runs DROP COLUMN debounce_key;
             ALTER TABLE runs DROP COLUMN debounce_until;
             DROP INDEX runs_timer; DROP INDEX runs_leased; DROP INDEX runs_open;
             CREATE INDEX runs_wake ON runs(status, wake_at); CREATE INDEX runs_lease ON runs(status, lease_expires_at);
             DROP TABLE served_workflows; DROP TABLE events;
             ALTER TABLE runs DROP COLUMN request; ALTER TABLE runs DROP COLUMN request_reason;
             ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE runs ADD COLUMN pause_requested INTEGER NOT NULL DEFAULT 0;
             PRAGMA user_version = 5;",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let cancelled =
        RunFilter { workflow: Some("order".into()), status: Some(RunStatus::Cancelled), ..RunFilter::default() };
    assert_eq!(store.list_runs(&cancelled).await.unwrap().runs.len(), 3, "the runs are all there");
    let by_input = RunFilter { input_contains: Some(serde_json::json!({"shard": 1})), ..RunFilter::default() };
    assert_eq!(store.list_runs(&by_input).await.unwrap().runs.len(), 3, "the runs' inputs are indexed");
    let subscription = Subscription { workflow: "order".into(), pattern: "shop.*".into(), version: 1 };
    let declared = SetSubscriptions { workflows: vec!["order".into()], subscriptions: vec![subscription.clone()] };
    store.set_subscriptions(&declared).await.unwrap();
    assert_eq!(store.subscriptions().await.unwrap(), [subscription]);
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    let indexes: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index'
             AND name IN ('runs_failed', 'runs_cancelled', 'runs_paused', 'runs_parent', 'runs_ready', 'runs_waiting',
                          'runs_fair', 'runs_debouncing', 'runs_timer', 'runs_leased', 'runs_open')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let gone: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('runs_wake', 'runs_lease')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!((version, indexes, gone), (25, 11, 0));
    // The payloads come last in the row (migration 23), so a list that reads neither never walks
    // their overflow pages to reach the columns it shows.
    let mut columns = conn.prepare("SELECT name FROM pragma_table_info('runs')").unwrap();
    let columns: Vec<String> = columns.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(columns[columns.len() - 2..], ["input", "output"], "{columns:?}");
    assert!(!columns.iter().any(|c| c.ends_with("_requested")), "migration 24 replaced the flags: {columns:?}");
    // The store writes an inserted run's index rows itself; triggers keep them on delete and update.
    let mut triggers = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'run_inputs%' ORDER BY name")
        .unwrap();
    let triggers: Vec<String> = triggers.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(triggers, ["run_inputs_delete", "run_inputs_update"]);
    // The registry of served versions starts with those of the runs already there.
    let served: (String, i64) =
        conn.query_row("SELECT name, version FROM served_workflows", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(served, ("order".to_owned(), 1));
    // The status list goes through its partial index.
    let plan: String = conn
        .query_row(
            "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE workflow = 'order' AND status = 'cancelled'
             ORDER BY created_at DESC, id DESC LIMIT 10",
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("runs_cancelled"), "{plan}");
}

/// The statements that read runs by an unended status find them in the partial indexes that
/// hold only unended runs (migration 18), never by scanning every run: the counts and the lists
/// of pending, running and suspended runs read `runs_open`, the claim and the next wake-up
/// `runs_timer` and `runs_leased`. Checked on the plans of the very statements the store ran
/// (its statement counts keep their text), with a store full of ended runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unended_status_queries_read_their_partial_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plans.db");
    let options = SqliteOptions { count_statements: true, ..SqliteOptions::default() };
    let store = SqliteStore::open_with(&path, options).unwrap();
    write_ended_runs(&store, 0, 20).await;
    let key = WorkflowKey { name: "order".into(), version: 1 };
    let counts = store.statements().unwrap();
    counts.reset();
    store.version_counts().await.unwrap();
    store.workflow_counts().await.unwrap();
    store.next_wake_at(std::slice::from_ref(&key)).await.unwrap();
    for status in [RunStatus::Pending, RunStatus::Running, RunStatus::Suspended] {
        for workflow in [None, Some("order".to_owned())] {
            store.list_runs(&RunFilter { workflow, status: Some(status), ..RunFilter::default() }).await.unwrap();
        }
    }
    let at = Timestamp::from_millis(5);
    let claim = ClaimRequest {
        owner: "w".into(),
        workflows: vec![key],
        now: at,
        lease_now: at,
        lease_until: Timestamp::from_millis(10),
        limit: 8,
    };
    assert!(store.claim(&claim).await.unwrap().is_empty(), "every run has ended");

    let conn = rusqlite::Connection::open(&path).unwrap();
    let plan = |sql: &str| -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let nulls = std::iter::repeat_n(rusqlite::types::Null, stmt.parameter_count());
        let rows = stmt.query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3)).unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    };
    let mut checked = 0;
    for sql in counts.snapshot().keys().filter(|sql| sql.contains("FROM runs")) {
        let plan = plan(sql);
        let wanted: &[&str] = if sql.contains("count(*)") || sql.contains("ORDER BY created_at DESC") {
            &["runs_open"]
        } else if sql.contains("min(wake_at)") {
            &["runs_timer"]
        } else if sql.starts_with("UPDATE runs SET status = 'running'") {
            &["runs_ready", "runs_timer", "runs_leased"]
        } else {
            continue;
        };
        for index in wanted {
            assert!(
                plan.contains(&format!("USING INDEX {index}")) || plan.contains(&format!("COVERING INDEX {index}")),
                "{sql}\nreads {index}: {plan}"
            );
        }
        assert!(
            !plan.contains("SCAN runs") || plan.contains("SCAN runs USING INDEX runs_ready"),
            "{sql}\nscans: {plan}"
        );
        checked += 1;
    }
    // Two counts, the next wake-up, six lists and the claim.
    assert_eq!(checked, 10, "{:#?}", counts.snapshot().keys().collect::<Vec<_>>());
}

/// The database's files as bytes: the database and its WAL, if any (not the shared-memory
/// index, where readers take their read locks).
fn files_of(path: &Path) -> Vec<Option<Vec<u8>>> {
    ["", "-wal"]
        .iter()
        .map(|suffix| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            std::fs::read(name).ok()
        })
        .collect()
}

/// A read-only open reads everything and writes nothing, not a byte of the database or its WAL
/// (opening for writing, the control, does write); a write through it fails and changes nothing;
/// a database a newer build must migrate first is refused rather than migrated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_opens_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("written.db");
    let input = RawValue::from_string("{\"n\":1}".into()).unwrap();
    let store = SqliteStore::open(&written).unwrap();
    let run = NewRun::new(
        RunId::new("r1"),
        cairn_store::WorkflowName::new("order").expect("a valid name"),
        1,
        input.clone(),
        Timestamp::from_millis(1),
    );
    store.create_run(run).await.unwrap();
    // A copy no other connection touches (the store's threads close theirs in their own time).
    let path = dir.path().join("cairn.db");
    let copy = format!("VACUUM INTO '{}'", path.display());
    rusqlite::Connection::open(&written).unwrap().execute_batch(&copy).unwrap();
    drop(store);
    let before = files_of(&path);
    {
        let store = SqliteStore::open_read_only(&path).unwrap();
        let run = store.get_run(&RunId::new("r1")).await.unwrap().expect("the run");
        assert_eq!(run.input.get(), "{\"n\":1}");
        assert_eq!(store.list_runs(&RunFilter::default()).await.unwrap().runs.len(), 1);
        let refused = NewRun::new(
            RunId::new("r2"),
            cairn_store::WorkflowName::new("order").expect("a valid name"),
            1,
            input.clone(),
            Timestamp::from_millis(2),
        );
        let error = store.create_run(refused).await.unwrap_err().to_string();
        assert!(error.contains("readonly"), "{error}");
    }
    assert_eq!(files_of(&path), before, "a read-only open changed the database's files");
    drop(SqliteStore::open(&path).unwrap());
    assert_ne!(files_of(&path), before, "the control: opening for writing writes");

    assert!(!SqliteStore::needs_migrating(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA user_version = 1").unwrap();
    drop(conn);
    assert!(SqliteStore::needs_migrating(&path).unwrap());
    let error = SqliteStore::open_read_only(&path).map(drop).expect_err("an old schema is refused").to_string();
    assert!(error.contains("needs migrating"), "{error}");
    let missing =
        SqliteStore::open_read_only(dir.path().join("absent.db")).map(drop).expect_err("a missing file").to_string();
    assert!(missing.contains("absent.db"), "{missing}");
    assert!(!dir.path().join("absent.db").exists(), "reading created the file");
}
