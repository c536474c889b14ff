//! Property tests over random valid and invalid journals.

use cairn_journal::{
    Event, JournalEntry, ReplayCursor, RunPhase, RunState, SignalId, StepKind, StepPath, StepStatus, Timestamp,
};
use proptest::prelude::*;
use serde_json::value::RawValue;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).unwrap()
}

/// One step's life, as a generator of valid event runs.
#[derive(Debug, Clone)]
enum Plan {
    /// `failures` retried failures, then success (or final failure when `gives_up`).
    Step {
        failures: u32,
        gives_up: bool,
    },
    Sleep {
        fired: bool,
    },
    Wait {
        received: bool,
    },
}

fn plan() -> impl Strategy<Value = Plan> {
    prop_oneof![
        (0u32..4, any::<bool>()).prop_map(|(failures, gives_up)| Plan::Step { failures, gives_up }),
        any::<bool>().prop_map(|fired| Plan::Sleep { fired }),
        any::<bool>().prop_map(|received| Plan::Wait { received }),
    ]
}

/// A valid journal: steps spread over two scopes, their events interleaved at random, plus maybe an end.
fn valid_journal() -> impl Strategy<Value = (Vec<JournalEntry>, Vec<(StepPath, Plan)>)> {
    (proptest::collection::vec((plan(), any::<bool>()), 0..12), any::<u64>(), 0u8..5).prop_map(
        |(plans, shuffle, end)| {
            let mut ordinals = [0u32; 2];
            let mut queues: Vec<Vec<Event>> = Vec::new();
            let mut steps = Vec::new();
            for (i, (plan, scoped)) in plans.into_iter().enumerate() {
                let scope = usize::from(scoped);
                let base = if scoped { StepPath::parse("inner").unwrap() } else { StepPath::root() };
                let path = base.indexed_child("s", i as u64).unwrap();
                let ordinal = ordinals[scope];
                ordinals[scope] += 1;
                let mut events = Vec::new();
                match plan {
                    Plan::Step { failures, gives_up } => {
                        for attempt in 1..=failures {
                            events.push(Event::StepFailed {
                                path: path.clone(),
                                ordinal,
                                attempt,
                                error: "e".into(),
                                retry_at: Some(Timestamp::from_millis(i64::from(attempt))),
                                started_at: Some(Timestamp::from_millis(i64::from(attempt) - 1)),
                            });
                        }
                        let attempt = failures + 1;
                        events.push(if gives_up {
                            Event::StepFailed {
                                path: path.clone(),
                                ordinal,
                                attempt,
                                error: "x".into(),
                                retry_at: None,
                                started_at: None,
                            }
                        } else {
                            Event::StepCompleted {
                                path: path.clone(),
                                ordinal,
                                attempt,
                                output: raw("1"),
                                started_at: None,
                            }
                        });
                    }
                    Plan::Sleep { fired } => {
                        events.push(Event::TimerStarted {
                            path: path.clone(),
                            ordinal,
                            wake_at: Timestamp::from_millis(5),
                        });
                        if fired {
                            events.push(Event::TimerFired { path: path.clone() });
                        }
                    }
                    Plan::Wait { received } => {
                        events.push(Event::WaitStarted {
                            path: path.clone(),
                            ordinal,
                            event: "go".into(),
                            filter: None,
                            deadline: None,
                        });
                        if received {
                            events.push(Event::WaitCompleted {
                                path: path.clone(),
                                signal: Some(SignalId(i as i64)),
                                payload: Some(raw("{}")),
                            });
                        }
                    }
                }
                queues.push(events);
                steps.push((path, plan));
            }
            // Interleave the per-step queues, keeping each step's own order.
            let mut out = vec![Event::Started {
                workflow: "w".into(),
                version: 1,
                input: raw("null"),
                deadline: None,
                reason: None,
            }];
            let mut rng = shuffle;
            while queues.iter().any(|q| !q.is_empty()) {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let live: Vec<usize> = (0..queues.len()).filter(|&i| !queues[i].is_empty()).collect();
                let pick = live[(rng >> 33) as usize % live.len()];
                out.push(queues[pick].remove(0));
            }
            match end {
                1 => out.push(Event::Completed { output: raw("\"done\"") }),
                2 => out.push(Event::Failed { error: "bad".into() }),
                3 => out.push(Event::Cancelled { reason: "stop".into() }),
                4 => out.push(Event::Continued { run: "w~1".into(), input: raw("1") }),
                _ => {}
            }
            let entries = out
                .into_iter()
                .enumerate()
                .map(|(i, e)| JournalEntry::new(i as u64 + 1, Timestamp::from_millis(0), e))
                .collect();
            (entries, steps)
        },
    )
}

fn renumber(events: Vec<Event>) -> Vec<JournalEntry> {
    events.into_iter().enumerate().map(|(i, e)| JournalEntry::new(i as u64 + 1, Timestamp::from_millis(0), e)).collect()
}

