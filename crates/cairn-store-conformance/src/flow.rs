//! Flow control ([`FlowStore`]): concurrency limits, priority with fairness, rate limits, debounce.

use crate::support::*;

/// Concurrency rules: runs of a limited workflow hold at most `limit` slots per key; the others
/// wait in creation order and are admitted as slots free up (a run ends, suspends without
/// holding, is paused) or the limit grows; a woken run that gave its slot up waits again; a
/// paused run resumes waiting; a refused rule stores nothing.
pub async fn concurrency_limits_admit_in_order(store: DynStore) {
    assert!(store.put_concurrency(&ConcurrencyRule::per_workflow("charge", 0)).await.is_err());
    assert!(store.put_concurrency(&ConcurrencyRule::per_key("charge", "customer", 2)).await.is_err());
    assert!(store.concurrency_rules().await.expect("rules").is_empty());
    store.put_concurrency(&ConcurrencyRule::per_key("charge", "/customer", 2)).await.expect("rule");
    let create = |id: &'static str, customer: &'static str, at: i64| {
        let store = Arc::clone(&store);
        async move {
            let input = raw(&format!(r#"{{"customer":"{customer}"}}"#));
            let created = store
                .create_run(NewRun::new(RunId::new(id), workflow("charge"), 1, input, t(at)))
                .await
                .expect("create");
            assert_eq!(created.run.concurrency.as_ref().map(|c| c.key.as_str()), Some(customer));
            created.run.waiting_for
        }
    };
    let waiting = Some(WaitingFor::Concurrency);
    for (i, id) in ["c1", "c2", "c3", "c4", "c5"].into_iter().enumerate() {
        assert_eq!(create(id, "a", 10 + i as i64).await, if i < 2 { None } else { waiting }, "{id}");
    }
    assert_eq!(create("b1", "b", 15).await, None);
    let waits = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get_run(&RunId::new(id)).await.expect("get").expect("exists").waiting_for }
    };
    let claim = |now: i64| {
        let store = Arc::clone(&store);
        async move {
            let mut ids: Vec<String> = store
                .claim(&claim_req("w1", "charge", now))
                .await
                .expect("claim")
                .into_iter()
                .map(|r| r.id.as_str().to_owned())
                .collect();
            ids.sort();
            ids
        }
    };
    let get = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get_run(&RunId::new(id)).await.expect("get").expect("exists") }
    };
    assert_eq!(claim(20).await, ["b1", "c1", "c2"]);
    assert_eq!(claim(21).await, Vec::<String>::new());

    // c1 ends: c3 is admitted.
    let mut finish = progress(&get("c1").await, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(30) };
    store.append(finish).await.expect("finish");
    assert_eq!((waits("c3").await, waits("c4").await), (None, waiting));
    assert_eq!(claim(31).await, ["c3"]);
    // c2 sleeps until 500 and gives its slot up: c4 is admitted.
    suspend_sleeping(&store, &get("c2").await, 500, 40).await;
    assert_eq!(claim(41).await, ["c4"]);
    // c2 wakes while c3 and c4 hold both slots: it waits again, behind nobody (c5 came later).
    assert_eq!(claim(600).await, Vec::<String>::new());
    let c2 = get("c2").await;
    assert_eq!((c2.status, c2.waiting_for), (RunStatus::Pending, waiting));
    let mut finish = progress(&get("c3").await, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(610) };
    store.append(finish).await.expect("finish");
    assert_eq!((waits("c2").await, waits("c5").await), (None, waiting), "admitted in creation order");
    assert_eq!(claim(611).await, ["c2"]);
    // A larger limit admits c5 at once; listing shows who waits.
    let listed = store.list_runs(&RunFilter::default()).await.expect("list");
    assert_eq!(listed.runs.iter().filter(|r| r.waiting_for.is_some()).count(), 1);
    store.put_concurrency(&ConcurrencyRule::per_key("charge", "/customer", 3)).await.expect("raise");
    assert_eq!(waits("c5").await, None);
    assert_eq!(store.concurrency_rules().await.expect("rules")[0].limit, 3);
    assert!(store.delete_concurrency("charge").await.expect("delete"));
    assert!(!store.delete_concurrency("charge").await.expect("delete again"));

    // A rule that keeps suspended runs' slots; a paused run resumes waiting.
    store.put_concurrency(&ConcurrencyRule::per_workflow("hold", 1).hold_suspended()).await.expect("rule");
    for (id, at) in [("h1", 100), ("h2", 101)] {
        store.create_run(NewRun::new(RunId::new(id), workflow("hold"), 1, raw("{}"), t(at))).await.expect("create");
    }
    let h1 = claim_one(&store, "hold", 102).await;
    assert_eq!(h1.id.as_str(), "h1");
    suspend_sleeping(&store, &h1, 1_000_000, 103).await;
    assert_eq!(waits("h2").await, waiting, "h1 keeps its slot while it sleeps");
    store.pause(control(&RunId::new("h1"), 104)).await.expect("pause");
    assert_eq!(waits("h2").await, None, "a paused run gives its slot up");
    store.resume(ResumeRequest { run_id: RunId::new("h1"), at: t(105) }).await.expect("resume");
    let h1 = get("h1").await;
    assert_eq!((h1.status, h1.waiting_for), (RunStatus::Pending, waiting));
    assert!(store.claim(&claim_req("w1", "hold", 106)).await.expect("claim").iter().all(|r| r.id.as_str() == "h2"));
}

