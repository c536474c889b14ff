//! Journals written by released formats must keep folding, and today's encoder must write them
//! byte for byte the same: the on-disk format never breaks silently.

use cairn_journal::{Event, JournalEntry, RunPhase, RunState, StepPath, StepStatus, Timestamp};

fn load(text: &str) -> Vec<JournalEntry> {
    text.lines()
        .enumerate()
        .map(|(i, line)| JournalEntry::new(i as u64 + 1, Timestamp::from_millis(0), Event::from_json(line).unwrap()))
        .collect()
}

#[test]
fn v1_journal_folds_and_round_trips() {
    let text = include_str!("fixtures/v1-onboard.jsonl");
    let journal = load(text);
    let state = RunState::fold(&journal).unwrap();
    assert_eq!((state.workflow(), state.version()), ("onboard", 1));
    assert_eq!(state.input().unwrap().get(), "\"ada@example.com\"");
    assert_eq!(state.phase(), &RunPhase::Completed(serde_json::value::to_raw_value(&42).unwrap()));
    let send = state.step(&StepPath::parse("send-welcome").unwrap()).unwrap();
    assert!(matches!(send.status, StepStatus::Completed { attempt: 2, .. }));
    let nested = state.step(&StepPath::parse("notify[0]/send").unwrap()).unwrap();
    assert_eq!(nested.ordinal, 0);
    for (line, entry) in text.lines().zip(&journal) {
        assert_eq!(entry.event.to_json(), line, "encoding of a v1 event changed");
    }
}

/// The second format: `started_at` on attempts, patch markers, deterministic helpers (`~now[0]`),
/// branches and items in their own scopes, a race's winner, a saga's compensation and durable
/// values (`var_set`).
#[test]
fn v2_journal_folds_and_round_trips() {
    let text = include_str!("fixtures/v2-compose.jsonl");
    let journal = load(text);
    let state = RunState::fold(&journal).unwrap();
    assert_eq!((state.workflow(), state.version()), ("compose", 2));
    assert_eq!(state.deadline(), Some(Timestamp::from_millis(1_795_995_107_208)));
    assert_eq!(state.patches().get("race-first"), Some(&true));
    assert_eq!(state.phase(), &RunPhase::Completed(serde_json::value::to_raw_value(&150).unwrap()));
    let step = |path: &str| state.step(&StepPath::parse(path).unwrap()).unwrap().clone();
    assert!(matches!(step("right/r2").status, StepStatus::Completed { attempt: 2, .. }));
    assert_eq!((step("left/l2").ordinal, step("item[1]/work").ordinal, step("pick").ordinal), (1, 0, 1));
    assert_eq!(step("pick").completed_output().unwrap().get(), r#"{"winner":"pick-fast"}"#);
    assert!(matches!(step("pick-slow/nap").status, StepStatus::Sleeping { .. }));
    assert_eq!(cairn_journal::vars(&journal)["joined"], serde_json::json!([16, 27, 100]));
    for (line, entry) in text.lines().zip(&journal) {
        assert_eq!(entry.event.to_json(), line, "encoding of a v2 event changed");
    }
}

/// The third format: durable loops' checkpoints (`loop_checkpoint`) and a run that continued as
/// new (`continued`, which ends it).
#[test]
fn v3_journal_folds_and_round_trips() {
    let text = include_str!("fixtures/v3-continued.jsonl");
    let journal = load(text);
    let state = RunState::fold(&journal).unwrap();
    assert_eq!((state.workflow(), state.version()), ("meter", 3));
    assert_eq!(state.phase(), &RunPhase::Continued("meter~1".into()));
    let wait = state.step(&StepPath::parse("tick[1]/go").unwrap()).unwrap();
    assert!(matches!(wait.status, StepStatus::Received { .. }));
    assert_eq!(cairn_journal::vars(&journal)["seen"], serde_json::json!(6));
    for (line, entry) in text.lines().zip(&journal) {
        assert_eq!(entry.event.to_json(), line, "encoding of a v3 event changed");
    }
}