proptest! {
    #[test]
    fn valid_journals_fold_to_what_was_planned((journal, steps) in valid_journal()) {
        let state = RunState::fold(&journal).unwrap();
        prop_assert_eq!(state.last_seq(), journal.len() as u64);
        for (path, plan) in &steps {
            let record = state.step(path).unwrap();
            match plan {
                Plan::Step { failures, gives_up: false } => {
                    let ok = matches!(record.status, StepStatus::Completed { attempt, .. } if attempt == failures + 1);
                    prop_assert!(ok);
                }
                Plan::Step { failures, gives_up: true } => {
                    let ok = matches!(record.status, StepStatus::Failed { attempts, .. } if attempts == failures + 1);
                    prop_assert!(ok);
                }
                Plan::Sleep { fired } => prop_assert_eq!(matches!(record.status, StepStatus::Slept), *fired),
                Plan::Wait { received } => prop_assert_eq!(matches!(record.status, StepStatus::Received { .. }), *received),
            }
        }
        let ended = journal.last().is_some_and(|e| e.event.is_terminal());
        prop_assert_eq!(state.phase() != &RunPhase::Active, ended);
    }

    #[test]
    fn any_duplicated_event_is_refused((journal, _) in valid_journal(), pick in any::<prop::sample::Index>(), at in any::<prop::sample::Index>()) {
        let events: Vec<Event> = journal.into_iter().map(|e| e.event).collect();
        let original = pick.index(events.len());
        let insert_at = original + 1 + at.index(events.len() - original);
        let mut mutated = events.clone();
        mutated.insert(insert_at, events[original].clone());
        prop_assert!(RunState::fold(&renumber(mutated)).is_err());
    }

    #[test]
    fn a_missing_sequence_number_is_refused((journal, _) in valid_journal(), pick in any::<prop::sample::Index>()) {
        prop_assume!(journal.len() >= 2);
        let mut entries = journal;
        let drop = pick.index(entries.len() - 1);
        entries.remove(drop);
        prop_assert!(RunState::fold(&entries).is_err());
    }

    #[test]
    fn nothing_is_accepted_after_an_end((journal, _) in valid_journal()) {
        let mut state = RunState::fold(&journal).unwrap();
        prop_assume!(state.phase() != &RunPhase::Active);
        let next = JournalEntry::new(journal.len() as u64 + 1, Timestamp::from_millis(0), Event::Completed { output: raw("1") });
        prop_assert!(state.apply(&next).is_err());
    }

    #[test]
    fn var_sets_anywhere_change_no_step_and_the_last_one_wins(
        (journal, steps) in valid_journal(),
        sets in proptest::collection::vec((0u8..3, any::<u16>(), any::<prop::sample::Index>()), 0..8),
    ) {
        let plain = RunState::fold(&journal).unwrap();
        let mut events: Vec<Event> = journal.into_iter().map(|e| e.event).collect();
        let ended = usize::from(events.last().is_some_and(Event::is_terminal));
        for (name, value, at) in sets {
            let at = 1 + at.index(events.len() - ended);
            events.insert(at, Event::VarSet { name: format!("v{name}"), value: raw(&value.to_string()) });
        }
        let mut last = std::collections::BTreeMap::new();
        for event in &events {
            if let Event::VarSet { name, value } = event {
                last.insert(name.clone(), serde_json::from_str::<serde_json::Value>(value.get()).unwrap());
            }
        }
        let journal = renumber(events);
        let state = RunState::fold(&journal).unwrap();
        for (path, _) in &steps {
            prop_assert_eq!(format!("{:?}", state.step(path)), format!("{:?}", plain.step(path)));
        }
        prop_assert_eq!(state.phase(), plain.phase());
        prop_assert_eq!(cairn_journal::vars(&journal), last);
        let folded: std::collections::BTreeMap<String, serde_json::Value> =
            state.vars().map(|(name, value)| (name.to_owned(), serde_json::from_str(value.get()).unwrap())).collect();
        prop_assert_eq!(folded, cairn_journal::vars(&journal));
    }

    #[test]
    fn a_skipped_scope_is_never_unreached((journal, steps) in valid_journal()) {
        // A body that asks for the top-level steps and skips `inner` (a race's loser) replays.
        let state = RunState::fold(&journal).unwrap();
        let kind = |plan: &Plan| match plan { Plan::Step { .. } => StepKind::Step, Plan::Sleep { .. } => StepKind::Sleep, Plan::Wait { .. } => StepKind::Wait };
        let inner = StepPath::parse("inner").unwrap();
        let mut cursor = ReplayCursor::new(&state);
        for (path, plan) in steps.iter().filter(|(p, _)| p.parent().is_root()) {
            prop_assert!(cursor.request(path, kind(plan)).is_ok());
        }
        let skipped = cursor.skip_within(&inner);
        prop_assert_eq!(skipped, steps.iter().filter(|(p, _)| p.is_within(&inner)).count());
        prop_assert!(cursor.finish().is_ok() && cursor.past_journal());
    }

    #[test]
    fn replay_in_recorded_order_succeeds_and_swaps_fail((journal, steps) in valid_journal(), swap in any::<prop::sample::Index>()) {
        let state = RunState::fold(&journal).unwrap();
        let kind = |plan: &Plan| match plan { Plan::Step { .. } => StepKind::Step, Plan::Sleep { .. } => StepKind::Sleep, Plan::Wait { .. } => StepKind::Wait };
        let mut cursor = ReplayCursor::new(&state);
        for (path, plan) in &steps {
            prop_assert!(cursor.request(path, kind(plan)).is_ok());
        }
        prop_assert!(cursor.finish().is_ok());

        // Swap a step with the next one in the same scope: the first request must be refused.
        let root: Vec<_> = steps.iter().filter(|(p, _)| p.parent().is_root()).collect();
        prop_assume!(root.len() >= 2);
        let i = swap.index(root.len() - 1);
        let mut cursor = ReplayCursor::new(&state);
        for (path, plan) in &root[..i] {
            prop_assert!(cursor.request(path, kind(plan)).is_ok());
        }
        let (path, plan) = root[i + 1];
        prop_assert!(cursor.request(path, kind(plan)).is_err());
    }
}
