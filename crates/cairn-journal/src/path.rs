use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Where a step sits in its run: scope names joined by `/`, loop iterations as `name[i]`.
///
/// Paths, not positions, key a run's steps, so concurrently awaited steps replay correctly in
/// whatever order they finished. A segment is 1 to 200 bytes of anything but `/`, `[`, `]` and
/// control characters, optionally followed by an iteration index `[i]`.
///
/// ```
/// use cairn_journal::StepPath;
/// let p = StepPath::root().child("expedition[2]").unwrap().child("analyze[5]").unwrap();
/// assert_eq!(p.as_str(), "expedition[2]/analyze[5]");
/// assert_eq!(p.parent().as_str(), "expedition[2]");
/// assert!(StepPath::root().child("a/b").is_err());
/// ```
///
/// Shared, not copied: a clone (the run keeps the paths it has seen, each step its own) counts a
/// reference instead of allocating the text again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StepPath(Arc<str>);

/// The root's text, shared by every root path (an empty `Arc<str>` would allocate each time).
static ROOT: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from(""));

impl Default for StepPath {
    fn default() -> StepPath {
        StepPath(Arc::clone(&ROOT))
    }
}

impl Serialize for StepPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for StepPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<StepPath, D::Error> {
        let text = String::deserialize(deserializer)?;
        StepPath::try_from(text).map_err(serde::de::Error::custom)
    }
}

/// Why a step name or path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The segment was empty.
    #[error("[CAIRN-E0103] step name is empty")]
    Empty,
    /// The segment was longer than 200 bytes.
    #[error("[CAIRN-E0103] step name `{0}` is longer than 200 bytes")]
    TooLong(String),
    /// The segment held a character that paths reserve.
    #[error(
        "[CAIRN-E0103] step name `{0}` contains `/`, `[`, `]` or a control character outside an iteration suffix `[i]`"
    )]
    InvalidCharacter(String),
}

const MAX_SEGMENT_BYTES: usize = 200;

fn validate_segment(segment: &str) -> Result<(), PathError> {
    if segment.is_empty() {
        return Err(PathError::Empty);
    }
    if segment.len() > MAX_SEGMENT_BYTES {
        return Err(PathError::TooLong(segment.to_owned()));
    }
    let base = match segment.strip_suffix(']') {
        Some(rest) => {
            // By bytes: `[` is ASCII, and a char searcher costs more than the whole check.
            let open =
                rest.bytes().rposition(|b| b == b'[').ok_or_else(|| PathError::InvalidCharacter(segment.to_owned()))?;
            let (base, index) = (&rest[..open], &rest[open + 1..]);
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) || base.is_empty() {
                return Err(PathError::InvalidCharacter(segment.to_owned()));
            }
            base
        }
        None => segment,
    };
    if base.chars().any(|c| c == '/' || c == '[' || c == ']' || c.is_control()) {
        return Err(PathError::InvalidCharacter(segment.to_owned()));
    }
    Ok(())
}

/// Checks a whole path (the empty string is the root).
fn validate(text: &str) -> Result<(), PathError> {
    if !text.is_empty() {
        for segment in text.split('/') {
            validate_segment(segment)?;
        }
    }
    Ok(())
}

impl StepPath {
    /// The empty path: the run itself.
    pub fn root() -> Self {
        Self::default()
    }

    /// This path extended by one segment, checked.
    pub fn child(&self, segment: &str) -> Result<StepPath, PathError> {
        validate_segment(segment)?;
        Ok(self.join_unchecked(segment))
    }

    /// This path extended by `name[index]`, checked.
    pub fn indexed_child(&self, name: &str, index: u64) -> Result<StepPath, PathError> {
        validate_segment(name)?;
        if name.ends_with(']') {
            return Err(PathError::InvalidCharacter(name.to_owned()));
        }
        Ok(self.join_unchecked(&format!("{name}[{index}]")))
    }

    fn join_unchecked(&self, segment: &str) -> StepPath {
        if self.0.is_empty() {
            StepPath(Arc::from(segment))
        } else {
            let mut s = String::with_capacity(self.0.len() + 1 + segment.len());
            s.push_str(&self.0);
            s.push('/');
            s.push_str(segment);
            StepPath(Arc::from(s))
        }
    }

