use crate::event::StepKind;
use crate::maps::{FastMap, FastSet};
use crate::path::StepPath;
use crate::state::RunState;

/// The workflow body asked for something the journal contradicts.
///
/// The run is parked with this error; the journal is left as it was so that a fixed deployment can
/// resume it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NonDeterminism {
    /// The path exists in the journal with another kind.
    #[error(
        "[CAIRN-E0101] non-determinism at `{path}`: the journal holds a {expected} there but the workflow asked for a {found}"
    )]
    KindMismatch {
        /// The path.
        path: StepPath,
        /// Kind in the journal.
        expected: StepKind,
        /// Kind the body asked for.
        found: StepKind,
    },
    /// Within one scope, the body asked for steps in another order than the journal records.
    #[error(
        "[CAIRN-E0101] non-determinism in scope `{scope}` at position {ordinal}: the journal holds {} there but the workflow asked for {found_kind} `{found}`",
        match (expected, expected_kind) { (Some(p), Some(k)) => format!("{k} `{p}`"), _ => "nothing".to_owned() }
    )]
    OrderMismatch {
        /// The enclosing scope (`` for the run's top level).
        scope: StepPath,
        /// Position within the scope.
        ordinal: u32,
        /// What the journal holds at that position.
        expected: Option<StepPath>,
        /// Its kind.
        expected_kind: Option<StepKind>,
        /// What the body asked for.
        found: StepPath,
        /// Its kind.
        found_kind: StepKind,
    },
    /// A race's journaled winner is not among the branches the body raced.
    #[error(
        "[CAIRN-E0101] non-determinism at race `{path}`: the journal says branch `{winner}` won but the workflow raced no branch of that name"
    )]
    RaceWinnerMissing {
        /// The race's path.
        path: StepPath,
        /// The journaled winner.
        winner: String,
    },
    /// The body finished without asking for a step the journal holds.
    #[error(
        "[CAIRN-E0101] non-determinism: the journal holds {kind} `{path}` but the workflow finished without reaching it"
    )]
    Unreached {
        /// The path never asked for.
        path: StepPath,
        /// Its kind.
        kind: StepKind,
    },
}

/// What the cursor found for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed {
    /// The journal knows this path; its record tells the result.
    Known {
        /// Position within its scope.
        ordinal: u32,
    },
    /// The path is new: the body runs it for the first time.
    New {
        /// Position within its scope.
        ordinal: u32,
    },
}

/// The cursor could not accept a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CursorError {
    /// The body diverged from the journal.
    #[error(transparent)]
    NonDeterminism(#[from] NonDeterminism),
    /// Two steps in one run used the same path.
    #[error(
        "[CAIRN-E0102] two steps in this run use the path `{0}`: give each step a unique name (use `name[i]` in loops)"
    )]
    DuplicatePath(StepPath),
}

/// Walks a run's journal alongside its body, checking every path the body asks for.
///
/// Paths are matched by name, and within each scope by position: the *n*-th step the body asks
/// for in a scope must be the *n*-th the journal recorded there. Steps created together (as
/// `join!` does) are numbered in creation order, so concurrent steps replay correctly whichever
/// finished first.
///
/// ```
/// use cairn_journal::{ReplayCursor, RunState, StepKind, StepPath};
/// let mut cursor = ReplayCursor::new(&RunState::new());
/// let a = StepPath::root().child("a").unwrap();
/// assert!(cursor.request(&a, StepKind::Step).is_ok());
/// assert!(cursor.request(&a, StepKind::Step).is_err()); // the same path twice
/// ```
#[derive(Debug, Default)]
pub struct ReplayCursor {
    /// Each journaled path: its kind, its position in its scope, whether the body asked for it.
    journaled: FastMap<StepPath, (StepKind, u32, bool)>,
    /// Each journaled path by scope and position; built from `journaled` when first needed (a
    /// replay that asks only for journaled paths in order never needs it).
    by_position: Option<FastMap<(StepPath, u32), StepPath>>,
    next_ordinal: FastMap<StepPath, u32>,
    /// Paths the body asked for that the journal does not hold.
    requested_new: FastSet<StepPath>,
    /// How many of the requested paths the journal holds.
    requested_known: usize,
}

impl ReplayCursor {
    /// A cursor over what `state` has journaled.
    pub fn new(state: &RunState) -> Self {
        // Collecting reserves the exact size up front: no rehash while 10,000 paths go in.
        let journaled =
            state.steps().map(|(path, record)| (path.clone(), (record.kind, record.ordinal, false))).collect();
        ReplayCursor { journaled, ..ReplayCursor::default() }
    }

