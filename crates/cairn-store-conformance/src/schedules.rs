//! Schedules ([`ScheduleStore`]): their firings.

use crate::support::*;

/// Schedules are created, redeclared (a changed spec moves the next firing, an unchanged one does
/// not), found due, fired once per due time however many firers race (runs by id, an existing
/// one found, not doubled), paused (not due, not waking anyone), resumed and deleted.
pub async fn schedules_fire_once_per_due_time(store: DynStore) {
    let put = |spec: &str, next: i64| PutSchedule {
        name: "nightly".into(),
        workflow: workflow("order"),
        spec: spec.into(),
        input: raw(r#"{"n":1}"#),
        next_fire_at: Some(t(next)),
        now: t(1),
    };
    let created = store.put_schedule(&put("A", 100)).await.expect("create");
    assert_eq!((created.paused, created.next_fire_at, created.last_fired_at), (false, Some(t(100)), None));
    assert_eq!(store.put_schedule(&put("A", 999)).await.expect("same spec").next_fire_at, Some(t(100)));
    assert_eq!(store.put_schedule(&put("B", 200)).await.expect("new spec").next_fire_at, Some(t(200)));
    let due = |now: i64, workflows: &'static [&'static str]| {
        let store = Arc::clone(&store);
        async move {
            let workflows: Vec<String> = workflows.iter().map(|w| (*w).to_owned()).collect();
            let due = store.due_schedules(&workflows, t(now), 10).await.expect("due");
            due.into_iter().map(|s| s.name).collect::<Vec<_>>()
        }
    };
    assert!(due(150, &["order"]).await.is_empty());
    assert_eq!(due(200, &["order"]).await, ["nightly"]);
    assert!(due(200, &["other"]).await.is_empty());
    assert_eq!(store.next_wake_at(&wf("order")).await.expect("wake"), Some(t(200)));

    let run = |id: &str| new_run(id, "order", None, 200);
    let fire = |due: i64, next: i64, runs: Vec<NewRun>| FireSchedule {
        name: "nightly".into(),
        due: t(due),
        next_fire_at: Some(t(next)),
        last_fired_at: Some(t(due)),
        runs,
        now: t(due + 1),
        manual: false,
    };
    // Two firers of one due time: one fires, the other changes nothing.
    let (a, b) = tokio::join!(
        store.fire_schedule(fire(200, 300, vec![run("nightly@200")])),
        store.fire_schedule(fire(200, 300, vec![run("nightly@200"), run("nightly@200-again")]))
    );
    let fired: Vec<Vec<CreatedRun>> = [a.expect("fire"), b.expect("fire")].into_iter().flatten().collect();
    assert_eq!(fired.len(), 1, "exactly one firer fired");
    assert!(fired[0].iter().all(|c| c.created));
    assert!(store.get_run(&RunId::new("nightly@200")).await.expect("get").is_some());
    let after = store.schedules().await.expect("list");
    assert_eq!((after[0].next_fire_at, after[0].last_fired_at), (Some(t(300)), Some(t(200))));
    // A firing that lists a run an earlier one started finds it.
    let again = store.fire_schedule(fire(300, 400, vec![run("nightly@200"), run("nightly@300")])).await.expect("fire");
    let flags: Vec<(String, bool)> =
        again.expect("due").into_iter().map(|c| (c.run.id.to_string(), c.created)).collect();
    assert_eq!(flags, [("nightly@200".to_owned(), false), ("nightly@300".to_owned(), true)]);

    // Paused: not due, wakes nobody, cannot fire; resumed at a new time.
    let pause =
        |paused, next| PauseSchedule { name: "nightly".into(), paused, next_fire_at: Some(t(next)), now: t(450) };
    assert!(store.pause_schedule(&pause(true, 0)).await.expect("pause").paused);
    assert!(due(10_000, &["order"]).await.is_empty());
    assert_eq!(store.next_wake_at(&wf("order")).await.expect("wake"), None);
    assert!(store.fire_schedule(fire(400, 500, vec![run("nightly@400")])).await.expect("fire").is_none());
    assert!(store.get_run(&RunId::new("nightly@400")).await.expect("get").is_none());
    // A manual firing (a trigger) fires while paused, whatever it is due, and is recorded as
    // the last firing; the next firing stays as it was.
    let before = store.schedules().await.expect("list")[0].next_fire_at;
    let manual = FireSchedule { manual: true, last_fired_at: Some(t(420)), ..fire(0, 9_999, vec![run("nightly@420")]) };
    let created = store.fire_schedule(manual).await.expect("trigger").expect("fired while paused");
    assert_eq!((created.len(), created[0].created), (1, true));
    let after = store.schedules().await.expect("list");
    assert_eq!((after[0].paused, after[0].next_fire_at, after[0].last_fired_at), (true, before, Some(t(420))));
    let manual = FireSchedule { manual: true, ..fire(0, 0, vec![run("nightly@420")]) };
    let again = store.fire_schedule(manual).await.expect("trigger").expect("fired");
    assert!(!again[0].created, "the same firing time finds its run");
    let gone = FireSchedule { name: "no-such".into(), manual: true, ..fire(0, 0, vec![run("no-such@1")]) };
    assert!(store.fire_schedule(gone).await.expect("trigger").is_none(), "no schedule, no firing");
    assert!(store.get_run(&RunId::new("no-such@1")).await.expect("get").is_none());
    assert!(store.put_schedule(&put("B", 1)).await.expect("redeclare").paused, "redeclaring keeps the pause");
    let resumed = store.pause_schedule(&pause(false, 5_000)).await.expect("resume");
    assert_eq!((resumed.paused, resumed.next_fire_at), (false, Some(t(5_000))));

    assert!(store.delete_schedule("nightly").await.expect("delete"));
    assert!(!store.delete_schedule("nightly").await.expect("delete again"));
    assert!(store.schedules().await.expect("list").is_empty());
    assert_eq!(
        store.pause_schedule(&pause(true, 0)).await.unwrap_err(),
        StoreError::ScheduleNotFound("nightly".into())
    );
    assert!(store.get_run(&RunId::new("nightly@300")).await.expect("get").is_some(), "its runs stay");
}
