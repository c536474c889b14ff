//! The rules every payload (an input, a signal, a published event, an output) keeps, so that each
//! store holds it and each run reads it back: checked in one pass over the JSON text where a
//! payload comes in.

/// The most levels of arrays and objects a payload may nest: every payload is read back with
/// serde_json, whose recursion limit (128) a deeper one would break only when a run reads it.
pub const MAX_NESTING: usize = 100;

/// The longest number a payload may hold, in characters. PostgreSQL's `numeric` (which `jsonb`
/// holds numbers in) takes at most 16,383 digits after the point, and no payload needs more
/// than a few dozen.
pub const MAX_NUMBER_CHARS: usize = 1000;

/// Why a JSON text breaks the payload rules; its message names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadFault {
    /// Arrays and objects nest deeper than [`MAX_NESTING`].
    #[error("the payload nests more than {MAX_NESTING} levels of arrays and objects")]
    TooDeep,
    /// A string holds NUL (`\u0000`), which PostgreSQL's `jsonb` cannot hold.
    #[error("the payload holds a NUL character (\\u0000)")]
    Nul,
    /// A string holds half of a UTF-16 surrogate pair (`"\ud800"`): no Unicode text holds it,
    /// so serde_json cannot read it back and PostgreSQL refuses it.
    #[error("the payload holds a lone UTF-16 surrogate ({0}): escape whole characters only")]
    LoneSurrogate(String),
    /// A number a 64-bit float cannot hold (`1e400`, or `1e-400`, which would read back as 0),
    /// or one longer than [`MAX_NUMBER_CHARS`].
    #[error("the payload holds a number out of range ({0}): numbers must fit a 64-bit float")]
    NumberOutOfRange(String),
}

/// Checks that `json` (valid JSON) keeps the payload rules: nested at most [`MAX_NESTING`]
/// levels, no NUL and no lone surrogate in a string (a key or a value), and every number within
/// a 64-bit float's range. One pass over its bytes; it allocates only to describe a fault.
///
/// ```
/// use cairn_journal::{PayloadFault, check_payload};
/// assert_eq!(check_payload(r#"{"a": [1, {"b": "[[[\ud83d\ude00"}]}"#), Ok(()));
/// assert_eq!(check_payload(r#"{"a": "x\u0000y"}"#), Err(PayloadFault::Nul));
/// assert!(check_payload(r#"{"a": "x\\u0000y"}"#).is_ok(), "an escaped backslash, then text");
/// assert!(matches!(check_payload(r#""\ud800""#), Err(PayloadFault::LoneSurrogate(_))));
/// assert!(matches!(check_payload("1e400"), Err(PayloadFault::NumberOutOfRange(_))));
/// ```
pub fn check_payload(json: &str) -> Result<(), PayloadFault> {
    let bytes = json.as_bytes();
    let (mut depth, mut in_string, mut i) = (0usize, false, 0);
    while let Some(&byte) = bytes.get(i) {
        i += 1;
        if in_string {
            match byte {
                b'\\' if bytes.get(i) == Some(&b'u') => i = unicode_escape(bytes, i - 1)?,
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(PayloadFault::TooDeep);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let end = bytes[i..]
                    .iter()
                    .position(|b| !matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
                    .map_or(bytes.len(), |n| i + n);
                number(&json[i - 1..end])?;
                i = end;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The `\uXXXX` escape at `at` (its backslash): where the text goes on after it (and after the
/// low half of a surrogate pair).
fn unicode_escape(bytes: &[u8], at: usize) -> Result<usize, PayloadFault> {
    let code = |at: usize| {
        bytes
            .get(at + 2..at + 6)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
    };
    let lone = |at: usize| {
        let end = (at + 6).min(bytes.len());
        PayloadFault::LoneSurrogate(String::from_utf8_lossy(&bytes[at..end]).into_owned())
    };
    match code(at) {
        Some(0) => Err(PayloadFault::Nul),
        Some(0xD800..=0xDBFF) => match (bytes.get(at + 6), bytes.get(at + 7), code(at + 6)) {
            (Some(b'\\'), Some(b'u'), Some(0xDC00..=0xDFFF)) => Ok(at + 12),
            _ => Err(lone(at)),
        },
        Some(0xDC00..=0xDFFF) => Err(lone(at)),
        _ => Ok(at + 6),
    }
}

/// A number token: within a 64-bit float's range, not a non-zero one that reads back as 0.
fn number(text: &str) -> Result<(), PayloadFault> {
    let out_of_range = || {
        let shown: String = text.chars().take(40).collect();
        PayloadFault::NumberOutOfRange(if shown.len() < text.len() { format!("{shown}…") } else { shown })
    };
    if text.len() > MAX_NUMBER_CHARS {
        return Err(out_of_range());
    }
    let value: f64 = text.parse().map_err(|_| out_of_range())?;
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    if value.is_infinite() || (value == 0.0 && mantissa.bytes().any(|b| matches!(b, b'1'..=b'9'))) {
        return Err(out_of_range());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{MAX_NESTING, PayloadFault, check_payload};

    #[test]
    fn nesting_counts_arrays_and_objects_not_strings() {
        let at = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(check_payload(&at(MAX_NESTING)), Ok(()));
        assert_eq!(check_payload(&at(MAX_NESTING + 1)), Err(PayloadFault::TooDeep));
        let quoted = format!("\"{}\"", "[".repeat(MAX_NESTING + 1));
        assert_eq!(check_payload(&quoted), Ok(()));
        assert_eq!(check_payload(r#"["\"[", {"k": "\\"}, [[]]]"#), Ok(()));
    }

    #[test]
    fn nul_is_found_in_keys_and_values_only_when_escaped_as_such() {
        for (json, nul) in [
            (r#"{"\u0000": 1}"#, true),
            (r#"["a", "\u0000"]"#, true),
            (r#""\\u0000""#, false),
            (r#""\\\u0000""#, true),
            (r#""\u00001""#, true),
            (r#""\u0001""#, false),
            (r#""u0000""#, false),
        ] {
            assert_eq!(check_payload(json) == Err(PayloadFault::Nul), nul, "{json}");
        }
    }

    #[test]
    fn surrogates_must_come_in_pairs() {
        for json in
            [r#""\ud800""#, r#"{"\udfff":1}"#, r#""\udc00""#, r#""\ud800x""#, r#""\ud800\u0041""#, r#""\ud800\ud800""#]
        {
            assert!(matches!(check_payload(json), Err(PayloadFault::LoneSurrogate(_))), "{json}");
        }
        for json in [r#""\ud83d\ude00""#, r#""\uD83D\uDE00""#, r#""\\ud800""#, r#""\u00e9\u4e2d""#, "\"\u{1F600}\""] {
            assert_eq!(check_payload(json), Ok(()), "{json}");
        }
    }

    #[test]
    fn numbers_must_fit_a_float() {
        for json in ["1e400", "-1e400", "1e200000", "[1, 2e-400]", r#"{"n": 1E309}"#] {
            assert!(matches!(check_payload(json), Err(PayloadFault::NumberOutOfRange(_))), "{json}");
        }
        let long = format!("1.{}", "0".repeat(20_000));
        assert!(matches!(check_payload(&long), Err(PayloadFault::NumberOutOfRange(_))));
        for json in ["0", "-0", "0.0e-400", "1e308", "1e-310", "-12.5E+3", "18446744073709551615", r#""1e400""#] {
            assert_eq!(check_payload(json), Ok(()), "{json}");
        }
    }
}