/// Ready runs are claimed by priority, then fairly between fairness keys (start-time fair
/// queuing: a key with a backlog takes turns with a key that arrives later), then by age; a
/// woken run keeps the place its creation gave it; runs created together (one batch) get
/// distinct places.
pub async fn claims_follow_priority_then_fairness(store: DynStore) {
    let create = |id: String, priority: i32, key: Option<&'static str>, at: i64| {
        let store = Arc::clone(&store);
        async move {
            let mut run = NewRun::new(RunId::new(id), workflow("fair"), 1, raw("{}"), t(at));
            (run.priority, run.fairness_key) = (priority, key.map(Into::into));
            store.create_run(run).await.expect("create").run
        }
    };
    for i in 0..30 {
        assert_eq!(create(format!("a{i}"), 0, Some("a"), 10 + i).await.fair_seq, i, "a's runs queue one after another");
    }
    for i in 0..3 {
        let b = create(format!("b{i}"), 0, Some("b"), 50 + i).await;
        assert_eq!((b.fair_seq, b.fairness_key.as_deref(), b.priority), (i, Some("b"), 0), "b starts at the head");
    }
    create("low".into(), -1, None, 60).await;
    let urgent = create("urgent".into(), 5, None, 70).await;
    assert_eq!((urgent.priority, urgent.fairness_key, urgent.fair_seq), (5, None, 0));
    let read = store.get_run(&RunId::new("b2")).await.expect("get").expect("exists");
    assert_eq!((read.priority, read.fairness_key.as_deref(), read.fair_seq), (0, Some("b"), 2));

    let mut order = Vec::new();
    let one = |now: i64| ClaimRequest { limit: 1, ..claim_req("w1", "fair", now) };
    for now in 100..110 {
        let claimed = store.claim(&one(now)).await.expect("claim");
        order.extend(claimed.into_iter().map(|r| r.id.as_str().to_owned()));
    }
    assert_eq!(order, ["urgent", "a0", "b0", "a1", "b1", "a2", "b2", "a3", "a4", "a5"]);

    // a3 sleeps and wakes: it goes before the queued runs of its priority (an earlier place).
    let a3 = store.get_run(&RunId::new("a3")).await.expect("get").expect("exists");
    suspend_sleeping(&store, &a3, 200, 150).await;
    let claimed = store.claim(&one(300)).await.expect("claim");
    assert_eq!(claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a3"]);
    let rest = store.claim(&ClaimRequest { limit: 100, ..claim_req("w1", "fair", 301) }).await.expect("claim");
    let rest: Vec<&str> = rest.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(rest.len(), 25, "{rest:?}");

    // Runs created at once of one key each get their own place.
    let together = (0..20).map(|i| create(format!("c{i}"), 0, Some("c"), 400));
    let mut places: Vec<i64> = futures::future::join_all(together).await.into_iter().map(|r| r.fair_seq).collect();
    places.sort();
    assert_eq!(places, (0..20).collect::<Vec<i64>>());
}

