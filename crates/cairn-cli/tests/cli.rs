//! The `cairn` binary against a real SQLite file: the JSON contract of `runs list`, signal, cancel,
//! error exits, and the demo running to completion.

use cairn::store::WorkerStore;
use cairn::{Client, RunId, SqliteStore};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn cairn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).output().unwrap()
}

fn stdout_json(output: &Output) -> Value {
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

async fn seed(db: &Path) {
    let client = Client::new(SqliteStore::open(db).unwrap());
    // No worker has served these: runs that wait for one (of a service deployed later).
    client.start("order", &serde_json::json!({ "n": 1 })).id("run-a").allow_unknown().await.unwrap();
    client.start("refund", &2).id("run-b").allow_unknown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_list_show_signal_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    seed(&db).await;
    let db = db.to_str().unwrap();

    let list = stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
    let runs = list.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        for field in ["id", "workflow", "status", "created_at", "completed_at"] {
            assert!(run.get(field).is_some(), "missing {field} in {run}");
        }
        assert_eq!(run["status"], "pending");
        assert!(run["completed_at"].is_null());
    }
    let orders = stdout_json(&cairn(&["runs", "list", "--db", db, "--json", "--workflow", "order"]));
    assert_eq!(orders.as_array().unwrap().len(), 1);
    assert_eq!(orders[0]["id"], "run-a");

    let table = cairn(&["runs", "list", "--db", db]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.starts_with("ID") && text.contains("run-a") && text.contains("pending"), "{text}");

    let signal = stdout_json(&cairn(&["runs", "signal", "run-a", "approve", r#"{"by":"cli"}"#, "--db", db, "--json"]));
    assert_eq!(signal["event"], "approve");
    let shown = stdout_json(&cairn(&["runs", "show", "run-a", "--db", db, "--json"]));
    assert_eq!(shown["run"]["input"]["n"], 1);
    assert_eq!(shown["signals"][0]["payload"]["by"], "cli");
    assert!(shown["signals"][0]["consumed_seq"].is_null(), "buffered until a wait consumes it");
    assert_eq!(shown["journal"][0]["event"]["started"]["workflow"], "order");

    let cancel = stdout_json(&cairn(&["runs", "cancel", "run-b", "--db", db, "--json"]));
    assert_eq!(cancel["outcome"], "cancelled");
    let cancelled = stdout_json(&cairn(&["runs", "list", "--db", db, "--json", "--status", "cancelled"]));
    assert_eq!(cancelled[0]["id"], "run-b");
    assert!(cancelled[0]["completed_at"].is_string());

    // Bad input: clear errors, non-zero exits, nothing stored.
    let again = cairn(&["runs", "cancel", "run-b", "--db", db]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("CAIRN-E0303"));
    let missing = cairn(&["runs", "show", "nope", "--db", db]);
    assert!(!missing.status.success());
    let bad_payload = cairn(&["runs", "signal", "run-a", "x", "{not json", "--db", db]);
    assert!(!bad_payload.status.success());
    let bad_status = cairn(&["runs", "list", "--db", db, "--status", "sleeping"]);
    assert!(!bad_status.status.success());
    let no_db = cairn(&["runs", "list", "--db", dir.path().join("absent.db").to_str().unwrap()]);
    assert!(!no_db.status.success());
    assert!(!dir.path().join("absent.db").exists(), "listing must not create a database");
    let client = Client::new(SqliteStore::open(db).unwrap());
    assert_eq!(client.signals(&RunId::new("run-a")).await.unwrap().len(), 1);
}

#[test]
fn the_demo_runs_to_completion_and_a_second_start_begins_a_new_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let db = db.to_str().unwrap();
    let first = cairn(&["demo", "--db", db]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let text = String::from_utf8(first.stdout).unwrap();
    assert!(text.contains("all 8 demo runs are done"), "{text}");
    let runs = stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 8);
    assert!(runs.iter().all(|r| r["status"] == "completed"), "{runs:?}");
    let compensated = runs.iter().find(|r| r["id"] == "demo-1-order-3").unwrap();
    assert_eq!(compensated["status"], "completed");
    let second = cairn(&["demo", "--db", db]);
    assert!(second.status.success());
    assert!(String::from_utf8(second.stdout).unwrap().contains("starting demo batch 2"));
}

/// Output into a closed pipe (`cairn runs list | head -0`) ends the command quietly, not with a
/// panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    seed(&db).await;
    let (reader, writer) = std::io::pipe().unwrap();
    // Closed before the command starts: its first write fails with a broken pipe.
    drop(reader);
    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["runs", "list", "--db", db.to_str().unwrap()])
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "status {:?}, stderr: {stderr}", output.status);
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}

