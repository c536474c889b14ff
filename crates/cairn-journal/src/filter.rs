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

/// How deeply the arrays and objects of `json` (valid JSON) nest: `1` for `[1, 2]`, `0` for a
/// scalar. One pass over the bytes, strings skipped.
///
/// ```
/// use cairn_journal::nesting_depth;
/// assert_eq!(nesting_depth(r#"{"a": [1, {"b": "[[["}]}"#), 3);
/// assert_eq!(nesting_depth("42"), 0);
/// ```
pub fn nesting_depth(json: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in json.bytes() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
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
    deepest
}

#[cfg(test)]
mod depth_tests {
    use super::nesting_depth;

    #[test]
    fn strings_and_escapes_do_not_count() {
        assert_eq!(nesting_depth(r#"["\"[", {"k": "\\"}, [[]]]"#), 3);
        let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert_eq!(nesting_depth(&deep), 128);
        assert_eq!(nesting_depth(r#""[{""#), 0);
    }
}
