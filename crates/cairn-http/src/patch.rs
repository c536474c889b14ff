//! JSON Patch (RFC 6902) between two snapshots, so that a live stream sends what changed rather
//! than the whole run again.
//!
//! The patch is made of `add`, `remove` and `replace` operations only. Objects are compared key by
//! key; arrays keep their common head and tail and compare the middle by position, so appending a
//! step to a long run, or a step changing phase, is a patch of that step alone. [`apply`] is
//! what a Rust consumer of a live stream needs; the dashboard does the same in JavaScript.

use serde_json::{Value, json};

/// The operations that turn `from` into `to` (none when they are equal).
pub fn diff(from: &Value, to: &Value) -> Vec<Value> {
    let mut ops = Vec::new();
    walk(&mut String::new(), from, to, &mut ops);
    ops
}

fn walk(path: &mut String, from: &Value, to: &Value, ops: &mut Vec<Value>) {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, old) in a {
                let len = push(path, key);
                match b.get(key) {
                    Some(new) => walk(path, old, new, ops),
                    None => ops.push(json!({ "op": "remove", "path": path })),
                }
                path.truncate(len);
            }
            for (key, new) in b.iter().filter(|(key, _)| !a.contains_key(*key)) {
                let len = push(path, key);
                ops.push(json!({ "op": "add", "path": path, "value": new }));
                path.truncate(len);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let shorter = a.len().min(b.len());
            let head = (0..shorter).take_while(|&i| a[i] == b[i]).count();
            let tail = (0..shorter - head).take_while(|&i| a[a.len() - 1 - i] == b[b.len() - 1 - i]).count();
            let (a, b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
            let paired = a.len().min(b.len());
            for (i, (old, new)) in a.iter().zip(b).enumerate() {
                let len = push(path, &(head + i).to_string());
                walk(path, old, new, ops);
                path.truncate(len);
            }
            let at = head + paired;
            let len = push(path, &at.to_string());
            // Each removal shifts what follows down, so the next one is at the same index.
            ops.extend((paired..a.len()).map(|_| json!({ "op": "remove", "path": path })));
            path.truncate(len);
            for (i, new) in b[paired..].iter().enumerate() {
                let len = push(path, &(at + i).to_string());
                ops.push(json!({ "op": "add", "path": path, "value": new }));
                path.truncate(len);
            }
        }
        _ if from == to => {}
        _ => ops.push(json!({ "op": "replace", "path": path, "value": to })),
    }
}

/// Appends `/key` to `path`, escaped as a JSON Pointer token, and returns the length before.
fn push(path: &mut String, key: &str) -> usize {
    let len = path.len();
    path.push('/');
    for c in key.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
    len
}

/// Why a patch does not apply: its operation, path and the reason.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} at {path:?}: {reason}")]
pub struct PatchError {
    op: String,
    path: String,
    reason: &'static str,
}

/// Applies `ops` (a JSON Patch of `add`, `remove` and `replace` operations, as the live streams
/// send them) to `value`. On an error, the operations before the failing one stay applied.
///
/// ```
/// use serde_json::json;
/// let mut snapshot = json!({"run": {"status": "running"}, "steps": []});
/// let patch = [
///     json!({"op": "replace", "path": "/run/status", "value": "completed"}),
///     json!({"op": "add", "path": "/steps/0", "value": {"path": "greet"}}),
/// ];
/// cairn_http::patch::apply(&mut snapshot, &patch)?;
/// assert_eq!(snapshot, json!({"run": {"status": "completed"}, "steps": [{"path": "greet"}]}));
/// # Ok::<(), cairn_http::patch::PatchError>(())
/// ```
pub fn apply(value: &mut Value, ops: &[Value]) -> Result<(), PatchError> {
    for op in ops {
        let kind = op["op"].as_str().unwrap_or_default();
        let path = op["path"].as_str().unwrap_or_default();
        let error = |reason| PatchError { op: kind.to_owned(), path: path.to_owned(), reason };
        if !path.is_empty() && !path.starts_with('/') {
            return Err(error("the path is not a JSON Pointer"));
        }
        let tokens: Vec<String> = path.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect();
        let Some((last, parents)) = tokens.split_last() else {
            match kind {
                "add" | "replace" => *value = op["value"].clone(),
                _ => return Err(error("only add and replace apply to the whole value")),
            }
            continue;
        };
        let mut target = &mut *value;
        for token in parents {
            target = match target {
                Value::Object(map) => map.get_mut(token),
                Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
                _ => None,
            }
            .ok_or_else(|| error("no such parent"))?;
        }
        match (kind, target) {
            ("remove", Value::Object(map)) => drop(map.remove(last).ok_or_else(|| error("no such key"))?),
            ("add" | "replace", Value::Object(map)) => drop(map.insert(last.clone(), op["value"].clone())),
            (_, Value::Array(items)) => {
                let i = last.parse::<usize>().map_err(|_| error("not an index"))?;
                match kind {
                    "remove" if i < items.len() => drop(items.remove(i)),
                    "add" if i <= items.len() => items.insert(i, op["value"].clone()),
                    "replace" if i < items.len() => items[i] = op["value"].clone(),
                    "add" | "remove" | "replace" => return Err(error("index out of range")),
                    _ => return Err(error("not an operation this applies")),
                }
            }
            _ => return Err(error("not an operation this applies, or the parent is not a container")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Map;

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0..5i64).prop_map(Value::from),
            "[a-c/~]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-c/~]{0,2}", inner, 0..5)
                    .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    proptest! {
        #[test]
        fn a_patch_turns_the_old_snapshot_into_the_new(from in any_json(), to in any_json()) {
            let ops = diff(&from, &to);
            let mut patched = from.clone();
            apply(&mut patched, &ops).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(patched, to);
            prop_assert!(diff(&from, &from).is_empty());
        }
    }

    #[test]
    fn an_appended_step_or_a_changed_phase_is_a_patch_of_that_step_alone() {
        let step = |n: u32, phase: &str| json!({ "path": format!("s{n}"), "phase": phase });
        let before =
            json!({ "steps": (0..1000).map(|n| step(n, "done")).chain([step(1000, "running")]).collect::<Vec<_>>() });
        let after = json!({ "steps": (0..1000).map(|n| step(n, "done")).chain([step(1000, "done"), step(1001, "running")]).collect::<Vec<_>>() });
        assert_eq!(
            diff(&before, &after),
            [
                json!({ "op": "replace", "path": "/steps/1000/phase", "value": "done" }),
                json!({ "op": "add", "path": "/steps/1001", "value": step(1001, "running") }),
            ]
        );
        let newest_first = json!(["c", "b", "a"]);
        assert_eq!(diff(&json!(["b", "a"]), &newest_first), [json!({ "op": "add", "path": "/0", "value": "c" })]);
        assert_eq!(diff(&json!({ "a/b~": 1 }), &json!({})), [json!({ "op": "remove", "path": "/a~1b~0" })]);
        assert_eq!(diff(&json!(1), &json!("x")), [json!({ "op": "replace", "path": "", "value": "x" })]);
    }
}