    /// Whether the body has asked for every path the journal holds: from here on it runs code
    /// no earlier execution ran (a [patch marker](crate::Event::Patched) decided now takes the
    /// patched branch; one decided while replaying an older journal does not).
    pub fn past_journal(&self) -> bool {
        self.requested_known == self.journaled.len()
    }

    /// How many paths the body asked for that the journal holds.
    pub fn replayed(&self) -> usize {
        self.requested_known
    }

    /// The body marks `path` as a removed step: if the journal holds it (an older version of the
    /// code ran it), it takes its position as before and is not reported as unreached; if not,
    /// it takes nothing. Returns whether the journal held it.
    pub fn skip_removed(&mut self, path: &StepPath) -> Result<bool, CursorError> {
        match self.journaled.get(path) {
            Some(&(kind, _, _)) => self.request(path, kind).map(|_| true),
            None if self.requested_new.contains(path) => Err(CursorError::DuplicatePath(path.clone())),
            None => Ok(false),
        }
    }

    /// The body will never ask for anything within `scope` again (a race's losing branch, a loop's
    /// past iterations): whatever the journal holds there is neither asked for nor reported as
    /// unreached. Returns how many journaled paths that covered.
    ///
    /// ```
    /// use cairn_journal::{ReplayCursor, RunState, StepPath};
    /// let mut cursor = ReplayCursor::new(&RunState::new());
    /// assert_eq!(cursor.skip_within(&StepPath::parse("slow").unwrap()), 0);
    /// ```
    pub fn skip_within(&mut self, scope: &StepPath) -> usize {
        self.skip_where(|path| path.is_within(scope))
    }

    /// The body resumes the loop at `loop_path` at iteration `next`: whatever the journal holds of
    /// the iterations before it is done and never asked for. Returns how many paths that covered.
    pub fn skip_iterations(&mut self, loop_path: &StepPath, next: u64) -> usize {
        self.skip_where(|path| path.iteration_of(loop_path).is_some_and(|i| i < next))
    }

    /// Marks every journaled path `done` picks as asked for; how many were not yet.
    fn skip_where(&mut self, done: impl Fn(&StepPath) -> bool) -> usize {
        let mut skipped = 0;
        for (path, (_, _, requested)) in &mut self.journaled {
            if !*requested && done(path) {
                *requested = true;
                skipped += 1;
            }
        }
        self.requested_known += skipped;
        skipped
    }

    /// The loop at `loop_path` will never ask for anything of its iterations before `below`
    /// again (they were trimmed): the cursor forgets them, so a loop of a million iterations
    /// keeps only its recent ones in memory.
    pub fn forget_iterations(&mut self, loop_path: &StepPath, below: u64) {
        let old = |path: &StepPath| path.iteration_of(loop_path).is_some_and(|i| i < below);
        let before = self.journaled.len();
        let mut forgotten_known = 0;
        self.journaled.retain(|path, (_, _, requested)| {
            let forget = old(path);
            forgotten_known += usize::from(forget && *requested);
            !forget
        });
        if self.journaled.len() != before {
            self.by_position = None;
            self.requested_known -= forgotten_known;
        }
        self.requested_new.retain(|path| !old(path));
        self.next_ordinal.retain(|scope, _| !old(scope));
    }

    /// The body asks for `path` of `kind`; returns its position and whether the journal knows it.
    pub fn request(&mut self, path: &StepPath, kind: StepKind) -> Result<Replayed, CursorError> {
        let scope = path.parent();
        let ordinal = self.next_ordinal.get(&scope).copied().unwrap_or(0);
        let replayed = match self.journaled.get_mut(path) {
            Some((_, _, true)) => return Err(CursorError::DuplicatePath(path.clone())),
            Some((journal_kind, journal_ordinal, requested)) => {
                if *journal_kind != kind {
                    let expected = *journal_kind;
                    return Err(NonDeterminism::KindMismatch { path: path.clone(), expected, found: kind }.into());
                }
                if *journal_ordinal != ordinal {
                    return Err(self.order_mismatch(scope, ordinal, path, kind).into());
                }
                *requested = true;
                self.requested_known += 1;
                Replayed::Known { ordinal }
            }
            None => {
                // A run with nothing journaled (most fresh runs) has no position to collide with.
                if !self.journaled.is_empty() && self.by_position().contains_key(&(scope.clone(), ordinal)) {
                    if self.requested_new.contains(path) {
                        return Err(CursorError::DuplicatePath(path.clone()));
                    }
                    return Err(self.order_mismatch(scope, ordinal, path, kind).into());
                }
                if !self.requested_new.insert(path.clone()) {
                    return Err(CursorError::DuplicatePath(path.clone()));
                }
                Replayed::New { ordinal }
            }
        };
        self.next_ordinal.insert(scope, ordinal + 1);
        Ok(replayed)
    }

