//! Journals written by released formats must keep folding, and today's encoder must write them
//! byte for byte the same: the on-disk format never breaks silently.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

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
