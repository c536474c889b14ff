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
