//! Flow control, the pure part: which concurrency group a run belongs to, whether a run holds
//! one of its group's slots, and where a queued run stands among the runs of its priority
//! (fairness between keys). The stores keep the counts and the queues; these rules say what
//! they count and how they order.

use crate::time::Timestamp;
use serde_json::Value;
use std::time::Duration;

/// What a queued run waits for before a worker may claim it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitingFor {
    /// A free slot of its concurrency group.
    Concurrency,
    /// Its turn under a rate limit: it is suspended until the limit lets it start or run its
    /// next step.
    Rate,
    /// The end of its debounce window: later starts with its debounce key replace its input
    /// and push its start back until the key has been quiet long enough (or its maximum wait is
    /// up) ([`debounce_wake`]).
    Debounce,
}

impl WaitingFor {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingFor::Concurrency => "concurrency",
            WaitingFor::Rate => "rate",
            WaitingFor::Debounce => "debounce",
        }
    }

    /// Reads a stored name.
    pub fn parse(text: &str) -> Option<WaitingFor> {
        match text {
            "concurrency" => Some(WaitingFor::Concurrency),
            "rate" => Some(WaitingFor::Rate),
            "debounce" => Some(WaitingFor::Debounce),
            _ => None,
        }
    }

    /// Reads a row's `waiting_for` column; a name this release does not know is refused.
    pub fn stored(text: Option<&str>) -> Result<Option<WaitingFor>, String> {
        text.map(|t| WaitingFor::parse(t).ok_or_else(|| format!("unknown waiting_for {t:?}"))).transpose()
    }
}

impl std::fmt::Display for WaitingFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a JSON pointer was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointerError(pub String);

impl std::fmt::Display for PointerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The reference tokens of a JSON pointer (RFC 6901): `""` is the whole input, `/customer/id`
/// is `["customer", "id"]`, `~1` and `~0` stand for `/` and `~`.
///
/// ```
/// use cairn_journal::flow::pointer_tokens;
/// assert_eq!(pointer_tokens("/customer/id").unwrap(), ["customer", "id"]);
/// assert_eq!(pointer_tokens("/a~1b").unwrap(), ["a/b"]);
/// assert!(pointer_tokens("customer").is_err());
/// ```
pub fn pointer_tokens(pointer: &str) -> Result<Vec<String>, PointerError> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(PointerError(format!("the key {pointer:?} is not a JSON pointer: it must start with '/'")));
    };
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                match c {
                    '~' => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return Err(PointerError(format!("the key {pointer:?} has a '~' not followed by 0 or 1"))),
                    },
                    c => out.push(c),
                }
            }
            Ok(out)
        })
        .collect()
}