    /// Each journaled path by scope and position.
    fn by_position(&mut self) -> &FastMap<(StepPath, u32), StepPath> {
        let journaled = &self.journaled;
        self.by_position.get_or_insert_with(|| {
            journaled.iter().map(|(path, &(_, ordinal, _))| ((path.parent(), ordinal), path.clone())).collect()
        })
    }

    fn order_mismatch(
        &mut self,
        scope: StepPath,
        ordinal: u32,
        found: &StepPath,
        found_kind: StepKind,
    ) -> NonDeterminism {
        let expected = self.by_position().get(&(scope.clone(), ordinal)).cloned();
        let expected_kind = expected.as_ref().and_then(|p| self.journaled.get(p)).map(|(k, _, _)| *k);
        NonDeterminism::OrderMismatch { scope, ordinal, expected, expected_kind, found: found.clone(), found_kind }
    }

    /// The body has finished: every journaled path must have been asked for.
    pub fn finish(&self) -> Result<(), NonDeterminism> {
        let mut missing: Vec<_> = self.journaled.iter().filter(|(_, (_, _, requested))| !requested).collect();
        missing.sort_by_key(|(p, (_, ordinal, _))| (p.parent(), *ordinal));
        match missing.first() {
            Some((path, (kind, _, _))) => Err(NonDeterminism::Unreached { path: (*path).clone(), kind: *kind }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, JournalEntry, Timestamp};
    use serde_json::value::RawValue;

    fn p(s: &str) -> StepPath {
        StepPath::parse(s).unwrap()
    }

    fn journal(steps: &[(&str, u32)]) -> RunState {
        let mut entries = vec![JournalEntry::new(
            1,
            Timestamp::from_millis(0),
            Event::Started {
                workflow: "w".into(),
                version: 1,
                input: RawValue::from_string("null".into()).unwrap(),
                deadline: None,
                reason: None,
            },
        )];
        for (i, (path, ordinal)) in steps.iter().enumerate() {
            entries.push(JournalEntry::new(
                i as u64 + 2,
                Timestamp::from_millis(0),
                Event::StepCompleted {
                    path: p(path),
                    ordinal: *ordinal,
                    attempt: 1,
                    output: RawValue::from_string("1".into()).unwrap(),
                    started_at: None,
                },
            ));
        }
        RunState::fold(&entries).unwrap()
    }

    #[test]
    fn same_order_replays() {
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("b", 1)]));
        assert_eq!(c.request(&p("a"), StepKind::Step), Ok(Replayed::Known { ordinal: 0 }));
        assert_eq!(c.request(&p("b"), StepKind::Step), Ok(Replayed::Known { ordinal: 1 }));
        assert_eq!(c.request(&p("c"), StepKind::Step), Ok(Replayed::New { ordinal: 2 }));
        assert!(c.finish().is_ok());
    }

    #[test]
    fn concurrent_completion_order_does_not_matter() {
        // b (position 1) finished before a (position 0): the journal order differs, positions do not.
        let mut c = ReplayCursor::new(&journal(&[("b", 1), ("a", 0)]));
        assert!(c.request(&p("a"), StepKind::Step).is_ok());
        assert!(c.request(&p("b"), StepKind::Step).is_ok());
    }

    #[test]
    fn swapped_order_is_reported_with_both_paths() {
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("b", 1)]));
        let err = c.request(&p("b"), StepKind::Step).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("CAIRN-E0101") && text.contains("`a`") && text.contains("`b`"), "{text}");
    }

    #[test]
    fn inserted_step_is_reported() {
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("b", 1)]));
        c.request(&p("a"), StepKind::Step).unwrap();
        let err = c.request(&p("x"), StepKind::Step).unwrap_err();
        assert!(matches!(err, CursorError::NonDeterminism(NonDeterminism::OrderMismatch { ordinal: 1, .. })));
    }

    #[test]
    fn kind_change_is_reported() {
        let mut c = ReplayCursor::new(&journal(&[("a", 0)]));
        let err = c.request(&p("a"), StepKind::Sleep).unwrap_err();
        assert!(matches!(
            err,
            CursorError::NonDeterminism(NonDeterminism::KindMismatch {
                expected: StepKind::Step,
                found: StepKind::Sleep,
                ..
            })
        ));
    }

    #[test]
    fn removed_step_is_reported_at_finish() {
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("b", 1)]));
        c.request(&p("a"), StepKind::Step).unwrap();
        assert!(matches!(c.finish(), Err(NonDeterminism::Unreached { .. })));
    }

    #[test]
    fn scopes_number_independently() {
        let mut c = ReplayCursor::new(&journal(&[("x/a", 0), ("y/a", 0), ("x/b", 1)]));
        assert!(c.request(&p("y/a"), StepKind::Step).is_ok());
        assert!(c.request(&p("x/a"), StepKind::Step).is_ok());
        assert!(c.request(&p("x/b"), StepKind::Step).is_ok());
        assert!(c.finish().is_ok());
    }

    #[test]
    fn removed_steps_replay_old_journals_and_take_nothing_in_new_runs() {
        // Old code ran a, b, c; new code removed b.
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("b", 1), ("c", 2)]));
        c.request(&p("a"), StepKind::Step).unwrap();
        assert_eq!(c.skip_removed(&p("b")), Ok(true));
        assert_eq!(c.request(&p("c"), StepKind::Step), Ok(Replayed::Known { ordinal: 2 }));
        assert!(c.finish().is_ok());
        // A run the new code started: b takes no position.
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("c", 1)]));
        c.request(&p("a"), StepKind::Step).unwrap();
        assert_eq!(c.skip_removed(&p("b")), Ok(false));
        assert_eq!(c.request(&p("c"), StepKind::Step), Ok(Replayed::Known { ordinal: 1 }));
        // Removed where the journal holds it at another position: the order changed.
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("b", 1)]));
        assert!(matches!(c.skip_removed(&p("b")), Err(CursorError::NonDeterminism(_))));
    }

    #[test]
    fn past_journal_once_every_journaled_path_was_asked_for() {
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("b", 1)]));
        assert!(!c.past_journal());
        c.request(&p("a"), StepKind::Step).unwrap();
        assert!(!c.past_journal());
        c.request(&p("b"), StepKind::Step).unwrap();
        assert!(c.past_journal());
        c.request(&p("c"), StepKind::Step).unwrap();
        assert!(c.past_journal());
        assert!(ReplayCursor::new(&RunState::new()).past_journal());
    }

    #[test]
    fn skipped_scopes_are_not_unreached() {
        let mut c = ReplayCursor::new(&journal(&[("a", 0), ("slow/x", 0), ("slow/y[2]/z", 0), ("slowest/x", 0)]));
        c.request(&p("a"), StepKind::Step).unwrap();
        assert_eq!(c.skip_within(&p("slow")), 2);
        assert!(matches!(c.finish(), Err(NonDeterminism::Unreached { path, .. }) if path == p("slowest/x")));
        assert_eq!(c.skip_within(&p("slowest")), 1);
        assert!(c.finish().is_ok() && c.past_journal());
        // Skipping again, or a path already asked for, counts nothing twice.
        assert_eq!(c.skip_within(&p("slow")), 0);
        assert_eq!(c.skip_within(&StepPath::root()), 0);
    }

    #[test]
    fn a_resumed_loop_skips_its_done_iterations_and_forgets_old_ones() {
        let mut c = ReplayCursor::new(&journal(&[("tick[0]/w", 0), ("tick[1]/w", 0), ("tick[2]/w", 0), ("other", 0)]));
        assert_eq!(c.skip_iterations(&p("tick"), 2), 2);
        assert_eq!(c.request(&p("tick[2]/w"), StepKind::Step), Ok(Replayed::Known { ordinal: 0 }));
        assert_eq!(c.request(&p("tick[3]/w"), StepKind::Step), Ok(Replayed::New { ordinal: 0 }));
        assert!(c.request(&p("other"), StepKind::Step).is_ok());
        assert!(c.finish().is_ok() && c.past_journal());
        c.forget_iterations(&p("tick"), 3);
        assert!(c.finish().is_ok() && c.past_journal(), "what was forgotten is not unreached");
        // Iteration 3 is remembered: asking for it again is still a duplicate.
        assert_eq!(c.request(&p("tick[3]/w"), StepKind::Step), Err(CursorError::DuplicatePath(p("tick[3]/w"))));
        c.forget_iterations(&p("tick"), 4);
        assert!(c.request(&p("tick[3]/w"), StepKind::Step).is_ok(), "forgotten for good");
    }

    #[test]
    fn duplicate_paths_are_a_user_error() {
        let mut c = ReplayCursor::new(&RunState::new());
        c.request(&p("a"), StepKind::Step).unwrap();
        assert_eq!(c.request(&p("a"), StepKind::Sleep), Err(CursorError::DuplicatePath(p("a"))));
    }
}
