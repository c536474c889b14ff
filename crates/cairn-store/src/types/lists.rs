//! Reading runs back in pages and counts.

use super::record::*;
use super::run::*;
use cairn_journal::Timestamp;

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only this workflow.
    pub workflow: Option<String>,
    /// Only this status.
    pub status: Option<RunStatus>,
    /// Created at or after.
    pub created_after: Option<Timestamp>,
    /// Created before.
    pub created_before: Option<Timestamp>,
    /// Only restarts of this run.
    pub restarted_from: Option<RunId>,
    /// Only children of this run.
    pub parent: Option<RunId>,
    /// Only stranded runs, given the workflow versions live workers serve: runs that
    /// [need a worker](RunStatus::needs_worker) whose `(workflow, version)` is not in this list.
    pub stranded: Option<Vec<WorkflowKey>>,
    /// Only runs whose input contains this JSON, as PostgreSQL's `@>` (see
    /// [`cairn_journal::json_contains`]): `{"customer": 42}` keeps runs whose input has
    /// `"customer": 42` among its fields.
    pub input_contains: Option<serde_json::Value>,
    /// Only runs whose id starts with this text (an empty prefix keeps every run).
    pub id_prefix: Option<String>,
    /// Only runs whose error holds this text, ignoring the case of ASCII letters (`"Card"`
    /// finds `"the card service is down"`). Runs without an error never match.
    pub error_contains: Option<String>,
    /// Page size (default 100, at most 1000).
    pub limit: Option<usize>,
    /// Continue after this cursor (from [`RunPage::next_cursor`]).
    pub cursor: Option<PageCursor>,
    /// Leave each run's input and output out (`null` and `None`): a list that does not show
    /// them reads none of their bytes (a page of runs with megabytes of input each costs what
    /// one of small runs does).
    pub without_payloads: bool,
}

impl RunFilter {
    /// The page size in force.
    pub fn page_size(&self) -> usize {
        self.limit.unwrap_or(100).clamp(1, 1000)
    }

    /// The [`stranded`](RunFilter::stranded) list as `name@version` tags, the form SQL stores
    /// match on.
    pub fn stranded_tags(&self) -> Option<Vec<String>> {
        self.stranded.as_ref().map(|keys| keys.iter().map(WorkflowKey::tag).collect())
    }

    /// Whether `run` passes the filter (the cursor included).
    pub fn matches(&self, run: &RunRecord) -> bool {
        self.workflow.as_ref().is_none_or(|w| &run.workflow == w)
            && self.status.is_none_or(|s| run.status == s)
            && self.created_after.is_none_or(|t| run.created_at >= t)
            && self.created_before.is_none_or(|t| run.created_at < t)
            && self.restarted_from.as_ref().is_none_or(|r| run.rare().restarted_from.as_ref() == Some(r))
            && self.parent.as_ref().is_none_or(|p| run.rare().parent.as_ref() == Some(p))
            && self.stranded.as_ref().is_none_or(|served| {
                run.status.needs_worker() && !served.iter().any(|k| k.name == run.workflow && k.version == run.version)
            })
            && self.cursor.as_ref().is_none_or(|c| (run.created_at, &run.id) < (c.created_at, &c.id))
            && self.input_contains.as_ref().is_none_or(|needle| {
                serde_json::from_str(run.input.get()).is_ok_and(|input| cairn_journal::json_contains(&input, needle))
            })
            && self.id_prefix.as_ref().is_none_or(|prefix| run.id.as_str().starts_with(prefix.as_str()))
            && self.error_contains.as_deref().is_none_or(|needle| {
                run.error.as_deref().is_some_and(|error| contains_ignoring_ascii_case(error, needle))
            })
    }

    /// [`error_contains`](RunFilter::error_contains) with its ASCII letters in lower case, the
    /// form stores match against an error lowered the same way.
    pub fn error_needle(&self) -> Option<String> {
        self.error_contains.as_deref().map(str::to_ascii_lowercase)
    }