    /// Parses a whole path such as `a/b[3]/c`; the empty string is the root.
    pub fn parse(text: &str) -> Result<StepPath, PathError> {
        validate(text)?;
        Ok(if text.is_empty() { StepPath::root() } else { StepPath(Arc::from(text)) })
    }

    /// The enclosing scope (`a/b` for `a/b/c`, root for `a`).
    pub fn parent(&self) -> StepPath {
        match self.last_slash() {
            Some(i) => StepPath(Arc::from(&self.0[..i])),
            None => StepPath::root(),
        }
    }

    /// Whether this path is `scope` or lies under it (`a/b` is within `a`; `ab` is not).
    ///
    /// ```
    /// use cairn_journal::StepPath;
    /// let p = |s| StepPath::parse(s).unwrap();
    /// assert!(p("a/b").is_within(&p("a")) && p("a").is_within(&p("a")));
    /// assert!(!p("ab").is_within(&p("a")) && !p("a").is_within(&p("a/b")));
    /// ```
    pub fn is_within(&self, scope: &StepPath) -> bool {
        match self.0.strip_prefix(&*scope.0) {
            Some(rest) => rest.is_empty() || scope.0.is_empty() || rest.starts_with('/'),
            None => false,
        }
    }

    /// The iteration `i` when this path lies within the scope `loop_path[i]`.
    ///
    /// ```
    /// use cairn_journal::StepPath;
    /// let p = |s| StepPath::parse(s).unwrap();
    /// assert_eq!(p("tick[12]/work").iteration_of(&p("tick")), Some(12));
    /// assert_eq!(p("tick[3]").iteration_of(&p("tick")), Some(3));
    /// assert_eq!(p("ticker[3]/work").iteration_of(&p("tick")), None);
    /// assert_eq!(p("a/tick[3]").iteration_of(&p("tick")), None);
    /// ```
    pub fn iteration_of(&self, loop_path: &StepPath) -> Option<u64> {
        let rest = self.0.strip_prefix(&*loop_path.0)?.strip_prefix('[')?;
        let (index, rest) = rest.split_once(']')?;
        (rest.is_empty() || rest.starts_with('/')).then(|| index.parse().ok()).flatten()
    }

    /// The last segment (`c[2]` of `a/b/c[2]`; empty at the top level).
    ///
    /// ```
    /// use cairn_journal::StepPath;
    /// assert_eq!(StepPath::parse("a/b/c[2]").unwrap().name(), "c[2]");
    /// assert_eq!(StepPath::root().name(), "");
    /// ```
    pub fn name(&self) -> &str {
        self.last_slash().map_or(&self.0, |i| &self.0[i + 1..])
    }

    /// Where the last `/` is: a byte search, cheaper than a char searcher (`/` is ASCII).
    fn last_slash(&self) -> Option<usize> {
        self.0.bytes().rposition(|b| b == b'/')
    }

    /// Whether this is the run's top level (the empty path).
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StepPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for StepPath {
    type Error = PathError;
    fn try_from(value: String) -> Result<Self, PathError> {
        validate(&value)?;
        Ok(if value.is_empty() { StepPath::root() } else { StepPath(Arc::from(value)) })
    }
}

impl From<StepPath> for String {
    fn from(value: StepPath) -> String {
        value.0.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_names_and_iterations() {
        for ok in ["a", "charge-card", "x[0]", "analyze[15]", "ünïcode", "a.b:c"] {
            assert!(StepPath::root().child(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_reserved_characters() {
        for bad in ["", "a/b", "a[", "a]", "[1]", "a[x]", "a[]", "a[1]b", "tab\there", "a[1][2]"] {
            assert!(StepPath::root().child(bad).is_err(), "{bad:?}");
        }
        assert!(StepPath::root().child(&"x".repeat(201)).is_err());
    }

    #[test]
    fn indexed_child_and_parse_round_trip() {
        let p = StepPath::root().child("loop").unwrap().indexed_child("item", 7).unwrap();
        assert_eq!(p.as_str(), "loop/item[7]");
        assert_eq!(StepPath::parse(p.as_str()).unwrap(), p);
        assert!(StepPath::parse("a//b").is_err());
        assert!(StepPath::root().indexed_child("item[1]", 2).is_err());
    }

    #[test]
    fn serde_checks_paths() {
        assert!(serde_json::from_str::<StepPath>("\"a/b[1]\"").is_ok());
        assert!(serde_json::from_str::<StepPath>("\"a/[1]\"").is_err());
    }
}
