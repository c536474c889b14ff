//! Start-time fair queuing (`flow::fair_seq` and `flow::claim_rank`) over a model of one
//! priority's queue: keys take turns, whatever their backlogs.

use cairn_journal::flow::{ClaimRank, claim_rank, fair_seq};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// One priority's queue of ready runs, ordered as a store claims them.
#[derive(Default)]
struct Queue {
    /// (claim rank, key) of each queued run; the creation counter breaks ties, as time does.
    runs: BTreeSet<(ClaimRank, usize)>,
    created: i64,
}

impl Queue {
    fn enqueue(&mut self, key: usize) {
        let last = self.runs.iter().filter(|(_, k)| *k == key).map(|(rank, _)| rank.1).max();
        let head = self.runs.iter().map(|(rank, _)| rank.1).min();
        self.created += 1;
        self.runs.insert((claim_rank(0, fair_seq(last, head), self.created), key));
    }

    fn claim(&mut self) -> Option<usize> {
        self.runs.pop_first().map(|(_, key)| key)
    }
}

#[test]
fn ten_runs_of_one_key_go_before_the_hundredth_of_a_thousand() {
    let mut queue = Queue::default();
    (0..1_000).for_each(|_| queue.enqueue(0));
    (0..10).for_each(|_| queue.enqueue(1));
    let order: Vec<usize> = std::iter::from_fn(|| queue.claim()).collect();
    let last_of_b = order.iter().rposition(|k| *k == 1).expect("b claimed");
    let a_before = order[..last_of_b].iter().filter(|k| **k == 0).count();
    assert_eq!(a_before, 10, "b's runs alternate with a's: {:?}", &order[..25]);
}

#[test]
fn a_key_gets_no_credit_for_the_backlog_another_has_worked_off() {
    let mut queue = Queue::default();
    (0..1_000).for_each(|_| queue.enqueue(0));
    (0..500).for_each(|_| assert_eq!(queue.claim(), Some(0)));
    (0..1_000).for_each(|_| queue.enqueue(1));
    let next: Vec<usize> = (0..20).filter_map(|_| queue.claim()).collect();
    assert_eq!(next.iter().filter(|k| **k == 0).count(), 10, "a and b alternate: {next:?}");
}

proptest! {
    /// Backlogs of any sizes, queued in any interleaving: at every point of the claim order, no
    /// key that still has queued runs has been served more than once beyond another.
    #[test]
    fn keys_with_queued_runs_take_turns(
        backlog in proptest::collection::vec(1usize..60, 1..5),
        shuffle in any::<u64>(),
    ) {
        let mut arrivals: Vec<usize> = backlog.iter().enumerate().flat_map(|(key, n)| std::iter::repeat_n(key, *n)).collect();
        let mut state = shuffle | 1;
        for i in (1..arrivals.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            arrivals.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let mut queue = Queue::default();
        arrivals.iter().for_each(|key| queue.enqueue(*key));
        let mut served = vec![0usize; backlog.len()];
        while let Some(key) = queue.claim() {
            served[key] += 1;
            let waiting: Vec<usize> = (0..backlog.len()).filter(|k| served[*k] < backlog[*k]).collect();
            for a in &waiting {
                for b in &waiting {
                    prop_assert!(served[*a] <= served[*b] + 1, "served {served:?} of {backlog:?}");
                }
            }
        }
    }
}