    /// The least text above every id that starts with [`id_prefix`](RunFilter::id_prefix), in
    /// the order of code points (UTF-8 bytes): with the prefix, the bounds of a range scan of an
    /// id index. `None` when no such text exists (every character is `char::MAX`) or there is
    /// no prefix.
    ///
    /// ```
    /// use cairn_store::RunFilter;
    /// let filter = RunFilter { id_prefix: Some("order-1".into()), ..RunFilter::default() };
    /// assert_eq!(filter.id_prefix_end().as_deref(), Some("order-2"));
    /// ```
    pub fn id_prefix_end(&self) -> Option<String> {
        let mut end: Vec<char> = self.id_prefix.as_deref()?.chars().collect();
        while let Some(last) = end.pop() {
            // The next code point, skipping the surrogates (no `char` holds one).
            let next = match last as u32 + 1 {
                0xD800 => Some('\u{E000}'),
                n => char::from_u32(n),
            };
            if let Some(next) = next {
                end.push(next);
                return Some(end.into_iter().collect());
            }
        }
        None
    }

    /// [`input_contains`](RunFilter::input_contains) as JSON text, the form SQL stores take.
    pub fn input_json(&self) -> Option<String> {
        self.input_contains.as_ref().map(serde_json::Value::to_string)
    }
}

/// Whether `text` holds `needle`, ASCII letters of either case alike (without lowering copies).
fn contains_ignoring_ascii_case(text: &str, needle: &str) -> bool {
    needle.is_empty()
        || text.as_bytes().windows(needle.len()).any(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}

/// How many runs of one workflow version [need a worker](RunStatus::needs_worker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionCount {
    /// The workflow version.
    pub key: WorkflowKey,
    /// How many of its runs are pending, running or suspended.
    pub runs: u64,
}

/// How many runs of one workflow have one status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowCount {
    /// The workflow.
    pub workflow: String,
    /// The status.
    pub status: RunStatus,
    /// How many of its runs have it (never 0 in [`RunStore::workflow_counts`](crate::RunStore::workflow_counts)).
    pub runs: u64,
}

/// Where a page ended: the `(created_at, id)` of its last run (pages run newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    /// Creation time of the last run listed.
    pub created_at: Timestamp,
    /// Its id.
    pub id: RunId,
}

impl PageCursor {
    /// The opaque text form, for APIs and the CLI.
    pub fn encode(&self) -> String {
        join_cursor(self.created_at, self.id.as_str())
    }

    /// Parses [`PageCursor::encode`]'s text.
    pub fn decode(text: &str) -> Result<PageCursor, StoreError> {
        let (created_at, id) = split_cursor(text)?;
        Ok(PageCursor { created_at, id: RunId::new(id) })
    }
}

/// A page cursor's text: `<millis>:<id>` of the last item listed.
pub(super) fn join_cursor(at: Timestamp, id: &str) -> String {
    format!("{}:{id}", at.as_millis())
}

/// A page cursor's text ([`join_cursor`]) split into its time and id. No id holds a control
/// character, so a cursor with one is refused here rather than by a store (PostgreSQL's text
/// holds no NUL).
pub(super) fn split_cursor(text: &str) -> Result<(Timestamp, &str), StoreError> {
    let bad = || StoreError::InvalidInput(format!("invalid page cursor {text:?}"));
    let (millis, id) = text.split_once(':').filter(|(_, id)| !id.contains(char::is_control)).ok_or_else(bad)?;
    Ok((Timestamp::from_millis(millis.parse::<i64>().map_err(|_| bad())?), id))
}

/// One page of runs.
#[derive(Debug, Clone)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<RunRecord>,
    /// Where the next page starts, if there may be one.
    pub next_cursor: Option<PageCursor>,
}

impl RunPage {
    /// A page from `runs` fetched with one more than `size` (newest first): the extra run, if
    /// any, only tells that another page follows.
    pub fn cut(mut runs: Vec<RunRecord>, size: usize) -> RunPage {
        let next_cursor = cut(&mut runs, size, |last| PageCursor { created_at: last.created_at, id: last.id.clone() });
        RunPage { runs, next_cursor }
    }

    /// The page with its runs' input and output left out, as
    /// [`RunFilter::without_payloads`] asks (for a store that holds them in memory anyway).
    pub fn without_payloads(mut self) -> RunPage {
        for run in &mut self.runs {
            run.input = serde_json::value::RawValue::NULL.to_owned();
            run.output = None;
        }
        self
    }
}

/// Cuts `items`, fetched with one more than `size`, to `size`; the cursor `cursor` makes of the
/// last item kept when the extra one shows that another page follows.
pub(super) fn cut<T, C>(items: &mut Vec<T>, size: usize, cursor: impl FnOnce(&T) -> C) -> Option<C> {
    let next = (items.len() > size && size > 0).then(|| cursor(&items[size - 1]));
    items.truncate(size);
    next
}
