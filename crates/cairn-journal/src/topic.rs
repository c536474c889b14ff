//! Topics that events are published to, and the patterns workflows subscribe to them with.
//!
//! A topic is one or more segments joined by `.` (`user.signup`), each segment 1 or more ASCII
//! letters, digits, `_` or `-`, the whole at most 200 bytes. A pattern is written the same way,
//! except that a segment may be `*`, which matches exactly one segment of a topic: `user.*`
//! matches `user.signup` but neither `user` nor `user.signup.retry`.
//!
//! ```
//! use cairn_journal::topic;
//! assert!(topic::matches("user.*", "user.signup"));
//! assert!(!topic::matches("user.*", "user.signup.retry"));
//! assert!(topic::check_topic("user.*").is_err());
//! assert!(topic::check_pattern("user.*").is_ok());
//! ```

/// Longest topic or pattern, in bytes.
pub const MAX_TOPIC_BYTES: usize = 200;

/// The segment of a pattern that matches any one segment of a topic.
pub const WILDCARD: &str = "*";

/// Why a topic or a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "[{code}] {what} {given:?} must be 1 to {MAX_TOPIC_BYTES} bytes of segments joined by `.`, \
     each of ASCII letters, digits, `_` or `-`{wildcard}",
    code = TopicError::CODE
)]
pub struct TopicError {
    what: &'static str,
    given: String,
    wildcard: &'static str,
}

impl TopicError {
    /// Its stable code (see `docs/errors.md`).
    pub const CODE: &'static str = "CAIRN-E0308";
}

fn check(given: &str, pattern: bool) -> Result<(), TopicError> {
    let segment_ok = |segment: &str| {
        (pattern && segment == WILDCARD)
            || (!segment.is_empty() && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
    };
    if given.is_empty() || given.len() > MAX_TOPIC_BYTES || !given.split('.').all(segment_ok) {
        let (what, wildcard) = if pattern { ("topic pattern", " (or `*`: any one segment)") } else { ("topic", "") };
        return Err(TopicError { what, given: given.to_owned(), wildcard });
    }
    Ok(())
}

/// A topic events can be published to, checked once when made ([`check_topic`]'s rules).
///
/// ```
/// use cairn_journal::topic::Topic;
/// assert_eq!(Topic::new("user.signup").map(|t| t.to_string()), Ok("user.signup".to_owned()));
/// assert!(Topic::new("user.*").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Topic(String);

impl Topic {
    /// `topic`, if it is one events can be published to.
    pub fn new(topic: impl Into<String>) -> Result<Topic, TopicError> {
        let topic = topic.into();
        check_topic(&topic)?;
        Ok(Topic(topic))
    }

    /// The topic's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks that `topic` is a topic events can be published to (no wildcards).
pub fn check_topic(topic: &str) -> Result<(), TopicError> {
    check(topic, false)
}

/// Checks that `pattern` is a topic pattern a workflow can subscribe with.
pub fn check_pattern(pattern: &str) -> Result<(), TopicError> {
    check(pattern, true)
}

/// Whether `pattern` matches `topic`: as many segments, each equal or `*`.
pub fn matches(pattern: &str, topic: &str) -> bool {
    let (mut wanted, mut given) = (pattern.split('.'), topic.split('.'));
    loop {
        match (wanted.next(), given.next()) {
            (None, None) => return true,
            (Some(w), Some(g)) if w == WILDCARD || w == g => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wildcards_match_exactly_one_segment() {
        assert!(matches("user.signup", "user.signup"));
        assert!(matches("user.*", "user.signup"));
        assert!(matches("*.signup", "user.signup"));
        assert!(matches("*", "user"));
        assert!(!matches("*", "user.signup"));
        assert!(!matches("user.*", "user"));
        assert!(!matches("user.*", "user.signup.retry"));
        assert!(!matches("user.signup", "user.signupx"));
        assert!(!matches("user.signup", "user"));
    }

    #[test]
    fn topics_and_patterns_are_checked() {
        for good in ["user", "user.signup", "a-b_c.D9", &"a".repeat(MAX_TOPIC_BYTES)] {
            assert_eq!(check_topic(good), Ok(()), "{good}");
            assert_eq!(check_pattern(good), Ok(()), "{good}");
        }
        for bad in ["", ".", "user.", ".user", "user..signup", "user signup", "usér", "user/x", &"a".repeat(201)] {
            assert!(check_topic(bad).is_err(), "{bad:?}");
            assert!(check_pattern(bad).is_err(), "{bad:?}");
        }
        assert!(check_topic("user.*").is_err());
        assert!(check_pattern("user.*").is_ok());
        assert!(check_pattern("*.*").is_ok());
        assert!(check_pattern("user.si*").is_err());
        let error = check_pattern("user.**").unwrap_err().to_string();
        assert!(error.contains("CAIRN-E0308") && error.contains("user.**"), "{error}");
    }

    proptest! {
        /// A topic matches itself, and every pattern made from it by turning segments into `*`;
        /// a pattern with one segment more or fewer never matches.
        #[test]
        fn patterns_made_from_a_topic_match_it(
            segments in prop::collection::vec("[a-z0-9_-]{1,6}", 1..6),
            stars in prop::collection::vec(any::<bool>(), 6),
        ) {
            let topic = segments.join(".");
            prop_assert!(check_topic(&topic).is_ok());
            prop_assert!(matches(&topic, &topic));
            let pattern: Vec<&str> = segments.iter().zip(&stars).map(|(s, star)| if *star { WILDCARD } else { s.as_str() }).collect();
            let pattern = pattern.join(".");
            prop_assert!(check_pattern(&pattern).is_ok());
            prop_assert!(matches(&pattern, &topic));
            let longer = format!("{pattern}.*");
            prop_assert!(!matches(&longer, &topic));
            if let Some((shorter, _)) = pattern.rsplit_once('.') {
                prop_assert!(!matches(shorter, &topic));
            }
        }
    }
}