/// Runs whose leases lapsed at the same instant are reclaimed by id, whatever order they were
/// created in: a claim of one takes the smallest id, on every backend (the shape of a sequence
/// the model-based test found, where the memory store took them by fairness sequence).
pub async fn lapsed_leases_of_one_instant_are_reclaimed_by_id(store: DynStore) {
    for (id, at) in [("z", 10), ("m", 11), ("a", 12)] {
        store.create_run(NewRun::new(RunId::new(id), workflow("lapse"), 1, raw("{}"), t(at))).await.expect("create");
    }
    let claimed = store.claim(&claim_req("w1", "lapse", 100)).await.expect("claim");
    assert_eq!(claimed.len(), 3);
    assert!(claimed.iter().all(|r| r.lease_expires_at == Some(t(1_100))), "one lease for all three");
    let one = |now: i64| ClaimRequest { limit: 1, ..claim_req("w2", "lapse", now) };
    let mut order = Vec::new();
    for now in [2_000, 2_001, 2_002] {
        let taken = store.claim(&one(now)).await.expect("reclaim");
        order.extend(taken.iter().map(|r| (r.id.as_str().to_owned(), r.lease_owner.clone())));
    }
    let w2 = Some("w2".to_owned());
    assert_eq!(order, [("a".into(), w2.clone()), ("m".into(), w2.clone()), ("z".into(), w2)]);
}

/// A rate limit's bucket grants at most `limit` turns in any window of its period, across
/// concurrent takers; a refused take is told when a turn frees up, and gets it then; buckets are
/// independent.
pub async fn rate_limits_grant_at_most_limit_per_window(store: DynStore) {
    let take = |bucket: &str, now: i64| TakeRate {
        bucket: bucket.to_owned(),
        limit: 3,
        period: std::time::Duration::from_millis(1_000),
        now: t(now),
    };
    for now in [0, 10, 20] {
        assert_eq!(store.take_rate(&take("a", now)).await.expect("take"), None, "turn at {now}");
    }
    assert_eq!(store.take_rate(&take("a", 500)).await.expect("take"), Some(t(1_000)), "full until 0 ages out");
    assert_eq!(store.take_rate(&take("b", 500)).await.expect("take"), None, "another bucket is its own");
    assert_eq!(store.take_rate(&take("a", 999)).await.expect("take"), Some(t(1_000)));
    assert_eq!(store.take_rate(&take("a", 1_000)).await.expect("take"), None, "0 aged out");
    assert_eq!(store.take_rate(&take("a", 1_001)).await.expect("take"), Some(t(1_010)), "refusals record nothing");

    // Askers' clocks out of order: one a period ahead does not make the bucket forget grants
    // still inside an earlier asker's window.
    for now in [1_004, 1_005, 1_006, 2_006] {
        assert_eq!(store.take_rate(&take("skew", now)).await.expect("take"), None, "turn at {now}");
    }
    assert_eq!(store.take_rate(&take("skew", 2_000)).await.expect("take"), Some(t(2_005)), "1,004 to 1,006 count");

    // Twenty takers at once: three turns.
    let takes = (0..20).map(|_| {
        let store = Arc::clone(&store);
        async move { store.take_rate(&take("burst", 5_000)).await.expect("take") }
    });
    let verdicts = futures::future::join_all(takes).await;
    assert_eq!(verdicts.iter().filter(|v| v.is_none()).count(), 3, "{verdicts:?}");
    assert!(verdicts.iter().flatten().all(|at| *at == t(6_000)), "{verdicts:?}");
}

