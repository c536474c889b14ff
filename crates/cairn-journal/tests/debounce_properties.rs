//! Debounce (`flow::debounce_wake` and `flow::debounce_until`) over a model of one key's starts:
//! a start while the key's run still debounces joins it; the run starts once the key has been
//! quiet long enough, or at its first start's maximum wait.

use cairn_journal::Timestamp;
use cairn_journal::flow::{debounce_until, debounce_wake};
use proptest::prelude::*;
use std::time::Duration;

/// One window's run: the starts it absorbed and when it starts.
#[derive(Debug)]
struct Window {
    starts: Vec<i64>,
    wake: Timestamp,
    until: Option<Timestamp>,
}

/// Replays starts (in time order) as a store does: a start before its key's run wakes joins it.
fn windows(starts: &[i64], quiet: Duration, max_wait: Option<Duration>) -> Vec<Window> {
    let mut out: Vec<Window> = Vec::new();
    for &at in starts {
        let now = Timestamp::from_millis(at);
        match out.last_mut() {
            Some(open) if now < open.wake => {
                open.starts.push(at);
                open.wake = debounce_wake(now, quiet, open.until);
            }
            _ => {
                let until = debounce_until(now, max_wait);
                out.push(Window { starts: vec![at], wake: debounce_wake(now, quiet, until), until });
            }
        }
    }
    out
}

#[test]
fn fifty_starts_inside_one_window_make_one_run() {
    let starts: Vec<i64> = (0..50).map(|i| i * 100).collect();
    let runs = windows(&starts, Duration::from_secs(1), None);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].starts.len(), 50);
    assert_eq!(runs[0].wake, Timestamp::from_millis(4_900 + 1_000), "quiet for a second after the last");
}

#[test]
fn a_steady_stream_is_cut_at_the_maximum_wait() {
    let starts: Vec<i64> = (0..100).map(|i| i * 100).collect();
    let runs = windows(&starts, Duration::from_secs(1), Some(Duration::from_secs(3)));
    let wakes: Vec<i64> = runs.iter().map(|w| w.wake.as_millis()).collect();
    assert_eq!(wakes[..3], [3_000, 6_000, 9_000]);
    assert_eq!(runs.len(), 4);
}

proptest! {
    #[test]
    fn every_start_lands_in_exactly_one_run_that_starts_after_it(
        gaps in prop::collection::vec(0i64..3_000, 1..60),
        quiet_ms in 1u64..2_000,
        max_wait_ms in prop::option::of(1u64..5_000),
    ) {
        let starts: Vec<i64> = gaps.iter().scan(0, |t, gap| { *t += gap; Some(*t) }).collect();
        let quiet = Duration::from_millis(quiet_ms);
        let max_wait = max_wait_ms.map(Duration::from_millis);
        let runs = windows(&starts, quiet, max_wait);
        prop_assert_eq!(runs.iter().map(|w| w.starts.len()).sum::<usize>(), starts.len());
        for run in &runs {
            let (first, last) = (run.starts[0], run.starts[run.starts.len() - 1]);
            // It starts after the last start it absorbed, so that start's input is the one used.
            prop_assert!(run.wake.as_millis() > last);
            // Quiet for `quiet` after its last start, unless the maximum wait came first.
            let capped = max_wait_ms.map_or(i64::MAX, |m| first + m as i64);
            prop_assert_eq!(run.wake.as_millis(), (last + quiet_ms as i64).min(capped));
            // Inside a window no gap reached the quiet time: each start came before the wake-up.
            for pair in run.starts.windows(2) {
                prop_assert!(pair[1] - pair[0] < quiet_ms as i64);
            }
        }
        for pair in runs.windows(2) {
            // A window closes only when its run woke before the next start.
            prop_assert!(pair[1].starts[0] >= pair[0].wake.as_millis());
        }
    }
}