/// `runs pause` and `runs resume`: the JSON contract, and bad input (unknown id, wrong state)
/// that exits non-zero and leaves the store as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_pause_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    seed(&db).await;
    let db = db.to_str().unwrap();
    let row = |id: &str| {
        let list = stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
        list.as_array().unwrap().iter().find(|r| r["id"] == id).unwrap().clone()
    };

    let paused = stdout_json(&cairn(&["runs", "pause", "run-a", "--db", db, "--json"]));
    assert_eq!(paused, serde_json::json!({ "run": "run-a", "outcome": "paused" }));
    let listed = row("run-a");
    assert_eq!((listed["status"].as_str(), listed["error"].as_str()), (Some("paused"), Some("paused by request")));
    assert_eq!(listed["pause_requested"], false);
    let again = stdout_json(&cairn(&["runs", "pause", "run-a", "--db", db, "--json"]));
    assert_eq!(again["outcome"], "paused");
    let text = cairn(&["runs", "pause", "run-a", "--db", db]);
    assert_eq!(String::from_utf8(text.stdout).unwrap().trim(), "run-a paused");

    let resumed = stdout_json(&cairn(&["runs", "resume", "run-a", "--db", db, "--json"]));
    assert_eq!(resumed, serde_json::json!({ "run": "run-a", "outcome": "resumed" }));
    let listed = row("run-a");
    assert_eq!((listed["status"].as_str(), listed["error"].as_str()), (Some("pending"), None));

    // Wrong state: resuming a run that is not paused; pausing a finished run; an unknown id.
    let before = stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
    let not_paused = cairn(&["runs", "resume", "run-a", "--db", db, "--json"]);
    assert!(!not_paused.status.success());
    assert!(String::from_utf8_lossy(&not_paused.stderr).contains("CAIRN-E0305"));
    stdout_json(&cairn(&["runs", "cancel", "run-b", "--db", db, "--json"]));
    let before_finished = stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
    let finished = cairn(&["runs", "pause", "run-b", "--db", db]);
    assert!(!finished.status.success());
    assert!(String::from_utf8_lossy(&finished.stderr).contains("CAIRN-E0303"));
    for verb in ["pause", "resume"] {
        let unknown = cairn(&["runs", verb, "nope", "--db", db]);
        assert!(!unknown.status.success());
        assert!(String::from_utf8_lossy(&unknown.stderr).contains("CAIRN-E0301"), "{verb}");
    }
    assert_eq!(stdout_json(&cairn(&["runs", "list", "--db", db, "--json"])), before_finished);
    assert_eq!(before.as_array().unwrap().len(), 2);
}

/// `runs show --json` exports a journal that `cairn::testing::replay` reads back and replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_journal_replays() {
    use cairn::prelude::*;
    use cairn::testing::{ReplayEnd, journal_from_json, replay};
    async fn add(ctx: Ctx, n: u32) -> Result<u32, WorkflowError> {
        let one: u32 = ctx.step("one", || async { Ok::<_, StepError>(1) }).await?;
        let two: u32 = ctx.step("two", || async { Ok::<_, StepError>(2) }).await?;
        Ok(n + one + two)
    }
    async fn renamed(ctx: Ctx, n: u32) -> Result<u32, WorkflowError> {
        let one: u32 = ctx.step("uno", || async { Ok::<_, StepError>(1) }).await?;
        Ok(n + one)
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("replay.db");
    let engine =
        Engine::builder().store(SqliteStore::open(&db).unwrap()).register("add", 1, add).start().await.unwrap();
    let run = engine.client().start("add", &4u32).id("run-r").await.unwrap();
    assert_eq!(run.result::<u32>().await.unwrap(), 7);
    engine.shutdown().await;
    let output = cairn(&["runs", "show", "run-r", "--db", db.to_str().unwrap(), "--json"]);
    assert!(output.status.success());
    let journal = journal_from_json(&String::from_utf8(output.stdout).unwrap()).unwrap();
    assert_eq!(journal.len(), 4);
    let report = replay(&journal, add).await.unwrap();
    assert!(matches!(&report.end, ReplayEnd::Returned(Ok(out)) if out.get() == "7"), "{report:?}");
    let error = replay(&journal, renamed).await.unwrap_err();
    assert!(error.to_string().contains("`one`"), "{error}");
}