/// A run cancelled or paused while it waits for a concurrency slot leaves the queue: it is never
/// admitted (it would hold a slot nobody frees), and the runs behind it are.
pub async fn waiting_runs_cancelled_or_paused_leave_the_queue(store: DynStore) {
    store.put_concurrency(&ConcurrencyRule::per_workflow("one", 1)).await.expect("rule");
    for (id, at) in [("r1", 1), ("r2", 2), ("r3", 3), ("r4", 4)] {
        store.create_run(NewRun::new(RunId::new(id), workflow("one"), 1, raw("{}"), t(at))).await.expect("create");
    }
    let get = |id: &'static str| {
        let store = Arc::clone(&store);
        async move { store.get_run(&RunId::new(id)).await.expect("get").expect("exists") }
    };
    assert_eq!(get("r2").await.waiting_for, Some(WaitingFor::Concurrency));
    assert_eq!(store.cancel(control(&RunId::new("r2"), 5)).await.expect("cancel"), CancelOutcome::Cancelled);
    assert_eq!(store.pause(control(&RunId::new("r3"), 6)).await.expect("pause"), PauseOutcome::Paused);
    let (r2, r3) = (get("r2").await, get("r3").await);
    assert_eq!((r2.status, r2.held_back_by()), (RunStatus::Cancelled, None));
    assert_eq!((r3.status, r3.held_back_by()), (RunStatus::Paused, None));
    // r1 ends: r4, the only run still waiting, takes the slot.
    let r1 = claim_one(&store, "one", 10).await;
    let mut finish = progress(&r1, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(11) };
    store.append(finish).await.expect("finish");
    assert_eq!(get("r4").await.waiting_for, None, "the slot went to r4");
    assert_eq!(claim_one(&store, "one", 12).await.id.as_str(), "r4");
    // r3 resumes behind r4, and gets the slot when r4 ends.
    store.resume(ResumeRequest { run_id: RunId::new("r3"), at: t(13) }).await.expect("resume");
    assert_eq!(get("r3").await.waiting_for, Some(WaitingFor::Concurrency));
    let mut finish = progress(&get("r4").await, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(14) };
    store.append(finish).await.expect("finish");
    assert_eq!(claim_one(&store, "one", 15).await.id.as_str(), "r3");
}

/// A create refused or answered by an existing run (its id or idempotency key taken) takes no
/// concurrency slot: the group's next run is admitted as if it had never been asked for.
pub async fn refused_creates_take_no_slot(store: DynStore) {
    store.put_concurrency(&ConcurrencyRule::per_workflow("solo", 1)).await.expect("rule");
    let create = |id: &'static str, key: Option<&'static str>, at: i64| {
        let store = Arc::clone(&store);
        async move { store.create_run(new_run(id, "solo", key, at)).await }
    };
    let first = create("s1", Some("k"), 1).await.expect("create");
    assert_eq!((first.created, first.run.waiting_for), (true, None));
    let s1 = claim_one(&store, "solo", 2).await;
    let mut finish = progress(&s1, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(3) };
    store.append(finish).await.expect("finish");
    // Its key again: the existing run, no slot taken.
    let again = create("s2", Some("k"), 4).await.expect("create");
    assert_eq!((again.created, again.run.id.as_str()), (false, "s1"));
    let s3 = create("s3", None, 5).await.expect("create");
    assert_eq!(s3.run.waiting_for, None, "the group's one slot was free");
    // Its id again: refused, no slot taken; the next run waits for s3's slot.
    assert!(matches!(create("s3", None, 6).await, Err(StoreError::DuplicateRunId(_))));
    let s4 = create("s4", None, 7).await.expect("create");
    assert_eq!(s4.run.waiting_for, Some(WaitingFor::Concurrency));
    let s3 = claim_one(&store, "solo", 8).await;
    let mut finish = progress(&s3, vec![Event::Completed { output: raw("1") }]);
    finish.update = RunUpdate::Finish { status: RunStatus::Completed, output: Some(raw("1")), error: None, at: t(9) };
    store.append(finish).await.expect("finish");
    assert_eq!(claim_one(&store, "solo", 10).await.id.as_str(), "s4");
}