/// The concurrency key of a run's input: the value at `pointer` (from [`pointer_tokens`]) as text
/// (a string without its quotes, anything else as compact JSON), or `""` where the input has no
/// value there or `null`. Runs with equal keys share their slots.
///
/// ```
/// use cairn_journal::flow::key_of;
/// use serde_json::json;
/// let tokens = ["customer".to_owned()];
/// assert_eq!(key_of(&json!({"customer": "acme", "n": 1}), &tokens), "acme");
/// assert_eq!(key_of(&json!({"customer": 42}), &tokens), "42");
/// assert_eq!(key_of(&json!({"other": 1}), &tokens), "");
/// ```
pub fn key_of(input: &Value, tokens: &[String]) -> String {
    let mut at = input;
    for token in tokens {
        at = match at {
            Value::Object(map) => match map.get(token) {
                Some(value) => value,
                None => return String::new(),
            },
            Value::Array(items) => match token.parse::<usize>().ok().and_then(|i| items.get(i)) {
                Some(value) => value,
                None => return String::new(),
            },
            _ => return String::new(),
        };
    }
    match at {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The key a flow rule (a concurrency rule, a rate limit) gives a run with raw `input`: [`key_of`]
/// at `pointer`, or `""` for a rule without one. A pointer that is not one, or an input that is
/// not JSON (neither passes the rules' and starts' checks), give `""` too.
///
/// ```
/// use cairn_journal::flow::key_in;
/// let input = serde_json::value::RawValue::from_string(r#"{"customer":"acme"}"#.into()).unwrap();
/// assert_eq!(key_in(&input, Some("/customer")), "acme");
/// assert_eq!(key_in(&input, None), "");
/// ```
pub fn key_in(input: &serde_json::value::RawValue, pointer: Option<&str>) -> String {
    let Some(pointer) = pointer else { return String::new() };
    let tokens = pointer_tokens(pointer).unwrap_or_default();
    let input: Value = serde_json::from_str(input.get()).unwrap_or_default();
    key_of(&input, &tokens)
}

/// Whether a run in a concurrency group holds one of its slots: it was admitted (it does not
/// wait for a slot) and it is queued for a worker, running, or suspended under a rule that
/// keeps a suspended run's slot (`hold_suspended`). Every other run holds none.
pub fn holds_slot(status: &str, waiting: bool, hold_suspended: bool) -> bool {
    !waiting && (status == "pending" || status == "running" || (status == "suspended" && hold_suspended))
}

/// The longest fairness key a run may carry, in characters.
pub const MAX_FAIRNESS_KEY_CHARS: usize = 200;

/// Checks a fairness key a caller gave: 1 to [`MAX_FAIRNESS_KEY_CHARS`] characters, no control
/// characters.
///
/// ```
/// use cairn_journal::flow::check_fairness_key;
/// assert!(check_fairness_key("tenant-7").is_ok());
/// assert!(check_fairness_key("").is_err());
/// ```
pub fn check_fairness_key(key: &str) -> Result<(), String> {
    check_key("fairness", key)
}

/// Checks a key a caller gave for a flow rule (`what`: fairness, debounce): 1 to
/// [`MAX_FAIRNESS_KEY_CHARS`] bytes, no control characters.
fn check_key(what: &str, key: &str) -> Result<(), String> {
    if key.is_empty() || key.chars().enumerate().any(|(i, c)| i >= MAX_FAIRNESS_KEY_CHARS || c.is_control()) {
        return Err(format!(
            "the {what} key {key:?} must be 1 to {MAX_FAIRNESS_KEY_CHARS} characters without control characters"
        ));
    }
    Ok(())
}

/// The longest quiet time or maximum wait a debounced start may ask for: 30 days.
pub const MAX_DEBOUNCE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Checks a debounced start's key (as [`check_fairness_key`] does), its quiet time and its
/// maximum wait (each from 1 ms to [`MAX_DEBOUNCE`]).
///
/// ```
/// use cairn_journal::flow::check_debounce;
/// use std::time::Duration;
/// assert!(check_debounce("order-7", Duration::from_secs(2), Some(Duration::from_secs(60))).is_ok());
/// assert!(check_debounce("order-7", Duration::ZERO, None).is_err());
/// assert!(check_debounce("", Duration::from_secs(2), None).is_err());
/// ```
pub fn check_debounce(key: &str, quiet: Duration, max_wait: Option<Duration>) -> Result<(), String> {
    check_key("debounce", key)?;
    for (what, wait) in [("quiet time", Some(quiet)), ("maximum wait", max_wait)] {
        if let Some(wait) = wait.filter(|w| w.as_millis() < 1 || *w > MAX_DEBOUNCE) {
            return Err(format!("the debounce {what} {wait:?} must be from 1 ms to 30 days"));
        }
    }
    Ok(())
}

/// When a debounced run starts, as of a start at `now` that asked for `quiet`: once its key has
/// been quiet for `quiet` after this (its latest) start, but no later than `until`, the first
/// start of its window plus that start's maximum wait ([`debounce_until`]). Each later start of
/// the window moves it again.
///
/// ```
/// use cairn_journal::{Timestamp, flow::debounce_wake};
/// use std::time::Duration;
/// let at = Timestamp::from_millis;
/// assert_eq!(debounce_wake(at(1_000), Duration::from_secs(2), None), at(3_000));
/// assert_eq!(debounce_wake(at(9_000), Duration::from_secs(2), Some(at(10_000))), at(10_000));
/// ```
pub fn debounce_wake(now: Timestamp, quiet: Duration, until: Option<Timestamp>) -> Timestamp {
    let quiet_after = now + quiet;
    until.map_or(quiet_after, |until| quiet_after.min(until))
}

/// The latest a debounce window opened at `first` may start its run: `first + max_wait`, or
/// never capped without a maximum wait.
pub fn debounce_until(first: Timestamp, max_wait: Option<Duration>) -> Option<Timestamp> {
    max_wait.map(|wait| first + wait)
}

/// The fairness sequence of a run queued with a key (start-time fair queuing): one past the
/// last queued run of its key and priority (`last_of_key`), but never behind the head of its
/// priority's queue (`head`, the smallest sequence queued there). Within a priority, workers
/// claim runs in sequence order (ties by creation), so keys take turns: a key with 100,000
/// queued runs holds sequences far ahead, while a key arriving with 10 starts at the head and
/// is served between them. A key whose queue emptied starts again at the head, neither behind
/// (its old runs are gone) nor ahead (no credit for having been idle). Runs without a key share
/// the key `""`.
///
/// ```
/// use cairn_journal::flow::fair_seq;
/// assert_eq!(fair_seq(None, None), 0); // the first run of an empty queue
/// assert_eq!(fair_seq(Some(41), Some(3)), 42); // behind its key's own runs
/// assert_eq!(fair_seq(None, Some(3)), 3); // a new key starts at the head
/// assert_eq!(fair_seq(Some(1), Some(3)), 3); // and is never left behind it
/// ```
pub fn fair_seq(last_of_key: Option<i64>, head: Option<i64>) -> i64 {
    let after_key = last_of_key.map_or(0, |last| last.saturating_add(1));
    after_key.max(head.unwrap_or(0))
}

/// A ready run's place in the claim order ([`claim_rank`]): smaller is claimed first.
pub type ClaimRank = (std::cmp::Reverse<i32>, i64, i64);

/// The order in which a worker claims ready runs: higher priority first, then fairness sequence
/// ([`fair_seq`]), then when it became due (creation, wake-up or lease expiry). Sorting by this
/// key ascending gives the claim order.
pub fn claim_rank(priority: i32, fair_seq: i64, due_millis: i64) -> ClaimRank {
    (std::cmp::Reverse(priority), fair_seq, due_millis)
}

/// Grants at or before this time may be forgotten by a bucket asked at `now`: two periods back,
/// not one, because askers on other workers (or other tasks) may ask a moment later with a
/// clock a moment behind, and to them a grant just outside `now`'s window is still inside theirs
/// (forgotten early, it let a fifth turn into a window of four in a test with three workers).
pub fn rate_forgets_before(now: i64, period_ms: i64) -> i64 {
    now.saturating_sub(period_ms.saturating_mul(2))
}

/// The bucket a rate limit counts in: what it limits (`"start"` of `workflow`, or executions of
/// `step` in it) and the key its input gave. Distinct limits never share a bucket, whatever
/// characters their names hold.
///
/// ```
/// use cairn_journal::flow::rate_bucket;
/// assert_eq!(rate_bucket("sync", None, "acme"), r#"["start","sync","acme"]"#);
/// assert_eq!(rate_bucket("sync", Some("call-api"), ""), r#"["step","sync","call-api",""]"#);
/// ```
pub fn rate_bucket(workflow: &str, step: Option<&str>, key: &str) -> String {
    match step {
        None => serde_json::json!(["start", workflow, key]).to_string(),
        Some(step) => serde_json::json!(["step", workflow, step, key]).to_string(),
    }
}

/// Whether a rate limit of `limit` per `period_ms` lets one more through at `now`, given the
/// times of the grants its bucket has made (`granted`, in any order): `None` if it does (fewer
/// than `limit` of them after `now - period_ms`, later ones included: another asker's clock may
/// be ahead), else the first moment it will (when enough of those grants have aged out of the
/// window). So any half-open window of `period_ms` holds at most `limit` grants, whatever order
/// the askers' times come in.
///
/// ```
/// use cairn_journal::flow::rate_verdict;
/// assert_eq!(rate_verdict(&[100, 900], 2, 1_000, 1_000), Some(1_100));
/// assert_eq!(rate_verdict(&[100, 900], 2, 1_000, 1_100), None);
/// assert_eq!(rate_verdict(&[100, 900], 3, 1_000, 1_000), None);
/// ```
pub fn rate_verdict(granted: &[i64], limit: u32, period_ms: i64, now: i64) -> Option<i64> {
    let mut within: Vec<i64> = granted.iter().copied().filter(|at| *at > now - period_ms).collect();
    let limit = limit.max(1) as usize;
    if within.len() < limit {
        return None;
    }
    within.sort_unstable();
    // The grant whose ageing out leaves `limit - 1` in the window.
    Some(within[within.len() - limit] + period_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_and_keys() {
        assert_eq!(pointer_tokens("").unwrap(), Vec::<String>::new());
        assert_eq!(pointer_tokens("/a~0b/0").unwrap(), ["a~b", "0"]);
        assert!(pointer_tokens("/a~2").is_err());
        let items = pointer_tokens("/items/1").unwrap();
        assert_eq!(key_of(&json!({"items": ["x", "y"]}), &items), "y");
        assert_eq!(key_of(&json!({"items": ["x"]}), &items), "");
        assert_eq!(key_of(&json!({"c": true}), &pointer_tokens("/c").unwrap()), "true");
        assert_eq!(key_of(&json!({"c": null}), &pointer_tokens("/c").unwrap()), "");
        assert_eq!(key_of(&json!("whole"), &[]), "whole");
    }

    #[test]
    fn who_holds_a_slot() {
        assert!(holds_slot("pending", false, false));
        assert!(!holds_slot("pending", true, false));
        assert!(holds_slot("running", false, false));
        assert!(!holds_slot("suspended", false, false));
        assert!(holds_slot("suspended", false, true));
        for ended in ["completed", "failed", "cancelled", "continued", "paused"] {
            assert!(!holds_slot(ended, false, true));
        }
    }

    #[test]
    fn fairness_keys() {
        assert!(check_fairness_key(&"k".repeat(MAX_FAIRNESS_KEY_CHARS)).is_ok());
        assert!(check_fairness_key(&"k".repeat(MAX_FAIRNESS_KEY_CHARS + 1)).is_err());
        assert!(check_fairness_key("a\nb").is_err());
    }

    #[test]
    fn claims_rank_priority_then_fairness_then_time() {
        let mut ranks = [claim_rank(0, 0, 1), claim_rank(5, 9, 9), claim_rank(0, 0, 0), claim_rank(-1, 0, 0)];
        ranks.sort();
        assert_eq!(ranks, [claim_rank(5, 9, 9), claim_rank(0, 0, 0), claim_rank(0, 0, 1), claim_rank(-1, 0, 0)]);
    }

    #[test]
    fn rate_verdicts_keep_every_window_under_the_limit() {
        // Grants taken whenever allowed, asked every 7 ms: no 1,000 ms window holds more than 3.
        let mut granted: Vec<i64> = Vec::new();
        let mut now = 0;
        while now < 10_000 {
            match rate_verdict(&granted, 3, 1_000, now) {
                None => granted.push(now),
                Some(at) => assert!(at > now, "a refusal names a later time"),
            }
            now += 7;
        }
        for (i, first) in granted.iter().enumerate() {
            let in_window = granted[i..].iter().take_while(|at| **at < first + 1_000).count();
            assert!(in_window <= 3, "{in_window} grants from {first}");
        }
        assert!(granted.len() >= 30, "{} grants in 10 s", granted.len());
        // Askers whose times come out of order: forgetting only what is two periods old keeps a
        // late asker with an earlier clock from a fifth turn.
        let mut kept = vec![1_004, 1_005, 1_006];
        for now in [2_006, 2_000, 2_001] {
            kept.retain(|at| *at > rate_forgets_before(now, 1_000));
            if rate_verdict(&kept, 4, 1_000, now).is_none() {
                kept.push(now);
            }
        }
        kept.sort();
        assert_eq!(kept, [1_004, 1_005, 1_006, 2_006], "2,000 and 2,001 each found 4 in their window");
        // A refused take is told when the window has room, and then it has.
        assert_eq!(rate_verdict(&[0, 10, 20], 3, 1_000, 500), Some(1_000));
        assert_eq!(rate_verdict(&[0, 10, 20], 3, 1_000, 1_000), None);
    }
}
