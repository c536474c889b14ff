//! Journals ([`JournalStore`]): appends under the run's lease (fenced by epoch, checked by
//! sequence), in order, trimmed by loop checkpoints, and read back whole.

use crate::support::*;

/// A worker whose lease expired and was reclaimed cannot append; nothing it sent is stored.
pub async fn stale_epoch_is_fenced(store: DynStore) {
    store.create_run(new_run("f", "order", None, 1)).await.expect("create");
    let first = claim_one(&store, "order", 10).await;
    // The lease runs to 1_010; at 2_000 another worker reclaims it.
    let mut request = claim_req("w2", "order", 2_000);
    request.lease_until = t(3_000);
    let second = store.claim(&request).await.expect("reclaim");
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].epoch, first.epoch + 1);
    let err = store.append(progress(&first, vec![step("a", 0)])).await.unwrap_err();
    assert!(matches!(err, StoreError::Fenced { held: 1, current: 2, .. }), "{err:?}");
    assert_eq!(store.read_journal(&first.id).await.expect("journal").len(), 1);
    store.append(progress(&second[0], vec![step("a", 0)])).await.expect("new holder appends");
    let lease = store
        .heartbeat(&HeartbeatRequest {
            owner: "w1".into(),
            runs: vec![(first.id.clone(), first.epoch)],
            lease_until: t(9),
        })
        .await
        .expect("heartbeat");
    assert!(!lease[0].held);
}

/// A run pruned and created again under its id counts its epochs afresh, so a worker that still
/// holds the first one's lease can carry its epoch: once the new run is cancelled its epoch is
/// the stale holder's again. Only a running run takes appends, so that holder is fenced and the
/// cancelled run stays as it is (the model-based test found this: the stale holder finished it).
pub async fn a_stale_holder_cannot_write_to_a_run_created_again_under_its_id(store: DynStore) {
    let cancel =
        |at: i64| ControlRequest { run_id: RunId::new("again"), reason: "user".into(), at: t(at), lease_now: t(at) };
    let mut first = new_run("again", "order", None, 1);
    first.retention = Some(std::time::Duration::ZERO);
    store.create_run(first).await.expect("create");
    let stale = claim_one(&store, "order", 10).await;
    assert_eq!(stale.epoch, 1);
    store.cancel(cancel(2_000)).await.expect("cancel the first");
    let pruned = store
        .prune(PruneRequest { now: t(2_000), ended_before: None, events_before: None, limit: 10, dry_run: false })
        .await;
    assert_eq!(pruned.expect("prune"), vec![RunId::new("again")]);
    store.create_run(new_run("again", "order", None, 2_000)).await.expect("create again");
    store.cancel(cancel(2_001)).await.expect("cancel the second");
    let second = store.get_run(&RunId::new("again")).await.expect("get").expect("exists");
    assert_eq!((second.status, second.epoch), (RunStatus::Cancelled, stale.epoch), "the epochs meet");
    let mut append = progress(&stale, vec![step("late", 0)]);
    append.after_seq = second.last_seq;
    let err = store.append(append).await.unwrap_err();
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    let after = store.get_run(&RunId::new("again")).await.expect("get").expect("exists");
    assert_eq!((after.status, after.last_seq), (RunStatus::Cancelled, second.last_seq));
    assert_eq!(store.read_journal(&after.id).await.expect("journal").len() as u64, second.last_seq);
}