/// A debounced start (`quiet` 1 s, at most 3 s) with `n` as its input, at `at`, under `key`.
pub(super) fn debounced(id: &str, key: &str, n: i64, at: i64) -> NewRun {
    let mut run = NewRun::new(RunId::new(id), workflow("digest"), 1, raw(&format!(r#"{{"n":{n}}}"#)), t(at));
    let quiet = std::time::Duration::from_secs(1);
    run.debounce = Some(Debounce::new(key, quiet).max_wait(std::time::Duration::from_secs(3)));
    run
}

/// Debounced starts with one key collapse into one run while it has not begun: it takes the
/// latest input (its `started` event too) and begins once the key has been quiet, or at its
/// first start's maximum wait; concurrent starters all find the one run; once it has begun, the
/// next start opens a new window; a debouncing run holds no concurrency slot.
pub async fn debounced_starts_collapse_into_one_run(store: DynStore) {
    let first = store.create_run(debounced("d1", "k", 1, 0)).await.expect("create");
    assert!(first.created);
    let run = &first.run;
    assert_eq!((run.status, run.suspend_reason), (RunStatus::Suspended, Some(SuspendReason::Debouncing)));
    assert_eq!((run.wake_at, run.held_back_by()), (Some(t(1_000)), Some(WaitingFor::Debounce)));
    for (i, at) in [(2, 400), (3, 900)] {
        let joined = store.create_run(debounced(&format!("d{i}"), "k", i, at)).await.expect("join");
        assert!(!joined.created);
        assert_eq!((joined.run.id.as_str(), joined.run.wake_at), ("d1", Some(t(at + 1_000))));
    }
    assert!(store.get_run(&RunId::new("d2")).await.expect("get").is_none(), "a joining start makes no run");
    // Another key has its own window; a bad debounce or one with an idempotency key is refused.
    assert!(store.create_run(debounced("e1", "other", 7, 950)).await.expect("create").created);
    let mut keyed = debounced("x1", "k", 9, 960);
    keyed.idempotency_key = Some(IdempotencyKey::new("once").expect("a valid key"));
    assert!(matches!(store.create_run(keyed).await, Err(StoreError::InvalidInput(_))));
    let mut bad = debounced("x2", "k", 9, 960);
    bad.debounce = Some(Debounce::new("k", std::time::Duration::ZERO));
    assert!(matches!(store.create_run(bad).await, Err(StoreError::InvalidInput(_))));
    let d1 = store.get_run(&RunId::new("d1")).await.expect("get").expect("exists");
    assert_eq!((d1.input.get(), d1.wake_at), (r#"{"n":3}"#, Some(t(1_900))), "the refused starts changed nothing");
    // Not claimable before its window closes.
    assert!(store.claim(&claim_req("w1", "digest", 1_899)).await.expect("claim").iter().all(|r| r.id.as_str() != "d1"));
    // The maximum wait caps a steady stream: starts every 900 ms never leave a quiet second.
    for (i, at, wakes) in [(4, 1_800, 2_800), (5, 2_700, 3_000)] {
        let joined = store.create_run(debounced(&format!("d{i}"), "k", i, at)).await.expect("join");
        assert_eq!((joined.run.id.as_str(), joined.run.wake_at), ("d1", Some(t(wakes))), "capped at 0 + 3 s");
    }
    let journal = store.read_journal(&RunId::new("d1")).await.expect("journal");
    assert_eq!(journal.len(), 1);
    assert!(matches!(&journal[0].event, Event::Started { input, .. } if input.get() == r#"{"n":5}"#));
    let claimed = store.claim(&claim_req("w1", "digest", 3_000)).await.expect("claim");
    let mut ids: Vec<&str> = claimed.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["d1", "e1"], "each window's run begins once");
    let d1 = claimed.iter().find(|r| r.id.as_str() == "d1").expect("claimed");
    assert_eq!((d1.status, d1.suspend_reason, d1.input.get()), (RunStatus::Running, None, r#"{"n":5}"#));
    assert_eq!(d1.held_back_by(), None);
    // It has begun: the next start opens a new window.
    let next = store.create_run(debounced("d6", "k", 6, 3_001)).await.expect("create");
    assert!(next.created && next.run.is_debouncing());

    // Concurrent starters of one key find one run.
    let starts: Vec<_> = (0..16)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.create_run(debounced(&format!("c{i}"), "burst", i, 5_000 + i)).await })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    let mut created = 0;
    for start in starts {
        let start = start.await.expect("task").expect("create");
        created += usize::from(start.created);
        ids.insert(start.run.id.to_string());
    }
    assert_eq!((created, ids.len()), (1, 1), "{ids:?}");

    // Under a concurrency rule that keeps suspended runs' slots, a debouncing run holds none; once
    // its window closes it waits for one, and then keeps it while suspended.
    store.put_concurrency(&ConcurrencyRule::per_workflow("held", 1).hold_suspended()).await.expect("rule");
    let mut waiting = debounced("h1", "k", 1, 10_000);
    waiting.workflow = workflow("held");
    let h1 = store.create_run(waiting).await.expect("create").run;
    assert_eq!((h1.waiting_for, h1.concurrency.as_ref().map(|c| c.hold_suspended)), (None, Some(false)));
    let h2 = store
        .create_run(NewRun::new(RunId::new("h2"), workflow("held"), 1, raw("{}"), t(10_001)))
        .await
        .expect("create");
    assert_eq!(h2.run.waiting_for, None, "the debouncing run holds no slot");
    assert_eq!(claim_one(&store, "held", 10_002).await.id.as_str(), "h2");
    assert!(store.claim(&claim_req("w1", "held", 11_000)).await.expect("claim").is_empty(), "h2 holds the slot");
    let h1 = store.get_run(&RunId::new("h1")).await.expect("get").expect("exists");
    assert_eq!((h1.status, h1.waiting_for), (RunStatus::Pending, Some(WaitingFor::Concurrency)));
    assert_eq!(h1.concurrency.map(|c| c.hold_suspended), Some(true), "its rule applies from now on");
    // Paused while it debounces, its window closes too: resumed, it waits for a slot and keeps it
    // while suspended as its rule says.
    let mut paused = debounced("h3", "other", 1, 11_000);
    paused.workflow = workflow("held");
    store.create_run(paused).await.expect("create");
    assert_eq!(store.pause(control(&RunId::new("h3"), 11_001)).await.expect("pause"), PauseOutcome::Paused);
    let h3 = store.get_run(&RunId::new("h3")).await.expect("get").expect("exists");
    assert_eq!((h3.status, h3.held_back_by()), (RunStatus::Paused, None));
    assert_eq!(h3.concurrency.map(|c| c.hold_suspended), Some(true));
    let mut again = debounced("h4", "other", 2, 11_002);
    again.workflow = workflow("held");
    assert!(store.create_run(again).await.expect("create").created, "the paused run's window closed");
    let mut joins = debounced("h5", "other", 3, 11_003);
    joins.workflow = workflow("held");
    let joined = store.create_run(joins).await.expect("join under a rule");
    assert_eq!((joined.created, joined.run.id.as_str(), joined.run.input.get()), (false, "h4", r#"{"n":3}"#));
}