/// `runs restart ID --from-step PATH`: the JSON contract, the link shown on both runs, and bad
/// input (unknown run, unknown step, a run that has not ended) that leaves the store unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_restart() {
    use cairn::prelude::*;
    async fn fails(ctx: Ctx, (): ()) -> Result<u32, WorkflowError> {
        ctx.step("ok", || async { Ok::<_, StepError>(1u32) }).await?;
        ctx.step("bad", || async { Err::<u32, _>(StepError::terminal("no")) }).await
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("restart.db");
    let engine =
        Engine::builder().store(SqliteStore::open(&db).unwrap()).register("fails", 1, fails).start().await.unwrap();
    let run = engine.client().start("fails", &()).id("run-f").await.unwrap();
    assert!(run.result::<u32>().await.is_err());
    engine.shutdown().await;
    seed(&db).await; // two pending runs: run-a, run-b
    let db = db.to_str().unwrap();

    let list = || stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
    let before = list();
    for (args, code) in [
        (vec!["nope", "--from-step", "ok"], "CAIRN-E0301"),
        (vec!["run-f", "--from-step", "missing"], "CAIRN-E0307"),
        (vec!["run-a", "--from-step", "ok"], "CAIRN-E0306"),
    ] {
        let output = cairn(&[&["runs", "restart"][..], &args, &["--db", db, "--json"]].concat());
        assert!(!output.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains(code), "{args:?}");
    }
    assert_eq!(list(), before, "bad restarts change nothing");

    let restarted = stdout_json(&cairn(&["runs", "restart", "run-f", "--from-step", "bad", "--db", db, "--json"]));
    assert_eq!((restarted["restarted_from"].as_str(), restarted["from_step"].as_str()), (Some("run-f"), Some("bad")));
    let new_id = restarted["run"].as_str().unwrap().to_owned();
    let shown = stdout_json(&cairn(&["runs", "show", &new_id, "--db", db, "--json"]));
    assert_eq!(shown["run"]["restarted_from"], "run-f");
    assert_eq!(shown["run"]["status"], "pending");
    let kinds: Vec<&str> = shown["journal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_object().unwrap().keys().next().unwrap().as_str())
        .collect();
    assert_eq!(kinds, ["started", "step_completed"], "the journal up to `bad`");
    let original = stdout_json(&cairn(&["runs", "show", "run-f", "--db", db, "--json"]));
    assert_eq!(original["run"]["restarts"], serde_json::json!([new_id]));
    let text = String::from_utf8(cairn(&["runs", "show", "run-f", "--db", db]).stdout).unwrap();
    assert!(text.contains(&format!("restarted as {new_id}")), "{text}");
}

/// `runs prune [--older-than D] [--dry-run] --json`: the contract, and bad input that changes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_prune() {
    use cairn::prelude::*;
    async fn quick(ctx: Ctx, (): ()) -> Result<u8, WorkflowError> {
        ctx.step("one", || async { Ok::<_, StepError>(1u8) }).await
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("prune.db");
    let engine = Engine::builder()
        .store(SqliteStore::open(&db).unwrap())
        .register("quick", 1, quick)
        .retention("quick", std::time::Duration::from_millis(1))
        .sweep_every(None)
        .start()
        .await
        .unwrap();
    engine.client().start("quick", &()).id("short").await.unwrap().result::<u8>().await.unwrap();
    engine.client().start("quick", &()).id("long").retention(std::time::Duration::from_secs(3600)).await.unwrap();
    engine.client().result::<u8>(&RunId::new("long")).await.unwrap();
    engine.shutdown().await;
    seed(&db).await; // two pending runs
    tokio::time::sleep(std::time::Duration::from_millis(5)).await; // past the 1 ms retention
    let db = db.to_str().unwrap();
    let list = || stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
    let before = list();
    assert_eq!(before.as_array().unwrap().len(), 4);

    let bad = cairn(&["runs", "prune", "--older-than", "soon", "--db", db, "--json"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--older-than"));
    let dry = stdout_json(&cairn(&["runs", "prune", "--dry-run", "--db", db, "--json"]));
    assert_eq!(dry, serde_json::json!({ "deleted": 0, "dry_run": true, "runs": ["short"] }));
    assert_eq!(list(), before, "bad input and dry runs change nothing");

    let pruned = stdout_json(&cairn(&["runs", "prune", "--db", db, "--json"]));
    assert_eq!(pruned, serde_json::json!({ "deleted": 1, "dry_run": false, "runs": ["short"] }));
    let older = stdout_json(&cairn(&["runs", "prune", "--older-than", "0s", "--db", db, "--json"]));
    assert_eq!(older["runs"], serde_json::json!(["long"]));
    let left: Vec<String> =
        list().as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(left.len(), 2, "the pending runs are kept: {left:?}");
    assert!(left.iter().all(|id| id.starts_with("run-")));
}

/// `cairn workers` and stranded runs in `runs list` / `runs show`: the JSON contract, with a live
/// worker in this process that serves version 2 of `order` while the seeded runs are version 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_and_stranded_runs() {
    use cairn::prelude::*;
    use cairn::store::{WorkerRecord, WorkflowKey};
    async fn order_v2(_ctx: Ctx, _input: Value) -> Result<u8, WorkflowError> {
        Ok(2)
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    seed(&db).await; // run-a: order v1, run-b: refund v1, both pending
    let engine =
        Engine::builder().store(SqliteStore::open(&db).unwrap()).register("order", 2, order_v2).start().await.unwrap();
    engine.client().start("order", &serde_json::json!({})).id("run-c").await.unwrap().result::<u8>().await.unwrap();
    let db = db.to_str().unwrap();

    let workers = stdout_json(&cairn(&["workers", "--db", db, "--json"]));
    let workers = workers.as_array().unwrap();
    assert_eq!(workers.len(), 1, "{workers:?}");
    let me = &workers[0];
    assert_eq!(me["id"], engine.worker_id());
    assert_eq!(me["pid"], std::process::id());
    assert_eq!(me["live"], true);
    assert_eq!(me["serves"], serde_json::json!([{ "workflow": "order", "version": 2 }]));
    for field in ["host", "started_at", "last_seen", "live_until"] {
        assert!(me[field].is_string(), "missing {field} in {me}");
    }
    let text = String::from_utf8(cairn(&["workers", "--db", db]).stdout).unwrap();
    assert!(text.starts_with("ID") && text.contains(engine.worker_id()) && text.contains("order@2"), "{text}");

    let all = stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
    let stranded = |id: &str| all.as_array().unwrap().iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(stranded("run-a")["stranded"], true);
    assert_eq!(
        stranded("run-a")["stranded_reason"],
        "no live worker serves version 1 of `order` (live workers serve version 2)"
    );
    assert_eq!(stranded("run-b")["stranded_reason"], "no live worker serves workflow `refund`");
    assert_eq!(stranded("run-c")["stranded"], false, "completed runs are never stranded");
    assert!(stranded("run-c")["stranded_reason"].is_null());
    let ids =
        |list: Value| list.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(ids(stdout_json(&cairn(&["runs", "list", "--stranded", "--db", db, "--json"]))), ["run-b", "run-a"]);
    let refunds = cairn(&["runs", "list", "--stranded", "--workflow", "refund", "--db", db, "--json"]);
    assert_eq!(ids(stdout_json(&refunds)), ["run-b"]);
    let table = String::from_utf8(cairn(&["runs", "list", "--stranded", "--db", db]).stdout).unwrap();
    assert!(table.contains("pending, stranded"), "{table}");
    let shown = stdout_json(&cairn(&["runs", "show", "run-a", "--db", db, "--json"]));
    assert_eq!(shown["run"]["stranded"], true);

    // A worker that stopped beating is listed only with --all, as not live.
    let now = cairn::Timestamp::from_system_time(std::time::SystemTime::now());
    let gone = WorkerRecord {
        id: "crashed-worker".into(),
        host: "elsewhere".into(),
        pid: 7,
        started_at: now - std::time::Duration::from_secs(90),
        last_seen: now - std::time::Duration::from_secs(60),
        live_until: now - std::time::Duration::from_secs(30),
        serves: vec![WorkflowKey { name: "refund".into(), version: 1 }],
    };
    engine.client().store().record_worker(&gone).await.unwrap();
    assert_eq!(stdout_json(&cairn(&["workers", "--db", db, "--json"])).as_array().unwrap().len(), 1);
    let every = stdout_json(&cairn(&["workers", "--all", "--db", db, "--json"]));
    assert_eq!(every[0]["id"], "crashed-worker");
    assert_eq!(every[0]["live"], false);
    let refunds = cairn(&["runs", "list", "--stranded", "--workflow", "refund", "--db", db, "--json"]);
    assert_eq!(ids(stdout_json(&refunds)), ["run-b"], "a dead worker serves nothing");

    // Bad input: clear errors, non-zero exits, nothing created.
    let absent = dir.path().join("absent.db");
    let no_db = cairn(&["workers", "--db", absent.to_str().unwrap()]);
    assert!(!no_db.status.success());
    assert!(String::from_utf8_lossy(&no_db.stderr).contains("no Cairn database"));
    assert!(!absent.exists(), "listing workers must not create a database");
    let bad_flag = cairn(&["workers", "--db", db, "--live"]);
    assert!(!bad_flag.status.success());

    // A worker that shuts down removes its record.
    engine.shutdown().await;
    let left = stdout_json(&cairn(&["workers", "--all", "--db", db, "--json"]));
    assert_eq!(ids(left), ["crashed-worker"]);
    let none = stdout_json(&cairn(&["runs", "list", "--stranded", "--db", db, "--json"]));
    assert_eq!(ids(none), ["run-b", "run-a"]);
}

/// A worker that starts warns once per stranded workflow version, with the run count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starting_worker_warns_about_stranded_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    seed(&db).await; // order v1 and refund v1: workflows the demo does not serve
    let demo = cairn(&["demo", "--db", db.to_str().unwrap()]);
    assert!(demo.status.success(), "{}", String::from_utf8_lossy(&demo.stderr));
    let stderr = String::from_utf8(demo.stderr).unwrap();
    for workflow in ["order", "refund"] {
        let warning = format!("1 run of `{workflow}` version 1 stranded: no live worker serves workflow `{workflow}`");
        assert_eq!(stderr.matches(&warning).count(), 1, "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_start_steps_and_workflows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.db");
    let db = path.to_str().unwrap();

    // A workflow no worker has ever served here is refused, unless the start says it means it.
    let refused = cairn(&["runs", "start", "order", "1", "--id", "o-0", "--db", db]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("unknown workflow `order`"), "{stderr}");
    let anyway =
        stdout_json(&cairn(&["runs", "start", "order", "1", "--id", "o-0", "--allow-unknown", "--db", db, "--json"]));
    assert_eq!((&anyway["version"], &anyway["status"]), (&1.into(), &"pending".into()));
    stdout_json(&cairn(&["runs", "cancel", "o-0", "--db", db, "--json"]));
    stdout_json(&cairn(&["runs", "prune", "--older-than", "0s", "--db", db, "--json"]));
    // Workers have served these here (and are gone): starts need no more, and get the newest.

    let store = SqliteStore::open(&path).unwrap();
    let served = |name: &str, version| cairn::store::WorkflowKey { name: name.into(), version };
    let at = cairn::Timestamp::from_millis(0);
    store.record_served(&[served("order", 1), served("order", 2), served("digest", 1)], at).await.unwrap();
    drop(store);

    let start = ["runs", "start", "order", r#"{"n":7}"#, "--id", "o-1", "--priority", "3", "--fairness-key", "acme"];
    let started = stdout_json(&cairn(&[&start[..], &["--db", db, "--json"]].concat()));
    assert_eq!(
        (&started["id"], &started["workflow"], &started["status"]),
        (&"o-1".into(), &"order".into(), &"pending".into())
    );
    assert_eq!((&started["created"], &started["version"]), (&true.into(), &2.into()), "the newest served");
    let shown = String::from_utf8(cairn(&["runs", "show", "o-1", "--db", db]).stdout).unwrap();
    assert!(shown.contains("priority  3, fairness key acme\n"), "{shown}");
    let keyed = ["runs", "start", "order", "1", "--idempotency-key", "k", "--version", "2", "--db", db, "--json"];
    let first = stdout_json(&cairn(&keyed));
    let again = stdout_json(&cairn(&keyed));
    assert_eq!((first["created"].clone(), again["created"].clone()), (true.into(), false.into()));
    assert_eq!((&first["id"], &first["version"]), (&again["id"], &2.into()));
    stdout_json(&cairn(&["runs", "cancel", "o-1", "--db", db, "--json"]));

    let workflows = stdout_json(&cairn(&["workflows", "--db", db, "--json"]));
    assert_eq!(
        workflows,
        serde_json::json!({"workflows": [
            {"name": "digest", "runs": {}, "total": 0, "versions": [1]},
            {"name": "order", "runs": {"cancelled": 1, "pending": 1}, "total": 2, "versions": [1, 2]},
        ]}),
        "every workflow served, runs or not, with its versions"
    );
    let table = String::from_utf8(cairn(&["workflows", "--db", db]).stdout).unwrap();
    assert!(table.starts_with("WORKFLOW") && table.contains("cancelled 1, pending 1"), "{table}");

    let steps = stdout_json(&cairn(&["runs", "steps", "o-1", "--db", db, "--json"]));
    assert_eq!(steps["run"], "o-1");
    assert_eq!(steps["steps"], serde_json::json!([]), "no step ran before the cancel");
    assert_eq!(steps["journal"].as_array().unwrap().len(), 2, "started, cancelled");

    // Debounced starts: the second joins the first, which waits for its key to be quiet.
    let debounced =
        |n: &'static str| ["runs", "start", "digest", n, "--debounce", "k", "--quiet", "1h", "--max-wait", "2h"];
    let first = String::from_utf8(cairn(&[&debounced("1")[..], &["--db", db]].concat()).stdout).unwrap();
    let joined = stdout_json(&cairn(&[&debounced("2")[..], &["--db", db, "--json"]].concat()));
    assert!(first.contains(" started: debouncing under key k;"), "{first}");
    assert_eq!((&joined["created"], &joined["waiting_for"]), (&false.into(), &"debounce".into()), "{joined}");
    let again = String::from_utf8(cairn(&[&debounced("3")[..], &["--db", db]].concat()).stdout).unwrap();
    assert!(
        again.starts_with(&format!("{} joined: debouncing under key k;", joined["id"].as_str().unwrap())),
        "{again}"
    );
    let listed = String::from_utf8(cairn(&["runs", "list", "--workflow", "digest", "--db", db]).stdout).unwrap();
    assert!(listed.contains("suspended (waiting_for: debounce)"), "{listed}");

    // A timeout and a retention from the flags: the run gets its deadline.
    let timed = stdout_json(&cairn(&[
        "runs",
        "start",
        "order",
        "3",
        "--id",
        "o-3",
        "--timeout",
        "1h",
        "--retention-days",
        "2",
        "--db",
        db,
        "--json",
    ]));
    assert!(timed["deadline"].is_string(), "{timed}");

    // Bad input: clear errors, non-zero exits, nothing stored.
    let before = stdout_json(&cairn(&["runs", "list", "--db", db, "--json"]));
    for bad in [
        vec!["runs", "start", "order", "{not json", "--db", db],
        vec!["runs", "start", "order", "1", "--id", "o-1", "--db", db],
        vec!["runs", "start", "order", "1", "--id", "a/b", "--db", db],
        vec!["runs", "start", "", "1", "--db", db],
        vec!["runs", "start", "order", "1", "--fairness-key", "", "--db", db],
        vec!["runs", "start", "order", "1", "--priority", "high", "--db", db],
        vec!["runs", "start", "order", "1", "--timeout", "soon", "--db", db],
        vec!["runs", "start", "order", "1", "--timeout", "0s", "--db", db],
        vec!["runs", "start", "digest", "1", "--quiet", "1s", "--db", db],
        vec!["runs", "start", "digest", "1", "--debounce", "k", "--db", db],
        vec!["runs", "start", "digest", "1", "--debounce", "k", "--quiet", "soon", "--db", db],
        vec!["runs", "start", "digest", "1", "--debounce", "", "--quiet", "1s", "--db", db],
        vec!["runs", "start", "digest", "1", "--debounce", "k", "--quiet", "1s", "--idempotency-key", "i", "--db", db],
        vec!["runs", "steps", "nope", "--db", db],
    ] {
        let output = cairn(&bad);
        assert!(!output.status.success(), "{bad:?} succeeded");
        assert!(!output.stderr.is_empty(), "{bad:?} said nothing");
    }
    assert_eq!(stdout_json(&cairn(&["runs", "list", "--db", db, "--json"])), before);
    let absent = dir.path().join("absent.db");
    assert!(!cairn(&["workflows", "--db", absent.to_str().unwrap()]).status.success());
    assert!(!absent.exists(), "counting must not create a database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_events_are_refused_and_start_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.db");
    // An engine declared `order` subscribed to `shop.*`; its runs wait for a worker.
    async fn order(ctx: cairn::Ctx, n: u32) -> Result<u32, cairn::WorkflowError> {
        ctx.step("count", || async { Ok::<_, cairn::StepError>(n) }).await
    }
    let engine = cairn::Engine::builder()
        .store(SqliteStore::open(&path).unwrap())
        .register("order", 1, order)
        .subscribe("order", "shop.*")
        .start()
        .await
        .unwrap();
    engine.shutdown().await;
    let db = path.to_str().unwrap();
    for (args, expected) in [
        (vec!["shop..placed", "1"], "CAIRN-E0308"),
        (vec!["shop.*", "1"], "CAIRN-E0308"),
        (vec!["shop.placed", "{not json"], "is not JSON"),
        (vec!["shop.placed", "1", "--id", ""], "CAIRN-E0309"),
    ] {
        let output = cairn(&[&["events", "publish", "--db", db][..], &args].concat());
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let client = Client::new(SqliteStore::open(&path).unwrap());
    assert!(client.list(&Default::default()).await.unwrap().runs.is_empty(), "a refused publish started a run");
    // A good one starts `order`, once; the text output says so.
    let output = cairn(&["events", "publish", "shop.placed", "7", "--id", "e1", "--db", db]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && text.contains("e1 on shop.placed: 1 run(s) started"), "{text}");
    let again = stdout_json(&cairn(&["events", "publish", "shop.placed", "7", "--id", "e1", "--db", db, "--json"]));
    assert_eq!(again["runs"], serde_json::json!([]));
    assert_eq!(client.list(&Default::default()).await.unwrap().runs.len(), 1);
}

/// Read commands open a current file read-only (tested in cairn-sqlite), but one an older build
/// wrote (here: schema 18, before the served-workflows registry) is migrated first, so `runs
/// list` still lists its runs right after an upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_commands_write_nothing_but_migrate_an_older_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    seed(&db).await;
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "DROP TRIGGER run_inputs_delete; DROP TRIGGER run_inputs_update;
         DROP TABLE run_inputs; DROP TABLE served_workflows; DROP TABLE events;
         ALTER TABLE runs DROP COLUMN request; ALTER TABLE runs DROP COLUMN request_reason;
         ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
         ALTER TABLE runs ADD COLUMN pause_requested INTEGER NOT NULL DEFAULT 0; PRAGMA user_version = 18;",
    )
    .unwrap();
    drop(conn);
    let path = db.to_str().unwrap();
    let listed = stdout_json(&cairn(&["runs", "list", "--db", path, "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert!(version > 18, "not migrated: {version}");
    drop(conn);
    assert!(!SqliteStore::needs_migrating(&db).unwrap());
}

/// A `cairn` built without the `otlp` feature (the default) says so when an OTLP endpoint is
/// set, rather than dropping the spans in silence, and still does its work.
#[cfg(not(feature = "otlp"))]
#[test]
fn an_otlp_endpoint_without_the_feature_is_named_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    drop(SqliteStore::open(&db).unwrap());
    let output = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["workers", "--json", "--db"])
        .arg(&db)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("OTEL_EXPORTER_OTLP_ENDPOINT is set") && said.contains("--features otlp"), "{said}");
}