/// Appends must continue the journal where it ends; events are numbered densely.
pub async fn append_checks_sequence(store: DynStore) {
    store.create_run(new_run("s", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    store.append(progress(&run, vec![step("a", 0), step("b", 1)])).await.expect("append");
    let err = store.append(progress(&run, vec![step("c", 2)])).await.unwrap_err();
    assert!(matches!(err, StoreError::SequenceConflict { expected: 1, actual: 3, .. }), "{err:?}");
    let mut next = progress(&run, vec![step("c", 2)]);
    next.after_seq = 3;
    store.append(next).await.expect("append after 3");
    let journal = store.read_journal(&run.id).await.expect("journal");
    assert_eq!(journal.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    RunState::fold(&journal).expect("journal folds");
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").last_seq, 4);
}

/// Appends of one run sent together (a run's concurrent items, `batched`), the last finishing the
/// run, all land in order, whatever the backend merges; one sent after them with a stale
/// sequence number is refused and changes nothing.
pub async fn appends_sent_together_land_in_order(store: DynStore) {
    store.create_run(new_run("fan", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let mut sent = Vec::new();
    for i in 0..40u32 {
        let mut append = progress(&run, vec![step(&format!("item[{i}]/work"), 0)]);
        append.after_seq = run.last_seq + u64::from(i);
        append.batched = true;
        if i == 39 {
            let output = raw("40");
            append.events.push(Event::Completed { output: output.clone() });
            append.update =
                RunUpdate::Finish { status: RunStatus::Completed, output: Some(output), error: None, at: t(6) };
        }
        sent.push(store.append(append));
    }
    for outcome in futures::future::join_all(sent).await {
        outcome.expect("append");
    }
    let mut stale = progress(&run, vec![step("late", 0)]);
    stale.after_seq = 41;
    assert!(store.append(stale).await.is_err(), "an append to an ended run");
    let journal = store.read_journal(&run.id).await.expect("journal");
    assert_eq!(journal.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=42).collect::<Vec<_>>());
    let state = RunState::fold(&journal).expect("journal folds");
    assert_eq!(state.steps().count(), 40);
    let ended = store.get_run(&run.id).await.expect("get").expect("exists");
    assert_eq!((ended.status, ended.last_seq), (RunStatus::Completed, 42));
}

/// A loop checkpoint's trim deletes, within its range, the loop's iterations, its earlier
/// checkpoints and the durable values' sets, and nothing else (another loop's checkpoint, a step
/// beside the loop, a set after the range); the journal read back folds with the gaps.
pub async fn loop_checkpoints_trim_their_history(store: DynStore) {
    store.create_run(new_run("looping", "order", None, 1)).await.expect("create");
    let run = claim_one(&store, "order", 10).await;
    let checkpoint = |path: &str, next: u64, trim: Option<cairn_journal::Trim>| Event::LoopCheckpoint {
        path: StepPath::parse(path).expect("valid path"),
        next,
        state: raw(&next.to_string()),
        trim: trim.map(Box::new),
        vars: Default::default(),
    };
    let set = |value: &str| Event::VarSet { name: "n".into(), value: raw(value) };
    let batches = vec![
        vec![step("tick[0]/work", 0)],                                // 2
        vec![checkpoint("tock", 4, None), step("ticker[0]/work", 0)], // 3, 4
        vec![checkpoint("tick", 1, None), set("1")],                  // 5, 6
        vec![step("tick[1]/work", 0), step("side", 0)],               // 7, 8
        vec![set("2"), checkpoint("tick", 2, Some(cairn_journal::Trim { since: 1, after: 1, through: 6 }))], // 9, 10
    ];
    let mut after_seq = run.last_seq;
    for events in batches {
        let mut append = progress(&run, events);
        append.after_seq = after_seq;
        after_seq += append.events.len() as u64;
        store.append(append).await.expect("append");
    }
    let journal = store.read_journal(&run.id).await.expect("journal");
    assert_eq!(journal.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 3, 4, 7, 8, 9, 10]);
    let state = RunState::fold(&journal).expect("a trimmed journal folds");
    let record = state.loop_record(&StepPath::parse("tick").expect("path")).expect("the loop's checkpoint");
    assert_eq!((record.next, record.seq), (2, 10));
    assert!(state.loop_record(&StepPath::parse("tock").expect("path")).is_some(), "another loop's checkpoint stays");
    assert_eq!(store.get_run(&run.id).await.expect("get").expect("exists").last_seq, 10);
}

/// A journal of 5,001 entries reads back whole and in order, and a second run's entries do not
/// mix in (backends may read long journals in parts).
pub async fn long_journals_read_back_whole(store: DynStore) {
    for id in ["long", "other"] {
        store.create_run(new_run(id, "order", None, 1)).await.expect("create");
    }
    let mut claimed = store.claim(&claim_req("w1", "order", 10)).await.expect("claim");
    claimed.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    for (run, steps) in claimed.iter().zip([5_000u32, 3]) {
        let mut after_seq = run.last_seq;
        for chunk in (0..steps).collect::<Vec<_>>().chunks(500) {
            let events = chunk.iter().map(|&i| step(&format!("{}[{i}]", run.id.as_str()), i)).collect::<Vec<_>>();
            let mut append = progress(run, events);
            append.after_seq = after_seq;
            after_seq += chunk.len() as u64;
            store.append(append).await.expect("append");
        }
    }
    let long = RunId::new("long");
    let journal = store.read_journal(&long).await.expect("journal");
    assert_eq!(journal.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=5_001).collect::<Vec<_>>());
    let state = RunState::fold(&journal).expect("journal folds");
    assert_eq!(state.steps().count(), 5_000);
    assert!(state.steps().all(|(path, _)| path.as_str().starts_with("long[")), "another run's entries mixed in");
    // Read through a known last entry: the whole journal, or the prefix asked for.
    let through = store.read_journal_through(&long, 5_001).await.expect("journal");
    assert_eq!(through.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=5_001).collect::<Vec<_>>());
    assert_eq!(RunState::fold(&through).expect("folds").steps().count(), 5_000);
    let prefix = store.read_journal_through(&long, 2_500).await.expect("journal");
    assert_eq!(prefix.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=2_500).collect::<Vec<_>>());
    let other = RunId::new("other");
    assert_eq!(store.read_journal(&other).await.expect("journal").len(), 4);
    assert_eq!(store.read_journal_through(&other, 4).await.expect("journal").len(), 4);
    assert!(store.read_journal(&RunId::new("absent")).await.expect("journal").is_empty());
    assert!(store.read_journal_through(&RunId::new("absent"), 3_000).await.expect("journal").is_empty());
}
