use serde_json::Value;

/// JSON containment, as PostgreSQL's `@>`: does `haystack` contain `needle`?
///
/// Objects contain an object when every key of the needle is present and contains the needle's
/// value; arrays contain an array when every element of the needle is contained in some element
/// of the haystack; scalars contain only an equal scalar.
///
/// ```
/// use cairn_journal::json_contains;
/// use serde_json::json;
/// assert!(json_contains(&json!({"user": 42, "ok": true}), &json!({"user": 42})));
/// assert!(!json_contains(&json!({"user": 41}), &json!({"user": 42})));
/// assert!(json_contains(&json!({"tags": ["a", "b"]}), &json!({"tags": ["b"]})));
/// ```
pub fn json_contains(haystack: &Value, needle: &Value) -> bool {
    match (haystack, needle) {
        (Value::Object(h), Value::Object(n)) => {
            n.iter().all(|(k, nv)| h.get(k).is_some_and(|hv| json_contains(hv, nv)))
        }
        (Value::Array(h), Value::Array(n)) => n.iter().all(|nv| h.iter().any(|hv| json_contains(hv, nv))),
        (Value::Number(h), Value::Number(n)) => h.as_f64() == n.as_f64(),
        (h, n) => h == n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containment_cases() {
        assert!(json_contains(&json!({"a": {"b": 1, "c": 2}}), &json!({"a": {"b": 1}})));
        assert!(json_contains(&json!({"a": 1}), &json!({})));
        assert!(!json_contains(&json!({"a": 1}), &json!({"b": 1})));
        assert!(!json_contains(&json!([1, 2]), &json!([3])));
        assert!(json_contains(&json!([[1, 2], 3]), &json!([[2]])));
        assert!(json_contains(&json!("x"), &json!("x")));
        assert!(!json_contains(&json!({"a": "1"}), &json!({"a": 1})));
        assert!(json_contains(&json!({"n": 1.0}), &json!({"n": 1})));
    }
}

/// The most levels of arrays and objects a payload may nest: every payload is read back with
/// serde_json, whose recursion limit (128) a deeper one would break only when a run reads it.
pub const MAX_NESTING: usize = 100;

/// What the payload rules look at in a JSON text: how deeply its arrays and objects nest, and
/// whether a string holds NUL (`\u0000`, which PostgreSQL's `jsonb` cannot hold, so no store
/// takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadShape {
    /// `1` for `[1, 2]`, `0` for a scalar.
    pub depth: usize,
    /// Whether a string holds `\u0000`.
    pub nul: bool,
}

/// The [`PayloadShape`] of `json` (valid JSON): one pass over its bytes.
///
/// ```
/// use cairn_journal::payload_shape;
/// assert_eq!(payload_shape(r#"{"a": [1, {"b": "[[["}]}"#).depth, 3);
/// assert_eq!(payload_shape("42").depth, 0);
/// assert!(payload_shape(r#"{"a": "x\u0000y"}"#).nul);
/// assert!(!payload_shape(r#"{"a": "x\\u0000y"}"#).nul, "an escaped backslash, then text");
/// ```
pub fn payload_shape(json: &str) -> PayloadShape {
    let bytes = json.as_bytes();
    let (mut depth, mut deepest, mut in_string, mut nul, mut i) = (0usize, 0usize, false, false, 0);
    while let Some(&byte) = bytes.get(i) {
        i += 1;
        if in_string {
            match byte {
                b'\\' => {
                    nul |= bytes.get(i..i + 5) == Some(b"u0000");
                    i += 1;
                }
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    PayloadShape { depth: deepest, nul }
}

#[cfg(test)]
mod depth_tests {
    use super::payload_shape;

    #[test]
    fn strings_and_escapes_do_not_count() {
        assert_eq!(payload_shape(r#"["\"[", {"k": "\\"}, [[]]]"#).depth, 3);
        let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert_eq!(payload_shape(&deep).depth, 128);
        assert_eq!(payload_shape(r#""[{""#).depth, 0);
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
            assert_eq!(payload_shape(json).nul, nul, "{json}");
        }
    }
}
